#pragma once
// An evaluation suite (`trident eval --suite`): a paper's table as data. Each row is a task, a
// metric and one shot count per column (zero-, one-, few-shot), with the published model's
// number for each cell where the file has it. The suite becomes one list of task runs (every
// row at every column's count, each with its own few-shot draw), and the outcomes go back into
// the table beside the published numbers.
//
// File layout (JSON; configs/eval/mt-nlg.json is MT-NLG's):
//   {"name": "...", "title": "...", "reference_model": "MT-NLG 530B",
//    "columns": ["0-shot", "1-shot", "few-shot"],
//    "rows": [{"task": "lambada_openai", "label": "LAMBADA", "metric": "acc",
//              "shots": [0, 1, 15], "reference": [76.6, null, null]}, ...],
//    "notes": ["where the reference numbers come from", ...]}
// reference: percent, null where the file has no published number.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "evaluation/evaluator.h"

namespace trident::evaluation {

struct SuiteRow {
  std::string task, label, metric;
  std::vector<int> shots;                        // one per column
  std::vector<std::optional<double>> reference;  // one per column, percent
};

struct Suite {
  std::string name, title, reference_model;
  std::vector<std::string> columns;
  std::vector<SuiteRow> rows;
  std::vector<std::string> notes;
};

// Reads and checks a suite file: task names known, each task's metric among its metrics,
// one shot count (0..1000) and one reference (null or 0..100) per column. FormatError names
// the file, the row and the rule.
Suite load_suite(const std::string& path);
// The same on a file's text (`path` names it in messages).
Suite parse_suite_text(const std::string& text, const std::string& path);

// Every row at every column's shot count, row-major (row r, column c at r * columns + c).
std::vector<TaskRun> suite_runs(const Suite& suite);

// outcomes: finish()'s, in suite_runs' order. The paper's layout, each column beside the
// published number: | Task | Metric | 0-shot | MT-NLG 530B | 1-shot | ... (percent).
std::string suite_table(const Suite& suite, const std::vector<TaskOutcome>& outcomes);
// {"suite", "title", "reference_model", "columns", "rows": [{task, label, metric, cells:
// [{column, n-shot, value, stderr, reference}]}], "notes"} (values as fractions, the
// reference in percent as the paper prints it).
nlohmann::ordered_json suite_json(const Suite& suite, const std::vector<TaskOutcome>& outcomes);

}  // namespace trident::evaluation
