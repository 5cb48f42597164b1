// checkpoint::save: data-parallel rank 0 of each (tensor, pipeline) position writes its file
// and a side-car with its checksum — with a sharded optimizer, every data-parallel rank writes
// its shard of the file in place (checkpoint/sharded_write.h), nothing is gathered — and world
// rank 0 writes the manifest and commits.
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
#include <tuple>
#include <utility>

#include "checkpoint/checkpoint.h"
#include "checkpoint/save_snapshot.h"
#include "checkpoint/sharded_write.h"
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

// Whether every data-parallel rank writes its pieces of the file (the same answer on every
// rank of a data-parallel group): with a sharded optimizer, and under expert parallelism,
// where each expert's weights are on the ranks of its expert group only.
bool sharded_save(const engine::RankModel& model) {
  for (size_t j = 0; j < model.chunks.size(); ++j)
    if (optimizer_sharded(*model.optimizers[j], model.chunks[j]->trainable_parameters().size()) ||
        model.chunks[j]->splits_experts())
      return true;
  return false;
}

// The floats of chunk j's buffer (its expert buffer with `experts`) this rank writes in a
// pieced save: its optimizer's shard, or, unsharded, all of it on the group's rank 0 (the
// data-parallel group's, or the expert-data group's for experts) and nothing elsewhere.
std::pair<long, long> written_range(const engine::RankModel& model, size_t j, bool experts,
                                    const engine::RankContext& rank) {
  const optim::AdamW& opt = experts ? *model.expert_optimizers[j] : *model.optimizers[j];
  const Parameters& params =
      experts ? model.chunks[j]->expert_parameters() : model.chunks[j]->trainable_parameters();
  if (optimizer_sharded(opt, params.size())) return {opt.range_begin(), opt.range_end()};
  const comm::Communicator& group = experts ? *rank.groups->expert_data : *rank.groups->data;
  return group.rank() == 0 ? std::pair<long, long>{0, params.size()} : std::pair<long, long>{0, 0};
}

void add_entries(const ParamSpec& s, const float* values, const float* m, const float* v,
                 SaveSnapshot& out) {
  out.tensors.push_back({s.name, s.local_shape, values});
  out.tensors.push_back({s.name + ".exp_avg", s.local_shape, m});
  out.tensors.push_back({s.name + ".exp_avg_sq", s.local_shape, v});
  out.entries.push_back(spec_json(s));
}

// What data-parallel rank 0 writes of an unsharded optimizer: each owned tensor with its two
// moments, and their manifest entries. The buffers it takes with copy_model, in order, per
// chunk: the two moments, then the weights; reserve_snapshot_buffers takes the same.
void add_rank_tensors(engine::RankModel& model, SnapshotBuffers& buffers, bool copy_model,
                      SaveSnapshot& out) {
  size_t used = 0;
  for (size_t j = 0; j < model.chunks.size(); ++j) {
    Parameters& params = model.chunks[j]->trainable_parameters();
    optim::AdamW& opt = *model.optimizers[j];
    const long size = params.size();
    const float* values = params.values();
    const float* moments[2] = {opt.exp_avg().data(), opt.exp_avg_sq().data()};
    if (copy_model) {
      moments[0] = copied(buffers, used, moments[0], size, out);
      moments[1] = copied(buffers, used, moments[1], size, out);
      values = copied(buffers, used, values, size, out);
    }
    for (const ParamSpec& s : params.layout().specs())
      if (s.owned)
        add_entries(s, values + s.offset, moments[0] + s.offset, moments[1] + s.offset, out);
  }
}

// A tensor's piece inside the shard: its index in out.tensors, the floats of the shard's copy
// (or the model) it starts at, how many, and the float of the tensor it starts at.
struct PendingPiece {
  size_t tensor;
  const float* data;
  long floats, at;
};

// One buffer's part in a pieced save: its layout, the floats [lo, hi) this rank writes and
// where the values and both moments of float lo are.
struct WrittenBuffer {
  const ParameterLayout* layout = nullptr;
  long lo = 0, hi = 0;
  const float* shard[3] = {nullptr, nullptr, nullptr};  // exp_avg, exp_avg_sq, values
};

WrittenBuffer written_buffer(engine::RankModel& model, size_t j, bool experts,
                             const engine::RankContext& rank, SnapshotBuffers& buffers,
                             size_t& used, bool copy_model, SaveSnapshot& out) {
  Parameters& params =
      experts ? model.chunks[j]->expert_parameters() : model.chunks[j]->trainable_parameters();
  optim::AdamW& opt = experts ? *model.expert_optimizers[j] : *model.optimizers[j];
  WrittenBuffer w;
  w.layout = &params.layout();
  std::tie(w.lo, w.hi) = written_range(model, j, experts, rank);
  const long moments_at = w.lo - opt.range_begin();
  w.shard[0] = opt.exp_avg().data() + moments_at;
  w.shard[1] = opt.exp_avg_sq().data() + moments_at;
  w.shard[2] = params.values() + w.lo;
  if (copy_model)
    for (const float*& from : w.shard) from = copied(buffers, used, from, w.hi - w.lo, out);
  return w;
}

// The tensors of this rank's file of chunk `chunk`, in order: the chunk's tensors of tensor
// rank tp with every expert inline (what an EP = 1 run writes), or with whole experts
// (ETP = 1 < t) the dense ones, then those experts whole that ranks of this tensor rank hold
// (expert-parallel ranks r with r % t == tp, train/moe_rules.cpp making t divide EP), so
// that every expert is in one file, once, whole, and its expert-data group, which writes it,
// is on that tensor rank. Loading places tensors by name from any slices (load.cpp).
std::vector<ParameterLayout> file_layouts(const GPTModel& chunk, TensorParallelRank tp, int ep) {
  const ModelConfig& c = chunk.config();
  const int etp = chunk.expert_tensor_parallel();
  if (!chunk.splits_experts() || etp <= 0 || etp == tp.size)
    return {ParameterLayout(c, tp, chunk.placement())};
  std::vector<ParameterLayout> layouts = {
      ParameterLayout(c, tp, chunk.placement(), dense_expert_slice(c, ep))};
  for (int r = tp.rank; r < ep; r += tp.size)
    layouts.emplace_back(c, expert_tensor_rank(tp, etp), chunk.placement(),
                         expert_buffer_slice(c, ep, r));
  return layouts;
}

// One tensor of the file: its entries, and the pieces of it this rank writes.
void add_file_tensor(const ParamSpec& s, const std::vector<WrittenBuffer>& written,
                     SaveSnapshot& out, std::vector<PendingPiece>& pending) {
  const size_t first = out.tensors.size();
  add_entries(s, nullptr, nullptr, nullptr, out);
  for (const WrittenBuffer& w : written) {
    if (!w.layout->contains(s.name)) continue;
    const ParamSpec& held = w.layout->find(s.name);
    const long a = std::max(w.lo, held.offset), b = std::min(w.hi, held.offset + held.numel());
    if (a >= b) continue;
    for (int k = 0; k < 3; ++k)  // the values, exp_avg, exp_avg_sq
      pending.push_back({first + k, w.shard[(k + 2) % 3] + (a - w.lo), b - a, a - held.offset});
  }
}

// What every rank writes in a pieced save (sharded_save): the pieces of each owned tensor and
// of its two moments inside the ranges it writes (written_range), placed by the header all
// ranks compute alike. The file lists the chunks' tensors with every expert inline, in that
// layout's order, so it is the one an unsharded save at EP = 1 writes (at ETP = 1 < t: with
// whole experts, file_layouts); each expert's pieces come from its expert buffer on the ranks
// that hold it. The buffers it takes with copy_model, per chunk: the dense buffer's three
// ranges, then the expert buffer's; reserve_snapshot_buffers agrees.
void add_rank_pieces(engine::RankModel& model, const engine::RankContext& rank,
                     SnapshotBuffers& buffers, bool copy_model, SaveSnapshot& out) {
  size_t used = 0;
  std::vector<PendingPiece> pending;
  const TensorParallelRank tp{rank.groups->tensor->rank(), rank.groups->tensor->size()};
  for (size_t j = 0; j < model.chunks.size(); ++j) {
    GPTModel& chunk = *model.chunks[j];
    std::vector<WrittenBuffer> written = {
        written_buffer(model, j, false, rank, buffers, used, copy_model, out)};
    if (chunk.splits_experts())
      written.push_back(written_buffer(model, j, true, rank, buffers, used, copy_model, out));
    for (const ParameterLayout& file_layout : file_layouts(chunk, tp, rank.groups->expert->size()))
      for (const ParamSpec& s : file_layout.specs())
        if (s.owned) add_file_tensor(s, written, out, pending);
  }
  const io::SafetensorsLayout layout = io::safetensors_layout(out.tensors, {{"format", kFormat}});
  out.header = layout.header, out.file_bytes = layout.file_bytes;
  for (const PendingPiece& p : pending)
    out.pieces.push_back({p.data, p.floats, layout.offsets[p.tensor] + 4 * (std::uint64_t)p.at});
}

std::string rank_file_name(int t, int p) {
  return "model_tp" + std::to_string(t) + "_pp" + std::to_string(p) + ".safetensors";
}

}  // namespace

void inject_write_fault(SaveFault fault) {
  if (fault == SaveFault::kWriteError)
    throw SaveError(
        "injected failure writing the checkpoint (--inject-fault-save-point "
        "write-error)");
  if (fault == SaveFault::kStallWriting)  // to be killed; goes on after 10 minutes
    for (int second = 0; second < 600; ++second)
      std::this_thread::sleep_for(std::chrono::seconds(1));
}

namespace {

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
                     {"lora", l.dropout.lora},
                     {"generator", "philox4x32-10"},
                     {"seed", l.dropout.seed},
                     {"counter", "consumed_samples"}}},
                   {"model", model_json(l.model)},
                   {"layout",
                    {{"tensor", l.tensor},
                     {"pipeline", l.pipeline},
                     {"data", l.data},  // the weights' replicas: d x c
                     {"context", l.context},
                     {"virtual_stages", l.virtual_stages},
                     {"distributed_optimizer", l.distributed_optimizer}}},
                   {"files", json::array()}};
  // A checkpoint written outside training (convert) has no run settings; loading it
  // compares none.
  if (!run.settings.empty()) manifest["run"] = run_json(run.settings);
  // LoRA: the files hold the adapters alone; this identifies the base they go with.
  if (l.model.lora.enabled()) manifest["lora_base"] = lora_base_json(l.model.lora, run.seed);
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
  // As take_snapshot: every rank copies its shard, or the writer the whole buffer.
  const bool sharded = sharded_save(model);
  const bool copy_model = sharded || rank.groups->data->rank() == 0;
  if (!copy_model) return;
  size_t used = 0;
  for (size_t j = 0; j < model.chunks.size(); ++j)
    for (bool experts : {false, true}) {
      if (experts && !model.chunks[j]->splits_experts()) continue;
      const auto [lo, hi] =
          sharded ? written_range(model, j, experts, rank)
                  : std::pair<long, long>{0, model.chunks[j]->trainable_parameters().size()};
      for (int b = 0; b < 3; ++b) next_buffer(buffers, used, hi - lo);
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
  // Data-parallel rank 0 writes the file; with a sharded optimizer every rank its pieces.
  s.writes = dp.rank() == 0;
  s.file = rank_file_name(tp.rank(), pp.rank());
  s.sharded = sharded_save(model);
  s.data_rank = dp.rank(), s.data_size = dp.size();
  s.markers = copy_model;  // asynchronous: no barrier says the other ranks' pieces are out
  if (s.sharded)
    add_rank_pieces(model, rank, buffers, copy_model, s);
  else  // only a writer copies: the others' tensors are never written
    add_rank_tensors(model, buffers, copy_model && s.writes, s);
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
  const std::uint64_t digest = XXH64_digest(state);
  XXH64_freeState(state);
  write_side_car(s, (std::uint64_t)bytes, digest);
}

void write_side_car(const SaveSnapshot& s, std::uint64_t bytes, std::uint64_t xxh64) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)xxh64);
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
  SnapshotBuffers unused;  // everything is written straight from the model
  const SaveSnapshot s = take_snapshot(dir, run, model, state, rank, options, unused, false);
  if (s.sharded) {
    write_rank_pieces(s);
    barrier(rank);  // every rank's pieces durable
    if (s.writes) finish_sharded_file(s, [] { return true; });
  } else if (s.writes) {
    write_rank_file(s);
  }
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
