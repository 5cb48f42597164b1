#pragma once
// Chrome-trace timelines (chrome://tracing, Perfetto): one track per rank.
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "pipeline_parallel/schedules.h"

namespace trident::pipeline_parallel {

struct TraceEvent {
  std::string name;
  std::string category;  // forward, backward, send, recv, wait, optimizer, ...
  int rank = 0;
  double start_us = 0;
  double duration_us = 0;
  double cpu_us = 0;  // the op's thread CPU time: what it takes when its rank has a core
  int chunk = 0;      // the model chunk of a forward, backward or weight op
};

// Written to path.tmp and renamed. Each event's args hold its cpu_us (the calling thread's
// CPU time: below the duration when the rank lost its core, the op's real cost).
void write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events);

// The complete ("X") events of a Chrome trace as write_chrome_trace writes it (tid is the
// rank; a compute op's chunk is read back from its name, "F 3.1" being micro-batch 3 on
// chunk 1). FormatError naming the file when it is not such a trace.
std::vector<TraceEvent> read_chrome_trace(const std::string& path);

// Measured events drawn as `trident schedule --svg` draws a simulated schedule: one row per
// rank, time in milliseconds from the earliest event (each rank's clock set so that the
// ranks' first optimizer ops begin together: their clocks share no origin), compute ops coloured by
// kind and chunk and numbered by micro-batch, communication grey, the optimizer purple; every event
// is one box with its name, rank and duration as hover text.
// width_px: the time axis' length in pixels (the whole run: a scroll, not a page per step).
// rank_names: each rank's row name, by rank (distributed::ProcessGrid::rank_labels, its grid
// coordinates); "rank R" for a rank it does not name.
std::string render_timeline_svg(const std::vector<TraceEvent>& events, double width_px = 4000,
                                const std::vector<std::string>& rank_names = {});

// The bubble of one step per pipeline stage — idle over compute time, the step being the
// longest any stage takes from the step's start to its last compute — from this rank's
// events, gathered over the pipeline group (every rank gets every stage's value). Stages
// with less work idle longer whatever the schedule; the busiest stage's idle is the
// pipeline's bubble (its time is the step's).
struct StageBubbles {
  std::vector<double> per_stage;
  int busiest = 0;
  double pipeline() const { return per_stage.empty() ? 0.0 : per_stage[busiest]; }
};
StageBubbles pipeline_bubble(const std::vector<TraceEvent>& step_events,
                             comm::Communicator& pipeline);

// The same step replayed on the schedule simulator with each stage's mean op CPU times
// (per chunk, F, B and W), gathered over the group: the bubble the schedule would have if
// every rank had its own core. Where ranks outnumber cores (p = 4 on 2 cores) the wall
// clock measures the sharing, not the schedule; this measures the schedule at real op times.
StageBubbles replayed_bubble(const std::vector<TraceEvent>& step_events,
                             const ScheduleConfig& schedule, comm::Communicator& pipeline);

}  // namespace trident::pipeline_parallel
