#include "curation/quality.h"

#include <fasttext/fasttext.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <random>
#include <sstream>
#include <stdexcept>

#include "curation/document.h"
#include "curation/normalize.h"

namespace trident::curation {

namespace {
const char* kHq = "__label__hq";
const char* kLq = "__label__lq";
}  // namespace

std::string quality_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool space = false;
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' '), space = false;
    out.push_back(c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c);
  }
  return out;
}

QualityModel::QualityModel(const std::string& path) : model_(new fasttext::FastText) {
  std::ifstream probe(path, std::ios::binary);
  if (!probe) throw std::runtime_error(path + ": cannot open the quality model");
  try {
    model_->loadModel(path);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": not a fastText model (" + e.what() + ")");
  }
  if (model_->getDictionary()->nlabels() < 2)
    throw std::runtime_error(path + ": not a classifier with labels hq and lq");
}

QualityModel::~QualityModel() = default;

double QualityModel::score(std::string_view text) const {
  std::istringstream in(quality_text(text) + "\n");
  std::vector<std::pair<fasttext::real, std::string>> predictions;
  model_->predictLine(in, predictions, -1, 0.0);  // every label, so hq is always there
  for (const auto& [p, label] : predictions)
    if (label == kHq) return std::clamp((double)p, 0.0, 1.0);
  return 0.0;
}

TrainQualityResult train_quality(const TrainQualityOptions& o, std::ostream& log) {
  const auto start = std::chrono::steady_clock::now();
  TrainQualityResult r;
  std::vector<std::string> examples;
  auto read = [&](const std::vector<std::string>& files, const char* label) {
    ParsedLine parsed;
    for (const std::string& f : files) {
      std::ifstream in(f, std::ios::binary);
      if (!in) throw std::runtime_error(f + ": cannot open");
      std::string line;
      long n = 0;
      while (std::getline(in, line)) {
        ++n;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        std::string reason = parse_curate_line(line, o.text_key, "id", &parsed);
        if (!reason.empty()) {
          ++r.bad_lines;
          if (!o.skip_bad_lines)
            throw std::runtime_error(f + ":" + std::to_string(n) + ": " + reason);
          continue;
        }
        std::string t = quality_text(normalize_text(parsed.text));
        if (!t.empty()) examples.push_back(std::string(label) + " " + t);
      }
    }
  };
  read(o.positive, kHq);
  read(o.negative, kLq);
  std::mt19937_64 rng(o.seed);
  std::shuffle(examples.begin(), examples.end(), rng);
  const size_t held = (size_t)(o.held_out * (double)examples.size());
  if (examples.size() < 2 || held == examples.size())
    throw std::runtime_error("train-quality: too few examples");
  // fastText trains from a file; the temporary one sits next to the model.
  const std::string train_file = o.output + ".train.tmp." + std::to_string(getpid());
  {
    std::ofstream t(train_file, std::ios::binary);
    for (size_t i = held; i < examples.size(); ++i) t << examples[i] << '\n';
    if (!t) throw std::runtime_error(train_file + ": cannot write");
  }
  r.train_examples = (long)(examples.size() - held);
  r.held_out_examples = (long)held;
  fasttext::Args a;
  a.input = train_file;
  a.output = o.output;
  a.model = fasttext::model_name::sup;
  a.loss = fasttext::loss_name::softmax;
  a.wordNgrams = o.word_ngrams;
  a.minCount = 1;
  a.minn = 0;
  a.maxn = 0;  // words and word n-grams only, as MT-NLG's classifier
  a.dim = o.dim;
  a.epoch = o.epoch;
  a.lr = o.lr;
  a.bucket = o.bucket;
  a.thread = std::max(1, o.threads);
  a.seed = (int)o.seed;
  a.verbose = 0;
  fasttext::FastText ft;
  try {
    ft.train(a);
  } catch (...) {
    std::remove(train_file.c_str());
    throw;
  }
  std::remove(train_file.c_str());
  long correct = 0;
  std::vector<std::pair<fasttext::real, std::string>> predictions;
  for (size_t i = 0; i < held; ++i) {
    const std::string& e = examples[i];
    const size_t sp = e.find(' ');
    std::istringstream in(e.substr(sp + 1) + "\n");
    predictions.clear();
    ft.predictLine(in, predictions, 1, 0.0);
    correct += !predictions.empty() && predictions[0].second == e.substr(0, sp);
  }
  r.accuracy = held ? (double)correct / (double)held : 0.0;
  const std::string tmp = o.output + ".tmp." + std::to_string(getpid());
  ft.saveModel(tmp);
  if (std::rename(tmp.c_str(), o.output.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error(o.output + ": cannot write");
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log << "train-quality: " << r.train_examples << " training examples, " << r.held_out_examples
      << " held out; held-out accuracy " << r.accuracy << std::endl;
  return r;
}

}  // namespace trident::curation
