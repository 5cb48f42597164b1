#pragma once
// One rank's share of a model for generation: its pipeline stage of the model (tensor-parallel
// shards, no gradients or optimizer), a KV cache of max_batch slots x max_sequence positions
// planned up front (bf16 in bf16 runs), and the step that appends tokens to slots.
//
// Each data-parallel replica (the t x p ranks of the `model` group) runs on its own: its
// (tensor 0, pipeline 0) rank coordinates, step() broadcasts what to run over the replica's
// ranks, the stages run in turn (each sends its new tokens' hidden states to the next), and
// the last stage gathers the full-vocabulary logits it was asked for and sends them to the
// coordinator. The other ranks sit in follow() until it calls stop(). With d = 1 the
// coordinator is world rank 0; with d > 1 each replica serves whatever its coordinator is
// given (eval gives each a slice of the requests).
#include <memory>
#include <string>
#include <vector>

#include "engine/rank_context.h"
#include "engine/rank_layout.h"
#include "engine/rank_model.h"
#include "generation/kv_cache.h"
#include "model/memory_plan.h"

namespace trident::generation {

struct InferenceOptions {
  int max_batch = 8;            // KV-cache slots: requests running at once (--max-batch)
  int max_sequence_length = 0;  // positions per slot; 0: the model's n_positions
  bool bf16 = false;            // bf16 products on the weights' bf16 copy, bf16 KV cache
  // Prompt tokens prefilled per step on top of one token per running request: bounds the
  // step's activations and logits; longer prompts continue over several steps.
  int prefill_chunk = 256;
  // Logit rows a step may ask for in all (0: every token of a step). Eval feeds long steps
  // but wants logits only for continuation tokens: this bounds the [rows, vocab] buffers.
  int max_logit_rows = 0;
  // Keep the linear weights a second time in the decode products' panel layout
  // (kernels/skinny_linear.h): twice the weights' memory, for decode steps that run several
  // sequences near the cost of one. Eval, which decodes little, turns it off.
  bool decode_panels = true;
  int tensor_model_parallel_size = 1;
  int pipeline_model_parallel_size = 1;
  // Where the weights come from: a checkpoint directory (its latest) or a HF GPT-2 directory,
  // or, in-process (training's samples), the model and its one-process weights (t = p = 1).
  std::string load, load_hf;
  const ModelConfig* model = nullptr;
  const Parameters* weights = nullptr;
};

// Part of a step: `tokens` appended to `slot` at positions [start, start + size), and the
// logits of its last `logit_rows` tokens wanted (0: none, e.g. a prompt chunk).
struct Segment {
  int slot = 0;
  int start = 0;
  std::vector<int> tokens;
  int logit_rows = 1;
};

class InferenceModel {
 public:
  // Collective over the world. Builds the stage, loads the weights (c.load or c.load_hf),
  // plans and allocates the cache. Throws std::runtime_error subclasses naming the problem.
  InferenceModel(const InferenceOptions& o, const engine::RankContext& rank, std::ostream& log);
  ~InferenceModel();

  const ModelConfig& config() const { return layout_.model; }
  const InferenceOptions& options() const { return options_; }
  int max_batch() const { return options_.max_batch; }
  int max_sequence() const { return options_.max_sequence_length; }
  int max_step_tokens() const { return max_step_tokens_; }
  int max_logit_rows() const { return max_logit_rows_; }
  int vocab() const { return layout_.model.vocab_size; }
  bool coordinator() const { return rank_.groups->model->rank() == 0; }
  // What this rank holds (weights, bf16 copy, KV cache, step activations), printable.
  const MemoryPlan& memory_plan() const { return plan_; }

  // Coordinator: one step over the segments (distinct slots; total tokens <= max_step_tokens;
  // total logit_rows <= max_logit_rows; start + size <= max_sequence). Returns [sum of logit_rows,
  // vocab] logits, segment order, valid until the next call.
  const float* step(const std::vector<Segment>& segments);
  // Every other rank: run the coordinator's steps until it calls stop().
  void follow();
  // Coordinator: release the followers (also done by the destructor).
  void stop();

 private:
  void plan_buffers();
  // Every rank: the step through this stage (inference_step.cpp).
  void run(const std::vector<Segment>& segments);
  void embed(const std::vector<Segment>& segments, float* out);
  void output_logits(const std::vector<Segment>& segments, const float* hidden);
  // Rank 0's segments to every rank; false when rank 0 said stop.
  bool broadcast_segments(std::vector<Segment>* segments);

  InferenceOptions options_;
  engine::RankContext rank_;
  engine::RankLayout layout_;  // the model and its layout, as the rank model is built from
  engine::RankModel model_;
  KvCache cache_;
  MemoryPlan plan_;
  int max_step_tokens_ = 0;
  int max_logit_rows_ = 0;
  bool stopped_ = false;
  struct Buffers;
  std::unique_ptr<Buffers> buffers_;
};

}  // namespace trident::generation
