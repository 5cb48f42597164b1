// The run's files as the report reads them: a run directory or explicit files, the metrics
// rows with a line still being written left out, bad lines named by number, and the page
// embedding exactly those rows where no "</" can end its script early.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/files.h"
#include "pipeline_parallel/timeline.h"
#include "report/page.h"
#include "report/run_files.h"
#include "test_util.h"

namespace trident::report {
namespace {

TEST(RunFiles, DirectoryOrExplicitFiles) {
  const std::string dir = testing::empty_temp_dir("report", "dir");
  EXPECT_THROW(find_run_files(dir, "", ""), FormatError);  // no metrics.jsonl yet
  std::ofstream(dir + "/metrics.jsonl") << "{}\n";
  RunFiles files = find_run_files(dir, "", "");
  EXPECT_EQ(std::filesystem::path(files.metrics), std::filesystem::path(dir) / "metrics.jsonl");
  EXPECT_EQ(files.timeline, "");  // none written
  std::ofstream(dir + "/timeline.json") << "{}\n";
  EXPECT_NE(find_run_files(dir, "", "").timeline, "");
  EXPECT_EQ(find_run_files("", dir + "/metrics.jsonl", "t.json").timeline, "t.json");
  EXPECT_THROW(find_run_files(dir + "/metrics.jsonl", "", ""), FormatError);  // not a dir
  EXPECT_THROW(find_run_files("", "", ""), FormatError);
  // Served live, a run not started yet: its files are where it will write them.
  files = find_run_files(dir + "/later", "", "", true);
  EXPECT_EQ(std::filesystem::path(files.timeline),
            std::filesystem::path(dir) / "later/timeline.json");
  EXPECT_TRUE(read_metrics_rows(files.metrics).empty());
  EXPECT_EQ(timeline_figure(files), "");
}

TEST(RunFiles, RowsLeaveOutALineBeingWritten) {
  const std::string dir = testing::empty_temp_dir("report", "rows");
  std::ofstream(dir + "/m.jsonl") << "{\"iteration\": 1, \"loss\": 2.5}\n\n"
                                     "{\"iteration\": 2, \"loss\": null}\n{\"iteration\": 3, \"lo";
  const nlohmann::ordered_json rows = read_metrics_rows(dir + "/m.jsonl");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["loss"], 2.5);
  EXPECT_TRUE(rows[1]["loss"].is_null());
  std::ofstream(dir + "/bad.jsonl") << "{\"iteration\": 1}\n[1]\n";
  try {
    read_metrics_rows(dir + "/bad.jsonl");
    FAIL() << "a line that is not an object was accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
}

TEST(Page, EmbedsTheRowsSafely) {
  const nlohmann::ordered_json rows = {{{"iteration", 1}, {"note", "</script><b>"}}};
  const std::string page = report_page(rows, "", "m.jsonl", false);
  const std::string open = "<script type=\"application/json\" id=\"trident-metrics\">";
  const size_t begin = page.find(open) + open.size();
  const size_t end = page.find("</script>", begin);
  EXPECT_EQ(nlohmann::ordered_json::parse(page.substr(begin, end - begin)), rows);
  EXPECT_EQ(page.find("http://"), std::string::npos);
  EXPECT_NE(page.find("data-live=\"0\""), std::string::npos);
}

// The timeline's rows carry each rank's (t, c, d, p) from the metrics file's "run" row; before
// that row is written, plain rank numbers.
TEST(RunFiles, TimelineRowsNameTheRanksCoordinates) {
  namespace pp = pipeline_parallel;
  const std::string dir = testing::empty_temp_dir("report", "coords");
  pp::write_chrome_trace(dir + "/timeline.json", {{"F 0.0", "forward", 0, 1000, 2000},
                                                  {"F 0.0", "forward", 1, 1000, 2000},
                                                  {"step", "step", 1, 0, 1}});
  std::ofstream(dir + "/metrics.jsonl") << "{\"iteration\": 1}\n";
  const RunFiles files = find_run_files(dir, "", "");
  EXPECT_NE(timeline_figure(files).find(">rank 1<"), std::string::npos);
  std::ofstream(dir + "/metrics.jsonl", std::ios::app)
      << R"({"run": {"tensor": 1, "pipeline": 1, "context": 2, "data": 1}})"
      << "\n";
  const std::string figure = timeline_figure(files);
  EXPECT_NE(figure.find(">rank 0 (t 0, c 0, d 0, p 0)<"), std::string::npos) << figure;
  EXPECT_NE(figure.find(">rank 1 (t 0, c 1, d 0, p 0)<"), std::string::npos) << figure;
}

}  // namespace
}  // namespace trident::report
