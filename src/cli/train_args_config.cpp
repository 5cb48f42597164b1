#include "cli/train_args_config.h"

#include <algorithm>
#include <map>

namespace trident::cli {

namespace {

// Flags that set one thing each way: given on the command line, any of them replaces the
// config's others (a length in iterations replaces one in samples, --mock-data a data path).
const std::vector<std::vector<std::string>> kConcepts = {
    {"train-iters", "train-samples"},
    {"lr-warmup-iters", "lr-warmup-samples", "lr-warmup-fraction"},
    {"lr-decay-iters", "lr-decay-samples"},
    {"lr-wsd-decay-iters", "lr-wsd-decay-samples"},
    {"bf16", "fp16"},
    {"mock-data", "data-path"},
    {"norm-epsilon", "layernorm-epsilon"},
};

// Sample counts stay below 2^62 (the training config's rules say so to the user).
constexpr double kMaxSamples = 4611686018427387904.0;

std::string dashes_for_underscores(std::string s) {
  std::replace(s.begin(), s.end(), '_', '-');
  return s;
}

long edit_distance(const std::string& a, const std::string& b) {
  std::vector<long> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = (long)j;
  for (size_t i = 1; i <= a.size(); ++i) {
    long diagonal = row[0];
    row[0] = (long)i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const long above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string joined(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) out += (out.empty() ? "" : ", ") + v;
  return values.size() > 1 ? "[" + out + "]" : out;
}

// The config's keys are the flags' long names; `--lr = ...` is read as `lr` (as CLI11 does).
std::string key_of(const std::string& name) {
  return name.rfind("--", 0) == 0 ? name.substr(2) : name;
}

std::vector<std::string> flag_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options())
    if (opt->get_configurable())
      for (const std::string& n : opt->get_lnames()) names.push_back(n);
  return names;
}

// "unknown key 'hiden-size': did you mean 'hidden-size' (--hidden-size)?"
std::string unknown_key(const std::string& where, const std::string& key, const CLI::App& app) {
  const std::string near = nearest_name(key, flag_names(app));
  return where + "unknown key '" + key + "'" +
         (near.empty() ? " (no flag is near it; `trident train --help` lists them)"
                       : ": did you mean '" + near + "' (--" + near + ")?");
}

}  // namespace

const ConfigOverrides::Replaced* ConfigOverrides::find(const std::string& key) const {
  for (const Replaced& r : replaced)
    if (r.key == key) return &r;
  return nullptr;
}

std::string nearest_name(const std::string& name, const std::vector<std::string>& names) {
  const std::string wanted = dashes_for_underscores(name);
  std::string best;
  long best_distance = std::max(2L, (long)wanted.size() / 3) + 1;  // beyond: not a misspelling
  for (const std::string& n : names) {
    const long d = edit_distance(wanted, n);
    if (d < best_distance) best = n, best_distance = d;
  }
  return best;
}

std::string TrainConfigFile::current_file() const {
  const CLI::Option* opt = app_.get_config_ptr();
  const std::vector<std::string> files =
      opt ? opt->as<std::vector<std::string>>() : std::vector<std::string>();
  const int k = (int)files.size() - 1 - files_read_;  // CLI11 reads them last to first
  return k >= 0 && k < (int)files.size() ? files[k] : "the config file";
}

std::vector<CLI::ConfigItem> TrainConfigFile::from_config(std::istream& input) const {
  std::vector<CLI::ConfigItem> items = CLI::ConfigTOML::from_config(input);
  if (files_read_ == 0)  // before any file's values: what the command line gave
    for (const CLI::Option* opt : app_.get_options())
      if (opt->count() > 0)
        for (const std::string& n : opt->get_lnames()) given_.insert(n);
  overrides_.file = current_file();
  ++files_read_;
  std::vector<std::string> problems;
  std::set<std::string> tables;
  std::vector<CLI::ConfigItem> kept;
  for (const CLI::ConfigItem& item : items) {
    const std::string key = key_of(item.name);
    if (!item.parents.empty()) {
      const std::string table = "[" + CLI::detail::join(item.parents, ".") + "]";
      if (tables.insert(table).second)
        problems.push_back(table +
                           ": a table; the config has none, write its keys at the top "
                           "level");
      const bool section_mark = item.name == "++" || item.name == "--";  // opens or closes it
      if (!section_mark && !app_.get_option_no_throw("--" + key))
        problems.push_back(unknown_key(table + " ", key, app_));
      continue;
    }
    if (item.name == "--" || item.name == "++") continue;  // a section's end: no key
    // CLI11 2.1 handed `key = []` to the option as no values, whose conversion then read the
    // first of none (a crash fuzz/fuzz_train_config.cpp found).
    if (item.inputs.empty()) {
      problems.push_back(item.name + " = []: an empty list is no value (leave the key out)");
      continue;
    }
    if (!app_.get_option_no_throw("--" + key)) {
      problems.push_back(unknown_key("", key, app_));
      continue;
    }
    const std::string by = replacing_flag(key);
    if (!by.empty()) {
      overrides_.replaced.push_back({key, joined(item.inputs), by});
      continue;
    }
    overrides_.applied.insert(key);
    kept.push_back(item);
  }
  if (problems.empty()) return kept;
  std::string message = overrides_.file + ": " + std::to_string(problems.size()) + " problem" +
                        (problems.size() > 1 ? "s" : "") +
                        " (its keys are `trident train`'s flags without the leading --):";
  for (const std::string& p : problems) message += "\n  - " + p;
  throw CLI::ConfigError(message);
}

// The command-line flag that replaces the config's `key`, or "" when none does. The key's
// own flag is not among them: CLI11 already prefers the command line's value to it.
std::string TrainConfigFile::replacing_flag(const std::string& key) const {
  for (const std::vector<std::string>& same : kConcepts) {
    if (std::find(same.begin(), same.end(), key) == same.end()) continue;
    for (const std::string& other : same)
      if (other != key && given_.count(other)) return "--" + other;
  }
  return "";
}

namespace {

// The samples of the first `iterations` iterations: the fewest samples the schedule counts
// as that many iterations (a bisection: iterations_for never decreases with samples).
long samples_of_iterations(const GlobalBatchSchedule& schedule, long iterations) {
  long lo = 0, hi = iterations * schedule.final_size();
  while (lo < hi) {
    const long mid = lo + (hi - lo) / 2;
    if (schedule.iterations_for(mid) >= iterations)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// --train-iters N over the config's train-samples: N iterations' samples of its schedule.
std::string keep_sample_based(train::TrainingConfig& c) {
  const long n = c.train_iters;
  if (n <= 0 || c.effective_global_batch() <= 0 ||
      (double)n * c.effective_global_batch() >= kMaxSamples)
    return "";  // the rules refuse the length itself
  try {
    c.train_samples = samples_of_iterations(c.batch_schedule(), n);
  } catch (const std::exception&) {
    return "";  // an invalid ramp-up: the rules say why
  }
  c.train_iters = 0;
  return ": the run stays sample-based, its " + std::to_string(n) + " iterations being " +
         std::to_string(c.train_samples) +
         " samples of the batch schedule (the config's ramp-up and LR schedule in samples stay)";
}

// --train-samples over the config's train-iters: the config's warm-up and decay in
// iterations become samples at the global batch, as Megatron's scheduler counts them.
std::string iterations_to_samples(const ConfigOverrides& o, train::TrainingConfig& c) {
  const long gbs = c.effective_global_batch();
  std::string changed;
  auto convert = [&](const char* key, long& iterations, long& samples) {
    if (!o.applied.count(key) || iterations <= 0 || (double)iterations * gbs >= kMaxSamples) return;
    samples = iterations * gbs;
    changed += std::string(changed.empty() ? "" : " and ") + key + " " +
               std::to_string(iterations) + " become " + std::to_string(samples) + " samples";
    iterations = 0;
  };
  convert("lr-warmup-iters", c.lr_warmup_iters, c.lr_warmup_samples);
  convert("lr-decay-iters", c.lr_decay_iters, c.lr_decay_samples);
  convert("lr-wsd-decay-iters", c.lr_wsd_decay_iters, c.lr_wsd_decay_samples);
  if (changed.empty()) return "";
  return ": the config's " + changed + " (x the global batch " + std::to_string(gbs) + ")";
}

}  // namespace

std::vector<std::string> apply_config_overrides(const ConfigOverrides& o,
                                                train::TrainingConfig& c) {
  std::vector<std::string> notes;
  for (const ConfigOverrides::Replaced& r : o.replaced) {
    std::string note =
        r.flag + " on the command line replaces " + r.key + " = " + r.value + " of " + o.file;
    if (r.key == "train-samples" && r.flag == "--train-iters") note += keep_sample_based(c);
    if (r.key == "train-iters" && r.flag == "--train-samples") note += iterations_to_samples(o, c);
    notes.push_back(note);
  }
  return notes;
}

}  // namespace trident::cli
