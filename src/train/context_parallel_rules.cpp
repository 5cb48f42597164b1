#include "train/context_parallel_rules.h"

#include <algorithm>

#include "train/training_config.h"

namespace trident::train {

namespace {

std::string cp_text(long v) {
  return std::to_string(v);
}

// All-to-all (DeepSpeed-Ulysses) gives each cp rank heads / c of this tensor rank's query
// heads and key/value heads.
void check_a2a_heads(const TrainingConfig& c, std::vector<std::string>& errors) {
  const ModelConfig& m = c.model;
  const int t = c.tensor_model_parallel_size, cp = c.context_parallel_size;
  const int heads = m.num_attention_heads / t, kv = std::max(1, m.query_groups() / t);
  if (heads % cp || kv % cp)
    errors.push_back("--cp-comm-type a2a needs the attention heads (" + cp_text(heads) +
                     ") and key/value heads (" + cp_text(kv) + ") of each tensor-parallel rank " +
                     "divisible by --context-parallel-size (" + cp_text(cp) + ")");
}

// What c > 1 does not build (yet), by name.
void refuse_unbuilt(const TrainingConfig& c, std::vector<std::string>& errors) {
  const std::string cp = "--context-parallel-size " + cp_text(c.context_parallel_size) + ": ";
  if (c.model.moe.enabled())
    errors.push_back(cp +
                     "mixture-of-experts models (--num-experts) are not built with context "
                     "parallelism yet");
  if (c.model.lora.enabled())
    errors.push_back(cp + "LoRA (--lora-rank) is not built with context parallelism yet");
}

}  // namespace

void check_context_parallel(const TrainingConfig& c, std::vector<std::string>& errors) {
  const int cp = c.context_parallel_size, seq = c.model.seq_length;
  if (cp < 1) {
    errors.push_back("--context-parallel-size must be >= 1");
    return;
  }
  const std::string& type = c.cp_comm_type;
  if (type != "p2p" && type != "a2a" && type != "allgather") {
    errors.push_back("--cp-comm-type must be p2p, a2a or allgather (got '" + type + "')");
    return;
  }
  if (cp == 1) return;
  // Cp rank i holds chunks i and 2c - 1 - i of every sequence (the load-balanced split).
  if (seq % (2 * cp))
    errors.push_back("--seq-length (" + cp_text(seq) + ") must be divisible by 2 x " +
                     "--context-parallel-size (2 x " + cp_text(cp) + "): each sequence is split " +
                     "into 2c equal chunks");
  if (type == "a2a" && c.tensor_model_parallel_size > 0) check_a2a_heads(c, errors);
  refuse_unbuilt(c, errors);
}

}  // namespace trident::train
