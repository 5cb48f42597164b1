#pragma once
// The serve tests' suites share one GPT-2 tokenizer (data/gpt2), loaded once per suite.
#include <gtest/gtest.h>

#include <string>

#include "tokenizer/gpt2_tokenizer.h"

namespace trident::serve {

class Gpt2TokenizerSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tok_ = new tokenizer::GPT2Tokenizer(std::string(TRIDENT_SOURCE_DIR) + "/data/gpt2/encoder.json",
                                        std::string(TRIDENT_SOURCE_DIR) + "/data/gpt2/vocab.bpe");
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  static inline tokenizer::GPT2Tokenizer* tok_ = nullptr;
};

}  // namespace trident::serve
