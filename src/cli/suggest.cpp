#include "cli/suggest.h"

#include <algorithm>

namespace trident::cli {

int edit_distance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  // d[i][j]: edits turning a's first i characters into b's first j.
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = 0; i <= n; ++i) d[i][0] = (int)i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = (int)j;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      const int substitution = d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

std::string nearest_name(std::string_view word, const std::vector<std::string>& candidates) {
  // Leading dashes are not part of the name a user meant: "--lr" is short, not 4 long.
  const size_t dashes = std::min(word.find_first_not_of('-'), word.size());
  const int limit = std::clamp((int)(word.size() - dashes) / 3, 1, 3);
  std::string best;
  int best_distance = limit + 1;
  for (const std::string& c : candidates) {
    const int d = edit_distance(word, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace trident::cli
