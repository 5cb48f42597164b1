#include "curation/langid.h"

// CLD2's public header uses FILE without including <cstdio>.
#include <cstdio>
// clang-format off
#include <cld2/public/compact_lang_det.h>
#include <cld2/internal/lang_script.h>
// clang-format on

namespace trident::curation {

LanguageGuess identify_language(std::string_view text) {
  CLD2::Language language3[3];
  int percent3[3];
  int text_bytes = 0;
  bool reliable = false;
  CLD2::ExtDetectLanguageSummary(text.data(), (int)text.size(), /*is_plain_text=*/true, language3,
                                 percent3, &text_bytes, &reliable);
  LanguageGuess g;
  g.code = CLD2::LanguageCode(language3[0]);
  g.confidence = text_bytes > 0 ? percent3[0] / 100.0 : 0.0;
  g.reliable = reliable;
  return g;
}

}  // namespace trident::curation
