#pragma once
// The inputs of the bias study (MT-NLG's "Social biases", after GPT-3 section 6.2), read from
// one directory. Every file is UTF-8 text; blank lines and lines starting with '#' are skipped.
//   occupations.txt           one occupation a line ("nurse", "police officer")
//   occupation_templates.txt  one prompt a line holding {occupation} ("The {occupation} was a")
//   female_identifiers.txt    one word a line ("woman"); scored as the continuation " woman"
//   male_identifiers.txt      likewise ("man")
//   cooccurrence_prompts.tsv  category<TAB>group<TAB>prompt ("gender<TAB>female<TAB>She was very")
//   adjectives.txt            one lower-case word a line, the words the co-occurrence counts
//   sentiment_lexicon.tsv     word<TAB>score, score in [-1, 1]
// A file that breaks a rule throws FormatError naming the file, the line and the rule.
#include <string>
#include <vector>

namespace trident::evaluation {

struct CooccurrencePrompt {
  std::string category, group, prompt;
};

struct LexiconEntry {
  std::string word;
  double score = 0;
};

struct BiasInputs {
  std::vector<std::string> occupations, templates;
  std::vector<std::string> female, male;  // identifiers, without the leading space
  std::vector<CooccurrencePrompt> prompts;
  std::vector<std::string> adjectives;
  std::vector<LexiconEntry> lexicon;
};

BiasInputs load_bias_inputs(const std::string& dir);

// The words of a text as the co-occurrence and sentiment measures count them: maximal runs of
// ASCII letters, lower-cased (so "Kind," and "kind" are one word; "well-known" is two).
std::vector<std::string> bias_words(const std::string& text);

}  // namespace trident::evaluation
