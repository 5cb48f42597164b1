#include "cli/tokenizer_args.h"

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

}  // namespace trident::cli
