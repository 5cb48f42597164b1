// The memory plan and the carve are one table (chunk_buffers). For every option combination
// the parity tests run (GPT-2 and Llama blocks, recomputation, precision, dropout, t = 2
// with and without sequence parallelism, 1F1B slots and zero-bubble held sets, pipeline
// stages, inference with decode panels, LoRA), the plan a model prints is the planner's, and its
// arena holds exactly the plan's buffers: every part of every copy at its planned size,
// nothing more, no two overlapping, the held sets first (one contiguous range each).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/placed_communicator.h"
#include "model/gpt_model.h"

namespace trident {
namespace {

// Three layers, so that recomputing them two at a time leaves a smaller last group.
ModelConfig tiny_gpt() {
  ModelConfig c;
  c.num_layers = 3, c.hidden_size = 16, c.num_attention_heads = 2, c.seq_length = 9;
  c.vocab_size = 37, c.make_vocab_size_divisible_by = 128;
  return c;
}

// RMSNorm, RoPE, SwiGLU, grouped-query attention, untied output layer; `biases` splits
// q|kv into two products.
ModelConfig tiny_llama(bool biases) {
  ModelConfig c = tiny_gpt();
  c.num_attention_heads = 4;
  c.normalization = "RMSNorm", c.position_embedding_type = "rope", c.swiglu = true;
  c.ffn_hidden_size = 24, c.group_query_attention = true, c.num_query_groups = 2;
  c.untie_embeddings_and_output_weights = true, c.disable_bias_linear = !biases;
  return c;
}

struct Recompute {
  const char* name;
  int layers, group;
  bool attention;
};
const Recompute kRecompute[] = {{"none", 0, 1, false},
                                {"full uniform 2", 3, 2, false},
                                {"full block 2", 2, 1, false},
                                {"selective", 0, 1, true}};

struct Schedule {
  const char* name;
  int slots, deferred, unfinished;
};
const Schedule kSchedules[] = {{"one slot", 1, 0, 0}, {"1f1b", 2, 0, 0}, {"zb-h1", 2, 2, 3}};

struct Stage {
  const char* name;
  ChunkPlacement placement;
};
const Stage kStages[] = {{"whole", {0, -1, true, true}},
                         {"first", {0, 2, true, false}},
                         {"middle", {1, 1, false, false}},
                         {"last", {2, 1, false, true}}};

struct Tensor {
  const char* name;
  int size;
  bool sequence_parallel;
};
const Tensor kTensor[] = {{"t1", 1, false}, {"t2", 2, false}, {"t2 sp", 2, true}};

const kernels::Precision kPrecisions[] = {kernels::Precision::kFp32, kernels::Precision::kBf16,
                                          kernels::Precision::kFp16};

std::vector<std::pair<const char*, ModelConfig>> models() {
  return {{"gpt", tiny_gpt()}, {"llama", tiny_llama(false)}, {"llama+bias", tiny_llama(true)}};
}

bool same_row(const PlannedBuffer& a, const PlannedBuffer& b) {
  return a.group == b.group && a.name == b.name && a.floats == b.floats && a.copies == b.copies;
}

bool in_held_set(BufferHome home) {
  return home == BufferHome::kHeldLayers || home == BufferHome::kHeldDenseLayers ||
         home == BufferHome::kHeldOutputs;
}

// The printed plan lists the table row for row, and is the planner's (plan_chunk_memory of
// the same shape) but for Parameters' decode copies, which only the built model knows.
void expect_plan_lists_the_table(const GPTModel& m, const std::string& what) {
  const std::vector<PlannedBuffer>& printed = m.memory_plan().buffers();
  const std::vector<ChunkBuffer>& table = m.buffers();
  ASSERT_EQ(printed.size(), table.size()) << what;
  for (size_t i = 0; i < table.size(); ++i)
    EXPECT_TRUE(
        same_row(printed[i], {table[i].group, table[i].name, table[i].floats(), table[i].copies}))
        << what << ": " << printed[i].name;
  const bool panels = m.parameters().decode_panel_floats() > 0;
  const std::vector<PlannedBuffer> planner = plan_chunk_memory(m.shape()).buffers();
  ASSERT_EQ(planner.size() + panels, printed.size()) << what;
  for (size_t i = 0; i < planner.size(); ++i)
    EXPECT_TRUE(same_row(planner[i], printed[i])) << what << ": " << printed[i].name;
  EXPECT_EQ(table[0].floats(), m.parameters().size()) << what;  // the weights
  if (panels) {
    EXPECT_EQ(table.back().floats(), m.parameters().decode_panel_floats()) << what;
  }
}

// Every copy of every arena buffer is carved part by part at its planned size; nothing
// outside the arena (parameters, optimizer state) is.
void expect_every_part_carved(const GPTModel& m, const std::string& what) {
  std::map<int, std::vector<long>> parts;  // row -> the carved parts' sizes, in order
  for (const GPTModel::CarvedPart& p : m.carved()) parts[p.buffer].push_back(p.floats);
  const std::vector<ChunkBuffer>& table = m.buffers();
  for (int i = 0; i < (int)table.size(); ++i) {
    const ChunkBuffer& b = table[i];
    EXPECT_EQ(b.in_arena(), b.group == "activations" || b.group == "scratch") << what << b.name;
    std::vector<long> planned;
    if (b.in_arena())
      for (int c = 0; c < b.copies; ++c)
        planned.insert(planned.end(), b.parts.begin(), b.parts.end());
    EXPECT_EQ(parts[i], planned) << what << ": " << b.name;
  }
}

// The carved parts tile the arena: sorted by offset, each ends (rounded to its cache line)
// where the next begins, the last at the arena's end, the held sets' parts first.
void expect_parts_tile_the_arena(const GPTModel& m, const std::string& what) {
  std::vector<GPTModel::CarvedPart> parts = m.carved();
  // An empty part (a feature the model does not use) shares its offset with the next part.
  std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) {
    return a.offset < b.offset || (a.offset == b.offset && a.floats < b.floats);
  });
  long end = 0;
  bool held_part = true;
  for (const GPTModel::CarvedPart& p : parts) {
    ASSERT_EQ(p.offset, end) << what << ": " << m.buffers()[p.buffer].name;
    end += Arena::slice_floats(p.floats);
    const bool held = in_held_set(m.buffers()[p.buffer].home);
    EXPECT_TRUE(held_part || !held) << what << ": a held part after the others";
    held_part = held;
  }
  EXPECT_EQ(end, m.arena_floats()) << what;
}

void expect_plan_is_carve(const GPTModel& m, const std::string& what) {
  expect_plan_lists_the_table(m, what);
  expect_every_part_carved(m, what);
  expect_parts_tile_the_arena(m, what);
}

TEST(GPTModelMemory, TrainingPlanIsTheCarve) {
  int built = 0;
  for (const auto& [model, config] : models())
    for (const Tensor& t : kTensor)
      for (const Stage& stage : kStages)
        for (const Schedule& schedule : kSchedules)
          for (const Recompute& r : kRecompute)
            for (kernels::Precision precision : kPrecisions)
              for (bool dropout : {false, true}) {
                ChunkOptions o;
                o.placement = stage.placement;
                o.slots = schedule.slots, o.deferred_weight_grads = schedule.deferred;
                o.unfinished = schedule.unfinished;
                o.recompute_layers = r.layers, o.recompute_group = r.group;
                o.recompute_attention = r.attention;
                o.precision = precision;
                if (dropout) o.dropout = {0.1f, 0.1f, 7};
                o.sequence_parallel = t.sequence_parallel;
                testing::PlacedCommunicator tp(t.size - 1, t.size);  // rank 1 of t
                GPTModel m(config, tp, 2, config.seq_length, o);
                const std::string what = std::string(model) + " " + t.name + " " + stage.name +
                                         " " + schedule.name + " recompute " + r.name + " " +
                                         kernels::precision_name(precision) +
                                         (dropout ? " dropout" : "");
                expect_plan_is_carve(m, what);
                ++built;
              }
  EXPECT_EQ(built, 3 * 3 * 4 * 3 * 4 * 3 * 2);
}

// MoE layers (t = 1, fp32, every schedule; zb-h1's held sets keep no MoE row: the MoE MLP
// forms its weight gradients in B, which alone reads the row): the plan is the carve, each
// kept MoE layer (only those) and the recompute group of a chunk recomputing one has an MoE
// row, and the row holds, for T tokens and R = T x k rows, the softmax [T, E],
// lse [T], the top-k and their weights [T, k], and the permuted input [R, h], fc1 out
// [R, 2F], SwiGLU out [R, F] and the rows' weights [R]: the dropless worst case; and the
// dispatch's received counts [E].
TEST(GPTModelMemory, MoePlanIsTheCarveAndHoldsTheDroplessRows) {
  ModelConfig c = tiny_llama(false);
  c.moe.num_experts = 4, c.moe.router_topk = 2, c.moe.ffn_hidden_size = 20;
  c.moe.layer_pattern = {true, false, true};
  const long T = 2L * c.seq_length, R = T * 2, h = c.hidden_size;
  const std::vector<long> want = {T * 4, T, R, R, R * h, R * 40, R * 20, R, 4, 0, 0, 0, 0};
  int built = 0;
  for (const Stage& stage : kStages)
    for (const Schedule& schedule : kSchedules)
      for (const Recompute& r : kRecompute) {
        ChunkOptions o;
        o.placement = stage.placement;
        o.slots = schedule.slots, o.deferred_weight_grads = schedule.deferred;
        o.unfinished = schedule.unfinished;
        o.recompute_layers = r.layers, o.recompute_group = r.group;
        o.recompute_attention = r.attention;
        testing::PlacedCommunicator tp(0, 1);
        GPTModel m(c, tp, 2, c.seq_length, o);
        const std::string what =
            std::string("moe ") + stage.name + " " + schedule.name + " recompute " + r.name;
        expect_plan_is_carve(m, what);
        // Copies: the kept MoE layers of each slot (layers 0 and 2 are MoE), and the
        // recompute group's layers when it recomputes an MoE layer.
        const int first = stage.placement.first_layer;
        const int layers = stage.placement.num_layers < 0 ? 3 : stage.placement.num_layers;
        int kept_moe = 0, recomputed_moe = 0;
        for (int l = 0; l < layers; ++l) {
          const bool is_moe = (first + l) % 2 == 0;
          (l < std::min(r.layers, layers) ? recomputed_moe : kept_moe) += is_moe;
        }
        int copies = 0;
        for (const ChunkBuffer& b : m.buffers())
          if (b.field == BufferField::kMoe) {
            EXPECT_EQ(b.parts, want) << what;
            copies += b.copies;
          }
        const int group = recomputed_moe > 0 ? std::min(r.group, std::min(r.layers, layers)) : 0;
        EXPECT_EQ(copies, kept_moe * schedule.slots + group) << what;
        ++built;
      }
  EXPECT_EQ(built, 4 * 3 * 4);
}

// Expert parallelism: a rank's experts may receive, from each of the EP ranks, up to
// min(k, E/EP) rows per token, so the expert-side rows are planned for EP x T x min(k, E/EP)
// (4 experts over 2 ranks, top-2: 2 x T x 2), the token-side ones stay T x k; the scratch
// adds the rows to send [T k, h] and the all-to-all's landing place [R, h].
TEST(GPTModelMemory, MoePlanUnderExpertParallelismHoldsTheWorstCaseReceivedRows) {
  ModelConfig c = tiny_llama(false);
  c.moe.num_experts = 4, c.moe.router_topk = 2, c.moe.ffn_hidden_size = 20;
  c.moe.layer_pattern = {true, false, true};
  const long T = 2L * c.seq_length, S = T * 2, R = 2 * T * 2, h = c.hidden_size;
  ChunkOptions o;
  o.expert_parallel = 2;
  testing::PlacedCommunicator tp(0, 1), expert(1, 2);
  GPTModel m(c, tp, 2, c.seq_length, o, &expert);
  expect_plan_is_carve(m, "moe EP 2");
  int rows = 0, scratch = 0;
  for (const ChunkBuffer& b : m.buffers()) {
    if (b.field == BufferField::kMoe) {
      EXPECT_EQ(b.parts,
                (std::vector<long>{T * 4, T, S, S, R * h, R * 40, R * 20, R, 4, 0, 0, 0, 0}));
      ++rows;
    }
    if (b.field == BufferField::kMoeScratch) {
      EXPECT_EQ(b.parts, (std::vector<long>{T * 4, 4, S, R, S, R * 20, R * 20, R * h, S * h, R * h,
                                            0, 0, 0, 0, 0, 0, 0, 0}));
      ++scratch;
    }
  }
  EXPECT_GT(rows, 0);
  EXPECT_EQ(scratch, 1);
}

// t = 2 with sequence parallelism (and EP 2): the MoE layer routes all T rows of the
// micro-batch (all-gathered), not the T / 2 sequence-parallel rows, and each expert's fc1
// and activation rows are this rank's F / 2 columns wide.
TEST(GPTModelMemory, MoePlanUnderTensorParallelismHoldsTheGatheredRowsAndTheExpertShards) {
  ModelConfig c = tiny_llama(false);
  c.moe.num_experts = 4, c.moe.router_topk = 2, c.moe.ffn_hidden_size = 20;
  c.moe.layer_pattern = {true, false, true};
  const long T = 2L * c.seq_length, S = T * 2, h = c.hidden_size, F = 10;
  for (int ep : {1, 2}) {
    const long R = ep * T * 2;
    ChunkOptions o;
    o.expert_parallel = ep;
    o.sequence_parallel = true;
    testing::PlacedCommunicator tp(1, 2), expert(ep - 1, ep);
    GPTModel m(c, tp, 2, c.seq_length, o, ep > 1 ? &expert : nullptr);
    const std::string what = "moe t 2 sp EP " + std::to_string(ep);
    expect_plan_is_carve(m, what);
    int rows = 0, scratch = 0;
    for (const ChunkBuffer& b : m.buffers()) {
      if (b.field == BufferField::kMoe) {
        EXPECT_EQ(b.parts,
                  (std::vector<long>{T * 4, T, S, S, R * h, R * 2 * F, R * F, R, 4, 0, 0, 0, 0}))
            << what;
        ++rows;
      }
      if (b.field == BufferField::kMoeScratch) {
        EXPECT_EQ(b.parts,
                  (std::vector<long>{T * 4, 4, S, R, S, R * F, R * F, R * h, ep > 1 ? S * h : 0,
                                     ep > 1 ? R * h : 0, 0, 0, 0, 0, 0, 0, 0, 0}))
            << what;
        ++scratch;
      }
    }
    EXPECT_GT(rows, 0) << what;
    EXPECT_EQ(scratch, 1) << what;
  }
}

// A capacity with padding: each rank receives exactly E/EP x capacity x EP rows (and sends
// E x capacity); gated shared experts: fc1 out and activation of their S / t columns, the
// gate and the ungated output on every gathered row. At t 2 with EP 2, and the plan is the
// carve (the shared experts' parameters sharded over t). In bf16 the scratch adds the layer
// input widened to fp32 [T, h] and the products' bf16 operands (two to a float): an input
// of the widest of the experts' rows [R, h] and [R, F] and the shared experts' [T, h] and
// [T, S], an output gradient of [R, h], [R, 2F], [T, h] and [T, 2S]; the expert buffer gets
// its own bf16 copy. In fp16 the same two operands in fp32 (rounded through fp16) and the
// widest weight, [2F, h] or [2S, h], expanded from its fp16 copy; an fp16 copy of the experts.
TEST(GPTModelMemory, MoePlanWithPaddedCapacityAndSharedExpertsHoldsTheirRows) {
  ModelConfig c = tiny_llama(false);
  c.moe.num_experts = 4, c.moe.router_topk = 2, c.moe.ffn_hidden_size = 20;
  c.moe.layer_pattern = {true, false, true};
  c.moe.expert_capacity_factor = 0.5f, c.moe.pad_expert_input_to_capacity = true;
  c.moe.shared_expert_intermediate_size = 12, c.moe.shared_expert_gate = true;
  const long T = 2L * c.seq_length, S = T * 2, h = c.hidden_size, F = 10, shared = 6;
  const long capacity = (T + 3) / 4;  // ceil(T x k / E x 0.5) with k / E = 1 / 2
  const long R = 2 * capacity * 2, sent = 4 * capacity;
  for (kernels::Precision p :
       {kernels::Precision::kFp32, kernels::Precision::kBf16, kernels::Precision::kFp16}) {
    const bool bf16 = p == kernels::Precision::kBf16, fp16 = p == kernels::Precision::kFp16;
    ChunkOptions o;
    o.expert_parallel = 2;
    o.sequence_parallel = true;
    o.precision = p;
    testing::PlacedCommunicator tp(1, 2), expert(1, 2);
    GPTModel m(c, tp, 2, c.seq_length, o, &expert);
    const std::string what =
        std::string("moe capacity + shared experts, ") + kernels::precision_name(p);
    expect_plan_is_carve(m, what);
    const long in16 = std::max({R * h, R * F, T * h, T * shared});
    const long out16 = std::max({R * h, R * 2 * F, T * h, T * 2 * shared});
    int rows = 0, scratch = 0, copies = 0;
    for (const ChunkBuffer& b : m.buffers()) {
      if (b.field == BufferField::kMoe) {
        EXPECT_EQ(b.parts, (std::vector<long>{T * 4, T, S, S, R * h, R * 2 * F, R * F, R, 4,
                                              T * 2 * shared, T * shared, T, T * h}))
            << what;
        ++rows;
      }
      if (b.field == BufferField::kMoeScratch) {
        EXPECT_EQ(b.parts,
                  (std::vector<long>{T * 4, 4, sent, R, S, R * F, R * F, R * h, sent * h, R * h,
                                     T * h, T * shared, bf16 ? T * h : 0, bf16 ? (in16 + 1) / 2 : 0,
                                     bf16 ? (out16 + 1) / 2 : 0, fp16 ? in16 : 0, fp16 ? out16 : 0,
                                     fp16 ? std::max(2 * F, 2 * shared) * h : 0}))
            << what;
        ++scratch;
      }
      if (b.name == std::string("expert ") + kernels::precision_name(p) + " weight copy") {
        EXPECT_EQ(b.floats(), (m.expert_parameters().size() + 1) / 2) << what;
        ++copies;
      }
    }
    EXPECT_GT(rows, 0) << what;
    EXPECT_EQ(scratch, 1) << what;
    EXPECT_EQ(copies, bf16 || fp16 ? 1 : 0) << what;
  }
}

// LoRA (rank 2 on every linear), fp32 and bf16: the plan is the carve, with the branches'
// scratch: u and du [b s, R] of every row (all-gathered ones under sequence parallelism);
// with --lora-dropout or bf16 the fp32 input [b s, widest adapted input: h, h / t or f / t];
// in bf16 s u and s B rounded [b s, R] + [widest output: qkv, fc1 or h, R] in bf16 pairs;
// and no bf16 weight-gradient scratch (the base has no weight gradients).
TEST(GPTModelMemory, LoraPlanIsTheCarveAndHoldsTheBranchScratch) {
  constexpr int kRank = 2, kMicroBatch = 2;
  for (const auto& [model, base] : {std::pair{"gpt", tiny_gpt()}, {"llama", tiny_llama(false)}})
    for (const Tensor& t : kTensor)
      for (const Stage& stage : kStages)
        for (kernels::Precision precision : {kernels::Precision::kFp32, kernels::Precision::kBf16})
          for (bool dropout : {false, true}) {
            ModelConfig config = base;
            config.lora.rank = kRank, config.lora.dropout = dropout ? 0.1f : 0.f;
            ChunkOptions o;
            o.placement = stage.placement, o.slots = 2, o.sequence_parallel = t.sequence_parallel;
            o.precision = precision;
            testing::PlacedCommunicator tp(t.size - 1, t.size);
            GPTModel m(config, tp, kMicroBatch, config.seq_length, o);
            const bool bf16 = precision == kernels::Precision::kBf16;
            const std::string what = std::string(model) + " " + t.name + " " + stage.name + " " +
                                     kernels::precision_name(precision) +
                                     (dropout ? " lora dropout" : " lora");
            expect_plan_is_carve(m, what);
            const long tokens = (long)kMicroBatch * config.seq_length;
            const long widest_in = std::max<long>(
                {config.hidden_size, config.attention_width() / t.size, config.ffn() / t.size});
            const long widest_out =
                std::max<long>({config.qkv_projection_local(t.size), config.fc1_rows() / t.size,
                                config.hidden_size});
            std::map<std::string, std::vector<long>> rows;
            for (const ChunkBuffer& b : chunk_buffers(m.shape())) rows[b.name] = b.parts;
            EXPECT_EQ(rows[kLoraBranchRow], (std::vector<long>{tokens * kRank, tokens * kRank}))
                << what;
            EXPECT_EQ(rows.count(kLoraInputRow), dropout || bf16 ? 1u : 0u) << what;
            if (dropout || bf16) {
              EXPECT_EQ(rows[kLoraInputRow], (std::vector<long>{tokens * widest_in})) << what;
            }
            EXPECT_EQ(rows.count(kLoraLowRow), bf16 ? 1u : 0u) << what;
            if (bf16) {
              EXPECT_EQ(rows[kLoraLowRow],
                        (std::vector<long>{(tokens * kRank + widest_out * kRank + 1) / 2}))
                  << what;
            }
            EXPECT_EQ(rows.count("bf16: one layer's fresh weight gradient"), 0u) << what;
          }
}

// Generation's chunks: one token, no gradients, and the decode panels' copies (Parameters'
// own, listed after the scratch).
TEST(GPTModelMemory, InferencePlanIsTheCarve) {
  for (const auto& [model, config] : models())
    for (const Tensor& t : kTensor)
      for (kernels::Precision precision : kPrecisions)
        for (bool panels : {false, true}) {
          if (panels && precision == kernels::Precision::kFp16) continue;  // fp32 or bf16 only
          ChunkOptions o;
          o.inference = true, o.decode_panels = panels, o.precision = precision;
          o.sequence_parallel = t.sequence_parallel;           // ignored for inference
          testing::PlacedCommunicator tp(t.size - 1, t.size);  // rank 1 of t
          GPTModel m(config, tp, 1, 1, o);
          EXPECT_EQ(m.memory_plan().buffers().back().name == "decode copies (panel layout)",
                    panels);
          expect_plan_is_carve(m, std::string(model) + " " + t.name + " inference " +
                                      kernels::precision_name(precision) +
                                      (panels ? " panels" : ""));
        }
}

}  // namespace
}  // namespace trident
