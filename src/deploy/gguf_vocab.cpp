#include "deploy/gguf_vocab.h"

#include <sentencepiece_processor.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chat_template/chat_template.h"
#include "core/files.h"
#include "tokenizer/huggingface_tokenizer.h"

namespace trident::deploy {

namespace fs = std::filesystem;

namespace {

// llama.cpp's token types (llama.h's LLAMA_TOKEN_TYPE_*).
enum TokenType : std::int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6
};

// The pre-tokenizer regexes of Llama 3 and Qwen2 (their tokenizer.json's Split patterns),
// which llama.cpp implements under these names.
constexpr const char* kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError(path + ": cannot be read");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) throw FormatError(path + ": not valid JSON");
  return j;
}

constexpr int kMaxTokens = 1 << 24;  // more than any vocabulary; a bound on what a file claims

// What the GGUF vocabulary is made of, in id order once complete.
struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<std::int32_t> types;
  std::vector<std::string> merges;  // byte-level BPE
  std::vector<float> scores;        // SentencePiece
  bool add_space_prefix = false;    // SentencePiece's add_dummy_prefix
  std::string pre;
  bool add_bos = false;
  int pad = -1, unknown = -1;
  std::string chat_template;

  void put(int id, const std::string& text, std::int32_t type) {
    if (id < 0 || id >= kMaxTokens)
      throw FormatError("token '" + text + "' has id " + std::to_string(id) +
                        ", outside [0, 2^24)");
    if (id >= (int)tokens.size()) {
      tokens.resize(id + 1);
      types.resize(id + 1, kUnused);
    }
    tokens[id] = text;
    types[id] = type;
  }
};

bool looks_special(const std::string& t) {  // convert_hf_to_gguf's does_token_look_special
  return t.size() >= 4 && t.starts_with("<|") && t.ends_with("|>");
}

// GPT-2's encoder.json (token -> id) and vocab.bpe (a version line, then one merge a line).
Vocabulary gpt2_files(const tokenizer::TokenizerOptions& t) {
  Vocabulary v;
  v.pre = "gpt-2";
  const nlohmann::json vocab = read_json(t.vocab_file);
  for (const auto& [text, id] : vocab.items())
    v.put(id.get<int>(), text, looks_special(text) ? kControl : kNormal);
  std::ifstream in(t.merge_file, std::ios::binary);
  if (!in) throw FormatError(t.merge_file + ": cannot be read");
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && !line.starts_with("#version")) v.merges.push_back(line);
  return v;
}

// Whether the post-processor puts the BOS token first (Llama 3's TemplateProcessing).
bool post_processor_adds(const nlohmann::json& p, const std::string& bos) {
  if (!p.is_object()) return false;
  if (p.value("type", "") == "Sequence" && p.contains("processors"))
    for (const auto& q : p["processors"])
      if (post_processor_adds(q, bos)) return true;
  if (p.value("type", "") != "TemplateProcessing" || !p.contains("single")) return false;
  const nlohmann::json& first = p["single"].empty() ? nlohmann::json() : p["single"][0];
  return first.contains("SpecialToken") && first["SpecialToken"].value("id", "") == bos;
}

std::string merge_text(const nlohmann::json& m) {  // "a b", or the newer ["a", "b"]
  if (m.is_string()) return m.get<std::string>();
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
    return m[0].get<std::string>() + " " + m[1].get<std::string>();
  throw FormatError("a merge must be \"a b\" or [\"a\", \"b\"], got " + m.dump());
}

}  // namespace

std::string llama_cpp_pre_tokenizer(const std::string& pre_tokenizer_json) {
  const nlohmann::json p = nlohmann::json::parse(pre_tokenizer_json, nullptr, false);
  if (!p.is_object()) return "";
  if (p.value("type", "") == "ByteLevel")  // GPT-2's: its own regex, no prefix space
    return p.value("use_regex", true) && !p.value("add_prefix_space", false) ? "gpt-2" : "";
  if (p.value("type", "") != "Sequence" || !p.contains("pretokenizers") ||
      p["pretokenizers"].size() != 2)
    return "";
  const nlohmann::json& split = p["pretokenizers"][0];
  const nlohmann::json& bytes = p["pretokenizers"][1];
  if (split.value("type", "") != "Split" || split.value("behavior", "") != "Isolated" ||
      split.value("invert", false) || bytes.value("type", "") != "ByteLevel" ||
      bytes.value("use_regex", true) || bytes.value("add_prefix_space", false))
    return "";
  const std::string regex = split.contains("pattern") && split["pattern"].contains("Regex")
                                ? split["pattern"]["Regex"].get<std::string>()
                                : "";
  if (regex == kLlama3Regex) return "llama-bpe";
  if (regex == kQwen2Regex) return "qwen2";
  return "";
}

namespace {

// A HuggingFace tokenizer.json (byte-level BPE) and its tokenizer_config.json.
Vocabulary hf_files(const tokenizer::TokenizerOptions& t) {
  const tokenizer::HfTokenizerFiles files = tokenizer::find_hf_tokenizer_files(t.tokenizer_model);
  const nlohmann::json j = read_json(files.tokenizer_json);
  const std::string& where = files.tokenizer_json;
  const nlohmann::json& model = j.contains("model") ? j["model"] : nlohmann::json();
  if (model.value("type", "") != "BPE" || model.value("byte_fallback", false))
    throw FormatError("--to gguf: " + where +
                      ": llama.cpp's BPE vocabulary needs a byte-level BPE model (GPT-2, Llama 3, "
                      "Qwen); this one is " +
                      (model.value("byte_fallback", false) ? "BPE with byte fallback "
                                                           : model.value("type", "?")) +
                      " (SentencePiece-style vocabularies are not exported yet)");
  Vocabulary v;
  v.pre = llama_cpp_pre_tokenizer(j.contains("pre_tokenizer") ? j["pre_tokenizer"].dump() : "");
  if (v.pre.empty())
    throw FormatError("--to gguf: " + where +
                      ": its pre_tokenizer is none llama.cpp names (GPT-2's ByteLevel, or the "
                      "Split regex of Llama 3 or Qwen2 before ByteLevel)");
  const nlohmann::json vocab = model.value("vocab", nlohmann::json::object());
  for (const auto& [text, id] : vocab.items()) v.put(id.get<int>(), text, kNormal);
  for (const auto& m : model.value("merges", nlohmann::json::array()))
    v.merges.push_back(merge_text(m));
  for (const auto& a : j.value("added_tokens", nlohmann::json::array())) {
    const std::string text = a.value("content", "");
    v.put(a.value("id", 0), text,
          a.value("special", false) || looks_special(text) ? kControl : kUserDefined);
  }
  nlohmann::json config = nlohmann::json::object();
  if (!files.tokenizer_config.empty()) config = read_json(files.tokenizer_config);
  auto named = [&](const char* key) -> std::string {
    const nlohmann::json& e = config.contains(key) ? config[key] : nlohmann::json();
    return e.is_string() ? e.get<std::string>() : e.is_object() ? e.value("content", "") : "";
  };
  v.add_bos =
      config.contains("add_bos_token") && config["add_bos_token"].is_boolean()
          ? config["add_bos_token"].get<bool>()
          : post_processor_adds(j.value("post_processor", nlohmann::json()), named("bos_token"));
  const std::string pad = named("pad_token");
  for (size_t id = 0; id < v.tokens.size() && !pad.empty(); ++id)
    if (v.tokens[id] == pad) v.pad = (int)id;
  try {
    v.chat_template = chat_template::ChatTemplate::source_in_directory(
        fs::path(files.tokenizer_json).parent_path().string());
  } catch (const std::exception&) {  // a tokenizer without a chat template: none written
  }
  return v;
}

}  // namespace

namespace {

// A SentencePiece model (llama.cpp's "llama" vocabulary): pieces, scores and types, and
// whether it prefixes a space (its add_dummy_prefix, seen in how it encodes "a").
Vocabulary sentencepiece_file(const tokenizer::TokenizerOptions& t) {
  sentencepiece::SentencePieceProcessor sp;
  if (!sp.Load(t.tokenizer_model).ok())
    throw FormatError(t.tokenizer_model + ": not a SentencePiece model");
  Vocabulary v;
  for (int id = 0; id < sp.GetPieceSize(); ++id) {
    const std::int32_t type = sp.IsUnknown(id)   ? kUnknown
                              : sp.IsControl(id) ? kControl
                              : sp.IsUnused(id)  ? kUnused
                              : sp.IsByte(id)    ? kByte
                                                 : kNormal;
    v.put(id, sp.IdToPiece(id), type);
    v.scores.push_back(sp.GetScore(id));
  }
  std::vector<std::string> pieces;
  v.add_space_prefix = sp.Encode("a", &pieces).ok() && !pieces.empty() &&
                       pieces[0].starts_with("\xe2\x96\x81");  // U+2581, SentencePiece's space
  v.pre = "default";
  v.unknown = sp.unk_id();
  return v;
}

}  // namespace

std::vector<std::string> add_vocabulary(GgufWriter& w, const tokenizer::TokenizerOptions& t,
                                        int model_vocab) {
  Vocabulary v = t.sentencepiece() ? sentencepiece_file(t)
                 : t.huggingface() ? hf_files(t)
                                   : gpt2_files(t);
  std::vector<std::string> notes;
  if ((int)v.tokens.size() > model_vocab)
    throw FormatError("--to gguf: the tokenizer (" + t.source() + ") has " +
                      std::to_string(v.tokens.size()) + " tokens, more than the model's " +
                      std::to_string(model_vocab));
  const int given = (int)v.tokens.size();
  v.tokens.resize(model_vocab);  // the model's ids past the tokenizer's, and any gaps
  v.types.resize(model_vocab, kUnused);
  for (int id = 0; id < model_vocab; ++id)
    if (v.types[id] == kUnused) v.tokens[id] = "[PAD" + std::to_string(id) + "]";
  if (given < model_vocab)
    notes.push_back("the model has " + std::to_string(model_vocab - given) +
                    " ids past the tokenizer's " + std::to_string(given) +
                    ": written as unused [PADn] tokens");
  const std::unique_ptr<tokenizer::Tokenizer> tok = tokenizer::build_tokenizer(t);
  w.set("tokenizer.ggml.model", std::string(t.sentencepiece() ? "llama" : "gpt2"));
  w.set("tokenizer.ggml.pre", v.pre);
  w.set("tokenizer.ggml.tokens", std::move(v.tokens));
  w.set("tokenizer.ggml.token_type", std::move(v.types));
  if (t.sentencepiece()) {
    v.scores.resize(model_vocab, 0.f);
    w.set("tokenizer.ggml.scores", std::move(v.scores));
    w.set("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  } else {
    w.set("tokenizer.ggml.merges", std::move(v.merges));
  }
  // GPT-2 has no BOS of its own: <|endoftext|> is its BOS and EOS, as HF's GPT2Tokenizer.
  const int bos = tok->bos() >= 0 ? tok->bos() : tok->eod();
  w.set("tokenizer.ggml.bos_token_id", (std::uint32_t)bos);
  w.set("tokenizer.ggml.eos_token_id", (std::uint32_t)tok->eod());
  if (v.pad >= 0) w.set("tokenizer.ggml.padding_token_id", (std::uint32_t)v.pad);
  if (v.unknown >= 0) w.set("tokenizer.ggml.unknown_token_id", (std::uint32_t)v.unknown);
  w.set("tokenizer.ggml.add_bos_token", v.add_bos);
  w.set("tokenizer.ggml.add_eos_token", false);
  if (!v.chat_template.empty()) w.set("tokenizer.chat_template", v.chat_template);
  return notes;
}

}  // namespace trident::deploy
