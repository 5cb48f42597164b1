// POST /v1/completions: OpenAI's legacy completions API, whole or streamed as server-sent
// events. A streamed request whose client goes away is cancelled in the generator.
#include "serve/completion_request.h"
#include "serve/openai_stream.h"

namespace trident::serve {

namespace {

// Each choice's events in turn, with its character offset (text_offset) carried between them.
ChunkFormat completion_format(const Service& s, const Job& job, CompletionMeta meta) {
  auto cursors = std::make_shared<std::vector<StreamCursor>>();
  for (const auto& seq : job.sequences())
    cursors->push_back({chars_started(s.tok.decode_bytes(seq.prompt))});
  ChunkFormat f;
  f.event = [&s, cursors, meta = std::move(meta)](const SequenceEvent& e) {
    return completion_chunk(meta, e.sequence, e.event, s.tok, &(*cursors)[e.sequence]);
  };
  return f;
}

}  // namespace

void handle_completion(Service& s, const HttpRequest& req, HttpResponse& res) {
  CompletionRequest r;
  std::vector<generation::GenerationRequest> seqs;
  ApiError e = parse_completion_request(req.body, &r);
  if (e.ok()) e = check_model(s, r.model);
  if (e.ok()) e = completion_sequences(r, s.tok, s.limits, s.fresh_seed(), &seqs);
  if (e.ok()) e = s.check_with_model(seqs);
  if (!e.ok()) return send_error(res, e);
  auto job = std::make_shared<Job>(std::move(seqs), r.stream);
  if (!(e = s.engine.submit(job)).ok()) return send_error(res, e);
  CompletionMeta meta = new_meta(s, "cmpl", r.logprobs.has_value());
  if (r.stream) return stream_job(s, job, completion_format(s, *job, std::move(meta)), res);
  std::vector<generation::GenerationResult> results;
  if (!job->wait(&results, &e)) return send_error(res, e);
  send_json(res, completion_response(meta, results, s.tok, (int)r.n));
}

}  // namespace trident::serve
