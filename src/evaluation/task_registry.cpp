#include "evaluation/task_registry.h"

#include <filesystem>
#include <stdexcept>

#include "core/files.h"
#include "tokenizer/unicode_classes.h"

namespace trident::evaluation {

namespace {
const std::vector<std::string> kBuiltIn = {
    "lambada_openai", "piqa", "hellaswag", "winogrande",         "boolq",   "arc_easy",
    "arc_challenge",  "race", "wikitext",  "kjv_cloze",          "anli_r1", "anli_r2",
    "anli_r3",        "wic",  "hans",      "crows_pairs_english"};
}

std::vector<std::string> known_tasks() {
  std::vector<std::string> names = kBuiltIn;
  names.push_back("mc:NAME");
  names.push_back("text:PATH");
  return names;
}

TaskSpec find_task(const std::string& name) {
  TaskSpec t;
  if (name == "lambada_openai")
    t = lambada_task(name, "test");
  else if (name == "kjv_cloze")
    t = lambada_task(name, "test");
  else if (name == "piqa")
    t = piqa_task();
  else if (name == "hellaswag")
    t = hellaswag_task();
  else if (name == "winogrande")
    t = winogrande_task();
  else if (name == "boolq")
    t = boolq_task();
  else if (name == "arc_easy" || name == "arc_challenge")
    t = arc_task(name);
  else if (name == "race")
    t = race_task();
  else if (name == "wikitext")
    t = wikitext_task();
  else if (name == "anli_r1" || name == "anli_r2" || name == "anli_r3")
    t = anli_task(name.back() - '0');
  else if (name == "wic")
    t = wic_task();
  else if (name == "hans")
    t = hans_task();
  else if (name == "crows_pairs_english")
    t = crows_pairs_task();
  else if (name.rfind("mc:", 0) == 0 && name.size() > 3) {
    t = generic_choice_task(name);
    t.dir = name.substr(3);
    return t;
  } else if (name.rfind("text:", 0) == 0 && name.size() > 5) {
    t = text_file_task(name);
    t.file = name.substr(5);
    return t;
  } else {
    std::string list;
    for (const std::string& k : known_tasks()) list += (list.empty() ? "" : ", ") + k;
    throw FormatError("unknown task '" + name + "'; known tasks: " + list);
  }
  t.dir = name;
  return t;
}

std::vector<PromptDoc> prompt_docs(const TaskSpec& task, const std::vector<RawDoc>& raw,
                                   const std::string& path) {
  std::vector<PromptDoc> docs;
  docs.reserve(raw.size());
  for (const RawDoc& r : raw) {
    try {
      PromptDoc p = task.to_prompt(r.fields);
      p.raw = r.fields;
      p.line = r.line;
      docs.push_back(std::move(p));
    } catch (const std::invalid_argument& e) {
      throw FormatError(path + ":" + std::to_string(r.line) + ": " + e.what());
    } catch (const nlohmann::json::exception& e) {
      throw FormatError(path + ":" + std::to_string(r.line) + ": " + e.what());
    }
  }
  return docs;
}

LoadedTask load_task(const TaskSpec& task, const std::string& task_dir, int num_fewshot) {
  namespace fs = std::filesystem;
  LoadedTask out;
  out.spec = task;
  if (!task.file.empty()) {
    std::string text;
    try {
      text = tokenizer::read_utf8_file(task.file);
    } catch (const std::runtime_error& e) {
      throw FormatError(e.what());
    }
    out.eval_path = task.file;
    out.docs = prompt_docs(task, {RawDoc{nlohmann::json{{"text", text}}, 1}}, task.file);
  } else {
    out.eval_path = (fs::path(task_dir) / task.dir / (task.eval_split + ".jsonl")).string();
    out.docs = prompt_docs(task, read_task_jsonl(out.eval_path), out.eval_path);
  }
  if (out.docs.empty()) throw FormatError(out.eval_path + ": no documents");
  if (num_fewshot > 0) {
    if (task.type == OutputType::kRollingLoglikelihood)
      throw FormatError(task.name +
                        ": the number of few-shot examples must be 0 for "
                        "perplexity tasks");
    if (task.fewshot_split == task.eval_split) {
      out.fewshot = out.docs;
    } else {
      const std::string path =
          (fs::path(task_dir) / task.dir / (task.fewshot_split + ".jsonl")).string();
      out.fewshot = prompt_docs(task, read_task_jsonl(path), path);
    }
  }
  return out;
}

}  // namespace trident::evaluation
