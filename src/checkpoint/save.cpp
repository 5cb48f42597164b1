// checkpoint::save: every rank gathers what it writes (sharded Adam moments are all-gathered
// over data parallelism), data-parallel rank 0 of each (tensor, pipeline) position writes its
// file and a side-car with its checksum, and world rank 0 writes the manifest and commits.
#include <xxhash.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>

#include "checkpoint/checkpoint.h"
#include "core/files.h"
#include "io/safetensors.h"

namespace trident::checkpoint {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

void barrier(const engine::RankContext& rank) {
  double x = 0;
  rank.groups->world->all_reduce(&x, 1, comm::ReduceOp::kSum);
}

// The full moments of a chunk's buffer (gathered over data parallelism when sharded).
void full_moments(optim::AdamW& opt, long size, comm::Communicator& dp, bool sharded,
                  std::vector<float>* m, std::vector<float>* v) {
  m->assign(size, 0.f);
  v->assign(size, 0.f);
  std::copy(opt.exp_avg().begin(), opt.exp_avg().end(), m->begin() + opt.range_begin());
  std::copy(opt.exp_avg_sq().begin(), opt.exp_avg_sq().end(), v->begin() + opt.range_begin());
  if (sharded && dp.size() > 1) {
    const long piece = opt.range_end() - opt.range_begin();
    dp.all_gather(m->data() + opt.range_begin(), m->data(), piece);
    dp.all_gather(v->data() + opt.range_begin(), v->data(), piece);
  }
}

// What this rank writes: each owned tensor with its two moments, and their manifest entries.
struct RankTensors {
  std::vector<std::vector<float>> storage;  // gathered moments, alive while written
  std::vector<io::TensorToWrite> tensors;
  json entries = json::array();
};

// Collective over data parallelism when the optimizer is sharded.
RankTensors rank_tensors(engine::RankModel& model, comm::Communicator& dp, bool sharded) {
  RankTensors out;
  for (size_t j = 0; j < model.chunks.size(); ++j) {
    Parameters& params = model.chunks[j]->parameters();
    optim::AdamW& opt = *model.optimizers[j];
    const float* moments[2] = {opt.exp_avg().data(), opt.exp_avg_sq().data()};
    if (opt.range_begin() != 0 || opt.range_end() != params.size()) {  // sharded: gather
      std::vector<float> m, v;
      full_moments(opt, params.size(), dp, sharded, &m, &v);
      out.storage.push_back(std::move(m));
      out.storage.push_back(std::move(v));
      moments[0] = out.storage[out.storage.size() - 2].data();
      moments[1] = out.storage.back().data();
    }
    for (const ParamSpec& s : params.layout().specs()) {
      if (!s.owned) continue;
      out.tensors.push_back({s.name, s.local_shape, params.values() + s.offset});
      out.tensors.push_back({s.name + ".exp_avg", s.local_shape, moments[0] + s.offset});
      out.tensors.push_back({s.name + ".exp_avg_sq", s.local_shape, moments[1] + s.offset});
      out.entries.push_back(spec_json(s));
    }
  }
  return out;
}

// The rank's safetensors file, checksummed as it streams out, and its manifest side-car.
void write_rank_file(const fs::path& tmp, const std::string& file, const RankTensors& t) {
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  long bytes = (long)io::write_safetensors(
      (tmp / file).string(), t.tensors, {{"format", kFormat}},
      [state](const char* data, size_t size) { XXH64_update(state, data, size); });
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)XXH64_digest(state));
  XXH64_freeState(state);
  json side = {{"file", file}, {"bytes", bytes}, {"xxh64", hex}, {"tensors", t.entries}};
  write_file_atomically((tmp / (file + ".json")).string(), side.dump());
}

json manifest_of(const RunRecord& run, engine::RankModel& model, const TrainingState& state) {
  const engine::RankLayout& l = run.layout;
  const optim::LossScalerState scaler = model.scaler.state();
  json manifest = {{"format", kFormat},
                   {"version", kFormatVersion},
                   {"iteration", state.iteration},
                   {"consumed_samples", state.consumed_samples},
                   {"evaluations", state.evaluations},
                   {"lr_schedule_samples", state.lr_schedule_samples},
                   {"optimizer_steps", model.optimizers[0]->steps_taken()},
                   {"seed", run.seed},
                   {"precision", kernels::precision_name(l.precision)},
                   // fp16 loss scaler: resuming continues its schedule exactly.
                   {"loss_scaler",
                    {{"scale", scaler.scale},
                     {"growth_tracker", scaler.growth_tracker},
                     {"hysteresis_tracker", scaler.hysteresis_tracker},
                     {"skipped_iterations", scaler.skipped}}},
                   // Dropout masks are a function of (seed, site, sample index); the
                   // counter that moves them on is consumed_samples.
                   {"dropout",
                    {{"hidden", l.dropout.hidden},
                     {"attention", l.dropout.attention},
                     {"generator", "philox4x32-10"},
                     {"seed", l.dropout.seed},
                     {"counter", "consumed_samples"}}},
                   {"model", model_json(l.model)},
                   {"layout",
                    {{"tensor", l.tensor},
                     {"pipeline", l.pipeline},
                     {"data", l.data},
                     {"virtual_stages", l.virtual_stages},
                     {"distributed_optimizer", l.distributed_optimizer}}},
                   {"files", json::array()}};
  // A checkpoint written outside training (convert) has no run settings; loading it
  // compares none.
  if (!run.settings.empty()) manifest["run"] = run_json(run.settings);
  return manifest;
}

// World rank 0: the manifest (with every rank's side-car folded in), then the commit.
void write_manifest_and_commit(const fs::path& dir, const fs::path& tmp, const std::string& name,
                               json manifest, const SaveOptions& options) {
  for (auto& entry : fs::directory_iterator(tmp)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    manifest["files"].push_back(json::parse(in));
    fs::remove(entry.path());
  }
  write_file_atomically((tmp / "manifest.json").string(), manifest.dump(1));
  if (options.fault == SaveFault::kBeforeCommit) std::_Exit(9);
  commit(dir, tmp, name, options.fault);
  if (options.keep_checkpoints > 0) remove_old_checkpoints(dir, options.keep_checkpoints);
}

void report_saved(const fs::path& final_dir, std::chrono::steady_clock::time_point started,
                  std::ostream& log) {
  double bytes = 0;
  for (auto& e : fs::recursive_directory_iterator(final_dir))
    if (e.is_regular_file()) bytes += (double)e.file_size();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  log << "saved checkpoint " << final_dir.string() << " (" << bytes / 1e6 << " MB in " << seconds
      << " s, " << bytes / 1e6 / seconds << " MB/s)\n";
}

}  // namespace

void save(const std::string& dir, const RunRecord& run, engine::RankModel& model,
          const TrainingState& state, const engine::RankContext& rank, std::ostream& log,
          const SaveOptions& options) {
  comm::Communicator& tp = *rank.groups->tensor;
  comm::Communicator& pp = *rank.groups->pipeline;
  comm::Communicator& dp = *rank.groups->data;
  const auto started = std::chrono::steady_clock::now();
  const std::string name = iteration_dir(state.iteration);
  const fs::path tmp = fs::path(dir) / (name + ".tmp"), final_dir = fs::path(dir) / name;
  if (rank.world_rank == 0) {
    tidy_interrupted_saves(dir);
    fs::create_directories(tmp);
  }
  barrier(rank);
  // Every rank takes part in gathering sharded moments; data-parallel rank 0 writes.
  const RankTensors tensors = rank_tensors(model, dp, run.layout.distributed_optimizer);
  const std::string file =
      "model_tp" + std::to_string(tp.rank()) + "_pp" + std::to_string(pp.rank()) + ".safetensors";
  if (dp.rank() == 0) write_rank_file(tmp, file, tensors);
  barrier(rank);
  if (rank.world_rank == 0) {
    json manifest = manifest_of(run, model, state);
    if (!run.tokenizer.empty())
      manifest["tokenizer"] = save_tokenizer_files(run.tokenizer, tmp.string());
    write_manifest_and_commit(dir, tmp, name, std::move(manifest), options);
    report_saved(final_dir, started, log);
  }
  barrier(rank);
}

}  // namespace trident::checkpoint
