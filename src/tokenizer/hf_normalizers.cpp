#include "tokenizer/hf_normalizers.h"

#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <stdexcept>
#include <vector>

#include "tokenizer/hf_chars.h"
#include "tokenizer/hf_regex.h"
#include "tokenizer/unicode_classes.h"

namespace trident::tokenizer {

namespace {

bool is_ascii(std::string_view s) {
  unsigned char any = 0;
  for (unsigned char c : s) any |= c;
  return any < 0x80;
}

std::u16string to_utf16(const std::string& s) {
  std::u16string out(s.size() + 1, u'\0');
  int32_t length = 0;
  UErrorCode status = U_ZERO_ERROR;
  u_strFromUTF8((UChar*)out.data(), (int32_t)out.size(), &length, s.data(), (int32_t)s.size(),
                &status);
  if (U_FAILURE(status)) throw std::runtime_error("normalizer: text is not valid UTF-8");
  out.resize(length);
  return out;
}

std::string to_utf8(const std::u16string& s) {
  std::string out(s.size() * 3 + 1, '\0');
  int32_t length = 0;
  UErrorCode status = U_ZERO_ERROR;
  u_strToUTF8(out.data(), (int32_t)out.size(), &length, (const UChar*)s.data(), (int32_t)s.size(),
              &status);
  out.resize(length);
  return out;
}

// One of Unicode's four normalization forms (ASCII text is already in all of them).
class UnicodeForm : public HfNormalizer {
 public:
  explicit UnicodeForm(const std::string& form) {
    UErrorCode status = U_ZERO_ERROR;
    form_ = form == "NFC"    ? unorm2_getNFCInstance(&status)
            : form == "NFD"  ? unorm2_getNFDInstance(&status)
            : form == "NFKC" ? unorm2_getNFKCInstance(&status)
                             : unorm2_getNFKDInstance(&status);
    if (U_FAILURE(status)) throw std::runtime_error("ICU has no " + form + " normalizer");
  }
  bool leaves_unchanged(std::string_view text) const override { return is_ascii(text); }
  void normalize(std::string* text) const override {
    if (is_ascii(*text)) return;
    const std::u16string in = to_utf16(*text);
    std::u16string out(in.size() * 4 + 16, u'\0');
    UErrorCode status = U_ZERO_ERROR;
    int32_t length = unorm2_normalize(form_, (const UChar*)in.data(), (int32_t)in.size(),
                                      (UChar*)out.data(), (int32_t)out.size(), &status);
    if (U_FAILURE(status)) throw std::runtime_error("Unicode normalization failed");
    out.resize(length);
    *text = to_utf8(out);
  }

 private:
  const UNormalizer2* form_ = nullptr;
};

// Rust's char::to_lowercase, one character at a time (no context: a final sigma is σ).
class Lowercase : public HfNormalizer {
 public:
  void normalize(std::string* text) const override {
    std::string out;
    out.reserve(text->size());
    for (size_t i = 0; i < text->size();) {
      unsigned char c = (*text)[i];
      if (c < 0x80) {
        out += (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        ++i;
        continue;
      }
      char32_t cp = 0;
      int n = decode_utf8(*text, i, &cp);
      if (n <= 0) throw std::runtime_error("Lowercase: text is not valid UTF-8");
      UChar in[2], lower[8];
      int32_t in_length = 0;
      U16_APPEND_UNSAFE(in, in_length, (UChar32)cp);
      UErrorCode status = U_ZERO_ERROR;
      int32_t length = u_strToLower(lower, 8, in, in_length, "", &status);
      if (U_FAILURE(status)) throw std::runtime_error("Lowercase: ICU failed");
      out += to_utf8(std::u16string((const char16_t*)lower, length));
      i += n;
    }
    *text = std::move(out);
  }
};

// Removes every character for which drop(cp) holds.
template <class Drop>
void remove_chars(std::string* text, Drop drop) {
  std::string out;
  for (size_t i = 0; i < text->size();) {
    char32_t cp = 0;
    int n = std::max(decode_utf8(*text, i, &cp), 1);
    if (!drop(cp)) out.append(*text, i, n);
    i += n;
  }
  *text = std::move(out);
}

class StripAccents : public HfNormalizer {
 public:
  void normalize(std::string* text) const override { remove_chars(text, is_combining_mark); }
};

class Strip : public HfNormalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string* text) const override {
    size_t begin = 0, end = text->size();
    char32_t cp = 0;
    while (left_ && begin < end) {
      int n = std::max(decode_utf8(*text, begin, &cp), 1);
      if (!is_rust_whitespace(cp)) break;
      begin += n;
    }
    while (right_ && end > begin) {
      size_t start = end - 1;
      while (start > begin && ((unsigned char)(*text)[start] & 0xc0) == 0x80) --start;
      decode_utf8(*text, start, &cp);
      if (!is_rust_whitespace(cp)) break;
      end = start;
    }
    *text = text->substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class Prepend : public HfNormalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string* text) const override {
    if (!text->empty()) text->insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class Replace : public HfNormalizer {
 public:
  Replace(HfRegex pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string* text) const override {
    std::vector<std::pair<size_t, size_t>> matches;
    pattern_.find_all(*text, &matches);
    if (matches.empty()) return;
    std::string out;
    size_t previous = 0;
    for (const auto& [begin, end] : matches) {
      out.append(*text, previous, begin - previous);
      out += content_;
      previous = end;
    }
    out.append(*text, previous, std::string::npos);
    *text = std::move(out);
  }

 private:
  HfRegex pattern_;
  std::string content_;
};

class NormalizerSequence : public HfNormalizer {
 public:
  explicit NormalizerSequence(std::vector<std::unique_ptr<HfNormalizer>> steps)
      : steps_(std::move(steps)) {}
  void normalize(std::string* text) const override {
    for (const auto& step : steps_) step->normalize(text);
  }
  bool leaves_unchanged(std::string_view text) const override {
    for (const auto& step : steps_)
      if (!step->leaves_unchanged(text)) return false;
    return true;
  }

 private:
  std::vector<std::unique_ptr<HfNormalizer>> steps_;
};

}  // namespace

std::unique_ptr<HfNormalizer> parse_normalizer(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = j.value("type", "");
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD")
    return std::make_unique<UnicodeForm>(type);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Strip")
    return std::make_unique<Strip>(j.value("strip_left", true), j.value("strip_right", true));
  if (type == "Prepend") return std::make_unique<Prepend>(j.at("prepend").get<std::string>());
  if (type == "Replace")
    return std::make_unique<Replace>(parse_hf_pattern(j.at("pattern"), "normalizer Replace"),
                                     j.at("content").get<std::string>());
  if (type == "Sequence") {
    std::vector<std::unique_ptr<HfNormalizer>> steps;
    for (const nlohmann::json& step : j.at("normalizers")) {
      auto parsed = parse_normalizer(step);
      if (parsed) steps.push_back(std::move(parsed));
    }
    return std::make_unique<NormalizerSequence>(std::move(steps));
  }
  throw std::runtime_error("normalizer '" + type +
                           "' is not implemented (trident reads NFC, NFD, NFKC, NFKD, Lowercase, "
                           "StripAccents, Strip, Prepend, Replace, Sequence)");
}

}  // namespace trident::tokenizer
