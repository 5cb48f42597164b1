#pragma once
// `trident train --config FILE`: the TOML file's keys are the flags without their leading --,
// checked before any is applied. A key that names no flag, or a table, is an error naming
// the file, the key and the nearest flag: a misspelled key would otherwise leave its
// setting at the default and train another model than the one written down. A flag given
// on the command line replaces the config's keys of the same concept (training length,
// warm-up, decay, precision, data source, norm epsilon), not only the key of its own name.
#include <CLI/CLI.hpp>
#include <set>
#include <string>
#include <vector>

#include "train/training_config.h"

namespace trident::cli {

// What the config file left to the command line.
struct ConfigOverrides {
  struct Replaced {
    std::string key;    // the config's, e.g. "train-samples"
    std::string value;  // as written, e.g. "4320"
    std::string flag;   // the command line's that replaced it, e.g. "--train-iters"
  };
  std::string file;
  std::vector<Replaced> replaced;
  std::set<std::string> applied;  // the config's keys that were set

  const Replaced* find(const std::string& key) const;
};

// The key, or the flag, among `names` nearest to `name` (underscores read as dashes); empty
// when none is near enough to be a likely misspelling.
std::string nearest_name(const std::string& name, const std::vector<std::string>& names);

// CLI11's TOML reader with trident's rules: every key must be a flag of `app`, no tables,
// no empty lists; keys of a concept the command line set are left out (recorded in
// overrides()). Reads each config file after the command line is parsed (CLI11's order).
class TrainConfigFile : public CLI::ConfigTOML {
 public:
  explicit TrainConfigFile(const CLI::App& app) : app_(app) {}
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override;
  const ConfigOverrides& overrides() const { return overrides_; }

 private:
  std::string current_file() const;
  std::string replacing_flag(const std::string& key) const;
  const CLI::App& app_;
  // from_config is const in CLI11's interface; what it learns is kept for after the parse.
  mutable ConfigOverrides overrides_;
  mutable std::set<std::string> given_;  // the flags the command line gave (long names)
  mutable int files_read_ = 0;
};

// After parsing: a command-line length of the other kind than the config's is carried
// over so that the config's schedule still holds. --train-iters N over a config's
// train-samples keeps the run sample-based (its ramp-up and sample-based LR schedule stay
// valid) with the samples of the first N iterations; --train-samples over a config's
// train-iters turns the config's lr-warmup-iters / lr-decay-iters into samples at the
// global batch (Megatron's conversion). Returns one note per replaced key, for the log.
std::vector<std::string> apply_config_overrides(const ConfigOverrides& overrides,
                                                train::TrainingConfig& c);

}  // namespace trident::cli
