#include "tokenizer/hf_chars.h"

#include <unicode/uchar.h>

namespace trident::tokenizer {

bool is_rust_whitespace(char32_t c) {
  return u_hasBinaryProperty((UChar32)c, UCHAR_WHITE_SPACE);
}

bool is_rust_numeric(char32_t c) {
  const int8_t type = u_charType((UChar32)c);
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

bool is_rust_alphanumeric(char32_t c) {
  return u_isUAlphabetic((UChar32)c) || is_rust_numeric(c);
}

bool is_hf_punctuation(char32_t c) {
  if (c < 0x80)
    return (c >= 0x21 && c <= 0x2f) || (c >= 0x3a && c <= 0x40) || (c >= 0x5b && c <= 0x60) ||
           (c >= 0x7b && c <= 0x7e);
  const int32_t mask = U_GET_GC_MASK((UChar32)c);
  return (mask & U_GC_P_MASK) != 0;
}

bool is_combining_mark(char32_t c) {
  return (U_GET_GC_MASK((UChar32)c) & U_GC_M_MASK) != 0;
}

}  // namespace trident::tokenizer
