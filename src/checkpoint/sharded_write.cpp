#include "checkpoint/sharded_write.h"

#include <xxhash.h>

#include <chrono>
#include <fstream>
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

// The whole file's xxh64, read back in 1 MiB blocks.
std::uint64_t xxh64_of_file(const fs::path& path, std::uint64_t* bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SaveError(path.string() + ": cannot read it back for its checksum");
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  std::vector<char> block(1 << 20);
  *bytes = 0;
  while (in) {
    in.read(block.data(), (std::streamsize)block.size());
    XXH64_update(state, block.data(), (size_t)in.gcount());
    *bytes += (std::uint64_t)in.gcount();
  }
  const std::uint64_t digest = XXH64_digest(state);
  XXH64_freeState(state);
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
