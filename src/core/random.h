#pragma once
// Counter-based random numbers: value i of stream s depends only on (seed, s, i), never on
// how many values were drawn before or by which rank. This is what lets every tensor-
// parallel rank initialise exactly its slice of the one-process model.
#include <cstdint>
#include <string_view>

namespace trident {

std::uint64_t mix64(std::uint64_t x);
std::uint64_t hash_string(std::string_view s);

// Uniform in [0, 1) with 53 random bits.
double uniform_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);
// Standard normal (Box-Muller on two counter draws).
double normal_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);

}  // namespace trident
