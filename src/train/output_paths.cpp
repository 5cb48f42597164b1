#include "train/output_paths.h"

#include "core/files.h"

namespace trident::train {

void check_output_paths(const TrainingConfig& c) {
  const std::pair<const char*, const std::string*> directories[] = {
      {"--save", &c.save},
      {"--save-hf", &c.save_hf},
      {"--report-dir", &c.report_dir},
      {"--tensorboard-dir", &c.tensorboard_dir}};
  for (const auto& [flag, path] : directories)
    if (!path->empty()) check_output_directory(*path, flag);
  const std::pair<const char*, const std::string*> files[] = {{"--metrics-file", &c.metrics_file},
                                                              {"--timeline", &c.timeline},
                                                              {"--timeline-svg", &c.timeline_svg}};
  for (const auto& [flag, path] : files)
    if (!path->empty()) check_output_file(*path, flag);
}

}  // namespace trident::train
