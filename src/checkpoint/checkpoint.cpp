#include "checkpoint/checkpoint.h"

#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <sstream>

#include "data/dataset_builder.h"
#include "io/safetensors.h"

namespace trident::checkpoint {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

constexpr int kFormatVersion = 1;
constexpr const char* kFormat = "trident-checkpoint";

constexpr const char* kAsideSuffix = ".old";

std::string iteration_dir(long it) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "iter_%07ld", it);
  return buf;
}

// `iter_` and digits only: a committed checkpoint (not .tmp or .old), and nothing that could
// lead `latest` outside the checkpoint directory.
bool is_iteration_name(const std::string& name) {
  if (name.size() <= 5 || name.compare(0, 5, "iter_") != 0) return false;
  return std::all_of(name.begin() + 5, name.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

// What interrupted saves leave: `iter_N.tmp` (never committed) is removed; `iter_N.old` (a
// commit interrupted after moving `iter_N` aside) is renamed back when `iter_N` is missing
// (`latest` may name it; a rename keeps it loadable throughout) and removed when `iter_N`
// exists (then `iter_N` is complete and the copy stale). World rank 0 only, before a save.
void tidy_interrupted_saves(const fs::path& dir) {
  if (!fs::is_directory(dir)) return;
  std::vector<fs::path> unfinished, aside;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!is_iteration_name(e.path().stem().string())) continue;
    if (e.path().extension() == ".tmp") unfinished.push_back(e.path());
    if (e.path().extension() == kAsideSuffix) aside.push_back(e.path());
  }
  for (const fs::path& tmp : unfinished) fs::remove_all(tmp);
  for (const fs::path& old : aside) {
    const fs::path committed = old.parent_path() / old.stem();
    if (fs::exists(committed))
      fs::remove_all(old);
    else
      rename_durably(old.string(), committed.string());
  }
}

// Puts the fully written `tmp` in place as `name` and points `latest` at it, never removing
// the directory `latest` names before its replacement is committed: an existing `name` (a
// run resumed at its last iteration saves that iteration again) is moved aside, and removed
// only once `latest` is rewritten. World rank 0 only.
void commit(const fs::path& dir, const fs::path& tmp, const std::string& name, SaveFault fault) {
  const fs::path final_dir = dir / name, aside = dir / (name + kAsideSuffix);
  if (fs::exists(final_dir)) {
    fs::remove_all(aside);  // stale: `name` itself is complete
    rename_durably(final_dir.string(), aside.string());
  }
  if (fault == SaveFault::kMidCommit) std::_Exit(9);
  rename_durably(tmp.string(), final_dir.string());
  write_file_atomically((dir / "latest").string(), name + "\n");
  fs::remove_all(aside);
  fsync_directory(dir.string());
}

// Keeps the newest `keep` committed checkpoints. World rank 0 only, after a commit.
void remove_old_checkpoints(const fs::path& dir, int keep) {
  std::vector<fs::path> committed;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && is_iteration_name(e.path().filename().string()))
      committed.push_back(e.path());
  std::sort(committed.begin(), committed.end());
  for (size_t k = 0; k + keep < committed.size(); ++k) fs::remove_all(committed[k]);
}

// Blend weights normalised and prefixes absolute, so that the same data given as "1 a 1 b"
// or "2 a 2 b", or from another working directory, reads the same.
std::string data_description(const TrainingConfig& c) {
  if (c.mock_data) return "mock";
  if (c.data_path.empty()) return "none";
  std::vector<data::WeightedPrefix> inputs = data::parse_data_path(c.data_path);
  double total = 0;
  for (const data::WeightedPrefix& p : inputs) total += p.weight;
  std::ostringstream out;
  for (const data::WeightedPrefix& p : inputs)
    out << (&p == &inputs.front() ? "" : " ") << p.weight / total << " "
        << fs::absolute(p.prefix).lexically_normal().string();
  return out.str();
}

// A setting that shapes the run: changed on resume, the run silently becomes another one.
struct RunSetting {
  const char* key;   // in the manifest's "run" object
  const char* flag;  // the flag that sets it, for messages
  json value;        // this run's
};

// Not here on purpose: t, p, d, virtual stages and the distributed optimizer (a checkpoint
// loads under any layout), threads, and --train-iters (a run may be extended).
std::vector<RunSetting> run_settings(const TrainingConfig& c) {
  std::vector<RunSetting> s = {
      {"seed", "--seed", c.seed},
      {"global_batch_size", "--global-batch-size", c.effective_global_batch()},
      {"micro_batch_size", "--micro-batch-size", c.micro_batch_size},
      {"seq_length", "--seq-length", c.model.seq_length},
      {"data_path", "--data-path", data_description(c)},
      {"lr", "--lr", c.lr},
      {"min_lr", "--min-lr", c.min_lr},
      {"lr_decay_style", "--lr-decay-style", c.lr_decay_style},
      {"lr_warmup_iters", "--lr-warmup-iters", c.lr_warmup_iters},
      {"lr_decay_iters", "--lr-decay-iters", c.lr_decay_iters},  // 0: --train-iters
      {"lr_warmup_samples", "--lr-warmup-samples", c.lr_warmup_samples},
      {"lr_decay_samples", "--lr-decay-samples", c.lr_decay_samples},        // 0: --train-samples
      {"lr_warmup_fraction", "--lr-warmup-fraction", c.lr_warmup_fraction},  // < 0: not given
      {"rampup_batch_size", "--rampup-batch-size", c.rampup_batch_size}};
  if (!c.mock_data) s.push_back({"split", "--split", c.split});  // mock data has no split
  return s;
}

json run_json(const TrainingConfig& c) {
  json run = json::object();
  for (const RunSetting& s : run_settings(c)) run[s.key] = s.value;
  return run;
}

// Floats (saved from float) with the fewest digits that still read back as the same float.
std::string shown(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_number_float()) return v.dump();
  char buf[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v.get<double>());
    if (std::strtof(buf, nullptr) == (float)v.get<double>()) break;
  }
  return buf;
}

// Each of this run's settings that differs from the checkpoint's, one line each. A setting
// only one side has (mock data has no split) is not compared.
std::vector<std::string> run_differences(const json& saved, const TrainingConfig& c) {
  std::vector<std::string> out;
  for (const RunSetting& s : run_settings(c))
    if (saved.contains(s.key) && saved[s.key] != s.value)
      out.push_back(std::string(s.flag) + ": checkpoint " + shown(saved[s.key]) + ", this run " +
                    shown(s.value));
  return out;
}

// Megatron's check of the checkpoint's arguments: a resume that would silently change the
// run is refused, every difference named at once, unless --override-checkpoint-config.
void check_run_settings(const json& manifest, const std::string& manifest_path,
                        const TrainingConfig& c, LoadMode mode, std::ostream& log) {
  if (mode == LoadMode::kWeightsOnly) return;
  if (!manifest.contains("run")) {
    log << "note: " << manifest_path
        << " records no run settings (older trident, or written by convert): seed, batch, data "
           "and LR schedule not compared\n";
    return;
  }
  std::vector<std::string> differences = run_differences(manifest["run"], c);
  if (mode == LoadMode::kResumeOverride) {
    for (const std::string& d : differences)
      log << "warning: --override-checkpoint-config: " << d << "\n";
    return;
  }
  if (differences.empty()) return;
  std::string message = manifest_path + ": this run differs from the checkpoint in " +
                        std::to_string(differences.size()) + " setting" +
                        (differences.size() > 1 ? "s" : "") +
                        " (--override-checkpoint-config resumes anyway, --finetune loads only "
                        "the weights):";
  for (const std::string& d : differences) message += "\n  " + d;
  throw CheckpointError(message);
}

std::string file_hash(const std::string& path, long* bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError(path + ": missing");
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

// The Llama family's options are written only when they differ from GPT-2's block, so a
// GPT-2 checkpoint's manifest is what it was before they existed.
json model_json(const ModelConfig& m) {
  json j = {{"num_layers", m.num_layers},
            {"hidden_size", m.hidden_size},
            {"num_attention_heads", m.num_attention_heads},
            {"ffn_hidden_size", m.ffn()},
            {"max_position_embeddings", m.max_positions()},
            {"vocab_size", m.vocab_size},
            {"layernorm_epsilon", m.layernorm_epsilon}};
  if (m.rms_norm()) j["normalization"] = m.normalization;
  if (m.rope()) {
    j["position_embedding_type"] = m.position_embedding_type;
    j["rotary_base"] = m.rotary_base, j["rotary_percent"] = m.rotary_percent;
  }
  if (m.swiglu) j["swiglu"] = true;
  if (m.group_query_attention) j["num_query_groups"] = m.num_query_groups;
  if (!m.tied_output()) j["untie_embeddings_and_output_weights"] = true;
  if (m.disable_bias_linear) j["disable_bias_linear"] = true;
  return j;
}

void barrier(const RankContext& rank) {
  double x = 0;
  rank.groups->world->all_reduce(&x, 1, comm::ReduceOp::kSum);
}

// The full moments of a chunk's buffer (gathered over data parallelism when sharded).
void full_moments(AdamW& opt, long size, comm::Communicator& dp, bool sharded,
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

json spec_json(const ParamSpec& s) {
  return {{"name", s.name},
          {"global_shape", s.global_shape},
          {"local_shape", s.local_shape},
          {"shard",
           {{"dim", s.shard.dim},
            {"stride", s.shard.stride},
            {"parts", s.shard.parts},
            {"rank", s.shard.rank}}}};
}

}  // namespace

bool has_checkpoint(const std::string& dir) {
  return fs::exists(fs::path(dir) / "latest");
}

std::string latest_checkpoint(const std::string& dir) {
  const fs::path latest = fs::path(dir) / "latest";
  std::ifstream in(latest);
  std::string name;
  if (!in || !std::getline(in, name))
    throw CheckpointError(latest.string() + ": missing (is " + dir + " a checkpoint directory?)");
  if (!is_iteration_name(name))
    throw CheckpointError(latest.string() + ": names '" + name +
                          "', expected a directory name iter_NNNNNNN");
  const fs::path committed = fs::path(dir) / name, aside = fs::path(dir) / (name + kAsideSuffix);
  if (!fs::exists(committed) && fs::is_directory(aside)) return aside.string();
  return committed.string();
}

void save(const std::string& dir, const TrainingConfig& c, RankModel& model,
          const TrainingState& state, const RankContext& rank, std::ostream& log, SaveFault fault) {
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
  std::vector<std::vector<float>> storage;
  std::vector<io::TensorToWrite> tensors;
  json entries = json::array();
  for (size_t j = 0; j < model.chunks.size(); ++j) {
    Parameters& params = model.chunks[j]->parameters();
    AdamW& opt = *model.optimizers[j];
    const float* moments[2] = {opt.exp_avg().data(), opt.exp_avg_sq().data()};
    if (opt.range_begin() != 0 || opt.range_end() != params.size()) {  // sharded: gather
      std::vector<float> m, v;
      full_moments(opt, params.size(), dp, c.use_distributed_optimizer, &m, &v);
      storage.push_back(std::move(m));
      storage.push_back(std::move(v));
      moments[0] = storage[storage.size() - 2].data(), moments[1] = storage.back().data();
    }
    for (const ParamSpec& s : params.layout().specs()) {
      if (!s.owned) continue;
      tensors.push_back({s.name, s.local_shape, params.values() + s.offset});
      tensors.push_back({s.name + ".exp_avg", s.local_shape, moments[0] + s.offset});
      tensors.push_back({s.name + ".exp_avg_sq", s.local_shape, moments[1] + s.offset});
      entries.push_back(spec_json(s));
    }
  }
  const std::string file =
      "model_tp" + std::to_string(tp.rank()) + "_pp" + std::to_string(pp.rank()) + ".safetensors";
  if (dp.rank() == 0) {
    XXH64_state_t* state = XXH64_createState();
    XXH64_reset(state, 0);
    long bytes = (long)io::write_safetensors(
        (tmp / file).string(), tensors, {{"format", kFormat}},
        [state](const char* data, size_t size) { XXH64_update(state, data, size); });
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)XXH64_digest(state));
    XXH64_freeState(state);
    std::string hash = hex;
    json side = {{"file", file}, {"bytes", bytes}, {"xxh64", hash}, {"tensors", entries}};
    write_file_atomically((tmp / (file + ".json")).string(), side.dump());
  }
  barrier(rank);
  if (rank.world_rank == 0) {
    json manifest = {{"format", kFormat},
                     {"version", kFormatVersion},
                     {"iteration", state.iteration},
                     {"consumed_samples", state.consumed_samples},
                     {"evaluations", state.evaluations},
                     {"lr_schedule_samples", state.lr_schedule_samples},
                     {"optimizer_steps", model.optimizers[0]->steps_taken()},
                     {"seed", c.seed},
                     {"precision", kernels::precision_name(c.precision())},
                     // fp16 loss scaler: resuming continues its schedule exactly.
                     {"loss_scaler",
                      {{"scale", model.scaler.state().scale},
                       {"growth_tracker", model.scaler.state().growth_tracker},
                       {"hysteresis_tracker", model.scaler.state().hysteresis_tracker},
                       {"skipped_iterations", model.scaler.state().skipped}}},
                     // Dropout masks are a function of (seed, site, sample index); the
                     // counter that moves them on is consumed_samples.
                     {"dropout",
                      {{"hidden", c.hidden_dropout},
                       {"attention", c.attention_dropout},
                       {"generator", "philox4x32-10"},
                       {"seed", c.dropout().seed},
                       {"counter", "consumed_samples"}}},
                     {"model", model_json(c.model)},
                     {"layout",
                      {{"tensor", c.tensor_model_parallel_size},
                       {"pipeline", c.pipeline_model_parallel_size},
                       {"data", c.data_parallel_size()},
                       {"virtual_stages", c.virtual_stages()},
                       {"distributed_optimizer", c.use_distributed_optimizer}}},
                     {"files", json::array()}};
    // A checkpoint written outside training (convert) has no data and so no run settings;
    // loading it compares none.
    if (c.mock_data || !c.data_path.empty()) manifest["run"] = run_json(c);
    for (auto& entry : fs::directory_iterator(tmp)) {
      if (entry.path().extension() != ".json") continue;
      std::ifstream in(entry.path());
      manifest["files"].push_back(json::parse(in));
      fs::remove(entry.path());
    }
    write_file_atomically((tmp / "manifest.json").string(), manifest.dump(1));
    if (fault == SaveFault::kBeforeCommit) std::_Exit(9);
    commit(dir, tmp, name, fault);
    if (c.keep_checkpoints > 0) remove_old_checkpoints(dir, c.keep_checkpoints);
    double bytes = 0;
    for (auto& e : fs::directory_iterator(final_dir)) bytes += (double)fs::file_size(e.path());
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    log << "saved checkpoint " << final_dir.string() << " (" << bytes / 1e6 << " MB in " << seconds
        << " s, " << bytes / 1e6 / seconds << " MB/s)\n";
  }
  barrier(rank);
}

namespace {

struct Piece {
  const io::SafetensorsFile* file;
  ParamSpec spec;  // global shape, local shape and shard as saved
};

std::string shape_string(const std::vector<long>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
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

}  // namespace

TrainingState load(const std::string& dir, const TrainingConfig& c, RankModel& model,
                   const RankContext& rank, std::ostream& log, LoadMode mode,
                   const std::function<void(double)>& progress) {
  const auto started = std::chrono::steady_clock::now();
  auto fail = [](const std::string& why) -> void { throw CheckpointError(why); };
  const fs::path ckpt = latest_checkpoint(dir);
  if (ckpt.extension() == kAsideSuffix)
    log << "note: a save of " << ckpt.stem().string() << " was interrupted mid-commit: loading "
        << ckpt.string() << "\n";
  const std::string manifest_path = (ckpt / "manifest.json").string();
  const json manifest = read_manifest(ckpt.string());
  if (manifest["version"] != kFormatVersion)
    fail(manifest_path + ": format version " + manifest["version"].dump() +
         ", this trident reads " + std::to_string(kFormatVersion));
  if (manifest["model"] != model_json(c.model))
    fail(manifest_path + ": the model config " + manifest["model"].dump() +
         " does not match this run's " + model_json(c.model).dump());
  check_run_settings(manifest, manifest_path, c, mode, log);
  // The files holding a piece of a tensor this rank needs are checked (size, checksum,
  // header) before anything changes; with an unchanged layout that is one file per rank.
  // Which files to read: for each tensor this rank holds, the file with exactly its slice if
  // the layout is unchanged, else every file holding a piece of it. Only those are checked
  // (size, checksum, header) and read, all before anything changes.
  auto same_slice = [](const ParamSpec& a, const ParamSpec& b) {
    return a.global_shape == b.global_shape && a.local_shape == b.local_shape &&
           a.shard.dim == b.shard.dim && a.shard.rank == b.shard.rank &&
           a.shard.parts == b.shard.parts && a.shard.stride == b.shard.stride;
  };
  std::set<std::string> needed;
  std::set<size_t> wanted_files;
  const json& manifest_files = manifest["files"];
  for (const auto& chunk : model.chunks)
    for (const ParamSpec& mine : chunk->parameters().layout().specs()) {
      needed.insert(mine.name);
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
      wanted_files.insert(holders.begin(), holders.end());
    }
  std::vector<std::unique_ptr<io::SafetensorsFile>> files;
  std::map<std::string, std::vector<Piece>> pieces;
  for (size_t fi = 0; fi < manifest_files.size(); ++fi) {
    const json& f = manifest_files[fi];
    if (!wanted_files.count(fi)) continue;
    const std::string path = (ckpt / f["file"].get<std::string>()).string();
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
      files.push_back(std::make_unique<io::SafetensorsFile>(path));
    } catch (const FormatError& e) {
      fail(e.what());
    }
    for (const json& t : f["tensors"]) {
      ParamSpec s = manifest_spec(t);
      for (const char* suffix : {"", ".exp_avg", ".exp_avg_sq"}) {
        const io::TensorEntry* t = files.back()->find(s.name + suffix);
        if (!t) fail(path + ": missing tensor " + s.name + suffix);
        // What is read below relies on the manifest's shape: the file must agree.
        if (t->shape != s.local_shape || t->dtype != "F32")
          fail(path + ": tensor " + t->name + " is " + t->dtype + " " + shape_string(t->shape) +
               ", the manifest says F32 " + shape_string(s.local_shape));
      }
      std::vector<Piece>& held = pieces[s.name];
      if (!held.empty() && held.front().spec.global_shape != s.global_shape)
        fail(manifest_path + ": tensor " + s.name + " has global shape " +
             shape_string(held.front().spec.global_shape) + " in one file and " +
             shape_string(s.global_shape) + " in " + path);
      held.push_back({files.back().get(), s});
    }
  }
  for (const std::string& n : needed)
    if (!pieces.count(n)) fail(manifest_path + ": no tensor " + n);
  // Everything is checked: from here on nothing can fail, so tensors go straight into place.
  const char* suffixes[3] = {"", ".exp_avg", ".exp_avg_sq"};
  std::vector<float> local;
  for (size_t j = 0; j < model.chunks.size(); ++j) {
    Parameters& params = model.chunks[j]->parameters();
    // A model built for generation has no optimizer: it can only take the weights.
    AdamW* opt = j < model.optimizers.size() ? model.optimizers[j].get() : nullptr;
    if (!opt && mode != LoadMode::kWeightsOnly)
      throw std::logic_error("checkpoint::load: resuming needs the model's optimizers");
    FirstTouchVector<float>* moments[2] = {opt ? &opt->exp_avg() : nullptr,
                                           opt ? &opt->exp_avg_sq() : nullptr};
    const double chunk_share = 1.0 / (double)model.chunks.size();
    for (const ParamSpec& s : params.layout().specs()) {
      if (progress) progress(chunk_share * ((double)j + (double)s.offset / (double)params.size()));
      const std::vector<Piece>& parts = pieces.at(s.name);
      const Piece* exact = nullptr;
      for (const Piece& p : parts)
        if (same_slice(p.spec, s)) exact = &p;
      for (int k = 0; k < 3; ++k) {
        local.resize(s.numel());
        if (exact) {  // a rank saved exactly this slice
          exact->file->copy_float(*exact->file->find(s.name + suffixes[k]), local.data());
        } else {
          std::vector<float> global = global_tensor(parts, suffixes[k]);
          // The padded vocabulary depends on t: rows beyond the saved ones are padding.
          for (long i = 0; i < s.numel(); ++i) {
            long g = s.global_index(i);
            local[i] = g < (long)global.size() ? global[g] : 0.f;
          }
        }
        if (k == 0) {
          std::copy(local.begin(), local.end(), params.values() + s.offset);
          if (mode == LoadMode::kWeightsOnly) break;  // the moments stay zero: a fresh optimizer
          continue;
        }
        // Moments: only the part inside this rank's optimizer range (its shard).
        long lo = std::max(opt->range_begin(), s.offset);
        long hi = std::min(opt->range_end(), s.offset + s.numel());
        for (long g = lo; g < hi; ++g)
          (*moments[k - 1])[g - opt->range_begin()] = local[g - s.offset];
      }
    }
    if (mode != LoadMode::kWeightsOnly)
      opt->set_steps_taken(manifest["optimizer_steps"].get<long>());
  }
  if (mode == LoadMode::kWeightsOnly) {
    log << "loaded the weights of checkpoint " << ckpt.string() << " (iteration "
        << manifest["iteration"] << "); iteration, data position, optimizer and loss scale start "
        << "afresh\n";
    return {};
  }
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
                                  : state.consumed_samples - skipped * c.effective_global_batch();
  log << "loaded checkpoint " << ckpt.string() << " (iteration " << state.iteration
      << ", saved under t=" << manifest["layout"]["tensor"]
      << " p=" << manifest["layout"]["pipeline"] << " d=" << manifest["layout"]["data"] << "; "
      << std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()
      << " s)\n";
  return state;
}

}  // namespace trident::checkpoint
