// The GGUF writer's bytes against gguf.md's layout, spelled out here byte by byte.
#include <gtest/gtest.h>

#include "deploy/gguf_file.h"

namespace trident::deploy {
namespace {

template <typename T>
std::string le(T v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof v);
}
std::string str(const std::string& s) {
  return le<std::uint64_t>(s.size()) + s;
}

TEST(GgufFile, HeaderIsGgufV3WithTypedMetadataAndAlignedTensorInfos) {
  GgufWriter w;
  w.set("general.architecture", "llama");  // a literal: a STRING, not a BOOL
  w.set("llama.block_count", (std::uint32_t)2);
  w.set("a.f", 0.5f);
  w.set("a.b", true);
  w.set("a.ids", std::vector<std::int32_t>{1, -3});
  w.add_tensor({"t0", {3, 2}, GgmlType::kF32, [] { return std::string(24, '\0'); }});
  w.add_tensor({"t1", {64}, GgmlType::kQ8_0, [] { return std::string(68, '\0'); }});
  std::string want = "GGUF" + le<std::uint32_t>(3) + le<std::uint64_t>(2) + le<std::uint64_t>(5);
  want += str("general.architecture") + le<std::uint32_t>(8) + str("llama");
  want += str("llama.block_count") + le<std::uint32_t>(4) + le<std::uint32_t>(2);
  want += str("a.f") + le<std::uint32_t>(6) + le(0.5f);
  want += str("a.b") + le<std::uint32_t>(7) + std::string(1, '\1');
  want += str("a.ids") + le<std::uint32_t>(9) + le<std::uint32_t>(5) + le<std::uint64_t>(2) +
          le<std::int32_t>(1) + le<std::int32_t>(-3);
  // Dimensions innermost first; t1 starts at 32, the first multiple of 32 after t0's 24 bytes.
  want += str("t0") + le<std::uint32_t>(2) + le<std::uint64_t>(2) + le<std::uint64_t>(3) +
          le<std::uint32_t>(0) + le<std::uint64_t>(0);
  want += str("t1") + le<std::uint32_t>(1) + le<std::uint64_t>(64) + le<std::uint32_t>(8) +
          le<std::uint64_t>(32);
  want.resize((want.size() + 31) / 32 * 32, '\0');
  EXPECT_EQ(w.header(), want);
  w.set("llama.block_count", (std::uint32_t)4);  // replaced in place, not added
  EXPECT_EQ(w.header().size(), want.size());
}

}  // namespace
}  // namespace trident::deploy
