#include "context_parallel/rules.h"

#include <algorithm>

namespace trident::context_parallel {

std::string cp_comm_type_name(CpCommType type) {
  switch (type) {
    case CpCommType::kP2p:
      return "p2p";
    case CpCommType::kA2a:
      return "a2a";
    case CpCommType::kAllGather:
      return "allgather";
  }
  return "?";
}

std::optional<CpCommType> parse_cp_comm_type(const std::string& name) {
  for (CpCommType t : {CpCommType::kP2p, CpCommType::kA2a, CpCommType::kAllGather})
    if (cp_comm_type_name(t) == name) return t;
  return std::nullopt;
}

namespace {

// All-to-all (DeepSpeed-Ulysses) gives each cp rank heads / c of this tensor rank's query
// heads and key/value heads.
void check_a2a_heads(const ModelConfig& m, int tensor, int cp, std::vector<std::string>& errors) {
  const int heads = m.num_attention_heads / tensor, kv = std::max(1, m.query_groups() / tensor);
  if (heads % cp || kv % cp)
    errors.push_back("--cp-comm-type a2a needs the attention heads (" + std::to_string(heads) +
                     ") and key/value heads (" + std::to_string(kv) +
                     ") of each tensor-parallel rank divisible by --context-parallel-size (" +
                     std::to_string(cp) + ")");
}

// What c > 1 does not build (yet), by name.
void refuse_unbuilt(const ModelConfig& m, int cp, std::vector<std::string>& errors) {
  const std::string flag = "--context-parallel-size " + std::to_string(cp) + ": ";
  if (m.moe.enabled())
    errors.push_back(flag +
                     "mixture-of-experts models (--num-experts) are not built with context "
                     "parallelism yet");
  if (m.lora.enabled())
    errors.push_back(flag + "LoRA (--lora-rank) is not built with context parallelism yet");
}

}  // namespace

void check_context_parallel(const ModelConfig& m, int tensor, int cp, CpCommType type,
                            std::vector<std::string>& errors) {
  if (cp < 1) {
    errors.push_back("--context-parallel-size must be >= 1");
    return;
  }
  if (cp == 1) return;
  // Cp rank i holds chunks i and 2c - 1 - i of every sequence (the load-balanced split).
  const int seq = m.seq_length;
  if (seq % (2 * cp))
    errors.push_back("--seq-length (" + std::to_string(seq) + ") must be divisible by 2 x " +
                     "--context-parallel-size (2 x " + std::to_string(cp) +
                     "): each sequence is split into 2c equal chunks");
  if (type == CpCommType::kA2a && tensor > 0) check_a2a_heads(m, tensor, cp, errors);
  refuse_unbuilt(m, cp, errors);
}

}  // namespace trident::context_parallel
