#include "cli/inspect_data_command.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/parse_args.h"
#include "cli/tokenizer_args.h"
#include "data/indexed_dataset.h"
#include "tokenizer/build_tokenizer.h"

namespace trident::cli {

int inspect_data_main(const std::vector<std::string>& args) {
  CLI::App app("trident inspect-data: summary and contents of a .bin/.idx dataset",
               "trident inspect-data");
  std::string prefix;
  tokenizer::TokenizerOptions tokenizer_options;
  long first = 0, count = 0;
  app.add_option("--data-path", prefix, "dataset prefix (without .bin/.idx)")->required();
  app.add_option("--first", first, "first sequence to print")->capture_default_str();
  app.add_option("--count", count, "sequences to print (-1: all)")->capture_default_str();
  add_tokenizer_args(app, &tokenizer_options, "Tokenizer (decodes printed sequences)");
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
    std::unique_ptr<tokenizer::Tokenizer> tok;
    if (tokenizer_options.given() || !tokenizer::check_tokenizer_options(tokenizer_options).empty())
      tok = tokenizer::build_tokenizer(tokenizer_options);  // throws the flags' errors
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
