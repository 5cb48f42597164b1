#pragma once
// Every buffer a rank will hold, sized before step 1 and carved from one arena
// (llm.c style), so the plan printed at start is the memory the run actually uses.
#include <iosfwd>
#include <string>
#include <vector>

#include "core/first_touch.h"

namespace trident {

struct PlannedBuffer {
  std::string group;  // "parameters", "optimizer", "activations", "scratch"
  std::string name;
  long floats = 0;  // per copy
  int copies = 1;   // e.g. one per layer
  long total_floats() const { return floats * copies; }
};

class MemoryPlan {
 public:
  void add(std::string group, std::string name, long floats, int copies = 1);
  // Changes a planned buffer's size (e.g. optimizer state once it is sharded).
  void resize(const std::string& name, long floats);
  const std::vector<PlannedBuffer>& buffers() const { return buffers_; }
  long total_bytes() const;
  long group_bytes(const std::string& group) const;
  // Sizes are in 4-byte words whatever the precision, so the title names none.
  void print(std::ostream& os, const std::string& title = "memory plan (this rank)") const;

 private:
  std::vector<PlannedBuffer> buffers_;
};

// Hands out consecutive slices of one allocation, each on its own cache line.
class Arena {
 public:
  explicit Arena(long floats);
  float* take(long floats);
  long used() const { return used_; }
  long size() const { return (long)storage_.size(); }
  const float* data() const { return storage_.data(); }
  // The floats a slice of `floats` takes.
  static long slice_floats(long floats) { return (floats + 15) / 16 * 16; }

 private:
  FirstTouchVector<float> storage_;
  long used_ = 0;
};

std::string format_bytes(double bytes);

}  // namespace trident
