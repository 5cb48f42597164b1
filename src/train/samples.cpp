#include "train/samples.h"

#include <ostream>
#include <sstream>

#include "distributed/process_groups.h"
#include "generation/generator.h"
#include "tokenizer/build_tokenizer.h"

namespace trident::train {

namespace {

// One continuation of the prompt by a one-process model holding `weights`.
std::string continuation(const TrainingConfig& c, const Parameters& weights, long iteration) {
  const std::unique_ptr<tokenizer::Tokenizer> tok = tokenizer::build_tokenizer(c.tokenizer);
  generation::GenerationRequest request;
  request.prompt = tok->encode(c.sample_prompt);
  // A prompt longer than the positions leave room for keeps its last tokens.
  const size_t room = (size_t)(c.model.max_positions() - c.sample_tokens);
  if (request.prompt.size() > room)
    request.prompt.erase(request.prompt.begin(), request.prompt.end() - (long)room);
  request.tokens_to_generate = c.sample_tokens;
  // The demo's sampling (top-p 0.9, temperature 0.8), drawn anew at each sample.
  request.sampling.temperature = 0.8f, request.sampling.top_p = 0.9f;
  request.sampling.seed = c.seed + (std::uint64_t)iteration;
  generation::InferenceOptions o;
  o.max_batch = 1;  // decode panels on, as trident generate runs: the same sample
  o.max_sequence_length = (int)request.prompt.size() + c.sample_tokens;
  o.model = &c.model, o.weights = &weights;
  distributed::ProcessGrid grid(1, 1, 1);
  distributed::ProcessGroups groups = distributed::make_single_rank_groups();
  engine::RankContext one{0, &grid, &groups, {"local"}};
  std::ostringstream quiet;
  generation::InferenceModel model(o, one, quiet);
  generation::Generator generator(model, tok.get());
  const long id = generator.add(request);
  generation::GenerationResult result;
  while (!generator.take_result(id, &result)) generator.step();
  return result.text;
}

}  // namespace

void print_sample(TrainingRun& run, long iteration) {
  const TrainingConfig& c = run.config;
  run.model.finish_param_gather();
  run.model.gather_all_values();  // sharded weights: for this moment only
  const Parameters whole =
      engine::gather_rank_model(run.model, c.rank_layout(), *run.rank.groups->tensor,
                                *run.rank.groups->pipeline, run.rank.groups->expert.get());
  run.model.release_gathered_values();
  if (run.rank.world_rank != 0) return;
  run.log << " sample at iteration " << iteration << ": " << c.sample_prompt
          << continuation(c, whole, iteration) << "\n";
}

}  // namespace trident::train
