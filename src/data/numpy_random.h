#pragma once
// numpy.random.RandomState's legacy MT19937 stream and its shuffle, bit for bit, so that
// document and shuffle indices match Megatron's (which draws them with numpy) for a seed.
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace trident::data {

class NumpyRandomState {
 public:
  explicit NumpyRandomState(std::uint32_t seed) : mt_(seed) {}  // init_genrand(seed)
  std::uint32_t next_uint32() { return (std::uint32_t)mt_(); }
  std::uint64_t next_uint64() {
    std::uint64_t hi = next_uint32();
    return (hi << 32) | next_uint32();
  }
  // Uniform in [0, max] by masked rejection (numpy's random_interval).
  std::uint64_t random_interval(std::uint64_t max) {
    if (max == 0) return 0;
    std::uint64_t mask = max;
    for (int s = 1; s <= 32; s <<= 1) mask |= mask >> s;
    std::uint64_t value;
    if (max <= 0xffffffffULL) {
      while ((value = (next_uint32() & mask)) > max) {
      }
    } else {
      while ((value = (next_uint64() & mask)) > max) {
      }
    }
    return value;
  }
  // RandomState.shuffle on a 1-d array: Fisher-Yates from the end.
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i-- > 1;) std::swap(v[i], v[random_interval(i)]);
  }

 private:
  std::mt19937 mt_;
};

}  // namespace trident::data
