#include "engine/pipeline_split.h"

#include <algorithm>
#include <cmath>

#include "engine/rank_layout.h"
#include "model/flops.h"

namespace trident::engine {

std::vector<int> decoder_split(int num_layers, int stages, int first, int last) {
  if (stages < 2 || first < 0 || last < 0) return {};
  const int given = (first > 0) + (last > 0), others = stages - given;
  const long rest = (long)num_layers - first - last;
  if (rest < 0 || (others == 0 && rest != 0) || (others > 0 && (rest % others || rest == 0)))
    return {};
  std::vector<int> split(stages, others > 0 ? (int)(rest / others) : 0);
  if (first > 0) split.front() = first;
  if (last > 0) split.back() = last;
  return split;
}

std::vector<int> account_for_split(int num_layers, int stages, int virtual_stages, bool embedding,
                                   bool loss) {
  const long chunks = (long)stages * virtual_stages;
  const long counted = (long)num_layers + embedding + loss;
  if (chunks <= 0 || num_layers <= 0 || counted % chunks) return {};
  std::vector<int> split(chunks, (int)(counted / chunks));
  split.front() -= embedding;
  split.back() -= loss;
  for (int n : split)
    if (n < 1) return {};
  return split;
}

StageCosts model_stage_costs(const ModelConfig& m, int tensor, bool full_recompute) {
  StageCosts c;
  const double layer_passes = full_recompute ? 4 : 3;
  c.layers.resize(std::max(0, m.num_layers));
  for (int layer = 0; layer < m.num_layers; ++layer)
    c.layers[layer] = layer_passes * layer_forward_flops_per_token(m, layer, m.seq_length);
  c.last_extra = 3 * logits_forward_flops_per_token(m, m.padded_vocab_size(tensor));
  return c;
}

std::vector<double> stage_costs(const StageCosts& costs, const std::vector<int>& split) {
  std::vector<double> out(split.size(), 0.0);
  for (size_t s = 0, layer = 0; s < split.size(); ++s)
    for (int k = 0; k < split[s]; ++k) out[s] += costs.layers[layer++];
  if (!out.empty()) out.front() += costs.first_extra, out.back() += costs.last_extra;
  return out;
}

namespace {

// Prefix sums: cost of layers [a, b) is sum[b] - sum[a].
std::vector<double> prefix_sums(const std::vector<double>& layers) {
  std::vector<double> sum(layers.size() + 1, 0.0);
  for (size_t i = 0; i < layers.size(); ++i) sum[i + 1] = sum[i] + layers[i];
  return sum;
}

// The most layers stage s (starting at layer `from`) may take with every stage within
// `bound`, leaving one layer for each later stage; -1 when even one is over.
int most_layers(const std::vector<double>& sum, const StageCosts& c, int stages, int s, int from,
                double bound) {
  const int L = (int)sum.size() - 1, reserve = stages - 1 - s;
  const double extra = s == 0 ? c.first_extra : 0;
  if (s == stages - 1) return sum[L] - sum[from] + extra + c.last_extra <= bound ? L - from : -1;
  // The prefix sums rise with the layers (every cost > 0): the first one past the bound.
  const auto begin = sum.begin() + from, end = sum.begin() + (L - reserve) + 1;
  const int k = (int)(std::upper_bound(begin, end, sum[from] + bound - extra) - begin) - 1;
  return k > 0 ? k : -1;
}

// Whether stages s.. (from layer `from` on) fit within `bound`. Taking the most each stage
// can is optimal for a contiguous split: a later stage only ever gets fewer layers.
bool fits(const std::vector<double>& sum, const StageCosts& c, int stages, int s, int from,
          double bound) {
  for (; s < stages; ++s) {
    const int k = most_layers(sum, c, stages, s, from, bound);
    if (k < 0) return false;
    from += k;
  }
  return true;
}

// The least largest stage cost: bisection between 0 and a bound every split fits.
double least_bound(const std::vector<double>& sum, const StageCosts& c, int stages) {
  double lo = 0, hi = sum.back() + c.first_extra + c.last_extra;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (fits(sum, c, stages, 0, 0, mid) ? hi : lo) = mid;
  }
  return hi;
}

// Stage s's layers from `from` on: within the bound and leaving the later stages within it
// (at least `fewest`: more layers here only ever help them), the count whose cost is nearest
// the average of what is left.
int stage_layers(const std::vector<double>& sum, const StageCosts& c, int stages, int s, int from,
                 double bound) {
  const int L = (int)sum.size() - 1;
  const int most = most_layers(sum, c, stages, s, from, bound);
  if (s == stages - 1 || most < 0) return most;
  int fewest = 1;
  for (int hi = most; fewest < hi;) {
    const int mid = fewest + (hi - fewest) / 2;
    if (fits(sum, c, stages, s + 1, from + mid, bound))
      hi = mid;
    else
      fewest = mid + 1;
  }
  const double extra = s == 0 ? c.first_extra : 0;
  const double target = (sum[L] - sum[from] + extra + c.last_extra) / (stages - s);
  auto cost = [&](int k) { return sum[from + k] - sum[from] + extra; };
  const auto begin = sum.begin() + from + fewest, end = sum.begin() + from + most + 1;
  int k = fewest + (int)(std::lower_bound(begin, end, sum[from] + target - extra) - begin);
  k = std::min(k, most);
  if (k > fewest && std::abs(cost(k - 1) - target) <= std::abs(cost(k) - target)) --k;
  return k;
}

}  // namespace

// Beyond this many layers the split is even: the output layer is then under a ten-thousandth
// of a stage's cost (and a cost per layer would take memory in proportion).
constexpr int kMostLayersBalanced = 1 << 16;

std::vector<int> balanced_split(const StageCosts& costs, int stages) {
  const int L = (int)costs.layers.size();
  if (stages < 1 || L < stages) return {};
  const std::vector<double> sum = prefix_sums(costs.layers);
  const double bound = least_bound(sum, costs, stages);
  std::vector<int> split;
  for (int s = 0, from = 0; s < stages; ++s) {
    const int k = stage_layers(sum, costs, stages, s, from, bound);
    if (k < 1) return {};  // not reached: the bound fits
    split.push_back(k);
    from += k;
  }
  return split;
}

std::vector<int> balanced_model_split(const ModelConfig& m, int tensor, int stages,
                                      bool full_recompute) {
  if (m.num_layers > kMostLayersBalanced && m.num_layers % stages == 0)
    return RankLayout::even_split(m.num_layers, stages);
  return balanced_split(model_stage_costs(m, tensor, full_recompute), stages);
}

std::vector<int> default_split(const ModelConfig& m, int tensor, int stages, int virtual_stages,
                               bool full_recompute) {
  const int chunks = stages * virtual_stages;
  if (chunks <= 0 || m.num_layers <= 0 || m.num_layers % chunks) return {};
  if (stages < 2 || virtual_stages != 1) return RankLayout::even_split(m.num_layers, chunks);
  return balanced_model_split(m, tensor, stages, full_recompute);
}

}  // namespace trident::engine
