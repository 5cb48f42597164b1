// libFuzzer target: trident curate's input-line parser and what runs next on its text
// (normalisation, the decontamination word scan), as a curation run would on any line.
#include <cstddef>
#include <cstdint>
#include <string>

#include "curation/decontaminate.h"
#include "curation/document.h"
#include "curation/normalize.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string line((const char*)data, size);
  trident::curation::ParsedLine p;
  if (!trident::curation::parse_curate_line(line, "text", "id", &p).empty()) return 0;
  const std::string n = trident::curation::normalize_text(p.text);
  FUZZ_CHECK(trident::curation::normalize_text(n) == n);  // normalising twice changes nothing
  trident::curation::NgramIndex index(3);
  index.add_text(n);
  (void)trident::curation::decontaminate(n, index, {5, 5, 10});
  return 0;
}
