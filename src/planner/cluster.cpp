#include "planner/cluster.h"

#include <cpptoml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace trident::planner {

double GemmEfficiency::at(double flops) const {
  const double gflop = std::max(flops / 1e9, 1e-9);
  if (table.empty()) return max_efficiency * gflop / (gflop + half_efficiency_gflop);
  if (gflop <= table.front().first) return table.front().second;
  if (gflop >= table.back().first) return table.back().second;
  auto hi = std::upper_bound(table.begin(), table.end(), std::make_pair(gflop, 1e300));
  auto lo = hi - 1;
  const double w = std::log(gflop / lo->first) / std::log(hi->first / lo->first);
  return lo->second + w * (hi->second - lo->second);
}

namespace {

// Where x falls among ascending points: the lower index and the weight of the next, in
// log space, clamped at the ends.
std::pair<size_t, double> log_position(const std::vector<double>& points, double x) {
  if (points.size() < 2 || x <= points.front()) return {0, 0.0};
  if (x >= points.back()) return {points.size() - 2, 1.0};
  const size_t hi = std::upper_bound(points.begin(), points.end(), x) - points.begin();
  return {hi - 1, std::log(x / points[hi - 1]) / std::log(points[hi] / points[hi - 1])};
}

}  // namespace

double GemmEfficiency::at(double m, double n, double k) const {
  if (grid.empty()) return at(2 * m * n * k);
  const auto [r, wr] = log_position(grid_rows, m);
  const auto [c, wc] = log_position(grid_width, std::sqrt(n * k));
  const size_t width = grid_width.size();
  auto cell = [&](size_t i, size_t j) {
    return grid[std::min(i, grid_rows.size() - 1) * width + std::min(j, width - 1)];
  };
  const double low = cell(r, c) + wc * (cell(r, c + 1) - cell(r, c));
  const double high = cell(r + 1, c) + wc * (cell(r + 1, c + 1) - cell(r + 1, c));
  return low + wr * (high - low);
}

double OtherKernels::elementwise_ns(const DeviceSpec& d) const {
  if (elementwise_ns_per_element > 0) return elementwise_ns_per_element;
  return d.memory_bandwidth_gbs > 0 ? 4 / d.memory_bandwidth_gbs : 0;
}

double OtherKernels::cross_entropy_ns(const DeviceSpec& d) const {
  if (cross_entropy_ns_per_logit > 0) return cross_entropy_ns_per_logit;
  return d.memory_bandwidth_gbs > 0 ? 16 / d.memory_bandwidth_gbs : 0;
}

double OtherKernels::optimizer_ns(const DeviceSpec& d) const {
  if (optimizer_ns_per_parameter > 0) return optimizer_ns_per_parameter;
  return d.memory_bandwidth_gbs > 0 ? 34 / d.memory_bandwidth_gbs : 0;
}

namespace {

// Reads one section's keys, collecting every violation with the file and the key's path.
class Reader {
 public:
  Reader(std::shared_ptr<cpptoml::table> root, std::string source)
      : root_(std::move(root)), source_(std::move(source)) {}

  std::shared_ptr<cpptoml::table> section(const std::string& name, bool required) {
    known_[""].insert(name);
    if (!root_->contains(name)) {
      if (required) fail("[" + name + "]", "is required");
      return nullptr;
    }
    auto t = root_->get_table(name);
    if (!t) fail(name, "must be a table ([" + name + "])");
    return t;
  }

  // A number > 0; absent: `fallback` when optional (< 0 marks it required).
  double number(const std::shared_ptr<cpptoml::table>& t, const std::string& section,
                const std::string& key, double fallback = -1) {
    known_[section].insert(key);
    const std::string where = qualified(section, key);
    if (!t || !t->contains(key)) {
      if (fallback < 0) fail(where, "is required (a number > 0)");
      return std::max(fallback, 0.0);
    }
    auto v = t->get_as<double>(key);
    if (!v) {
      fail(where, "must be a number");
      return 0;
    }
    if (!(*v > 0) || !std::isfinite(*v)) fail(where, "must be > 0 (got " + format(*v) + ")");
    return *v;
  }

  int integer(const std::shared_ptr<cpptoml::table>& t, const std::string& section,
              const std::string& key) {
    known_[section].insert(key);
    const std::string where = qualified(section, key);
    if (!t || !t->contains(key)) {
      fail(where, "is required (an integer >= 1)");
      return 0;
    }
    auto v = t->get_as<int64_t>(key);
    if (!v || *v < 1 || *v > 1'000'000) {
      fail(where, "must be an integer in [1, 1000000]");
      return 0;
    }
    return (int)*v;
  }

  std::string text(const std::shared_ptr<cpptoml::table>& t, const std::string& section,
                   const std::string& key) {
    known_[section].insert(key);
    auto v = t ? t->get_as<std::string>(key) : cpptoml::option<std::string>();
    if (!v || v->empty()) fail(qualified(section, key), "is required (a non-empty string)");
    return v ? *v : "";
  }

  std::vector<double> numbers(const std::shared_ptr<cpptoml::table>& t, const std::string& section,
                              const std::string& key) {
    known_[section].insert(key);
    std::vector<double> out;
    if (!t || !t->contains(key)) return out;
    auto a = t->get_array(key);
    auto values = a ? a->get_array_of<double>() : cpptoml::option<std::vector<double>>();
    if (!values) {
      fail(qualified(section, key), "must be an array of numbers");
      return out;
    }
    for (double x : *values)
      if (!(x > 0) || !std::isfinite(x)) fail(qualified(section, key), "values must be > 0");
    return *values;
  }

  void known(const std::string& section, const std::string& key) { known_[section].insert(key); }

  // Keys nobody asked for are typos: refuse them rather than silently use a default.
  void check_unknown_keys() {
    for (const auto& [section, known] : known_) {
      auto t = section.empty() ? root_ : root_->get_table(section);
      if (!t) continue;
      for (const auto& [key, value] : *t)
        if (!known.count(key)) fail(qualified(section, key), "is not a known key");
    }
  }

  void fail(const std::string& key, const std::string& rule) {
    errors_.push_back(source_ + ": " + key + " " + rule);
  }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  static std::string qualified(const std::string& section, const std::string& key) {
    return section.empty() ? key : "[" + section + "] " + key;
  }
  static std::string format(double x) {
    std::ostringstream os;
    os << x;
    return os.str();
  }

  std::shared_ptr<cpptoml::table> root_;
  std::string source_;
  std::map<std::string, std::set<std::string>> known_;
  std::vector<std::string> errors_;
};

void read_other_kernels(Reader& r, const std::shared_ptr<cpptoml::table>& t, OtherKernels& k) {
  if (!t) return;
  k.attention_efficiency = r.number(t, "compute", "attention_efficiency", 0);
  if (k.attention_efficiency > 1) r.fail("[compute] attention_efficiency", "must be <= 1");
  k.elementwise_ns_per_element = r.number(t, "compute", "elementwise_ns_per_element", 0);
  k.cross_entropy_ns_per_logit = r.number(t, "compute", "cross_entropy_ns_per_logit", 0);
  k.optimizer_ns_per_parameter = r.number(t, "compute", "optimizer_ns_per_parameter", 0);
  if (t && t->contains("weight_gradient_accumulation")) {
    const std::string mode = r.text(t, "compute", "weight_gradient_accumulation");
    if (mode != "fused" && mode != "separate")
      r.fail("[compute] weight_gradient_accumulation", "must be \"fused\" or \"separate\"");
    k.separate_gradient_accumulation = mode == "separate";
  }
  r.known("compute", "weight_gradient_accumulation");
}

void read_gemm(Reader& r, const std::shared_ptr<cpptoml::table>& t, GemmEfficiency& g) {
  if (!t) return;
  g.max_efficiency = r.number(t, "compute", "gemm_max_efficiency", g.max_efficiency);
  g.half_efficiency_gflop =
      r.number(t, "compute", "gemm_half_efficiency_gflop", g.half_efficiency_gflop);
  if (g.max_efficiency > 1) r.fail("[compute] gemm_max_efficiency", "must be <= 1");
  std::vector<double> gflop = r.numbers(t, "compute", "gemm_gflop");
  std::vector<double> efficiency = r.numbers(t, "compute", "gemm_efficiency");
  if (gflop.size() != efficiency.size())
    r.fail("[compute] gemm_gflop", "and gemm_efficiency must have the same length");
  else if (!std::is_sorted(gflop.begin(), gflop.end()) ||
           std::adjacent_find(gflop.begin(), gflop.end()) != gflop.end())
    r.fail("[compute] gemm_gflop", "must be strictly ascending");
  else
    for (size_t i = 0; i < gflop.size(); ++i) g.table.emplace_back(gflop[i], efficiency[i]);
  for (double e : efficiency)
    if (e > 1) r.fail("[compute] gemm_efficiency", "values must be <= 1");
  g.grid_rows = r.numbers(t, "compute", "gemm_grid_rows");
  g.grid_width = r.numbers(t, "compute", "gemm_grid_width");
  g.grid = r.numbers(t, "compute", "gemm_grid_efficiency");
  for (const auto* axis : {&g.grid_rows, &g.grid_width})
    if (!std::is_sorted(axis->begin(), axis->end()) ||
        std::adjacent_find(axis->begin(), axis->end()) != axis->end() ||
        (!axis->empty() && axis->front() <= 0))
      r.fail("[compute] gemm_grid_rows and gemm_grid_width",
             "must be positive and strictly ascending");
  if (g.grid.size() != g.grid_rows.size() * g.grid_width.size())
    r.fail("[compute] gemm_grid_efficiency",
           "must have one value per (row, width) pair: len(gemm_grid_rows) x len(gemm_grid_width)");
  for (double e : g.grid)
    if (e <= 0 || e > 1) r.fail("[compute] gemm_grid_efficiency", "values must be in (0, 1]");
  if (!r.errors().empty()) g.grid.clear();
}

}  // namespace

Cluster parse_cluster(const std::string& toml_text, const std::string& source) {
  std::shared_ptr<cpptoml::table> root;
  try {
    std::istringstream in(toml_text);
    cpptoml::parser parser(in);
    root = parser.parse();
  } catch (const cpptoml::parse_exception& e) {
    throw std::invalid_argument(source + ": not valid TOML: " + e.what());
  }
  Reader r(root, source);
  Cluster c;
  c.source = source;
  c.nodes = r.integer(root, "", "nodes");
  auto device = r.section("device", true);
  c.device.name = r.text(device, "device", "name");
  c.device.peak_tflops = r.number(device, "device", "peak_tflops");
  c.device.memory_gib = r.number(device, "device", "memory_gib");
  c.device.memory_bandwidth_gbs = r.number(device, "device", "memory_bandwidth_gbs", 0);
  c.device.runtime_memory_gib = r.number(device, "device", "runtime_memory_gib", 0);
  auto node = r.section("node", true);
  c.devices_per_node = r.integer(node, "node", "devices");
  c.intra_node.bandwidth_gbs = r.number(node, "node", "intra_node_bandwidth_gbs");
  c.intra_node.latency_us = r.number(node, "node", "intra_node_latency_us");
  auto network = r.section("network", true);
  c.inter_node.bandwidth_gbs = r.number(network, "network", "inter_node_bandwidth_gbs");
  c.inter_node.latency_us = r.number(network, "network", "inter_node_latency_us");
  auto compute = r.section("compute", false);
  read_gemm(r, compute, c.gemm);
  read_other_kernels(r, compute, c.kernels);
  r.check_unknown_keys();
  if (!r.errors().empty()) {
    std::string message;
    for (const std::string& e : r.errors()) message += (message.empty() ? "" : "\n") + e;
    throw std::invalid_argument(message);
  }
  return c;
}

Cluster load_cluster(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + ": cannot be read (--cluster)");
  std::stringstream text;
  text << in.rdbuf();
  return parse_cluster(text.str(), path);
}

namespace {

// The shortest decimal that reads back to the same double.
std::string number_text(double x) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
  std::string text = ec == std::errc() ? std::string(buf, end) : "0";
  // TOML refuses leading zeros in an exponent ("1e-05").
  const size_t e = text.find('e');
  if (e != std::string::npos) {
    size_t digits = e + 1 + (text[e + 1] == '-' || text[e + 1] == '+');
    while (digits + 1 < text.size() && text[digits] == '0') text.erase(digits, 1);
  }
  // A float with a fraction, never an integer: TOML arrays may not mix the two, and cpptoml
  // reads "1e5" as neither.
  if (text.find('.') == std::string::npos)
    text.insert(e == std::string::npos ? text.size() : e, ".0");
  return text;
}

// A TOML basic string: quotes, backslashes and control characters escaped.
std::string string_text(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += (char)ch;
    } else if (ch < 0x20 || ch == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
    } else {
      out += (char)ch;
    }
  }
  return out + "\"";
}

std::string numbers_text(const std::vector<std::pair<double, double>>& table, bool second) {
  std::string out = "[";
  for (size_t i = 0; i < table.size(); ++i)
    out += (i ? ", " : "") + number_text(second ? table[i].second : table[i].first);
  return out + "]";
}

std::string list_text(const std::vector<double>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + number_text(values[i]);
  return out + "]";
}

}  // namespace

std::string cluster_to_toml(const Cluster& c) {
  std::ostringstream os;
  auto key = [&](const char* name, double value) {
    os << name << " = " << number_text(value) << "\n";
  };
  os << "nodes = " << c.nodes << "\n\n[device]\nname = " << string_text(c.device.name) << "\n";
  key("peak_tflops", c.device.peak_tflops);
  key("memory_gib", c.device.memory_gib);
  if (c.device.memory_bandwidth_gbs > 0) key("memory_bandwidth_gbs", c.device.memory_bandwidth_gbs);
  if (c.device.runtime_memory_gib > 0) key("runtime_memory_gib", c.device.runtime_memory_gib);
  os << "\n[node]\ndevices = " << c.devices_per_node << "\n";
  key("intra_node_bandwidth_gbs", c.intra_node.bandwidth_gbs);
  key("intra_node_latency_us", c.intra_node.latency_us);
  os << "\n[network]\n";
  key("inter_node_bandwidth_gbs", c.inter_node.bandwidth_gbs);
  key("inter_node_latency_us", c.inter_node.latency_us);
  os << "\n[compute]\n";
  if (c.gemm.table.empty()) {
    key("gemm_max_efficiency", c.gemm.max_efficiency);
    key("gemm_half_efficiency_gflop", c.gemm.half_efficiency_gflop);
  } else {
    os << "gemm_gflop = " << numbers_text(c.gemm.table, false) << "\n";
    os << "gemm_efficiency = " << numbers_text(c.gemm.table, true) << "\n";
  }
  if (!c.gemm.grid.empty()) {
    os << "gemm_grid_rows = " << list_text(c.gemm.grid_rows) << "\n";
    os << "gemm_grid_width = " << list_text(c.gemm.grid_width) << "\n";
    os << "gemm_grid_efficiency = " << list_text(c.gemm.grid) << "\n";
  }
  const OtherKernels& k = c.kernels;
  if (k.attention_efficiency > 0) key("attention_efficiency", k.attention_efficiency);
  if (k.elementwise_ns_per_element > 0)
    key("elementwise_ns_per_element", k.elementwise_ns_per_element);
  if (k.cross_entropy_ns_per_logit > 0)
    key("cross_entropy_ns_per_logit", k.cross_entropy_ns_per_logit);
  if (k.separate_gradient_accumulation) os << "weight_gradient_accumulation = \"separate\"\n";
  if (k.optimizer_ns_per_parameter > 0)
    key("optimizer_ns_per_parameter", k.optimizer_ns_per_parameter);
  return os.str();
}

}  // namespace trident::planner
