#include "tokenizer/hf_decoders.h"

#include <stdexcept>
#include <unordered_map>

#include "tokenizer/gpt2_tokenizer.h"
#include "tokenizer/hf_regex.h"
#include "tokenizer/unicode_classes.h"

namespace trident::tokenizer {

namespace {

std::vector<char32_t> code_points(const std::string& s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    int n = decode_utf8(s, i, &cp);
    if (n <= 0) cp = (unsigned char)s[i], n = 1;
    out.push_back(cp);
    i += n;
  }
  return out;
}

char32_t single_char(const std::string& s, const std::string& what) {
  std::vector<char32_t> cps = code_points(s);
  if (cps.size() != 1) throw std::runtime_error(what + " must be one character, not '" + s + "'");
  return cps[0];
}

// A count: absent is 0; anything but a non-negative integer is refused (a float past the
// integers' range would not convert).
size_t count_field(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) return 0;
  const nlohmann::json& v = j[key];
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<long long>() >= 0))
    throw std::runtime_error(std::string("decoder Strip ") + key +
                             " must be a non-negative integer");
  return v.get<size_t>();
}

// Every token back to its bytes through GPT-2's alphabet (a token with other characters, an
// added token's text, stays as it is), all joined into one.
class ByteLevelDecoder : public HfDecoder {
 public:
  ByteLevelDecoder() {
    for (int b = 0; b < 256; ++b) bytes_[byte_to_unicode((unsigned char)b)] = (char)b;
  }
  void decode_chain(std::vector<std::string>* tokens, bool) const override {
    std::string out;
    for (const std::string& token : *tokens) {
      std::string bytes;
      bool byte_level = true;
      for (char32_t cp : code_points(token)) {
        auto it = bytes_.find(cp);
        if (it == bytes_.end()) {
          byte_level = false;
          break;
        }
        bytes += it->second;
      }
      out += byte_level ? bytes : token;
    }
    *tokens = {out};
  }

 private:
  std::unordered_map<char32_t, char> bytes_;
};

class MetaspaceDecoder : public HfDecoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool strip_first)
      : replacement_(replacement), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>* tokens, bool alone) const override {
    for (size_t i = 0; i < tokens->size(); ++i) {
      std::string out;
      for (char32_t cp : code_points((*tokens)[i])) {
        if (cp != replacement_)
          append_utf8(cp, &out);
        else if (i > 0 || alone || !strip_first_)
          out += ' ';
      }
      (*tokens)[i] = std::move(out);
    }
  }

 private:
  char32_t replacement_;
  bool strip_first_;
};

// <0xXX> tokens back to bytes; a run that is not UTF-8 becomes one U+FFFD per byte.
class ByteFallbackDecoder : public HfDecoder {
 public:
  void decode_chain(std::vector<std::string>* tokens, bool alone) const override {
    std::vector<std::string> out;
    std::string bytes;
    auto flush = [&] {
      if (bytes.empty()) return;
      if (alone || is_valid_utf8(bytes))
        out.push_back(bytes);
      else
        for (size_t i = 0; i < bytes.size(); ++i) out.push_back("\xef\xbf\xbd");
      bytes.clear();
    };
    for (std::string& token : *tokens) {
      int value = -1;
      if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>' &&
          std::isxdigit((unsigned char)token[3]) && std::isxdigit((unsigned char)token[4]))
        value = std::stoi(token.substr(3, 2), nullptr, 16);
      if (value >= 0) {
        bytes += (char)value;
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    tokens->swap(out);
  }
};

class FuseDecoder : public HfDecoder {
 public:
  void decode_chain(std::vector<std::string>* tokens, bool) const override {
    std::string out;
    for (const std::string& t : *tokens) out += t;
    *tokens = {out};
  }
};

// Up to `start` leading and `stop` trailing copies of one character off every token.
class StripDecoder : public HfDecoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>* tokens, bool) const override {
    for (std::string& token : *tokens) {
      std::vector<char32_t> cps = code_points(token);
      size_t begin = 0, end = cps.size();
      while (begin < start_ && begin < cps.size() && cps[begin] == content_) ++begin;
      for (size_t i = 0; i < stop_ && end > begin && cps[end - 1] == content_; ++i) --end;
      token.clear();
      for (size_t i = begin; i < end; ++i) append_utf8(cps[i], &token);
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

class ReplaceDecoder : public HfDecoder {
 public:
  ReplaceDecoder(HfRegex pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>* tokens, bool) const override {
    for (std::string& token : *tokens) {
      if (!is_valid_utf8(token)) continue;  // raw bytes of a streamed byte token
      std::vector<std::pair<size_t, size_t>> matches;
      pattern_.find_all(token, &matches);
      std::string out;
      size_t previous = 0;
      for (const auto& [begin, end] : matches) {
        out.append(token, previous, begin - previous);
        out += content_;
        previous = end;
      }
      out.append(token, previous, std::string::npos);
      token = std::move(out);
    }
  }

 private:
  HfRegex pattern_;
  std::string content_;
};

class SequenceDecoder : public HfDecoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<HfDecoder>> steps)
      : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>* tokens, bool alone) const override {
    for (const auto& step : steps_) step->decode_chain(tokens, alone);
  }

 private:
  std::vector<std::unique_ptr<HfDecoder>> steps_;
};

std::unique_ptr<HfDecoder> parse_metaspace_decoder(const nlohmann::json& j) {
  const char32_t replacement =
      single_char(j.value("replacement", std::string("\xe2\x96\x81")), "Metaspace replacement");
  bool strip_first = j.value("add_prefix_space", true);
  if (j.contains("prepend_scheme")) strip_first = j["prepend_scheme"] != "never";
  return std::make_unique<MetaspaceDecoder>(replacement, strip_first);
}

}  // namespace

std::unique_ptr<HfDecoder> parse_decoder(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = j.value("type", "");
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") return parse_metaspace_decoder(j);
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip")
    return std::make_unique<StripDecoder>(
        single_char(j.at("content").get<std::string>(), "Strip content"), count_field(j, "start"),
        count_field(j, "stop"));
  if (type == "Replace")
    return std::make_unique<ReplaceDecoder>(parse_hf_pattern(j.at("pattern"), "decoder Replace"),
                                            j.at("content").get<std::string>());
  if (type == "Sequence") {
    std::vector<std::unique_ptr<HfDecoder>> steps;
    for (const nlohmann::json& step : j.at("decoders"))
      if (auto parsed = parse_decoder(step)) steps.push_back(std::move(parsed));
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  throw std::runtime_error("decoder '" + type +
                           "' is not implemented (trident reads ByteLevel, Metaspace, "
                           "ByteFallback, Fuse, Strip, Replace, Sequence)");
}

}  // namespace trident::tokenizer
