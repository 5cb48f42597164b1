#include "core/cpu_set.h"

#include <sched.h>

#include <algorithm>
#include <bitset>
#include <fstream>
#include <set>
#include <string>
#include <thread>

namespace trident {

namespace {
constexpr int kBits = 64;
bool has(const CpuMask& m, int cpu) {
  return (m[cpu / kBits] >> (cpu % kBits)) & 1;
}
}  // namespace

CpuMask allowed_cpus() {
  CpuMask out{};
  cpu_set_t mask;
  const bool known = sched_getaffinity(0, sizeof mask, &mask) == 0;
  const int online = (int)std::max(1u, std::thread::hardware_concurrency());
  for (int cpu = 0; cpu < (int)out.size() * kBits; ++cpu)
    if (known ? CPU_ISSET(cpu, &mask) : cpu < online)
      out[cpu / kBits] |= std::uint64_t{1} << (cpu % kBits);
  return out;
}

int cpu_count(const CpuMask& cpus) {
  int n = 0;
  for (std::uint64_t word : cpus) n += (int)std::bitset<kBits>(word).count();
  return n;
}

int physical_cores(const CpuMask& cpus) {
  std::set<std::string> cores;
  for (int cpu = 0; cpu < (int)cpus.size() * kBits; ++cpu) {
    if (!has(cpus, cpu)) continue;
    std::ifstream in("/sys/devices/system/cpu/cpu" + std::to_string(cpu) +
                     "/topology/thread_siblings_list");
    std::string siblings;
    if (!(in >> siblings)) siblings = std::to_string(cpu);
    cores.insert(siblings);
  }
  return std::max<int>(1, (int)cores.size());
}

int physical_cores() {
  return physical_cores(allowed_cpus());
}

CpuMask& operator|=(CpuMask& a, const CpuMask& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] |= b[i];
  return a;
}

}  // namespace trident
