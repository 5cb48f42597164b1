#include "engine/rank_model.h"

#include <algorithm>

#include "io/hf_gpt2.h"
#include "model/gather.h"

namespace trident {

namespace {

ChunkPlacement placement_of(const TrainingConfig& c, int stage, int chunk) {
  const int p = c.pipeline_model_parallel_size, v = c.virtual_stages(), vs = chunk * p + stage;
  std::vector<int> split = c.layers_per_virtual_stage();
  int first = 0;
  for (int k = 0; k < vs; ++k) first += split[k];
  return {first, split[vs], vs == 0, vs == p * v - 1};
}

// Which pipeline rank owns a tensor of the one-process model.
int owner_of(const TrainingConfig& c, const std::string& name) {
  const int p = c.pipeline_model_parallel_size, v = c.virtual_stages();
  if (name.rfind("embedding.", 0) == 0) return 0;
  if (name.rfind("final_layernorm.", 0) == 0 || name.rfind("output_layer.", 0) == 0)
    return (p * v - 1) % p;
  int layer = std::stoi(name.substr(7, name.find('.', 7) - 7));
  std::vector<int> split = c.layers_per_virtual_stage();
  for (int vs = 0, end = 0; vs < p * v; ++vs)
    if (layer < (end += split[vs])) return vs % p;
  throw std::out_of_range("layer " + std::to_string(layer) + " outside the pipeline split");
}

}  // namespace

std::vector<GPTModel*> RankModel::chunk_pointers() const {
  std::vector<GPTModel*> out;
  for (const auto& c : chunks) out.push_back(c.get());
  return out;
}

std::vector<const Parameters*> RankModel::parameters() const {
  std::vector<const Parameters*> out;
  for (const auto& c : chunks) out.push_back(&c->parameters());
  return out;
}

long RankModel::planned_bytes() const {
  long total = 0;
  for (const auto& c : chunks) total += c->memory_plan().total_bytes();
  return total + buffers.total_bytes();
}

void RankModel::finish_param_gather() {
  for (auto& r : reducers) r->finish_param_gather();
}

void RankModel::zero_grads() {
  for (auto& c : chunks) c->parameters().zero_grads();
}

RankModel build_rank_model(const TrainingConfig& c, comm::Communicator& tp, comm::Communicator& pp,
                           comm::Communicator& dp, StartupClock* clock) {
  data_parallel::ReducerOptions reduce;
  reduce.bucket_floats =
      c.ddp_bucket_size > 0 ? c.ddp_bucket_size : std::max(40'000'000L, 1'000'000L * dp.size());
  reduce.overlap = c.overlap_grad_reduce;
  reduce.distributed_optimizer = c.use_distributed_optimizer;
  reduce.overlap_param_gather = c.overlap_param_gather;
  RankModel m;
  m.schedule = pipeline_schedule_of(c);
  if (c.fp16)
    m.scaler = c.loss_scale > 0 ? LossScaler::constant(c.loss_scale)
                                : LossScaler::dynamic(c.initial_loss_scale, c.min_loss_scale,
                                                      c.loss_scale_window, c.hysteresis);
  // Activation slots: the most micro-batches in flight at any global batch of the run.
  // Zero-bubble schedules also keep weight-gradient operands from each B to its W.
  std::vector<int> slots(m.schedule.chunks, 0), deferred(m.schedule.chunks, 0),
      unfinished(m.schedule.chunks, 0);
  const long unit = (long)c.micro_batch_size * dp.size();
  for (long gbs : c.batch_schedule().sizes()) {
    auto schedule = pipeline_schedule_of(c, (int)(gbs / unit));
    auto ops = pipeline_parallel::build_schedule(schedule, pp.rank());
    std::vector<int> need = pipeline_parallel::max_in_flight(ops, schedule.chunks);
    std::vector<int> kept = pipeline_parallel::max_deferred_weight_grads(ops, schedule.chunks);
    std::vector<int> open = pipeline_parallel::max_unfinished(ops, schedule.chunks);
    for (int j = 0; j < m.schedule.chunks; ++j) {
      slots[j] = std::max(slots[j], need[j]);
      deferred[j] = std::max(deferred[j], kept[j]);
      unfinished[j] = std::max(unfinished[j], open[j]);
    }
  }
  for (int j = 0; j < m.schedule.chunks; ++j) {
    ChunkOptions options;
    options.placement = placement_of(c, pp.rank(), j);
    options.slots = slots[j];
    options.deferred_weight_grads = deferred[j];
    options.unfinished = unfinished[j];
    options.recompute_layers = c.recomputed_layers(options.placement.num_layers);
    options.recompute_group = c.recompute_group_size();
    options.recompute_attention = c.recompute_granularity == "selective";
    options.precision = c.precision();
    options.dropout = c.dropout();
    options.pad_multiple = c.use_distributed_optimizer ? 16L * dp.size() : 16;
    options.logits_chunk_rows = c.logits_chunk_rows;
    options.sequence_parallel = c.sequence_parallel_active();
    if (clock) clock->begin("allocation");
    m.chunks.push_back(
        std::make_unique<GPTModel>(c.model, tp, c.micro_batch_size, c.model.seq_length, options));
    Parameters& params = m.chunks.back()->parameters();
    if (clock) clock->begin(c.load_hf.empty() ? "initialisation" : "HF import");
    if (!c.load_hf.empty())
      io::load_hf_weights(c.load_hf, c.model, params);
    else
      params.initialize(c.seed, c.model.init_method_std, c.model.num_layers, [&](double done) {
        if (clock) clock->progress((j + done) / m.schedule.chunks);
      });
    if (clock) clock->begin("allocation");
    m.reducers.push_back(std::make_unique<data_parallel::GradientReducer>(params, dp, reduce));
    // The tied word embedding's gradient is summed across the first and last stage after
    // backward, before its data-parallel reduction; after a reduce-scatter the two stages'
    // shards would cover different elements of it.
    const bool tied_copy =
        c.model.tied_output() && (options.placement.pre_process || options.placement.post_process);
    if (c.use_distributed_optimizer && pp.size() > 1 && tied_copy)
      m.reducers.back()->hold_back_spec(0);
    m.optimizers.push_back(std::make_unique<AdamW>(c.adam, m.reducers.back()->shard_begin(),
                                                   m.reducers.back()->shard_end()));
    m.chunks.back()->memory_plan().resize("adam exp_avg + exp_avg_sq",
                                          m.optimizers.back()->moment_bytes() / 4);
  }
  RankBufferShape buffers;
  buffers.stages = pp.size(), buffers.chunks = m.schedule.chunks, buffers.stage = pp.rank();
  for (long gbs : c.batch_schedule().sizes())
    buffers.microbatches = std::max(buffers.microbatches, (int)(gbs / unit));
  // With sequence parallelism a stage sends only its own 1/t of the rows.
  buffers.boundary_floats = (long)c.micro_batch_size * c.model.seq_length * c.model.hidden_size /
                            (c.sequence_parallel_active() ? tp.size() : 1);
  buffers.tied_embedding_floats =
      c.model.tied_output()
          ? (long)c.model.padded_vocab_size(tp.size()) / tp.size() * c.model.hidden_size
          : 0;
  for (const auto& chunk : m.chunks) buffers.gradient_floats += chunk->parameters().size();
  buffers.data = dp.size();
  buffers.overlap_grad_reduce = c.overlap_grad_reduce;
  m.buffers = plan_rank_buffers(buffers);
  return m;
}

RankModel build_inference_rank_model(const TrainingConfig& c, comm::Communicator& tp,
                                     comm::Communicator& pp, bool decode_panels) {
  RankModel m;
  m.schedule = pipeline_schedule_of(c);
  ChunkOptions options;
  options.placement = placement_of(c, pp.rank(), 0);
  options.precision = c.precision();
  options.inference = true;
  options.decode_panels = decode_panels && c.precision() != kernels::Precision::kFp16;
  m.chunks.push_back(std::make_unique<GPTModel>(c.model, tp, 1, 1, options));
  if (!c.load_hf.empty()) io::load_hf_weights(c.load_hf, c.model, m.chunks.back()->parameters());
  return m;
}

Parameters gather_rank_model(const RankModel& m, const TrainingConfig& c, comm::Communicator& tp,
                             comm::Communicator& pp) {
  const ModelConfig& config = c.model;
  std::vector<Parameters> whole_chunks;
  for (const auto& chunk : m.chunks)
    whole_chunks.push_back(
        gather_to_single_rank(chunk->parameters(), config, tp, false, chunk->placement()));
  Parameters full(ParameterLayout(config, {0, 1}));
  const int tag = (1 << 30) + 1;
  for (const ParamSpec& spec : full.layout().specs()) {
    const int owner = owner_of(c, spec.name);
    float* dst = full.values() + spec.offset;
    if (pp.rank() == owner) {
      for (const Parameters& w : whole_chunks)
        if (w.layout().contains(spec.name) && w.layout().find(spec.name).owned) {
          const ParamSpec& src = w.layout().find(spec.name);
          if (owner == 0)
            std::copy_n(w.values() + src.offset, spec.numel(), dst);
          else
            pp.send(w.values() + src.offset, spec.numel(), 0, tag);
        }
    } else if (pp.rank() == 0) {
      pp.recv(dst, spec.numel(), owner, tag);
    }
  }
  return full;
}

}  // namespace trident
