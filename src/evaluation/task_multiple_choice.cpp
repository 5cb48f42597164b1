// Multiple-choice tasks whose prompt is a template over the document's fields: the context
// is doc_to_text, each choice is scored as " " + choice after it (target_delimiter " "),
// acc = the most likely choice is the gold one, acc_norm = the same with each log-likelihood
// divided by its choice's length in characters.
#include <stdexcept>

#include "evaluation/task.h"

namespace trident::evaluation {

namespace {

std::vector<std::string> string_list(const nlohmann::json& v, const char* key) {
  if (!v.is_array())
    throw std::invalid_argument(std::string("field \"") + key + "\" must be a list of strings");
  std::vector<std::string> out;
  for (const nlohmann::json& s : v) {
    if (!s.is_string())
      throw std::invalid_argument(std::string("field \"") + key + "\" has a non-string entry " +
                                  s.dump());
    out.push_back(s.get<std::string>());
  }
  return out;
}

}  // namespace

// piqa (baber/piqa {"goal", "sol1", "sol2", "label"}): "Question: {{goal}}\nAnswer:".
TaskSpec piqa_task() {
  TaskSpec t;
  t.name = "piqa";
  t.eval_split = "validation";
  t.fewshot_split = "train";
  t.metrics = {"acc", "acc_norm"};
  t.to_prompt = [](const nlohmann::json& doc) {
    PromptDoc p;
    p.text = "Question: " + string_field(doc, "goal") + "\nAnswer:";
    p.choices = {string_field(doc, "sol1"), string_field(doc, "sol2")};
    const long label = integer_field(doc, "label");
    check_label(label, p.choices.size(), "label");
    p.gold = (int)label;
    return p;
  };
  return t;
}

// arc_easy / arc_challenge (allenai/ai2_arc {"question", "choices": {"text", "label"},
// "answerKey"}): "Question: {{question}}\nAnswer:", gold = choices.label.index(answerKey).
TaskSpec arc_task(const std::string& name) {
  TaskSpec t;
  t.name = name;
  t.eval_split = "test";
  t.fewshot_split = "train";
  t.draw_extra = false;  // test_split is set and differs from the fewshot split
  t.metrics = {"acc", "acc_norm"};
  t.to_prompt = [](const nlohmann::json& doc) {
    PromptDoc p;
    p.text = "Question: " + string_field(doc, "question") + "\nAnswer:";
    const nlohmann::json& choices = field(doc, "choices");
    if (!choices.is_object()) throw std::invalid_argument("field \"choices\" must be an object");
    p.choices = string_list(field(choices, "text"), "choices.text");
    const std::vector<std::string> labels = string_list(field(choices, "label"), "choices.label");
    check_choices(p.choices);
    if (labels.size() != p.choices.size())
      throw std::invalid_argument("choices.label and choices.text differ in length");
    const std::string& key = string_field(doc, "answerKey");
    p.gold = -1;
    for (size_t i = 0; i < labels.size() && p.gold < 0; ++i)
      if (labels[i] == key) p.gold = (int)i;
    if (p.gold < 0)
      throw std::invalid_argument("answerKey \"" + key + "\" is not one of choices.label");
    return p;
  };
  return t;
}

// boolq (aps/super_glue boolq {"passage", "question", "label"}):
// "{{passage}}\nQuestion: {{question}}?\nAnswer:", choices ["no", "yes"], acc only.
TaskSpec boolq_task() {
  TaskSpec t;
  t.name = "boolq";
  t.version = 2.0;
  t.eval_split = "validation";
  t.fewshot_split = "train";
  t.metrics = {"acc"};
  t.to_prompt = [](const nlohmann::json& doc) {
    PromptDoc p;
    p.text = string_field(doc, "passage") + "\nQuestion: " + string_field(doc, "question") +
             "?\nAnswer:";
    p.choices = {"no", "yes"};
    const long label = integer_field(doc, "label");
    check_label(label, 2, "label");
    p.gold = (int)label;
    return p;
  };
  return t;
}

// A user's own task: {"context", "choices", "label"} lines in <task-dir>/<name>/test.jsonl,
// few-shot examples from the same file (never the evaluated line itself).
TaskSpec generic_choice_task(const std::string& name) {
  TaskSpec t;
  t.name = name;
  t.eval_split = t.fewshot_split = "test";
  t.metrics = {"acc", "acc_norm"};
  t.to_prompt = [](const nlohmann::json& doc) {
    PromptDoc p;
    p.text = string_field(doc, "context");
    p.choices = string_list(field(doc, "choices"), "choices");
    check_choices(p.choices);
    const long label = integer_field(doc, "label");
    check_label(label, p.choices.size(), "label");
    p.gold = (int)label;
    return p;
  };
  return t;
}

}  // namespace trident::evaluation
