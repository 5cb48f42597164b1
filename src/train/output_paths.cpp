#include "train/output_paths.h"

#include <filesystem>

#include "core/files.h"
#include "report/run_files.h"

namespace trident::train {

void check_output_paths(const TrainingConfig& c) {
  const std::pair<const char*, const std::string*> directories[] = {
      {"--save", &c.save}, {"--save-hf", &c.save_hf}, {"--tensorboard-dir", &c.tensorboard_dir}};
  for (const auto& [flag, path] : directories)
    if (!path->empty()) check_output_directory(*path, flag);
  // The report page is written into --report-dir, which its writer does not make: checked
  // as that file, the directory stays. First: --metrics-file defaults into it.
  if (!c.report_dir.empty())
    check_output_file((std::filesystem::path(c.report_dir) / report::kPageName).string(),
                      "--report-dir");
  const std::pair<const char*, const std::string*> files[] = {{"--metrics-file", &c.metrics_file},
                                                              {"--timeline", &c.timeline},
                                                              {"--timeline-svg", &c.timeline_svg}};
  for (const auto& [flag, path] : files)
    if (!path->empty()) check_output_file(*path, flag);
}

}  // namespace trident::train
