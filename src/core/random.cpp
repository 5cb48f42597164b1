#include "core/random.h"

#include <cmath>

namespace trident {

std::uint64_t mix64(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t hash_string(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

double uniform_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  std::uint64_t x = mix64(mix64(seed ^ mix64(stream)) + index);
  return (double)(x >> 11) * 0x1.0p-53;
}

double normal_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  double u1 = uniform_at(seed, stream, 2 * index), u2 = uniform_at(seed, stream, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * M_PI * u2);
}

}  // namespace trident
