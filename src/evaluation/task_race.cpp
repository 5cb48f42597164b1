// RACE (EleutherAI/race "high" {"article", "problems"}: problems is the Python repr of a list
// of {"question", "options", "answer"}; a JSON list is accepted too), preprocess_race.py:
// the context is "Article: " + article + "\n\n", then every problem but the last with its
// answer (a cloze question "...  _  ." gets the answer in place of its blank), then the last
// problem's question; its four options are the choices. acc only.
#include <stdexcept>

#include "evaluation/task.h"
#include "evaluation/task_file.h"

namespace trident::evaluation {

namespace {

struct Problem {
  std::string question;
  std::vector<std::string> options;
  int answer = 0;
};

Problem read_problem(const nlohmann::json& j, size_t index) {
  const std::string where = "problem " + std::to_string(index + 1) + ": ";
  try {
    if (!j.is_object()) throw std::invalid_argument("not an object");
    Problem p;
    p.question = string_field(j, "question");
    const nlohmann::json& options = field(j, "options");
    if (!options.is_array() || options.size() < 4)
      throw std::invalid_argument("\"options\" must be a list of 4 strings");
    for (size_t i = 0; i < 4; ++i) {
      if (!options[i].is_string()) throw std::invalid_argument("an option is not a string");
      p.options.push_back(options[i].get<std::string>());
    }
    const std::string& answer = string_field(j, "answer");
    if (answer.size() != 1 || answer[0] < 'A' || answer[0] > 'D')
      throw std::invalid_argument("\"answer\" must be one of A, B, C, D, not \"" + answer + "\"");
    p.answer = answer[0] - 'A';
    return p;
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + e.what());
  }
}

}  // namespace

TaskSpec race_task() {
  TaskSpec t;
  t.name = "race";
  t.version = 3.0;
  t.eval_split = t.fewshot_split = "test";
  t.draw_extra = true;  // the harness would draw k here; see task.h
  t.metrics = {"acc"};
  t.to_prompt = [](const nlohmann::json& doc) {
    const nlohmann::json& raw = field(doc, "problems");
    nlohmann::json list;
    if (raw.is_string()) {
      list = parse_python_literal(raw.get_ref<const std::string&>());
    } else {
      list = raw;
    }
    if (!list.is_array() || list.empty())
      throw std::invalid_argument("field \"problems\" must be a non-empty list of problems");
    std::vector<Problem> problems;
    for (size_t i = 0; i < list.size(); ++i) problems.push_back(read_problem(list[i], i));
    PromptDoc p;
    p.text = "Article: " + string_field(doc, "article") + "\n\n";
    for (size_t i = 0; i + 1 < problems.size(); ++i) {
      const Problem& q = problems[i];
      const std::string& answer = q.options[q.answer];
      const std::string& text = q.question;
      if (text.size() >= 6 && text.compare(text.size() - 6, 6, "  _  .") == 0)
        p.text += text.substr(0, text.size() - 5) + answer + "\n";
      else
        p.text += "Question: " + text + "\nAnswer: " + answer + "\n";
    }
    p.text += problems.back().question;
    p.choices = problems.back().options;
    p.gold = problems.back().answer;
    return p;
  };
  return t;
}

}  // namespace trident::evaluation
