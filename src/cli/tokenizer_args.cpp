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
          tokenizer::kGPTSentencePieceTokenizer + " is the same)")
      ->capture_default_str();
  add("--tokenizer-model", o->tokenizer_model,
      "SentencePiece .model file (with --tokenizer-type SentencePieceTokenizer)");
  add("--vocab-file", o->vocab_file, "GPT-2 vocab.json / encoder.json" + note);
  add("--merge-file", o->merge_file, "GPT-2 merges.txt / vocab.bpe" + note);
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
  if (flags.sentencepiece() || flags.given()) return flags;
  if (!load.empty()) {
    const tokenizer::TokenizerOptions carried = carried_tokenizer(load);
    if (carried.given()) return carried;
  }
  tokenizer::TokenizerOptions o = flags;
  const fs::path hf = load_hf;
  if (!hf.empty() && fs::exists(hf / "vocab.json") && fs::exists(hf / "merges.txt")) {
    o.vocab_file = (hf / "vocab.json").string();
    o.merge_file = (hf / "merges.txt").string();
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
