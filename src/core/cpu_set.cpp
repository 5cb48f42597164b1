#include "core/cpu_set.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <bitset>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace trident {

namespace {
constexpr int kBits = 64;
bool has(const CpuMask& m, int cpu) {
  return (m[cpu / kBits] >> (cpu % kBits)) & 1;
}
void add(CpuMask& m, int cpu) {
  if (cpu >= 0 && cpu < (int)m.size() * kBits) m[cpu / kBits] |= std::uint64_t{1} << (cpu % kBits);
}
// Under OMP_PROC_BIND (or OMP_PLACES), libgomp binds the initial thread to its first place
// as it starts, so this thread's affinity shows that place alone: a run on two cores saw one
// and trained on one thread. The places are built from the affinity the process started
// with (an mpirun binding included), so their union is what it may run on.
bool openmp_places(CpuMask* out) {
  const int places = omp_get_num_places();
  if (omp_get_proc_bind() == omp_proc_bind_false || places <= 0) return false;
  for (int p = 0; p < places; ++p) {
    std::vector<int> ids(omp_get_place_num_procs(p));
    omp_get_place_proc_ids(p, ids.data());
    for (int cpu : ids) add(*out, cpu);
  }
  return true;
}
}  // namespace

CpuMask allowed_cpus() {
  CpuMask out{};
  if (openmp_places(&out)) return out;
  cpu_set_t mask;
  const bool known = sched_getaffinity(0, sizeof mask, &mask) == 0;
  const int online = (int)std::max(1u, std::thread::hardware_concurrency());
  for (int cpu = 0; cpu < (int)out.size() * kBits; ++cpu)
    if (known ? CPU_ISSET(cpu, &mask) : cpu < online) add(out, cpu);
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
