// A rank file written by two data-parallel ranks, each its pieces of three tensors (split
// inside them), against the same tensors written whole by io::write_safetensors: the same
// bytes, and a side-car whose size and xxh64 are the whole file's (the xxhash library over
// those bytes). Data-parallel rank 0 waits for the other's marker; told to stop waiting, it
// throws and leaves neither the file nor a side-car.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "checkpoint/manifest.h"
#include "checkpoint/sharded_write.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace trident;
using namespace trident::checkpoint;

namespace {

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct Tensors {
  std::vector<std::vector<float>> data = {trident::testing::random_vector(15, 1),
                                          trident::testing::random_vector(7000, 2),
                                          trident::testing::random_vector(1, 3)};
  std::vector<io::TensorToWrite> list() const {
    return {
        {"a", {5, 3}, data[0].data()}, {"b", {7000}, data[1].data()}, {"c", {1}, data[2].data()}};
  }
};

// Data-parallel rank r of 2's snapshot: rank 0 holds the first `split[i]` floats of tensor i,
// rank 1 the rest.
SaveSnapshot rank_snapshot(const fs::path& dir, const Tensors& t, int r) {
  SaveSnapshot s;
  s.dir = dir, s.name = "iter_0000001", s.tmp = dir / "iter_0000001.tmp";
  s.file = "model_tp0_pp0.safetensors";
  s.sharded = true, s.markers = true, s.data_rank = r, s.data_size = 2, s.writes = r == 0;
  s.tensors = t.list();
  s.entries = nlohmann::ordered_json::array({{{"name", "a"}}});
  const io::SafetensorsLayout layout = io::safetensors_layout(s.tensors, {{"format", kFormat}});
  s.header = layout.header, s.file_bytes = layout.file_bytes;
  const long split[3] = {4, 3001, 1};
  for (size_t i = 0; i < 3; ++i) {
    const long begin = r == 0 ? 0 : split[i];
    const long end = r == 0 ? split[i] : (long)t.data[i].size();
    if (begin < end)
      s.pieces.push_back({t.data[i].data() + begin, end - begin, layout.offsets[i] + 4 * begin});
  }
  return s;
}

}  // namespace

TEST(ShardedWrite, TwoRanksPiecesAreTheWholeFileWritersBytes) {
  const fs::path dir = trident::testing::empty_temp_dir("sharded_write", "bytes");
  Tensors t;
  const std::string whole = (dir / "whole.safetensors").string();
  io::write_safetensors(whole, t.list(), {{"format", kFormat}});
  fs::create_directories(dir / "iter_0000001.tmp");
  const SaveSnapshot r0 = rank_snapshot(dir, t, 0), r1 = rank_snapshot(dir, t, 1);
  write_rank_pieces(r1);
  EXPECT_TRUE(fs::exists(r1.tmp / (r1.file + ".dp1.written")));
  write_rank_pieces(r0);
  finish_sharded_file(r0, [] { return true; });
  const std::string expected = file_bytes(whole);
  EXPECT_TRUE(file_bytes(r0.tmp / r0.file) == expected);
  std::ifstream side_car(r0.tmp / (r0.file + ".json"));
  const nlohmann::json side = nlohmann::json::parse(side_car);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                (unsigned long long)XXH64(expected.data(), expected.size(), 0));
  EXPECT_EQ(side["bytes"].get<size_t>(), expected.size());
  EXPECT_EQ(side["xxh64"].get<std::string>(), hex);
  EXPECT_EQ(side["file"], r0.file);
  // Only the file and its side-car are left: the temporary name and the marker are gone.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(r0.tmp)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{r0.file, r0.file + ".json"}));
}

TEST(ShardedWrite, AMissingRanksPiecesLeaveNoFileOnceToldToStopWaiting) {
  const fs::path dir = trident::testing::empty_temp_dir("sharded_write", "missing");
  Tensors t;
  fs::create_directories(dir / "iter_0000001.tmp");
  const SaveSnapshot r0 = rank_snapshot(dir, t, 0);
  write_rank_pieces(r0);
  int looks = 0;
  try {
    finish_sharded_file(r0, [&] { return ++looks < 3; });
    FAIL() << "finished without data-parallel rank 1's pieces";
  } catch (const SaveError& e) {
    EXPECT_NE(std::string(e.what()).find("data-parallel rank 1's pieces never came"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(looks, 3);
  EXPECT_FALSE(fs::exists(r0.tmp / r0.file));
  EXPECT_FALSE(fs::exists(r0.tmp / (r0.file + ".json")));
}
