#pragma once
// Where every parameter lives: its global shape, which slice this rank holds, and its
// offset in its flat buffer (a chunk's dense buffer, or under expert parallelism its expert
// buffer: ExpertSlice). A pure function of the config, printable.
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "config/model_config.h"

namespace trident {

enum class InitKind { kNormal, kScaledNormal, kZeros, kOnes };

// How the global tensor is split over the tensor-parallel group. The split dimension is
// seen as `stride` equal blocks (3 for fused q|k|v), each cut into `parts` pieces;
// rank r holds piece r of every block (Megatron's partition_stride).
struct ShardSpec {
  int dim = -1;  // -1: replicated on every rank
  int stride = 1;
  int parts = 1;
  int rank = 0;
};

struct ParamSpec {
  std::string name;
  std::vector<long> global_shape;
  std::vector<long> local_shape;
  ShardSpec shard;
  long offset = 0;  // into the flat buffer, in floats
  bool weight_decay = false;
  InitKind init = InitKind::kNormal;
  // False for the last pipeline stage's copy of the tied word embedding: the first stage
  // owns it for the gradient norm and for export.
  bool owned = true;

  long numel() const;
  // Global flat index of local element i (row-major, up to 2-D).
  long global_index(long local_index) const;
  // How many local elements from local_index on have consecutive global indices (the rest
  // of a row block of a row shard, of a column block of a column shard, or of the tensor).
  long contiguous_run(long local_index) const;
};

struct TensorParallelRank {
  int rank = 0;
  int size = 1;
};

// Which part of the model a pipeline chunk holds (Megatron's pre_process/post_process).
struct ChunkPlacement {
  int first_layer = 0;
  int num_layers = -1;       // -1: all layers from first_layer
  bool pre_process = true;   // embedding (virtual stage 0)
  bool post_process = true;  // final LayerNorm, output layer, loss (last virtual stage)
};

// Which experts of the MoE layers a layout lists (issue 32). Expert-parallel training
// (EP > 1) keeps each rank's E/EP experts in a buffer of their own (GPTModel::
// expert_parameters), reduced over the expert-data-parallel group, as Megatron-Core does: the
// chunk's dense layout then lists none of them (kNone) and its expert layout only experts
// [first, first + count) of every MoE layer of the chunk, and nothing else (kOnly). Everything
// else (one process, generation, export, a checkpoint's files) lists all E inline.
struct ExpertSlice {
  enum class Kind { kInline, kNone, kOnly };
  Kind kind = Kind::kInline;
  int first = 0, count = 0;
};
// Whether a chunk of a model trained with `expert_parallel` ranks per expert group keeps its
// experts apart: MoE and EP > 1.
bool splits_experts(const ModelConfig& config, int expert_parallel);
// The dense buffer's slice (kNone when split, else kInline) and the expert buffer's of
// expert-parallel rank `expert_rank`: its E/EP experts.
ExpertSlice dense_expert_slice(const ModelConfig& config, int expert_parallel);
ExpertSlice expert_buffer_slice(const ModelConfig& config, int expert_parallel, int expert_rank);
// The tensor-parallel rank the expert buffer's experts are split by: expert tensor-parallel
// rank tp.rank % ETP of ETP (--expert-tensor-parallel-size, dividing t; 0: t, the tensor
// rank itself). At ETP = 1 every expert is whole ({0, 1}), drawn as the tensor shards are
// (the initial values are keyed by the global element), so every layout gets one model.
TensorParallelRank expert_tensor_rank(TensorParallelRank tp, int expert_tensor_parallel);

class ParameterLayout {
 public:
  ParameterLayout(const ModelConfig& config, TensorParallelRank tp, ChunkPlacement chunk = {},
                  ExpertSlice experts = {});
  // The chunk's LoRA adapters (config.lora), their own buffer's layout: for each targeted
  // linear of each layer layers.L.<linear>.lora_A.weight [R, in] and lora_B.weight [out, R],
  // split over the tensor group with their base (config/lora_config.h): a column-parallel
  // linear's A is replicated and its B split by rows as the base; a row-parallel one's A is
  // split by columns as the base and its B replicated. Grouped-query attention's fused
  // projection has one A and the B of linear_q and of linear_kv, adjacent.
  static ParameterLayout lora_adapters(const ModelConfig& config, TensorParallelRank tp,
                                       ChunkPlacement chunk = {});
  // The same kind of layout (model or adapters) for another rank or chunk.
  ParameterLayout like(const ModelConfig& config, TensorParallelRank tp,
                       ChunkPlacement chunk = {}) const;
  bool holds_lora_adapters() const { return lora_; }
  const std::vector<ParamSpec>& specs() const { return specs_; }
  const ParamSpec& find(const std::string& name) const;
  bool contains(const std::string& name) const;
  long total() const { return total_; }
  void print(std::ostream& os) const;

 private:
  void add(std::string name, std::vector<long> shape, ShardSpec shard, bool decay, InitKind init);
  void add_qk_norms(const ModelConfig& config, int layer);
  void add_moe_mlp(const ModelConfig& config, int layer, TensorParallelRank tp,
                   const ExpertSlice& experts);
  void add_experts(const ModelConfig& config, int layer, TensorParallelRank tp, int first,
                   int count);
  ParameterLayout() = default;
  void add_lora(const ModelConfig& config, int layer, TensorParallelRank tp);
  std::vector<ParamSpec> specs_;
  long total_ = 0;
  bool lora_ = false;
};

// Parameter tensors per transformer layer of GPT-2's block (2 LayerNorms x 2, QKV,
// projection, FC1, FC2 x 2); the Llama options change it (GPTModel counts its own).
constexpr int kParamsPerLayer = 12;

// Names, shared by the layout, the layers and the checkpoint formats.
std::string layer_param(int layer, const std::string& leaf);
// An MoE layer's expert tensor by global expert index: layers.L.mlp.experts.E.<leaf>.
std::string moe_expert_param(int layer, int expert, const std::string& leaf);
// A LoRA adapter tensor: layers.L.<linear>.lora_A.weight ("A") or lora_B.weight ("B"), with
// linear e.g. "self_attention.linear_qkv" or "mlp.linear_fc1".
std::string lora_param(int layer, const std::string& linear, const char* which);

// The units a chunk's weights are gathered in under sharded weights (ZeRO-3), as spec ranges
// [begin, end) in layout order: the embedding (or a last stage's copy of a tied word
// embedding), each layer, and the rest (the final norm, an untied output layer).
std::vector<std::pair<int, int>> weight_units(const ParameterLayout& layout);

}  // namespace trident
