#include "cli/schedule_command.h"

#include <cstdio>
#include <iostream>

#include "cli/parse_args.h"
#include "core/files.h"
#include "pipeline_parallel/simulator.h"
#include "pipeline_parallel/timeline.h"

namespace trident::cli {

int schedule_main(const std::vector<std::string>& args) {
  namespace pp = pipeline_parallel;
  CLI::App app("trident schedule: print, simulate and draw a pipeline schedule",
               "trident schedule");
  pp::ScheduleConfig c;
  std::string kind, svg, timeline;
  double forward = 1.0, backward = 2.0, weight = -1.0;
  app.add_option("--pipeline-model-parallel-size", c.stages, "p")->required();
  app.add_option("--virtual-stages", c.chunks, "v, model chunks per rank")->capture_default_str();
  app.add_option("--micro-batches", c.microbatches, "m")->required();
  app.add_option("--schedule", kind,
                 "gpipe, 1f1b, interleaved or zb-h1 (default: interleaved when v > 1)");
  app.add_option("--forward-time", forward, "time of one micro-batch's forward through a stage")
      ->capture_default_str();
  app.add_option("--backward-time", backward, "the same for backward (B and W together)")
      ->capture_default_str();
  app.add_option("--weight-time", weight,
                 "the weight-gradient part (W) of the backward time (default: half of it)");
  app.add_option("--svg", svg, "draw the schedule as the paper's figures");
  app.add_option("--timeline", timeline, "write the simulated schedule as a Chrome trace");
  int code = 0;
  if (!parse_args(app, args, &code)) return code;
  try {
    c.kind = kind.empty()
                 ? (c.chunks > 1 ? pp::ScheduleKind::kInterleaved : pp::ScheduleKind::kOneFOneB)
                 : pp::parse_schedule_kind(kind);
    std::vector<std::string> errors = pp::validate_schedule(c);
    if (!errors.empty()) {
      std::cerr << "trident schedule: " << errors.size() << " invalid argument"
                << (errors.size() > 1 ? "s" : "") << ":\n";
      for (const std::string& e : errors) std::cerr << "  - " << e << "\n";
      return 2;
    }
    pp::print_schedule(std::cout, c);
    if (weight < 0) weight = backward / 2;
    if (weight > backward) {
      std::cerr << "trident schedule: --weight-time (" << weight
                << ") must not exceed --backward-time (" << backward << ")\n";
      return 2;
    }
    pp::Simulation sim = pp::simulate(c, forward, backward - weight, 0.0, weight);
    if (sim.deadlock) {
      std::cerr << "trident schedule: the schedule deadlocks: " << sim.deadlock_at << "\n";
      return 1;
    }
    std::printf(
        "simulated (forward %.2f, backward %.2f of which W %.2f): makespan %.2f; bubble per rank:",
        forward, backward, weight, sim.makespan);
    for (int s = 0; s < c.stages; ++s) std::printf(" %.3f", sim.bubble_fraction(s));
    std::printf("; analytic %s = %.3f\n",
                c.splits_backward() ? "(p-1)(tf+tb-tw)/(m(tf+tb+tw))" : "(p-1)/(v*m)",
                pp::analytic_bubble_fraction(c, forward, backward - weight, weight));
    if (!svg.empty()) write_file_atomically(svg, pp::render_svg(c, sim));
    if (!timeline.empty()) {
      std::vector<pp::TraceEvent> events;
      for (int s = 0; s < c.stages; ++s)
        for (const pp::TimedOp& t : sim.ranks[s])
          if (t.op.is_compute() || t.end > t.start)
            events.push_back({pp::to_string(t.op),
                              t.op.is_compute() ? pp::op_category(t.op) : "wait", s, t.start * 1000,
                              (t.end - t.start) * 1000});
      pp::write_chrome_trace(timeline, events);
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "trident schedule: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace trident::cli
