#pragma once
// Task data files: JSONL, one document (a JSON object) per line, blank lines skipped.
// parse_task_jsonl is a pure function of the text (fuzzed by fuzz/fuzz_task_jsonl.cpp); a
// problem is a FormatError naming "file:line: problem".
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace trident::evaluation {

struct RawDoc {
  nlohmann::json fields;
  long line = 0;  // 1-based line in its file
};

std::vector<RawDoc> parse_task_jsonl(std::string_view text, const std::string& path);
// Reads and parses a file; a missing file is a FormatError naming it.
std::vector<RawDoc> read_task_jsonl(const std::string& path);

// Python literal (ast.literal_eval) of strings, numbers, True/False/None, lists, tuples and
// dicts, as JSON: RACE stores each article's problems as the repr of a list of dicts.
// Throws std::invalid_argument naming the offset of the problem.
nlohmann::json parse_python_literal(std::string_view text);

}  // namespace trident::evaluation
