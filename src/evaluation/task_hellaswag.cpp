// HellaSwag (Rowan/hellaswag {"activity_label", "ctx_a", "ctx_b", "endings", "label"}),
// with hellaswag/utils.py's process_docs: query = preprocess(activity_label + ": " + ctx_a +
// " " + ctx_b.capitalize()), choices = preprocess(ending) each; acc and acc_norm.
#include <stdexcept>

#include "evaluation/task.h"
#include "evaluation/text_ops.h"

namespace trident::evaluation {

TaskSpec hellaswag_task() {
  TaskSpec t;
  t.name = "hellaswag";
  t.eval_split = "validation";
  t.fewshot_split = "train";
  t.metrics = {"acc", "acc_norm"};
  t.to_prompt = [](const nlohmann::json& doc) {
    PromptDoc p;
    const std::string ctx =
        string_field(doc, "ctx_a") + " " + python_capitalize(string_field(doc, "ctx_b"));
    p.text = hellaswag_preprocess(string_field(doc, "activity_label") + ": " + ctx);
    const nlohmann::json& endings = field(doc, "endings");
    if (!endings.is_array()) throw std::invalid_argument("field \"endings\" must be a list");
    for (const nlohmann::json& e : endings) {
      if (!e.is_string()) throw std::invalid_argument("field \"endings\" has a non-string entry");
      p.choices.push_back(hellaswag_preprocess(e.get<std::string>()));
    }
    check_choices(p.choices);
    const long label = integer_field(doc, "label");  // the dataset stores "0".."3"
    check_label(label, p.choices.size(), "label");
    p.gold = (int)label;
    return p;
  };
  return t;
}

}  // namespace trident::evaluation
