// WinoGrande (allenai/winogrande winogrande_xl {"sentence", "option1", "option2", "answer"})
// with partial scoring (preprocess_winogrande.py): each option fills the blank and what
// precedes the blank is the context; the rest of the sentence after the blank, stripped, is
// the continuation scored after each context. acc only.
#include <stdexcept>

#include "evaluation/task.h"
#include "evaluation/text_ops.h"

namespace trident::evaluation {

TaskSpec winogrande_task() {
  TaskSpec t;
  t.name = "winogrande";
  t.multiple_input = true;
  t.eval_split = "validation";
  t.fewshot_split = "train";
  t.metrics = {"acc"};
  t.to_prompt = [](const nlohmann::json& doc) {
    PromptDoc p;
    const std::string& sentence = string_field(doc, "sentence");
    const size_t blank = sentence.find('_');
    if (blank == std::string::npos)
      throw std::invalid_argument("field \"sentence\" has no blank \"_\"");
    p.target = python_strip(std::string_view(sentence).substr(blank + 1));
    p.choices = {sentence.substr(0, blank) + string_field(doc, "option1"),
                 sentence.substr(0, blank) + string_field(doc, "option2")};
    const std::string& answer = string_field(doc, "answer");
    if (answer != "1" && answer != "2")
      throw std::invalid_argument("field \"answer\" must be \"1\" or \"2\", not \"" + answer +
                                  "\"");
    p.gold = answer == "1" ? 0 : 1;
    return p;
  };
  return t;
}

}  // namespace trident::evaluation
