#include "engine/rank_model.h"

#include <algorithm>
#include <map>
#include <utility>

#include "engine/rank_memory.h"
#include "io/hf_gpt2.h"
#include "model/gather.h"
#include "model/lora_merge.h"

namespace trident::engine {

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
  for (auto& r : expert_reducers)
    if (r) r->finish_param_gather();
}

void RankModel::gather_all_values() {
  for (auto& g : gatherers) g->gather_all();
}

void RankModel::release_gathered_values() {
  for (auto& g : gatherers) g->release_all();
}

data_parallel::ParameterGatherer* expert_gatherer(const RankModel& m, size_t j) {
  auto sharded = [&](size_t i) {
    return m.chunks[i]->splits_experts() && m.chunks[i]->expert_parameters().values_sharded();
  };
  if (!sharded(j)) return nullptr;
  size_t k = m.chunks.size();  // the chunks' own gatherers come first
  for (size_t i = 0; i < j; ++i) k += sharded(i) ? 1 : 0;
  return m.gatherers.at(k).get();
}

ExpertSpan expert_span(const GPTModel& chunk) {
  // Per layer (global index): its experts' specs, contiguous in the expert buffer.
  std::map<int, std::pair<int, int>> experts;
  auto layer_of = [](const std::string& name) {
    return name.rfind("layers.", 0) == 0 ? std::stoi(name.substr(7)) : -1;
  };
  const auto& expert_specs = chunk.expert_parameters().layout().specs();
  for (int k = 0; k < (int)expert_specs.size(); ++k) {
    auto [it, fresh] = experts.try_emplace(layer_of(expert_specs[k].name), k, k + 1);
    if (!fresh) it->second.second = k + 1;
  }
  // Per dense spec: the experts of its layer ({0, 0}: none).
  std::vector<std::pair<int, int>> of_spec;
  for (const ParamSpec& spec : chunk.parameters().layout().specs()) {
    auto it = experts.find(layer_of(spec.name));
    of_spec.push_back(it == experts.end() ? std::pair<int, int>{0, 0} : it->second);
  }
  return [of_spec](int begin, int end) {
    std::pair<int, int> span{0, 0};
    for (int k = begin; k < end; ++k) {
      const auto [lo, hi] = of_spec[k];
      if (lo == hi) continue;
      span = span.first == span.second
                 ? std::pair<int, int>{lo, hi}
                 : std::pair<int, int>{std::min(span.first, lo), std::max(span.second, hi)};
    }
    return span;
  };
}

void RankModel::zero_grads() {
  for (auto& r : reducers) r->zero_grads();
  for (auto& r : expert_reducers)
    if (r) r->zero_grads();
}

namespace {

// The tied word embedding's gradient is summed across the first and last stage after
// backward, before its data-parallel reduction; after a reduce-scatter the two stages'
// shards would cover different elements of it, so its bucket waits for the sum.
bool holds_tied_copy(const RankLayout& l, const ChunkPlacement& placement, int stages) {
  return l.distributed_optimizer && stages > 1 && l.model.tied_output() &&
         (placement.pre_process || placement.post_process);
}

// The linear layers' weights: with a 16-bit copy, their products read only the copy.
bool read_only_in_copy(const std::string& name) {
  for (const char* leaf : {"linear_qkv.weight", "linear_q.weight", "linear_kv.weight",
                           "linear_proj.weight", "linear_fc1.weight", "linear_fc2.weight"})
    if (name.size() > std::string(leaf).size() &&
        name.compare(name.size() - std::string(leaf).size(), std::string::npos, leaf) == 0)
      return true;
  return name == "output_layer.weight";
}

// A unit of specs [begin, end): in pieces of the same kind (fp32, or the 16-bit copy alone).
data_parallel::GatherUnit gather_unit(const Parameters& params, int begin, int end) {
  const auto& specs = params.layout().specs();
  const bool copy = params.low_precision() != kernels::Precision::kFp32;
  auto end_of = [&](int k) { return k < (int)specs.size() ? specs[k].offset : params.size(); };
  data_parallel::GatherUnit unit{
      begin, end, specs[begin].offset, end_of(end) - specs[begin].offset, {}};
  for (int k = begin; k < end; ++k) {
    const bool low_only = copy && read_only_in_copy(specs[k].name);
    if (unit.pieces.empty() || unit.pieces.back().low_only != low_only)
      unit.pieces.push_back({specs[k].offset, 0, low_only});
    unit.pieces.back().floats = end_of(k + 1) - unit.pieces.back().offset;
  }
  return unit;
}

std::vector<std::pair<long, long>> tensors_of(const Parameters& params) {
  std::vector<std::pair<long, long>> tensors;
  for (const ParamSpec& spec : params.layout().specs())
    tensors.emplace_back(spec.offset, spec.numel());
  return tensors;
}

// The chunk's units, the vocabulary's tensors taken out: the output layer's weight as its
// blocks, the input word embedding in none (it is never gathered).
std::vector<data_parallel::GatherUnit> gather_units(const GPTModel& chunk,
                                                    const data_parallel::VocabularyBlocks& v) {
  const Parameters& params = chunk.parameters();
  // In bf16 the output layer reads only the 16-bit copy: its blocks travel in it alone.
  const bool copy = params.low_precision() != kernels::Precision::kFp32;
  std::vector<data_parallel::GatherUnit> units;
  for (auto [begin, end] : chunk.weight_units()) {
    for (int k = begin; k < end;) {
      if (k == v.head_tensor)
        for (auto [offset, floats] : data_parallel::vocabulary_blocks(tensors_of(params), v)) {
          const bool low_only = copy && offset % 2 == 0 && floats % 2 == 0;
          units.push_back({k, k + 1, offset, floats, {{offset, floats, low_only}}, true});
        }
      if (k == v.head_tensor || k == v.sparse_tensor) {
        ++k;
        continue;
      }
      int stop = k + 1;
      while (stop < end && stop != v.head_tensor && stop != v.sparse_tensor) ++stop;
      units.push_back(gather_unit(params, k, stop));
      k = stop;
    }
  }
  return units;
}

// Sharded weights: a gatherer over the chunk's units, wired to its passes.
void add_gatherer(GPTModel& chunk, comm::Communicator& dp,
                  const data_parallel::VocabularyBlocks& vocabulary, RankModel& m) {
  m.gatherers.push_back(std::make_unique<data_parallel::ParameterGatherer>(
      chunk.parameters(), dp, gather_units(chunk, vocabulary)));
  data_parallel::ParameterGatherer* g = m.gatherers.back().get();
  chunk.set_params_needed_hook([g](int b, int e) { g->need(b, e); });
  chunk.set_pass_hooks(
      [g](bool backward) {
        g->begin_pass(backward ? data_parallel::Pass::kBackward : data_parallel::Pass::kForward);
      },
      [g] { g->end_pass(); });
}

// Sharded expert weights (ZeRO-3 of the expert buffer): a gatherer over the chunk's expert
// buffer and its expert-data group, one unit per MoE layer (its E/EP experts), asked for
// wherever the chunk asks for that layer's dense weights (GPTModel names dense specs, layer by
// layer or a recomputed group at once); the chunk's passes begin and end both gatherers'.
// The chunk's dense weights are sharded too (the same strategy): add_gatherer came first.
std::unique_ptr<data_parallel::ParameterGatherer> expert_gatherer_of(
    GPTModel& chunk, comm::Communicator& expert_data, data_parallel::ParameterGatherer* g) {
  std::vector<data_parallel::GatherUnit> units;
  for (auto [begin, end] : weight_units(chunk.expert_parameters().layout()))
    units.push_back(gather_unit(chunk.expert_parameters(), begin, end));
  auto gatherer = std::make_unique<data_parallel::ParameterGatherer>(chunk.expert_parameters(),
                                                                     expert_data, std::move(units));
  data_parallel::ParameterGatherer* e = gatherer.get();
  chunk.set_params_needed_hook([g, e, span = expert_span(chunk)](int begin, int end) {
    g->need(begin, end);
    const auto [lo, hi] = span(begin, end);
    if (lo < hi) e->need(lo, hi);
  });
  chunk.set_pass_hooks(
      [g, e](bool backward) {
        const auto pass = backward ? data_parallel::Pass::kBackward : data_parallel::Pass::kForward;
        g->begin_pass(pass);
        e->begin_pass(pass);
      },
      [g, e] {
        g->end_pass();
        e->end_pass();
      });
  return gatherer;
}

// The vocabulary in blocks: the output layer's through the gatherer and the reducer, the
// input word embedding's rows through a ShardedEmbedding.
void wire_vocabulary(GPTModel& chunk, comm::Communicator& dp, RankModel& m) {
  data_parallel::ParameterGatherer* g = m.gatherers.back().get();
  data_parallel::GradientReducer* r = m.reducers.back().get();
  GPTModel::VocabularyHooks hooks;
  hooks.need = [g](long b, long e) { g->need_range(b, e); };
  hooks.grad_begin = [r](long b, long e) { r->prepare_range(b, e); };
  hooks.grad_done = [r](long b, long e) { r->reduce_range(b, e); };
  if (chunk.placement().pre_process) {
    const tensor_parallel::VocabParallelEmbedding& e = chunk.embedding();
    const long offset = e.word.value - std::as_const(chunk.parameters()).values();
    m.sharded_embeddings.push_back(std::make_unique<data_parallel::ShardedEmbedding>(
        chunk.parameters(), dp,
        data_parallel::EmbeddingShard{offset, e.vocab_start, e.vocab_local, e.hidden,
                                      g->shard_begin(), g->shard_end()}));
    data_parallel::ShardedEmbedding* s = m.sharded_embeddings.back().get();
    hooks.lookup = [s](const int* ids, int rows, float* out) { s->forward(ids, rows, out); };
    // The rows land in the shard of the gradient: no reduction of it may be in flight.
    const long end = offset + (long)e.vocab_local * e.hidden;
    hooks.lookup_backward = [s, r, offset, end](const int* ids, int rows, const float* dout) {
      r->complete_range(offset, end);
      s->backward(ids, rows, dout);
    };
  }
  chunk.set_vocabulary_hooks(std::move(hooks));
}

// Imports a HuggingFace directory into a chunk whose experts are apart: into the chunk's
// layout with every expert inline, then each tensor to its buffer.
void load_hf_split(const std::string& dir, const ModelConfig& config, TensorParallelRank tp,
                   GPTModel& chunk) {
  Parameters all(ParameterLayout(config, tp, chunk.placement()), 16, GradientMemory::kNone);
  io::load_hf_weights(dir, config, all);
  copy_shared_tensors(all, chunk.parameters());
  const TensorParallelRank experts = expert_tensor_rank(tp, chunk.expert_tensor_parallel());
  if (experts.size == tp.size) return copy_shared_tensors(all, chunk.expert_parameters());
  // Whole experts (ETP = 1 < t): imported at their own split.
  Parameters whole(ParameterLayout(config, experts, chunk.placement()), 16, GradientMemory::kNone);
  io::load_hf_weights(dir, config, whole);
  copy_shared_tensors(whole, chunk.expert_parameters());
}

// Fills chunk j's weights: its shard of them when they are sharded; its experts' buffer too.
void fill_weights(const RankModelOptions& o, int j, RankModel& m, TensorParallelRank tp,
                  StartupClock* clock, data_parallel::ParameterGatherer* experts_gatherer) {
  const RankLayout& l = o.layout;
  GPTModel& chunk = *m.chunks.back();
  Parameters& params = chunk.parameters();
  if (clock) clock->begin(o.load_hf.empty() ? "initialisation" : "HF import");
  auto progress = [&](double done) {
    if (clock) clock->progress((j + done) / m.schedule.chunks);
  };
  if (chunk.has_lora())  // A drawn by name (the same under any split), B zero
    chunk.lora_parameters().initialize(o.seed, l.model.init_method_std, l.model.num_layers);
  if (chunk.splits_experts()) {  // drawn by name: the same values as inline
    Parameters& experts = chunk.expert_parameters();
    data_parallel::ParameterGatherer* e = experts_gatherer;
    if (!o.load_hf.empty())
      load_hf_split(o.load_hf, l.model, tp, chunk);
    else if (e)  // sharded: only this rank's shard
      experts.initialize(o.seed, l.model.init_method_std, l.model.num_layers, {}, e->shard_begin(),
                         e->shard_end());
    else
      experts.initialize(o.seed, l.model.init_method_std, l.model.num_layers);
    if (e && !o.load_hf.empty()) e->release_all();
  }
  if (!o.load_hf.empty()) {
    if (!chunk.splits_experts()) io::load_hf_weights(o.load_hf, l.model, params);
    if (params.values_sharded()) m.gatherers.back()->release_all();
  } else if (params.values_sharded()) {
    const data_parallel::ParameterGatherer& g = *m.gatherers.back();
    params.initialize(o.seed, l.model.init_method_std, l.model.num_layers, progress,
                      g.shard_begin(), g.shard_end());
  } else {
    params.initialize(o.seed, l.model.init_method_std, l.model.num_layers, progress);
  }
}

// The chunk's expert buffer (if any) gets a reducer over the expert-data group and an
// optimizer over its shard. Under ZeRO-1 (and with the expert buffer's gradients whole) its
// reduction waits for the step and its values are all-gathered at once after the update.
// With sharded expert gradients (ZeRO-2/3, d / EP > 1) its buckets are reduce-scattered per
// micro-batch as the dense ones are (overlapped as asked); with sharded expert weights
// (ZeRO-3) nothing is gathered after the update (expert_gatherer gathers per layer).
void add_expert_buffer(const RankModelOptions& o, RankModel& m, comm::Communicator* expert_data) {
  GPTModel& chunk = *m.chunks.back();
  if (!chunk.splits_experts()) {
    m.expert_reducers.emplace_back(), m.expert_optimizers.emplace_back();
    return;
  }
  data_parallel::ReducerOptions reduce;
  reduce.bucket_floats =
      o.reduce.bucket_floats > 0 ? o.reduce.bucket_floats : gradient_bucket_floats(o.layout);
  reduce.distributed_optimizer = o.layout.distributed_optimizer;
  // As the dense buffer (chunk_options): the reducer shards only over more than one rank.
  reduce.shard_gradients = o.layout.shard_gradients;
  reduce.shard_parameters = chunk.expert_parameters().values_sharded();
  reduce.overlap = reduce.shard_gradients && o.reduce.overlap;
  m.expert_reducers.push_back(std::make_unique<data_parallel::GradientReducer>(
      chunk.expert_parameters(), *expert_data, reduce));
  m.expert_optimizers.push_back(std::make_unique<optim::AdamW>(
      o.adam, m.expert_reducers.back()->shard_begin(), m.expert_reducers.back()->shard_end()));
}

// Allocates chunk j, fills its weights (seed or HF import), and gives it a reducer and an
// optimizer over the reducer's shard (and its expert buffer its own).
void add_chunk(const RankModelOptions& o, const ScheduleNeeds& needs, int j, RankModel& m,
               comm::Communicator& tp, comm::Communicator& pp, comm::Communicator& dp,
               StartupClock* clock, comm::Communicator* expert, comm::Communicator* expert_data,
               std::vector<std::unique_ptr<data_parallel::ParameterGatherer>>& expert_gatherers,
               comm::Communicator* context) {
  const RankLayout& l = o.layout;
  ChunkOptions options = chunk_options(l, pp.rank(), j, needs);
  if (l.context > 1) {
    if (!context || context->size() != l.context)
      throw std::invalid_argument("context parallelism: the model needs its cp group of " +
                                  std::to_string(l.context) + " ranks");
    options.context_parallel.group = context;
    options.context_parallel.rank = context->rank();
  }
  if (clock) clock->begin("allocation");
  m.chunks.push_back(
      std::make_unique<GPTModel>(l.model, tp, l.micro_batch, l.local_seq(), options, expert));
  Parameters& params = m.chunks.back()->parameters();
  const data_parallel::VocabularyBlocks vocabulary =
      vocabulary_blocks(l, options.placement, (int)params.layout().specs().size());
  if (params.values_sharded()) add_gatherer(*m.chunks.back(), dp, vocabulary, m);
  GPTModel& built = *m.chunks.back();
  if (built.splits_experts() && !expert_data)
    throw std::invalid_argument("expert parallelism: the model needs its expert-data group");
  data_parallel::ParameterGatherer* experts_gatherer = nullptr;
  if (built.splits_experts() && built.expert_parameters().values_sharded()) {
    expert_gatherers.push_back(expert_gatherer_of(built, *expert_data, m.gatherers.back().get()));
    experts_gatherer = expert_gatherers.back().get();
  }
  fill_weights(o, j, m, {tp.rank(), tp.size()}, clock, experts_gatherer);
  if (clock) clock->begin("allocation");
  data_parallel::ReducerOptions reduce = o.reduce;
  if (reduce.bucket_floats <= 0) reduce.bucket_floats = gradient_bucket_floats(l);
  reduce.shard_parameters = params.values_sharded();
  if (reduce.shard_parameters) reduce.vocabulary = vocabulary;
  GPTModel& chunk = *m.chunks.back();
  // LoRA: the adapters' gradients are reduced after backward and their values gathered
  // after the step (the hooks that overlap them name the base buffer's tensors).
  if (chunk.has_lora()) reduce.overlap = reduce.overlap_param_gather = false;
  m.reducers.push_back(
      std::make_unique<data_parallel::GradientReducer>(chunk.trainable_parameters(), dp, reduce));
  if (reduce.shard_parameters && vocabulary.active()) wire_vocabulary(chunk, dp, m);
  if (holds_tied_copy(l, options.placement, pp.size()) && !chunk.has_lora())
    m.reducers.back()->hold_back_spec(0);
  m.optimizers.push_back(std::make_unique<optim::AdamW>(o.adam, m.reducers.back()->shard_begin(),
                                                        m.reducers.back()->shard_end()));
  add_expert_buffer(o, m, expert_data);
  const LayoutSizes sizes = layout_sizes(l.model, {tp.rank(), tp.size()}, options.placement,
                                         l.expert_parallel, l.expert_tensor_parallel);
  shard_chunk_plan(m.chunks.back()->memory_plan(), l, options.placement, sizes, params.size(),
                   o.reduce.overlap);
}

}  // namespace

RankModel build_rank_model(const RankModelOptions& o, comm::Communicator& tp,
                           comm::Communicator& pp, comm::Communicator& dp, StartupClock* clock,
                           comm::Communicator* expert, comm::Communicator* expert_data,
                           comm::Communicator* context) {
  RankModel m;
  m.schedule = o.schedule;
  m.scaler = o.scaler;
  const ScheduleNeeds needs = schedule_needs(o.schedules, pp.rank());
  // Sharded expert weights: their gatherers follow the chunks' own (rank_model.h).
  std::vector<std::unique_ptr<data_parallel::ParameterGatherer>> expert_gatherers;
  for (int j = 0; j < m.schedule.chunks; ++j)
    add_chunk(o, needs, j, m, tp, pp, dp, clock, expert, expert_data, expert_gatherers, context);
  for (auto& g : expert_gatherers) m.gatherers.push_back(std::move(g));
  // The buffers besides the chunks, as the plan sizes them (one source for both).
  m.buffers = planned_rank_memory(o, pp.rank()).buffers;
  return m;
}

RankModel build_inference_rank_model(const RankLayout& layout, const std::string& load_hf,
                                     comm::Communicator& tp, comm::Communicator& pp,
                                     bool decode_panels) {
  RankModel m;
  m.schedule = {pipeline_parallel::ScheduleKind::kOneFOneB, layout.pipeline, 1, 1};
  ChunkOptions options;
  options.placement = layout.placement(pp.rank(), 0);
  options.precision = layout.precision;
  options.inference = true;
  options.decode_panels = decode_panels && layout.precision != kernels::Precision::kFp16;
  m.chunks.push_back(std::make_unique<GPTModel>(layout.model, tp, 1, 1, options));
  if (!load_hf.empty()) io::load_hf_weights(load_hf, layout.model, m.chunks.back()->parameters());
  return m;
}

Parameters chunk_with_all_experts(const GPTModel& chunk, const ModelConfig& config,
                                  TensorParallelRank tp, comm::Communicator* expert) {
  Parameters all(ParameterLayout(config, tp, chunk.placement()), 16, GradientMemory::kNone);
  copy_shared_tensors(chunk.parameters(), all);
  if (!chunk.splits_experts()) return all;
  // Every expert rank's buffer has the same length (E/EP experts of the same shapes).
  const Parameters& mine = chunk.expert_parameters();
  const int ranks = expert->size();
  std::vector<float> every((size_t)mine.size() * ranks);
  expert->all_gather(mine.values(), every.data(), mine.size());
  for (int r = 0; r < ranks; ++r) {
    Parameters theirs(
        ParameterLayout(config, tp, chunk.placement(), expert_buffer_slice(config, ranks, r)), 16,
        GradientMemory::kNone);
    std::copy_n(every.data() + (size_t)r * mine.size(), mine.size(), theirs.values());
    copy_shared_tensors(theirs, all);
  }
  return all;
}

Parameters gather_rank_model(const RankModel& m, const RankLayout& layout, comm::Communicator& tp,
                             comm::Communicator& pp, comm::Communicator* expert) {
  const ModelConfig& config = layout.model;
  std::vector<Parameters> whole_chunks;
  for (const auto& chunk : m.chunks) {
    if (!chunk->splits_experts()) {
      whole_chunks.push_back(
          gather_to_single_rank(chunk->parameters(), config, tp, false, chunk->placement()));
      if (chunk->has_lora())  // the fine-tuned model: W + (alpha / R) B A
        merge_lora_adapters(
            whole_chunks.back(),
            gather_to_single_rank(chunk->lora_parameters(), config, tp, false, chunk->placement()),
            config.lora);
      continue;
    }
    const Parameters all = chunk_with_all_experts(*chunk, config, {tp.rank(), tp.size()}, expert);
    whole_chunks.push_back(gather_to_single_rank(all, config, tp, false, chunk->placement()));
  }
  Parameters full(ParameterLayout(config, {0, 1}));
  const int tag = (1 << 30) + 1;
  for (const ParamSpec& spec : full.layout().specs()) {
    const int owner = layout.owner_of(spec.name);
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

}  // namespace trident::engine
