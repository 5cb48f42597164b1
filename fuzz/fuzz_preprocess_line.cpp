// `trident preprocess` over a JSONL chunk: split into lines as the reader does (newlines,
// a trailing carriage return dropped), each line validated, parsed and tokenized. A bad line
// is reported by reason, never thrown.
#include <cstdint>
#include <string>
#include <vector>

#include "data/preprocess.h"
#include "fuzz_util.h"
#include "tokenizer/gpt2_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  using namespace trident;
  static const tokenizer::GPT2Tokenizer tok(fuzz::gpt2_file("encoder.json"),
                                            fuzz::gpt2_file("vocab.bpe"));
  static const data::PreprocessOptions options = [] {
    data::PreprocessOptions o;
    o.json_keys = {"text", "title"};
    o.append_eod = true;
    return o;
  }();
  const std::string chunk(reinterpret_cast<const char*>(data), size);
  std::vector<std::vector<int>> per_key;
  for (size_t begin = 0; begin < chunk.size();) {
    size_t end = chunk.find('\n', begin);
    if (end == std::string::npos) end = chunk.size();
    std::string line = chunk.substr(begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    begin = end + 1;
    if (!data::preprocess_line(line, options, tok, &per_key).empty()) continue;
    FUZZ_CHECK(per_key.size() == options.json_keys.size());
    for (const std::vector<int>& ids : per_key)
      for (int id : ids) FUZZ_CHECK(id >= 0 && id < tok.vocab_size());
  }
  return 0;
}
