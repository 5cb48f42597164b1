// AtomicFile's two write modes: the bytes on disk are the bytes written, whatever the sizes
// and the pieces they arrive in (the direct mode stages them in 8 MiB blocks and pads the
// last one), and a direct write leaves the file out of the page cache (read with mincore,
// the kernel's own account of which pages are resident). SharedFile: two writers of one file,
// pieces at any boundaries.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "core/files.h"
#include "test_util.h"

namespace fs = std::filesystem;
using trident::AtomicFile;
using trident::WriteMode;
using trident::testing::empty_temp_dir;

namespace {

std::string random_bytes(size_t size, unsigned seed) {
  std::mt19937 random(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = (char)(random() & 0xff);
  return bytes;
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Writes `bytes` in pieces of `piece` bytes (the last shorter) and commits.
bool write_in_pieces(const fs::path& path, const std::string& bytes, size_t piece, WriteMode mode) {
  AtomicFile file(path.string(), mode);
  for (size_t at = 0; at < bytes.size(); at += piece)
    file.write(bytes.data() + at, std::min(piece, bytes.size() - at));
  const bool direct = file.direct();
  file.commit();
  return direct;
}

// The fraction of the file's pages the kernel holds in its page cache.
double resident_fraction(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  const size_t size = fs::file_size(path);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  const long page = ::sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> resident((size + page - 1) / page);
  ::mincore(map, size, resident.data());
  ::munmap(map, size);
  double count = 0;
  for (unsigned char r : resident) count += r & 1;
  return count / (double)resident.size();
}

}  // namespace

TEST(AtomicFile, EveryModeWritesTheBytesGivenWhateverTheirSizeAndPieces) {
  const fs::path dir = empty_temp_dir("files", "sizes");
  const size_t staging = 8u << 20;
  for (size_t size : {size_t(0), size_t(1), size_t(4095), size_t(4096), size_t(4097), staging - 1,
                      staging, staging + 1, 2 * staging + 12345})
    for (size_t piece : {size_t(1000), size_t(4096), staging + 7})
      for (WriteMode mode : {WriteMode::kPageCache, WriteMode::kDirect}) {
        if (size > 4097 && piece == 1000) continue;  // slow and nothing new
        const std::string bytes = random_bytes(size, (unsigned)(size + piece));
        const fs::path path = dir / "file.bin";
        write_in_pieces(path, bytes, piece, mode);
        ASSERT_EQ(fs::file_size(path), size) << size << " in pieces of " << piece;
        EXPECT_TRUE(file_bytes(path) == bytes) << size << " in pieces of " << piece;
        EXPECT_FALSE(fs::exists(dir / "file.bin.tmp"));
      }
}

TEST(AtomicFile, DirectWritesLeaveTheFileOutOfThePageCache) {
  const fs::path dir = empty_temp_dir("files", "direct");
  const std::string bytes = random_bytes(24u << 20, 5);
  if (!write_in_pieces(dir / "direct.bin", bytes, 1u << 20, WriteMode::kDirect))
    GTEST_SKIP() << dir << "'s file system refuses O_DIRECT: the plain writes are tested above";
  write_in_pieces(dir / "cached.bin", bytes, 1u << 20, WriteMode::kPageCache);
  EXPECT_LT(resident_fraction(dir / "direct.bin"), 0.05);
  EXPECT_GT(resident_fraction(dir / "cached.bin"), 0.5);  // the contrast: the check can fail
  EXPECT_TRUE(file_bytes(dir / "direct.bin") == bytes);
}

TEST(AtomicFile, DirectModeFallsBackWhereTheFileSystemRefusesIt) {
  // tmpfs (before Linux 6.6) refuses O_DIRECT at open: the file is written through the page cache.
  if (!fs::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  const fs::path dir = fs::path("/dev/shm") / ("trident_files_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string bytes = random_bytes((8u << 20) + 3, 9);
  write_in_pieces(dir / "file.bin", bytes, 1u << 20, WriteMode::kDirect);
  EXPECT_TRUE(file_bytes(dir / "file.bin") == bytes);
  fs::remove_all(dir);
}

TEST(AtomicFile, DroppedWithoutCommitLeavesNoFile) {
  const fs::path dir = empty_temp_dir("files", "dropped");
  {
    AtomicFile file((dir / "file.bin").string(), WriteMode::kDirect);
    const std::string bytes = random_bytes((8u << 20) + 5, 3);
    file.write(bytes.data(), bytes.size());
  }
  EXPECT_TRUE(fs::is_empty(dir));
}

namespace {

// Two writers of one file, each owning every other piece of `bytes` (pieces of `sizes`, at
// unaligned boundaries, so neighbouring pieces share 4 KiB blocks), writing at once: the first
// in order, the second backwards; the first sizes the file.
void write_shared(const fs::path& path, const std::string& bytes,
                  const std::vector<size_t>& sizes) {
  std::vector<std::pair<size_t, size_t>> pieces[2];  // offset, size
  size_t at = 0;
  for (size_t i = 0; at < bytes.size(); ++i) {
    const size_t size = std::min(sizes[i % sizes.size()], bytes.size() - at);
    pieces[i % 2].push_back({at, size});
    at += size;
  }
  trident::SharedFile first(path.string()), second(path.string());
  first.resize(bytes.size());
  const size_t n = std::max(pieces[0].size(), pieces[1].size());
  for (size_t i = 0; i < n; ++i) {
    if (i < pieces[0].size())
      first.write_at(bytes.data() + pieces[0][i].first, pieces[0][i].second, pieces[0][i].first);
    if (i < pieces[1].size()) {
      const auto& p = pieces[1][pieces[1].size() - 1 - i];
      second.write_at(bytes.data() + p.first, p.second, p.first);
    }
  }
  second.sync_and_close();
  first.sync_and_close();
}

}  // namespace

// The pieces' whole blocks go out O_DIRECT, their partial blocks through the page cache, where
// two writers' bytes share a page: the file is every byte in its place, and its pages are not
// left in the page cache.
TEST(SharedFile, TwoWritersPiecesMakeTheFileWhateverTheirBoundaries) {
  const fs::path dir = empty_temp_dir("files", "shared");
  const std::string bytes = random_bytes((20u << 20) + 4321, 11);
  const std::vector<size_t> sizes = {1, 4095, 4097, 100, 3 * 4096, (9u << 20) + 17, 8191, 70000};
  write_shared(dir / "shared.bin", bytes, sizes);
  EXPECT_EQ(fs::file_size(dir / "shared.bin"), bytes.size());
  EXPECT_LT(resident_fraction(dir / "shared.bin"), 0.05);  // before reading it back
  EXPECT_TRUE(file_bytes(dir / "shared.bin") == bytes);
  // Where the file system refuses O_DIRECT (tmpfs before Linux 6.6), every piece is buffered.
  if (!fs::is_directory("/dev/shm")) return;
  const fs::path shm = fs::path("/dev/shm") / ("trident_shared_" + std::to_string(::getpid()));
  fs::create_directories(shm);
  write_shared(shm / "shared.bin", bytes, sizes);
  EXPECT_TRUE(file_bytes(shm / "shared.bin") == bytes);
  fs::remove_all(shm);
}
