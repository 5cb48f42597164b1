#include "train/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/progress.h"

namespace trident::train {

double MoeLayerLog::min_tokens() const {
  return tokens_per_expert.empty()
             ? 0.0
             : *std::min_element(tokens_per_expert.begin(), tokens_per_expert.end());
}

double MoeLayerLog::max_tokens() const {
  return tokens_per_expert.empty()
             ? 0.0
             : *std::max_element(tokens_per_expert.begin(), tokens_per_expert.end());
}

namespace {
double even_share(const std::vector<double>& tokens) {
  double total = 0;
  for (double t : tokens) total += t;
  return tokens.empty() ? 0.0 : total / (double)tokens.size();
}
}  // namespace

double MoeLayerLog::min_load() const {
  const double even = even_share(tokens_per_expert);
  return even > 0 ? min_tokens() / even : 0.0;
}

double MoeLayerLog::max_load() const {
  const double even = even_share(tokens_per_expert);
  return even > 0 ? max_tokens() / even : 0.0;
}

namespace {
// " expert load min/max: 0.62/1.41 |": the least and most loaded expert of any MoE layer,
// over an even share.
std::string expert_load_text(const std::vector<MoeLayerLog>& layers) {
  if (layers.empty()) return "";
  double low = layers[0].min_load(), high = layers[0].max_load();
  for (const MoeLayerLog& l : layers)
    low = std::min(low, l.min_load()), high = std::max(high, l.max_load());
  char buf[96];
  std::snprintf(buf, sizeof buf, " expert load min/max: %.3f/%.3f |", low, high);
  return buf;
}
}  // namespace

std::string format_log_line(const IterationStats& s) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                " iteration %8ld/%8ld | consumed samples: %12ld | elapsed time per iteration "
                "(ms): %.1f | learning rate: %.6E | global batch size: %5d |",
                s.iteration, s.train_iters, s.consumed_samples, s.ms_per_iter, s.lr,
                s.global_batch);
  std::string line = buf;
  // As Megatron, an interval whose every step was skipped (fp16 overflow) has no loss.
  if (!std::isnan(s.loss)) {
    std::snprintf(buf, sizeof buf, " lm loss: %.6E | grad norm: %.3f |", s.loss, s.grad_norm);
    line += buf;
  }
  for (auto [name, value] :
       {std::pair{"load_balancing_loss", s.load_balancing_loss}, std::pair{"z_loss", s.z_loss}})
    if (!std::isnan(value)) {
      std::snprintf(buf, sizeof buf, " %s: %.6E |", name, value);
      line += buf;
    }
  line += expert_load_text(s.moe_layers);
  std::snprintf(buf, sizeof buf, " tokens/s: %.0f | TFLOP/s: %.3f | MFU: %.3f |", s.tokens_per_s,
                s.tflops, s.mfu);
  line += buf;
  if (s.loss_scale > 0) {
    std::snprintf(buf, sizeof buf, " loss scale: %.1f | number of skipped iterations: %3ld |",
                  s.loss_scale, s.skipped_iterations);
    line += buf;
  }
  // Said in words: a line without a loss is easily read as a line that lost its loss.
  if (s.loss_scale > 0 && s.interval_iterations > 0 &&
      s.interval_skipped == s.interval_iterations) {
    if (s.interval_iterations == 1)
      std::snprintf(buf, sizeof buf,
                    " the iteration in this interval was skipped (fp16 gradient overflow at loss "
                    "scale %g) |",
                    s.loss_scale);
    else
      std::snprintf(buf, sizeof buf,
                    " all %d iterations in this interval were skipped (fp16 gradient overflow at "
                    "loss scale %g) |",
                    s.interval_iterations, s.loss_scale);
    line += buf;
  }
  if (s.elapsed_s >= 0)
    line +=
        " elapsed: " + format_duration(s.elapsed_s) + " | ETA: " + format_duration(s.eta_s) + " |";
  return line;
}

std::string format_validation_line(const ValidationStats& v) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                " validation loss at iteration %ld | lm loss value: %.6E | lm loss PPL: %.6E |",
                v.iteration, v.loss, std::exp(v.loss));
  return buf;
}

std::string format_test_line(double loss) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                " test loss at the end | lm loss value: %.6E | lm loss PPL: %.6E |", loss,
                std::exp(loss));
  return buf;
}

MetricsWriter::MetricsWriter(const std::string& path, bool append) {
  if (path.empty()) return;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);  // e.g. --report-dir's
  out_.emplace(path, append ? std::ios::app : std::ios::trunc);
  if (!*out_) throw std::runtime_error("--metrics-file: cannot write " + path);
}

namespace {
nlohmann::ordered_json moe_layers_json(const IterationStats& s) {
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const MoeLayerLog& l : s.moe_layers) {
    nlohmann::ordered_json j = {{"layer", l.layer},
                                {"tokens_per_expert", l.tokens_per_expert},
                                {"min_tokens", l.min_tokens()},
                                {"max_tokens", l.max_tokens()}};
    if (s.moe_per_layer_logging && !std::isnan(l.load_balancing_loss))
      j["load_balancing_loss"] = l.load_balancing_loss;
    if (s.moe_per_layer_logging && !std::isnan(l.z_loss)) j["z_loss"] = l.z_loss;
    layers.push_back(std::move(j));
  }
  return layers;
}
}  // namespace

void MetricsWriter::write(const IterationStats& s) {
  if (!out_) return;
  nlohmann::ordered_json j = {{"iteration", s.iteration},
                              {"consumed_samples", s.consumed_samples},
                              {"global_batch_size", s.global_batch},
                              {"loss", s.loss},
                              {"lr", s.lr},
                              {"grad_norm", s.grad_norm},
                              {"ms_per_iter", s.ms_per_iter},
                              {"tokens_per_s", s.tokens_per_s},
                              {"tflops", s.tflops},
                              {"mfu", s.mfu}};
  if (!std::isnan(s.load_balancing_loss)) j["load_balancing_loss"] = s.load_balancing_loss;
  if (!std::isnan(s.z_loss)) j["z_loss"] = s.z_loss;
  if (!s.moe_layers.empty()) j["moe_layers"] = moe_layers_json(s);
  if (s.loss_scale > 0) {
    j["loss_scale"] = s.loss_scale;
    j["skipped_iterations"] = s.skipped_iterations;
    j["skipped_in_interval"] = s.interval_skipped;
  }
  if (s.elapsed_s >= 0) {
    j["elapsed_s"] = s.elapsed_s;
    j["eta_s"] = s.eta_s;
  }
  *out_ << j.dump() << "\n" << std::flush;
}

void MetricsWriter::write(const ValidationStats& v) {
  if (!out_) return;
  nlohmann::ordered_json j = {{"iteration", v.iteration},
                              {"consumed_samples", v.consumed_samples},
                              {"validation_loss", v.loss},
                              {"validation_perplexity", std::exp(v.loss)},
                              {"validation_tokens", v.tokens}};
  *out_ << j.dump() << "\n" << std::flush;
}

}  // namespace trident::train

namespace trident::train {

void MetricsWriter::write_json(const nlohmann::ordered_json& j) {
  if (out_) *out_ << j.dump() << "\n" << std::flush;
}

}  // namespace trident::train
