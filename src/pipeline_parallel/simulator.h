#pragma once
// Runs every rank's schedule together on a virtual clock: compute takes fixed times,
// a receive waits for its matching send. It proves a set of schedules deadlock-free,
// measures their bubble, and gives the times the SVG drawing and the planner use.
#include <string>
#include <vector>

#include "pipeline_parallel/schedules.h"

namespace trident::pipeline_parallel {

struct TimedOp {
  PipelineOp op;
  double start = 0, end = 0;
};

struct Simulation {
  std::vector<std::vector<TimedOp>> ranks;
  bool deadlock = false;
  std::string deadlock_at;  // the first stuck operation of each rank
  double makespan = 0;
  std::vector<double> busy;                                     // compute time per rank
  double forward_time = 0, backward_time = 0, weight_time = 0;  // as simulate() was given

  // Idle time over compute time on one rank: the paper's bubble fraction t_pb / t_id.
  double bubble_fraction(int rank) const;
};

// The time of each compute op of one micro-batch, per rank and model chunk ([rank][chunk]):
// ranks need not be alike (the first also runs the embedding, the last the output layer and
// the loss). backward is the whole backward op, or B alone when the schedule splits it into
// B and W; comm is the latency of one message.
struct OpTimes {
  std::vector<std::vector<double>> forward, backward, weight;
  double comm = 0;
};

// forward_time / backward_time / weight_time are one micro-batch through a whole stage
// (all its chunks); a chunk takes 1/v of it. backward_time is the input gradient (B) and
// weight_time the weight gradient (W): a schedule without W ops runs both in its backward.
// comm_time is the latency of one message.
Simulation simulate(const ScheduleConfig& c, double forward_time, double backward_time,
                    double comm_time = 0.0, double weight_time = 0.0);
Simulation simulate(const ScheduleConfig& c, const OpTimes& times);

// (p - 1) / m for GPipe and 1F1B, (p - 1) / (v m) interleaved, whatever the times.
// ZB-H1 (Qi et al. 2023): idle (p - 1)(tf + tb - tw) per rank over m (tf + tb + tw) of
// compute, for tw <= tf (W fills the cool-down's waits); the one-argument form takes
// tf = tb = tw, (p - 1) / (3 m).
double analytic_bubble_fraction(const ScheduleConfig& c);
double analytic_bubble_fraction(const ScheduleConfig& c, double forward_time, double backward_time,
                                double weight_time);

// The schedule drawn as the paper's figures: one row per rank, boxes labelled with the
// micro-batch (forward blue, backward orange, W green, chunks shaded), idle gaps white.
std::string render_svg(const ScheduleConfig& c, const Simulation& sim);

// One box of a drawing: a row (rank), its extent in the drawing's time unit, the timeline
// category (forward, backward, weight, send, recv, wait, optimizer, ...) and model chunk
// that pick its colour, the number printed in it ("" for none) and its hover text.
struct DrawnBox {
  int row = 0;
  double start = 0, end = 0;
  std::string category;
  int chunk = 0;
  std::string label, tooltip;
};

// Rows of boxes on a time axis, the one drawing both the simulated schedule (render_svg)
// and a measured timeline (render_timeline_svg) use: unit is pixels per time unit. Every
// box is a <rect class="op">, so a reader can count them.
struct BoxDrawing {
  std::string title, legend;
  std::vector<std::string> row_names;
  double unit = 36.0, span = 0;  // span: the time axis' length
  std::vector<DrawnBox> boxes;
};
std::string draw_boxes_svg(const BoxDrawing& d);

// Text (names, labels, hover text the run chose) made safe inside SVG or HTML markup.
std::string escape_xml(const std::string& text);

}  // namespace trident::pipeline_parallel
