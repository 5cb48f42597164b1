#pragma once
// Stage 6: removing downstream task text from training documents, GPT-3's rule as MT-NLG
// applied it: n-grams (n = 13) of lower-cased words with punctuation removed (a word is a
// maximal run of letters, digits and underscores, Python's \w+); each matching n-gram is cut
// out with 200 characters on each side, pieces shorter than 200 characters are dropped, and
// a document cut into more than 10 pieces is dropped whole. Characters are code points.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace trident::curation {

struct Word {
  size_t begin = 0, end = 0;  // byte offsets into the text
  std::uint64_t hash = 0;     // of the lower-cased word
};

// The \w+ words of a (valid UTF-8) text, lower-cased by ICU's simple case mapping.
std::vector<Word> task_words(std::string_view text);

class NgramIndex {
 public:
  explicit NgramIndex(int n) : n_(n) {}
  int n() const { return n_; }
  // Adds every n-gram of the text; a text of fewer than n words adds nothing.
  void add_text(std::string_view text);
  bool contains(std::uint64_t h) const { return set_.count(h) > 0; }
  size_t size() const { return set_.size(); }
  // False when no indexed n-gram starts with this word (by its hash): most of a document's
  // positions, which then need neither their n-gram hash nor a set lookup. A filter: true
  // may still be no match.
  bool may_start(std::uint64_t word_hash) const {
    const std::uint64_t bit = word_hash & (kStartBits - 1);
    return (starts_[bit / 64] >> (bit % 64)) & 1;
  }

 private:
  static constexpr std::uint64_t kStartBits = 1 << 18;  // 32 KB, in L1/L2
  int n_;
  std::unordered_set<std::uint64_t> set_;
  std::vector<std::uint64_t> starts_ = std::vector<std::uint64_t>(kStartBits / 64);
};

struct DecontaminationRules {
  long context_chars = 200;    // removed on each side of a match
  long min_piece_chars = 200;  // shorter pieces are dropped
  int max_pieces = 10;         // more pieces drop the document
};

struct Decontaminated {
  bool matched = false;              // false: the text is untouched
  bool dropped = false;              // too many pieces, or none long enough
  int pieces_before_drop = 0;        // what the cut produced
  std::vector<std::string> pieces;   // what is kept, in order
  std::vector<std::string> matches;  // the matched n-grams' text (the first few)
};

Decontaminated decontaminate(std::string_view text, const NgramIndex& index,
                             const DecontaminationRules& rules);

}  // namespace trident::curation
