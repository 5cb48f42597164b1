#include "curation/quality.h"

#include <fasttext/fasttext.h>
#include <fasttext/loss.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <random>
#include <sstream>
#include <stdexcept>

#include "curation/document.h"
#include "curation/fasttext_features.h"
#include "curation/normalize.h"

namespace trident::curation {

namespace {
const char* kHq = "__label__hq";
const char* kLq = "__label__lq";

// Adds rows ids of the dim-wide matrix m to h, in order: each element's additions come in
// Model::computeHidden's order, so h is bit for bit the library's. The rows of word n-grams
// are scattered over the ~25 MB of buckets; prefetching ids ahead overlaps their cache
// misses, which the library's loop takes one at a time. Dim is a template argument where it
// can be, so that h stays in registers.
template <int kDim>
void add_rows(const float* m, std::int64_t dim, const std::vector<std::int32_t>& ids, float* h) {
  constexpr size_t kAhead = 16;
  const std::int64_t d = kDim > 0 ? kDim : dim;
  float acc[kDim > 0 ? kDim : 1];
  float* sum = kDim > 0 ? acc : h;
  for (std::int64_t j = 0; j < d; ++j) sum[j] = h[j];
  const size_t n = ids.size();
  for (size_t k = 0; k < n; ++k) {
    if (k + kAhead < n) {
      const char* p = (const char*)(m + (std::int64_t)ids[k + kAhead] * d);
      for (std::int64_t b = 0; b < d * (std::int64_t)sizeof(float); b += 64)
        __builtin_prefetch(p + b);
    }
    const float* row = m + (std::int64_t)ids[k] * d;
    for (std::int64_t j = 0; j < d; ++j) sum[j] += row[j];
  }
  for (std::int64_t j = 0; j < d; ++j) h[j] = sum[j];
}

void add_rows(const float* m, std::int64_t dim, const std::vector<std::int32_t>& ids, float* h) {
  if (dim == 32) return add_rows<32>(m, dim, ids, h);
  if (dim == 16) return add_rows<16>(m, dim, ids, h);
  add_rows<0>(m, dim, ids, h);
}

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
  auto dict = model_->getDictionary();
  if (dict->nlabels() < 2)
    throw std::runtime_error(path + ": not a classifier with labels hq and lq");
  for (std::int32_t i = 0; i < dict->nlabels(); ++i)
    if (dict->getLabel(i) == kHq) hq_ = i;
  const fasttext::Args args = model_->getArgs();
  if (args.model == fasttext::model_name::sup && args.loss == fasttext::loss_name::softmax)
    features_ = FastTextFeatures::create(*model_);
  if (features_) {
    output_ = std::const_pointer_cast<fasttext::DenseMatrix>(model_->getOutputMatrix());
    softmax_ = std::make_shared<fasttext::SoftmaxLoss>(output_);
  }
}

QualityModel::~QualityModel() = default;

double QualityModel::score(std::string_view text) const {
  if (!features_) return score_reference(text);
  thread_local std::vector<std::int32_t> ids;
  thread_local FastTextFeatures::Scratch scratch;
  features_->line_ids(text, &ids, &scratch);
  return score_softmax(ids);
}

// FastText::predict from the ids on: Model::computeHidden (here, with prefetching), then the
// library's softmax and top-k, then predictLine's exp.
double QualityModel::score_softmax(const std::vector<std::int32_t>& ids) const {
  if (ids.empty() || hq_ < 0) return 0.0;  // FastText::predict predicts nothing
  const auto input = model_->getInputMatrix();
  const std::int32_t nlabels = model_->getDictionary()->nlabels();
  fasttext::Model::State state((std::int32_t)input->cols(), nlabels, 0);
  state.hidden.zero();
  add_rows(input->data(), input->cols(), ids, state.hidden.data());
  state.hidden.mul(1.0 / ids.size());
  fasttext::Predictions heap;
  heap.reserve(nlabels + 1);
  softmax_->predict(nlabels, 0.0, heap, state);
  for (const auto& [log_p, label] : heap)
    if (label == hq_) return std::clamp((double)std::exp(log_p), 0.0, 1.0);
  return 0.0;
}

double QualityModel::score_reference(std::string_view text) const {
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
