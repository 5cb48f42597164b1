#pragma once
// A one-rank model to save and load, and a scratch directory, for the checkpoint tests.
#include <unistd.h>

#include <filesystem>
#include <string>

#include "distributed/process_groups.h"
#include "engine/rank_context.h"
#include "engine/rank_model.h"

namespace trident::testing {

inline engine::RankModelOptions tiny_model_options(std::uint64_t seed) {
  engine::RankModelOptions o;
  o.layout.model.num_layers = 2, o.layout.model.hidden_size = 32;
  o.layout.model.num_attention_heads = 2, o.layout.model.seq_length = 16;
  o.layout.model.vocab_size = 100;
  o.layout.split = {2};
  o.schedules = {o.schedule};
  o.seed = seed;
  return o;
}

// One process, t = p = d = 1.
struct OneRank {
  distributed::ProcessGrid grid{1, 1, 1};
  distributed::ProcessGroups groups = distributed::make_single_rank_groups();
  engine::RankContext rank{0, &grid, &groups, {"local"}};
  engine::RankModel build(const engine::RankModelOptions& o) {
    return engine::build_rank_model(o, *groups.tensor, *groups.pipeline, *groups.data);
  }
};

// A fresh directory under the system's temporary directory, removed at the end.
struct ScratchDir {
  std::filesystem::path path;
  explicit ScratchDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() { std::filesystem::remove_all(path); }
  std::string str() const { return path.string(); }
};

}  // namespace trident::testing
