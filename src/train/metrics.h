#pragma once
// The per-interval log line (Megatron's format plus tokens/s, MFU, elapsed time and ETA) and the
// same numbers as one JSON object per line in --metrics-file.
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace trident::train {

// One MoE layer over a log interval, per iteration.
struct MoeLayerLog {
  int layer = 0;
  double load_balancing_loss = NAN, z_loss = NAN;  // without coefficients; NaN: not computed
  std::vector<double> tokens_per_expert;           // [E]
  double min_tokens() const;
  double max_tokens() const;
  // The fewest and most tokens an expert got over what an even routing gives each.
  double min_load() const;
  double max_load() const;
};

struct IterationStats {
  long iteration = 0;
  long train_iters = 0;
  long consumed_samples = 0;
  double ms_per_iter = 0;
  double lr = 0;
  int global_batch = 0;
  double loss = 0;
  double grad_norm = 0;
  double tokens_per_s = 0;
  double tflops = 0;
  double mfu = 0;
  double loss_scale = 0;        // fp16 only (0: not shown)
  long skipped_iterations = 0;  // fp16: since training began (restored on resume)
  // The iterations this line covers and those of them skipped (fp16 overflow).
  int interval_iterations = 0, interval_skipped = 0;
  // Since the run started, and the time left at the recent iterations' pace (< 0: not shown).
  double elapsed_s = -1, eta_s = -1;
  // MoE (Megatron's names): the load-balancing loss and the z-loss without their
  // coefficients, the mean over the MoE layers; NaN: not logged (no MoE, or coefficient 0).
  double load_balancing_loss = NAN, z_loss = NAN;
  // Per MoE layer: the experts' load (tokens per expert per iteration), always; its losses
  // in the metrics file and TensorBoard with --moe-per-layer-logging (Megatron's flag).
  std::vector<MoeLayerLog> moe_layers;
  bool moe_per_layer_logging = false;
};

struct ValidationStats {
  long iteration = 0;
  long consumed_samples = 0;
  double loss = 0;
  long tokens = 0;
};

std::string format_log_line(const IterationStats& s);
std::string format_validation_line(const ValidationStats& v);
// The end-of-run test loss, in the validation line's format (Megatron's %E).
std::string format_test_line(double loss);

class MetricsWriter {
 public:
  // Empty path: writes nothing. append: a resumed run adds to the file, so the history
  // survives; iterations re-run after a crash appear twice, and a reader takes the last line
  // written for an iteration.
  explicit MetricsWriter(const std::string& path, bool append = false);
  void write(const IterationStats& s);
  void write(const ValidationStats& v);
  void write_json(const nlohmann::ordered_json& j);

 private:
  std::optional<std::ofstream> out_;
};

}  // namespace trident::train
