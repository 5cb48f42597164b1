// POST /v1/chat/completions: OpenAI's chat completions API. The messages are rendered with
// the chat template (and its generation prompt) into one prompt; from there the request is
// a completion, served by the same engine, sampling, stop strings and streaming, and only
// its answer is shaped as a chat completion.
#include "serve/chat_request.h"
#include "serve/chat_responses.h"
#include "serve/openai_stream.h"

namespace trident::serve {

namespace {

// The conversation as the template writes it, ending in the assistant's turn opened.
ApiError render(const Service& s, const ChatRequest& r, std::string* text) {
  ApiError e;
  if (!s.chat.chat_template) {
    e = bad_request("messages", s.chat.missing);
    e.code = "chat_template_missing";
    return e;
  }
  chat_template::ChatOptions options;
  options.add_generation_prompt = true;
  options.extra = s.chat.kwargs;
  try {
    *text = s.chat.chat_template->render(r.messages, options);
  } catch (const chat_template::TemplateError& ex) {  // raise_exception's, say
    e = bad_request("messages",
                    std::string("the chat template refused the messages: ") + ex.what());
    e.code = "chat_template_error";
  }
  return e;
}

ChunkFormat chat_format(const Service& s, CompletionMeta meta, const ChatRequest& r,
                        std::int64_t prompt_tokens) {
  auto st = std::make_shared<ChatStream>();
  st->include_usage = r.include_usage;
  st->prompt_tokens = prompt_tokens;
  auto m = std::make_shared<const CompletionMeta>(std::move(meta));
  ChunkFormat f;
  f.event = [&s, st, m](const SequenceEvent& e) {
    return chat_chunks(*m, e.event, s.tok, st.get());
  };
  if (r.include_usage) f.end = [st, m] { return chat_usage_chunk(*m, *st); };
  return f;
}

}  // namespace

void handle_chat_completion(Service& s, const HttpRequest& req, HttpResponse& res) {
  ChatRequest r;
  std::string text;
  std::vector<generation::GenerationRequest> seqs(1);
  ApiError e = parse_chat_request(req.body, &r);
  if (e.ok()) e = check_model(s, r.options.model);
  if (e.ok()) e = render(s, r, &text);
  if (e.ok()) e = chat_sequence(r, text, s.tok, s.limits, s.fresh_seed(), &seqs[0]);
  if (e.ok()) e = s.check_with_model(seqs);
  if (!e.ok()) return send_error(res, e);
  const std::int64_t prompt_tokens = (std::int64_t)seqs[0].prompt.size();
  auto job = std::make_shared<Job>(std::move(seqs), r.options.stream);
  if (!(e = s.engine.submit(job)).ok()) return send_error(res, e);
  CompletionMeta meta = new_meta(s, "chatcmpl", r.top_logprobs.has_value());
  if (r.options.stream)
    return stream_job(s, job, chat_format(s, std::move(meta), r, prompt_tokens), res);
  std::vector<generation::GenerationResult> results;
  if (!job->wait(&results, &e)) return send_error(res, e);
  send_json(res, chat_response(meta, results[0], s.tok));
}

}  // namespace trident::serve
