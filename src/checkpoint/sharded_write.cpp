#include "checkpoint/sharded_write.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "core/files.h"

namespace trident::checkpoint {

namespace fs = std::filesystem;

namespace {

fs::path temporary_file(const SaveSnapshot& s) {
  return s.tmp / (s.file + ".tmp");
}

fs::path marker(const SaveSnapshot& s, int data_rank) {
  return s.tmp / (s.file + ".dp" + std::to_string(data_rank) + ".written");
}

// The whole file's xxh64, read back O_DIRECT in 2 MiB blocks (no page-cache copy: a fraction
// of the system time, and nothing left in the page cache), or through the page cache where the
// file system refuses O_DIRECT.
std::uint64_t xxh64_of_file(const fs::path& path, std::uint64_t* bytes) {
  constexpr size_t kBlock = 2u << 20;  // a multiple of every device's logical block
  std::unique_ptr<char, void (*)(void*)> block(static_cast<char*>(std::aligned_alloc(4096, kBlock)),
                                               std::free);
  if (!block) throw std::bad_alloc();
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
  if (fd < 0) fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    throw SaveError(path.string() + ": cannot read it back for its checksum (" +
                    std::strerror(errno) + ")");
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  *bytes = 0;
  ssize_t n = 0;
  while ((n = ::pread(fd, block.get(), kBlock, (off_t)*bytes)) != 0) {
    // Refused (a file system without direct reads, or one that wants even the unaligned end
    // of the file aligned): the rest is read through the page cache.
    const int flags = n < 0 && errno == EINVAL ? ::fcntl(fd, F_GETFL) : 0;
    if (flags > 0 && (flags & O_DIRECT) && ::fcntl(fd, F_SETFL, flags & ~O_DIRECT) == 0) continue;
    if (n < 0) break;
    XXH64_update(state, block.get(), (size_t)n);
    *bytes += (std::uint64_t)n;
  }
  const int read_errno = errno;
  ::close(fd);
  const std::uint64_t digest = XXH64_digest(state);
  XXH64_freeState(state);
  if (n < 0)
    throw SaveError(path.string() + ": reading it back failed (" + std::strerror(read_errno) + ")");
  return digest;
}

// Waits until every other data-parallel rank's marker is there, then removes them (they are
// not part of the checkpoint).
void wait_for_markers(const SaveSnapshot& s, const std::function<bool()>& keep_waiting) {
  for (int r = 1; r < s.data_size; ++r) {
    const fs::path path = marker(s, r);
    while (!fs::exists(path)) {
      if (!keep_waiting())
        throw SaveError(s.name + ": " + s.file + " not finished, data-parallel rank " +
                        std::to_string(r) + "'s pieces never came (its write failed)");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  for (int r = 1; r < s.data_size; ++r) fs::remove(marker(s, r));
}

}  // namespace

void write_rank_pieces(const SaveSnapshot& s) {
  SharedFile file(temporary_file(s).string());
  if (s.writes) {
    file.resize(s.file_bytes);
    file.write_at(s.header.data(), s.header.size(), 0);
  }
  inject_write_fault(s.options.fault);
  for (const FilePiece& p : s.pieces)
    file.write_at(reinterpret_cast<const char*>(p.data), (size_t)p.floats * sizeof(float),
                  p.offset);
  file.sync_and_close();
  if (s.markers && !s.writes) write_file_atomically(marker(s, s.data_rank).string(), "");
}

void finish_sharded_file(const SaveSnapshot& s, const std::function<bool()>& keep_waiting) {
  if (s.markers) wait_for_markers(s, keep_waiting);
  const fs::path path = s.tmp / s.file;
  rename_durably(temporary_file(s).string(), path.string());
  std::uint64_t bytes = 0;
  const std::uint64_t digest = xxh64_of_file(path, &bytes);
  if (bytes != s.file_bytes)
    throw SaveError(path.string() + ": " + std::to_string(bytes) + " bytes read back, " +
                    std::to_string(s.file_bytes) + " written");
  write_side_car(s, bytes, digest);
}

}  // namespace trident::checkpoint
