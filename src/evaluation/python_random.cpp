#include "evaluation/python_random.h"

#include <cmath>
#include <stdexcept>
#include <unordered_set>

namespace trident::evaluation {

namespace {
constexpr int kN = 624, kM = 397;
constexpr std::uint32_t kMatrixA = 0x9908b0dfU, kUpper = 0x80000000U, kLower = 0x7fffffffU;
}  // namespace

PythonRandom::PythonRandom(std::uint64_t seed) {
  // CPython seeds an int from its absolute value's 32-bit words, least significant first
  // (at least one word).
  std::vector<std::uint32_t> key = {(std::uint32_t)seed};
  if (seed >> 32) key.push_back((std::uint32_t)(seed >> 32));
  init_by_array(key);
}

void PythonRandom::init_by_array(const std::vector<std::uint32_t>& key) {
  mt_[0] = 19650218U;
  for (int i = 1; i < kN; ++i)
    mt_[i] = 1812433253U * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + (std::uint32_t)i;
  int i = 1;
  size_t j = 0;
  for (int k = std::max<int>(kN, (int)key.size()); k; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525U)) + key[j] + (std::uint32_t)j;
    ++i, ++j;
    if (i >= kN) mt_[0] = mt_[kN - 1], i = 1;
    if (j >= key.size()) j = 0;
  }
  for (int k = kN - 1; k; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941U)) - (std::uint32_t)i;
    if (++i >= kN) mt_[0] = mt_[kN - 1], i = 1;
  }
  mt_[0] = 0x80000000U;
  index_ = kN;
}

std::uint32_t PythonRandom::next32() {
  if (index_ >= kN) {
    int k = 0;
    auto twist = [&](int a, int b) {
      const std::uint32_t y = (mt_[a] & kUpper) | (mt_[a + 1 == kN ? 0 : a + 1] & kLower);
      mt_[a] = mt_[b] ^ (y >> 1) ^ ((y & 1U) ? kMatrixA : 0U);
    };
    for (; k < kN - kM; ++k) twist(k, k + kM);
    for (; k < kN; ++k) twist(k, k + kM - kN);
    index_ = 0;
  }
  std::uint32_t y = mt_[index_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= y >> 18;
  return y;
}

std::uint64_t PythonRandom::getrandbits(int k) {
  if (k < 0 || k > 64) throw std::invalid_argument("getrandbits: k outside [0, 64]");
  if (k == 0) return 0;
  if (k <= 32) return next32() >> (32 - k);
  const std::uint64_t low = next32();
  const std::uint64_t high = next32() >> (64 - k);
  return low | (high << 32);
}

long PythonRandom::randbelow(long n) {
  const int k = 64 - __builtin_clzll((unsigned long long)n);  // n.bit_length()
  std::uint64_t r = getrandbits(k);
  while (r >= (std::uint64_t)n) r = getrandbits(k);
  return (long)r;
}

double PythonRandom::random() {
  const std::uint32_t a = next32() >> 5, b = next32() >> 6;
  return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

std::vector<long> PythonRandom::sample(long n, long k) {
  if (k < 0 || k > n) throw std::invalid_argument("sample larger than population");
  std::vector<long> result(k);
  long setsize = 21;
  if (k > 5) setsize += (long)std::pow(4.0, std::ceil(std::log((double)k * 3) / std::log(4.0)));
  if (n <= setsize) {
    std::vector<long> pool(n);
    for (long i = 0; i < n; ++i) pool[i] = i;
    for (long i = 0; i < k; ++i) {
      const long j = randbelow(n - i);
      result[i] = pool[j];
      pool[j] = pool[n - i - 1];
    }
  } else {
    std::unordered_set<long> selected;
    for (long i = 0; i < k; ++i) {
      long j = randbelow(n);
      while (selected.count(j)) j = randbelow(n);
      selected.insert(j);
      result[i] = j;
    }
  }
  return result;
}

}  // namespace trident::evaluation
