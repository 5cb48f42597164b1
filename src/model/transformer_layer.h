#pragma once
// One pre-LayerNorm GPT-2 block: x + Attn(LN1(x)), then + MLP(LN2(.)), built from the
// tensor-parallel linears so the same code runs at any tensor-parallel size.
#include <functional>
#include <memory>

#include "context_parallel/context_parallel.h"
#include "kernels/attention.h"
#include "kernels/cached_attention.h"
#include "kernels/dropout.h"
#include "kernels/grouped_qkv.h"
#include "kernels/mixed_linear.h"
#include "kernels/rope.h"
#include "model/moe_layer.h"
#include "model/moe_stats.h"
#include "model/norm.h"
#include "parameters/parameters.h"
#include "tensor_parallel/layers.h"

namespace trident {

// What one layer keeps from forward for backward (one micro-batch). With sequence
// parallelism the tensors of [tokens, h] (LayerNorm outputs and statistics, residuals,
// output) hold only this rank's tokens / t rows; qkv, attention and MLP tensors are
// [tokens, * / t] either way.
// ln1_out, ln2_out and fc1_act only feed matrix products: bf16 runs keep them in bf16.
struct LayerActivations {
  kernels::GemmOperandBuffer ln1_out;
  float *ln1_mean, *ln1_rstd;
  // The q, k, v projections' output as written, RoPE not applied (attention rotates q and
  // k as it loads them): [tokens, 3, heads, d]; grouped-query attention's [tokens, q | k | v]
  // of the fused GEMM, or with biases q [tokens, heads * d] then kv [tokens, k | v].
  float* qkv;
  // --qk-layernorm: qkv holds q and k normalised (what attention reads); the projections'
  // output before the norm [tokens, as qkv] and the heads' rstd [tokens, q heads] then
  // [tokens, k heads] are kept for the norm's backward. Null otherwise.
  float *qkv_pre = nullptr, *qk_rstd = nullptr;
  float *attn_out, *attn_lse;
  float* residual1;
  kernels::GemmOperandBuffer ln2_out;
  float *ln2_mean, *ln2_rstd;
  float* fc1_pre;
  kernels::GemmOperandBuffer fc1_act;
  float* output;
  // An MoE layer's MLP (fc1_pre and fc1_act unused then); null in dense layers.
  MoeActivations moe{};
};

// Reused by every layer; nothing in it survives a layer's call.
struct LayerScratch {
  float* row_out;   // [tokens, h]; sequence parallelism reduce-scatters into its blocks
  float* d_hidden;  // [tokens, h]
  // Sequence parallelism: a LayerNorm output all-gathered for a column-parallel layer
  // ([tokens, h], bf16 in bf16 runs); empty otherwise.
  kernels::GemmOperandBuffer gathered;
  float* d_ffn;   // [tokens, f / t]
  float* d_attn;  // [tokens, h / t]
  // [tokens, q + k + v of this rank] (3h / t, or h / t + 2 G d / t grouped): the attention
  // core's d(q, k, v) laid out as LayerActivations::qkv.
  float* d_qkv;
  MoeScratch moe{};                     // the MoE layers' (null without MoE)
  tensor_parallel::LoraScratch lora{};  // the LoRA branches' (null without LoRA)
};

struct LayerDims {
  int hidden;
  int heads_local;
  int head_dim;
  int ffn_local;
  float eps;
  int head_offset = 0;  // global index of this rank's first head
  // The Llama family's options (ModelConfig's); defaults are GPT-2's block.
  bool rms_norm = false;
  bool swiglu = false;         // fc1 holds [gate | up], 2 x ffn_local rows
  kernels::RopeConfig rope{};  // rotary_dim 0: no RoPE
  bool grouped = false;        // linear_q + linear_kv instead of linear_qkv
  kernels::QueryGroups groups{};
  int kv_local = 0;      // rows of this rank's linear_kv (grouped)
  bool qk_norm = false;  // --qk-layernorm: RMSNorm of each q and k head before RoPE
  int window = 0;        // sliding-window attention over the last `window` keys; 0: all
  // The MoE layers' MLP (experts 0 without MoE; which layers are MoE, the parameters say).
  MoeDims moe{};
  // LoRA (config/lora_config.h): the adapters' rank and alpha / rank; which linears have
  // them, the adapter buffer says.
  int lora_rank = 0;
  float lora_scale = 0.f;
};

// The layer dimensions of a model on tensor-parallel rank `rank` of `t`.
LayerDims layer_dims(const ModelConfig& config, int rank, int t);

// What forward/backward of one micro-batch need besides the tensors.
struct LayerCall {
  int batch, seq;
  kernels::DropoutBatch dropout;  // which samples; no dropout when not training
  // Called between the big products of a backward pass (may be null): non-blocking
  // data-parallel reductions only move inside MPI calls, so they get more chances to.
  const std::function<void()>* progress = nullptr;
  // MoE layers add their router losses and expert loads here in forward (null: evaluation
  // or recomputation, which must not count them twice), and backward seeds the losses with
  // moe_loss_grad (GPTModel::set_router_loss_scale).
  MoeStats* moe_stats = nullptr;
  double moe_loss_grad = 0.0;
  // Packed documents, [batch * seq] each or null: the first key each query may attend to
  // (--reset-attention-mask) and RoPE / learned positions (--reset-position-ids).
  const int* doc_start = nullptr;
  const int* positions = nullptr;
  // Context parallelism (null or size 1: off): seq is this rank's tokens per sample, positions
  // is never null (global positions) and doc_start holds global positions; attention goes
  // through context_parallel/attention.h.
  const context_parallel::ContextParallel* context = nullptr;
};

// Generation: one step's rows (new tokens of several slots), reused by every layer.
struct CachedLayerBuffers {
  kernels::GemmOperandBuffer ln_out;   // [rows, h] (bf16 in bf16 runs)
  float *mean, *rstd;                  // [rows]
  float* qkv;                          // [rows, q + k + v of this rank], as training's
  float* attn_out;                     // [rows, h / t]
  float* lse;                          // [heads / t, rows]: a fresh prompt's flash attention
  float* residual;                     // [rows, h]
  float* row_out;                      // [rows, h]
  float* fc1_pre;                      // [rows, f / t]
  kernels::GemmOperandBuffer fc1_act;  // [rows, f / t]
};

struct CachedCall {
  const kernels::CachedSegment* segments;
  int n_segments;
  int rows;
  // The step's precision and rounding scratch (the training one is sized for training).
  const kernels::LinearPrecision* precision;
};

class TransformerLayer {
 public:
  // index: the layer's global index (names its parameters and its dropout streams).
  // sequence_parallel: LayerNorm, dropout, bias and residual run on this rank's 1/t of the
  // rows (Korthikanti et al. 2022); needs tokens divisible by t and LayerScratch::gathered.
  // expert: the MoE layers' expert group (null at EP = 1); experts: the buffer holding this
  // rank's experts (null: `params`, which then holds all of them). adapters: the buffer of
  // the LoRA adapters (null or empty: none).
  TransformerLayer(const LayerDims& dims, Parameters& params, int index, comm::Communicator& tp,
                   const kernels::LinearPrecision* precision, bool sequence_parallel = false,
                   comm::Communicator* expert = nullptr, Parameters* experts = nullptr,
                   Parameters* adapters = nullptr);
  // The weights of the layer's linear products, as the products take them (q and kv as one
  // when one GEMM forms both): each one's gradient is written by one product per micro-batch.
  std::vector<ParamRef> product_weights() const;
  void forward(const float* x, const LayerActivations& a, const LayerScratch& w,
               const LayerCall& call) const;
  // The attention core alone (q, k, v -> attention out + log-sum-exp): selective
  // recomputation reruns it before backward.
  void attention_core(const LayerActivations& a, const LayerCall& call) const;
  // d_residual holds dL/d(output) on entry and dL/dx on return.
  void backward(const float* x, const LayerActivations& a, float* d_residual, const LayerScratch& w,
                const LayerCall& call) const;
  // Generation: out = layer(x) for the step's rows, appending their keys and values to kv
  // and attending over the cache (a prompt that starts a slot takes flash attention).
  void forward_cached(const float* x, float* out, const kernels::KvLayerView& kv,
                      const CachedLayerBuffers& w, const CachedCall& call) const;

 private:
  kernels::AttentionDropout attention_dropout(const LayerCall& call) const;
  // The LoRA branches' call: the layer call's samples (their dropout) and w's scratch.
  static tensor_parallel::LoraCall lora_call(const LayerCall& call, const LayerScratch& w) {
    return {call.dropout, w.lora};
  }
  // Rows this rank's LayerNorms, dropouts and residuals run on.
  int local_rows(const LayerCall& call) const;
  // The sequence-parallel mappings around the linears; each is the identity (or the plain
  // buffer) without sequence parallelism, where the linears' own f and g apply.
  kernels::GemmOperand column_input(const kernels::GemmOperandBuffer& ln_out, int n,
                                    const LayerScratch& w) const;
  const float* row_output(const LayerScratch& w, int n) const;
  const float* row_output_grad(const float* d_out, const LayerScratch& w, int n,
                               const LayerCall& call, std::uint32_t site) const;
  const float* column_input_grad(const LayerScratch& w, int n) const;
  // q, k, v of the attention core into qkv as LayerActivations::qkv holds them; qkv_layout
  // says where each head's are for `rows` rows.
  // lora: the LoRA branches' call (lora_call), none when generating.
  void project_qkv(kernels::GemmOperand in, float* qkv, int rows,
                   const tensor_parallel::LoraCall& lora = {}) const;
  kernels::QkvLayout qkv_layout(int rows) const;
  // --qk-layernorm on `rows` rows of qkv: forward from `pre` into qkv (in place when they
  // are the same; rstd kept unless null), backward in place on d_qkv.
  void qk_norm_forward(const float* pre, float* qkv, float* rstd, int rows) const;
  void qk_norm_backward(const float* pre, const float* rstd, float* d_qkv, int rows) const;
  long qkv_width() const;  // floats of one row of qkv on this rank
  // RoPE's table for `seq` positions (null without RoPE).
  std::shared_ptr<const kernels::RopeTable> rope_table(int seq) const;
  // The positions RoPE's table must cover: the whole sequence (seq x c under context
  // parallelism).
  int sequence_positions(const LayerCall& call) const;
  // The attention core's backward: d q, d k, d v into w.d_qkv from w.d_attn.
  void attention_core_backward(const LayerActivations& a, const LayerScratch& w,
                               const LayerCall& call) const;

  // Backward of the projections: d(LayerNorm output), this rank's partial, in w.d_hidden
  // (all-reduced unless sequence parallel); d_qkv is consumed.
  void backward_qkv(kernels::GemmOperand in, const LayerScratch& w, int rows,
                    const tensor_parallel::LoraCall& lora) const;
  kernels::AttentionShape attention_shape(const LayerCall& call) const;
  void mlp_activation(float* fc1_pre, const kernels::GemmOperandBuffer& act, int rows) const;
  void dense_mlp_backward(const float* d_out, const LayerActivations& a, const LayerScratch& w,
                          int rows, int n, const tensor_parallel::LoraCall& lora) const;
  // The MoE MLP on every row of the micro-batch (model/moe_layer.h), its output in
  // w.row_out and d(its input) in w.d_hidden as the dense MLP leaves them. With whole
  // experts (ETP = 1 < t) on this rank's n sequence-parallel rows only, both complete there:
  // mlp_output and mlp_input_grad then skip the tensor group's reduce-scatter and gather.
  bool moe_routes_own_rows() const { return moe_ && moe_mlp_.dims().token_parallel > 1; }
  const float* mlp_output(const LayerScratch& w, int n) const;
  const float* mlp_output_grad(const float* d_out, const LayerScratch& w, int n,
                               const LayerCall& call) const;
  const float* mlp_input_grad(const LayerScratch& w, int n) const;
  void moe_forward(const LayerActivations& a, const LayerScratch& w, const LayerCall& call,
                   int n) const;
  void moe_backward(const float* d_out, const LayerActivations& a, const LayerScratch& w,
                    const LayerCall& call, int n) const;
  // Gives the targeted linears their LoRA branches from the adapter buffer.
  void attach_lora(Parameters& adapters);
  // Zero-bubble B: the output gradients of the next products may be kept in `region` (an
  // activation of this layer that B no longer reads) until W; null ends that.
  void donate(float* region, long floats) const;

  LayerDims dims_;
  int index_;
  comm::Communicator* tp_;
  bool sequence_parallel_;
  kernels::Precision attention_precision_;  // bf16 tiles in bf16 runs, else fp32
  const kernels::LinearPrecision* precision_;
  Norm ln1_, ln2_;
  ParamRef q_norm_{}, k_norm_{};  // --qk-layernorm's weights (head_dim each)
  tensor_parallel::ColumnParallelLinear qkv_, fc1_;
  tensor_parallel::ColumnParallelLinear q_, kv_;  // grouped-query attention instead of qkv_
  tensor_parallel::RowParallelLinear proj_, fc2_;
  bool moe_ = false;  // an MoE layer: moe_mlp_ instead of fc1_ / fc2_
  MoeMlp moe_mlp_;
};

}  // namespace trident
