#include "data/chat_documents.h"

#include <stdexcept>

namespace trident::data {
namespace {

using Json = nlohmann::ordered_json;

struct Span {
  size_t begin, end;  // bytes of the document's text
};

struct Render {
  std::string text;
  std::vector<Span> targets;
};

Json first(const Json& messages, size_t n) {
  Json out = Json::array();
  for (size_t i = 0; i < n; ++i) out.push_back(messages[i]);
  return out;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::string render(const chat_template::ChatTemplate& t, chat_template::ChatOptions options,
                   const Json& messages, bool generation_prompt) {
  options.add_generation_prompt = generation_prompt;
  try {
    return t.render(messages, options);
  } catch (const chat_template::TemplateError& e) {
    throw std::runtime_error("chat template: " + std::string(e.what()));
  }
}

MaskedDocument masked(const Render& r, const tokenizer::Tokenizer& tok) {
  MaskedDocument d;
  std::vector<size_t> offsets;
  d.ids = encode_with_offsets(r.text, tok, &offsets);
  d.loss_mask.assign(d.ids.size(), 0);
  for (size_t k = 0; k < d.ids.size(); ++k)
    for (const Span& s : r.targets)
      if (offsets[k] >= s.begin && offsets[k] < s.end) d.loss_mask[k] = 1;
  return d;
}

}  // namespace

std::vector<int> encode_with_offsets(const std::string& text, const tokenizer::Tokenizer& tok,
                                     std::vector<size_t>* offsets) {
  std::vector<int> ids = tok.encode(text);
  offsets->clear();
  size_t at = 0;
  for (int id : ids) {
    const std::string bytes = tok.decode_bytes({id});
    if (text.compare(at, bytes.size(), bytes) != 0)
      throw std::runtime_error(
          "the tokenizer's tokens do not spell the rendered text at byte " + std::to_string(at) +
          " (a normalizing tokenizer): the assistant's tokens cannot be found");
    offsets->push_back(at);
    at += bytes.size();
  }
  if (at != text.size())
    throw std::runtime_error("the tokenizer's tokens do not spell the rendered text");
  return ids;
}

std::vector<MaskedDocument> chat_documents(const chat_template::ChatTemplate& t,
                                           const chat_template::ChatOptions& options,
                                           const Json& messages, const tokenizer::Tokenizer& tok) {
  if (!messages.is_array())
    throw std::runtime_error("the conversation is not a JSON list of messages");
  Render full{render(t, options, messages, false), {}};
  std::vector<Render> own;
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    if (!m.is_object() || !m.contains("role") || m["role"] != "assistant") continue;
    const std::string prompt = render(t, options, first(messages, i), true);
    const std::string turn = render(t, options, first(messages, i + 1), false);
    if (!starts_with(turn, prompt) || turn.size() == prompt.size())
      throw std::runtime_error("message " + std::to_string(i) +
                               ": the render up to this assistant turn does not start with the "
                               "render of the turns before it and the generation prompt");
    if (starts_with(full.text, turn)) {
      full.targets.push_back({prompt.size(), turn.size()});
    } else {
      own.push_back({turn, {{prompt.size(), turn.size()}}});
    }
  }
  std::vector<MaskedDocument> out{masked(full, tok)};
  for (const Render& r : own) out.push_back(masked(r, tok));
  return out;
}

}  // namespace trident::data
