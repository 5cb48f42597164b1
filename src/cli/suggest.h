#pragma once
// "Did you mean": the nearest valid name to a mistyped flag, command or key.
#include <string>
#include <string_view>
#include <vector>

namespace trident::cli {

// Edit distance counting an insertion, a deletion, a substitution and a swap of two
// neighbouring characters as one edit each (optimal string alignment): "trian" is one edit
// from "train", "--hiden-size" one from "--hidden-size".
int edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `word`, or "" when none is near enough to be what was meant: at
// most a third of the word's length in edits (at least 1, at most 3). Ties go to the first.
std::string nearest_name(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace trident::cli
