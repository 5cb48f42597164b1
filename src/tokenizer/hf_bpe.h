#pragma once
// The BPE model of a tokenizer.json ("model": {"type": "BPE"}), as HF `tokenizers` defines
// it: a piece's characters (with continuing_subword_prefix / end_of_word_suffix) become
// vocabulary ids, unknown ones <0xXX> byte tokens (byte_fallback) or unk_token (runs fused
// with fuse_unk), then merges apply lowest rank first, leftmost first; with ignore_merges a
// piece that is itself in the vocabulary is that one token. Merges are read as "a b"
// strings or as [a, b] pairs.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe_merge.h"

namespace trident::tokenizer {

struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIds = std::unordered_map<std::string, int, StringViewHash, std::equal_to<>>;

inline constexpr long kMaxVocabularyId = 1L << 24;

class HfBpe {
 public:
  // Throws std::runtime_error naming the field: not BPE, dropout set (not deterministic), a
  // merge whose tokens or result are not in the vocabulary, an unk_token missing from it.
  explicit HfBpe(const nlohmann::json& model);

  // Appends the ids of one piece; short pieces' ids are cached per thread, as they repeat.
  // byte_level: the piece is raw bytes still to be written in GPT-2's byte alphabet (the
  // pre-tokenizers' final ByteLevel step, deferred so that a cached piece skips it).
  void tokenize(std::string_view piece, std::vector<int>* ids, bool byte_level = false) const;

  const TokenIds& vocab() const { return vocab_; }
  // One past the largest id.
  int size() const { return (int)id_to_token_.size(); }
  // The token's text; "" for an id the vocabulary skips.
  const std::string& token(int id) const { return id_to_token_[id]; }

 private:
  void initial_symbols(std::string_view piece, std::vector<int>* symbols) const;
  std::vector<int> encode_uncached(std::string_view piece, bool byte_level) const;
  void read_merges(const nlohmann::json& merges);

  TokenIds vocab_;
  std::vector<std::string> id_to_token_;
  BpeMerges merges_;
  int byte_ids_[256];  // <0xXX>, -1 if absent
  int unk_id_ = -1;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  std::string prefix_, suffix_;  // continuing_subword_prefix, end_of_word_suffix
  std::uint64_t cache_id_;       // names this vocabulary in the per-thread cache
};

}  // namespace trident::tokenizer
