#pragma once
// Chrome-trace timelines (chrome://tracing, Perfetto): one track per rank.
#include <string>
#include <vector>

namespace trident::pipeline_parallel {

struct TraceEvent {
  std::string name;
  std::string category;  // forward, backward, send, recv, wait, optimizer, ...
  int rank = 0;
  double start_us = 0;
  double duration_us = 0;
};

// Written to path.tmp and renamed.
void write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events);

// Per rank: idle time / busy time, where busy is the time in `busy_categories`.
std::vector<double> measured_bubble(const std::vector<TraceEvent>& events, int ranks,
                                    const std::vector<std::string>& busy_categories);

}  // namespace trident::pipeline_parallel
