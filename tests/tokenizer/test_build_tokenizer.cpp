// The tokenizer flags (--tokenizer-type, --tokenizer-model, --vocab-file, --merge-file):
// each inconsistency is reported naming its flags, and the factory builds the tokenizer
// the type names. SentencePiece ids are checked against spm_encode in sentencepiece_test.py.
#include <gtest/gtest.h>

#include <fstream>
#include <stdexcept>
#include <string>

#include "tokenizer/build_tokenizer.h"

namespace trident::tokenizer {
namespace {

const std::string kVocab = std::string(TRIDENT_SOURCE_DIR) + "/data/gpt2/encoder.json";
const std::string kMerges = std::string(TRIDENT_SOURCE_DIR) + "/data/gpt2/vocab.bpe";

TokenizerOptions sentencepiece(const std::string& model) {
  TokenizerOptions o;
  o.tokenizer_type = kSentencePieceTokenizer;
  o.tokenizer_model = model;
  return o;
}

// The one error check_tokenizer_options reports, which must mention every needle.
void expect_error(const TokenizerOptions& o, const std::vector<std::string>& needles) {
  const std::vector<std::string> errors = check_tokenizer_options(o);
  ASSERT_EQ(errors.size(), 1u);
  for (const std::string& n : needles) EXPECT_NE(errors[0].find(n), std::string::npos) << errors[0];
}

std::string build_error(const TokenizerOptions& o) {
  try {
    build_tokenizer(o);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(TokenizerFlags, InconsistentFlagsNameTheirFlags) {
  expect_error(sentencepiece(""), {"--tokenizer-type SentencePieceTokenizer", "--tokenizer-model"});
  TokenizerOptions both = sentencepiece("m.model");
  both.vocab_file = "v.json";
  expect_error(both, {"--vocab-file", "--tokenizer-model"});
  TokenizerOptions gpt2_with_model;
  gpt2_with_model.tokenizer_model = "m.model";
  expect_error(gpt2_with_model, {"--tokenizer-model", "SentencePieceTokenizer"});
  TokenizerOptions half;
  half.vocab_file = "v.json";
  expect_error(half, {"--vocab-file and --merge-file"});
  TokenizerOptions unknown;
  unknown.tokenizer_type = "Llama9Tokenizer";
  expect_error(unknown,
               {"--tokenizer-type Llama9Tokenizer", "GPT2BPETokenizer", "HuggingFaceTokenizer"});
  TokenizerOptions hf_without_model;
  hf_without_model.tokenizer_type = kHuggingFaceTokenizer;
  expect_error(hf_without_model,
               {"--tokenizer-type HuggingFaceTokenizer", "--tokenizer-model", "tokenizer.json"});
  TokenizerOptions hf = hf_without_model;
  hf.tokenizer_model = "tokenizer.json";
  EXPECT_TRUE(check_tokenizer_options(hf).empty());
  EXPECT_TRUE(hf.given() && hf.reads_model() && !hf.sentencepiece());
  EXPECT_TRUE(check_tokenizer_options(TokenizerOptions{}).empty());  // files may come later
  EXPECT_TRUE(check_tokenizer_options(sentencepiece("m.model")).empty());
  TokenizerOptions megatron_name = sentencepiece("m.model");
  megatron_name.tokenizer_type = kGPTSentencePieceTokenizer;
  EXPECT_TRUE(check_tokenizer_options(megatron_name).empty());
}

TEST(TokenizerFlags, BuildRefusesMissingAndUnreadableFiles) {
  EXPECT_NE(build_error(TokenizerOptions{}).find("needs --vocab-file and --merge-file"),
            std::string::npos);
  const std::string missing = ::testing::TempDir() + "/missing.model";
  EXPECT_NE(
      build_error(sentencepiece(missing)).find("--tokenizer-model " + missing + ": cannot open"),
      std::string::npos);
  const std::string garbage = ::testing::TempDir() + "/garbage.model";
  std::ofstream(garbage) << "not a model proto \xff\xfe";
  EXPECT_NE(build_error(sentencepiece(garbage)).find("not a SentencePiece model"),
            std::string::npos);
  TokenizerOptions no_merges;
  no_merges.vocab_file = kVocab;
  no_merges.merge_file = missing;
  EXPECT_NE(build_error(no_merges).find("--vocab-file/--merge-file " + missing + ": cannot open"),
            std::string::npos);
}

TEST(TokenizerFlags, BuildsGpt2ByDefault) {
  TokenizerOptions o;
  o.vocab_file = kVocab;
  o.merge_file = kMerges;
  auto tok = build_tokenizer(o);
  EXPECT_EQ(tok->encode("Hello world"), (std::vector<int>{15496, 995}));  // GPT-2's ids
  EXPECT_EQ(tok->eod(), 50256);
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->decode({15496, 995}), "Hello world");
}

}  // namespace
}  // namespace trident::tokenizer
