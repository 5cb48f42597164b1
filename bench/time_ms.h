#pragma once
// Milliseconds per call of f: one warm-up call, then as many calls as fill `seconds`.
#include <chrono>
#include <functional>

namespace trident::bench {

inline double time_ms(const std::function<void()>& f, double seconds = 0.3) {
  f();
  const auto t0 = std::chrono::steady_clock::now();
  int reps = 0;
  double elapsed;
  do {
    f();
    ++reps;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } while (elapsed < seconds);
  return elapsed / reps * 1e3;
}

}  // namespace trident::bench
