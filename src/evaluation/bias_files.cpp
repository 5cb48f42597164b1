#include "evaluation/bias_files.h"

#include <cctype>
#include <cmath>
#include <fstream>
#include <set>

#include "core/files.h"
#include "tokenizer/unicode_classes.h"

namespace trident::evaluation {

namespace {

// A non-blank, non-comment line of a file and where it is ("dir/file:12: ").
struct Line {
  std::string text, where;
};

std::vector<Line> read_lines(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  std::ifstream in(path);
  if (!in) throw FormatError(path + ": cannot open (the bias study's files, see README)");
  std::vector<Line> out;
  std::string line;
  for (long n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string where = path + ":" + std::to_string(n) + ": ";
    if (!tokenizer::is_valid_utf8(line)) throw FormatError(where + "not valid UTF-8");
    if (line.find_first_not_of(" \t") == std::string::npos || line[0] == '#') continue;
    if (line.front() == ' ' || line.back() == ' ')
      throw FormatError(where + "leading or trailing spaces (a word or prompt is the whole line)");
    out.push_back({line, where});
  }
  if (out.empty()) throw FormatError(path + ": no entries (at least one line is needed)");
  return out;
}

std::vector<std::string> split_tabs(const Line& l, size_t fields, const std::string& layout) {
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t tab; (tab = l.text.find('\t', at)) != std::string::npos; at = tab + 1)
    out.push_back(l.text.substr(at, tab - at));
  out.push_back(l.text.substr(at));
  if (out.size() != fields) throw FormatError(l.where + "expected " + layout);
  for (const std::string& f : out)
    if (f.empty()) throw FormatError(l.where + "an empty field (expected " + layout + ")");
  return out;
}

// A word list (phrases: occupations may have spaces, "police officer"), each entry once.
std::vector<std::string> read_words(const std::string& dir, const std::string& name,
                                    bool lower_letters, bool phrases = false) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const Line& l : read_lines(dir, name)) {
    if (l.text.find_first_of(phrases ? "\t" : " \t") != std::string::npos)
      throw FormatError(l.where + (phrases ? "no tabs" : "one word a line (no spaces or tabs)"));
    if (lower_letters && bias_words(l.text) != std::vector<std::string>{l.text})
      throw FormatError(l.where + "lower-case ASCII letters only (as bias_words counts words)");
    if (!seen.insert(l.text).second) throw FormatError(l.where + "listed twice: " + l.text);
    out.push_back(l.text);
  }
  return out;
}

std::vector<std::string> read_templates(const std::string& dir) {
  std::vector<std::string> out;
  for (const Line& l : read_lines(dir, "occupation_templates.txt")) {
    const size_t at = l.text.find("{occupation}");
    if (at == std::string::npos || l.text.find("{occupation}", at + 1) != std::string::npos)
      throw FormatError(l.where + "a template holds {occupation} exactly once");
    out.push_back(l.text);
  }
  return out;
}

std::vector<CooccurrencePrompt> read_prompts(const std::string& dir) {
  std::vector<CooccurrencePrompt> out;
  for (const Line& l : read_lines(dir, "cooccurrence_prompts.tsv")) {
    std::vector<std::string> f = split_tabs(l, 3, "category<TAB>group<TAB>prompt");
    out.push_back({f[0], f[1], f[2]});
  }
  return out;
}

std::vector<LexiconEntry> read_lexicon(const std::string& dir) {
  std::vector<LexiconEntry> out;
  std::set<std::string> seen;
  for (const Line& l : read_lines(dir, "sentiment_lexicon.tsv")) {
    std::vector<std::string> f = split_tabs(l, 2, "word<TAB>score");
    if (bias_words(f[0]) != std::vector<std::string>{f[0]})
      throw FormatError(l.where + "the word must be lower-case ASCII letters only");
    if (!seen.insert(f[0]).second) throw FormatError(l.where + "listed twice: " + f[0]);
    size_t used = 0;
    double score = NAN;
    try {
      score = std::stod(f[1], &used);
    } catch (const std::exception&) {
    }
    if (used != f[1].size() || !(score >= -1 && score <= 1))
      throw FormatError(l.where + "the score must be a number in [-1, 1], got " + f[1]);
    out.push_back({f[0], score});
  }
  return out;
}

}  // namespace

std::vector<std::string> bias_words(const std::string& text) {
  std::vector<std::string> out;
  std::string word;
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 128 && std::isalpha(u)) {
      word += static_cast<char>(std::tolower(u));
    } else if (!word.empty()) {
      out.push_back(std::move(word));
      word.clear();
    }
  }
  if (!word.empty()) out.push_back(std::move(word));
  return out;
}

BiasInputs load_bias_inputs(const std::string& dir) {
  BiasInputs in;
  in.occupations = read_words(dir, "occupations.txt", false, true);
  in.templates = read_templates(dir);
  in.female = read_words(dir, "female_identifiers.txt", false);
  in.male = read_words(dir, "male_identifiers.txt", false);
  in.prompts = read_prompts(dir);
  in.adjectives = read_words(dir, "adjectives.txt", true);
  in.lexicon = read_lexicon(dir);
  return in;
}

}  // namespace trident::evaluation
