#pragma once
// What a run prints about itself before its first step: the layout (parallel sizes, model
// shape, batch, schedule of the learning rate), the process grid, this rank's model (its
// pipeline schedule, memory plan, buckets and optimizer state), and the arithmetic peak
// that MFU is measured against.
#include <functional>
#include <ostream>

#include "engine/rank_context.h"
#include "engine/rank_model.h"
#include "train/training_config.h"

namespace trident::train {

// The parallel layout, the model and batch shape and the LR schedule, then the grid.
void print_run_layout(const TrainingConfig& c, const engine::RankContext& rank, std::ostream& log);

// This rank's share of the model: schedule, memory plans, buckets, optimizer state.
void print_rank_model(const TrainingConfig& c, const engine::RankModel& model,
                      int data_parallel_size, std::ostream& log);

// This rank's share of the machine's arithmetic peak for the run's precision, in TFLOP/s
// (--peak-tflops overrides it; otherwise measured over `trials` windows and printed).
double peak_tflops_of_rank(const TrainingConfig& c, const engine::RankContext& rank,
                           std::ostream& log, int trials = 3);

// The peak after a log interval that ran at `observed` TFLOP/s. No product outruns the
// multiply-add loop, so a rate above the peak proves its measurement low: every trial in a
// busy window of a shared core (on a Zen 3 VM a bf16 peak came out at half, and the log's MFU
// at 1.2-1.4). Then `measure` runs and the higher of the two peaks is kept; otherwise `peak`
// stands and nothing is measured.
double recheck_peak_tflops(double peak, double observed, const std::function<double()>& measure);

}  // namespace trident::train
