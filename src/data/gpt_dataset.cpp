#include "data/gpt_dataset.h"

#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <regex>
#include <sstream>

#include "config/token_flags.h"
#include "core/files.h"
#include "core/random.h"
#include "data/numpy_random.h"
#include "io/npy.h"

namespace trident::data {

namespace fs = std::filesystem;

namespace {

constexpr int kExtraToken = 1;  // samples hold seq_length + 1 tokens (inputs + targets)
constexpr double kSeparateThreshold = 0.80;  // Megatron's final-epoch separation rule

std::string file_stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "missing";
  return std::to_string(st.st_size) + "@" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

std::vector<std::int32_t> build_document_index(long first, long end, int epochs,
                                               NumpyRandomState& rng, bool separate_last) {
  if (!separate_last || epochs == 1) {
    std::vector<std::int32_t> index;
    index.reserve((size_t)(end - first) * epochs);
    for (int e = 0; e < epochs; ++e)
      for (long d = first; d < end; ++d) index.push_back((std::int32_t)d);
    rng.shuffle(index);
    return index;
  }
  std::vector<std::int32_t> head = build_document_index(first, end, epochs - 1, rng, false);
  std::vector<std::int32_t> last = build_document_index(first, end, 1, rng, false);
  head.insert(head.end(), last.begin(), last.end());
  return head;
}

std::vector<std::int64_t> build_shuffle_index(long num_samples, long total, NumpyRandomState& rng) {
  std::vector<std::int64_t> first(num_samples);
  for (long i = 0; i < num_samples; ++i) first[i] = i;
  rng.shuffle(first);
  if (num_samples == total) return first;
  std::vector<std::int64_t> last(total - num_samples);
  for (long i = num_samples; i < total; ++i) last[i - num_samples] = i;
  rng.shuffle(last);
  first.insert(first.end(), last.begin(), last.end());
  return first;
}

}  // namespace

std::vector<double> parse_split(const std::string& split) {
  static const std::regex number(R"([0-9]*\.?[0-9]+)");
  std::vector<double> w;
  std::string rest = std::regex_replace(split, number, "");
  if (rest.find_first_not_of(", /") != std::string::npos)
    throw std::invalid_argument("--split '" + split +
                                "' must be up to three non-negative numbers, e.g. 969,30,1");
  for (auto it = std::sregex_iterator(split.begin(), split.end(), number);
       it != std::sregex_iterator(); ++it)
    w.push_back(std::stod(it->str()));
  if (w.empty() || w.size() > 3)
    throw std::invalid_argument("--split '" + split +
                                "' must be one to three numbers (train, valid, test)");
  double sum = 0;
  for (double x : w) sum += x;
  if (sum <= 0) throw std::invalid_argument("--split '" + split + "' must have a positive sum");
  w.resize(3, 0.0);
  for (double& x : w) x /= sum;
  return w;
}

std::vector<std::pair<long, long>> split_ranges(const std::vector<double>& weights, long n) {
  std::vector<long> bounds = {0};
  for (double w : weights) bounds.push_back(bounds.back() + (long)std::llround(w * (double)n));
  long diff = bounds.back() - n;
  for (size_t i = 1; i < bounds.size(); ++i) bounds[i] -= diff;
  std::vector<std::pair<long, long>> ranges;
  for (size_t i = 0; i + 1 < bounds.size(); ++i) ranges.emplace_back(bounds[i], bounds[i + 1]);
  return ranges;
}

GPTDataset::GPTDataset(std::shared_ptr<const IndexedDataset> data, const GPTDatasetSpec& spec,
                       std::ostream* log)
    : data_(std::move(data)), spec_(spec) {
  if (spec.end_sequence <= spec.first_sequence)
    throw DatasetError(data_->prefix() + ": the " + spec.split_name + " split has no documents");
  long tokens = 0;
  for (long d = spec.first_sequence; d < spec.end_sequence; ++d) tokens += data_->size(d);
  if (tokens <= spec.seq_length)
    throw DatasetError(data_->prefix() + ": the " + spec.split_name + " split has " +
                       std::to_string(tokens) + " tokens, fewer than one sample of " +
                       std::to_string(spec.seq_length + 1));
  nlohmann::ordered_json desc = {{"class", "GPTDataset"},
                                 {"format", 1},
                                 {"path", fs::absolute(data_->prefix()).string()},
                                 {"idx", file_stamp(data_->prefix() + ".idx")},
                                 {"bin", file_stamp(data_->prefix() + ".bin")},
                                 {"split", spec.split_name},
                                 {"sequences", {spec.first_sequence, spec.end_sequence}},
                                 {"num_samples", spec.num_samples},
                                 {"seq_length", spec.seq_length},
                                 {"seed", spec.seed},
                                 {"add_extra_token", kExtraToken}};
  const std::string description = desc.dump(2);
  std::string dir = spec.cache_dir.empty()
                        ? (fs::path(data_->prefix()).parent_path() / "cache").string()
                        : spec.cache_dir;
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", (unsigned long long)hash_string(description));
  cache_prefix_ = (fs::path(dir) / (std::string(hash) + "-GPTDataset-" + spec.split_name)).string();
  if (load_cache(description)) {
    from_cache_ = true;
    if (log)
      *log << "dataset " << spec.split_name << ": loaded indices from " << cache_prefix_ << "-*\n";
    return;
  }
  build();
  try {
    fs::create_directories(dir);
    save_cache(description);
    if (log)
      *log << "dataset " << spec.split_name << ": built indices, cached at " << cache_prefix_
           << "-*\n";
  } catch (const std::exception& e) {
    if (log)
      *log << "dataset " << spec.split_name << ": built indices (not cached: " << e.what() << ")\n";
  }
}

void GPTDataset::build() {
  const long first = spec_.first_sequence, end = spec_.end_sequence;
  const int seq = spec_.seq_length;
  long tokens_per_epoch = 0;
  for (long d = first; d < end; ++d) tokens_per_epoch += data_->size(d);
  int epochs = 1;
  const long requested = spec_.num_samples * seq + kExtraToken;
  for (long t = tokens_per_epoch; t < requested; t += tokens_per_epoch) ++epochs;
  bool separate_last = false;
  if (epochs > 1) {
    long without_last = ((epochs - 1) * tokens_per_epoch - kExtraToken) / seq;
    long from_last = spec_.num_samples - without_last;
    long per_epoch = (tokens_per_epoch - kExtraToken) / seq;
    separate_last = from_last < (long)(kSeparateThreshold * per_epoch);
  }
  NumpyRandomState rng(spec_.seed);
  document_index_ = build_document_index(first, end, epochs, rng, separate_last);

  // Sample boundaries (Megatron's build_sample_idx, dropping the last partial sample).
  const long num_samples = ((long)epochs * tokens_per_epoch - kExtraToken) / seq;
  sample_index_.assign(2 * (num_samples + 1), 0);
  long doc_pos = 0, offset = 0;
  for (long s = 1; s <= num_samples; ++s) {
    long remaining = seq + kExtraToken;
    while (remaining != 0) {
      long length = data_->size(document_index_[doc_pos]) - offset;
      remaining -= length;
      if (remaining <= 0) {
        offset += remaining + length - kExtraToken;
        remaining = 0;
      } else {
        if (++doc_pos >= (long)document_index_.size())
          throw std::logic_error("sample index ran past the document index");
        offset = 0;
      }
    }
    sample_index_[2 * s] = doc_pos;
    sample_index_[2 * s + 1] = offset;
  }
  long shuffled = num_samples;
  if (separate_last) shuffled = ((epochs - 1) * tokens_per_epoch - kExtraToken) / seq;
  shuffle_index_ = build_shuffle_index(shuffled, num_samples, rng);
}

bool GPTDataset::load_cache(const std::string& description) {
  std::ifstream in(cache_prefix_ + "-description.json");
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str() != description) return false;
  try {
    io::NpyArray doc = io::read_npy(cache_prefix_ + "-document_index.npy");
    io::NpyArray smp = io::read_npy(cache_prefix_ + "-sample_index.npy");
    io::NpyArray shf = io::read_npy(cache_prefix_ + "-shuffle_index.npy");
    if (smp.shape.size() != 2 || smp.shape[1] != 2 || shf.shape.size() != 1) return false;
    const long n = smp.shape[0] - 1;
    for (std::int64_t d : doc.values)
      if (d < spec_.first_sequence || d >= spec_.end_sequence) return false;
    for (std::int64_t s : shf.values)
      if (s < 0 || s >= n) return false;
    for (long s = 0; s <= n; ++s)
      if (smp.values[2 * s] < 0 || smp.values[2 * s] >= (long)doc.values.size()) return false;
    document_index_.assign(doc.values.begin(), doc.values.end());
    sample_index_ = std::move(smp.values);
    shuffle_index_ = std::move(shf.values);
    return true;
  } catch (const std::exception&) {
    return false;  // unreadable cache: rebuild
  }
}

void GPTDataset::save_cache(const std::string& description) const {
  std::vector<std::int64_t> doc(document_index_.begin(), document_index_.end());
  io::write_npy(cache_prefix_ + "-document_index.npy", "<i4", {(long)doc.size()}, doc);
  io::write_npy(cache_prefix_ + "-sample_index.npy", "<i8", {(long)sample_index_.size() / 2, 2},
                sample_index_);
  io::write_npy(cache_prefix_ + "-shuffle_index.npy", "<i8", {(long)shuffle_index_.size()},
                shuffle_index_);
  // The description goes last: its presence says the three arrays are complete.
  write_file_atomically(cache_prefix_ + "-description.json", description);
}

void GPTDataset::read_sample(const IndexedDataset& from, long index,
                             std::vector<int>* values) const {
  long s = shuffle_index_[index];
  long doc_first = sample_index_[2 * s], offset_first = sample_index_[2 * s + 1];
  long doc_last = sample_index_[2 * s + 2], offset_last = sample_index_[2 * s + 3];
  values->clear();
  if (doc_first == doc_last) {
    from.read(document_index_[doc_first], offset_first, offset_last - offset_first + kExtraToken,
              values);
  } else {
    long d = document_index_[doc_first];
    from.read(d, offset_first, from.size(d) - offset_first, values);
    for (long k = doc_first + 1; k < doc_last; ++k)
      from.read(document_index_[k], 0, from.size(document_index_[k]), values);
    from.read(document_index_[doc_last], 0, offset_last + kExtraToken, values);
  }
  if ((long)values->size() != spec_.seq_length + kExtraToken)
    throw std::logic_error("sample " + std::to_string(index) + " has " +
                           std::to_string(values->size()) + " tokens");
}

void GPTDataset::sample(long index, int* out) const {
  if (index < 0 || index >= size())
    throw std::out_of_range(spec_.split_name + " sample " + std::to_string(index) + " of " +
                            std::to_string(size()));
  thread_local std::vector<int> tokens, mask;
  read_sample(*data_, index, &tokens);
  if (loss_mask_) read_sample(*loss_mask_, index, &mask);
  for (size_t k = 0; k < tokens.size(); ++k)
    out[k] = loss_mask_ && mask[k] == 0 ? tokens[k] | kUncountedTarget : tokens[k];
}

}  // namespace trident::data
