#include "core/node_memory.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace trident {

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A cgroup file holding one number ("max": no limit); -1 when absent or unlimited.
long read_number(const std::string& path) {
  std::istringstream in(read_text(path));
  long value = -1;
  if (!(in >> value)) return -1;
  return value;
}

// `key value` lines of a cgroup's memory.stat; 0 when absent.
long stat_value(const std::string& stat, const std::string& key) {
  std::istringstream in(stat);
  std::string name;
  long value = 0;
  while (in >> name >> value)
    if (name == key) return value;
  return 0;
}

// This process's cgroup v2 directory ("0::/path" in /proc/self/cgroup), or the
// namespace's root when the path cannot be read.
std::string cgroup_v2_dir(const std::string& root) {
  std::istringstream in(read_text(root + "/proc/self/cgroup"));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) {
      const std::string dir = root + "/sys/fs/cgroup" + line.substr(3);
      if (!read_text(dir + "/memory.max").empty()) return dir;
    }
  return root + "/sys/fs/cgroup";
}

// What the cgroup's limit leaves: the limit less what is charged and cannot be dropped
// (page cache that is inactive can be reclaimed, as `docker stats` counts it); -1: no limit.
long cgroup_available(const std::string& limit_file, const std::string& usage_file,
                      const std::string& stat_file, const std::string& inactive_key) {
  const long limit = read_number(limit_file);
  const long usage = read_number(usage_file);
  // cgroup v1 reports "no limit" as a huge number rather than "max".
  if (limit < 0 || usage < 0 || limit >= (1L << 60)) return -1;
  const long held = usage - stat_value(read_text(stat_file), inactive_key);
  return limit - std::max(0L, held);
}

}  // namespace

long meminfo_bytes(const std::string& meminfo, const std::string& key) {
  std::istringstream in(meminfo);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream value(line.substr(key.size() + 1));
      long kb = -1;
      if (value >> kb) return kb * 1024;
    }
  return -1;
}

NodeMemory node_available_memory(const std::string& root) {
  NodeMemory out;
  out.available_bytes = meminfo_bytes(read_text(root + "/proc/meminfo"), "MemAvailable");
  out.source = "MemAvailable";
  const std::string v2 = cgroup_v2_dir(root);
  const std::string v1 = root + "/sys/fs/cgroup/memory";
  struct Limit {
    std::string limit, usage, stat, inactive;
  };
  for (const Limit& l :
       {Limit{v2 + "/memory.max", v2 + "/memory.current", v2 + "/memory.stat", "inactive_file"},
        Limit{v1 + "/memory.limit_in_bytes", v1 + "/memory.usage_in_bytes", v1 + "/memory.stat",
              "total_inactive_file"}}) {
    const long left = cgroup_available(l.limit, l.usage, l.stat, l.inactive);
    if (left >= 0 && (out.available_bytes < 0 || left < out.available_bytes)) {
      out.available_bytes = left;
      out.source = l.limit.substr(root.size());
    }
  }
  return out;
}

}  // namespace trident
