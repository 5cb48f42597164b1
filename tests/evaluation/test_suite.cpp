// A suite's table and runs on hand-made outcomes: the expected text is written out by hand in
// the paper's layout (each column beside the published number, percent to one decimal).
#include <gtest/gtest.h>

#include "core/files.h"
#include "evaluation/suite.h"

namespace trident::evaluation {
namespace {

Suite two_row_suite() {
  Suite s;
  s.name = "mini", s.title = "Mini", s.reference_model = "Ref 1B";
  s.columns = {"0-shot", "few-shot"};
  s.rows = {{"piqa", "PiQA", "acc_norm", {0, 50}, {82.0, std::nullopt}},
            {"boolq", "BoolQ", "acc", {0, 32}, {std::nullopt, 84.8}}};
  return s;
}

TaskOutcome outcome(const std::string& task, double acc, double acc_norm) {
  TaskOutcome o;
  o.spec.name = task;
  o.metrics = {{"acc", acc, 0.01, true}, {"acc_norm", acc_norm, 0.02, true}};
  return o;
}

TEST(Suite, RunsEveryRowAtEachColumnsShotCount) {
  const std::vector<TaskRun> runs = suite_runs(two_row_suite());
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[1].task, "piqa");
  EXPECT_EQ(runs[1].num_fewshot, 50);
  EXPECT_EQ(runs[2].task, "boolq");
  EXPECT_EQ(runs[2].num_fewshot, 0);
  EXPECT_EQ(runs[3].num_fewshot, 32);
}

TEST(Suite, TableSetsEachCellBesideThePublishedNumber) {
  const std::vector<TaskOutcome> outcomes = {outcome("piqa", 0.5, 0.625),
                                             outcome("piqa", 0.5, 0.75), outcome("boolq", 0.6, 0.1),
                                             outcome("boolq", 0.8125, 0.1)};
  EXPECT_EQ(suite_table(two_row_suite(), outcomes),
            "| Task | Metric | 0-shot | Ref 1B | few-shot (k) | Ref 1B |\n"
            "|---|---|---:|---:|---:|---:|\n"
            "| PiQA | acc_norm | 62.5 | 82.0 | 75.0 (50) | - |\n"
            "| BoolQ | acc | 60.0 | - | 81.2 (32) | 84.8 |\n");
  const nlohmann::ordered_json j = suite_json(two_row_suite(), outcomes);
  EXPECT_EQ(j["rows"][1]["cells"][1]["n-shot"], 32);
  EXPECT_EQ(j["rows"][1]["cells"][1]["value"], 0.8125);
  EXPECT_EQ(j["rows"][1]["cells"][1]["reference"], 84.8);
  EXPECT_TRUE(j["rows"][0]["cells"][1]["reference"].is_null());
}

TEST(Suite, BadFilesAreFormatErrorsNamingTheFile) {
  // A number past double's range is nlohmann's out_of_range, not a parse_error (found by
  // fuzz_suite).
  for (const char* text : {"{", "[66666666666666666666666666666E66666666666666666666666666]",
                           "{\"name\": \"x\", \"reference_model\": \"m\", \"columns\": []}"}) {
    try {
      parse_suite_text(text, "s.json");
      ADD_FAILURE() << "accepted " << text;
    } catch (const FormatError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("s.json: ", 0), 0u) << e.what();
    }
  }
}

}  // namespace
}  // namespace trident::evaluation
