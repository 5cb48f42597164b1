#include "cli/inspect_data_command.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/parse_args.h"
#include "data/indexed_dataset.h"
#include "tokenizer/gpt2_tokenizer.h"

namespace trident::cli {

int inspect_data_main(const std::vector<std::string>& args) {
  CLI::App app("trident inspect-data: summary and contents of a .bin/.idx dataset",
               "trident inspect-data");
  std::string prefix, vocab, merges;
  long first = 0, count = 0;
  app.add_option("--data-path", prefix, "dataset prefix (without .bin/.idx)")->required();
  app.add_option("--first", first, "first sequence to print")->capture_default_str();
  app.add_option("--count", count, "sequences to print (-1: all)")->capture_default_str();
  app.add_option("--vocab-file", vocab, "decode printed sequences with GPT-2 BPE");
  app.add_option("--merge-file", merges, "GPT-2 merges (with --vocab-file)");
  int code = 0;
  if (!parse_args(app, args, &code)) return code;
  try {
    data::IndexedDataset d(prefix);
    long tokens = 0;
    for (std::int32_t s : d.sizes()) tokens += s;
    nlohmann::ordered_json summary = {{"sequences", d.sequences()},
                                      {"documents", (long)d.document_index().size() - 1},
                                      {"tokens", tokens},
                                      {"dtype_code", (int)d.dtype()}};
    std::cout << summary.dump() << "\n";
    std::unique_ptr<tokenizer::GPT2Tokenizer> tok;
    if (!vocab.empty()) tok = std::make_unique<tokenizer::GPT2Tokenizer>(vocab, merges);
    long end = count < 0 ? d.sequences() : std::min(d.sequences(), first + count);
    std::vector<int> ids;
    for (long i = std::max(0L, first); i < end; ++i) {
      ids.clear();
      d.read(i, 0, d.size(i), &ids);
      if (tok)
        std::cout << nlohmann::json(tok->decode(ids)).dump() << "\n";
      else
        std::cout << nlohmann::json(ids).dump() << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "trident inspect-data: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace trident::cli
