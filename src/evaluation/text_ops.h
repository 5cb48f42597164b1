#pragma once
// The Python string operations the harness's task definitions apply, on UTF-8: str.strip
// (Unicode whitespace), str.capitalize, len and slices (code points), re.split(r"\s+") counting,
// and the HellaSwag and WikiText text clean-ups. Pure functions.
#include <string>
#include <string_view>
#include <vector>

namespace trident::evaluation {

bool is_python_space(char32_t c);  // str.isspace of one character
std::string python_strip(std::string_view s);
std::string python_rstrip(std::string_view s);
std::string python_lstrip(std::string_view s);
// str.capitalize: first character upper (title) case, the rest lower case.
std::string python_capitalize(std::string_view s);
long code_points(std::string_view s);  // len(str)
// s[start:stop] over code points, with Python's clamping and negative indices.
std::string python_slice(std::string_view s, long start, long stop);
// len(re.split(r"\s+", s)): the whitespace runs plus one.
long python_word_count(std::string_view s);
// s.split(sep) for a one-character separator (empty pieces kept).
std::vector<std::string> split_on(std::string_view s, char sep);
std::string join(const std::vector<std::string>& parts, std::string_view sep, size_t first,
                 size_t last);
std::string replace_all(std::string s, std::string_view from, std::string_view to);
// hellaswag/utils.py preprocess: strip, " [title]" -> ". ", drop "[...]", "  " -> " ".
std::string hellaswag_preprocess(std::string_view text);
// wikitext/preprocess_wikitext.py wikitext_detokenizer.
std::string wikitext_detokenize(std::string_view page);

}  // namespace trident::evaluation
