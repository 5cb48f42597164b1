#include "tokenizer/gpt2_tokenizer.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "tokenizer/bpe_merge.h"
#include "tokenizer/piece_cache.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode_classes.h"

namespace trident::tokenizer {

char32_t byte_to_unicode(unsigned char b) {
  // Printable Latin-1 bytes map to themselves; the other 68 to U+0100.. in byte order.
  auto printable = [](int c) {
    return (c >= '!' && c <= '~') || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff);
  };
  if (printable(b)) return b;
  int n = 0;
  for (int c = 0; c < b; ++c) n += !printable(c);
  return 256 + n;
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    char32_t cp;
    int n = decode_utf8(s, i, &cp);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    // Skip the maximal prefix of a valid sequence (WHATWG / Python "replace" semantics).
    unsigned char c = s[i];
    int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    size_t j = i + 1;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
    if (c >= 0xc2 && c <= 0xf4) {
      for (int k = 1; k < len && j < s.size(); ++k, ++j) {
        unsigned char d = s[j];
        if (d < lo || d > hi) break;
        lo = 0x80, hi = 0xbf;
      }
    }
    out += "\xef\xbf\xbd";
    i = j;
  }
  return out;
}

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Byte-level token text (printable code points) back to raw bytes.
std::string token_text_to_bytes(const std::string& text, const std::string& path) {
  static const auto table = [] {
    std::unordered_map<char32_t, unsigned char> t;
    for (int b = 0; b < 256; ++b) t[byte_to_unicode((unsigned char)b)] = (unsigned char)b;
    return t;
  }();
  std::string bytes;
  for (size_t i = 0; i < text.size();) {
    char32_t cp;
    int n = decode_utf8(text, i, &cp);
    auto it = n ? table.find(cp) : table.end();
    if (it == table.end())
      throw std::runtime_error(path + ": token '" + text + "' is not byte-level BPE text");
    bytes += (char)it->second;
    i += n;
  }
  return bytes;
}

}  // namespace

GPT2Tokenizer::GPT2Tokenizer(const std::string& vocab_file, const std::string& merges_file)
    : cache_id_(PieceCache::next_owner_id()) {
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(read_file(vocab_file));
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(vocab_file + ": not valid JSON: " + e.what());
  }
  if (!vocab.is_object() || vocab.empty())
    throw std::runtime_error(vocab_file + ": expected a JSON object of token -> id");
  std::unordered_map<std::string, int> bytes_to_id;
  id_to_bytes_.assign(vocab.size(), std::string());
  std::vector<bool> seen(vocab.size(), false);
  for (auto& [text, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<long>() < 0 || id.get<long>() >= (long)vocab.size())
      throw std::runtime_error(vocab_file + ": id of '" + text + "' must be in [0, " +
                               std::to_string(vocab.size()) + ")");
    int i = id.get<int>();
    if (seen[i]) throw std::runtime_error(vocab_file + ": id " + std::to_string(i) + " used twice");
    seen[i] = true;
    if (text == "<|endoftext|>") {
      id_to_bytes_[i] = text;
      eod_ = i;
      continue;
    }
    id_to_bytes_[i] = token_text_to_bytes(text, vocab_file);
    bytes_to_id[id_to_bytes_[i]] = i;
  }
  for (int b = 0; b < 256; ++b) {
    auto it = bytes_to_id.find(std::string(1, (char)b));
    if (it == bytes_to_id.end())
      throw std::runtime_error(vocab_file + ": missing the token for byte " + std::to_string(b));
    byte_to_id_[b] = it->second;
  }
  std::istringstream merges(read_file(merges_file));
  std::string line;
  int rank = 0, line_no = 0;
  while (std::getline(merges, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
      throw std::runtime_error(merges_file + ":" + std::to_string(line_no) +
                               ": expected two tokens separated by one space");
    std::string a = token_text_to_bytes(line.substr(0, space), merges_file);
    std::string b = token_text_to_bytes(line.substr(space + 1), merges_file);
    auto ia = bytes_to_id.find(a), ib = bytes_to_id.find(b), im = bytes_to_id.find(a + b);
    if (ia == bytes_to_id.end() || ib == bytes_to_id.end() || im == bytes_to_id.end())
      throw std::runtime_error(merges_file + ":" + std::to_string(line_no) + ": merge '" + line +
                               "' uses or makes a token missing from " + vocab_file);
    merges_.emplace(bpe_pair_key(ia->second, ib->second), std::make_pair(rank++, im->second));
  }
  if (merges_.empty()) throw std::runtime_error(merges_file + ": no merges");
}

void GPT2Tokenizer::bpe(std::string_view piece, std::vector<int>* out) const {
  thread_local std::vector<int> word;
  word.clear();
  for (unsigned char c : piece) word.push_back(byte_to_id_[c]);
  merge_symbols(merges_, MergeOrder::kEveryOccurrence, &word);
  out->insert(out->end(), word.begin(), word.end());
  if (word.capacity() > (1u << 16)) word = std::vector<int>();  // a long word's buffer goes back
}

void GPT2Tokenizer::encode(std::string_view text, std::vector<int>* ids) const {
  thread_local std::vector<Piece> pieces;
  // Per-thread cache of piece -> ids; pieces repeat heavily in natural text.
  thread_local PieceCache cache;
  thread_local std::uint64_t cache_owner = 0;
  if (cache_owner != cache_id_) cache.clear(), cache_owner = cache_id_;
  pretokenize(text, js_whitespace_, &pieces);
  for (const Piece& p : pieces) {
    const std::string_view piece = text.substr(p.begin, p.end - p.begin);
    if (!PieceCache::worth_caching(piece)) {
      bpe(piece, ids);
      continue;
    }
    const std::uint64_t hash = PieceCache::hash(piece);
    PieceCache::Ids found = cache.find(piece, hash);
    if (!found.begin) {
      thread_local std::vector<int> piece_ids;
      piece_ids.clear();
      bpe(piece, &piece_ids);
      found = cache.insert(piece, hash, piece_ids);
    }
    ids->insert(ids->end(), found.begin, found.end);
  }
}

std::string GPT2Tokenizer::decode_bytes(const std::vector<int>& ids) const {
  std::string out;
  for (int id : ids) {
    if (id < 0 || id >= vocab_size())
      throw std::out_of_range("token id " + std::to_string(id) + " outside the vocabulary");
    out += id_to_bytes_[id];
  }
  return out;
}

std::string GPT2Tokenizer::decode(const std::vector<int>& ids) const {
  return sanitize_utf8(decode_bytes(ids));
}

}  // namespace trident::tokenizer
