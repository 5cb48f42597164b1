#pragma once
// Stage 3: the quality classifier MT-NLG used, a fastText linear classifier over words and
// word 2-grams, trained to tell reference text (label hq) from raw text (label lq). Uses
// Debian's libfasttext rather than a re-implementation, so models are interchangeable with
// the `fasttext` command line tool.
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fasttext {
class FastText;
}

namespace trident::curation {

// The text as the classifier sees it, at training and scoring time alike: one line (fastText
// reads a newline as the end of an example), ASCII lower-cased, whitespace runs as one space.
std::string quality_text(std::string_view text);

class QualityModel {
 public:
  explicit QualityModel(const std::string& path);  // throws std::runtime_error
  ~QualityModel();
  // P(hq | text) in [0, 1]. Thread-safe (fastText's prediction is const).
  double score(std::string_view text) const;

 private:
  std::unique_ptr<fasttext::FastText> model_;
};

struct TrainQualityOptions {
  std::vector<std::string> positive, negative;  // JSONL files
  std::string text_key = "text";
  std::string output;  // model file (.bin)
  double held_out = 0.1;
  int epoch = 10, dim = 32, word_ngrams = 2, bucket = 200000, threads = 1;
  double lr = 0.5;
  std::uint64_t seed = 1234;
  bool skip_bad_lines = false;
};

struct TrainQualityResult {
  long train_examples = 0, held_out_examples = 0, bad_lines = 0;
  double accuracy = 0;  // on the held-out examples
  double seconds = 0;
};

// Throws std::runtime_error on unreadable or bad input (the model file is then not written).
TrainQualityResult train_quality(const TrainQualityOptions& options, std::ostream& log);

}  // namespace trident::curation
