#include "tokenizer/hf_pre_tokenizers.h"

#include <array>
#include <stdexcept>

#include "tokenizer/gpt2_tokenizer.h"
#include "tokenizer/hf_chars.h"
#include "tokenizer/hf_regex.h"
#include "tokenizer/hf_split.h"
#include "tokenizer/unicode_classes.h"

namespace trident::tokenizer {

const std::string& byte_level_char(unsigned char byte) {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    for (int b = 0; b < 256; ++b) append_utf8(byte_to_unicode((unsigned char)b), &t[b]);
    return t;
  }();
  return table[byte];
}

namespace {

using Ranges = std::vector<std::pair<size_t, size_t>>;

// Replaces each piece by the ranges cut(piece) returns; a sub-piece is at the input's start
// when its piece is and it begins at the piece's first byte.
template <class Cut>
void cut_each(std::vector<HfPiece>* pieces, Cut cut) {
  std::vector<HfPiece> out;
  out.reserve(pieces->size() * 2);
  for (HfPiece& piece : *pieces) {
    const Ranges ranges = cut(piece);
    for (const auto& [begin, end] : ranges)
      out.push_back({piece.text.substr(begin, end - begin), piece.at_start && begin == 0});
  }
  pieces->swap(out);
}

class Split : public HfPreTokenizer {
 public:
  Split(HfRegex pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(std::vector<HfPiece>* pieces) const override {
    cut_each(pieces, [&](const HfPiece& p) {
      Ranges ranges;
      cut(p.text, &ranges);
      return ranges;
    });
  }
  bool cut(std::string_view text, Ranges* ranges) const override {
    thread_local Ranges matches;
    matches.clear();
    pattern_.find_all(text, &matches);
    if (behavior_ != SplitBehavior::kIsolated || invert_) {
      const Ranges pieces =
          apply_split_behavior(spans_from_matches(text.size(), matches, invert_), behavior_);
      ranges->insert(ranges->end(), pieces.begin(), pieces.end());
      return true;
    }
    size_t previous = 0;  // Isolated: the matches and the text between them, as they come
    for (const auto& [begin, end] : matches) {
      if (previous < begin) ranges->emplace_back(previous, begin);
      if (begin < end) ranges->emplace_back(begin, end);
      previous = end;
    }
    if (previous < text.size()) ranges->emplace_back(previous, text.size());
    return true;
  }

 private:
  HfRegex pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// Splits where a character predicate holds, each such character one match.
class CharSplit : public HfPreTokenizer {
 public:
  CharSplit(bool (*predicate)(char32_t), SplitBehavior behavior)
      : predicate_(predicate), behavior_(behavior) {}
  void pre_tokenize(std::vector<HfPiece>* pieces) const override {
    cut_each(pieces, [&](const HfPiece& p) {
      return apply_split_behavior(
          spans_from_matches(p.text.size(), char_matches(p.text, predicate_), false), behavior_);
    });
  }

 private:
  bool (*predicate_)(char32_t);
  SplitBehavior behavior_;
};

class ByteLevel : public HfPreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
    // GPT-2's pattern, as HF's ByteLevel compiles it.
    if (use_regex)
      split_ = std::make_unique<Split>(
          HfRegex(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"),
          SplitBehavior::kIsolated, false);
  }
  void pre_tokenize(std::vector<HfPiece>* pieces) const override {
    if (add_prefix_space_)
      for (HfPiece& p : *pieces)
        if (p.text.empty() || p.text[0] != ' ') p.text.insert(0, " ");
    if (split_) split_->pre_tokenize(pieces);
    for (HfPiece& p : *pieces) {
      std::string mapped;
      mapped.reserve(p.text.size() * 2);
      for (unsigned char c : p.text) mapped += byte_level_char(c);
      p.text = std::move(mapped);
    }
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Split> split_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

class Metaspace : public HfPreTokenizer {
 public:
  Metaspace(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  void pre_tokenize(std::vector<HfPiece>* pieces) const override {
    cut_each(pieces, [&](HfPiece& p) {
      std::string text;
      for (char c : p.text) c == ' ' ? text += replacement_ : text += c;
      const bool starts = text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts &&
          (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && p.at_start)))
        text.insert(0, replacement_);
      p.text = std::move(text);
      if (!split_) return Ranges{{0, p.text.size()}};
      Ranges matches;
      for (size_t at = p.text.find(replacement_); at != std::string::npos;
           at = p.text.find(replacement_, at + replacement_.size()))
        matches.emplace_back(at, at + replacement_.size());
      return apply_split_behavior(spans_from_matches(p.text.size(), matches, false),
                                  SplitBehavior::kMergedWithNext);
    });
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

class PreTokenizerSequence : public HfPreTokenizer {
 public:
  explicit PreTokenizerSequence(std::vector<std::unique_ptr<HfPreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void pre_tokenize(std::vector<HfPiece>* pieces) const override {
    for (const auto& step : steps_) step->pre_tokenize(pieces);
  }
  bool cut(std::string_view text, Ranges* ranges) const override {
    return steps_.size() == 1 && steps_[0]->cut(text, ranges);
  }

 private:
  std::vector<std::unique_ptr<HfPreTokenizer>> steps_;
};

PrependScheme parse_prepend_scheme(const nlohmann::json& j) {
  if (j.contains("prepend_scheme")) {
    const std::string s = j["prepend_scheme"].get<std::string>();
    if (s == "always") return PrependScheme::kAlways;
    if (s == "first") return PrependScheme::kFirst;
    if (s == "never") return PrependScheme::kNever;
    throw std::runtime_error("Metaspace prepend_scheme '" + s + "' is not always, first or never");
  }
  // Files written before prepend_scheme existed say add_prefix_space.
  return j.value("add_prefix_space", true) ? PrependScheme::kAlways : PrependScheme::kNever;
}

std::unique_ptr<HfPreTokenizer> parse_char_delimiter(const nlohmann::json& j) {
  const std::string d = j.at("delimiter").get<std::string>();
  return std::make_unique<Split>(HfRegex::literal(d), SplitBehavior::kRemoved, false);
}

}  // namespace

static std::unique_ptr<HfPreTokenizer> parse_metaspace_pre_tokenizer(const nlohmann::json& j) {
  const std::string replacement = j.value("replacement", std::string("\xe2\x96\x81"));
  char32_t cp = 0;
  if (replacement.empty() || decode_utf8(replacement, 0, &cp) != (int)replacement.size())
    throw std::runtime_error("Metaspace replacement '" + replacement + "' is not one character");
  return std::make_unique<Metaspace>(replacement, parse_prepend_scheme(j), j.value("split", true));
}

std::unique_ptr<HfPreTokenizer> parse_pre_tokenizer(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = j.value("type", "");
  if (type == "ByteLevel")
    return std::make_unique<ByteLevel>(j.value("add_prefix_space", true),
                                       j.value("use_regex", true));
  if (type == "Split")
    return std::make_unique<Split>(parse_hf_pattern(j.at("pattern"), "pre_tokenizer Split"),
                                   parse_split_behavior(j.at("behavior").get<std::string>()),
                                   j.value("invert", false));
  if (type == "Metaspace") return parse_metaspace_pre_tokenizer(j);
  if (type == "Digits")
    return std::make_unique<CharSplit>(is_rust_numeric, j.value("individual_digits", false)
                                                            ? SplitBehavior::kIsolated
                                                            : SplitBehavior::kContiguous);
  if (type == "Whitespace")  // Rust regex \w+|[^\w\s]+ kept, the rest removed
    return std::make_unique<Split>(
        HfRegex(R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}]+|)"
                R"([^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}\p{White_Space}]+)"),
        SplitBehavior::kRemoved, true);
  if (type == "WhitespaceSplit")
    return std::make_unique<CharSplit>(is_rust_whitespace, SplitBehavior::kRemoved);
  if (type == "Punctuation")
    return std::make_unique<CharSplit>(
        is_hf_punctuation, parse_split_behavior(j.value("behavior", std::string("Isolated"))));
  if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<HfPreTokenizer>> steps;
    steps.push_back(std::make_unique<CharSplit>(is_rust_whitespace, SplitBehavior::kRemoved));
    steps.push_back(std::make_unique<CharSplit>(is_hf_punctuation, SplitBehavior::kIsolated));
    return std::make_unique<PreTokenizerSequence>(std::move(steps));
  }
  if (type == "CharDelimiterSplit") return parse_char_delimiter(j);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<HfPreTokenizer>> steps;
    for (const nlohmann::json& step : j.at("pretokenizers")) {
      auto parsed = parse_pre_tokenizer(step);
      if (parsed) steps.push_back(std::move(parsed));
    }
    return std::make_unique<PreTokenizerSequence>(std::move(steps));
  }
  throw std::runtime_error("pre_tokenizer '" + type +
                           "' is not implemented (trident reads ByteLevel, Split, Metaspace, "
                           "Digits, Whitespace, WhitespaceSplit, Punctuation, BertPreTokenizer, "
                           "CharDelimiterSplit, Sequence)");
}

}  // namespace trident::tokenizer
