#pragma once
// The work of one micro-batch through one transformer layer and through the output layer on
// one device, split the way the planner times it: matrix products (at the cluster's GEMM
// efficiency), the attention core (its products, at the attention efficiency), and the
// element-wise kernels (LayerNorm, bias, GeLU, residual adds, softmax/cross-entropy) at a
// time per element. The model and the calibration share these counts, so what calibration
// measures is exactly what the model multiplies.
#include <vector>

#include "config/model_config.h"
#include "kernels/low_precision.h"
#include "planner/cluster.h"

namespace trident::planner {

struct Gemm {
  double m, n, k;
  double flops() const { return 2 * m * n * k; }
};

struct LayerWork {
  std::vector<Gemm> gemms;     // forward; backward runs two products of each one's size
  double weight_elements = 0;  // the products' weights on this device (n x k summed)
  double attention_flops = 0;  // forward: Q K^T and P V over this device's heads
  double elementwise = 0;      // forward element accesses of the other kernels
  // Zero-bubble schedules: W holds the weight gradients of the first `deferred_gemms`
  // products (-1: all of them); an MoE layer's MLP computes its own in B.
  int deferred_gemms = -1;
};

struct HeadWork {
  Gemm logits;                 // forward, one row chunk of the fused output layer at a time
  double chunks = 1;           // row chunks per micro-batch
  double logits_elements = 0;  // T x V / t: the softmax and cross-entropy pass over them
  double elementwise = 0;      // the final LayerNorm
  double weight_elements = 0;  // V / t x h: the weight gradient each row chunk adds to
  double rows = 0;             // of one row chunk
};

// sequence_parallel: the LayerNorms, residual adds and bias + dropout of [tokens, h] run on
// 1/t of the tokens. context (c > 1, context parallelism): the rank holds seq / c tokens of
// each sample, and its attention core is 1/c of the whole sequence's (the load-balanced
// chunks give every cp rank the same share of the causal mask; a2a's heads / c over the whole
// sequence is the same work).
LayerWork transformer_layer_work(const ModelConfig& m, int tensor, int micro_batch,
                                 bool sequence_parallel = false, int context = 1);
// An MoE layer (the MoE MLP instead of the dense one) on a rank of an expert group of
// `expert` ranks, with the tokens spread evenly over the experts.
LayerWork moe_layer_work(const ModelConfig& m, int tensor, int micro_batch, bool sequence_parallel,
                         int expert);
HeadWork output_layer_work(const ModelConfig& m, int tensor, int micro_batch, int context = 1);

// Seconds on one device of the cluster.
double gemm_seconds(const Cluster& c, const Gemm& g);
double attention_seconds(const Cluster& c, double flops);
double elementwise_seconds(const Cluster& c, double accesses);
double cross_entropy_seconds(const Cluster& c, double logits);

// Adding a micro-batch's weight gradients into the accumulated fp32 ones, on a cluster whose
// kernels do it apart from the product (weight_gradient_accumulation = "separate": trident
// on CPUs): memory traffic the GEMM efficiency (measured on products that overwrite) does
// not include. trident's bf16 products write a fresh fp32 gradient that a second pass adds
// (write, read, read and write the sum: 16 bytes an element) unless the weight is larger
// than that scratch (the output layer when a row chunk holds fewer rows than h): then the
// product adds in place, as fp32 and fp16 runs do (read and write: 8 bytes). Nothing when
// the accumulation is fused into the product or without a memory bandwidth.
// Streaming `elements` x `bytes_per_element` through memory at the device's bandwidth (0
// without one).
double memory_traffic_seconds(const Cluster& c, double elements, double bytes_per_element);
double layer_accumulate_seconds(const Cluster& c, const LayerWork& w, kernels::Precision p);
double head_accumulate_seconds(const Cluster& c, const HeadWork& w, kernels::Precision p,
                               int hidden);

// Forward and backward of one layer (backward: two products per forward product, the
// attention core's backward and element-wise work counted as twice the forward's) and of
// the output layer.
struct PassSeconds {
  double gemm = 0, other = 0;  // other: attention core and element-wise kernels
  double total() const { return gemm + other; }
};
PassSeconds layer_forward_seconds(const Cluster& c, const LayerWork& w);
PassSeconds layer_backward_seconds(const Cluster& c, const LayerWork& w);
PassSeconds head_forward_seconds(const Cluster& c, const HeadWork& w);
PassSeconds head_backward_seconds(const Cluster& c, const HeadWork& w);

}  // namespace trident::planner
