// Suite files for `trident eval --suite`: any bytes as a suite's JSON. A bad file must be a
// FormatError naming "suite.json:"; a good one has one shot count and one reference per
// column in every row, and runs every row at every column.
#include <cstdint>
#include <string>

#include "core/files.h"
#include "evaluation/suite.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  using namespace trident;
  using namespace trident::evaluation;
  const std::string text(reinterpret_cast<const char*>(data), size);
  Suite suite;
  try {
    suite = parse_suite_text(text, "suite.json");
  } catch (const FormatError& e) {
    FUZZ_CHECK(std::string(e.what()).rfind("suite.json:", 0) == 0);
    return 0;
  }
  FUZZ_CHECK(!suite.columns.empty() && !suite.rows.empty());
  for (const SuiteRow& r : suite.rows) {
    FUZZ_CHECK(r.shots.size() == suite.columns.size());
    FUZZ_CHECK(r.reference.size() == suite.columns.size());
    for (int k : r.shots) FUZZ_CHECK(k >= 0 && k <= 1000);
  }
  FUZZ_CHECK(suite_runs(suite).size() == suite.rows.size() * suite.columns.size());
  return 0;
}
