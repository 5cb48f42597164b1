#include "curation/normalize.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include <array>
#include <cstdint>
#include <stdexcept>

#include "tokenizer/unicode_classes.h"

namespace trident::curation {

namespace {

bool is_ascii(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

// The text in NFC: text itself when it already is (ASCII always is; most corpus text is, so
// ICU is called only where it matters), else the NFC form written to *storage.
std::string_view nfc(std::string_view text, std::string* storage) {
  if (is_ascii(text)) return text;
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) throw std::runtime_error("ICU: no NFC normaliser");
  icu::StringPiece piece(text.data(), (int32_t)text.size());
  if (n->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return text;
  status = U_ZERO_ERROR;
  icu::StringByteSink<std::string> sink(storage, (int32_t)text.size());
  n->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) throw std::runtime_error("ICU: NFC normalisation failed");
  return *storage;
}

// What normalize_text does with a code point.
enum class Action : std::uint8_t { kVisible, kSpace, kNewline, kCr, kDrop };

Action action_of(char32_t cp, const tokenizer::UnicodeClasses& classes) {
  if (cp == '\r') return Action::kCr;
  if (cp == '\n') return Action::kNewline;
  const bool control = cp < 0x20 ? cp != '\t' : (cp == 0x7F || (cp >= 0x80 && cp < 0xA0));
  if (control || cp == 0xFEFF) return Action::kDrop;
  if (cp == '\t' || (classes.of(cp) & tokenizer::kSpace)) return Action::kSpace;
  return Action::kVisible;
}

// action_of for every ASCII byte, looked up without decoding or the class table: ASCII is
// most of any corpus.
const std::array<Action, 128>& ascii_actions() {
  static const std::array<Action, 128> table = [] {
    std::array<Action, 128> t{};
    const auto& classes = tokenizer::UnicodeClasses::instance();
    for (char32_t cp = 0; cp < 128; ++cp) t[cp] = action_of(cp, classes);
    return t;
  }();
  return table;
}

}  // namespace

long count_chars(std::string_view text) {
  long n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

std::string normalize_text(std::string_view input) {
  std::string composed;
  const std::string_view text = nfc(input, &composed);
  const auto& classes = tokenizer::UnicodeClasses::instance();
  const std::array<Action, 128>& ascii = ascii_actions();
  auto visible_ascii = [&](size_t i) {
    return (unsigned char)text[i] < 0x80 && ascii[(unsigned char)text[i]] == Action::kVisible;
  };
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;  // a horizontal whitespace run not yet written
  int newlines = 0;            // newlines since the last visible character
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = (unsigned char)text[i];
    char32_t cp = c;
    int len = 1;
    if (c >= 0x80) {
      len = tokenizer::decode_utf8(text, i, &cp);
      if (len == 0) throw std::invalid_argument("normalize_text: invalid UTF-8");
    }
    const size_t at = i;
    i += len;
    switch (c < 0x80 ? ascii[c] : action_of(cp, classes)) {
      case Action::kCr:
        if (i < text.size() && text[i] == '\n') continue;  // CRLF: the LF counts
        [[fallthrough]];
      case Action::kNewline:
        ++newlines;
        pending_space = false;  // spaces before a line end are dropped
        continue;
      case Action::kDrop:
        continue;
      case Action::kSpace:
        pending_space = true;
        continue;
      case Action::kVisible:
        break;
    }
    if (!out.empty()) {
      if (newlines) {
        out.append(newlines >= 2 ? "\n\n" : "\n");
      } else if (pending_space) {
        out.push_back(' ');
      }
    }
    newlines = 0;
    pending_space = false;
    // The ASCII words that follow, single spaces between them (kept as they are), at once.
    while (c < 0x80 && i < text.size()) {
      if (visible_ascii(i))
        ++i;
      else if (text[i] == ' ' && i + 1 < text.size() && visible_ascii(i + 1))
        i += 2;
      else
        break;
    }
    out.append(text, at, i - at);
  }
  // Dropping a control character can bring a base and a combining mark together
  // ("a\x17\u0301"): compose again so that normalising twice changes nothing.
  std::string recomposed;
  const std::string_view result = nfc(out, &recomposed);
  return result.data() == out.data() ? out : std::string(result);
}

}  // namespace trident::curation
