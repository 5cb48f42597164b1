#include "train/report_dir.h"

#include <filesystem>

#include "report/run_files.h"

namespace trident::train {

void apply_report_dir(TrainingConfig& c) {
  if (c.report_dir.empty()) return;
  const std::filesystem::path dir(c.report_dir);
  if (c.metrics_file.empty()) c.metrics_file = (dir / report::kMetricsName).string();
  if (c.timeline.empty()) c.timeline = (dir / report::kTimelineName).string();
  if (c.timeline_svg.empty()) c.timeline_svg = (dir / report::kTimelineSvgName).string();
}

}  // namespace trident::train
