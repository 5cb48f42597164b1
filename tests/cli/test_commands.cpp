// End-to-end runs of the trident binary: training learns and is repeatable, bad flags
// are all reported at once with a non-zero exit, HF round trips are exact.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace {

namespace fs = std::filesystem;

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr
};

CommandResult run(const std::string& args) {
  std::string cmd = std::string(TRIDENT_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  int status = pclose(pipe);
  // Under scripts/sanitize.sh a report from the child fails the test, also where the test
  // does not look at the exit code.
  for (const char* report : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                             "runtime error:", "WARNING: ThreadSanitizer"})
    EXPECT_EQ(out.find(report), std::string::npos) << "trident " << args << "\n" << out;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string temp_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / "trident_cli_tests" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

const std::string kTiny =
    "train --mock-data --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 "
    "--vocab-size 256 --micro-batch-size 4 --global-batch-size 8 --lr 3e-3 --lr-warmup-iters 5 "
    "--min-lr 3e-4 --log-interval 5 --eval-iters 2 --peak-tflops 1 --threads 2 ";

TEST(TrainCommand, LossFallsAndRunsAreBitForBitRepeatable) {
  std::string dir = temp_dir("repeat");
  CommandResult a = run(kTiny + "--train-iters 60 --seed 11 --metrics-file " + dir + "/a.jsonl");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("memory plan"), std::string::npos);
  EXPECT_NE(a.output.find("validation loss at iteration 60"), std::string::npos);
  CommandResult b =
      run(kTiny + "--train-iters 60 --seed 11 --threads 1 --metrics-file " + dir + "/b.jsonl");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  auto ma = read_metrics(dir + "/a.jsonl"), mb = read_metrics(dir + "/b.jsonl");
  ASSERT_EQ(ma.size(), 14u);  // 12 log lines, 1 validation, 1 collectives summary
  ASSERT_EQ(ma.size(), mb.size());
  for (size_t i = 0; i < 12; ++i) {
    for (const char* key : {"iteration", "consumed_samples", "loss", "lr", "grad_norm"})
      EXPECT_EQ(ma[i][key], mb[i][key]) << key << " at line " << i;
    for (const char* key : {"ms_per_iter", "tokens_per_s", "tflops", "mfu"})
      EXPECT_TRUE(ma[i].contains(key));
  }
  double first = ma.front()["loss"], last = ma[11]["loss"];
  EXPECT_GT(first, 5.0);         // ~ln(256) at initialisation
  EXPECT_LT(last, first - 1.5);  // the arithmetic runs are being learned
  EXPECT_EQ(ma[12]["validation_loss"], mb[12]["validation_loss"]);
  EXPECT_TRUE(ma[13].contains("collectives"));
  CommandResult c = run(kTiny + "--train-iters 10 --seed 12 --log-interval 10 --metrics-file " +
                        dir + "/c.jsonl");
  EXPECT_NE(read_metrics(dir + "/c.jsonl")[0]["loss"], ma[1]["loss"]);
}

TEST(TrainCommand, ReportsEveryInvalidArgumentAtOnce) {
  CommandResult r =
      run("train --mock-data --hidden-size 100 --num-attention-heads 12 --seq-length 512 "
          "--max-position-embeddings 256 --micro-batch-size 3 --global-batch-size 8 "
          "--lr 1e-4 --min-lr 1e-3 --lr-decay-style exponential --tensor-model-parallel-size 2");
  EXPECT_EQ(r.exit_code, 2);
  for (const char* msg : {"--hidden-size (100) must be divisible by --num-attention-heads (12)",
                          "--seq-length (512) must be <= --max-position-embeddings (256)",
                          "--global-batch-size (8) must be divisible by --micro-batch-size",
                          "--min-lr", "--lr-decay-style must be constant, linear or cosine",
                          "world size (1) must be divisible by --tensor-model-parallel-size"})
    EXPECT_NE(r.output.find(msg), std::string::npos) << "missing: " << msg << "\n" << r.output;
}

TEST(TrainCommand, UnknownFlagAndMissingDataAreErrors) {
  CommandResult unknown = run("train --mock-data --no-such-flag 3");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("no-such-flag"), std::string::npos);
  CommandResult no_data = run("train --train-iters 1");
  EXPECT_EQ(no_data.exit_code, 2);
  EXPECT_NE(no_data.output.find("exactly one data source"), std::string::npos);
  CommandResult bad_value = run("train --mock-data --num-layers abc");
  EXPECT_EQ(bad_value.exit_code, 2);
}

TEST(TrainCommand, ConfigFileWithCommandLineOverride) {
  std::string dir = temp_dir("config");
  std::ofstream(dir + "/run.toml") << "num-layers = 1\nhidden-size = 32\nnum-attention-heads = 2\n"
                                      "seq-length = 16\nvocab-size = 64\nmicro-batch-size = 2\n"
                                      "train-iters = 3\nmock-data = true\nlog-interval = 1\n";
  CommandResult r = run("train --config " + dir + "/run.toml --hidden-size 48 --peak-tflops 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 layers, hidden 48"), std::string::npos) << r.output;
}

// One line of the printed memory plan: "    <name>  <floats> floats [x <copies>]  <size>".
struct PlanLine {
  long floats = 0;
  int copies = 0;  // 0: the plan has no such line
};

PlanLine plan_line(const std::string& output, const std::string& name) {
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("    " + name + " ", 0) != 0) continue;
    std::istringstream fields(line.substr(4 + name.size()));
    PlanLine p{0, 1};
    std::string word, x;
    fields >> p.floats >> word >> x;
    if (x == "x") fields >> p.copies;
    return p;
  }
  return {};
}

// --recompute-method uniform keeps one layer output per group of --recompute-num-layers
// layers (the next group's input) and recomputes a whole group at once in backward, so
// the group's layers have recompute buffers; losses and gradient norms do not change.
TEST(TrainCommand, UniformRecomputeKeepsOneInputPerGroup) {
  const std::string four_layers =
      kTiny + "--num-layers 4 --train-iters 2 --lr-warmup-iters 0 --log-interval 1 ";
  const std::string dir = temp_dir("uniform");
  CommandResult plain = run(four_layers + "--metrics-file " + dir + "/plain.jsonl");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const auto reference = read_metrics(dir + "/plain.jsonl");
  const long tokens_x_hidden = 4L * 64 * 64;  // micro-batch x seq x hidden
  // N, kept layer outputs (ceil(4 / N)), layers recomputed together (N, at most 4)
  for (auto [n, kept, group] : {std::array{1, 4, 1}, {2, 2, 2}, {3, 2, 3}, {4, 1, 4}, {6, 1, 4}}) {
    const std::string name = "N" + std::to_string(n);
    CommandResult r = run(four_layers +
                          "--recompute-granularity full --recompute-method uniform "
                          "--recompute-num-layers " +
                          std::to_string(n) + " --metrics-file " + dir + "/" + name + ".jsonl");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const PlanLine outputs = plan_line(r.output, "layer output");
    EXPECT_EQ(outputs.floats, tokens_x_hidden) << name;
    EXPECT_EQ(outputs.copies, kept) << name << "\n" << r.output;
    EXPECT_EQ(plan_line(r.output, "recompute: qkv").copies, group) << name;
    EXPECT_EQ(plan_line(r.output, "recompute: outputs within a group").copies,
              group > 1 ? group - 1 : 0)
        << name;
    const auto m = read_metrics(dir + "/" + name + ".jsonl");
    for (size_t i = 0; i < 2; ++i)
      for (const char* key : {"loss", "grad_norm"})
        EXPECT_EQ(m.at(i)[key], reference.at(i)[key]) << name << " " << key;
  }
  CommandResult zero = run(four_layers +
                           "--recompute-granularity full --recompute-method uniform "
                           "--recompute-num-layers 0");
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.output.find("--recompute-num-layers > 0"), std::string::npos) << zero.output;
}

TEST(HfInterchange, SaveLoadScoreRoundTrip) {
  std::string dir = temp_dir("hf");
  CommandResult trained =
      run(kTiny + "--train-iters 5 --lr-warmup-iters 0 --save-hf " + dir + "/model");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  ASSERT_TRUE(fs::exists(dir + "/model/model.safetensors"));
  auto config = nlohmann::json::parse(std::ifstream(dir + "/model/config.json"));
  EXPECT_EQ(config["n_layer"], 2);
  EXPECT_EQ(config["vocab_size"], 256);
  // Loading and saving again without training gives the same tensors.
  CommandResult again = run(
      kTiny + "--train-iters 1 --lr-warmup-iters 0 --lr 0 --min-lr 0 --weight-decay 0 --load-hf " +
      dir + "/model --save-hf " + dir + "/model2");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  std::ofstream(dir + "/tokens.json") << "[[1,2,3,4,5,6,7,8],[9,10,11]]";
  CommandResult s1 = run("score --model " + dir + "/model --tokens " + dir + "/tokens.json");
  CommandResult s2 = run("score --model " + dir + "/model2 --tokens " + dir + "/tokens.json");
  ASSERT_EQ(s1.exit_code, 0) << s1.output;
  auto j1 = nlohmann::json::parse(s1.output), j2 = nlohmann::json::parse(s2.output);
  EXPECT_EQ(j1["tokens"], 9);
  EXPECT_EQ(j1["loss"], j2["loss"]);
  EXPECT_NEAR(std::exp(j1["loss"].get<double>()), j1["perplexity"].get<double>(), 1e-9);
  // A config that disagrees with the weights: every tensor is shape-checked on load.
  auto wrong = config;
  wrong["n_positions"] = 32;
  std::ofstream(dir + "/model2/config.json") << wrong.dump();
  CommandResult shape = run("score --model " + dir + "/model2 --tokens " + dir + "/tokens.json");
  EXPECT_EQ(shape.exit_code, 2);
  EXPECT_NE(shape.output.find("tensor 'wpe.weight' has shape [64, 64], the config needs [32, 64]"),
            std::string::npos)
      << shape.output;
  // Flags that contradict the loaded config are errors, not silent overrides.
  CommandResult clash =
      run(kTiny + "--train-iters 1 --lr-warmup-iters 0 --load-hf " + dir + "/model --num-layers 3");
  EXPECT_EQ(clash.exit_code, 2);
  EXPECT_NE(clash.output.find("--num-layers (3) disagrees with"), std::string::npos)
      << clash.output;
}

TEST(ScoreCommand, BadInputsGetClearErrors) {
  std::string dir = temp_dir("score_bad");
  CommandResult trained =
      run(kTiny + "--train-iters 1 --lr-warmup-iters 0 --save-hf " + dir + "/model");
  ASSERT_EQ(trained.exit_code, 0);
  std::ofstream(dir + "/range.json") << "[1, 2, 999]";
  std::ofstream(dir + "/bad.json") << "[1, 2,";
  std::ofstream(dir + "/short.json") << "[5]";
  CommandResult range = run("score --model " + dir + "/model --tokens " + dir + "/range.json");
  EXPECT_EQ(range.exit_code, 2);
  EXPECT_NE(range.output.find("token 2 is 999, not an id in [0, 256)"), std::string::npos)
      << range.output;
  EXPECT_EQ(run("score --model " + dir + "/model --tokens " + dir + "/bad.json").exit_code, 2);
  EXPECT_EQ(run("score --model " + dir + "/model --tokens " + dir + "/short.json").exit_code, 2);
  CommandResult missing = run("score --model " + dir + "/nope --tokens " + dir + "/range.json");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("config.json"), std::string::npos);
  // A truncated weights file is rejected with the file's name.
  fs::resize_file(dir + "/model/model.safetensors", 1000);
  std::ofstream(dir + "/ok.json") << "[1, 2, 3]";
  CommandResult truncated = run("score --model " + dir + "/model --tokens " + dir + "/ok.json");
  EXPECT_EQ(truncated.exit_code, 2);
  EXPECT_NE(truncated.output.find("model.safetensors"), std::string::npos) << truncated.output;
}

const std::string kData = std::string(TRIDENT_SOURCE_DIR) + "/data";
const std::string kTokenizer =
    " --vocab-file " + kData + "/gpt2/encoder.json --merge-file " + kData + "/gpt2/vocab.bpe ";

TEST(TrainCommand, TrainsOnAMegatronDatasetWithValidation) {
  std::string dir = temp_dir("kjv");
  CommandResult r =
      run("train --data-path " + kData + "/kjv/kjv_text_document --split 90,5,5" + kTokenizer +
          "--data-cache-path " + dir +
          "/cache --num-layers 1 "
          "--hidden-size 32 --num-attention-heads 2 --seq-length 32 --micro-batch-size 4 "
          "--global-batch-size 8 --train-iters 6 --eval-interval 3 --eval-iters 1 "
          "--log-interval 3 --peak-tflops 1 "
          "--metrics-file " +
          dir + "/m.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto m = read_metrics(dir + "/m.jsonl");
  int validations = 0;
  for (const auto& row : m) validations += row.contains("validation_loss");
  EXPECT_EQ(validations, 2);  // at iteration 3 and at the end
  EXPECT_NE(r.output.find("test loss at the end"), std::string::npos);
  EXPECT_NE(r.output.find("vocab 50257 padded to 50304"), std::string::npos);
}

TEST(TrainCommand, DataArgumentsAreValidated) {
  CommandResult r = run("train --data-path 0.5 a b --split 1,x --vocab-file v.json");
  EXPECT_EQ(r.exit_code, 2);
  for (const char* msg : {"--data-path takes one prefix, or weight/prefix pairs",
                          "--split '1,x' must be up to three non-negative numbers",
                          "--vocab-file and --merge-file go together"})
    EXPECT_NE(r.output.find(msg), std::string::npos) << msg << "\n" << r.output;
  CommandResult w = run("train --data-path -1 a 2 b --train-iters 1");
  EXPECT_NE(w.output.find("weight '-1' (before a) must be a positive number"), std::string::npos)
      << w.output;
  CommandResult missing =
      run("train --data-path /nonexistent/prefix --train-iters 1 --num-layers 1 "
          "--hidden-size 32 --num-attention-heads 2 --seq-length 16 --peak-tflops 1");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("--data-path: /nonexistent/prefix.bin does not exist"),
            std::string::npos)
      << missing.output;
}

TEST(ScoreCommand, ScoresTextThroughTheTokenizer) {
  std::string dir = temp_dir("score_text");
  CommandResult trained =
      run("train --mock-data --num-layers 1 --hidden-size 32 --num-attention-heads 2 "
          "--seq-length 16 --train-iters 1 --peak-tflops 1 --save-hf " +
          dir + "/m");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  std::ofstream(dir + "/t.txt") << "Hello world, hello world.";
  std::ofstream(dir + "/ids.json") << "[15496, 995, 11, 23748, 995, 13]";
  CommandResult text = run("score --model " + dir + "/m --text " + dir + "/t.txt" + kTokenizer);
  CommandResult ids = run("score --model " + dir + "/m --tokens " + dir + "/ids.json");
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_EQ(nlohmann::json::parse(text.output), nlohmann::json::parse(ids.output));
  EXPECT_EQ(run("score --model " + dir + "/m --text " + dir + "/t.txt").exit_code, 2);
}

TEST(PreprocessCommand, BadLineFailsWithExitCodeAndNoOutput) {
  std::string dir = temp_dir("preprocess_bad");
  std::ofstream(dir + "/in.jsonl") << "{\"text\": \"fine\"}\n{\"text\": \"broken\"\n";
  CommandResult r =
      run("preprocess --input " + dir + "/in.jsonl --output-prefix " + dir + "/out" + kTokenizer);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("in.jsonl:2: invalid JSON"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir + "/out_text_document.bin"));
  EXPECT_FALSE(fs::exists(dir + "/out_text_document.bin.tmp"));
  CommandResult skip = run("preprocess --input " + dir + "/in.jsonl --output-prefix " + dir +
                           "/out" + kTokenizer + "--on-bad-line skip");
  EXPECT_EQ(skip.exit_code, 0) << skip.output;
  EXPECT_NE(skip.output.find("skipped 1 bad lines"), std::string::npos) << skip.output;
  EXPECT_TRUE(fs::exists(dir + "/out_text_document.idx"));
}

// `trident preprocess --workers N` tokenizes batches on N threads and writes them in input
// order: the dataset is byte for byte the one-worker dataset (scripts/sanitize.sh thread
// runs this under ThreadSanitizer).
TEST(PreprocessCommand, WorkersWriteTheSameDataset) {
  std::string dir = temp_dir("preprocess_workers");
  {
    std::ofstream in(dir + "/in.jsonl");
    for (int i = 0; i < 2500; ++i)
      in << "{\"text\": \"Line " << i << ": and the " << i % 13 << " said unto " << i * 7
         << "\"}\n";
  }
  std::map<int, std::string> files;
  for (int workers : {1, 4}) {
    const std::string prefix = dir + "/w" + std::to_string(workers);
    CommandResult r = run("preprocess --input " + dir + "/in.jsonl --output-prefix " + prefix +
                          kTokenizer + "--append-eod --workers " + std::to_string(workers));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("2500 documents"), std::string::npos) << r.output;
    for (const char* ext : {".bin", ".idx"}) {
      std::ifstream f(prefix + "_text_document" + ext, std::ios::binary);
      files[workers] += std::string(std::istreambuf_iterator<char>(f), {});
    }
  }
  EXPECT_GT(files[1].size(), 2500u * 8);
  EXPECT_EQ(files[1], files[4]);
}

}  // namespace
