// The end-of-run summary and the next commands, against text written out by hand.
#include <gtest/gtest.h>

#include <filesystem>

#include "train/run_summary.h"

namespace trident::train {
namespace {

TEST(RunSummary, ListsTimeTokensLossesAndWhereTheModelWent) {
  RunSummary s;
  s.wall_seconds = 83, s.train_seconds = 40;
  s.first_iteration = 1, s.last_iteration = 6, s.train_iters = 6;
  s.tokens = 384;  // 6 x 2 samples x 32 tokens
  s.train_loss = 0.0, s.validation_loss = std::log(2.0);
  s.checkpoint = "/runs/a/iter_0000006";
  EXPECT_EQ(format_run_summary(s),
            "run summary:\n"
            "  wall time: 1m23s (training steps 40s)\n"
            "  iterations: 6 (1 to 6 of 6)\n"
            "  tokens trained: 384 (10 tokens/s)\n"  // 384 / 40 = 9.6
            "  final train loss: 0.000000E+00 (ppl 1.000000E+00)\n"
            "  validation loss: 6.931472E-01 (ppl 2.000000E+00)\n"
            "  checkpoint: /runs/a/iter_0000006\n");
  s.checkpoint = "", s.hf_model = "/runs/hf", s.test_loss = 0.0;
  s.first_iteration = 4;  // resumed after iteration 3
  const std::string text = format_run_summary(s);
  EXPECT_NE(text.find("  iterations: 3 (4 to 6 of 6)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  test loss: 0.000000E+00 (ppl 1.000000E+00)\n"), std::string::npos);
  EXPECT_NE(text.find("  checkpoint: none (no --save)\n  HuggingFace model: /runs/hf\n"),
            std::string::npos);
  s.first_iteration = 7;  // resumed from the checkpoint of iteration 6 of 6: nothing to train
  EXPECT_NE(format_run_summary(s).find("  iterations: none (the checkpoint was at 6 of 6)\n"),
            std::string::npos);
}

TEST(ShellQuote, QuotesOnlyWhatTheShellWouldSplit) {
  EXPECT_EQ(shell_quote("/runs/a-1/ckpt_2"), "/runs/a-1/ckpt_2");
  EXPECT_EQ(shell_quote("my runs/x"), "'my runs/x'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
}

TEST(NextCommands, NameTheSavedModelAndTheRunsTokenizer) {
  TrainingConfig c;
  c.model.seq_length = 1024;  // continuations of 64 tokens (half of 32 positions: 16)
  EXPECT_TRUE(next_commands(c, "/bin/trident").empty());  // nothing saved, nothing to run
  c.save = "/runs/ckpt/";
  const auto plain = next_commands(c, "/bin/trident");
  ASSERT_EQ(plain.size(), 3u);
  EXPECT_EQ(plain[0],
            "/bin/trident generate --load /runs/ckpt --prompt 'In the beginning' "
            "--tokens-to-generate 64");
  EXPECT_EQ(plain[1], "/bin/trident eval --load /runs/ckpt --tasks kjv_cloze");
  EXPECT_EQ(plain[2], "/bin/trident convert --load /runs/ckpt --save-hf /runs/ckpt_hf");

  c.tokenizer.vocab_file = "/tok/vocab.json", c.tokenizer.merge_file = "/tok/merges.txt";
  c.save_hf = "/runs/hf";  // exported already: no convert
  const auto gpt2 = next_commands(c, "/bin/trident");
  ASSERT_EQ(gpt2.size(), 2u);
  EXPECT_EQ(gpt2[0],
            "/bin/trident generate --load /runs/ckpt --vocab-file /tok/vocab.json --merge-file "
            "/tok/merges.txt --prompt 'In the beginning' --tokens-to-generate 64");

  c.tokenizer = {};
  c.tokenizer.tokenizer_type = "SentencePieceTokenizer", c.tokenizer.tokenizer_model = "sp.model";
  c.save = "";  // only the HuggingFace directory
  const auto sp = next_commands(c, "/bin/trident");
  ASSERT_EQ(sp.size(), 2u);
  const std::string model = (std::filesystem::current_path() / "sp.model").string();
  EXPECT_EQ(sp[1],
            "/bin/trident eval --load-hf /runs/hf --tokenizer-type SentencePieceTokenizer "
            "--tokenizer-model " +
                model + " --tasks kjv_cloze");

  TrainingConfig mock;  // a vocabulary smaller than GPT-2's and no tokenizer: convert only
  mock.model.vocab_size = 301, mock.save = "/runs/m";
  mock.model.seq_length = 32;
  const auto only = next_commands(mock, "/bin/trident");
  ASSERT_EQ(only.size(), 1u);
  EXPECT_EQ(only[0], "/bin/trident convert --load /runs/m --save-hf /runs/m_hf");

  // An MoE model converts as a dense one (Mixtral, Qwen3-MoE).
  mock.model.moe.num_experts = 4;
  EXPECT_EQ(next_commands(mock, "/bin/trident"), only);
}

}  // namespace
}  // namespace trident::train
