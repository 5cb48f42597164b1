#include "tokenizer/huggingface_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/files.h"
#include "tokenizer/gpt2_tokenizer.h"
#include "tokenizer/unicode_classes.h"

namespace trident::tokenizer {

namespace fs = std::filesystem;

HfTokenizerFiles find_hf_tokenizer_files(const std::string& path) {
  HfTokenizerFiles files;
  const fs::path p = path;
  files.tokenizer_json = fs::is_directory(p) ? (p / "tokenizer.json").string() : path;
  const fs::path config = fs::path(files.tokenizer_json).parent_path() / "tokenizer_config.json";
  if (fs::is_regular_file(config)) files.tokenizer_config = config.string();
  return files;
}

namespace {

nlohmann::json parse_json(std::string_view text, const std::string& name) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(name + ": not valid JSON: " + e.what());
  }
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_json(ss.str(), path);
}

// A special token named in tokenizer_config.json: a string, or {"content": ...}; "" if none.
std::string config_token(const nlohmann::json& config, const char* key) {
  if (!config.contains(key)) return "";
  const nlohmann::json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return "";
}

// A ByteLevel step that only maps bytes (no regex, no prefix space).
bool maps_bytes_only(const nlohmann::json& step) {
  return step.is_object() && step.value("type", "") == "ByteLevel" &&
         !step.value("use_regex", true) && !step.value("add_prefix_space", true);
}

// Removes such a step when it is the pre-tokenizers' last; true if it did.
bool take_final_byte_level(nlohmann::json* pre_tokenizer) {
  if (maps_bytes_only(*pre_tokenizer)) {
    *pre_tokenizer = nullptr;
    return true;
  }
  if (pre_tokenizer->is_object() && pre_tokenizer->value("type", "") == "Sequence" &&
      pre_tokenizer->contains("pretokenizers") && (*pre_tokenizer)["pretokenizers"].is_array() &&
      !(*pre_tokenizer)["pretokenizers"].empty() &&
      maps_bytes_only((*pre_tokenizer)["pretokenizers"].back())) {
    (*pre_tokenizer)["pretokenizers"].erase((*pre_tokenizer)["pretokenizers"].size() - 1);
    return true;
  }
  return false;
}

}  // namespace

HuggingFaceTokenizer::HuggingFaceTokenizer(const std::string& path)
    : files_(find_hf_tokenizer_files(path)) {
  build(read_json(files_.tokenizer_json));
}

HuggingFaceTokenizer::HuggingFaceTokenizer(const std::string& name, const nlohmann::json& j) {
  files_.tokenizer_json = name;
  build(j);
}

std::unique_ptr<HuggingFaceTokenizer> HuggingFaceTokenizer::from_json_text(
    std::string_view text, const std::string& name) {
  return std::unique_ptr<HuggingFaceTokenizer>(
      new HuggingFaceTokenizer(name, parse_json(text, name)));
}

void HuggingFaceTokenizer::build(const nlohmann::json& j) {
  try {
    if (!j.is_object() || !j.contains("model"))
      throw std::runtime_error("not a tokenizer.json (no \"model\")");
    normalizer_ = parse_normalizer(j.value("normalizer", nlohmann::json()));
    nlohmann::json pre_tokenizer = j.value("pre_tokenizer", nlohmann::json());
    byte_level_last_ = take_final_byte_level(&pre_tokenizer);
    pre_tokenizer_ = parse_pre_tokenizer(pre_tokenizer);
    model_ = std::make_unique<HfBpe>(j["model"]);
    added_ = std::make_unique<HfAddedTokens>(j.value("added_tokens", nlohmann::json()),
                                             normalizer_.get(), model_->vocab());
    decoder_ = parse_decoder(j.value("decoder", nlohmann::json()));
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(files_.tokenizer_json + ": " + e.what());
  } catch (const std::runtime_error& e) {
    throw FormatError(files_.tokenizer_json + ": " + e.what());
  }
  vocab_size_ = model_->size();
  for (const HfAddedToken& t : added_->tokens()) {
    added_text_[t.id] = t.text;
    vocab_size_ = std::max(vocab_size_, t.id + 1);
  }
  read_config();
}

int HuggingFaceTokenizer::token_id(const std::string& content) const {
  for (const HfAddedToken& t : added_->tokens())
    if (t.content == content) return t.id;
  auto it = model_->vocab().find(content);
  return it == model_->vocab().end() ? -1 : it->second;
}

void HuggingFaceTokenizer::read_config() {
  std::string bos, eos;
  if (!files_.tokenizer_config.empty()) {
    const nlohmann::json config = read_json(files_.tokenizer_config);
    bos = config_token(config, "bos_token");
    eos = config_token(config, "eos_token");
    const std::string& where = files_.tokenizer_config;
    if (!bos.empty() && (bos_ = token_id(bos)) < 0)
      throw FormatError(where + ": bos_token '" + bos + "' is not in the vocabulary");
    if (!eos.empty() && (eos_ = token_id(eos)) < 0)
      throw FormatError(where + ": eos_token '" + eos + "' is not in the vocabulary");
  }
  // Without a config naming it, the usual end-of-text tokens, as Megatron needs one.
  for (const char* name : {"<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>"})
    if (eos_ < 0) eos_ = token_id(name);
  if (eos_ < 0)
    throw FormatError(files_.tokenizer_json +
                      ": no end-of-document token: give tokenizer_config.json with an "
                      "eos_token, or a vocabulary with <|endoftext|>, </s> or <eos>");
}

void HuggingFaceTokenizer::encode_segment(std::string_view raw, bool at_start,
                                          std::vector<int>* ids) const {
  // Normalized text lives here; text the normalizer would leave alone is read in place.
  thread_local std::string normalized;
  std::string_view text = raw;
  if (normalizer_ && !normalizer_->leaves_unchanged(raw)) {
    normalized.assign(raw);
    normalizer_->normalize(&normalized);
    text = normalized;
  }
  thread_local std::vector<HfSegment> segments;
  segments.clear();
  if (added_->any(true))
    added_->split(text, true, &segments);
  else if (!text.empty())
    segments.push_back({0, text.size(), -1});
  for (const HfSegment& s : segments) {
    if (s.id >= 0)
      ids->push_back(s.id);
    else
      encode_pieces(text.substr(s.begin, s.end - s.begin), at_start && s.begin == 0, ids);
  }
}

void HuggingFaceTokenizer::encode_pieces(std::string_view text, bool at_start,
                                         std::vector<int>* ids) const {
  thread_local std::vector<std::pair<size_t, size_t>> ranges;
  ranges.clear();
  if (!pre_tokenizer_) {
    model_->tokenize(text, ids, byte_level_last_);
  } else if (pre_tokenizer_->cut(text, &ranges)) {  // pieces are ranges of the text
    for (const auto& [begin, end] : ranges)
      model_->tokenize(text.substr(begin, end - begin), ids, byte_level_last_);
  } else {
    std::vector<HfPiece> pieces = {{std::string(text), at_start}};
    pre_tokenizer_->pre_tokenize(&pieces);
    for (const HfPiece& p : pieces) model_->tokenize(p.text, ids, byte_level_last_);
  }
}

void HuggingFaceTokenizer::encode(std::string_view text, std::vector<int>* ids) const {
  size_t bad = 0;
  if (!is_valid_utf8(text, &bad))
    throw std::invalid_argument("text is not valid UTF-8 at byte " + std::to_string(bad));
  thread_local std::vector<HfSegment> segments;
  segments.clear();
  if (added_->any(false))
    added_->split(text, false, &segments);
  else if (!text.empty())
    segments.push_back({0, text.size(), -1});
  for (const HfSegment& s : segments) {
    if (s.id >= 0)
      ids->push_back(s.id);
    else
      encode_segment(text.substr(s.begin, s.end - s.begin), s.begin == 0, ids);
  }
}

const std::string& HuggingFaceTokenizer::token_text(int id) const {
  if (id < 0 || id >= vocab_size_)
    throw std::out_of_range("token id " + std::to_string(id) + " outside the vocabulary");
  auto it = added_text_.find(id);
  if (it != added_text_.end()) return it->second;
  if (id < model_->size()) return model_->token(id);
  static const std::string none;
  return none;
}

std::string HuggingFaceTokenizer::decode_bytes(const std::vector<int>& ids) const {
  std::string out;
  for (int id : ids) {
    std::vector<std::string> tokens = {token_text(id)};
    if (decoder_) decoder_->decode_chain(&tokens, true);
    for (const std::string& t : tokens) out += t;
  }
  return out;
}

std::string HuggingFaceTokenizer::decode(const std::vector<int>& ids) const {
  std::vector<std::string> tokens;
  for (int id : ids) tokens.push_back(token_text(id));
  std::string out;
  if (decoder_) {
    decoder_->decode_chain(&tokens, false);
    for (const std::string& t : tokens) out += t;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
  }
  return sanitize_utf8(out);
}

}  // namespace trident::tokenizer
