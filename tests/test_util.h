#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "core/random.h"

namespace trident::testing {

struct ShellResult {
  int exit_code;       // -1 when the command did not exit normally
  std::string output;  // what it printed (the command redirects stderr if it wants it)
};

inline ShellResult run_shell(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// This process's own directory under the system temp directory, removed when the process
// exits: concurrent runs of the tests (ctest -j, other checkouts on the machine) never share
// a file.
inline const std::filesystem::path& process_temp_root() {
  struct Root {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("trident_tests_" + std::to_string(::getpid()));
    ~Root() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Root root;
  return root.path;
}

// An empty directory <process temp root>/<group>/<name> (emptied when it was there already).
inline std::string empty_temp_dir(const std::string& group, const std::string& name) {
  const std::filesystem::path dir = process_temp_root() / group / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline std::vector<float> random_vector(long n, std::uint64_t seed, float scale = 1.f) {
  std::vector<float> v(n);
  for (long i = 0; i < n; ++i) v[i] = (float)(scale * normal_at(seed, 7, i));
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Weighted sum of the outputs: a scalar loss whose gradient with respect to the output is `w`.
inline double weighted(const std::vector<double>& y, const std::vector<float>& w) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += y[i] * w[i];
  return s;
}

// max |a - b| / max(1, max |b|)
inline double relative_error(const std::vector<float>& a, const std::vector<double>& b) {
  double worst = 0, scale = 1;
  for (double x : b) scale = std::max(scale, std::abs(x));
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst / scale;
}

// Central finite difference of f at x (double precision), one coordinate at a time.
template <typename F>
std::vector<double> numeric_gradient(F f, std::vector<double> x, double eps = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double old = x[i];
    x[i] = old + eps;
    double up = f(x);
    x[i] = old - eps;
    double down = f(x);
    x[i] = old;
    g[i] = (up - down) / (2 * eps);
  }
  return g;
}

}  // namespace trident::testing
