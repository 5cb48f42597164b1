#include "model/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <ostream>
#include <stdexcept>

namespace trident {

void MemoryPlan::add(std::string group, std::string name, long floats, int copies) {
  buffers_.push_back({std::move(group), std::move(name), floats, copies});
}

void MemoryPlan::resize(const std::string& name, long floats) {
  for (PlannedBuffer& b : buffers_)
    if (b.name == name) b.floats = floats;
}

long MemoryPlan::total_bytes() const {
  long total = 0;
  for (const PlannedBuffer& b : buffers_) total += b.total_floats() * 4;
  return total;
}

long MemoryPlan::group_bytes(const std::string& group) const {
  long total = 0;
  for (const PlannedBuffer& b : buffers_)
    if (b.group == group) total += b.total_floats() * 4;
  return total;
}

std::string format_bytes(double bytes) {
  char buf[32];
  if (bytes >= 1 << 30)
    std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1 << 30));
  else if (bytes >= 1 << 20)
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024);
  return buf;
}

void MemoryPlan::print(std::ostream& os, const std::string& title) const {
  os << title << ":\n";
  // Each group once, in the order its first buffer was planned: buffers of one group may be
  // added apart (a bf16 run plans its low-precision copies after the fp32 ones).
  std::vector<std::string> groups;
  for (const PlannedBuffer& b : buffers_)
    if (std::find(groups.begin(), groups.end(), b.group) == groups.end()) groups.push_back(b.group);
  for (const std::string& group : groups) {
    os << "  " << group << " (" << format_bytes(group_bytes(group)) << ")\n";
    for (const PlannedBuffer& b : buffers_) {
      if (b.group != group) continue;
      os << "    " << std::left << std::setw(30) << b.name << std::right << std::setw(14)
         << b.floats << " floats";
      if (b.copies > 1)
        os << " x " << std::setw(3) << b.copies;
      else
        os << "      ";
      os << "  " << format_bytes(b.total_floats() * 4.0) << "\n";
    }
  }
  os << "  total " << format_bytes(total_bytes()) << "\n";
}

Arena::Arena(long floats) {
  assign_parallel(storage_, floats, 0.f);
}

float* Arena::take(long floats) {
  if (used_ + floats > (long)storage_.size())
    throw std::logic_error("activation arena exhausted: the memory plan is wrong");
  float* p = storage_.data() + used_;
  used_ += slice_floats(floats);
  return p;
}

}  // namespace trident
