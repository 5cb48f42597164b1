// The MoE MLP against a float64 reference written from the published definitions
// (Megatron-Core's routing conventions, /work/notes/moe_design.md A2): the output is each
// token's sum over its top-k experts of weight x expert(x); the aux loss is
// coeff E / (k T^2) sum_e n_e sum_x softmax(x)_e, the z-loss coeff mean_x lse(x)^2. The
// gradients (inputs, router, every expert weight) are checked against central finite
// differences of the reference's objective <dy, y> + g (aux + z).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../tensor_parallel/thread_group.h"
#include "model/moe_layer.h"

namespace trident {
namespace {

constexpr int kTokens = 12, kHidden = 8, kExperts = 4, kTopk = 2, kFfn = 6;

struct Case {
  bool swiglu, pre_softmax;
};

ModelConfig moe_model(const Case& c) {
  ModelConfig m;
  m.num_layers = 1, m.hidden_size = kHidden, m.num_attention_heads = 2, m.seq_length = kTokens;
  m.vocab_size = 16, m.swiglu = c.swiglu;
  m.moe.num_experts = kExperts, m.moe.router_topk = kTopk, m.moe.ffn_hidden_size = kFfn;
  m.moe.router_pre_softmax = c.pre_softmax;
  return m;
}

// The reference's weights as doubles: router [E, h], fc1[e] [fc1 rows, h], fc2[e] [h, F].
struct Weights {
  std::vector<double> router;
  std::vector<std::vector<double>> fc1, fc2;
};

double gelu(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

// expert e's output for one token x [h], added into y with weight w.
void expert_add(const Case& c, const Weights& wt, int e, const double* x, double w, double* y) {
  std::vector<double> act(kFfn);
  for (int f = 0; f < kFfn; ++f) {
    double a = 0, b = 0;
    for (int i = 0; i < kHidden; ++i) a += wt.fc1[e][f * kHidden + i] * x[i];
    if (c.swiglu) {
      for (int i = 0; i < kHidden; ++i) b += wt.fc1[e][(kFfn + f) * kHidden + i] * x[i];
      act[f] = a / (1.0 + std::exp(-a)) * b;
    } else {
      act[f] = gelu(a);
    }
  }
  for (int o = 0; o < kHidden; ++o) {
    double s = 0;
    for (int f = 0; f < kFfn; ++f) s += wt.fc2[e][o * kFfn + f] * act[f];
    y[o] += w * s;
  }
}

// <dy, y> + g (aux + z) and y, all in double.
double reference(const Case& c, const Weights& wt, const std::vector<double>& x,
                 const std::vector<double>& dy, double aux_coeff, double z_coeff, double g,
                 std::vector<double>* y_out = nullptr) {
  std::vector<double> y(kTokens * kHidden, 0.0), prob_sum(kExperts, 0.0), counts(kExperts, 0.0);
  double z = 0;
  for (int t = 0; t < kTokens; ++t) {
    const double* xt = &x[t * kHidden];
    std::vector<double> logit(kExperts), p(kExperts);
    for (int e = 0; e < kExperts; ++e) {
      logit[e] = 0;
      for (int i = 0; i < kHidden; ++i) logit[e] += wt.router[e * kHidden + i] * xt[i];
    }
    const double mx = *std::max_element(logit.begin(), logit.end());
    double sum = 0;
    for (int e = 0; e < kExperts; ++e) sum += std::exp(logit[e] - mx);
    for (int e = 0; e < kExperts; ++e) p[e] = std::exp(logit[e] - mx) / sum;
    const double lse = mx + std::log(sum);
    z += lse * lse;
    std::vector<int> order(kExperts);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return logit[a] > logit[b]; });
    double top_sum = 0;
    for (int j = 0; j < kTopk; ++j) top_sum += p[order[j]];
    for (int j = 0; j < kTopk; ++j) {
      const int e = order[j];
      // Default: softmax over the k logits = p renormalised; pre-softmax: p as it is.
      const double w = c.pre_softmax ? p[e] : p[e] / top_sum;
      expert_add(c, wt, e, xt, w, &y[t * kHidden]);
      counts[e] += 1;
    }
    for (int e = 0; e < kExperts; ++e) prob_sum[e] += p[e];
  }
  double aux = 0;
  for (int e = 0; e < kExperts; ++e) aux += counts[e] * prob_sum[e];
  aux *= aux_coeff * kExperts / ((double)kTopk * kTokens * kTokens);
  z *= z_coeff / kTokens;
  double obj = g * (aux + z);
  for (size_t i = 0; i < y.size(); ++i) obj += dy[i] * y[i];
  if (y_out) *y_out = y;
  return obj;
}

// One vector per part of the plan's MoE rows (moe_activation_parts, moe_scratch_parts): the
// sizes the memory plan gives the layer, EP's worst case included.
struct Buffers {
  std::vector<std::vector<float>> act, scratch;
  MoeActivations a;
  MoeScratch w;
  explicit Buffers(const MoeDims& d) {
    for (long n : moe_activation_parts(d, kTokens)) act.emplace_back(std::max(n, 1L));
    for (long n : moe_scratch_parts(d, kTokens)) scratch.emplace_back(std::max(n, 1L));
    auto f = [](std::vector<float>& v) { return v.data(); };
    a = {f(act[0]), f(act[1]),  reinterpret_cast<int*>(f(act[2])),
         f(act[3]), f(act[4]),  f(act[5]),
         f(act[6]), f(act[7]),  f(act[8]),
         f(act[9]), f(act[10]), f(act[11]),
         f(act[12])};
    w = {f(scratch[0]),
         f(scratch[1]),
         f(scratch[2]),
         f(scratch[3]),
         f(scratch[4]),
         f(scratch[5]),
         f(scratch[6]),
         f(scratch[7]),
         f(scratch[8]),
         f(scratch[9]),
         f(scratch[10]),
         f(scratch[11]),
         f(scratch[12]),
         reinterpret_cast<kernels::bf16_t*>(f(scratch[13])),
         reinterpret_cast<kernels::bf16_t*>(f(scratch[14])),
         f(scratch[15]),
         f(scratch[16]),
         f(scratch[17])};
  }
  std::vector<int> idx() const { return std::vector<int>(a.idx, a.idx + (long)kTokens * kTopk); }
};

void check_case(const Case& c) {
  const double aux_coeff = 0.3, z_coeff = 0.05, g = 1.7;
  const ModelConfig m = moe_model(c);
  const MoeDims dims = moe_dims(m, aux_coeff, z_coeff);
  Parameters params(ParameterLayout(m, {0, 1}));
  params.initialize(5, 0.4f, m.num_layers);
  params.zero_grads();
  const MoeMlp mlp(dims, params, params, 0);

  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(kTokens * kHidden), dy(kTokens * kHidden), y(kTokens * kHidden),
      dx(kTokens * kHidden);
  for (float& v : x) v = normal(rng);
  for (float& v : dy) v = normal(rng);

  Buffers b(dims);
  const MoeLosses losses = mlp.forward(x.data(), kTokens, b.a, b.w, y.data());
  mlp.backward(x.data(), kTokens, b.a, b.w, dy.data(), g, dx.data());

  // The reference's weights and inputs, from the same floats.
  Weights wt;
  auto values = [&](const std::string& name) {
    const ParamRef r = params.get(name);
    return std::vector<double>(r.value, r.value + r.numel);
  };
  wt.router = values("layers.0.mlp.router.weight");
  for (int e = 0; e < kExperts; ++e) {
    wt.fc1.push_back(values(moe_expert_param(0, e, "linear_fc1.weight")));
    wt.fc2.push_back(values(moe_expert_param(0, e, "linear_fc2.weight")));
  }
  std::vector<double> xd(x.begin(), x.end()), dyd(dy.begin(), dy.end()), y_ref;
  reference(c, wt, xd, dyd, aux_coeff, z_coeff, g, &y_ref);
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_NEAR(y[i], y_ref[i], 1e-5 * (1 + std::abs(y_ref[i])));
  const double aux_only =
      reference(c, wt, xd, std::vector<double>(dyd.size(), 0.0), aux_coeff, 0.0, 1.0);
  EXPECT_NEAR(losses.aux, aux_only, 1e-6 * aux_only);
  const double z_only =
      reference(c, wt, xd, std::vector<double>(dyd.size(), 0.0), 0.0, z_coeff, 1.0);
  EXPECT_NEAR(losses.z, z_only, 1e-6 * z_only);

  // Central differences of the double objective against each gradient.
  auto check = [&](std::vector<double>& v, const float* grad, const std::string& what) {
    for (size_t i = 0; i < v.size(); ++i) {
      const double h = 1e-6, keep = v[i];
      v[i] = keep + h;
      const double up = reference(c, wt, xd, dyd, aux_coeff, z_coeff, g);
      v[i] = keep - h;
      const double down = reference(c, wt, xd, dyd, aux_coeff, z_coeff, g);
      v[i] = keep;
      const double want = (up - down) / (2 * h);
      ASSERT_NEAR(grad[i], want, 2e-4 * (1 + std::abs(want))) << what << " element " << i;
    }
  };
  check(xd, dx.data(), "dx");
  check(wt.router, params.get("layers.0.mlp.router.weight").grad, "router");
  for (int e = 0; e < kExperts; ++e) {
    check(wt.fc1[e], params.get(moe_expert_param(0, e, "linear_fc1.weight")).grad, "fc1");
    check(wt.fc2[e], params.get(moe_expert_param(0, e, "linear_fc2.weight")).grad, "fc2");
  }
}

TEST(MoeMlp, SwigluTopkThenSoftmaxMatchesTheReference) {
  check_case({true, false});
}
TEST(MoeMlp, SwigluPreSoftmaxMatchesTheReference) {
  check_case({true, true});
}
TEST(MoeMlp, GeluTopkThenSoftmaxMatchesTheReference) {
  check_case({false, false});
}

TEST(MoeMlp, EveryExpertReceivesTokensInTheTestData) {
  // A routing that never used an expert would leave its gradients unchecked above.
  const ModelConfig m = moe_model({true, false});
  const MoeDims dims = moe_dims(m, 0.0, 0.0);
  Parameters params(ParameterLayout(m, {0, 1}));
  params.initialize(5, 0.4f, m.num_layers);
  const MoeMlp mlp(dims, params, params, 0);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(kTokens * kHidden), y(kTokens * kHidden);
  for (float& v : x) v = normal(rng);
  Buffers b(dims);
  mlp.forward(x.data(), kTokens, b.a, b.w, y.data());
  std::vector<int> used(kExperts, 0);
  for (int i : b.idx()) used[i] = 1;
  EXPECT_EQ(std::accumulate(used.begin(), used.end(), 0), kExperts);
}

// One forward and backward of the layer (a shared expert of width 4 beside the routed
// ones) with its experts' products at `precision`, on `in` (x as the layer receives it) and
// the output gradient dy.
struct PrecisionRun {
  std::vector<float> y, dx, grads, probs;
  std::vector<int> idx;
};

PrecisionRun run_at(kernels::Precision precision, kernels::GemmOperand in,
                    const std::vector<float>& dy) {
  ModelConfig m = moe_model({true, false});
  m.moe.shared_expert_intermediate_size = 4;
  MoeDims dims = moe_dims(m, 0.3, 0.05);
  dims.bf16 = precision == kernels::Precision::kBf16;
  dims.fp16 = precision == kernels::Precision::kFp16;
  Parameters params(ParameterLayout(m, {0, 1}));
  if (precision != kernels::Precision::kFp32) params.set_low_precision(precision);
  params.initialize(5, 0.4f, m.num_layers);
  params.zero_grads();
  params.refresh_low_precision();
  const MoeMlp mlp(dims, params, params, 0);
  Buffers b(dims);
  const long n = (long)dy.size();
  PrecisionRun r{std::vector<float>(n), std::vector<float>(n)};
  mlp.forward(in, kTokens, b.a, b.w, r.y.data());
  r.probs.assign(b.a.probs, b.a.probs + kTokens * kExperts);
  r.idx = b.idx();
  mlp.backward(in, kTokens, b.a, b.w, dy.data(), 1.7, r.dx.data());
  r.grads.assign(params.grads(), params.grads() + params.size());
  return r;
}

std::vector<float> normal_values(std::mt19937& rng, long n) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

double normwise(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
  return std::sqrt(num / den);
}

// The router is fp32 on the same input: its softmax and top-k equal the fp32 layer's bit for
// bit; the output and every gradient differ from the fp32 layer's as low-precision operands
// must (more than fp32 rounding, 1e-6, less than `bound` normwise).
void expect_low_precision_differences(const PrecisionRun& low, const PrecisionRun& fp32,
                                      double bound) {
  EXPECT_EQ(low.idx, fp32.idx);
  EXPECT_EQ(low.probs, fp32.probs);
  for (double e :
       {normwise(low.y, fp32.y), normwise(low.dx, fp32.dx), normwise(low.grads, fp32.grads)}) {
    EXPECT_GT(e, 1e-6);
    EXPECT_LT(e, bound);
  }
}

// bf16 (--bf16): the same layer on a bf16 input (a bf16 LayerNorm output) with bf16
// operands for the experts' and the shared experts' products; the router's input is widened
// exactly. bf16's bound: 3e-2 normwise.
TEST(MoeMlp, Bf16RoundsTheExpertProductsAndKeepsTheRouterFp32) {
  std::mt19937 rng(11);
  const long n = kTokens * kHidden;
  std::vector<float> x = normal_values(rng, n);
  const std::vector<float> dy = normal_values(rng, n);
  std::vector<kernels::bf16_t> x16(n);
  kernels::to_bf16(x.data(), x16.data(), n);
  kernels::from_bf16(x16.data(), x.data(), n);  // the fp32 layer sees the same values
  expect_low_precision_differences(run_at(kernels::Precision::kBf16, x16.data(), dy),
                                   run_at(kernels::Precision::kFp32, x.data(), dy), 3e-2);
}

// fp16 (--fp16): the experts' and the shared experts' operands rounded through fp16 (the
// weights from their fp16 copy) and multiplied in fp32. fp16's bound: 5e-3 normwise (11
// mantissa bits against bf16's 8).
TEST(MoeMlp, Fp16RoundsTheExpertProductsThroughFp16AndKeepsTheRouterFp32) {
  std::mt19937 rng(11);
  const long n = kTokens * kHidden;
  std::vector<float> x = normal_values(rng, n);
  const std::vector<float> dy = normal_values(rng, n);
  kernels::round_through_fp16(x.data(), x.data(), n);  // an fp16 run's layer input
  expect_low_precision_differences(run_at(kernels::Precision::kFp16, x.data(), dy),
                                   run_at(kernels::Precision::kFp32, x.data(), dy), 5e-3);
}

// Expert parallelism on EP threads: rank r routes its own tokens x_r, runs experts
// [r E/EP, (r+1) E/EP) on the rows the others send it, and gets its outputs back. Each rank's
// output, input gradient and router gradient equal the one-rank layer's on x_r alone, and
// the owner's gradient of an expert is the sum over ranks of the one-rank gradients (every
// rank's tokens, once); the experts a rank does not own get no gradient there. apart: each
// rank holds only its experts, in an expert buffer of their own (ExpertSlice), drawn by name
// as the one-rank layer's (which holds them all inline), so the outputs agree only if the
// values do; the experts it does not own are not held at all.
void check_expert_parallel(int ep, bool apart) {
  const ModelConfig m = moe_model({true, false});
  const double aux_coeff = 0.3, z_coeff = 0.05, g = 1.7;
  MoeDims one = moe_dims(m, aux_coeff, z_coeff), split = one;
  split.expert_parallel = ep;
  const ParameterLayout layout(m, {0, 1});
  std::vector<std::string> names = {"layers.0.mlp.router.weight"};
  for (int e = 0; e < kExperts; ++e)
    for (const char* leaf : {"linear_fc1.weight", "linear_fc2.weight"})
      names.push_back(moe_expert_param(0, e, leaf));
  struct Result {
    std::vector<float> y, dx;
    std::vector<std::vector<float>> grads;  // per name
  };
  auto run = [&](const MoeDims& d, comm::Communicator* expert, int rank) {
    const bool own_buffer = apart && expert;
    const ExpertSlice dense = own_buffer ? dense_expert_slice(m, ep) : ExpertSlice{};
    const ExpertSlice mine =
        own_buffer ? expert_buffer_slice(m, ep, rank) : ExpertSlice{ExpertSlice::Kind::kOnly, 0, 0};
    Parameters params{ParameterLayout(m, {0, 1}, {}, dense)};
    Parameters experts{ParameterLayout(m, {0, 1}, {}, mine)};
    for (Parameters* p : {&params, &experts}) {
      p->initialize(5, 0.4f, m.num_layers);
      p->zero_grads();
    }
    const MoeMlp mlp(d, params, own_buffer ? experts : params, 0, expert);
    std::mt19937 rng(100 + rank);
    std::normal_distribution<float> normal(0.f, 1.f);
    Result r{std::vector<float>(kTokens * kHidden), std::vector<float>(kTokens * kHidden), {}};
    std::vector<float> x(kTokens * kHidden), dy(kTokens * kHidden);
    for (float& v : x) v = normal(rng);
    for (float& v : dy) v = normal(rng);
    Buffers b(d);
    mlp.forward(x.data(), kTokens, b.a, b.w, r.y.data());
    mlp.backward(x.data(), kTokens, b.a, b.w, dy.data(), g, r.dx.data());
    for (const std::string& n : names) {
      Parameters* holder = params.layout().contains(n)    ? &params
                           : experts.layout().contains(n) ? &experts
                                                          : nullptr;
      EXPECT_TRUE(holder || own_buffer) << n << " is held nowhere";
      if (!holder) {  // another rank's expert: no gradient here
        r.grads.emplace_back(layout.find(n).numel(), 0.f);
        continue;
      }
      const ParamRef p = holder->get(n);
      r.grads.emplace_back(p.grad, p.grad + p.numel);
    }
    if (own_buffer)  // exactly E/EP experts, each an fc1 and an fc2
      EXPECT_EQ(experts.layout().specs().size(), (size_t)2 * kExperts / ep);
    return r;
  };
  std::vector<Result> alone(ep), together(ep);
  for (int r = 0; r < ep; ++r) alone[r] = run(one, nullptr, r);
  tensor_parallel_test::run_group(ep, [&](comm::Communicator& expert) {
    together[expert.rank()] = run(split, &expert, expert.rank());
  });
  auto near = [](const std::vector<float>& got, const std::vector<double>& want,
                 const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << what << " element " << i;
  };
  for (int r = 0; r < ep; ++r) {
    const std::string rank = "EP " + std::to_string(ep) + " rank " + std::to_string(r);
    near(together[r].y, std::vector<double>(alone[r].y.begin(), alone[r].y.end()), rank + " y");
    near(together[r].dx, std::vector<double>(alone[r].dx.begin(), alone[r].dx.end()), rank + " dx");
    near(together[r].grads[0],
         std::vector<double>(alone[r].grads[0].begin(), alone[r].grads[0].end()), rank + " router");
    for (size_t n = 1; n < names.size(); ++n) {
      const int expert = (int)(n - 1) / 2, owner = expert / (kExperts / ep);
      std::vector<double> want(alone[0].grads[n].size(), 0.0);
      if (r == owner)
        for (int q = 0; q < ep; ++q)
          for (size_t i = 0; i < want.size(); ++i) want[i] += alone[q].grads[n][i];
      near(together[r].grads[n], want, rank + " " + names[n]);
    }
  }
}

TEST(MoeMlp, ExpertParallelRanksEqualOneRankPerTokenAndSumExpertGradients) {
  check_expert_parallel(2, false);
  check_expert_parallel(4, false);
}

TEST(MoeMlp, ExpertParallelRanksHoldingOnlyTheirExpertsEqualOneRank) {
  check_expert_parallel(2, true);
  check_expert_parallel(4, true);
}

// The piece of a global [rows, cols] tensor that `shard` gives its rank (Megatron's
// partition_stride: the split dimension is `stride` blocks, each cut into `parts`).
std::vector<double> shard_of(const std::vector<float>& global, const std::vector<long>& shape,
                             const ShardSpec& shard) {
  const long rows = shape[0], cols = shape[1];
  const long along = shard.dim == 0 ? rows : cols, block = along / shard.stride,
             piece = block / shard.parts;
  auto held = [&](long i) { return i % block / piece == shard.rank; };
  std::vector<double> out;
  for (long r = 0; r < rows; ++r)
    for (long c = 0; c < cols; ++c)
      if (held(shard.dim == 0 ? r : c)) out.push_back(global[r * cols + c]);
  return out;
}

// Tensor parallelism on t threads: every rank is given all the tokens (the sequence-parallel
// rows all-gathered) and runs its shard of each expert. The partial outputs and input
// gradients sum over the ranks to the one-rank layer's, the router's gradient is the
// one-rank gradient on every rank (complete, not partial), and each expert's gradient is
// the shard of the one-rank gradient. A routing-weight gradient left partial, or the
// router's dx counted on every rank, fails here.
void check_tensor_parallel(int t) {
  const ModelConfig m = moe_model({true, false});
  const double aux_coeff = 0.3, z_coeff = 0.05, g = 1.7;
  std::vector<std::string> names = {"layers.0.mlp.router.weight"};
  for (int e = 0; e < kExperts; ++e)
    for (const char* leaf : {"linear_fc1.weight", "linear_fc2.weight"})
      names.push_back(moe_expert_param(0, e, leaf));
  struct Result {
    std::vector<float> y, dx;
    std::vector<std::vector<float>> grads;  // per name
    std::vector<ParamSpec> specs;
    MoeLosses losses;
  };
  auto run = [&](comm::Communicator* tensor, int rank, int size) {
    Parameters params{ParameterLayout(m, {rank, size})};
    params.initialize(5, 0.4f, m.num_layers);
    params.zero_grads();
    MoeMlp mlp(moe_dims(m, aux_coeff, z_coeff, size), params, params, 0);
    mlp.set_tensor_group(tensor);
    std::mt19937 rng(100);  // the same tokens and output gradient on every rank
    std::normal_distribution<float> normal(0.f, 1.f);
    Result r{std::vector<float>(kTokens * kHidden), std::vector<float>(kTokens * kHidden)};
    std::vector<float> x(kTokens * kHidden), dy(kTokens * kHidden);
    for (float& v : x) v = normal(rng);
    for (float& v : dy) v = normal(rng);
    Buffers b(mlp.dims());
    r.losses = mlp.forward(x.data(), kTokens, b.a, b.w, r.y.data());
    mlp.backward(x.data(), kTokens, b.a, b.w, dy.data(), g, r.dx.data());
    for (const std::string& n : names) {
      const ParamRef p = params.get(n);
      r.grads.emplace_back(p.grad, p.grad + p.numel);
      r.specs.push_back(params.layout().find(n));
    }
    return r;
  };
  const Result one = run(nullptr, 0, 1);
  std::vector<Result> ranks(t);
  tensor_parallel_test::run_group(t, [&](comm::Communicator& tensor) {
    ranks[tensor.rank()] = run(&tensor, tensor.rank(), t);
  });
  auto near = [](const std::vector<double>& got, const std::vector<float>& want_f,
                 const std::string& what) {
    const std::vector<double> want(want_f.begin(), want_f.end());
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << what << " element " << i;
  };
  auto sum = [&](std::vector<float> Result::*field) {
    std::vector<double> s(kTokens * kHidden, 0.0);
    for (const Result& r : ranks)
      for (size_t i = 0; i < s.size(); ++i) s[i] += (r.*field)[i];
    return s;
  };
  near(sum(&Result::y), one.y, "y summed over the tensor group");
  near(sum(&Result::dx), one.dx, "dx summed over the tensor group");
  for (int r = 0; r < t; ++r) {
    const std::string rank = "t " + std::to_string(t) + " rank " + std::to_string(r);
    EXPECT_NEAR(ranks[r].losses.aux, one.losses.aux, 1e-6 * one.losses.aux) << rank;
    EXPECT_NEAR(ranks[r].losses.z, one.losses.z, 1e-6 * one.losses.z) << rank;
    near(std::vector<double>(ranks[r].grads[0].begin(), ranks[r].grads[0].end()), one.grads[0],
         rank + " router");
    for (size_t n = 1; n < names.size(); ++n) {
      const ParamSpec& s = ranks[r].specs[n];
      const std::vector<double> want = shard_of(one.grads[n], s.global_shape, s.shard);
      near(std::vector<double>(ranks[r].grads[n].begin(), ranks[r].grads[n].end()),
           std::vector<float>(want.begin(), want.end()), rank + " " + names[n]);
    }
  }
}

TEST(MoeMlp, TensorParallelShardsSumToOneRankAndTheRouterIsComplete) {
  check_tensor_parallel(2);
}

}  // namespace
}  // namespace trident
