#pragma once
// The input ids fastText's supervised Dictionary::getLine gives for quality_text(text) + "\n",
// computed straight from the text. The library's path (predictLine) copies the text twice
// into an istringstream, reads it a byte at a time through the streambuf, allocates a string
// per token and looks each up in a 30-million-slot table (a cache miss per word); together
// half of the quality stage's time. The ids, and so the prediction, are the same: every
// step below mirrors fastText 0.9.2's dictionary.cc, and the test compares both paths.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fasttext {
class FastText;
class Dictionary;
}  // namespace fasttext

namespace trident::curation {

class FastTextFeatures {
 public:
  // Null where the dictionary cannot be mirrored: quantised models (pruned n-gram buckets),
  // no label prefix, or word n-grams without buckets.
  static std::unique_ptr<FastTextFeatures> create(const fasttext::FastText& model);

  // Replaces *ids with the input ids of the line; the rest is scratch space.
  struct Token {
    std::uint32_t begin, length, hash;
  };
  struct Scratch {
    std::vector<Token> tokens;
    std::vector<std::int32_t> word_hashes;
  };
  void line_ids(std::string_view text, std::vector<std::int32_t>* ids, Scratch* scratch) const;

 private:
  struct Slot {
    std::uint32_t hash = 0;
    std::int32_t id = -1;                  // -1: empty
    std::uint32_t offset = 0, length = 0;  // the word's bytes in words_
  };
  explicit FastTextFeatures(const fasttext::FastText& model);
  // token: raw bytes, compared ASCII-lower-cased (quality_text's case folding).
  std::int32_t find(std::string_view token, std::uint32_t hash) const;
  void add_token(std::string_view token, std::uint32_t hash, std::vector<std::int32_t>* ids,
                 std::vector<std::int32_t>* hashes) const;
  static void tokenize(std::string_view text, std::vector<Token>* tokens);
  void add_word_ngrams(const std::vector<std::int32_t>& hashes,
                       std::vector<std::int32_t>* ids) const;

  std::shared_ptr<const fasttext::Dictionary> dict_;
  std::vector<Slot> slots_;  // open addressing, a power of two at most half full
  std::string words_;        // every word's bytes, back to back
  std::string label_;        // args.label: tokens starting with it are labels, not features
  std::int32_t nwords_ = 0, word_ngrams_ = 1, maxn_ = 0;
  std::uint64_t bucket_ = 0;
};

// fastText's FNV-1a over a token's bytes (each byte sign-extended, as dictionary.cc does).
inline std::uint32_t fasttext_hash_step(std::uint32_t h, char c) {
  return (h ^ (std::uint32_t)(std::int8_t)c) * 16777619u;
}
constexpr std::uint32_t kFastTextHashSeed = 2166136261u;

}  // namespace trident::curation
