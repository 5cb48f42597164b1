#include "evaluation/report.h"

#include <algorithm>
#include <cstdio>

#include "evaluation/text_ops.h"

namespace trident::evaluation {

namespace {

std::string version_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v == (long)v ? "%.0f" : "%g", v);
  return buf;
}

std::string fixed4(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

}  // namespace

nlohmann::ordered_json results_json(const std::vector<TaskOutcome>& outcomes,
                                    const nlohmann::ordered_json& config) {
  nlohmann::ordered_json results, versions, nshot, better, samples;
  for (const TaskOutcome& o : outcomes) {
    nlohmann::ordered_json r = {{"alias", o.spec.name}};
    nlohmann::ordered_json hib;
    for (const MetricValue& m : o.metrics) {
      r[m.name + ",none"] = m.value;
      if (m.stderr_value)
        r[m.name + "_stderr,none"] = *m.stderr_value;
      else
        r[m.name + "_stderr,none"] = "N/A";
      hib[m.name] = m.higher_is_better;
    }
    results[o.spec.name] = r;
    versions[o.spec.name] = o.spec.version;
    nshot[o.spec.name] = o.num_fewshot;
    better[o.spec.name] = hib;
    samples[o.spec.name] = {{"original", o.original}, {"effective", o.effective}};
  }
  return {{"results", results},         {"versions", versions}, {"n-shot", nshot},
          {"higher_is_better", better}, {"n-samples", samples}, {"config", config}};
}

std::string results_table(const std::vector<TaskOutcome>& outcomes) {
  std::vector<std::vector<std::string>> rows = {
      {"Tasks", "Version", "Filter", "n-shot", "Metric", "", "Value", "", "Stderr"}};
  for (const TaskOutcome& o : outcomes) {
    std::vector<MetricValue> metrics = o.metrics;
    std::sort(metrics.begin(), metrics.end(),
              [](const MetricValue& a, const MetricValue& b) { return a.name < b.name; });
    bool first = true;
    for (const MetricValue& m : metrics) {
      rows.push_back({first ? o.spec.name : "", first ? version_text(o.spec.version) : "", "none",
                      std::to_string(o.num_fewshot), m.name,
                      m.higher_is_better ? "\xe2\x86\x91" : "\xe2\x86\x93", fixed4(m.value),
                      "\xc2\xb1", m.stderr_value ? fixed4(*m.stderr_value) : "   N/A"});
      first = false;
    }
  }
  // Columns padded to their widest cell (in characters); numbers right-aligned.
  const std::vector<bool> right = {false, true, false, true, false, false, true, false, true};
  std::vector<long> width(9, 3);
  for (const auto& r : rows)
    for (size_t c = 0; c < 9; ++c) width[c] = std::max(width[c], code_points(r[c]));
  auto line = [&](const std::vector<std::string>& r) {
    std::string s = "|";
    for (size_t c = 0; c < 9; ++c) {
      const std::string pad(width[c] - code_points(r[c]), ' ');
      s += right[c] ? pad + r[c] : r[c] + pad;
      s += "|";
    }
    return s + "\n";
  };
  std::string out = line(rows[0]) + "|";
  for (size_t c = 0; c < 9; ++c)
    out += std::string(width[c] - (right[c] ? 1 : 0), '-') + (right[c] ? ":|" : "|");
  out += "\n";
  for (size_t i = 1; i < rows.size(); ++i) out += line(rows[i]);
  return out;
}

}  // namespace trident::evaluation
