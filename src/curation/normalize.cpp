#include "curation/normalize.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include <stdexcept>

#include "tokenizer/unicode_classes.h"

namespace trident::curation {

namespace {

bool is_ascii(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

std::string nfc(std::string_view text) {
  // ASCII is always in NFC; most corpus text is, so ICU is called only where it matters.
  if (is_ascii(text)) return std::string(text);
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) throw std::runtime_error("ICU: no NFC normaliser");
  icu::StringPiece piece(text.data(), (int32_t)text.size());
  if (n->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  std::string out;
  icu::StringByteSink<std::string> sink(&out, (int32_t)text.size());
  n->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) throw std::runtime_error("ICU: NFC normalisation failed");
  return out;
}

}  // namespace

long count_chars(std::string_view text) {
  long n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

std::string normalize_text(std::string_view input) {
  const std::string text = nfc(input);
  const auto& classes = tokenizer::UnicodeClasses::instance();
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;  // a horizontal whitespace run not yet written
  int newlines = 0;            // newlines since the last visible character
  size_t i = 0;
  while (i < text.size()) {
    char32_t cp;
    int len = tokenizer::decode_utf8(text, i, &cp);
    if (len == 0) throw std::invalid_argument("normalize_text: invalid UTF-8");
    const size_t at = i;
    i += len;
    if (cp == '\r') {
      if (i < text.size() && text[i] == '\n') continue;  // CRLF: the LF counts
      cp = '\n';
    }
    if (cp == '\n') {
      ++newlines;
      pending_space = false;  // spaces before a line end are dropped
      continue;
    }
    const bool control = cp < 0x20 ? cp != '\t' : (cp == 0x7F || (cp >= 0x80 && cp < 0xA0));
    if (control || cp == 0xFEFF) continue;
    if (cp == '\t' || (classes.of(cp) & tokenizer::kSpace)) {
      pending_space = true;
      continue;
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
    out.append(text, at, len);
  }
  return out;
}

}  // namespace trident::curation
