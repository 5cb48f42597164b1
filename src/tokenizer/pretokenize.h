#pragma once
// GPT-2's pre-tokenization, the regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// as a hand-written scanner over code points (std::regex has no \p{..}, RE2 no look-ahead;
// a scanner is also several times faster than a backtracking engine).
#include <string_view>
#include <vector>

namespace trident::tokenizer {

struct Piece {
  size_t begin, end;  // byte range in the text
};

// Splits valid UTF-8 text into pieces. js_whitespace selects ECMAScript's \s (the npm
// encoders) instead of Unicode White_Space (GPT-2's Python encoder).
void pretokenize(std::string_view text, bool js_whitespace, std::vector<Piece>* pieces);

}  // namespace trident::tokenizer
