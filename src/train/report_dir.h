#pragma once
// --report-dir DIR: where a run writes what `trident report` reads, decided with the flags
// (a parser-level rule, apart from the page it writes at the end: train/run_pictures.h).
#include "train/training_config.h"

namespace trident::train {

// DIR/metrics.jsonl, DIR/timeline.json and DIR/timeline.svg for the paths not given
// explicitly.
void apply_report_dir(TrainingConfig& c);

}  // namespace trident::train
