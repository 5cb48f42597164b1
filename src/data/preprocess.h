#pragma once
// `trident preprocess`: JSONL -> Megatron indexed datasets, one per JSON key
// (<output-prefix>_<key>_document.bin/.idx). Streaming and multi-threaded: a reader cuts
// the input into batches of lines, workers parse and tokenize them, and batches are
// written in input order, so memory stays bounded by the batches in flight.
#include <iosfwd>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "chat_template/chat_template.h"
#include "tokenizer/build_tokenizer.h"

namespace trident::data {

struct PreprocessOptions {
  std::string input;
  std::vector<std::string> json_keys = {"text"};
  std::string output_prefix;
  tokenizer::TokenizerOptions tokenizer;
  bool append_eod = false;
  int eod_id = -1;  // the token --append-eod appends; -1: the tokenizer's end-of-document
  bool add_bos = false;  // the tokenizer's BOS before every non-empty document
  int workers = 1;
  bool skip_bad_lines = false;  // false: the first bad line fails the run
  double progress_seconds = 2.0;
  // With a chat template, the one JSON key holds conversations (lists of {role, content}):
  // each becomes its rendered documents (data/chat_documents.h), and a loss-mask dataset
  // <output-prefix>_<key>_loss_mask.bin/.idx (uint8, one value per token, 1 on the
  // assistant's tokens) is written beside the tokens.
  std::shared_ptr<const chat_template::ChatTemplate> chat_template;
  chat_template::ChatOptions chat_options;
};

struct PreprocessReport {
  long lines = 0;
  long documents = 0;  // per key, the same for every key
  long tokens = 0;     // over all keys
  long empty_documents = 0;
  long bad_lines = 0;
  std::vector<std::string> bad_line_messages;  // the first few, "LINE: reason"
  double bytes = 0;
  double seconds = 0;
  std::vector<std::string> outputs;  // prefixes written
};

class BadLineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws BadLineError (first bad line, when not skipping) or DatasetError; in both cases
// no output file is left behind.
PreprocessReport preprocess(const PreprocessOptions& options, std::ostream& progress);

// One JSONL line (without its newline): parsed, and the string under each of
// options.json_keys tokenized into (*per_key)[k], with the end-of-document token when
// options.append_eod. Returns "" or why the line is bad ("invalid JSON", "missing key ...").
std::string preprocess_line(const std::string& line, const PreprocessOptions& options,
                            const tokenizer::Tokenizer& tok,
                            std::vector<std::vector<int>>* per_key);

std::string output_prefix_for_key(const std::string& prefix, const std::string& key);
std::string loss_mask_prefix_for_key(const std::string& prefix, const std::string& key);

}  // namespace trident::data
