#pragma once
// Helpers of the tests of src/cli/: running the trident binary (a sanitizer report in its
// output fails the test), scratch directories, the metrics file, a tiny training run, the
// data and tokenizer files in data/.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.h"

namespace trident::cli_test {

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr
};

inline CommandResult run(const std::string& args) {
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

// An empty directory for one test, under <system temp>/trident_cli_tests.
inline std::string temp_dir(const std::string& name) {
  return testing::empty_temp_dir("trident_cli_tests", name);
}

// The metrics file's rows after its leading description of the run (the "run" row the
// report page reads).
inline std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json row = nlohmann::json::parse(line);
    if (!row.contains("run")) rows.push_back(std::move(row));
  }
  return rows;
}

const std::string kTiny =
    "train --mock-data --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 "
    "--vocab-size 256 --micro-batch-size 4 --global-batch-size 8 --lr 3e-3 --lr-warmup-iters 5 "
    "--min-lr 3e-4 --log-interval 5 --eval-iters 2 --peak-tflops 1 --threads 2 ";

const std::string kData = std::string(TRIDENT_SOURCE_DIR) + "/data";

const std::string kTokenizer =
    " --vocab-file " + kData + "/gpt2/encoder.json --merge-file " + kData + "/gpt2/vocab.bpe ";

}  // namespace trident::cli_test
