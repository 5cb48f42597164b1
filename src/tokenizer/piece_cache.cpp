#include "tokenizer/piece_cache.h"

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace trident::tokenizer {

namespace {
constexpr size_t kMaxPieces = 1u << 20;
constexpr size_t kMaxKeyBytes = 64u << 20;
constexpr size_t kFirstSlots = 1u << 12;
}  // namespace

std::uint64_t PieceCache::hash(std::string_view piece) {
  const std::uint64_t h = XXH3_64bits(piece.data(), piece.size());
  return h ? h : 1;
}

std::uint64_t PieceCache::next_owner_id() {
  static std::atomic<std::uint64_t> last{0};
  return ++last;
}

PieceCache::Ids PieceCache::find(std::string_view piece, std::uint64_t hash) const {
  if (slots_.empty()) return {};
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.hash == 0) return {};
    if (s.hash == hash && s.key_length == piece.size() &&
        std::memcmp(keys_.data() + s.key_offset, piece.data(), piece.size()) == 0)
      return {ids_.data() + s.ids_offset, ids_.data() + s.ids_offset + s.ids_length};
  }
}

PieceCache::Ids PieceCache::insert(std::string_view piece, std::uint64_t hash,
                                   const std::vector<int>& ids) {
  if (size_ >= kMaxPieces || keys_.size() + piece.size() > kMaxKeyBytes) clear();
  if (2 * (size_ + 1) > slots_.size()) grow();
  Slot slot{hash, (std::uint32_t)keys_.size(), (std::uint32_t)piece.size(),
            (std::uint32_t)ids_.size(), (std::uint32_t)ids.size()};
  keys_.append(piece);
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  const size_t mask = slots_.size() - 1;
  size_t i = hash & mask;
  while (slots_[i].hash != 0) i = (i + 1) & mask;
  slots_[i] = slot;
  ++size_;
  return {ids_.data() + slot.ids_offset, ids_.data() + slot.ids_offset + slot.ids_length};
}

void PieceCache::grow() {
  std::vector<Slot> old(std::max(kFirstSlots, slots_.size() * 2));
  old.swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.hash == 0) continue;
    size_t i = s.hash & mask;
    while (slots_[i].hash != 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

void PieceCache::clear() {
  slots_.clear();
  keys_.clear();
  ids_.clear();
  size_ = 0;
}

}  // namespace trident::tokenizer
