// POST /v1/completions: OpenAI's legacy completions API, whole or streamed as server-sent
// events. A streamed request whose client goes away is cancelled in the generator.
#include <chrono>
#include <random>

#include "serve/completion_request.h"
#include "serve/responses.h"
#include "serve/service.h"

namespace trident::serve {

namespace {

CompletionMeta make_meta(const Service& s, const CompletionRequest& r) {
  static thread_local std::mt19937_64 ids{std::random_device{}()};
  char id[32];
  std::snprintf(id, sizeof id, "cmpl-%016llx", (unsigned long long)ids());
  CompletionMeta m;
  m.id = id;
  m.created = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  m.model = s.model_name;
  m.logprobs = r.logprobs.has_value();
  return m;
}

ApiError model_not_found(const std::string& asked, const std::string& served) {
  ApiError e;
  e.status = 404;
  e.param = "model";
  e.code = "model_not_found";
  e.message = "model '" + asked + "' is not served here (this server serves '" + served + "')";
  return e;
}

// The stream's state between calls of the content provider.
struct Stream {
  std::shared_ptr<Job> job;
  CompletionMeta meta;
  std::vector<StreamCursor> cursors;  // per choice
};

// One call: writes the events that arrived (waiting up to 1 s for one); a comment line when
// none did, so a client that went away is noticed while its request still waits for a slot.
StreamStep write_events(Stream& st, const tokenizer::Tokenizer& tok, const ChunkWriter& put) {
  std::vector<SequenceEvent> events;
  ApiError error;
  bool more = st.job->next_events(std::chrono::milliseconds(1000), &events, &error);
  for (const SequenceEvent& e : events)
    if (!put(completion_chunk(st.meta, e.sequence, e.event, tok, &st.cursors[e.sequence])))
      return StreamStep::kFailed;
  if (!error.ok() && !put("data: " + error_json(error) + "\n\n")) return StreamStep::kFailed;
  if (!more) return put(kStreamDone) ? StreamStep::kDone : StreamStep::kFailed;
  if (events.empty() && !put(": waiting\n\n")) return StreamStep::kFailed;
  return StreamStep::kMore;
}

void stream_response(Service& s, std::shared_ptr<Job> job, CompletionMeta meta, HttpResponse& res) {
  auto st = std::make_shared<Stream>();
  st->job = job;
  st->meta = std::move(meta);
  for (const auto& seq : job->sequences())
    st->cursors.push_back({chars_started(s.tok.decode_bytes(seq.prompt))});
  res.headers.emplace_back("Cache-Control", "no-cache");
  res.content_type = "text/event-stream";
  res.stream = [st, &s](const ChunkWriter& put) { return write_events(*st, s.tok, put); };
  res.on_stream_end = [st, &s](bool completed) {
    if (completed) return;
    st->job->cancel();  // the client went away (or stopped reading)
    s.engine.notify();
  };
}

}  // namespace

void handle_completion(Service& s, const HttpRequest& req, HttpResponse& res) {
  CompletionRequest r;
  std::vector<generation::GenerationRequest> seqs;
  ApiError e = parse_completion_request(req.body, &r);
  if (e.ok() && !r.model.empty() && r.model != s.model_name)
    e = model_not_found(r.model, s.model_name);
  if (e.ok()) e = completion_sequences(r, s.tok, s.limits, s.fresh_seed(), &seqs);
  if (e.ok()) e = s.check_with_model(seqs);
  if (!e.ok()) return send_error(res, e);
  auto job = std::make_shared<Job>(std::move(seqs), r.stream);
  if (!(e = s.engine.submit(job)).ok()) return send_error(res, e);
  CompletionMeta meta = make_meta(s, r);
  if (r.stream) return stream_response(s, job, std::move(meta), res);
  std::vector<generation::GenerationResult> results;
  if (!job->wait(&results, &e)) return send_error(res, e);
  send_json(res, completion_response(meta, results, s.tok, (int)r.n));
}

}  // namespace trident::serve
