// PUT /api: Megatron's text generation API. All prompts of a request join the running batch
// and the answer comes when the last one finishes.
#include "serve/megatron_request.h"
#include "serve/responses.h"
#include "serve/service.h"

namespace trident::serve {

void handle_megatron(Service& s, const HttpRequest& req, HttpResponse& res) {
  MegatronRequest r;
  std::vector<generation::GenerationRequest> seqs;
  ApiError e = parse_megatron_request(req.body, &r);
  if (e.ok()) e = megatron_sequences(r, s.tok, s.limits, s.fresh_seed(), &seqs);
  if (e.ok()) e = s.check_with_model(seqs);
  if (!e.ok()) return send_error(res, e);
  auto job = std::make_shared<Job>(std::move(seqs), false);
  if (!(e = s.engine.submit(job)).ok()) return send_error(res, e);
  std::vector<generation::GenerationResult> results;
  if (!job->wait(&results, &e)) return send_error(res, e);
  send_json(res, megatron_response(results, s.tok, r.logprobs));
}

}  // namespace trident::serve
