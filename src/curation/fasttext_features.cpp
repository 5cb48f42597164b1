#include "curation/fasttext_features.h"

#include <fasttext/fasttext.h>

#include <algorithm>

namespace trident::curation {

namespace {

// Dictionary::readWord's separators. quality_text turns ' ', \t, \n, \v, \f, \r into single
// spaces, all of them separators here, so splitting the raw text on these gives its tokens.
bool is_separator(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f' || c == '\0';
}

char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

std::uint32_t hash_of(std::string_view s) {
  std::uint32_t h = kFastTextHashSeed;
  for (char c : s) h = fasttext_hash_step(h, c);
  return h;
}

// raw, ASCII-lower-cased, equals the raw.size() bytes at word.
bool lowered_equals(std::string_view raw, const char* word) {
  for (size_t i = 0; i < raw.size(); ++i)
    if (ascii_lower(raw[i]) != word[i]) return false;
  return true;
}

bool lowered_equals_eos(std::string_view raw) {
  return raw.size() == 4 && lowered_equals(raw, "</s>");  // fasttext::Dictionary::EOS
}

std::uint32_t eos_hash() {
  static const std::uint32_t h = hash_of("</s>");
  return h;
}

}  // namespace

std::unique_ptr<FastTextFeatures> FastTextFeatures::create(const fasttext::FastText& model) {
  const fasttext::Args args = model.getArgs();
  if (model.isQuant() || args.label.empty() || (args.wordNgrams > 1 && args.bucket <= 0))
    return nullptr;
  return std::unique_ptr<FastTextFeatures>(new FastTextFeatures(model));
}

FastTextFeatures::FastTextFeatures(const fasttext::FastText& model) : dict_(model.getDictionary()) {
  const fasttext::Args args = model.getArgs();
  label_ = args.label;
  word_ngrams_ = args.wordNgrams;
  maxn_ = args.maxn;
  bucket_ = (std::uint64_t)std::max(0, args.bucket);
  nwords_ = dict_->nwords();
  size_t capacity = 16;
  while (capacity < 2 * (size_t)nwords_) capacity *= 2;
  slots_.resize(capacity);
  // Words only: ids [0, nwords) are the words (fastText sorts labels after them). A token
  // that is a label in the dictionary is not a feature, and neither is one missing here.
  for (std::int32_t id = 0; id < nwords_; ++id) {
    const std::string w = dict_->getWord(id);
    const std::uint32_t h = hash_of(w);
    size_t at = h & (capacity - 1);
    while (slots_[at].id >= 0) at = (at + 1) & (capacity - 1);
    slots_[at] = {h, id, (std::uint32_t)words_.size(), (std::uint32_t)w.size()};
    words_ += w;
  }
}

std::int32_t FastTextFeatures::find(std::string_view token, std::uint32_t hash) const {
  const size_t mask = slots_.size() - 1;
  for (size_t at = hash & mask;; at = (at + 1) & mask) {
    const Slot& s = slots_[at];
    if (s.id < 0) return -1;
    if (s.hash == hash && s.length == token.size() &&
        lowered_equals(token, words_.data() + s.offset))
      return s.id;
  }
}

// Dictionary::getLine's loop body for one token: its ids (Dictionary::addSubwords) and its
// hash for the word n-grams. Labels add neither.
void FastTextFeatures::add_token(std::string_view token, std::uint32_t hash,
                                 std::vector<std::int32_t>* ids,
                                 std::vector<std::int32_t>* hashes) const {
  const std::int32_t wid = find(token, hash);
  if (wid < 0 && token.size() >= label_.size() &&
      lowered_equals(token.substr(0, label_.size()), label_.data()))
    return;
  if (wid >= 0 && maxn_ <= 0) {
    ids->push_back(wid);
  } else if (wid >= 0) {
    const std::vector<std::int32_t>& sub = dict_->getSubwords(wid);
    ids->insert(ids->end(), sub.begin(), sub.end());
  } else if (maxn_ > 0 && !lowered_equals_eos(token)) {
    std::string word = "<";  // BOW + token + EOW
    for (char c : token) word.push_back(ascii_lower(c));
    dict_->computeSubwords(word + ">", *ids);
  }
  hashes->push_back((std::int32_t)hash);
}

// Dictionary::addWordNgrams with pushHash for an unpruned dictionary, same integer types:
// the int32 hashes widen to uint64 with their sign, as there.
void FastTextFeatures::add_word_ngrams(const std::vector<std::int32_t>& hashes,
                                       std::vector<std::int32_t>* ids) const {
  const std::int32_t n = word_ngrams_, size = (std::int32_t)hashes.size();
  for (std::int32_t i = 0; i < size; ++i) {
    std::uint64_t h = hashes[i];
    for (std::int32_t j = i + 1; j < size && j < i + n; ++j) {
      h = h * 116049371 + hashes[j];
      ids->push_back(nwords_ + (std::int32_t)(h % bucket_));
    }
  }
}

// The tokens getLine reads: up to and including the first </s>, which ends the line whether
// it is the "\n" at the end or a "</s>" written in the text (getLine stops there too).
void FastTextFeatures::tokenize(std::string_view text, std::vector<Token>* tokens) {
  tokens->clear();
  std::uint32_t h = kFastTextHashSeed;
  size_t begin = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && !is_separator(text[i])) {
      h = fasttext_hash_step(h, ascii_lower(text[i]));
      continue;
    }
    if (i > begin) {
      tokens->push_back({(std::uint32_t)begin, (std::uint32_t)(i - begin), h});
      if (lowered_equals_eos(text.substr(begin, i - begin))) return;
    }
    h = kFastTextHashSeed;
    begin = i + 1;
  }
  tokens->push_back({(std::uint32_t)text.size(), 0, eos_hash()});  // the final "\n"
}

void FastTextFeatures::line_ids(std::string_view text, std::vector<std::int32_t>* ids,
                                Scratch* scratch) const {
  ids->clear();
  scratch->word_hashes.clear();
  tokenize(text, &scratch->tokens);
  // Each token's slot is a likely cache miss: fetched a few tokens ahead, they overlap.
  constexpr size_t kAhead = 8;
  const std::vector<Token>& tokens = scratch->tokens;
  const size_t mask = slots_.size() - 1;
  for (size_t k = 0; k < tokens.size(); ++k) {
    if (k + kAhead < tokens.size()) __builtin_prefetch(&slots_[tokens[k + kAhead].hash & mask]);
    const Token& t = tokens[k];
    const std::string_view token =
        t.length ? text.substr(t.begin, t.length) : std::string_view("</s>");
    add_token(token, t.hash, ids, &scratch->word_hashes);
  }
  add_word_ngrams(scratch->word_hashes, ids);
}

}  // namespace trident::curation
