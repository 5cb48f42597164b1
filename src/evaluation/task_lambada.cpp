// LAMBADA (lambada_openai, EleutherAI/lambada_openai {"text"}) and the KJV cloze stand-in in
// the same layout: the last space-separated word is the target. Harness:
// doc_to_text "{{text.split(' ')[:-1]|join(' ')}}", doc_to_target "{{' '+text.split(' ')[-1]}}",
// output_type loglikelihood, metrics perplexity and acc (the target is the greedy decode).
#include <stdexcept>

#include "evaluation/task.h"
#include "evaluation/text_ops.h"

namespace trident::evaluation {

TaskSpec lambada_task(const std::string& name, const std::string& split) {
  TaskSpec t;
  t.name = name;
  t.type = OutputType::kLoglikelihood;
  t.eval_split = t.fewshot_split = split;
  t.draw_extra = true;  // the harness would draw k here; see task.h
  t.metrics = {"perplexity", "acc"};
  t.to_prompt = [](const nlohmann::json& doc) {
    const std::string& text = string_field(doc, "text");
    if (text.empty()) throw std::invalid_argument("field \"text\" is empty");
    const std::vector<std::string> words = split_on(text, ' ');
    PromptDoc p;
    p.text = join(words, " ", 0, words.size() - 1);
    p.target = " " + words.back();
    return p;
  };
  return t;
}

}  // namespace trident::evaluation
