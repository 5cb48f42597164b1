// A checkpoint's manifest.json checked on its own (checkpoint/manifest.h): what save writes is
// accepted, every broken claim is refused naming the key, and the inputs fuzz/fuzz_manifest.cpp
// found stay refused cleanly.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "checkpoint/manifest.h"

namespace trident::checkpoint {
namespace {

using json = nlohmann::ordered_json;

// A manifest as save writes it for tensor-parallel rank 1 of 2 (one tensor kept).
const char* kManifest = R"({
  "format": "trident-checkpoint", "version": 1, "iteration": 2, "consumed_samples": 2,
  "evaluations": 0, "lr_schedule_samples": 2, "optimizer_steps": 2,
  "loss_scaler": {"scale": 1.0, "growth_tracker": 0, "hysteresis_tracker": 1,
                  "skipped_iterations": 0},
  "model": {"num_layers": 1, "hidden_size": 8, "num_attention_heads": 2, "ffn_hidden_size": 32,
            "max_position_embeddings": 8, "vocab_size": 16, "layernorm_epsilon": 1e-5},
  "layout": {"tensor": 2, "pipeline": 1, "data": 1, "virtual_stages": 1,
             "distributed_optimizer": false},
  "files": [{"file": "model_tp1_pp0.safetensors", "bytes": 6112, "xxh64": "0123456789abcdef",
             "tensors": [{"name": "layers.0.self_attention.linear_qkv.weight",
                          "global_shape": [24, 8], "local_shape": [12, 8],
                          "shard": {"dim": 0, "stride": 3, "parts": 2, "rank": 1}}]}],
  "run": {"seed": 1234}
})";

std::string error_of(const std::string& text) {
  try {
    parse_manifest(text, "ckpt/manifest.json");
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

// kManifest with the value at `pointer` replaced (or removed, for a discarded value).
std::string with(const std::string& pointer, const json& value) {
  json m = json::parse(kManifest);
  if (value.is_discarded())
    m[json::json_pointer(pointer).parent_pointer()].erase(json::json_pointer(pointer).back());
  else
    m[json::json_pointer(pointer)] = value;
  return m.dump();
}

TEST(Manifest, AcceptsWhatSaveWrites) {
  json m = parse_manifest(kManifest, "manifest.json");
  ModelConfig c = manifest_model(m);
  EXPECT_EQ(c.hidden_size, 8);
  EXPECT_EQ(c.ffn(), 32);
  EXPECT_FLOAT_EQ(c.layernorm_epsilon, 1e-5f);
  ParamSpec s = manifest_spec(m["files"][0]["tensors"][0]);
  EXPECT_EQ(s.local_shape, (std::vector<long>{12, 8}));
  EXPECT_EQ(s.shard.stride, 3);
  // Rank 1's first row is row 4 of q (rows 0..7); its last row is row 7 of v (rows 16..23).
  EXPECT_EQ(s.global_index(0), 4 * 8);
  EXPECT_EQ(s.global_index(s.numel() - 1), 24 * 8 - 1);
}

// RoPE scaling and the sliding window travel in the manifest (resume and load rebuild the
// same model); a broken rope_scaling is refused naming its key.
TEST(Manifest, CarriesRopeScalingAndWindow) {
  ModelConfig c;
  c.position_embedding_type = "rope", c.use_rope_scaling = true, c.rope_scaling_type = "linear";
  c.rope_scaling_factor = 2.5f, c.rope_original_max_positions = 32, c.window_size = 37;
  json m = json::parse(kManifest);
  m["model"] = model_json(c);
  const ModelConfig back = manifest_model(parse_manifest(m.dump(), "manifest.json"));
  EXPECT_TRUE(back.use_rope_scaling);
  EXPECT_EQ(back.rope_scaling_type, "linear");
  EXPECT_FLOAT_EQ(back.rope_scaling_factor, 2.5f);
  EXPECT_EQ(back.rope_original_max_positions, 32);
  EXPECT_EQ(back.window_size, 37);
  EXPECT_EQ(model_json(back), model_json(c));
  EXPECT_FALSE(json::parse(model_json(ModelConfig{}).dump()).contains("window_size"));
  m["model"]["rope_scaling"]["factor"] = -1;
  EXPECT_NE(error_of(m.dump()).find("model.rope_scaling.factor"), std::string::npos);
  m["model"]["rope_scaling"]["factor"] = 2;
  m["model"]["window_size"] = 0;
  EXPECT_NE(error_of(m.dump()).find("model.window_size"), std::string::npos);
}

// The MoE shape travels in the manifest (score, generate and resume rebuild the same
// layers); a dense model's manifest has no "moe" key; a broken one is refused naming it.
TEST(Manifest, CarriesTheMoeShape) {
  ModelConfig c;
  c.num_layers = 3, c.swiglu = true;
  c.moe.num_experts = 4, c.moe.router_topk = 2, c.moe.ffn_hidden_size = 24;
  c.moe.router_pre_softmax = true, c.moe.layer_pattern = {true, false, true};
  json m = json::parse(kManifest);
  m["model"] = model_json(c);
  const ModelConfig back = manifest_model(parse_manifest(m.dump(), "manifest.json"));
  EXPECT_EQ(back.moe.num_experts, 4);
  EXPECT_EQ(back.moe.router_topk, 2);
  EXPECT_EQ(back.moe_ffn(), 24);
  EXPECT_TRUE(back.moe.router_pre_softmax);
  EXPECT_EQ(back.moe.layer_pattern, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(model_json(back), model_json(c));
  EXPECT_FALSE(json::parse(model_json(ModelConfig{}).dump()).contains("moe"));
  m["model"]["moe"]["layer_pattern"] = {1, 0};
  EXPECT_NE(error_of(m.dump()).find("model.moe.layer_pattern must have one entry per layer"),
            std::string::npos);
  m["model"]["moe"]["layer_pattern"] = {1, 0, 2};
  EXPECT_NE(error_of(m.dump()).find("model.moe.layer_pattern entries must be 0 or 1"),
            std::string::npos);
  m["model"]["moe"]["num_experts"] = 0;
  EXPECT_NE(error_of(m.dump()).find("model.moe.num_experts"), std::string::npos);
}

// Found by fuzz/fuzz_manifest.cpp: "parts": 0 passed the range check (non-negative integers
// are unsigned in the parsed JSON, and only their upper bound was checked) and the shard
// check then divided by zero.
TEST(Manifest, FuzzedShardOfZeroPartsIsRefused) {
  EXPECT_NE(error_of(with("/files/0/tensors/0/shard/parts", 0))
                .find("ckpt/manifest.json: files[0].tensors[0].shard.parts must be an integer in "
                      "[1, "),
            std::string::npos);
  EXPECT_NE(error_of(with("/files/0/tensors/0/shard/stride", 0)).find("shard.stride must be"),
            std::string::npos);
}

TEST(Manifest, RefusesEveryBrokenClaim) {
  struct Case {
    std::string text;
    const char* message;
  };
  const json gone = json::value_t::discarded;
  const std::vector<Case> cases = {
      {"{", "not valid JSON"},
      {"[]", "must be a JSON object"},
      {with("/format", "other"), "not a trident checkpoint"},
      {with("/iteration", -1), "iteration must be an integer in [0, "},
      {with("/iteration", 2.5), "iteration must be an integer"},
      {with("/evaluations", gone), "evaluations is missing"},
      {with("/model/hidden_size", 0), "model.hidden_size must be an integer in [1, "},
      {with("/model/vocab_size", 1ull << 40), "model.vocab_size must be an integer"},
      {with("/model/layernorm_epsilon", 1e300), "model.layernorm_epsilon must be a positive"},
      {with("/model/layernorm_epsilon", 1e-50), "model.layernorm_epsilon must be a positive"},
      {with("/layout", "t=2"), "layout must be an object"},
      {with("/loss_scaler/scale", -1), "loss_scaler.scale must be a positive"},
      {with("/run", 1), "run must be an object"},
      {with("/files", json::object()), "files must be an array"},
      {with("/files/0/file", "../../secret"), "files[0].file must be a plain file name"},
      {with("/files/0/file", ".."), "files[0].file must be a plain file name"},
      {with("/files/0/bytes", "6112"), "files[0].bytes must be an integer"},
      {with("/files/0/xxh64", gone), "files[0].xxh64 is missing"},
      {with("/files/0/tensors/0/name", 7), "files[0].tensors[0].name must be a string"},
      {with("/files/0/tensors/0/global_shape", json::array()), "must have 1 or 2 dimensions"},
      {with("/files/0/tensors/0/global_shape", {24, 8, 1}), "must have 1 or 2 dimensions"},
      {with("/files/0/tensors/0/global_shape", {1l << 40, 8}), "integers in [0, 2^31)"},
      {with("/files/0/tensors/0/local_shape", {12}), "differ in rank"},
      {with("/files/0/tensors/0/local_shape", {12, 4}), "outside the shard dimension"},
      {with("/files/0/tensors/0/local_shape", {8, 8}), "is not 1/2 of global_shape"},
      {with("/files/0/tensors/0/global_shape", {26, 8}), "is not 1/2 of global_shape"},
      {with("/files/0/tensors/0/shard/dim", 2), "shard.dim must be an integer in [-1, 1]"},
      {with("/files/0/tensors/0/shard/rank", 2), "shard.rank must be an integer in [0, 1]"},
  };
  for (const Case& c : cases) {
    std::string error = error_of(c.text);
    EXPECT_NE(error.find(c.message), std::string::npos) << c.text << "\n -> " << error;
    EXPECT_EQ(error.rfind("ckpt/manifest.json: ", 0), 0u) << error;
  }
}

}  // namespace
}  // namespace trident::checkpoint
