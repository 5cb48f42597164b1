#pragma once
// Task names -> definitions, and a task's documents read from <task-dir>/<dir>/<split>.jsonl.
#include <string>
#include <vector>

#include "evaluation/task.h"
#include "evaluation/task_file.h"

namespace trident::evaluation {

// The built-in names, plus the forms "mc:NAME" (generic multiple choice) and "text:PATH".
std::vector<std::string> known_tasks();
// Throws FormatError naming the unknown task and listing the known ones.
TaskSpec find_task(const std::string& name);

// Pure: raw documents -> the task's prompt documents; a bad document is a FormatError
// "path:line: problem".
std::vector<PromptDoc> prompt_docs(const TaskSpec& task, const std::vector<RawDoc>& raw,
                                   const std::string& path);

struct LoadedTask {
  TaskSpec spec;
  std::vector<PromptDoc> docs;     // evaluated, in file order
  std::vector<PromptDoc> fewshot;  // the few-shot pool (empty with num_fewshot 0)
  std::string eval_path;
};
LoadedTask load_task(const TaskSpec& task, const std::string& task_dir, int num_fewshot);

}  // namespace trident::evaluation
