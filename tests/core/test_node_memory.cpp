// The node's available memory read from a fake /proc and /sys tree written here: the
// kernel's MemAvailable (kB), lowered by a cgroup v2 or v1 limit less the group's memory
// that cannot be reclaimed, and left alone by an unlimited group.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/node_memory.h"

namespace trident {
namespace {

namespace fs = std::filesystem;

struct FakeRoot {
  fs::path root = fs::temp_directory_path() / ("node_memory_" + std::to_string(::getpid()));
  FakeRoot() {
    fs::remove_all(root);
    write("proc/meminfo",
          "MemTotal:       24684084 kB\nMemFree:         1000 kB\n"
          "MemAvailable:   2000000 kB\nBuffers: 5 kB\n");
  }
  ~FakeRoot() { fs::remove_all(root); }
  void write(const std::string& path, const std::string& text) const {
    fs::create_directories((root / path).parent_path());
    std::ofstream(root / path) << text;
  }
  NodeMemory read() const { return node_available_memory(root.string()); }
};

TEST(NodeMemory, MemAvailableInBytes) {
  const FakeRoot fake;
  const NodeMemory m = fake.read();
  EXPECT_EQ(m.available_bytes, 2000000L * 1024);
  EXPECT_EQ(m.source, "MemAvailable");
  EXPECT_EQ(meminfo_bytes("MemTotal: 7 kB\n", "MemAvailable"), -1);
}

TEST(NodeMemory, ACgroupV2LimitBelowItWins) {
  const FakeRoot fake;
  fake.write("proc/self/cgroup", "0::/job\n");
  // 1 GiB limit, 600 MiB charged of which 100 MiB inactive page cache: 524 MiB left.
  fake.write("sys/fs/cgroup/job/memory.max", "1073741824\n");
  fake.write("sys/fs/cgroup/job/memory.current", "629145600\n");
  fake.write("sys/fs/cgroup/job/memory.stat", "anon 1\ninactive_file 104857600\nactive_file 9\n");
  const NodeMemory m = fake.read();
  EXPECT_EQ(m.available_bytes, 524L << 20);
  EXPECT_EQ(m.source, "/sys/fs/cgroup/job/memory.max");
}

TEST(NodeMemory, AnUnlimitedCgroupLeavesMemAvailable) {
  const FakeRoot fake;
  fake.write("proc/self/cgroup", "0::/\n");
  fake.write("sys/fs/cgroup/memory.max", "max\n");
  fake.write("sys/fs/cgroup/memory.current", "629145600\n");
  // cgroup v1 writes "no limit" as the largest page-aligned long.
  fake.write("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  fake.write("sys/fs/cgroup/memory/memory.usage_in_bytes", "629145600\n");
  EXPECT_EQ(fake.read().available_bytes, 2000000L * 1024);
}

TEST(NodeMemory, ACgroupV1LimitBelowItWins) {
  const FakeRoot fake;
  fake.write("sys/fs/cgroup/memory/memory.limit_in_bytes", "1073741824\n");
  fake.write("sys/fs/cgroup/memory/memory.usage_in_bytes", "536870912\n");
  fake.write("sys/fs/cgroup/memory/memory.stat", "cache 5\ntotal_inactive_file 0\n");
  const NodeMemory m = fake.read();
  EXPECT_EQ(m.available_bytes, 512L << 20);
  EXPECT_EQ(m.source, "/sys/fs/cgroup/memory/memory.limit_in_bytes");
}

}  // namespace
}  // namespace trident
