// checkpoint::save: every rank gathers what it writes (sharded Adam moments are all-gathered
// over data parallelism), data-parallel rank 0 of each (tensor, pipeline) position writes its
// file and a side-car with its checksum, and world rank 0 writes the manifest and commits.
// The snapshot functions (checkpoint/save_snapshot.h) are the same steps, split where an
// asynchronous save hands them to a background thread.
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <thread>

#include "checkpoint/checkpoint.h"
#include "checkpoint/save_snapshot.h"
#include "core/files.h"
#include "core/first_touch.h"
#include "io/safetensors.h"

namespace trident::checkpoint {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

void barrier(const engine::RankContext& rank) {
  double x = 0;
  rank.groups->world->all_reduce(&x, 1, comm::ReduceOp::kSum);
}

// The full moments of a chunk's buffer, into m and v (`size` floats each; gathered over
// data parallelism when sharded).
void full_moments(optim::AdamW& opt, long size, comm::Communicator& dp, bool sharded, float* m,
                  float* v) {
  std::fill(m, m + size, 0.f);
  std::fill(v, v + size, 0.f);
  std::copy(opt.exp_avg().begin(), opt.exp_avg().end(), m + opt.range_begin());
  std::copy(opt.exp_avg_sq().begin(), opt.exp_avg_sq().end(), v + opt.range_begin());
  if (sharded && dp.size() > 1) {
    const long piece = opt.range_end() - opt.range_begin();
    dp.all_gather(m + opt.range_begin(), m, piece);
    dp.all_gather(v + opt.range_begin(), v, piece);
  }
}

// The next of `buffers`, `floats` long (reused: no allocation after the first save; a new
// one comes touched, in huge pages where the kernel gives them: core/first_touch.h).
float* next_buffer(SnapshotBuffers& buffers, size_t& used, long floats) {
  if (buffers.floats.size() <= used) buffers.floats.emplace_back();
  FirstTouchVector<float>& b = buffers.floats[used++];
  if (b.capacity() < (size_t)floats) FirstTouchVector<float>().swap(b);
  b.resize(floats);
  return b.data();
}

// A buffer that copy_into_snapshot fills from `from`.
const float* copied(SnapshotBuffers& buffers, size_t& used, const float* from, long floats,
                    SaveSnapshot& out) {
  float* to = next_buffer(buffers, used, floats);
  out.copies.push_back({from, to, floats});
  return to;
}

bool optimizer_sharded(const optim::AdamW& opt, long size) {
  return opt.range_begin() != 0 || opt.range_end() != size;
}

// What this rank writes: each owned tensor with its two moments, and their manifest entries.
// Collective over data parallelism when the optimizer is sharded. The buffers it takes, in
// order, per chunk: the two moments (gathered when sharded, else copied with copy_model),
// then the weights (copy_model); reserve_snapshot_buffers takes the same.
void add_rank_tensors(engine::RankModel& model, comm::Communicator& dp, bool sharded,
                      SnapshotBuffers& buffers, bool copy_model, SaveSnapshot& out) {
  size_t used = 0;
  for (size_t j = 0; j < model.chunks.size(); ++j) {
    Parameters& params = model.chunks[j]->parameters();
    optim::AdamW& opt = *model.optimizers[j];
    const long size = params.size();
    const float* values = params.values();
    const float* moments[2] = {opt.exp_avg().data(), opt.exp_avg_sq().data()};
    if (optimizer_sharded(opt, size)) {
      float* m = next_buffer(buffers, used, size);
      float* v = next_buffer(buffers, used, size);
      full_moments(opt, size, dp, sharded, m, v);
      moments[0] = m, moments[1] = v;
    } else if (copy_model) {
      moments[0] = copied(buffers, used, moments[0], size, out);
      moments[1] = copied(buffers, used, moments[1], size, out);
    }
    if (copy_model) values = copied(buffers, used, values, size, out);
    for (const ParamSpec& s : params.layout().specs()) {
      if (!s.owned) continue;
      out.tensors.push_back({s.name, s.local_shape, values + s.offset});
      out.tensors.push_back({s.name + ".exp_avg", s.local_shape, moments[0] + s.offset});
      out.tensors.push_back({s.name + ".exp_avg_sq", s.local_shape, moments[1] + s.offset});
      out.entries.push_back(spec_json(s));
    }
  }
}

std::string rank_file_name(int t, int p) {
  return "model_tp" + std::to_string(t) + "_pp" + std::to_string(p) + ".safetensors";
}

// Testing (SaveFault): what goes wrong once the file's first bytes are out.
void inject_write_fault(SaveFault fault) {
  if (fault == SaveFault::kWriteError)
    throw SaveError(
        "injected failure writing the checkpoint (--inject-fault-save-point "
        "write-error)");
  if (fault == SaveFault::kStallWriting)  // to be killed; goes on after 10 minutes
    for (int second = 0; second < 600; ++second)
      std::this_thread::sleep_for(std::chrono::seconds(1));
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

double bytes_under(const fs::path& dir) {
  double bytes = 0;
  for (auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) bytes += (double)e.file_size();
  return bytes;
}

}  // namespace

long SnapshotBuffers::bytes() const {
  long total = 0;
  for (const FirstTouchVector<float>& b : floats) total += (long)(b.capacity() * sizeof(float));
  return total;
}

void reserve_snapshot_buffers(engine::RankModel& model, const engine::RankContext& rank,
                              SnapshotBuffers& buffers) {
  const bool copy_model = rank.groups->data->rank() == 0;  // the writer, as in take_snapshot
  size_t used = 0;
  for (size_t j = 0; j < model.chunks.size(); ++j) {
    const long size = model.chunks[j]->parameters().size();
    const bool moments = copy_model || optimizer_sharded(*model.optimizers[j], size);
    for (int b = 0; b < (moments ? 2 : 0) + (copy_model ? 1 : 0); ++b)
      next_buffer(buffers, used, size);
  }
}

SaveSnapshot take_snapshot(const std::string& dir, const RunRecord& run, engine::RankModel& model,
                           const TrainingState& state, const engine::RankContext& rank,
                           const SaveOptions& options, SnapshotBuffers& buffers, bool copy_model) {
  comm::Communicator& tp = *rank.groups->tensor;
  comm::Communicator& pp = *rank.groups->pipeline;
  comm::Communicator& dp = *rank.groups->data;
  SaveSnapshot s;
  s.dir = dir, s.name = iteration_dir(state.iteration), s.options = options;
  s.tmp = s.dir / (s.name + ".tmp");
  if (rank.world_rank == 0) {
    tidy_interrupted_saves(s.dir);
    fs::create_directories(s.tmp);
  }
  barrier(rank);
  // Every rank takes part in gathering sharded moments; data-parallel rank 0 writes.
  s.writes = dp.rank() == 0;
  s.file = rank_file_name(tp.rank(), pp.rank());
  // Only a writer copies: the others' tensors are never written.
  add_rank_tensors(model, dp, run.layout.distributed_optimizer, buffers, copy_model && s.writes, s);
  s.commits = rank.world_rank == 0;
  if (s.commits) {
    s.manifest = manifest_of(run, model, state);
    s.tokenizer = run.tokenizer;
    for (int p = 0; p < run.layout.pipeline; ++p)
      for (int t = 0; t < run.layout.tensor; ++t)
        s.side_cars.push_back(rank_file_name(t, p) + ".json");
  }
  return s;
}

void copy_into_snapshot(const SaveSnapshot& s) {
  for (const SnapshotCopy& c : s.copies) std::copy(c.from, c.from + c.floats, c.to);
}

void write_rank_file(const SaveSnapshot& s) {
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  int pieces = 0;  // the header, then each tensor
  long bytes = 0;
  // The header is written (staged: the file reaches the disk in 8 MiB blocks) when the first
  // tensor is observed.
  auto observe = [&](const char* data, size_t size) {
    XXH64_update(state, data, size);
    if (++pieces == 2) inject_write_fault(s.options.fault);
  };
  try {
    bytes = (long)io::write_safetensors((s.tmp / s.file).string(), s.tensors, {{"format", kFormat}},
                                        observe);
  } catch (...) {
    XXH64_freeState(state);
    throw;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)XXH64_digest(state));
  XXH64_freeState(state);
  json side = {{"file", s.file}, {"bytes", bytes}, {"xxh64", hex}, {"tensors", s.entries}};
  write_file_atomically((s.tmp / (s.file + ".json")).string(), side.dump());
}

double commit_snapshot(const SaveSnapshot& s, const std::function<bool()>& keep_waiting) {
  json manifest = s.manifest;
  for (const std::string& side_car : s.side_cars) {
    const fs::path path = s.tmp / side_car;
    while (!fs::exists(path)) {
      if (!keep_waiting())
        throw SaveError(s.name + ": not committed, " + side_car +
                        " never came (another rank's "
                        "write failed)");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::ifstream in(path);
    manifest["files"].push_back(json::parse(in));
    fs::remove(path);
  }
  if (!s.tokenizer.empty())
    manifest["tokenizer"] = save_tokenizer_files(s.tokenizer, s.tmp.string());
  write_file_atomically((s.tmp / "manifest.json").string(), manifest.dump(1));
  if (s.options.fault == SaveFault::kBeforeCommit) std::_Exit(9);
  commit(s.dir, s.tmp, s.name, s.options.fault);
  if (s.options.keep_checkpoints > 0) remove_old_checkpoints(s.dir, s.options.keep_checkpoints);
  return bytes_under(s.dir / s.name);
}

// Synchronous: every rank writes, then world rank 0 commits what the barrier says is there.
void save(const std::string& dir, const RunRecord& run, engine::RankModel& model,
          const TrainingState& state, const engine::RankContext& rank, std::ostream& log,
          const SaveOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  SnapshotBuffers gathered;  // sharded moments only: the rest is written from the model
  const SaveSnapshot s = take_snapshot(dir, run, model, state, rank, options, gathered, false);
  if (s.writes) write_rank_file(s);
  barrier(rank);
  if (s.commits) {
    const double bytes = commit_snapshot(s, [] { return true; });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    log << "saved checkpoint " << (s.dir / s.name).string() << " (" << bytes / 1e6 << " MB in "
        << seconds << " s, " << bytes / 1e6 / seconds << " MB/s)\n";
  }
  barrier(rank);
}

}  // namespace trident::checkpoint
