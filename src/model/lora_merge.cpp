#include "model/lora_merge.h"

#include <stdexcept>
#include <string>

#include "kernels/gemm.h"

namespace trident {

namespace {
constexpr const char* kBSuffix = ".lora_B.weight";

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The A that goes with B of `linear` (layers.L.<module>): its own, or the layer's fused
// linear_qkv's for grouped-query attention's linear_q and linear_kv.
std::string a_of(const ParameterLayout& adapters, const std::string& linear) {
  const std::string own = linear + ".lora_A.weight";
  if (adapters.contains(own)) return own;
  const std::string layer = linear.substr(0, linear.find(".self_attention."));
  return layer + ".self_attention.linear_qkv.lora_A.weight";
}
}  // namespace

void merge_lora_adapters(Parameters& model, const Parameters& adapters, const LoraConfig& lora) {
  const ParameterLayout& a_layout = adapters.layout();
  float* values = model.values();
  for (const ParamSpec& b : a_layout.specs()) {
    if (!ends_with(b.name, kBSuffix)) continue;
    const std::string linear = b.name.substr(0, b.name.size() - std::string(kBSuffix).size());
    const ParamSpec& a = a_layout.find(a_of(a_layout, linear));
    const ParamSpec& w = model.layout().find(linear + ".weight");
    const long out = b.local_shape[0], rank = b.local_shape[1], in = a.local_shape[1];
    if (w.local_shape != std::vector<long>{out, in} || a.local_shape[0] != rank)
      throw std::invalid_argument(b.name + ": the adapters do not fit " + w.name);
    kernels::gemm(kernels::Trans::kNo, kernels::Trans::kNo, (int)out, (int)in, (int)rank,
                  lora.scale(), adapters.values() + b.offset, (int)rank,
                  adapters.values() + a.offset, (int)in, 1.f, values + w.offset, (int)in);
  }
}

}  // namespace trident
