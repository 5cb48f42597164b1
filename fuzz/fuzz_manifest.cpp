// A checkpoint's manifest.json: every key a load or a conversion reads, its type and range,
// the files' names and every tensor's shard against its shapes. What the checked manifest
// hands on (the model, each tensor's spec) is then used the way load and convert use it.
#include <cstdint>
#include <string>

#include "checkpoint/manifest.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  using namespace trident;
  try {
    const nlohmann::ordered_json m = checkpoint::parse_manifest(
        std::string(reinterpret_cast<const char*>(data), size), "manifest.json");
    ModelConfig model = checkpoint::manifest_model(m);
    FUZZ_CHECK(model.num_layers > 0 && model.hidden_size > 0 && model.layernorm_epsilon > 0);
    for (const auto& file : m["files"])
      for (const auto& t : file["tensors"]) {
        ParamSpec spec = checkpoint::manifest_spec(t);
        long global = 1;
        for (long d : spec.global_shape) global *= d;
        // Every local element has a place in the global tensor (load rebuilds it so).
        for (long i : {0l, spec.numel() / 2, spec.numel() - 1})
          if (i >= 0 && i < spec.numel())
            FUZZ_CHECK(spec.global_index(i) >= 0 && spec.global_index(i) < global);
      }
  } catch (const checkpoint::CheckpointError&) {
  }
  return 0;
}
