#pragma once
// How much memory this process can still take on its node: the kernel's estimate of what
// can be allocated without swapping (MemAvailable in /proc/meminfo), or, when the process
// runs in a control group with a lower limit (a container, a Slurm job), what that limit
// leaves (memory.max less the memory charged to the group that cannot be reclaimed).
#include <string>

namespace trident {

struct NodeMemory {
  long available_bytes = -1;  // -1: unknown (no /proc/meminfo)
  std::string source;         // "MemAvailable" or the cgroup file that lowered it
};

// root: prefixed to /proc and /sys paths (tests build a fake tree); "" reads the real ones.
NodeMemory node_available_memory(const std::string& root = "");

// The value of `key` (in kB) in /proc/meminfo's text, in bytes; -1 when absent.
long meminfo_bytes(const std::string& meminfo, const std::string& key);

}  // namespace trident
