#pragma once
// The CPUs a process may run on, as a fixed-size bit set that ranks can gather and merge:
// mpirun binds one or two ranks to a core each (`mpirun -np 1` to core 0 alone), so a
// rank's own affinity, not the machine's CPU count, says how many threads it can run, and
// the union over a node's ranks says how many cores they share.
#include <array>
#include <cstdint>

namespace trident {

using CpuMask = std::array<std::uint64_t, 16>;  // CPUs 0-1023

// This process's affinity (every online CPU when it cannot be read); under OpenMP thread
// binding, the union of OpenMP's places.
CpuMask allowed_cpus();
int cpu_count(const CpuMask& cpus);
// SMT siblings share their core's FMA units: each core is counted once.
int physical_cores(const CpuMask& cpus);
// This process's physical cores (its CPU affinity, SMT siblings counted once).
int physical_cores();
CpuMask& operator|=(CpuMask& a, const CpuMask& b);

}  // namespace trident
