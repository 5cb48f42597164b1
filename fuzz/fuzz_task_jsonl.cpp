// Task data files for `trident eval`: any bytes as a JSONL split file, parsed and then turned
// into every task's prompt documents (including RACE's Python-literal problems). A bad file
// must be a FormatError naming "path:line:"; nothing else may escape.
#include <cstdint>
#include <string>

#include "evaluation/task_registry.h"
#include "fuzz_util.h"
#include "core/files.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  using namespace trident;
  using namespace trident::evaluation;
  const std::string text(reinterpret_cast<const char*>(data), size);
  static const char* kTasks[] = {"lambada_openai", "piqa", "hellaswag", "winogrande", "boolq",
                                 "arc_easy", "race", "wikitext", "mc:mine"};
  std::vector<RawDoc> raw;
  try {
    raw = parse_task_jsonl(text, "task.jsonl");
  } catch (const FormatError& e) {
    FUZZ_CHECK(std::string(e.what()).rfind("task.jsonl:", 0) == 0);
    return 0;
  }
  for (const RawDoc& r : raw) FUZZ_CHECK(r.fields.is_object() && r.line >= 1);
  for (const char* name : kTasks) {
    const TaskSpec task = find_task(name);
    try {
      for (const PromptDoc& p : prompt_docs(task, raw, "task.jsonl")) {
        if (task.type == OutputType::kMultipleChoice) {
          FUZZ_CHECK(!p.choices.empty());
          FUZZ_CHECK(p.gold >= 0 && p.gold < (int)p.choices.size());
        }
      }
    } catch (const FormatError& e) {
      FUZZ_CHECK(std::string(e.what()).rfind("task.jsonl:", 0) == 0);
    }
  }
  return 0;
}
