// A chat template (tokenizer_config.json's chat_template, from a downloaded model): parsed
// and rendered against a fixed conversation. Anything but a TemplateError is a finding; so
// is a render past the renderer's own budgets (a hang or an out-of-memory).
#include <cstdint>
#include <string>

#include "chat_template/chat_template.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  using namespace trident::chat_template;
  static const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(
      R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": " Hi\n"},
          {"role": "assistant", "content": "<think>x</think>ok", "tool_calls":
           [{"function": {"name": "f", "arguments": {"a": 1.5}}}]},
          {"role": "tool", "content": "r"}])");
  try {
    ChatTemplate t(std::string(reinterpret_cast<const char*>(data), size));
    t.set_special_tokens({{"bos_token", "<s>"}, {"eos_token", "</s>"}});
    ChatOptions options;
    options.add_generation_prompt = size % 2 == 0;
    options.extra = {{"tools", nlohmann::ordered_json::array({{{"name", "f"}}})}};
    t.render(messages, options);
  } catch (const TemplateError&) {
  }
  return 0;
}
