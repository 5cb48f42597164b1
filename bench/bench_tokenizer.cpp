// Tokenizer throughput: MB/s and tokens/s encoding every document of a JSONL corpus on one
// thread, then on all threads (documents split across threads), `passes` times over the corpus
// (default 1; the first pass fills the tokenizers' piece caches). Usage:
//   bench_tokenizer VOCAB MERGES CORPUS.jsonl [threads [passes]]    GPT-2's encoder.json +
//   vocab.bpe bench_tokenizer --hf TOKENIZER CORPUS.jsonl [threads [passes]]  a HuggingFace
//   tokenizer.json
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tokenizer/gpt2_tokenizer.h"
#include "tokenizer/huggingface_tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: bench_tokenizer VOCAB MERGES CORPUS.jsonl [threads]\n"
                 "       bench_tokenizer --hf TOKENIZER_JSON CORPUS.jsonl [threads]\n");
    return 2;
  }
  std::unique_ptr<trident::tokenizer::Tokenizer> built;
  if (std::string(argv[1]) == "--hf")
    built = std::make_unique<trident::tokenizer::HuggingFaceTokenizer>(argv[2]);
  else
    built = std::make_unique<trident::tokenizer::GPT2Tokenizer>(argv[1], argv[2]);
  const trident::tokenizer::Tokenizer& tok = *built;
  std::vector<std::string> docs;
  double bytes = 0;
  std::ifstream in(argv[3]);
  std::string line;
  while (std::getline(in, line)) {
    docs.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
    bytes += docs.back().size();
  }
  int threads = argc > 4 ? std::atoi(argv[4]) : (int)std::thread::hardware_concurrency();
  const int passes = argc > 5 ? std::max(1, std::atoi(argv[5])) : 1;
  auto run = [&](int n) {
    auto start = std::chrono::steady_clock::now();
    std::vector<long> tokens(n, 0);
    std::vector<std::thread> pool;
    for (int t = 0; t < n; ++t)
      pool.emplace_back([&, t] {
        std::vector<int> ids;
        for (int pass = 0; pass < passes; ++pass)
          for (size_t d = t; d < docs.size(); d += n) {
            ids.clear();
            tok.encode(docs[d], &ids);
            tokens[t] += (long)ids.size();
          }
      });
    for (auto& p : pool) p.join();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    long total = 0;
    for (long x : tokens) total += x;
    std::printf(
        "{\"threads\": %d, \"mb\": %.2f, \"seconds\": %.3f, \"mb_per_s\": %.2f, \"tokens\": %ld, "
        "\"tokens_per_s_per_thread\": %.0f}\n",
        n, passes * bytes / 1e6, s, passes * bytes / 1e6 / s, total, total / s / n);
  };
  run(1);
  if (threads > 1) run(threads);
  return 0;
}
