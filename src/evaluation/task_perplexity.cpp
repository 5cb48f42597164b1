// Rolling log-likelihood tasks: wikitext (EleutherAI/wikitext_document_level {"page"}, the
// page detokenized as preprocess_wikitext.py does, words and bytes counted on the original
// page) and the same metrics over any UTF-8 text file ("text:PATH", one document; words as
// len(re.split(r"\s+", text))). Metrics word_perplexity, byte_perplexity, bits_per_byte.
#include <stdexcept>

#include "evaluation/task.h"
#include "evaluation/text_ops.h"

namespace trident::evaluation {

TaskSpec wikitext_task() {
  TaskSpec t;
  t.name = "wikitext";
  t.version = 2.0;
  t.type = OutputType::kRollingLoglikelihood;
  t.eval_split = "test";
  t.metrics = {"word_perplexity", "byte_perplexity", "bits_per_byte"};
  t.to_prompt = [](const nlohmann::json& doc) {
    const std::string& page = string_field(doc, "page");
    PromptDoc p;
    p.target = wikitext_detokenize(page);
    p.words = python_word_count(page);
    p.bytes = (long)page.size();
    return p;
  };
  return t;
}

TaskSpec text_file_task(const std::string& name) {
  TaskSpec t = wikitext_task();
  t.name = name;
  t.version = 1.0;
  t.to_prompt = [](const nlohmann::json& doc) {
    const std::string& text = string_field(doc, "text");
    PromptDoc p;
    p.target = text;
    p.words = python_word_count(text);
    p.bytes = (long)text.size();
    return p;
  };
  return t;
}

}  // namespace trident::evaluation
