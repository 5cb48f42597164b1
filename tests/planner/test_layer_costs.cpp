// The planner's MoE layer costs against Megatron's count of an MoE layer's FLOPs (its
// active parameters: each token's k experts and the router), worked out here by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "planner/layer_costs.h"

namespace trident::planner {
namespace {

ModelConfig moe_model(bool swiglu) {
  ModelConfig m;
  m.hidden_size = 256, m.num_attention_heads = 8, m.seq_length = 128, m.vocab_size = 1000;
  m.swiglu = swiglu;
  m.moe.num_experts = 8, m.moe.router_topk = 2, m.moe.ffn_hidden_size = 192;
  return m;
}

double forward_flops(const LayerWork& w) {
  double flops = w.attention_flops;
  for (const Gemm& g : w.gemms) flops += g.flops();
  return flops;
}

// Per token, forward: the router 2 h E; k experts of fc1 (2F rows with SwiGLU) and fc2,
// 2 h fc1 + 2 F h each, split over t. The rest of the layer is the dense layer's attention.
TEST(PlannerLayerCosts, MoeLayerFlopsAreTheActiveParameters) {
  for (bool swiglu : {false, true})
    for (int t : {1, 2})
      for (int ep : {1, 2, 4, 8}) {
        const ModelConfig m = moe_model(swiglu);
        const double T = 2.0 * 128, h = 256, E = 8, k = 2, F = 192, fc1 = swiglu ? 2 * F : F;
        // q, k, v and the projection (8 h^2 per token) and the attention core (4 b s^2 h).
        const double attention_flops = (T * 8 * h * h + 4 * 2 * 128.0 * 128 * h) / t;
        const LayerWork w = moe_layer_work(m, t, 2, false, ep);
        const double want = attention_flops + 2 * T * E * h + T * k * (2 * h * fc1 + 2 * F * h) / t;
        EXPECT_NEAR(forward_flops(w) / want, 1, 1e-12) << swiglu << " t " << t << " ep " << ep;
        // This rank's E / EP experts, each with T k EP / E rows (tokens spread evenly).
        EXPECT_EQ((int)w.gemms.size(), 3 + 2 * 8 / ep);
        EXPECT_DOUBLE_EQ(w.gemms[3].m, T * k * ep / E);
        const double weights = 4 * h * h / t + E * h + E / ep * (fc1 * h + h * F) / t;
        EXPECT_NEAR(w.weight_elements / weights, 1, 1e-12);
      }
}

// A padded capacity: each of this rank's experts gets exactly EP x capacity rows, capacity
// = ceil(T k / E x factor) (0.5: half the even share); without padding the even share, which
// the capacity (1.5) does not cut. Shared experts of width S: fc1 (2S with SwiGLU) and fc2
// on all T rows, split over t, and the gate's [1, h].
TEST(PlannerLayerCosts, MoeCapacityAndSharedExpertsCountTheirRows) {
  const double T = 2.0 * 128, h = 256, E = 8, k = 2, S = 64;
  for (int ep : {1, 2}) {
    ModelConfig m = moe_model(true);
    m.moe.expert_capacity_factor = 0.5f, m.moe.pad_expert_input_to_capacity = true;
    const LayerWork padded = moe_layer_work(m, 2, 2, true, ep);
    EXPECT_DOUBLE_EQ(padded.gemms[3].m, ep * std::ceil(T * k / E * 0.5)) << ep;
    m.moe.expert_capacity_factor = 1.5f, m.moe.pad_expert_input_to_capacity = false;
    EXPECT_DOUBLE_EQ(moe_layer_work(m, 2, 2, true, ep).gemms[3].m, T * k * ep / E) << ep;
    m = moe_model(true);
    const LayerWork dense = moe_layer_work(m, 2, 2, true, ep);
    m.moe.shared_expert_intermediate_size = (int)S, m.moe.shared_expert_gate = true;
    const LayerWork shared = moe_layer_work(m, 2, 2, true, ep);
    const double added = 2 * T * (2 * S / 2 * h + h * S / 2 + h);
    EXPECT_NEAR((forward_flops(shared) - forward_flops(dense)) / added, 1, 1e-12) << ep;
  }
}

}  // namespace
}  // namespace trident::planner
