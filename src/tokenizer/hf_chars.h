#pragma once
// The character predicates HF `tokenizers` takes from Rust's `char` (is_whitespace,
// is_alphanumeric, is_numeric) and from unicode_categories (is_punctuation), over ICU's
// character database.
namespace trident::tokenizer {

bool is_rust_whitespace(char32_t c);    // Unicode White_Space
bool is_rust_numeric(char32_t c);       // general categories Nd, Nl, No
bool is_rust_alphanumeric(char32_t c);  // Alphabetic or numeric
bool is_hf_punctuation(char32_t c);     // ASCII punctuation or a general category P*
bool is_combining_mark(char32_t c);     // general category M* (StripAccents removes these)

}  // namespace trident::tokenizer
