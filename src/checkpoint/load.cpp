// checkpoint::load: the manifest and run settings checked, the files this rank needs chosen
// (with an unchanged layout, the one holding exactly its slices), each of them checked
// (size, checksum, header, shapes), and only then the tensors placed — resharded through
// their global shape when the layout changed — so a failed load changes nothing. With a
// sharded optimizer each rank places its shard of the values and moments and the values are
// all-gathered over data parallelism.
#include <xxhash.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <ostream>
#include <set>

#include "checkpoint/checkpoint.h"
#include "io/safetensors.h"

namespace trident::checkpoint {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

[[noreturn]] void fail(const std::string& why) {
  throw CheckpointError(why);
}

std::string file_hash(const std::string& path, long* bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path + ": missing");
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  std::vector<char> buf(1 << 20);
  *bytes = 0;
  while (in) {
    in.read(buf.data(), (std::streamsize)buf.size());
    XXH64_update(state, buf.data(), (size_t)in.gcount());
    *bytes += in.gcount();
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)XXH64_digest(state));
  XXH64_freeState(state);
  return hex;
}

std::string shape_string(const std::vector<long>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

bool same_slice(const ParamSpec& a, const ParamSpec& b) {
  return a.global_shape == b.global_shape && a.local_shape == b.local_shape &&
         a.shard.dim == b.shard.dim && a.shard.rank == b.shard.rank &&
         a.shard.parts == b.shard.parts && a.shard.stride == b.shard.stride;
}

// The format version, the model and (when resuming) the run settings.
void check_manifest(const json& manifest, const std::string& manifest_path, const RunRecord& run,
                    LoadMode mode, std::ostream& log) {
  if (manifest["version"] != kFormatVersion)
    fail(manifest_path + ": format version " + manifest["version"].dump() +
         ", this trident reads " + std::to_string(kFormatVersion));
  if (manifest["model"] != model_json(run.layout.model))
    fail(manifest_path + ": the model config " + manifest["model"].dump() +
         " does not match this run's " + model_json(run.layout.model).dump());
  check_run_settings(manifest, manifest_path, run.settings, mode, log);
  if (manifest.contains("lora_base")) check_lora_base(manifest["lora_base"], manifest_path);
}

// Every tensor this rank holds: its chunks' dense buffers and expert buffers.
std::vector<const ParamSpec*> held_specs(const engine::RankModel& model) {
  std::vector<const ParamSpec*> held;
  for (const auto& chunk : model.chunks)
    for (const Parameters* p : {&chunk->trainable_parameters(), &chunk->expert_parameters()})
      for (const ParamSpec& s : p->layout().specs()) held.push_back(&s);
  return held;
}

// Which files to read: for each tensor this rank holds, the file with exactly its slice if
// the layout is unchanged, else every file holding a piece of it.
std::set<size_t> files_to_read(const json& manifest_files, const engine::RankModel& model) {
  std::set<size_t> wanted;
  for (const ParamSpec* held : held_specs(model)) {
    const ParamSpec& mine = *held;
    std::vector<size_t> holders;
    bool exact = false;
    for (size_t f = 0; f < manifest_files.size() && !exact; ++f)
      for (const json& t : manifest_files[f]["tensors"])
        if (t["name"] == mine.name) {
          if (same_slice(manifest_spec(t), mine))
            exact = true, holders = {f};
          else
            holders.push_back(f);
        }
    wanted.insert(holders.begin(), holders.end());
  }
  return wanted;
}

struct Piece {
  const io::SafetensorsFile* file;
  ParamSpec spec;  // global shape, local shape and shard as saved
};

// The files read, and every saved piece of each tensor they hold.
struct OpenFiles {
  std::vector<std::unique_ptr<io::SafetensorsFile>> files;
  std::map<std::string, std::vector<Piece>> pieces;
};

// Opens one file after checking its size and checksum against the manifest.
std::unique_ptr<io::SafetensorsFile> open_checked(const std::string& path, const json& f) {
  if (!fs::exists(path)) fail(path + ": missing");
  long bytes = 0;
  std::string hash = file_hash(path, &bytes);
  if (bytes != f["bytes"].get<long>())
    fail(path + ": " + std::to_string(bytes) + " bytes, the manifest says " + f["bytes"].dump() +
         " (truncated?)");
  if (hash != f["xxh64"].get<std::string>())
    fail(path + ": checksum " + hash + " does not match the manifest's " +
         f["xxh64"].get<std::string>());
  try {
    return std::make_unique<io::SafetensorsFile>(path);
  } catch (const FormatError& e) {
    fail(e.what());
  }
}

// Every tensor the manifest lists in a file must be in it with the manifest's shape, and a
// tensor's global shape must agree across files.
void add_pieces(const io::SafetensorsFile& file, const json& f, const std::string& manifest_path,
                OpenFiles& open) {
  for (const json& entry : f["tensors"]) {
    ParamSpec s = manifest_spec(entry);
    for (const char* suffix : {"", ".exp_avg", ".exp_avg_sq"}) {
      const io::TensorEntry* t = file.find(s.name + suffix);
      if (!t) fail(file.path() + ": missing tensor " + s.name + suffix);
      // What is read below relies on the manifest's shape: the file must agree.
      if (t->shape != s.local_shape || t->dtype != "F32")
        fail(file.path() + ": tensor " + t->name + " is " + t->dtype + " " +
             shape_string(t->shape) + ", the manifest says F32 " + shape_string(s.local_shape));
    }
    std::vector<Piece>& held = open.pieces[s.name];
    if (!held.empty() && held.front().spec.global_shape != s.global_shape)
      fail(manifest_path + ": tensor " + s.name + " has global shape " +
           shape_string(held.front().spec.global_shape) + " in one file and " +
           shape_string(s.global_shape) + " in " + file.path());
    held.push_back({&file, s});
  }
}

OpenFiles open_needed_files(const fs::path& ckpt, const json& manifest,
                            const std::string& manifest_path, const engine::RankModel& model) {
  const json& manifest_files = manifest["files"];
  OpenFiles open;
  for (size_t fi : files_to_read(manifest_files, model)) {
    const json& f = manifest_files[fi];
    open.files.push_back(open_checked((ckpt / f["file"].get<std::string>()).string(), f));
    add_pieces(*open.files.back(), f, manifest_path, open);
  }
  std::set<std::string> needed;  // sorted: the first missing name is reported
  for (const ParamSpec* mine : held_specs(model)) needed.insert(mine->name);
  for (const std::string& name : needed)
    if (!open.pieces.count(name)) fail(manifest_path + ": no tensor " + name);
  return open;
}

// The saved global tensor (values or a moment) rebuilt from every piece that holds it.
std::vector<float> global_tensor(const std::vector<Piece>& pieces, const std::string& suffix) {
  const ParamSpec& first = pieces.front().spec;
  long n = 1;
  for (long d : first.global_shape) n *= d;
  std::vector<float> out(n, 0.f);
  for (const Piece& p : pieces) {
    const io::TensorEntry* t = p.file->find(p.spec.name + suffix);
    std::vector<float> local = p.file->read_float(*t);
    for (long i = 0; i < (long)local.size(); ++i) out[p.spec.global_index(i)] = local[i];
  }
  return out;
}

// This rank's slice `s` of a saved tensor (suffix "": values, or a moment) into `local`.
void read_slice(const std::vector<Piece>& parts, const ParamSpec& s, const std::string& suffix,
                std::vector<float>& local) {
  local.resize(s.numel());
  for (const Piece& p : parts)
    if (same_slice(p.spec, s)) {  // a rank saved exactly this slice
      p.file->copy_float(*p.file->find(s.name + suffix), local.data());
      return;
    }
  std::vector<float> global = global_tensor(parts, suffix);
  // The padded vocabulary depends on t: rows beyond the saved ones are padding.
  for (long i = 0; i < s.numel(); ++i) {
    long g = s.global_index(i);
    local[i] = g < (long)global.size() ? global[g] : 0.f;
  }
}

// The floats of a chunk's buffer this rank places: its optimizer shard when the optimizer
// is sharded (the rest comes from the other data-parallel ranks), else all of it.
struct PlacedRange {
  long begin, end;
  bool sharded;
};

PlacedRange placed_range(const Parameters& params, const optim::AdamW* opt) {
  if (!opt || (opt->range_begin() == 0 && opt->range_end() == params.size()))
    return {0, params.size(), false};
  return {opt->range_begin(), opt->range_end(), true};
}

// local[from - s.offset, to - s.offset) into dst[from - base, to - base).
void copy_range(const std::vector<float>& local, const ParamSpec& s, long from, long to, long base,
                float* dst) {
  for (long g = from; g < to; ++g) dst[g - base] = local[g - s.offset];
}

// Weights, and unless kWeightsOnly the moments, inside `range` (the moments never reach
// beyond the optimizer's range).
void place_chunk(Parameters& params, optim::AdamW* opt, const OpenFiles& open, LoadMode mode,
                 const PlacedRange& range, const std::function<void(double)>& progress) {
  const char* suffixes[3] = {"", ".exp_avg", ".exp_avg_sq"};
  std::vector<float> local;
  for (const ParamSpec& s : params.layout().specs()) {
    if (progress) progress((double)s.offset / (double)params.size());
    const long lo = std::max(range.begin, s.offset), hi = std::min(range.end, s.offset + s.numel());
    if (lo >= hi) continue;  // outside this rank's shard: nothing of it is read
    const std::vector<Piece>& parts = open.pieces.at(s.name);
    read_slice(parts, s, suffixes[0], local);
    copy_range(local, s, lo, hi, 0, params.values());
    if (mode == LoadMode::kWeightsOnly) continue;  // the moments stay zero: a fresh optimizer
    FirstTouchVector<float>* moments[2] = {&opt->exp_avg(), &opt->exp_avg_sq()};
    const long mlo = std::max(opt->range_begin(), lo), mhi = std::min(opt->range_end(), hi);
    for (int k = 1; k < 3; ++k) {
      read_slice(parts, s, suffixes[k], local);
      copy_range(local, s, mlo, mhi, opt->range_begin(), moments[k - 1]->data());
    }
  }
}

// Expert parallelism: chunk j's expert buffer, as the dense one (its optimizer's shard, then
// the values all-gathered over the expert-data group).
void place_experts(engine::RankModel& model, size_t j, const OpenFiles& open, const json& manifest,
                   LoadMode mode) {
  Parameters& experts = model.chunks[j]->expert_parameters();
  optim::AdamW* opt =
      j < model.expert_optimizers.size() ? model.expert_optimizers[j].get() : nullptr;
  if (!opt) throw std::logic_error("checkpoint::load: an expert buffer without its optimizer");
  const PlacedRange range = placed_range(experts, opt);
  place_chunk(experts, opt, open, mode, range, {});
  if (range.sharded) model.expert_reducers.at(j)->all_gather_values();
  if (mode != LoadMode::kWeightsOnly) opt->set_steps_taken(manifest["optimizer_steps"].get<long>());
}

// Everything is checked: from here on nothing can fail, so tensors go straight into place.
// A sharded optimizer's rank places its shard, then the data-parallel ranks all-gather the
// values (collective over data parallelism; under ZeRO-3 each keeps its shard only).
void place_tensors(engine::RankModel& model, const OpenFiles& open, const json& manifest,
                   LoadMode mode, const std::function<void(double)>& progress) {
  const double chunk_share = 1.0 / (double)model.chunks.size();
  for (size_t j = 0; j < model.chunks.size(); ++j) {
    // A model built for generation has no optimizer: it can only take the weights.
    optim::AdamW* opt = j < model.optimizers.size() ? model.optimizers[j].get() : nullptr;
    if (!opt && mode != LoadMode::kWeightsOnly)
      throw std::logic_error("checkpoint::load: resuming needs the model's optimizers");
    std::function<void(double)> chunk_progress;
    if (progress) chunk_progress = [&](double f) { progress(chunk_share * ((double)j + f)); };
    Parameters& params = model.chunks[j]->trainable_parameters();  // LoRA: the adapters
    const PlacedRange range = placed_range(params, opt);
    place_chunk(params, opt, open, mode, range, chunk_progress);
    if (range.sharded) model.reducers.at(j)->all_gather_values();
    if (mode != LoadMode::kWeightsOnly)
      opt->set_steps_taken(manifest["optimizer_steps"].get<long>());
    if (model.chunks[j]->splits_experts()) place_experts(model, j, open, manifest, mode);
  }
  model.finish_param_gather();  // overlapped gathers: complete before anything reads values
}

// The loss scaler and the position in the run.
TrainingState restore_state(const json& manifest, engine::RankModel& model, const RunRecord& run) {
  if (manifest.contains("loss_scaler") && model.scaler.is_dynamic()) {
    const json& ls = manifest["loss_scaler"];
    model.scaler.restore({ls["scale"].get<float>(), ls["growth_tracker"].get<long>(),
                          ls["hysteresis_tracker"].get<int>(),
                          ls["skipped_iterations"].get<long>()});
  }
  TrainingState state{manifest["iteration"], manifest["consumed_samples"], manifest["evaluations"]};
  // Checkpoints from before sample-based schedules: the scheduler moved with every
  // non-skipped iteration at a constant global batch.
  const long skipped = manifest.contains("loss_scaler")
                           ? manifest["loss_scaler"]["skipped_iterations"].get<long>()
                           : 0;
  state.lr_schedule_samples = manifest.contains("lr_schedule_samples")
                                  ? manifest["lr_schedule_samples"].get<long>()
                                  : state.consumed_samples - skipped * run.global_batch;
  return state;
}

}  // namespace

TrainingState load(const std::string& dir, const RunRecord& run, engine::RankModel& model,
                   const engine::RankContext& rank, std::ostream& log, LoadMode mode,
                   const std::function<void(double)>& progress) {
  const auto started = std::chrono::steady_clock::now();
  const fs::path ckpt = latest_checkpoint(dir);
  if (is_aside(ckpt))
    log << "note: a save of " << ckpt.stem().string() << " was interrupted mid-commit: loading "
        << ckpt.string() << "\n";
  const std::string manifest_path = (ckpt / "manifest.json").string();
  const json manifest = read_manifest(ckpt.string());
  check_manifest(manifest, manifest_path, run, mode, log);
  const OpenFiles open = open_needed_files(ckpt, manifest, manifest_path, model);
  place_tensors(model, open, manifest, mode, progress);
  if (mode == LoadMode::kWeightsOnly) {
    log << "loaded the weights of checkpoint " << ckpt.string() << " (iteration "
        << manifest["iteration"] << "); iteration, data position, optimizer and loss scale start "
        << "afresh\n";
    return {};
  }
  TrainingState state = restore_state(manifest, model, run);
  log << "loaded checkpoint " << ckpt.string() << " (iteration " << state.iteration
      << ", saved under t=" << manifest["layout"]["tensor"]
      << " p=" << manifest["layout"]["pipeline"] << " d=" << manifest["layout"]["data"] << "; "
      << std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()
      << " s)\n";
  return state;
}

}  // namespace trident::checkpoint
