#pragma once
// Stage 3: the quality classifier MT-NLG used, a fastText linear classifier over words and
// word 2-grams, trained to tell reference text (label hq) from raw text (label lq). Uses
// Debian's libfasttext rather than a re-implementation, so models are interchangeable with
// the `fasttext` command line tool.
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fasttext {
class FastText;
class Loss;
class Matrix;
}  // namespace fasttext

namespace trident::curation {

class FastTextFeatures;

// The text as the classifier sees it, at training and scoring time alike: one line (fastText
// reads a newline as the end of an example), ASCII lower-cased, whitespace runs as one space.
std::string quality_text(std::string_view text);

class QualityModel {
 public:
  explicit QualityModel(const std::string& path);  // throws std::runtime_error
  ~QualityModel();
  // P(hq | text) in [0, 1]. Thread-safe (fastText's prediction is const).
  double score(std::string_view text) const;
  // The same through the library's own predictLine on quality_text(text) + "\n": what
  // score() must equal, bit for bit (the test compares them).
  double score_reference(std::string_view text) const;
  bool uses_fast_path() const { return features_ != nullptr; }

 private:
  double score_softmax(const std::vector<std::int32_t>& ids) const;

  std::unique_ptr<fasttext::FastText> model_;
  // The fast path (null for models it does not mirror): input ids computed here, the hidden
  // vector summed here, the output through the library's own softmax loss.
  std::unique_ptr<FastTextFeatures> features_;
  std::shared_ptr<fasttext::Matrix> output_;  // the loss keeps a reference to this pointer
  std::shared_ptr<fasttext::Loss> softmax_;
  std::int32_t hq_ = -1;  // the label id of hq
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
