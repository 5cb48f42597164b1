// The quality stage's fast path (input ids and hidden vector computed in trident) against
// fastText's own predictLine, bit for bit, on real text (the licences in
// /usr/share/common-licenses, the fortunes in five languages when installed) and on the
// corner cases of fastText's tokenizer.
#include <fasttext/fasttext.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "curation/quality.h"

using namespace trident::curation;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Each text file under dir whole, and its blank-line or %-separated pieces, as they are (case,
// newlines, tabs and all).
void add_texts(const fs::path& dir, std::vector<std::string>* docs) {
  if (!fs::is_directory(dir)) return;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || ext == ".dat" || ext == ".u8") continue;
    const std::string text = read_file(e.path());
    docs->push_back(text);
    size_t at = 0;
    while (at < text.size()) {
      size_t end = std::min(text.find("\n\n", at), text.find("\n%\n", at));
      if (end == std::string::npos) end = text.size();
      docs->push_back(text.substr(at, end - at));
      at = end + 2;
    }
  }
}

std::vector<std::string> corner_cases() {
  return {"",
          " \n\t ",
          "Hello World",
          "__label__hq really good text",
          "__LABEL__lq upper-case label prefix, lower-cased before fastText reads it",
          "text __label__hq in the middle",
          "a </s> ends the line here: nothing after it counts",
          "upper </S> too",
          std::string("nul\0separated words\0\0here", 26),
          "tab\tvertical\vform\ffeed\rcarriage\r\nreturn",
          "Ünïcödé ÀÉÎ ÕÜ straße 日本語のテキスト",
          "x",
          "the the the the the the the the the the the the the"};
}

std::string write_model_examples(const std::vector<std::string>& docs, const fs::path& dir) {
  std::mt19937 rng(3);
  std::ofstream pos(dir / "hq.jsonl"), neg(dir / "lq.jsonl"), ft(dir / "ft.txt");
  for (size_t i = 0; i < docs.size(); i += 2) {
    std::istringstream words(docs[i]);
    std::vector<std::string> w{std::istream_iterator<std::string>(words), {}};
    if (w.size() < 5) continue;
    std::string good, bad;
    for (const auto& x : w) good += x + " ";
    std::shuffle(w.begin(), w.end(), rng);
    for (const auto& x : w) bad += x + " ";
    pos << nlohmann::json{{"text", good}}.dump(-1, ' ', false,
                                               nlohmann::json::error_handler_t::replace)
        << "\n";
    neg << nlohmann::json{{"text", bad}}.dump(-1, ' ', false,
                                              nlohmann::json::error_handler_t::replace)
        << "\n";
    ft << "__label__hq " << quality_text(good) << "\n__label__lq " << quality_text(bad) << "\n";
  }
  return (dir / "ft.txt").string();
}

// A model trained with the fastText API directly: character n-grams, word 3-grams, dim 10.
std::string train_direct(const std::string& input, const fs::path& out, fasttext::loss_name loss) {
  fasttext::Args a;
  a.input = input;
  a.output = out.string();
  a.model = fasttext::model_name::sup;
  a.loss = loss;
  a.minn = 2;
  a.maxn = 4;
  a.wordNgrams = 3;
  a.dim = 10;
  a.bucket = 50000;
  a.epoch = 3;
  a.minCount = 1;
  a.thread = 1;
  a.verbose = 0;
  fasttext::FastText f;
  f.train(a);
  f.saveModel(out.string());
  return out.string();
}

void expect_same_scores(const QualityModel& m, const std::vector<std::string>& docs) {
  int different = 0;
  for (const std::string& d : docs) {
    const double fast = m.score(d), reference = m.score_reference(d);
    if (fast != reference && ++different <= 5)
      ADD_FAILURE() << "score " << fast << " != predictLine's " << reference << " on \""
                    << d.substr(0, 80) << "\"";
  }
  EXPECT_EQ(different, 0) << "of " << docs.size() << " documents";
}

}  // namespace

TEST(CurationQuality, FastPathEqualsPredictLine) {
  std::vector<std::string> docs;
  add_texts("/usr/share/common-licenses", &docs);
  ASSERT_GT(docs.size(), 500u);
  const fs::path dir = fs::temp_directory_path() / ("quality_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string ft_input = write_model_examples(docs, dir);
  add_texts("/usr/share/games/fortunes", &docs);
  for (const std::string& c : corner_cases()) docs.push_back(c);

  TrainQualityOptions o;
  o.positive = {(dir / "hq.jsonl").string()};
  o.negative = {(dir / "lq.jsonl").string()};
  o.output = (dir / "q.bin").string();
  std::ostringstream log;
  train_quality(o, log);
  const QualityModel words(o.output);  // train-quality's: words and word 2-grams, dim 32
  EXPECT_TRUE(words.uses_fast_path());
  expect_same_scores(words, docs);

  const QualityModel subwords(
      train_direct(ft_input, dir / "sub.bin", fasttext::loss_name::softmax));
  EXPECT_TRUE(subwords.uses_fast_path());
  expect_same_scores(subwords, docs);

  // Another loss: the library's predictLine throughout.
  const QualityModel ova(train_direct(ft_input, dir / "ova.bin", fasttext::loss_name::ova));
  EXPECT_FALSE(ova.uses_fast_path());
  expect_same_scores(ova, corner_cases());
  fs::remove_all(dir);
}
