#pragma once
// The counter-based normal draw of core/random.h for a run of consecutive indices, eight
// at a time on AVX-512: dst[k] = (float)(sigma * normal_at(seed, stream, first + k)), bit
// for bit. The vector log and cos are our own (a few ulp of glibc's); an element whose
// double result lies too close to a float rounding boundary for that error to be
// harmless is recomputed by the scalar normal_at, so every float equals the scalar one.
#include <cstdint>

namespace trident {

void normal_fill(float* dst, long n, double sigma, std::uint64_t seed, std::uint64_t stream,
                 std::uint64_t first);

// Elements normal_fill recomputed with the scalar path in this thread so far (tests).
long normal_fill_fallbacks();

}  // namespace trident
