#pragma once
#include <string>
#include <vector>

namespace trident::cli {

// `trident report RUN`: one self-contained HTML page of a run's metrics, memory plan and
// measured timeline (report/page.h), written beside the run or served live (--serve PORT).
int report_main(const std::vector<std::string>& args);

}  // namespace trident::cli
