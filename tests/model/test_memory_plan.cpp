// The printed memory plan: each group once with all its buffers, whatever order they were
// planned in (a bf16 run adds its weight copy to "parameters" after the scratch buffers),
// sizes worked by hand (floats x 4 bytes).
#include <gtest/gtest.h>

#include <sstream>

#include "model/memory_plan.h"

using trident::MemoryPlan;

namespace {

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST(MemoryPlan, PrintsEachGroupOnceWithAllItsBuffers) {
  MemoryPlan plan;
  plan.add("parameters", "weights", 1024 * 1024);          // 4 MiB
  plan.add("scratch", "bf16 GEMM operands", 256 * 1024);   // 1 MiB
  plan.add("parameters", "bf16 weight copy", 512 * 1024);  // 2 MiB
  std::ostringstream out;
  plan.print(out);
  const std::string text = out.str();
  EXPECT_EQ(count(text, "  parameters ("), 1) << text;
  EXPECT_EQ(count(text, "  scratch ("), 1) << text;
  EXPECT_NE(text.find("  parameters (6.0 MiB)"), std::string::npos) << text;
  EXPECT_NE(text.find("  total 7.0 MiB"), std::string::npos) << text;
  // The group's buffers follow its heading, before the next group's.
  EXPECT_LT(text.find("bf16 weight copy"), text.find("  scratch (")) << text;
  // Sizes are 4-byte words of any precision: the heading names none.
  EXPECT_EQ(text.find("fp32"), std::string::npos) << text;
  EXPECT_EQ(text.rfind("memory plan (this rank):", 0), 0u) << text;
}
