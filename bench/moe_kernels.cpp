// The MoE kernels' cost against the dense MLP of the same active size, at gpt-tiny's width
// (h = 384, one micro-batch of b = 4, s = 256: T = 1024 tokens): a dense MLP of 4h = 1536
// against E = 8 experts of 768 with top-2 routing (each token's active expert width is
// 2 x 768 = 1536, the dense one's). Forward and backward of the two linear layers of each
// (the activation between them costs the same in both and is left out), plus for the MoE
// the router (logits GEMM, softmax and top-k, aux loss and backward), the permutation and
// the weighted unpermute with their backwards. Routing from random logits (near balanced)
// and from logits biased towards two experts (skewed); A B A B five times, the fastest of
// each kept (the shared machine's other jobs only ever slow a run down).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "core/random.h"
#include "kernels/gemm.h"
#include "kernels/grouped_gemm.h"
#include "kernels/moe_permute.h"
#include "kernels/moe_router.h"
#include "time_ms.h"

namespace {

using namespace trident::kernels;

double time_ms(const std::function<void()>& f) {
  return trident::bench::time_ms(f, 0.5);
}

std::vector<float> filled(long n, std::uint64_t seed, float scale) {
  std::vector<float> v(n);
  for (long i = 0; i < n; ++i) v[i] = (float)(scale * trident::normal_at(seed, 1, i));
  return v;
}

constexpr int T = 1024, H = 384, E = 8, K = 2, F = 768, FD = K * F;

// The dense MLP's GEMMs: fc1 [FD, H], fc2 [H, FD], forward and backward.
struct Dense {
  std::vector<float> x = filled((long)T * H, 1, 1.f), w1 = filled((long)FD * H, 2, 0.02f);
  std::vector<float> w2 = filled((long)H * FD, 3, 0.02f), a = filled((long)T * FD, 4, 1.f);
  std::vector<float> y = std::vector<float>((size_t)T * H), da = std::vector<float>(a.size());
  std::vector<float> dw1 = std::vector<float>(w1.size()), dw2 = std::vector<float>(w2.size());
  std::vector<float> dx = std::vector<float>(x.size());
  void step() {
    linear_forward(x.data(), w1.data(), a.data(), T, H, FD);
    linear_forward(a.data(), w2.data(), y.data(), T, FD, H);
    linear_backward_input(y.data(), w2.data(), da.data(), T, FD, H, false);
    linear_backward_weight(y.data(), a.data(), dw2.data(), T, FD, H);
    linear_backward_input(da.data(), w1.data(), dx.data(), T, H, FD, false);
    linear_backward_weight(da.data(), x.data(), dw1.data(), T, H, FD);
  }
};

// The MoE MLP's router, permutation and grouped GEMMs, forward and backward.
struct Moe {
  std::vector<float> x = filled((long)T * H, 1, 1.f), wr = filled((long)E * H, 5, 0.02f);
  std::vector<float> logits = std::vector<float>((size_t)T * E), probs = logits, dlog = logits;
  std::vector<float> lse = std::vector<float>(T), weights = std::vector<float>(T * K);
  std::vector<int> idx = std::vector<int>(T * K);
  std::vector<float> counts = std::vector<float>(E), dw = weights, dwr = wr;
  std::vector<float> w1 = filled((long)E * F * H, 6, 0.02f), w2 = filled((long)E * H * F, 7, 0.02f);
  std::vector<float> rows = std::vector<float>((size_t)T * K * H),
                     a = filled((long)T * K * F, 8, 1);
  std::vector<float> out = rows, da = a, drows = rows, y = x, dx = x;
  std::vector<float> dw1 = std::vector<float>(w1.size()), dw2 = std::vector<float>(w2.size());
  float skew = 0.f;  // added to experts 0 and 1's logits

  void step() {
    const RouterShape s{T, E, K, false, 0.f};
    linear_forward(x.data(), wr.data(), logits.data(), T, H, E);
    for (int t = 0; t < T; ++t) logits[t * E] += skew, logits[t * E + 1] += skew;
    moe_router_forward(s, logits.data(), probs.data(), lse.data(), idx.data(), weights.data());
    count_tokens_per_expert(idx.data(), T, K, E, counts.data());
    const MoePermutation p = make_moe_permutation(idx.data(), T, K, E);
    moe_permute(p, x.data(), H, rows.data());
    grouped(p, true);
    moe_unpermute(p, out.data(), weights.data(), H, y.data());
    // Backward, with y standing in for its own gradient.
    moe_unpermute_backward(p, out.data(), weights.data(), y.data(), H, drows.data(), dw.data());
    grouped(p, false);
    moe_permute_backward(p, drows.data(), H, dx.data());
    moe_router_backward(s, probs.data(), idx.data(), weights.data(), dw.data(), dlog.data());
    moe_aux_loss_backward(probs.data(), counts.data(), T, E, aux_loss_scale(1e-2, E, K, T),
                          dlog.data());
    linear_backward_input(dlog.data(), wr.data(), dx.data(), T, H, E, true);
    linear_backward_weight(dlog.data(), x.data(), dwr.data(), T, H, E);
  }
  void grouped(const MoePermutation& p, bool forward) {
    std::vector<const float*> w1s, w2s;
    std::vector<float*> dw1s, dw2s;
    for (int e = 0; e < E; ++e) {
      w1s.push_back(w1.data() + (long)e * F * H), w2s.push_back(w2.data() + (long)e * H * F);
      dw1s.push_back(dw1.data() + (long)e * F * H), dw2s.push_back(dw2.data() + (long)e * H * F);
    }
    const ExpertGroups fc1{p.offsets.data(), E, H, F}, fc2{p.offsets.data(), E, F, H};
    if (forward) {
      grouped_linear_forward(fc1, rows.data(), w1s.data(), a.data());
      grouped_linear_forward(fc2, a.data(), w2s.data(), out.data());
      return;
    }
    grouped_linear_backward_input(fc2, drows.data(), w2s.data(), da.data());
    grouped_linear_backward_weight(fc2, drows.data(), a.data(), dw2s.data());
    grouped_linear_backward_input(fc1, da.data(), w1s.data(), drows.data());
    grouped_linear_backward_weight(fc1, da.data(), rows.data(), dw1s.data());
  }
};

}  // namespace

int main() {
  Dense dense;
  Moe moe;
  std::printf(
      "MLP forward + backward GEMMs, T = %d, h = %d: dense 4h = %d vs %d experts of %d, "
      "top-%d\n",
      T, H, FD, E, F, K);
  for (float skew : {0.f, 1.5f}) {
    moe.skew = skew;
    // A B A B ..., the fastest of each: the least disturbed by the other jobs on the machine.
    double d = 1e30, m = 1e30;
    for (int round = 0; round < 5; ++round) {
      d = std::min(d, time_ms([&] { dense.step(); }));
      m = std::min(m, time_ms([&] { moe.step(); }));
    }
    moe.step();
    const MoePermutation p = make_moe_permutation(moe.idx.data(), T, K, E);
    long most = 0;
    for (int e = 0; e < E; ++e) most = std::max(most, p.rows_of(e));
    std::printf(
        "  %-13s dense %7.2f ms   moe %7.2f ms   ratio %.2f   (busiest expert %ld of %d "
        "rows)\n",
        skew > 0 ? "skewed" : "near balanced", d, m, m / d, most, T * K);
  }
  return 0;
}
