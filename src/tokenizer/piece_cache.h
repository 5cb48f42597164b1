#pragma once
// A cache of piece -> token ids for one thread's encoder: pieces repeat heavily in natural
// text, so most are looked up, not encoded. Open addressing over one flat slot array, keys and
// ids in two arenas: a lookup is a hash, one or two slot reads and a memcmp, no allocation.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trident::tokenizer {

class PieceCache {
 public:
  // A cached piece's ids: [begin, end), valid until the next insert or clear.
  struct Ids {
    const int* begin = nullptr;
    const int* end = nullptr;
  };

  // Pieces of 256 bytes or more are encoded every time, as HF `tokenizers` does (its BPE cache
  // takes words under 256 bytes): natural text repeats short pieces, and one long word (a
  // 10 MB prompt) would evict the whole cache to make room for a piece seen once.
  static constexpr size_t kLongPieceBytes = 256;
  static bool worth_caching(std::string_view piece) { return piece.size() < kLongPieceBytes; }

  static std::uint64_t hash(std::string_view piece);
  // A new vocabulary's id, unique in the process: a thread's cache remembers whose pieces it
  // holds (its owner) and clears itself when another vocabulary encodes on that thread.
  static std::uint64_t next_owner_id();
  // The piece's ids; begin == nullptr when it is not cached.
  Ids find(std::string_view piece, std::uint64_t hash) const;
  // Caches a piece that find did not return (and worth_caching); starts afresh past ~1M pieces
  // or 64 MiB of keys.
  Ids insert(std::string_view piece, std::uint64_t hash, const std::vector<int>& ids);
  void clear();
  size_t size() const { return size_; }

 private:
  struct Slot {
    std::uint64_t hash = 0;  // 0: empty (hash() never returns 0)
    std::uint32_t key_offset = 0, key_length = 0, ids_offset = 0, ids_length = 0;
  };
  void grow();

  std::vector<Slot> slots_;  // a power of two, at most half full
  std::string keys_;
  std::vector<int> ids_;
  size_t size_ = 0;
};

}  // namespace trident::tokenizer
