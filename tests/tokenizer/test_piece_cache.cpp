// The flat piece cache against std::unordered_map on many random pieces: every inserted piece
// is found with its ids (through the table's growth), an absent one is not, and clear empties it;
// pieces of 256 bytes or more are left out, as HF tokenizers' BPE cache leaves them.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/piece_cache.h"

namespace trident::tokenizer {
namespace {

std::vector<int> as_vector(PieceCache::Ids ids) {
  return {ids.begin, ids.end};
}

TEST(PieceCache, FindsWhatWasInsertedAsAMapDoes) {
  std::mt19937 rng(7);
  std::unordered_map<std::string, std::vector<int>> reference;
  PieceCache cache;
  for (int n = 0; n < 50000; ++n) {
    std::string piece(rng() % 12, ' ');
    for (char& c : piece) c = "ab\xc3\xa9 "[rng() % 5];
    std::vector<int> ids(rng() % 4 + 1);
    for (int& id : ids) id = (int)(rng() % 1000);
    const std::uint64_t hash = PieceCache::hash(piece);
    if (reference.count(piece)) {
      EXPECT_EQ(as_vector(cache.find(piece, hash)), reference[piece]) << piece;
      continue;
    }
    EXPECT_EQ(cache.find(piece, hash).begin, nullptr) << piece;
    EXPECT_EQ(as_vector(cache.insert(piece, hash, ids)), ids);
    reference[piece] = ids;
  }
  EXPECT_EQ(cache.size(), reference.size());
  for (const auto& [piece, ids] : reference)
    EXPECT_EQ(as_vector(cache.find(piece, PieceCache::hash(piece))), ids) << piece;
  cache.clear();
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.find("ab", PieceCache::hash("ab")).begin, nullptr);
}

TEST(PieceCache, OnlyPiecesUnder256BytesAreWorthCaching) {
  // HF tokenizers' BPE caches a word when sequence.len() < MAX_LENGTH (256 bytes).
  EXPECT_TRUE(PieceCache::worth_caching(std::string(255, 'a')));
  EXPECT_FALSE(PieceCache::worth_caching(std::string(256, 'a')));
  EXPECT_FALSE(PieceCache::worth_caching(std::string(10u << 20, 'a')));
}

TEST(PieceCache, HashIsNeverTheEmptyMarker) {
  for (const char* s : {"", "a", "hello", "\xff"}) EXPECT_NE(PieceCache::hash(s), 0u);
}

}  // namespace
}  // namespace trident::tokenizer
