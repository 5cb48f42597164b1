#include "tokenizer/hf_bpe.h"

#include <cstdio>
#include <stdexcept>

#include "tokenizer/bpe_merge.h"
#include "tokenizer/hf_pre_tokenizers.h"
#include "tokenizer/piece_cache.h"
#include "tokenizer/unicode_classes.h"

namespace trident::tokenizer {

namespace {

std::string optional_string(const nlohmann::json& model, const char* key) {
  return model.contains(key) && model[key].is_string() ? model[key].get<std::string>() : "";
}

}  // namespace

HfBpe::HfBpe(const nlohmann::json& model) : cache_id_(PieceCache::next_owner_id()) {
  const std::string type = model.value("type", "BPE");
  if (type != "BPE")
    throw std::runtime_error("model '" + type + "' is not implemented (trident reads BPE)");
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      model["dropout"].get<double>() != 0.0)
    throw std::runtime_error("model BPE: dropout is not implemented (it makes encoding random)");
  fuse_unk_ = model.value("fuse_unk", false);
  byte_fallback_ = model.value("byte_fallback", false);
  ignore_merges_ = model.value("ignore_merges", false);
  prefix_ = optional_string(model, "continuing_subword_prefix");
  suffix_ = optional_string(model, "end_of_word_suffix");
  const nlohmann::json& vocab = model.at("vocab");
  if (!vocab.is_object()) throw std::runtime_error("model BPE: vocab must be an object");
  for (auto& [token, id] : vocab.items()) {
    // Ids index tables and the model's embedding: 2^24 bounds both (real vocabularies stay
    // under 300,000).
    if (!id.is_number_integer() || id.get<long>() < 0 || id.get<long>() >= kMaxVocabularyId)
      throw std::runtime_error("model BPE: id of '" + token +
                               "' must be an integer in [0, 16777216)");
    const int i = id.get<int>();
    vocab_[token] = i;
    if (i >= (int)id_to_token_.size()) id_to_token_.resize(i + 1);
    id_to_token_[i] = token;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto it = vocab_.find(std::string_view(name));
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }
  const std::string unk = optional_string(model, "unk_token");
  if (!unk.empty()) {
    auto it = vocab_.find(unk);
    if (it == vocab_.end())
      throw std::runtime_error("model BPE: unk_token '" + unk + "' is not in the vocabulary");
    unk_id_ = it->second;
  }
  read_merges(model.at("merges"));
}

void HfBpe::read_merges(const nlohmann::json& merges) {
  int rank = 0;
  for (const nlohmann::json& m : merges) {
    std::string a, b;
    if (m.is_string()) {
      const std::string line = m.get<std::string>();
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
        throw std::runtime_error("model BPE: merge '" + line + "' is not two tokens and a space");
      a = line.substr(0, space), b = line.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>(), b = m[1].get<std::string>();
    } else {
      throw std::runtime_error("model BPE: merge " + m.dump() + " is not \"a b\" or [a, b]");
    }
    if (b.size() < prefix_.size())
      throw std::runtime_error("model BPE: merge '" + a + " " + b + "' lacks the subword prefix");
    auto ia = vocab_.find(a), ib = vocab_.find(b), im = vocab_.find(a + b.substr(prefix_.size()));
    if (ia == vocab_.end() || ib == vocab_.end() || im == vocab_.end())
      throw std::runtime_error("model BPE: merge '" + a + " " + b +
                               "' uses or makes a token missing from the vocabulary");
    merges_[bpe_pair_key(ia->second, ib->second)] = {rank++, im->second};
  }
}

void HfBpe::initial_symbols(std::string_view piece, std::vector<int>* symbols) const {
  int unk_length = 0;  // a pending unknown run (fuse_unk) of this many bytes; 0: none
  std::string s;
  for (size_t i = 0; i < piece.size();) {
    char32_t cp = 0;
    const int n = std::max(decode_utf8(piece, i, &cp), 1);
    s.assign(piece.substr(i, n));
    if (i > 0) s.insert(0, prefix_);
    if (i + n == piece.size()) s += suffix_;
    i += n;
    auto it = vocab_.find(s);
    if (it != vocab_.end()) {
      if (unk_length) symbols->push_back(unk_id_), unk_length = 0;
      symbols->push_back(it->second);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char c : s) all = all && byte_ids_[c] >= 0;
      if (all) {  // as HF: a pending unknown run is not flushed first
        for (unsigned char c : s) symbols->push_back(byte_ids_[c]);
        continue;
      }
    }
    if (unk_id_ < 0) continue;  // HF drops a character it cannot represent
    if (unk_length && fuse_unk_) {
      unk_length += n;
      continue;
    }
    if (unk_length) symbols->push_back(unk_id_);
    unk_length = n;
  }
  if (unk_length) symbols->push_back(unk_id_);
}

void HfBpe::tokenize(std::string_view piece, std::vector<int>* ids, bool byte_level) const {
  if (piece.empty()) return;
  thread_local PieceCache cache;
  thread_local std::uint64_t cache_owner = 0;
  if (cache_owner != cache_id_) cache.clear(), cache_owner = cache_id_;
  if (!PieceCache::worth_caching(piece)) {
    const std::vector<int> piece_ids = encode_uncached(piece, byte_level);
    ids->insert(ids->end(), piece_ids.begin(), piece_ids.end());
    return;
  }
  const std::uint64_t hash = PieceCache::hash(piece);
  PieceCache::Ids found = cache.find(piece, hash);
  if (!found.begin) found = cache.insert(piece, hash, encode_uncached(piece, byte_level));
  ids->insert(ids->end(), found.begin, found.end);
}

std::vector<int> HfBpe::encode_uncached(std::string_view piece, bool byte_level) const {
  std::string text;
  if (byte_level)
    for (unsigned char c : piece) text += byte_level_char(c);
  else
    text = piece;
  std::vector<int> symbols;
  auto whole = ignore_merges_ ? vocab_.find(text) : vocab_.end();
  if (whole != vocab_.end()) return {whole->second};  // ignore_merges: a word in the vocabulary
  initial_symbols(text, &symbols);
  merge_symbols(merges_, MergeOrder::kLowestRankFirst, &symbols);
  return symbols;
}

}  // namespace trident::tokenizer
