#include "cli/tokenizer_args.h"

#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "core/install_paths.h"

namespace trident::cli {

void add_tokenizer_args(CLI::App& app, tokenizer::TokenizerOptions* o, const std::string& group,
                        const std::string& gpt2_default) {
  const std::string note = gpt2_default.empty() ? "" : " (default " + gpt2_default + ")";
  // The last occurrence wins, as train's other flags, so a command line can override one.
  auto add = [&](const char* flag, std::string& field, const std::string& help) {
    return app.add_option(flag, field, help)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
        ->group(group);
  };
  add("--tokenizer-type", o->tokenizer_type,
      std::string(tokenizer::kGPT2BPETokenizer) + " (GPT-2 byte-level BPE) or " +
          tokenizer::kSentencePieceTokenizer + " (a SentencePiece model; " +
          tokenizer::kGPTSentencePieceTokenizer + " is the same) or " +
          tokenizer::kHuggingFaceTokenizer + " (a HuggingFace tokenizer.json)")
      ->capture_default_str();
  add("--tokenizer-model", o->tokenizer_model,
      "SentencePiece .model file, or HuggingFace tokenizer.json or the folder holding it and "
      "tokenizer_config.json (with that --tokenizer-type)");
  add("--vocab-file", o->vocab_file, "GPT-2 vocab.json / encoder.json" + note);
  add("--merge-file", o->merge_file, "GPT-2 merges.txt / vocab.bpe" + note);
}

tokenizer::TokenizerOptions hf_directory_tokenizer(const std::string& load_hf) {
  namespace fs = std::filesystem;
  tokenizer::TokenizerOptions o;
  const fs::path hf = load_hf;
  if (hf.empty()) return o;
  if (fs::is_regular_file(hf / "tokenizer.json")) {
    o.tokenizer_type = tokenizer::kHuggingFaceTokenizer;
    o.tokenizer_model = hf.string();
  } else if (fs::exists(hf / "vocab.json") && fs::exists(hf / "merges.txt")) {
    o.vocab_file = (hf / "vocab.json").string();
    o.merge_file = (hf / "merges.txt").string();
  }
  return o;
}

tokenizer::TokenizerOptions carried_tokenizer(const std::string& load) {
  const std::string dir = checkpoint::latest_checkpoint(load);
  const checkpoint::TokenizerRecord carried =
      checkpoint::read_tokenizer_files(checkpoint::read_manifest(dir), dir);
  return carried.empty() ? tokenizer::TokenizerOptions{} : checkpoint::tokenizer_options(carried);
}

tokenizer::TokenizerOptions resolve_tokenizer(const tokenizer::TokenizerOptions& flags,
                                              const std::string& load, const std::string& load_hf) {
  namespace fs = std::filesystem;
  if (flags.reads_model() || flags.given()) return flags;
  if (!load.empty()) {
    const tokenizer::TokenizerOptions carried = carried_tokenizer(load);
    if (carried.given()) return carried;
  }
  tokenizer::TokenizerOptions o = flags;
  const tokenizer::TokenizerOptions in_hf = hf_directory_tokenizer(load_hf);
  if (in_hf.given()) {
    o.tokenizer_type = in_hf.tokenizer_type;
    o.tokenizer_model = in_hf.tokenizer_model;
    o.vocab_file = in_hf.vocab_file;
    o.merge_file = in_hf.merge_file;
    return o;
  }
  const std::string vocab = installed_path("data/gpt2/encoder.json");
  const std::string merges = installed_path("data/gpt2/vocab.bpe");
  if (fs::exists(vocab) && fs::exists(merges)) {
    o.vocab_file = vocab;
    o.merge_file = merges;
  }
  return o;
}

}  // namespace trident::cli
