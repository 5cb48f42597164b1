#include "train/run_pictures.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "pipeline_parallel/simulator.h"
#include "report/page.h"
#include "train/training_run.h"

namespace trident::train {

namespace {

nlohmann::ordered_json plan_json(const std::string& title, const MemoryPlan& plan) {
  nlohmann::ordered_json buffers = nlohmann::ordered_json::array();
  for (const PlannedBuffer& b : plan.buffers())
    buffers.push_back({{"group", b.group},
                       {"name", b.name},
                       {"floats", b.floats},
                       {"copies", b.copies},
                       {"bytes", b.total_floats() * 4}});  // as MemoryPlan::total_bytes counts
  return {{"title", title}, {"buffers", buffers}};
}

}  // namespace

void write_run_description(TrainingRun& run) {
  const TrainingConfig& c = run.config;
  nlohmann::ordered_json plans = nlohmann::ordered_json::array();
  for (size_t j = 0; j < run.model.chunks.size(); ++j)
    plans.push_back(
        plan_json("model chunk " + std::to_string(j), run.model.chunks[j]->memory_plan()));
  if (!run.model.buffers.buffers().empty())
    plans.push_back(plan_json("besides the chunks", run.model.buffers));
  nlohmann::ordered_json shape = {{"seq_length", c.model.seq_length},
                                  {"num_layers", c.model.num_layers},
                                  {"hidden_size", c.model.hidden_size},
                                  {"num_attention_heads", c.model.num_attention_heads},
                                  {"micro_batch_size", c.micro_batch_size},
                                  {"global_batch_size", c.effective_global_batch()},
                                  {"train_iters", run.train_iters},
                                  {"tensor", c.tensor_model_parallel_size},
                                  {"pipeline", c.pipeline_model_parallel_size},
                                  {"context", c.context_parallel_size},
                                  {"data", c.data_parallel_size()}};
  run.training_log->metrics().write_json({{"run", shape}, {"memory_plan", plans}});
}

void write_timeline_svg(const TrainingConfig& c,
                        const std::vector<pipeline_parallel::TraceEvent>& events,
                        const std::vector<std::string>& rank_names, std::ostream& log) {
  if (c.timeline_svg.empty()) return;
  write_file_atomically(c.timeline_svg,
                        pipeline_parallel::render_timeline_svg(events, 4000, rank_names));
  log << "timeline drawn -> " << c.timeline_svg << "\n";
}

void write_report_page(TrainingRun& run) {
  const TrainingConfig& c = run.config;
  if (c.report_dir.empty() || run.rank.world_rank != 0) return;
  const std::string page = (std::filesystem::path(c.report_dir) / report::kPageName).string();
  write_file_atomically(page, report::report_page({c.metrics_file, c.timeline}, false));
  run.log << "report: " << page << " (trident report " << c.report_dir
          << " --serve PORT serves it live)\n";
}

}  // namespace trident::train
