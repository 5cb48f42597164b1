#include "data/dataset_builder.h"

#include <cmath>
#include <ostream>
#include <stdexcept>

#include "data/blended_dataset.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset.h"
#include "data/packed_dataset.h"

namespace trident::data {

namespace {
constexpr double kSurplus = 0.005;  // Megatron asks each blended dataset for 0.5% extra
const char* kSplitNames[3] = {"train", "valid", "test"};
}  // namespace

std::vector<WeightedPrefix> parse_data_path(const std::vector<std::string>& args) {
  if (args.size() == 1) return {{1.0, args[0]}};
  if (args.empty() || args.size() % 2)
    throw std::invalid_argument("--data-path takes one prefix, or weight/prefix pairs (got " +
                                std::to_string(args.size()) + " values)");
  std::vector<WeightedPrefix> out;
  for (size_t i = 0; i < args.size(); i += 2) {
    double w = 0;
    size_t used = 0;
    try {
      w = std::stod(args[i], &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != args[i].size() || !(w > 0) || !std::isfinite(w))
      throw std::invalid_argument("--data-path weight '" + args[i] + "' (before " + args[i + 1] +
                                  ") must be a positive number");
    out.push_back({w, args[i + 1]});
  }
  return out;
}

std::string loss_mask_prefix(const std::string& prefix) {
  const std::string suffix = "_document";
  if (prefix.size() > suffix.size() &&
      prefix.compare(prefix.size() - suffix.size(), suffix.size(), suffix) == 0)
    return prefix.substr(0, prefix.size() - suffix.size()) + "_loss_mask";
  return prefix + "_loss_mask";
}

namespace {

// A loss mask must hold one value per token of its dataset.
std::shared_ptr<const IndexedDataset> open_loss_mask(const std::string& prefix,
                                                     const IndexedDataset& tokens) {
  const std::string path = loss_mask_prefix(prefix);
  auto mask = std::make_shared<const IndexedDataset>(path);
  bool same = mask->sequences() == tokens.sequences();
  for (long i = 0; same && i < tokens.sequences(); ++i) same = mask->size(i) == tokens.size(i);
  if (!same)
    throw DatasetError(path + ": the loss mask's documents differ in number or length from " +
                       prefix + "'s");
  return mask;
}

}  // namespace

DataSplits build_gpt_datasets(const DataRequest& r, std::ostream& log) {
  std::vector<WeightedPrefix> inputs = parse_data_path(r.data_path);
  std::vector<double> split = parse_split(r.split);
  double total_weight = 0;
  for (const WeightedPrefix& p : inputs) total_weight += p.weight;
  // per split: the datasets contributing and their weights
  std::vector<std::vector<std::shared_ptr<SampleSource>>> parts(3);
  std::vector<std::vector<double>> weights(3);
  for (const WeightedPrefix& p : inputs) {
    auto data = std::make_shared<const IndexedDataset>(p.prefix);
    std::shared_ptr<const IndexedDataset> mask;
    if (r.loss_masks) mask = open_loss_mask(p.prefix, *data);
    auto ranges = split_ranges(split, data->sequences());
    log << "dataset " << p.prefix << ": " << data->sequences() << " documents; split "
        << ranges[0].second - ranges[0].first << " / " << ranges[1].second - ranges[1].first
        << " / " << ranges[2].second - ranges[2].first << "\n";
    for (int s = 0; s < 3; ++s) {
      if (r.samples[s] == 0 || split[s] == 0) continue;
      long n = inputs.size() == 1
                   ? r.samples[s]
                   : (long)std::ceil(r.samples[s] * p.weight / total_weight * (1 + kSurplus));
      GPTDatasetSpec spec{kSplitNames[s], ranges[s].first, ranges[s].second, n,
                          r.seq_length,   r.seed,          r.cache_path};
      if (r.pack_documents) {
        PackedDatasetSpec packed{kSplitNames[s], ranges[s].first, ranges[s].second, n,
                                 r.seq_length,   r.seed,          r.pad_id};
        auto dataset = std::make_shared<PackedDataset>(data, mask, packed);
        log << "dataset " << p.prefix << " (" << kSplitNames[s] << "): " << dataset->bins().size()
            << " packed samples of whole documents\n";
        parts[s].push_back(dataset);
      } else {
        auto dataset = std::make_shared<GPTDataset>(data, spec, &log);
        if (mask) dataset->set_loss_mask(mask);
        parts[s].push_back(dataset);
      }
      weights[s].push_back(p.weight);
    }
  }
  DataSplits out;
  std::shared_ptr<SampleSource>* slots[3] = {&out.train, &out.valid, &out.test};
  for (int s = 0; s < 3; ++s) {
    if (parts[s].empty()) continue;
    *slots[s] = parts[s].size() == 1
                    ? parts[s][0]
                    : std::make_shared<BlendedDataset>(parts[s], weights[s], r.samples[s]);
  }
  return out;
}

}  // namespace trident::data
