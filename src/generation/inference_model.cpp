#include "generation/inference_model.h"

#include <algorithm>
#include <chrono>
#include <ostream>
#include <stdexcept>
#include <thread>

#include "checkpoint/checkpoint.h"
#include "generation/inference_buffers.h"
#include "io/hf_gpt2.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/layernorm.h"
#include "tensor_parallel/mappings.h"

namespace trident::generation {

namespace {

ModelConfig source_model(const InferenceOptions& o) {
  if (o.model && o.weights) return *o.model;
  if (o.load.empty() == o.load_hf.empty())
    throw std::invalid_argument("give exactly one of --load CKPT and --load-hf DIR");
  if (!o.load_hf.empty()) return io::read_hf_config(o.load_hf);
  return checkpoint::manifest_model(
      checkpoint::read_manifest(checkpoint::latest_checkpoint(o.load)));
}

engine::RankLayout inference_layout(const InferenceOptions& o, const ModelConfig& model,
                                    int world) {
  engine::RankLayout l;
  l.model = model;
  l.tensor = o.tensor_model_parallel_size;
  l.pipeline = o.pipeline_model_parallel_size;
  l.data = world / (l.tensor * l.pipeline);  // check_layout: t x p divides the world
  l.split = engine::RankLayout::even_split(model.num_layers, l.pipeline);
  l.precision = o.bf16 ? kernels::Precision::kBf16 : kernels::Precision::kFp32;
  return l;
}

// In-process weights (one process's whole model) into the chunk, tensor by tensor: the two
// layouts name the same tensors but may pad their buffers differently.
void copy_weights(const Parameters& from, Parameters& to) {
  for (const ParamSpec& spec : to.layout().specs()) {
    const ParamSpec& source = from.layout().find(spec.name);
    if (source.numel() != spec.numel())
      throw std::invalid_argument("in-process weights: " + spec.name + " has another shape");
    std::copy_n(from.values() + source.offset, spec.numel(), to.values() + spec.offset);
  }
}

// Spins for a moment (during generation the next step's command comes within
// milliseconds), then sleeps between polls, up to 2 ms, so an idle follower leaves its core.
void wait_politely(comm::Request& r) {
  const auto started = std::chrono::steady_clock::now();
  int sleep_us = 0;
  while (!r.test()) {
    if (std::chrono::steady_clock::now() - started < std::chrono::milliseconds(5)) continue;
    sleep_us = std::min(2 * sleep_us + 50, 2000);
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
  }
}

// The HF directory the weights come from: --load-hf, or the base a checkpoint of LoRA
// adapters records (the adapters are then loaded from the checkpoint over it).
std::string base_weights(const InferenceOptions& o, const ModelConfig& m) {
  if (!o.load_hf.empty() || !m.lora.enabled()) return o.load_hf;
  if (m.lora.base_hf.empty())
    throw std::invalid_argument(o.load +
                                ": LoRA adapters over a base drawn from a seed (no --load-hf "
                                "base): merge them with `trident convert --merge-lora` first");
  // Checked before its weights are read (checkpoint::load checks it again).
  const std::string dir = checkpoint::latest_checkpoint(o.load);
  checkpoint::check_lora_base(checkpoint::read_manifest(dir)["lora_base"], dir);
  return m.lora.base_hf;
}

void check_layout(const InferenceOptions& o, const ModelConfig& m, int world) {
  std::string errors;
  auto require = [&](bool ok, const std::string& why) {
    if (!ok) errors += "\n  " + why;
  };
  const int t = o.tensor_model_parallel_size, p = o.pipeline_model_parallel_size;
  require(t >= 1 && p >= 1, "parallel sizes must be >= 1");
  require(t >= 1 && p >= 1 && world % (t * p) == 0,
          "--tensor-model-parallel-size (" + std::to_string(t) +
              ") x --pipeline-model-parallel-size (" + std::to_string(p) + ") must divide the " +
              std::to_string(world) + " ranks");
  require(t < 1 || m.num_attention_heads % t == 0,
          "num_attention_heads (" + std::to_string(m.num_attention_heads) +
              ") must be divisible by --tensor-model-parallel-size (" + std::to_string(t) + ")");
  require(t < 1 || m.ffn() % t == 0, "ffn_hidden_size (" + std::to_string(m.ffn()) +
                                         ") must be divisible by --tensor-model-parallel-size");
  // Stages hold equal shares of the layers (a split the layout could not place was
  // undefined behaviour before this rule).
  require(p < 1 || (m.num_layers >= p && m.num_layers % p == 0),
          "num_layers (" + std::to_string(m.num_layers) +
              ") must be a multiple of --pipeline-model-parallel-size (" + std::to_string(p) + ")");
  require(o.max_batch >= 1, "--max-batch must be >= 1");
  require(o.prefill_chunk >= 1, "the prefill chunk must be >= 1 token");
  require(o.max_sequence_length >= 2 && o.max_sequence_length <= m.max_positions(),
          "--max-sequence-length must be in [2, " + std::to_string(m.max_positions()) +
              "] (the model's positions)");
  if (!errors.empty()) throw std::invalid_argument("invalid generation layout:" + errors);
}

}  // namespace

InferenceModel::InferenceModel(const InferenceOptions& o, const engine::RankContext& rank,
                               std::ostream& log)
    : options_(o), rank_(rank) {
  const ModelConfig model = source_model(o);
  if (options_.max_sequence_length == 0) options_.max_sequence_length = model.max_positions();
  const int world = rank.grid ? rank.grid->world() : 1;
  check_layout(options_, model, world);
  layout_ = inference_layout(options_, model, world);
  comm::Communicator &tp = *rank.groups->tensor, &pp = *rank.groups->pipeline;
  model_ =
      engine::build_inference_rank_model(layout_, base_weights(o, model), tp, pp, o.decode_panels);
  if (!o.load.empty())
    checkpoint::load(o.load, {layout_}, model_, rank, log, checkpoint::LoadMode::kWeightsOnly);
  if (o.weights) copy_weights(*o.weights, model_.chunks[0]->parameters());
  model_.chunks[0]->parameters().refresh_low_precision();
  // The key / value heads this rank's query heads read: one per head, or grouped-query
  // attention's groups (G / t, or the one replicated group when t > G).
  const int t = tp.size(), heads = model.num_attention_heads / t;
  const LayerDims dims = layer_dims(layout_.model, tp.rank(), t);
  const int kv_heads = dims.grouped ? (heads - 1) / dims.groups.heads_per_group + 1 : heads;
  cache_ = KvCache({(int)model_.chunks[0]->layers().size(), options_.max_batch,
                    options_.max_sequence_length, kv_heads, model.head_dim()},
                   o.bf16);
  max_step_tokens_ = options_.max_batch + options_.prefill_chunk;
  max_logit_rows_ = options_.max_logit_rows > 0
                        ? std::min(options_.max_logit_rows, max_step_tokens_)
                        : max_step_tokens_;
  plan_buffers();
}

InferenceModel::~InferenceModel() {
  try {
    stop();
  } catch (...) {  // the job is going down anyway
  }
}

void InferenceModel::plan_buffers() {
  const GPTModel& m = *model_.chunks[0];
  const ModelConfig& c = layout_.model;
  const int t = rank_.groups->tensor->size();
  const long R = max_step_tokens_, L = max_logit_rows_, h = c.hidden_size,
             attn = c.attention_width() / t, ffn = c.ffn() / t, fc1 = c.fc1_rows() / t;
  const long vocab_local = m.padded_vocab() / t;
  const bool bf16 = options_.bf16, post = m.placement().post_process;
  auto gemm_input = [&](long n) { return bf16 ? (n + 1) / 2 : n; };
  // Rank 0 samples from them; the last stage's tensor rank 0 assembles them.
  const bool full_logits = coordinator() || (post && rank_.groups->tensor->rank() == 0);
  for (const PlannedBuffer& b : m.memory_plan().buffers())
    if (b.group == "parameters") plan_.add(b.group, b.name, b.floats, b.copies);
  plan_.add("kv cache", std::string("keys + values") + (bf16 ? " (bf16)" : ""), cache_.bytes() / 4);
  // The step's buffers, in the order they are taken from the arena below.
  struct Entry {
    const char* name;
    long floats;
  };
  std::vector<Entry> entries = {
      {"hidden states in + out", 2 * R * h},
      {"layernorm out", gemm_input(R * h)},
      {"layernorm mean + rstd", 2 * R},
      {"qkv", R * c.qkv_projection_local(t)},
      {"attention out", R * attn},
      {"attention log-sum-exp", R * (c.num_attention_heads / t)},
      {"residual + row-parallel out", 2 * R * h},
      {"fc1 out", R * fc1},
      {"GeLU out", gemm_input(R * ffn)},
      {"bf16 GEMM operand",
       bf16 ? (R * std::max({h, attn, fc1, c.qkv_projection_local(t)}) + 1) / 2 : 0},
      {"final layernorm in + out + stats", post ? L * h + gemm_input(L * h) + 2 * L : 0},
      {"logits (vocabulary shard)", post ? L * vocab_local : 0},
      {"logits gathered over the tensor group", post && t > 1 ? L * vocab_local * t : 0},
      {"logits over the full vocabulary", full_logits ? L * c.vocab_size : 0},
  };
  long total = 0;
  for (const Entry& e : entries)
    if (e.floats > 0) {
      plan_.add("step activations", e.name, e.floats);
      total += (e.floats + 15) / 16 * 16;
    }
  buffers_ = std::make_unique<Buffers>();
  Buffers& b = *buffers_;
  b.arena = std::make_unique<Arena>(total);
  std::vector<float*> at;
  for (const Entry& e : entries) at.push_back(e.floats > 0 ? b.arena->take(e.floats) : nullptr);
  auto operand = [&](float* p) {
    kernels::GemmOperandBuffer g;
    (bf16 ? (void)(g.bf16 = reinterpret_cast<kernels::bf16_t*>(p)) : (void)(g.fp32 = p));
    return g;
  };
  b.x = at[0], b.y = at[0] + R * h;
  b.layer.ln_out = operand(at[1]);
  b.layer.mean = at[2], b.layer.rstd = at[2] + R;
  b.layer.qkv = at[3], b.layer.attn_out = at[4], b.layer.lse = at[5];
  b.layer.residual = at[6], b.layer.row_out = at[6] + R * h;
  b.layer.fc1_pre = at[7], b.layer.fc1_act = operand(at[8]);
  b.precision.precision = bf16 ? kernels::Precision::kBf16 : kernels::Precision::kFp32;
  b.precision.skinny_forward = true;
  b.precision.scratch.act16 = reinterpret_cast<std::uint16_t*>(at[9]);
  if (post) {
    b.final_in = at[10], b.final_ln = operand(at[10] + L * h);
    b.final_mean = at[10] + L * h + gemm_input(L * h), b.final_rstd = b.final_mean + L;
    b.logits_local = at[11], b.logits_gathered = at[12];
  }
  b.logits = at[13];
}

const float* InferenceModel::step(const std::vector<Segment>& segments) {
  if (!coordinator()) throw std::logic_error("InferenceModel::step on a follower rank");
  if (stopped_) throw std::logic_error("InferenceModel::step after stop()");
  long tokens = 0, rows = 0;
  std::vector<bool> used(options_.max_batch, false);
  for (const Segment& s : segments) {
    const int n = (int)s.tokens.size();
    if (s.slot < 0 || s.slot >= options_.max_batch || used[s.slot] || n < 1 || s.start < 0 ||
        s.start + n > options_.max_sequence_length || s.logit_rows < 0 || s.logit_rows > n)
      throw std::invalid_argument("InferenceModel::step: a segment outside the plan");
    for (int id : s.tokens)
      if (id < 0 || id >= vocab()) throw std::invalid_argument("token id outside the vocabulary");
    used[s.slot] = true;
    tokens += n;
    rows += s.logit_rows;
  }
  if (rows > max_logit_rows_)
    throw std::invalid_argument("InferenceModel::step: more logit rows than planned per step");
  if (tokens > max_step_tokens_)
    throw std::invalid_argument("InferenceModel::step: more tokens than planned per step");
  std::vector<Segment> copy = segments;
  if (rank_.groups->model->size() > 1) broadcast_segments(&copy);
  run(copy);
  return buffers_->logits;
}

void InferenceModel::follow() {
  if (coordinator()) return;
  for (;;) {
    std::vector<Segment> segments;
    if (!broadcast_segments(&segments)) return;
    run(segments);
  }
}

void InferenceModel::stop() {
  if (!coordinator() || stopped_) return;
  stopped_ = true;
  if (rank_.groups->model->size() > 1) {
    int header[2] = {-1, 0};  // the header's form: see broadcast_segments
    rank_.groups->model->ibroadcast(header, 2, 0)->wait();
  }
}

bool InferenceModel::broadcast_segments(std::vector<Segment>* segments) {
  comm::Communicator& model = *rank_.groups->model;
  int header[2] = {(int)segments->size(), 0};
  for (const Segment& s : *segments) header[1] += (int)s.tokens.size();
  // Followers poll for the next command (a server may idle for hours); both sides use the
  // non-blocking form, since blocking and non-blocking collectives do not match in MPI.
  std::unique_ptr<comm::Request> pending = model.ibroadcast(header, 2, 0);
  if (coordinator())
    pending->wait();
  else
    wait_politely(*pending);
  if (header[0] < 0) return false;
  std::vector<int> body(4L * header[0] + header[1]);
  if (coordinator()) {
    auto out = body.begin();
    for (const Segment& s : *segments) {
      *out++ = s.slot, *out++ = s.start, *out++ = (int)s.tokens.size(), *out++ = s.logit_rows;
      out = std::copy(s.tokens.begin(), s.tokens.end(), out);
    }
  }
  model.broadcast(body.data(), (long)body.size(), 0);
  if (!coordinator()) {
    segments->assign(header[0], {});
    auto in = body.begin();
    for (Segment& s : *segments) {
      s.slot = *in++, s.start = *in++;
      const int n = *in++;
      s.logit_rows = *in++;
      s.tokens.assign(in, in + n);
      in += n;
    }
  }
  return true;
}

}  // namespace trident::generation
