#pragma once
// Python's random.Random (Mersenne Twister MT19937, seeded from an int as CPython does) and
// the draws lm-evaluation-harness makes with it: random.sample picks the few-shot examples
// and random.choices the bootstrap resamples. Bit-for-bit the same draws, so a few-shot
// context and a bootstrapped stderr equal the harness's for the same seed.
#include <cstdint>
#include <vector>

namespace trident::evaluation {

class PythonRandom {
 public:
  explicit PythonRandom(std::uint64_t seed);  // random.Random(seed), seed >= 0
  std::uint32_t next32();                     // genrand_uint32
  std::uint64_t getrandbits(int k);           // 0 <= k <= 64
  long randbelow(long n);                     // _randbelow_with_getrandbits, n >= 1
  double random();                            // [0, 1), 53 bits
  // random.sample(range(n), k): k distinct indices in draw order (0 <= k <= n), with the
  // same pool-or-set strategy as CPython, so the RNG advances as it does.
  std::vector<long> sample(long n, long k);
  // random.choices(range(n), k=k): floor(random() * n) k times.
  long choice_index(long n) { return (long)(random() * (double)n); }

 private:
  void init_by_array(const std::vector<std::uint32_t>& key);
  std::uint32_t mt_[624];
  int index_ = 625;
};

}  // namespace trident::evaluation
