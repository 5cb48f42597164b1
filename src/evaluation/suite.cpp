#include "evaluation/suite.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/files.h"
#include "evaluation/task_registry.h"

namespace trident::evaluation {

namespace {

std::string text_field(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_string() || j[key].get<std::string>().empty())
    throw FormatError(where + "\"" + key + "\" must be a non-empty string");
  return j[key].get<std::string>();
}

const nlohmann::json& list_field(const nlohmann::json& j, const char* key, size_t size,
                                 const std::string& where) {
  if (!j.contains(key) || !j[key].is_array() || j[key].size() != size)
    throw FormatError(where + "\"" + key + "\" must be a list of " + std::to_string(size) +
                      " (one per column)");
  return j[key];
}

// The metric must be one the task reports, or the table would have an empty cell.
void check_metric(const SuiteRow& row, const std::string& where) {
  const TaskSpec spec = find_task(row.task);
  for (const std::string& m : spec.metrics)
    if (m == row.metric) return;
  std::string known;
  for (const std::string& m : spec.metrics) known += (known.empty() ? "" : ", ") + m;
  throw FormatError(where + "task " + row.task + " has no metric \"" + row.metric +
                    "\" (it reports " + known + ")");
}

SuiteRow read_row(const nlohmann::json& j, size_t columns, const std::string& where) {
  if (!j.is_object()) throw FormatError(where + "a row must be an object");
  SuiteRow row;
  row.task = text_field(j, "task", where);
  row.label = j.contains("label") ? text_field(j, "label", where) : row.task;
  row.metric = text_field(j, "metric", where);
  try {
    check_metric(row, where);
  } catch (const FormatError& e) {  // find_task: an unknown name, with the known ones
    throw FormatError(where + e.what());
  }
  for (const nlohmann::json& s : list_field(j, "shots", columns, where)) {
    if (!s.is_number_integer() || s.get<long>() < 0 || s.get<long>() > 1000)
      throw FormatError(where + "\"shots\" must hold integers in [0, 1000]");
    row.shots.push_back(s.get<int>());
  }
  for (const nlohmann::json& r : list_field(j, "reference", columns, where)) {
    if (r.is_null()) {
      row.reference.push_back(std::nullopt);
    } else if (r.is_number() && r.get<double>() >= 0 && r.get<double>() <= 100) {
      row.reference.push_back(r.get<double>());
    } else {
      throw FormatError(where + "\"reference\" must hold percentages in [0, 100] or null");
    }
  }
  return row;
}

Suite parse_suite(const nlohmann::json& j, const std::string& path) {
  const std::string where = path + ": ";
  if (!j.is_object()) throw FormatError(where + "a suite file is a JSON object");
  Suite s;
  s.name = text_field(j, "name", where);
  s.title = j.contains("title") ? text_field(j, "title", where) : s.name;
  s.reference_model = text_field(j, "reference_model", where);
  if (!j.contains("columns") || !j["columns"].is_array() || j["columns"].empty())
    throw FormatError(where + "\"columns\" must be a non-empty list of names");
  for (const nlohmann::json& c : j["columns"]) {
    if (!c.is_string()) throw FormatError(where + "\"columns\" must hold strings");
    s.columns.push_back(c.get<std::string>());
  }
  if (!j.contains("rows") || !j["rows"].is_array() || j["rows"].empty())
    throw FormatError(where + "\"rows\" must be a non-empty list");
  for (size_t r = 0; r < j["rows"].size(); ++r)
    s.rows.push_back(
        read_row(j["rows"][r], s.columns.size(), where + "row " + std::to_string(r + 1) + ": "));
  if (j.contains("notes"))
    for (const nlohmann::json& n : j["notes"])
      if (n.is_string()) s.notes.push_back(n.get<std::string>());
  return s;
}

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", 100.0 * fraction);
  return buf;
}

// The row's metric in one outcome (check_metric made sure the task reports it).
const MetricValue& metric_of(const TaskOutcome& o, const std::string& name) {
  for (const MetricValue& m : o.metrics)
    if (m.name == name) return m;
  throw std::logic_error("suite: task " + o.spec.name + " reported no " + name);
}

std::string column_header(const Suite& s, size_t c) {
  bool same = true;
  for (const SuiteRow& r : s.rows) same = same && r.shots[c] == s.rows[0].shots[c];
  return same ? s.columns[c] : s.columns[c] + " (k)";
}

}  // namespace

Suite load_suite(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError(path + ": cannot open the suite file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_suite_text(text.str(), path);
}

Suite parse_suite_text(const std::string& text, const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range: 1E999
    throw FormatError(path + ": invalid JSON (" + e.what() + ")");
  }
  return parse_suite(j, path);
}

std::vector<TaskRun> suite_runs(const Suite& suite) {
  std::vector<TaskRun> runs;
  for (const SuiteRow& r : suite.rows)
    for (int k : r.shots) runs.push_back({r.task, k});
  return runs;
}

std::string suite_table(const Suite& s, const std::vector<TaskOutcome>& outcomes) {
  std::string out = "| Task | Metric |";
  std::string rule = "|---|---|";
  for (size_t c = 0; c < s.columns.size(); ++c) {
    out += " " + column_header(s, c) + " | " + s.reference_model + " |";
    rule += "---:|---:|";
  }
  out += "\n" + rule + "\n";
  const size_t n = s.columns.size();
  for (size_t r = 0; r < s.rows.size(); ++r) {
    const SuiteRow& row = s.rows[r];
    out += "| " + row.label + " | " + row.metric + " |";
    for (size_t c = 0; c < n; ++c) {
      const std::string ours = percent(metric_of(outcomes[r * n + c], row.metric).value);
      const bool varies = column_header(s, c) != s.columns[c];
      out += " " + ours + (varies ? " (" + std::to_string(row.shots[c]) + ")" : "") + " | " +
             (row.reference[c] ? percent(*row.reference[c] / 100.0) : "-") + " |";
    }
    out += "\n";
  }
  return out;
}

nlohmann::ordered_json suite_json(const Suite& s, const std::vector<TaskOutcome>& outcomes) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  const size_t n = s.columns.size();
  for (size_t r = 0; r < s.rows.size(); ++r) {
    const SuiteRow& row = s.rows[r];
    nlohmann::ordered_json cells = nlohmann::ordered_json::array();
    for (size_t c = 0; c < n; ++c) {
      const TaskOutcome& o = outcomes[r * n + c];
      const MetricValue& m = metric_of(o, row.metric);
      cells.push_back({{"column", s.columns[c]},
                       {"n-shot", row.shots[c]},
                       {"value", m.value},
                       {"stderr", m.stderr_value ? nlohmann::ordered_json(*m.stderr_value)
                                                 : nlohmann::ordered_json("N/A")},
                       {"n-samples", o.effective},
                       {"reference", row.reference[c] ? nlohmann::ordered_json(*row.reference[c])
                                                      : nlohmann::ordered_json(nullptr)}});
    }
    rows.push_back(
        {{"task", row.task}, {"label", row.label}, {"metric", row.metric}, {"cells", cells}});
  }
  return {{"suite", s.name},      {"title", s.title}, {"reference_model", s.reference_model},
          {"columns", s.columns}, {"rows", rows},     {"notes", s.notes}};
}

}  // namespace trident::evaluation
