#include "tokenizer/hf_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>

#include "core/files.h"

namespace trident::tokenizer {

struct HfRegex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

HfRegex::HfRegex(const std::string& pattern, bool use_scanner)
    : pattern_(pattern),
      code_(std::make_unique<Code>()),
      scanner_(use_scanner ? HfSplitScanner::for_pattern(pattern) : nullptr) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // UCP: \s, \w, \d and POSIX classes follow Unicode properties, as Oniguruma's do on UTF-8.
  code_->code = pcre2_compile((PCRE2_SPTR)pattern.data(), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                              &error, &offset, nullptr);
  if (!code_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw std::runtime_error("regex '" + pattern + "' does not compile at offset " +
                             std::to_string(offset) + ": " + (const char*)message);
  }
  code_->jit = pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE) == 0;
}

HfRegex HfRegex::literal(const std::string& literal) {
  return HfRegex(escape_regex(literal));
}

HfRegex::~HfRegex() = default;
HfRegex::HfRegex(HfRegex&&) noexcept = default;
HfRegex& HfRegex::operator=(HfRegex&&) noexcept = default;

namespace {

// One match-data block per thread, large enough for the whole-match pair every caller reads.
pcre2_match_data* thread_match_data() {
  struct Holder {
    pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
    ~Holder() { pcre2_match_data_free(data); }
  };
  thread_local Holder holder;
  return holder.data;
}

size_t utf8_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4;
}

}  // namespace

void HfRegex::find_all(std::string_view text,
                       std::vector<std::pair<size_t, size_t>>* matches) const {
  if (scanner_) return scanner_->find_all(text, matches);
  pcre2_match_data* data = thread_match_data();
  const auto* subject = (PCRE2_SPTR)text.data();
  size_t start = 0;
  long previous_end = -1;
  while (start <= text.size()) {
    // Callers validate the text as UTF-8 once, so PCRE2 need not check it on every call.
    int rc = code_->jit ? pcre2_jit_match(code_->code, subject, text.size(), start,
                                          PCRE2_NO_UTF_CHECK, data, nullptr)
                        : pcre2_match(code_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK,
                                      data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      // The pattern came from a file: one that backtracks past PCRE2's limits is the file's.
      throw FormatError("regex '" + pattern_ + "': " + (const char*)message);
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    const size_t begin = ovector[0], end = ovector[1];
    if (end == begin && (long)end == previous_end) {  // step over one character
      if (start >= text.size()) return;
      start += utf8_length((unsigned char)text[start]);
      continue;
    }
    matches->emplace_back(begin, end);
    start = end;
    previous_end = (long)end;
  }
}

HfRegex parse_hf_pattern(const nlohmann::json& pattern, const std::string& where) {
  if (pattern.is_object() && pattern.size() == 1) {
    if (pattern.contains("String") && pattern["String"].is_string())
      return HfRegex::literal(pattern["String"].get<std::string>());
    if (pattern.contains("Regex") && pattern["Regex"].is_string())
      return HfRegex(pattern["Regex"].get<std::string>());
  }
  throw std::runtime_error(where + ": pattern must be {\"String\": ...} or {\"Regex\": ...}, not " +
                           pattern.dump());
}

std::string escape_regex(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}-/#").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace trident::tokenizer
