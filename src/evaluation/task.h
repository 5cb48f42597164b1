#pragma once
// A task as lm-evaluation-harness defines it: which split files it reads, what its output
// type is, and how one document becomes the harness's doc_to_text / doc_to_choice /
// doc_to_target. One file per task family (task_*.cpp) fills these in; task_registry.cpp
// names them.
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace trident::evaluation {

enum class OutputType { kLoglikelihood, kMultipleChoice, kRollingLoglikelihood };

// One document as the harness's task functions see it.
struct PromptDoc {
  std::string text;                  // doc_to_text (multiple_input tasks: unused)
  std::vector<std::string> choices;  // doc_to_choice (multiple_input: one context per choice)
  int gold = 0;                      // the right choice's index
  std::string target;                // doc_to_target as text (loglikelihood, multiple_input,
                                     // rolling: the text scored)
  long words = 0, bytes = 0;         // rolling: what perplexity is per (the original text)
  nlohmann::json raw;                // the document as read: few-shot never draws it for itself
  long line = 0;
};

struct TaskSpec {
  std::string name;
  std::string dir;       // under --task-dir (the name, or NAME of "mc:NAME"); empty: a file task
  std::string file;      // a file task's path ("text:PATH")
  double version = 1.0;  // the harness's metadata.version
  OutputType type = OutputType::kMultipleChoice;
  // Winogrande: the choices are contexts and the target the shared continuation.
  bool multiple_input = false;
  std::string eval_split;     // file stem under <task-dir>/<name>/
  std::string fewshot_split;  // the split few-shot examples come from
  // The harness draws k + 1 examples and drops the evaluated one when its fewshot split
  // equals its test split (both unset counts). Where it draws k from the evaluated split
  // itself (lambada, race), trident also draws k + 1 so the evaluated example is never
  // its own shot; see README "Evaluation".
  bool draw_extra = true;
  std::string target_delimiter = " ";  // between a context and its continuation
  // In the harness's names: acc, acc_norm, perplexity, likelihood_diff, pct_stereotype, ...
  std::vector<std::string> metrics;
  // Raw JSON -> PromptDoc; throws std::invalid_argument naming the field and the problem.
  std::function<PromptDoc(const nlohmann::json&)> to_prompt;
};

// Field accessors that name what is wrong (std::invalid_argument).
const std::string& string_field(const nlohmann::json& doc, const char* key);
long integer_field(const nlohmann::json& doc, const char* key);  // a JSON integer or "7"
const nlohmann::json& field(const nlohmann::json& doc, const char* key);
void check_label(long label, size_t choices, const char* key);
void check_choices(const std::vector<std::string>& choices);

// Task families (task_*.cpp).
TaskSpec lambada_task(const std::string& name, const std::string& split);
TaskSpec piqa_task();
TaskSpec arc_task(const std::string& name);
TaskSpec boolq_task();
TaskSpec generic_choice_task(const std::string& name);
TaskSpec hellaswag_task();
TaskSpec winogrande_task();
TaskSpec race_task();
TaskSpec wikitext_task();
TaskSpec anli_task(int round);  // 1, 2 or 3
TaskSpec wic_task();
TaskSpec hans_task();
TaskSpec crows_pairs_task();
TaskSpec text_file_task(const std::string& name);

}  // namespace trident::evaluation
