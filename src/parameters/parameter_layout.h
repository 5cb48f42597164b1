#pragma once
// Where every parameter lives: its global shape, which slice this rank holds, and its
// offset in the rank's one flat buffer. A pure function of the config, printable.
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

class ParameterLayout {
 public:
  ParameterLayout(const ModelConfig& config, TensorParallelRank tp, ChunkPlacement chunk = {});
  const std::vector<ParamSpec>& specs() const { return specs_; }
  const ParamSpec& find(const std::string& name) const;
  bool contains(const std::string& name) const;
  long total() const { return total_; }
  void print(std::ostream& os) const;

 private:
  void add(std::string name, std::vector<long> shape, ShardSpec shard, bool decay, InitKind init);
  void add_qk_norms(const ModelConfig& config, int layer);
  void add_moe_mlp(const ModelConfig& config, int layer, TensorParallelRank tp);
  std::vector<ParamSpec> specs_;
  long total_ = 0;
};

// Parameter tensors per transformer layer of GPT-2's block (2 LayerNorms x 2, QKV,
// projection, FC1, FC2 x 2); the Llama options change it (GPTModel counts its own).
constexpr int kParamsPerLayer = 12;

// Names, shared by the layout, the layers and the checkpoint formats.
std::string layer_param(int layer, const std::string& leaf);
// An MoE layer's expert tensor by global expert index: layers.L.mlp.experts.E.<leaf>.
std::string moe_expert_param(int layer, int expert, const std::string& leaf);

// The units a chunk's weights are gathered in under sharded weights (ZeRO-3), as spec ranges
// [begin, end) in layout order: the embedding (or a last stage's copy of a tied word
// embedding), each layer, and the rest (the final norm, an untied output layer).
std::vector<std::pair<int, int>> weight_units(const ParameterLayout& layout);

}  // namespace trident
