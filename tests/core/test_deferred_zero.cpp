// DeferredZero: pending spans read as zeros whatever the buffer held, a whole-span claim is
// granted once per mark, and anything short of a whole span fills what it touches.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "core/deferred_zero.h"

namespace trident {
namespace {

constexpr float kStale = 7.f;  // last step's gradient, which no reader may see

TEST(DeferredZero, AWholeSpanIsClaimedOncePerMark) {
  std::vector<float> buffer(40, kStale);
  DeferredZero z;
  z.add_span(buffer.data() + 20, 10);
  z.add_span(buffer.data() + 4, 8);
  EXPECT_FALSE(z.claim(buffer.data() + 4, 8));  // nothing pending before the first mark
  z.mark_pending();
  EXPECT_TRUE(z.any_pending());
  EXPECT_TRUE(z.claim(buffer.data() + 20, 10));
  EXPECT_FALSE(z.claim(buffer.data() + 20, 10));  // the second product adds
  EXPECT_EQ(buffer[20], kStale);                  // a claim writes nothing: the claimer does
  EXPECT_TRUE(z.any_pending());
  z.materialize_all();
  for (int i = 4; i < 12; ++i) EXPECT_EQ(buffer[i], 0.f) << i;
  EXPECT_EQ(buffer[3], kStale);
  EXPECT_EQ(buffer[12], kStale);
  EXPECT_EQ(buffer[25], kStale);  // claimed: left to its writer
  EXPECT_FALSE(z.any_pending());
}

TEST(DeferredZero, APartialClaimFillsEverySpanItTouches) {
  std::vector<float> buffer(30, kStale);
  DeferredZero z;
  z.add_span(buffer.data(), 10);
  z.add_span(buffer.data() + 10, 10);
  z.add_span(buffer.data() + 20, 10);
  z.mark_pending();
  // q and kv as one product over two spans: neither is whole, so both read as zeros first.
  EXPECT_FALSE(z.claim(buffer.data() + 5, 10));
  for (int i = 0; i < 20; ++i) EXPECT_EQ(buffer[i], 0.f) << i;
  EXPECT_EQ(buffer[20], kStale);
  EXPECT_FALSE(z.claim(buffer.data(), 10));  // filled already: add to zeros
  EXPECT_TRUE(z.claim(buffer.data() + 20, 10));
  EXPECT_FALSE(z.any_pending());
}

TEST(DeferredZero, MaterializeFillsOnlyTheRangeAsked) {
  std::vector<float> buffer(30, kStale);
  DeferredZero z;
  z.add_span(buffer.data(), 10);
  z.add_span(buffer.data() + 20, 10);
  z.mark_pending();
  z.materialize(buffer.data() + 25, buffer.data() + 26);
  EXPECT_EQ(buffer[0], kStale);
  for (int i = 20; i < 30; ++i) EXPECT_EQ(buffer[i], 0.f) << i;
  EXPECT_TRUE(z.claim(buffer.data(), 10));  // still pending
}

TEST(DeferredZero, OverlappingSpansAreRefused) {
  std::vector<float> buffer(30);
  DeferredZero z;
  z.add_span(buffer.data() + 10, 10);
  EXPECT_THROW(z.add_span(buffer.data() + 15, 10), std::logic_error);
  EXPECT_THROW(z.add_span(buffer.data() + 5, 6), std::logic_error);
  z.add_span(buffer.data() + 20, 5);  // adjacent is fine
  z.mark_pending();
  EXPECT_THROW(z.add_span(buffer.data(), 5), std::logic_error);
}

}  // namespace
}  // namespace trident
