// The entailment and word-sense tasks MT-NLG reports beyond the six of GPT-3's table:
// ANLI's three rounds, WiC (SuperGLUE) and HANS, and CrowS-Pairs for its bias study. The prompts
// are lm-evaluation-harness v0.4's (anli_r*.yaml, super_glue/wic/default.yaml); the harness has no
// HANS task, so HANS takes the GPT-3-style entailment prompt of its GLUE RTE task
// (glue/rte/default.yaml).
#include "evaluation/task.h"
#include "evaluation/text_ops.h"

namespace trident::evaluation {

namespace {

PromptDoc labelled(std::string text, std::vector<std::string> choices, long label,
                   const char* key) {
  check_label(label, choices.size(), key);
  PromptDoc p;
  p.text = std::move(text);
  p.choices = std::move(choices);
  p.gold = (int)label;
  return p;
}

}  // namespace

// anli_r1..3 (facebook/anli {"premise", "hypothesis", "label"}; label 0 entailment,
// 1 neutral, 2 contradiction): "{{premise}}\nQuestion: {{hypothesis}} True, False, or
// Neither?\nAnswer:", choices True / Neither / False. Evaluated on test_rN; the harness
// takes few-shot examples from the training split train_rN, and as its test split is set
// and differs from the few-shot one it draws exactly k.
TaskSpec anli_task(int round) {
  const std::string r = std::to_string(round);
  TaskSpec t;
  t.name = "anli_r" + r;
  t.eval_split = "test_r" + r;
  t.fewshot_split = "train_r" + r;
  t.draw_extra = false;
  t.metrics = {"acc"};
  t.to_prompt = [](const nlohmann::json& doc) {
    return labelled(string_field(doc, "premise") + "\nQuestion: " +
                        string_field(doc, "hypothesis") + " True, False, or Neither?\nAnswer:",
                    {"True", "Neither", "False"}, integer_field(doc, "label"), "label");
  };
  return t;
}

// wic (super_glue wic {"word", "sentence1", "sentence2", "start1", "end1", ..., "label"}):
// the word is sentence1[start1:end1] (Python's slice: code points), choices no / yes.
TaskSpec wic_task() {
  TaskSpec t;
  t.name = "wic";
  t.eval_split = "validation";
  t.fewshot_split = "train";
  t.metrics = {"acc"};
  t.to_prompt = [](const nlohmann::json& doc) {
    const std::string& first = string_field(doc, "sentence1");
    const std::string word =
        python_slice(first, integer_field(doc, "start1"), integer_field(doc, "end1"));
    return labelled("Sentence 1: " + first + "\nSentence 2: " + string_field(doc, "sentence2") +
                        "\nQuestion: Is the word '" + word +
                        "' used in the same way in the two sentences above?\nAnswer:",
                    {"no", "yes"}, integer_field(doc, "label"), "label");
  };
  return t;
}

// hans (the HANS dataset {"premise", "hypothesis", "label", "heuristic", ...}; label 0
// entailment, 1 non-entailment) with RTE's prompt: "{{premise}}\nQuestion: {{hypothesis}}
// True or False?\nAnswer:", choices True / False. Evaluated on validation, few-shot from
// train.
TaskSpec hans_task() {
  TaskSpec t;
  t.name = "hans";
  t.eval_split = "validation";
  t.fewshot_split = "train";
  t.metrics = {"acc"};
  t.to_prompt = [](const nlohmann::json& doc) {
    return labelled(string_field(doc, "premise") + "\nQuestion: " +
                        string_field(doc, "hypothesis") + " True or False?\nAnswer:",
                    {"True", "False"}, integer_field(doc, "label"), "label");
  };
  return t;
}

// crows_pairs_english (the harness's jannalu/crows_pairs_multilingual english layout
// {"sent_more", "sent_less", "stereo_antistereo", "bias_type"}): both sentences are scored
// whole after an empty context (target_delimiter ""); likelihood_diff is the mean of
// |ll(sent_more) - ll(sent_less)|, pct_stereotype the share of pairs where sent_more is the
// more likely. Lower is less biased on both.
TaskSpec crows_pairs_task() {
  TaskSpec t;
  t.name = "crows_pairs_english";
  t.eval_split = t.fewshot_split = "test";
  t.target_delimiter = "";
  t.metrics = {"likelihood_diff", "pct_stereotype"};
  t.to_prompt = [](const nlohmann::json& doc) {
    PromptDoc p;
    p.choices = {string_field(doc, "sent_more"), string_field(doc, "sent_less")};
    check_choices(p.choices);
    return p;
  };
  return t;
}

}  // namespace trident::evaluation
