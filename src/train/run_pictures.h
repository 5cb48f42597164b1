#pragma once
// What a run leaves for its pictures (trident report, report/page.h): a first metrics row
// with the run's shape and rank 0's memory plan, the measured timeline drawn as SVG
// (--timeline-svg), and with --report-dir everything under one directory, ending with the
// report page itself.
#include <ostream>
#include <vector>

#include "pipeline_parallel/timeline.h"
#include "train/training_config.h"

namespace trident::train {

struct TrainingRun;

// {"run": {seq_length, shape, batch, layout, train_iters}, "memory_plan": [plan, ...]} as a
// metrics row (rank 0's metrics file; nothing elsewhere or without one): the page's tokens
// axis and memory bars.
void write_run_description(TrainingRun& run);

// Rank 0, with every rank's events merged: --timeline-svg's drawing.
// Rows named by the ranks' grid coordinates (rank_names: ProcessGrid::rank_labels).
void write_timeline_svg(const TrainingConfig& c,
                        const std::vector<pipeline_parallel::TraceEvent>& events,
                        const std::vector<std::string>& rank_names, std::ostream& log);

// Rank 0, --report-dir, at the very end: DIR/report.html from the files just written.
void write_report_page(TrainingRun& run);

}  // namespace trident::train
