#include "planner/iteration_model.h"

#include <algorithm>
#include <cmath>

#include "data_parallel/buckets.h"
#include "engine/pipeline_split.h"
#include "engine/rank_layout.h"
#include "engine/rank_memory.h"
#include "model/chunk_memory.h"
#include "model/flops.h"
#include "pipeline_parallel/schedules.h"
#include "pipeline_parallel/simulator.h"
#include "planner/collectives.h"
#include "planner/context_comm.h"
#include "planner/layer_costs.h"
#include "planner/paper_model.h"
#include "planner/sharding.h"

namespace trident::planner {

namespace pp = pipeline_parallel;

namespace {

// trident moves activations and gradients between ranks as fp32, whatever the precision.
constexpr double kCommBytes = 4;

pp::ScheduleConfig schedule_of(const Layout& l, int m) {
  return {l.schedule(), l.pipeline, l.virtual_stages, m};
}

}  // namespace

IterationModel::IterationModel(Cluster cluster, Workload workload)
    : cluster_(std::move(cluster)), workload_(std::move(workload)) {}

namespace {

// One layer's compute, forward and backward (recomputation included), and the weight-
// gradient products of its backward.
struct LayerTimes {
  PassSeconds forward, backward;
  double weight_gemm = 0;
};

LayerTimes layer_times(const Cluster& c, const Layout& l, const LayerWork& work,
                       kernels::Precision precision) {
  LayerTimes out;
  out.forward = layer_forward_seconds(c, work);
  out.backward = layer_backward_seconds(c, work);
  // Half of backward's products are the weight gradients (dW = dY^T X next to dX = dY W);
  // zero-bubble's W holds those of the products the layer defers (an MoE layer's attention).
  out.weight_gemm = out.backward.gemm / 2;
  if (work.deferred_gemms >= 0) {
    LayerWork deferred = work;
    deferred.gemms.resize(work.deferred_gemms);
    out.weight_gemm = layer_forward_seconds(c, deferred).gemm;
  }
  out.backward.other += layer_accumulate_seconds(c, work, precision);
  if (l.recompute == Recompute::kFull)
    out.backward.gemm += out.forward.gemm, out.backward.other += out.forward.other;
  if (l.recompute == Recompute::kSelective)
    out.backward.other += attention_seconds(c, work.attention_flops);
  return out;
}

// The fraction of the model's layers that are MoE layers (a chunk is costed with this
// share of them: exact for every-layer and uniform patterns, an average otherwise).
double moe_share(const ModelConfig& m) {
  if (!m.moe.enabled() || m.num_layers <= 0) return 0;
  int moe = 0;
  for (int layer = 0; layer < m.num_layers; ++layer) moe += m.is_moe_layer(layer);
  return (double)moe / m.num_layers;
}

}  // namespace

IterationModel::ChunkTime IterationModel::chunk_time(const Layout& l, int layers,
                                                     bool post_process) const {
  const ModelConfig& m = workload_.model;
  // This rank's tokens of the micro-batch: seq / c of each sample under context parallelism.
  const double t = l.tensor, T = (double)l.micro_batch * m.seq_length / l.context;
  const double h = m.hidden_size;
  const double share = moe_share(m), moe_layers = layers * share;
  const double dense_layers = layers - moe_layers;
  ChunkTime ct;
  auto add = [&](const LayerTimes& lt, double count) {
    ct.forward += count * lt.forward.gemm;
    ct.backward += count * lt.backward.gemm;
    ct.other_forward += count * lt.forward.other;
    ct.other_backward += count * lt.backward.other;
    ct.weight += count * lt.weight_gemm;
  };
  LayerWork dense =
      transformer_layer_work(m, l.tensor, l.micro_batch, l.sequence_parallel, l.context);
  // --cp-comm-type allgather runs the whole sequence's attention on every cp rank.
  if (l.cp_comm_type == context_parallel::CpCommType::kAllGather)
    dense.attention_flops *= l.context;
  add(layer_times(cluster_, l, dense, workload_.precision), dense_layers);
  add_context_comm(l, layers, ct);
  if (share > 0) {
    add(layer_times(cluster_, l,
                    moe_layer_work(m, l.tensor, l.micro_batch, l.sequence_parallel, l.expert),
                    workload_.precision),
        moe_layers);
    // The dispatch and the combine, each an all-to-all of the micro-batch's T k rows over
    // the expert group (EP consecutive data-parallel ranks, t apart), twice more in
    // backward and again when recomputed. With a capacity each rank sends at most E x
    // capacity rows (exactly that when padded).
    double rows = T * m.moe.router_topk;
    if (!m.moe.dropless()) {
      const double sent =
          m.moe.num_experts * std::ceil(rows / m.moe.num_experts * m.moe.expert_capacity_factor);
      rows = m.moe.pad_expert_input_to_capacity ? sent : std::min(rows, sent);
    }
    const double rows_bytes = rows * h * kCommBytes;
    const double exchange =
        2 * all_to_all_seconds(rows_bytes, l.expert, group_link(cluster_, l.expert, l.tensor));
    ct.expert_forward = moe_layers * exchange;
    ct.expert_backward = moe_layers * exchange * (l.recompute == Recompute::kFull ? 2 : 1);
  }
  const LinkSpec& tp_link = group_link(cluster_, l.tensor, 1);
  const double bytes = T * h * kCommBytes;
  const double all_reduce = ring_all_reduce_seconds(bytes, l.tensor, tp_link);
  // Sequence parallelism: each all-reduce becomes a reduce-scatter + all-gather pair (the
  // same ring time); backward also re-gathers both LayerNorm outputs: per layer 2 of each
  // forward, 4 all-gathers + 2 reduce-scatters backward (trident's counts).
  const double gather = ring_all_gather_seconds(bytes, l.tensor, tp_link);
  const double scatter = ring_reduce_scatter_seconds(bytes, l.tensor, tp_link);
  const double layer_forward = l.sequence_parallel ? 2 * (gather + scatter) : 2 * all_reduce;
  const double layer_backward = l.sequence_parallel ? 4 * gather + 2 * scatter : 2 * all_reduce;
  ct.tensor_forward = layers * layer_forward;
  ct.tensor_backward =
      layers * (layer_backward + (l.recompute == Recompute::kFull ? layer_forward : 0));
  if (post_process) {
    // trident's fused output layer runs its backward in the forward pass (each row chunk
    // adds its weight gradient). Its communication: the vocabulary-parallel cross-entropy's
    // three all-reduces of one number per token, and f's backward all-reduce of d(input)
    // (with sequence parallelism: the final LayerNorm's output all-gathered, d(input)
    // reduce-scattered).
    const HeadWork head = output_layer_work(m, l.tensor, l.micro_batch, l.context);
    const PassSeconds head_forward = head_forward_seconds(cluster_, head);
    const PassSeconds head_backward = head_backward_seconds(cluster_, head);
    ct.forward += head_forward.gemm;
    ct.backward += head_backward.gemm;
    ct.other_forward += head_forward.other +
                        head_accumulate_seconds(cluster_, head, workload_.precision, m.hidden_size);
    ct.other_backward += head_backward.other;
    ct.tensor_forward += 3 * ring_all_reduce_seconds(T * kCommBytes, l.tensor, tp_link) +
                         (l.sequence_parallel ? gather + scatter : all_reduce);
  }
  if (l.pipeline > 1) {
    // Scatter/gather: each tensor rank sends 1/t of the boundary tensor, then the tensor
    // group all-gathers it; once per chunk and micro-batch in each direction. With sequence
    // parallelism the 1/t is all a stage needs: no all-gather.
    const LinkSpec& pp_link = group_link(cluster_, l.pipeline, (long)l.tensor * l.replicas());
    ct.pipeline = point_to_point_seconds(bytes / t, pp_link) + (l.sequence_parallel ? 0 : gather);
  }
  return ct;
}

void IterationModel::add_context_comm(const Layout& l, int layers, ChunkTime& ct) const {
  if (l.context <= 1) return;
  const ModelConfig& m = workload_.model;
  const LayerWork work =
      transformer_layer_work(m, l.tensor, l.micro_batch, l.sequence_parallel, l.context);
  const double attention = attention_seconds(cluster_, work.attention_flops);
  // The cp group: c ranks t apart (Megatron's order tp-cp-dp-pp), inside a node when t x c
  // divides one.
  const ContextComm cp =
      context_comm(context_operands(m, l.tensor, l.micro_batch, l.context), l.cp_comm_type,
                   attention, 2 * attention, group_link(cluster_, l.context, l.tensor));
  const bool recomputed = l.recompute != Recompute::kNone;  // the core runs again in backward
  ct.context_forward = layers * cp.forward_exposed;
  ct.context_backward = layers * (cp.backward_exposed + (recomputed ? cp.forward_exposed : 0));
  ct.context_bytes =
      layers * (cp.forward_bytes + cp.backward_bytes + (recomputed ? cp.forward_bytes : 0));
}

double IterationModel::simulated_bubble(int p, int v, int m, double backward_ratio) {
  const pp::ScheduleKind kind =
      v > 1 ? pp::ScheduleKind::kInterleaved : pp::ScheduleKind::kOneFOneB;
  return simulated_bubble({kind, p, v, m}, backward_ratio, 0);
}

double IterationModel::simulated_bubble(const pp::ScheduleConfig& s, double backward_ratio,
                                        double weight_ratio) {
  if (s.stages <= 1) return 0;
  const long b_key = std::lround(backward_ratio * 100), w_key = std::lround(weight_ratio * 100);
  auto key = std::make_tuple((int)s.kind, s.stages, s.chunks, s.microbatches, b_key, w_key);
  auto it = bubbles_.find(key);
  if (it != bubbles_.end()) return it->second;
  pp::Simulation sim = pp::simulate(s, 1.0, b_key / 100.0, 0.0, w_key / 100.0);
  double bubble = 0;
  for (int r = 0; r < s.stages; ++r) bubble = std::max(bubble, sim.bubble_fraction(r));
  return bubbles_[key] = bubble;
}

const LayoutSizes& IterationModel::sizes_of(int tensor, const ChunkPlacement& p, int expert) {
  // Sizes depend on the layers a chunk holds, not on which (the key leaves first_layer out),
  // unless MoE layers are among them.
  const int first = workload_.model.moe.enabled() ? p.first_layer : -1;
  auto key = std::make_tuple(tensor, first, p.num_layers, p.pre_process, p.post_process, expert);
  auto it = layout_sizes_.find(key);
  if (it != layout_sizes_.end()) return it->second;
  return layout_sizes_[key] = layout_sizes(workload_.model, {0, tensor}, p, expert);
}

const engine::ScheduleNeeds& IterationModel::schedule_needs(const pp::ScheduleConfig& s,
                                                            int stage) {
  auto key = std::make_tuple((int)s.kind, s.stages, s.chunks, s.microbatches, stage);
  auto it = needs_.find(key);
  if (it != needs_.end()) return it->second;
  return needs_[key] = engine::schedule_needs({s}, stage);
}

engine::RankLayout IterationModel::rank_layout(const Layout& l) const {
  engine::RankLayout r;
  r.model = workload_.model;
  // As TrainingConfig::rank_layout: the weights' replicas are the d x c ranks.
  r.tensor = l.tensor, r.pipeline = l.pipeline, r.data = l.replicas();
  r.context = l.context, r.cp_comm_type = l.cp_comm_type;
  r.virtual_stages = l.virtual_stages;
  // The split training runs by default (--launch passes no split flag).
  r.split = engine::default_split(r.model, l.tensor, l.pipeline, l.virtual_stages,
                                  l.recompute == Recompute::kFull);
  r.micro_batch = l.micro_batch;
  r.precision = workload_.precision;
  // --recompute-method uniform --recompute-num-layers 1 (what --launch passes).
  r.recompute_granularity = l.recompute == Recompute::kFull        ? "full"
                            : l.recompute == Recompute::kSelective ? "selective"
                                                                   : "";
  r.distributed_optimizer = l.distributed_optimizer();
  r.shard_gradients = data_parallel::shards_gradients(l.sharding);
  r.shard_parameters = data_parallel::shards_parameters(l.sharding);
  r.sequence_parallel = l.sequence_parallel && l.tensor > 1;
  r.expert_parallel = l.expert;
  return r;
}

namespace {

void add_plan(const MemoryPlan& plan, MemoryBreakdown& out) {
  for (const PlannedBuffer& b : plan.buffers()) {
    const double bytes = b.total_floats() * 4.0;
    if (b.name == "gradients" || b.name == kLoraGradientsRow)
      out.gradients += bytes;
    else if (b.group == "parameters")
      out.weights += bytes;
    else if (b.group == "optimizer")
      out.optimizer += bytes;
    else if (b.group == "activations")
      out.activations += bytes;
    else if (b.group == "communication")
      out.communication += bytes;
    else
      out.scratch += bytes;
  }
}

}  // namespace

std::vector<MemoryPlan> IterationModel::stage_plans(const Layout& l, int stage) {
  const int microbatches = l.microbatches(workload_.global_batch);
  // --launch turns on the overlapped gradient reduction whenever d > 1.
  engine::RankMemoryPlan plan = engine::planned_rank_memory(
      rank_layout(l), stage, schedule_needs(schedule_of(l, microbatches), stage), microbatches,
      l.replicas() > 1, [&](const ChunkPlacement& p) { return sizes_of(l.tensor, p, l.expert); });
  std::vector<MemoryPlan> plans = std::move(plan.chunks);
  plans.push_back(std::move(plan.buffers));
  return plans;
}

namespace {

// As training runs the vocabulary under ZeRO-3 (engine::vocabulary_blocks).
VocabularyTraffic vocabulary_traffic(const engine::RankLayout& r, const ChunkOptions& o,
                                     const LayoutSizes& sizes) {
  VocabularyTraffic v;
  v.blocks = engine::vocabulary_blocks(r, o.placement, (int)sizes.tensors.size());
  const long tokens = (long)r.micro_batch * r.local_seq();
  const long rows = logits_chunk_rows(r.model, r.tensor, tokens, o);
  v.logits_chunks = (int)((tokens + rows - 1) / rows);
  v.swapped_floats = (double)r.data * tokens * r.model.hidden_size;
  return v;
}

}  // namespace

StageParameters IterationModel::stage_parameters(const Layout& l, int stage) {
  const engine::RankLayout r = rank_layout(l);
  const bool tied = workload_.model.tied_output();
  const engine::ScheduleNeeds& needs =
      schedule_needs(schedule_of(l, l.microbatches(workload_.global_batch)), stage);
  StageParameters out;
  for (int j = 0; j < l.virtual_stages; ++j) {
    const ChunkOptions o = engine::chunk_options(r, stage, j, needs);
    const LayoutSizes& sizes = sizes_of(l.tensor, o.placement, l.expert);
    out.floats += sizes.parameters;
    out.expert_floats += sizes.experts;
    out.gathers += chunk_unit_gathers(sizes, o.placement, tied, vocabulary_traffic(r, o, sizes));
    // As engine/rank_model.cpp's holds_tied_copy: the word embedding is the first tensor,
    // so its bucket is the last cut (data_parallel/buckets.h).
    const bool holds_copy = l.distributed_optimizer() && l.pipeline > 1 && tied &&
                            (o.placement.pre_process || o.placement.post_process);
    if (holds_copy && !sizes.tensors.empty()) {
      const long buffer = (sizes.parameters + o.pad_multiple - 1) / o.pad_multiple * o.pad_multiple;
      out.held_back_floats +=
          data_parallel::gradient_buckets(sizes.tensors, buffer, engine::gradient_bucket_floats(r))
              .back()
              .floats;
    }
  }
  return out;
}

MemoryBreakdown IterationModel::stage_memory(const Layout& l, int stage) {
  MemoryBreakdown out;
  out.stage = stage;
  for (const MemoryPlan& plan : stage_plans(l, stage)) add_plan(plan, out);
  out.runtime = cluster_.device.runtime_memory_gib * (1L << 30);
  return out;
}

MemoryBreakdown IterationModel::device_memory(const Layout& l) {
  MemoryBreakdown fullest = stage_memory(l, 0);
  if (l.pipeline == 1) return fullest;
  // The ends hold the embedding and the output layer; a balanced split may give a middle
  // stage the most layers (v = 1 there: a stage's layers are its one chunk's).
  const std::vector<int> split = rank_layout(l).split;
  const int most = l.virtual_stages == 1
                       ? (int)(std::max_element(split.begin(), split.end()) - split.begin())
                       : 0;
  for (int stage : {l.pipeline - 1, most}) {
    if (stage == 0) continue;
    MemoryBreakdown m = stage_memory(l, stage);
    if (m.total() > fullest.total()) fullest = m;
  }
  return fullest;
}

IterationModel::PipelineRun IterationModel::run_pipeline(const Layout& l, int mb) const {
  const int p = l.pipeline, v = l.virtual_stages;
  const std::vector<int> split = rank_layout(l).split;
  PipelineRun run;
  // Chunks of equal layers (and ends) take equal times: each kind timed once.
  std::map<std::pair<int, bool>, ChunkTime> timed;
  for (int vs = 0; vs < p * v; ++vs) {
    const std::pair<int, bool> kind{split[vs], vs == p * v - 1};
    auto it = timed.find(kind);
    if (it == timed.end()) it = timed.emplace(kind, chunk_time(l, kind.first, kind.second)).first;
    run.chunks.push_back(it->second);
  }
  // A zero-bubble schedule runs backward as B and W: W is the weight-gradient products.
  pp::OpTimes ops;
  ops.forward.assign(p, std::vector<double>(v));
  ops.backward = ops.weight = ops.forward;
  run.busy.assign(p, 0.0);
  for (int s = 0; s < p; ++s)
    for (int j = 0; j < v; ++j) {
      const ChunkTime& c = run.chunk(l, s, j);
      const double weight = l.zero_bubble ? c.weight : 0;
      ops.forward[s][j] = c.forward_total();
      ops.backward[s][j] = c.backward_total() - weight;
      ops.weight[s][j] = weight;
      run.busy[s] += mb * (c.forward_total() + c.backward_total());
    }
  run.makespan = run.busy[0];
  if (p > 1) {
    const pp::Simulation sim = pp::simulate(schedule_of(l, mb), ops);
    run.makespan = sim.makespan;
    run.busy = sim.busy;
  }
  run.critical = (int)(std::max_element(run.busy.begin(), run.busy.end()) - run.busy.begin());
  return run;
}

// The paper's FLOPs of one iteration (eq. 3, full recomputation's fourth pass through the
// layers included); an MoE model's count its active parameters (model/flops.h) instead.
double IterationModel::model_flops(const Layout& l) const {
  const ModelConfig& m = workload_.model;
  const int vocab = m.padded_vocab_size(l.tensor);
  const double B = (double)workload_.global_batch;
  const bool recompute = l.recompute == Recompute::kFull;
  if (!m.moe.enabled())
    return paper_flops_per_iteration({m.num_layers, m.hidden_size, vocab, m.seq_length}, B,
                                     recompute);
  const double total = training_flops_per_iteration(m, workload_.global_batch, m.seq_length, vocab);
  const double layers = total - 6 * B * m.seq_length * m.hidden_size * vocab;
  return recompute ? total + layers / 3 : total;
}

namespace {

// The expert buffer's reduction: summed over the d/EP expert-data ranks (equal dp % EP: t x
// EP apart) after the backward (its reducer does not overlap), sharded as ZeRO-1 at most.
DataParallelTraffic expert_data_traffic(const Cluster& cluster, const Layout& l,
                                        double expert_floats, int microbatches) {
  const int expert_data = l.data / l.expert;
  if (expert_floats <= 0 || expert_data < 2) return {};
  DataParallelWork experts;
  experts.data = expert_data, experts.microbatches = microbatches;
  experts.parameter_floats = experts.bucket_floats = expert_floats;
  return data_parallel_traffic(
      l.distributed_optimizer() ? data_parallel::ShardingStrategy::kOptim
                                : data_parallel::ShardingStrategy::kNoShard,
      experts, group_link(cluster, expert_data, (long)l.tensor * l.expert));
}

}  // namespace

// The data-parallel collectives of the fullest stage (Psi: its parameters; the planned
// gradient buffer may hold only a shard of them), then the optimizer step.
void IterationModel::add_data_parallel(const Layout& l, int mb, double forward, double backward,
                                       Prediction& out) {
  const StageParameters params = stage_parameters(l, out.memory.stage);
  DataParallelWork work;
  // Replicated weights are reduced (and sharded) over the d x c ranks of the data-parallel
  // group with context parallel: c consecutive cp ranks per data-parallel rank, t apart.
  work.data = l.replicas(), work.microbatches = mb;
  work.parameter_floats = params.floats;
  work.bucket_floats = (double)engine::gradient_bucket_floats(rank_layout(l));
  work.gathers = params.gathers;
  work.held_back_floats = params.held_back_floats;
  work.forward = forward, work.backward = backward;
  const DataParallelTraffic dp =
      data_parallel_traffic(l.sharding, work, group_link(cluster_, l.replicas(), l.tensor));
  const DataParallelTraffic edp = expert_data_traffic(cluster_, l, params.expert_floats, mb);
  TimeBreakdown& time = out.time;
  out.data_parallel_bytes = dp.bytes + edp.bytes;
  time.data_comm = dp.exposed + edp.exposed;
  time.data_comm_hidden = dp.seconds - dp.exposed + edp.seconds - edp.exposed;
  // The gradient norm and AdamW over this rank's shard, and the gradients zeroed for the
  // next step (4 bytes written per float held).
  const bool sharded = l.distributed_optimizer();
  const double shard =
      (sharded ? params.floats / l.replicas() : params.floats) +
      (sharded ? params.expert_floats / (l.data / l.expert) : params.expert_floats);
  const double zeroed =
      (data_parallel::shards_gradients(l.sharding) ? params.floats / l.replicas() : params.floats) +
      params.expert_floats;
  time.optimizer = shard * cluster_.kernels.optimizer_ns(cluster_.device) * 1e-9 +
                   memory_traffic_seconds(cluster_, zeroed, 4);
}

Prediction IterationModel::predict(const Layout& l) {
  const ModelConfig& m = workload_.model;
  const int mb = l.microbatches(workload_.global_batch);
  Prediction out;
  out.layout = l;
  out.split = rank_layout(l).split;
  const PipelineRun run = run_pipeline(l, mb);
  // The breakdown is the busiest stage's: its work, and its idle time as the bubble.
  TimeBreakdown& time = out.time;
  double forward = 0, backward = 0;  // one micro-batch through the busiest stage
  for (int j = 0; j < l.virtual_stages; ++j) {
    const ChunkTime& c = run.chunk(l, run.critical, j);
    time.compute += mb * (c.forward + c.backward);
    time.other_kernels += mb * (c.other_forward + c.other_backward);
    time.tensor_comm += mb * (c.tensor_forward + c.tensor_backward);
    time.expert_comm += mb * (c.expert_forward + c.expert_backward);
    time.context_comm += mb * (c.context_forward + c.context_backward);
    out.context_bytes += mb * c.context_bytes;
    time.pipeline_comm += mb * 2 * c.pipeline;
    forward += c.forward_total();
    backward += c.backward_total();
  }
  const double busy = run.busy[run.critical];
  time.bubble = std::max(0.0, run.makespan - busy);
  out.bubble_fraction = busy > 0 ? time.bubble / busy : 0;
  if (l.pipeline > 1 && m.tied_output()) {
    // After the last backward the first and last stage swap their tied word embedding's
    // gradient (V / t x h), before the data-parallel reduction and the step.
    const LinkSpec& link = group_link(cluster_, l.pipeline, (long)l.tensor * l.replicas());
    time.pipeline_comm += point_to_point_seconds(
        (double)m.padded_vocab_size(l.tensor) / l.tensor * m.hidden_size * kCommBytes, link);
  }

  out.memory = device_memory(l);
  add_data_parallel(l, mb, forward, backward, out);

  out.model_flops = model_flops(l);
  out.tflops_per_device = out.model_flops / (time.total() * l.devices()) / 1e12;
  out.peak_fraction = out.tflops_per_device / cluster_.device.peak_tflops;
  out.fits = out.memory.total() <= cluster_.device.memory_gib * (1L << 30);
  return out;
}

}  // namespace trident::planner
