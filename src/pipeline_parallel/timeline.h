#pragma once
// Chrome-trace timelines (chrome://tracing, Perfetto): one track per rank.
#include <string>
#include <vector>

#include "comm/communicator.h"

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

// The bubble of one step per pipeline stage — idle over compute time, the step being the
// longest any stage takes from the step's start to its last compute — from this rank's
// events, gathered over the pipeline group (every rank gets every stage's value).
std::vector<double> pipeline_bubble(const std::vector<TraceEvent>& step_events,
                                    comm::Communicator& pipeline);

}  // namespace trident::pipeline_parallel
