// FirstTouchVector's allocation path, checked against the kernel's own accounts: a large
// block starts on a 2 MiB boundary, reads as zero, is resident before anything uses it
// (mincore), and is backed by huge pages (/proc/self/smaps' AnonHugePages) unless the
// process turned them off (--no-huge-pages) or the machine has THP off.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/first_touch.h"

using trident::FirstTouchVector;
using trident::kHugePageBytes;

namespace {

// The machine's THP mode: "always", "madvise" or "never".
std::string thp_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);
  const size_t open = line.find('['), close = line.find(']');
  return open == std::string::npos ? "never" : line.substr(open + 1, close - open - 1);
}

// AnonHugePages (kB) of the mapping that holds `address`, from /proc/self/smaps.
long anon_huge_kb(const void* address) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  const std::uintptr_t a = (std::uintptr_t)address;
  while (std::getline(in, line)) {
    std::uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= a && a < end;
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) return std::stol(line.substr(14));
  }
  return -1;
}

double resident_fraction(const void* data, size_t bytes) {
  const long page = ::sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> resident((bytes + page - 1) / page);
  ::mincore(const_cast<void*>(data), bytes, resident.data());
  double count = 0;
  for (unsigned char r : resident) count += r & 1;
  return count / (double)resident.size();
}

bool all_zero(const FirstTouchVector<float>& v) {
  for (float x : v)
    if (x != 0.f) return false;
  return true;
}

}  // namespace

TEST(FirstTouch, ALargeBlockIsAlignedZeroAndResidentBeforeUse) {
  const size_t n = (24u << 20) / sizeof(float) + 3;  // not a whole number of huge pages
  FirstTouchVector<float> v(n);
  EXPECT_EQ((std::uintptr_t)v.data() % kHugePageBytes, 0u);
  EXPECT_GT(resident_fraction(v.data(), n * sizeof(float)), 0.99);
  EXPECT_TRUE(all_zero(v));
  v.back() = 1.f;  // the rounded-up tail is mapped too
  EXPECT_EQ(v.back(), 1.f);
}

TEST(FirstTouch, ALargeBlockGetsHugePagesWhereTheMachineGivesThem) {
  if (thp_mode() == "never") GTEST_SKIP() << "transparent huge pages are off on this machine";
  FirstTouchVector<float> v((64u << 20) / sizeof(float));
  // The kernel may be short of free 2 MiB blocks; most of 64 MiB still comes in huge pages.
  EXPECT_GE(anon_huge_kb(v.data()), 32 * 1024);
}

TEST(FirstTouch, NoHugePagesAfterTheProcessTurnsThemOff) {
  trident::disable_huge_pages();
  FirstTouchVector<float> v((64u << 20) / sizeof(float));
  const long huge = anon_huge_kb(v.data());
  ::prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);  // the other tests run in this process
  EXPECT_EQ(huge, 0);
  EXPECT_EQ((std::uintptr_t)v.data() % kHugePageBytes, 0u);
  EXPECT_GT(resident_fraction(v.data(), v.size() * sizeof(float)), 0.99);
  EXPECT_TRUE(all_zero(v));
}

TEST(FirstTouch, SmallBlocksAndGrowthKeepZerosAndValues) {
  FirstTouchVector<float> v(1000);
  EXPECT_TRUE(all_zero(v));
  for (size_t i = 0; i < v.size(); ++i) v[i] = (float)i;
  v.resize((8u << 20) / sizeof(float));  // moves into a large block: values kept, rest zero
  for (size_t i = 0; i < 1000; ++i) ASSERT_EQ(v[i], (float)i);
  for (size_t i = 1000; i < v.size(); ++i) ASSERT_EQ(v[i], 0.f);
  trident::assign_parallel(v, 3000000, 2.5f);
  for (float x : v) ASSERT_EQ(x, 2.5f);
}

// Sharded gradients' buffer: nothing resident until written; release_pages gives the whole
// 2 MiB blocks of a range back (the kernel's mincore says so), zeroes its ragged edges, and
// leaves what lies outside the range alone.
TEST(FirstTouch, AnUntouchedBlockIsResidentOnlyWhereWrittenAndReleasesWholeBlocks) {
  const size_t floats = (16u << 20) / sizeof(float);
  FirstTouchVector<float> v{trident::ZeroedAllocator<float>(false)};
  v.resize(floats);
  ASSERT_EQ((std::uintptr_t)v.data() % kHugePageBytes, 0u);
  EXPECT_LT(resident_fraction(v.data(), floats * sizeof(float)), 0.01);
  for (float& x : v) x = 1.f;
  EXPECT_GT(resident_fraction(v.data(), floats * sizeof(float)), 0.99);
  const size_t mib = (1u << 20) / sizeof(float);
  // [3 MiB, 13 MiB): blocks [4, 12) MiB go back; [3, 4) and [12, 13) are zeroed in place.
  trident::release_pages(v.data() + 3 * mib, 10 * mib * sizeof(float));
  EXPECT_LT(resident_fraction(v.data() + 4 * mib, 8 * mib * sizeof(float)), 0.01);
  EXPECT_GT(resident_fraction(v.data() + 3 * mib, mib * sizeof(float)), 0.99);
  EXPECT_GT(resident_fraction(v.data() + 12 * mib, mib * sizeof(float)), 0.99);
  for (size_t i = 0; i < floats; ++i) {
    const bool released = i >= 3 * mib && i < 13 * mib;
    ASSERT_EQ(v[i], released ? 0.f : 1.f) << i;
  }
}
