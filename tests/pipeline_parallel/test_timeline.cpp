// A measured timeline drawn as `schedule --svg` draws: a Chrome trace written and read back,
// chunks recovered from op names, and boxes placed where hand-worked times put them.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "core/files.h"
#include "pipeline_parallel/simulator.h"
#include "pipeline_parallel/timeline.h"
#include "test_util.h"

namespace trident::pipeline_parallel {
namespace {

std::vector<TraceEvent> two_ranks() {
  return {{"F 0.0", "forward", 0, 1000, 2000},  // rank 0: 1-3 ms
          {"send-fwd 0.0 -> 1", "send", 0, 3000, 0},
          {"F 1.1", "forward", 1, 3000, 1000},              // rank 1: 3-4 ms, chunk 1
          {"B 0.1", "backward", 1, 4000, 2000, 1500},       // lost its core for 0.5 ms
          {"optimizer step", "optimizer", 0, 6000, 1000}};  // ends at 7 ms
}

TEST(Timeline, ChromeTraceReadsBackWithChunks) {
  const std::string dir = testing::empty_temp_dir("timeline", "read");
  write_chrome_trace(dir + "/t.json", two_ranks());
  const std::vector<TraceEvent> back = read_chrome_trace(dir + "/t.json");
  ASSERT_EQ(back.size(), 5u);  // the thread-name metadata events are not ops
  EXPECT_EQ(back[2].name, "F 1.1");
  EXPECT_EQ(back[2].rank, 1);
  EXPECT_EQ(back[2].chunk, 1);
  EXPECT_DOUBLE_EQ(back[3].start_us, 4000);
  EXPECT_DOUBLE_EQ(back[3].duration_us, 2000);
  EXPECT_DOUBLE_EQ(back[3].cpu_us, 1500);
}

TEST(Timeline, RefusesWhatIsNotATrace) {
  const std::string dir = testing::empty_temp_dir("timeline", "bad");
  std::ofstream(dir + "/t.json") << "[1, 2]";
  EXPECT_THROW(read_chrome_trace(dir + "/t.json"), FormatError);
  EXPECT_THROW(read_chrome_trace(dir + "/none.json"), FormatError);
}

TEST(Timeline, BoxesWhereTheTimesPutThem) {
  const std::string svg = render_timeline_svg(two_ranks(), 240);
  std::regex rect(R"re(<rect class="op" x="([0-9.]+)" y="([0-9.]+)" width="([0-9.]+)")re");
  std::vector<std::array<double, 3>> boxes;
  for (std::sregex_iterator it(svg.begin(), svg.end(), rect), end; it != end; ++it)
    boxes.push_back({std::stod((*it)[1]), std::stod((*it)[2]), std::stod((*it)[3])});
  ASSERT_EQ(boxes.size(), 5u);
  // 6 ms from the first event at 1 ms on 240 px: 40 px per ms, 70 px margin,
  // rows 34 px apart from y = 30 (+2 inside the row).
  EXPECT_NEAR(boxes[0][0], 70.0, 0.05);
  EXPECT_NEAR(boxes[0][2], 80.0, 0.05);
  EXPECT_NEAR(boxes[1][2], 0.5, 0.05);  // an instant still gets a sliver
  EXPECT_NEAR(boxes[2][0], 70.0 + 2 * 40, 0.05);
  EXPECT_NEAR(boxes[2][1], 30.0 + 34 + 2, 0.05);
  EXPECT_NEAR(boxes[4][0], 70.0 + 5 * 40, 0.05);
  EXPECT_NE(svg.find("fill=\"#c6dbef\""), std::string::npos);  // forward, chunk 1's shade
  EXPECT_NE(svg.find("<title>rank 1: B 0.1 (backward) 2.000 ms at 3.000 ms</title>"),
            std::string::npos);
}

TEST(Timeline, RanksAlignedAtTheirFirstOptimizerOp) {
  // Rank 1's clock started 5 ms later: its optimizer op reads 1 ms where rank 0's reads 6.
  std::vector<TraceEvent> events = two_ranks();
  events.push_back({"optimizer step", "optimizer", 1, 1000, 500});
  for (TraceEvent& e : events)
    if (e.rank == 1 && e.category != "optimizer") e.start_us -= 5000;  // F at -2 ms, B at -1
  const std::string svg = render_timeline_svg(events);
  // Aligned, rank 1's F is again 2 ms after rank 0's first event, as in two_ranks().
  EXPECT_NE(svg.find("<title>rank 1: F 1.1 (forward) 1.000 ms at 2.000 ms</title>"),
            std::string::npos)
      << svg;
}

TEST(Timeline, RowsTakeTheNamesGiven) {
  // Rank 1 named (its grid coordinates, say); rank 0 beyond the names given keeps "rank 0".
  const std::string named =
      render_timeline_svg(two_ranks(), 4000, {"", "rank 1 (t 0, c 1, d 0, p 0)"});
  EXPECT_NE(named.find(">rank 1 (t 0, c 1, d 0, p 0)<"), std::string::npos) << named;
  EXPECT_EQ(named.find(">rank 1<"), std::string::npos);
  const std::string plain = render_timeline_svg(two_ranks());
  EXPECT_NE(plain.find(">rank 0<"), std::string::npos);
  EXPECT_NE(plain.find(">rank 1<"), std::string::npos);
}

}  // namespace
}  // namespace trident::pipeline_parallel
