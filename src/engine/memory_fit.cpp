#include "engine/memory_fit.h"

#include <functional>
#include <optional>

#include "engine/memory_bound.h"
#include "engine/pipeline_split.h"
#include "engine/rank_memory.h"

namespace trident::engine {

namespace {

constexpr long kMostMicrobatches = 1L << 20;

// A layout with changes, and the flags that ask for them.
struct Candidate {
  RankModelOptions o;
  std::string flags;
  // Given whenever a change touches the batch: the micro-batch size (the default global
  // batch is one micro-batch per replica) or the data-parallel ranks. 0: as it is.
  long global_batch = 0;
  void add_flags(const std::string& more) { flags += (flags.empty() ? "" : " ") + more; }
  std::string all_flags() const {
    return global_batch > 0 ? flags + " --global-batch-size " + std::to_string(global_batch)
                            : flags;
  }
};

// Samples per step: micro-batch x micro-batches x data-parallel ranks (layout.data counts
// the d x c ranks holding the weights; the c ranks of a cp group share their samples).
long global_batch_of(const RankModelOptions& o) {
  return (long)o.layout.micro_batch * o.schedule.microbatches * (o.layout.data / o.layout.context);
}
using Change = std::function<std::optional<Candidate>(const Candidate&)>;

int world_of(const RankLayout& l) {  // t x c x p x d (data holds d x c)
  return l.tensor * l.pipeline * l.data;
}

std::optional<Candidate> with_bf16(const Candidate& c) {
  if (c.o.layout.precision != kernels::Precision::kFp32) return std::nullopt;
  Candidate n = c;
  n.o.layout.precision = kernels::Precision::kBf16;
  n.add_flags("--bf16");
  return n;
}

// Every layer keeps only its input (Megatron's uniform method, one layer per group; full
// recomputation takes all three flags).
std::optional<Candidate> with_full_recompute(const Candidate& c) {
  const RankLayout& l = c.o.layout;
  if (l.recompute_granularity == "full" && l.recompute_method == "uniform" &&
      l.recompute_num_layers == 1)
    return std::nullopt;
  Candidate n = c;
  n.o.layout.recompute_granularity = "full";
  n.o.layout.recompute_method = "uniform", n.o.layout.recompute_num_layers = 1;
  n.add_flags("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
  return n;
}

// The same global batch in more, smaller micro-batches.
std::optional<Candidate> with_micro_batch(const Candidate& c, int micro_batch) {
  const int now = c.o.layout.micro_batch;
  if (micro_batch >= now || now % micro_batch != 0) return std::nullopt;
  // A schedule is planned op by op: beyond a million micro-batches per step (--micro-batch-size
  // 10^9 cut to 1) the plan itself would not fit, and no run has such a step.
  if ((long)c.o.schedule.microbatches * (now / micro_batch) > kMostMicrobatches)
    return std::nullopt;
  Candidate n = c;
  n.o.layout.micro_batch = micro_batch;
  n.o.schedule.microbatches *= now / micro_batch;
  for (pipeline_parallel::ScheduleConfig& s : n.o.schedules) s.microbatches *= now / micro_batch;
  n.add_flags("--micro-batch-size " + std::to_string(micro_batch));
  n.global_batch = global_batch_of(n.o);
  return n;
}

// `stages` pipeline ranks (same chunks per rank and schedule kind), split as the run with
// that flag would be: by engine::default_split, or evenly.
std::optional<Candidate> with_pipeline(const Candidate& c, int stages) {
  const RankLayout& l = c.o.layout;
  const int chunks = l.virtual_stages;
  if (stages <= l.pipeline || l.model.num_layers % (stages * chunks) != 0) return std::nullopt;
  Candidate n = c;
  n.o.layout.pipeline = stages;
  n.o.layout.split = l.split_by_cost ? default_split(l.model, l.tensor, stages, chunks,
                                                     l.recompute_granularity == "full")
                                     : RankLayout::even_split(l.model.num_layers, stages * chunks);
  n.o.schedule.stages = stages;
  for (pipeline_parallel::ScheduleConfig& s : n.o.schedules) {
    s.stages = stages;
    if (!pipeline_parallel::validate_schedule(s).empty()) return std::nullopt;
  }
  n.add_flags("--pipeline-model-parallel-size " + std::to_string(stages));
  if (chunks > 1)  // as many chunks per rank, each smaller
    n.add_flags("--num-layers-per-virtual-pipeline-stage " +
                std::to_string(l.model.num_layers / (stages * chunks)));
  return n;
}

// Adam moments sharded over `data` data-parallel ranks, each with the micro-batches it has
// now (a global batch larger in proportion).
std::optional<Candidate> with_data(const Candidate& c, int data) {
  if (data <= c.o.layout.data) return std::nullopt;
  Candidate n = c;
  n.o.layout.data = data;
  if (!c.o.layout.distributed_optimizer) n.add_flags("--use-distributed-optimizer");
  n.o.layout.distributed_optimizer = n.o.reduce.distributed_optimizer = true;
  n.global_batch = global_batch_of(n.o);
  return n;
}

// Each sequence split over `context` ranks (context parallelism): every rank keeps seq / c
// tokens' activations, with the same samples and the user's t, p and d; the weights are
// replicated over d x c ranks.
std::optional<Candidate> with_context(const Candidate& c, int context) {
  const RankLayout& l = c.o.layout;
  if (context <= l.context) return std::nullopt;
  Candidate n = c;
  n.o.layout.data = l.data / l.context * context;
  n.o.layout.context = context;
  n.add_flags("--context-parallel-size " + std::to_string(context));
  return n;
}

bool fits(const Candidate& c, long available) {
  // The closed form first: the exact plan costs a plan per pipeline rank.
  if (memory_lower_bound(c.o.layout).total_bytes() > (double)available) return false;
  return needed_bytes(c.o) <= available;
}

// The first of `sizes` (in order) with which `change` gives a layout that fits.
std::optional<Candidate> first_fitting(const Candidate& c, long available,
                                       const std::vector<int>& sizes,
                                       std::optional<Candidate> (*change)(const Candidate&, int)) {
  for (int size : sizes)
    if (std::optional<Candidate> n = change(c, size); n && fits(*n, available)) return n;
  return std::nullopt;
}

// The divisors of n, ascending: O(sqrt n), where a list of every size up to n took 4 GB for
// --micro-batch-size 10^9 (only divisors can be changes: with_micro_batch, with_pipeline).
std::vector<int> divisors(int n) {
  std::vector<int> low, high;
  for (int d = 1; (long)d * d <= n; ++d)
    if (n % d == 0) {
      low.push_back(d);
      if (d != n / d) high.push_back(n / d);
    }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

std::vector<int> smaller_micro_batches(int micro_batch) {  // largest first
  std::vector<int> out;
  for (int b : divisors(micro_batch))
    if (b < micro_batch) out.insert(out.begin(), b);
  return out;
}

std::vector<int> more_stages(const RankLayout& l) {
  std::vector<int> out;
  for (int p : divisors(l.model.num_layers))
    if (p > l.pipeline) out.push_back(p);
  return out;
}

std::vector<int> more_data_ranks(const RankLayout& l) {  // doubling, up to 1024 times as many
  std::vector<int> out;
  for (int d = 2 * l.data; d <= 1024 * l.data; d *= 2) out.push_back(d);
  return out;
}

std::optional<Candidate> fewest_stages(const Candidate& c, long available) {
  return first_fitting(c, available, more_stages(c.o.layout), with_pipeline);
}

std::optional<Candidate> fewest_data_ranks(const Candidate& c, long available) {
  return first_fitting(c, available, more_data_ranks(c.o.layout), with_data);
}

std::optional<Candidate> fewest_context_ranks(const Candidate& c, long available) {
  return first_fitting(c, available, more_context_ranks(c.o.layout), with_context);
}

// More ranks of each kind, the fewest that fit: for the layout as it is, and for it with
// the changes on its ranks when that takes fewer ranks still.
void add_scaled(const Candidate& base, const std::optional<Candidate>& changed, long available,
                std::vector<Candidate>& out) {
  for (auto scale : {fewest_stages, fewest_data_ranks, fewest_context_ranks}) {
    const std::optional<Candidate> plain = scale(base, available);
    const std::optional<Candidate> with_changes =
        changed ? scale(*changed, available) : std::nullopt;
    if (plain) out.push_back(*plain);
    if (with_changes && (!plain || world_of(with_changes->o.layout) < world_of(plain->o.layout)))
      out.push_back(*with_changes);
  }
}

// The changes that keep the ranks as they are, each kept only where it lowers the plan.
Candidate cheap_changes_together(const Candidate& base) {
  Candidate c = base;
  const std::vector<Change> changes = {with_bf16, with_full_recompute,
                                       [](const Candidate& x) { return with_micro_batch(x, 1); }};
  for (const Change& change : changes)
    if (std::optional<Candidate> n = change(c); n && needed_bytes(n->o) < needed_bytes(c.o)) c = *n;
  return c;
}

}  // namespace

long needed_bytes(const RankModelOptions& o) {
  return fullest_stage(o).plan.total_bytes();
}

std::string MemoryRemedy::describe(int current_world_size) const {
  std::string out = flags;
  if (world_size != current_world_size)
    out += " on " + std::to_string(world_size) + " ranks instead of " +
           std::to_string(current_world_size) + ", as many per node as now";
  return out + ": " + format_bytes((double)needed_bytes) + " per rank";
}

std::vector<MemoryRemedy> memory_remedies(const RankModelOptions& o, long available_bytes) {
  const Candidate base{o, ""};
  std::vector<Candidate> found;
  for (const Change& change : std::vector<Change>{with_bf16, with_full_recompute})
    if (std::optional<Candidate> n = change(base); n && fits(*n, available_bytes))
      found.push_back(*n);
  if (auto n = first_fitting(base, available_bytes, smaller_micro_batches(o.layout.micro_batch),
                             with_micro_batch))
    found.push_back(*n);
  // On the ranks as they are, the changes together when none alone fits; then more ranks.
  const Candidate together = cheap_changes_together(base);
  const bool changed = together.all_flags() != base.all_flags();
  if (found.empty() && changed && fits(together, available_bytes)) found.push_back(together);
  add_scaled(base, changed ? std::optional<Candidate>(together) : std::nullopt, available_bytes,
             found);
  std::vector<MemoryRemedy> out;
  for (const Candidate& c : found)
    out.push_back({c.all_flags(), world_of(c.o.layout), needed_bytes(c.o)});
  return out;
}

}  // namespace trident::engine
