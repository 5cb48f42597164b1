// A HuggingFace config.json (GPT-2, the Llama family, Mixtral, Qwen3-MoE): the shape keys and every option that would change the
// function computed.
#include <cmath>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "io/hf_gpt2.h"
#include "core/files.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  using namespace trident;
  try {
    ModelConfig c =
        io::parse_hf_config(std::string(reinterpret_cast<const char*>(data), size), "config.json");
    FUZZ_CHECK(c.num_layers > 0 && c.hidden_size > 0 && c.num_attention_heads > 0);
    FUZZ_CHECK(c.vocab_size > 0 && c.max_position_embeddings > 0);
    // Heads split the hidden size unless head_dim is given (Qwen3's may differ from it).
    FUZZ_CHECK(c.kv_channels > 0 || c.hidden_size % c.num_attention_heads == 0);
    FUZZ_CHECK(c.head_dim() > 0);
    FUZZ_CHECK(c.layernorm_epsilon > 0 && std::isfinite(c.layernorm_epsilon));
  } catch (const FormatError&) {
  }
  return 0;
}
