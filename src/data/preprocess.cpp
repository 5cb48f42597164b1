#include "data/preprocess.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <ostream>
#include <thread>

#include "data/chat_documents.h"
#include "data/indexed_dataset.h"
#include "tokenizer/unicode_classes.h"

namespace trident::data {

namespace {

constexpr size_t kBatchLines = 512;
constexpr size_t kBatchBytes = 1 << 20;
constexpr size_t kMaxReported = 20;

struct Batch {
  long index = 0;
  long first_line = 0;  // 1-based line number of lines[0]
  std::vector<std::string> lines;
};

struct BatchResult {
  // documents[k][d]: tokens of document d for key k (bad lines produce no document)
  std::vector<std::vector<std::vector<int>>> documents;
  std::vector<std::vector<uint8_t>> loss_masks;  // with a chat template: documents[0]'s
  std::vector<std::string> bad;                  // "LINE: reason"
};

// One conversation line: its documents and their loss masks, or why the line is bad.
std::string preprocess_chat_line(const std::string& line, const PreprocessOptions& o,
                                 const tokenizer::Tokenizer& tok, BatchResult* r) {
  size_t bad_byte;
  if (!tokenizer::is_valid_utf8(line, &bad_byte))
    return "invalid UTF-8 at byte " + std::to_string(bad_byte);
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(line, nullptr, false);
  if (j.is_discarded()) return "invalid JSON";
  if (!j.is_object()) return "not a JSON object";
  const std::string& key = o.json_keys[0];
  if (!j.contains(key) || !j[key].is_array())
    return "key \"" + key + "\" is not a list of messages";
  chat_template::ChatOptions options = o.chat_options;
  for (const char* extra : {"tools", "documents"})
    if (j.contains(extra)) options.extra[extra] = j[extra];
  std::vector<MaskedDocument> docs;
  try {
    docs = chat_documents(*o.chat_template, options, j[key], tok);
  } catch (const std::exception& e) {
    return e.what();
  }
  for (MaskedDocument& d : docs) {
    if (o.add_bos)
      d.ids.insert(d.ids.begin(), tok.bos()), d.loss_mask.insert(d.loss_mask.begin(), 0);
    if (o.append_eod)
      d.ids.push_back((o.eod_id >= 0 ? o.eod_id : tok.eod())), d.loss_mask.push_back(0);
    r->documents[0].push_back(std::move(d.ids));
    r->loss_masks.push_back(std::move(d.loss_mask));
  }
  return "";
}

BatchResult process_batch(const Batch& b, const PreprocessOptions& o,
                          const tokenizer::Tokenizer& tok) {
  BatchResult r;
  r.documents.resize(o.json_keys.size());
  std::vector<std::vector<int>> per_key;
  for (size_t i = 0; i < b.lines.size(); ++i) {
    if (o.chat_template) {
      std::string reason = preprocess_chat_line(b.lines[i], o, tok, &r);
      if (!reason.empty()) r.bad.push_back(std::to_string(b.first_line + (long)i) + ": " + reason);
      continue;
    }
    std::string reason = preprocess_line(b.lines[i], o, tok, &per_key);
    if (!reason.empty()) {
      r.bad.push_back(std::to_string(b.first_line + (long)i) + ": " + reason);
      continue;
    }
    for (size_t k = 0; k < per_key.size(); ++k) r.documents[k].push_back(std::move(per_key[k]));
  }
  return r;
}

// A fixed pool of workers over a queue of batches; results are collected by index.
class BatchPipeline {
 public:
  BatchPipeline(const PreprocessOptions& o, const tokenizer::Tokenizer& tok)
      : options_(o), tok_(tok) {
    for (int w = 0; w < std::max(1, o.workers); ++w) threads_.emplace_back([this] { work(); });
  }
  ~BatchPipeline() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  // Batches submitted and not yet taken back with next(); the caller keeps this bounded.
  size_t in_flight() {
    std::lock_guard<std::mutex> lock(mu_);
    return in_flight_;
  }
  size_t capacity() const { return 2 * threads_.size() + 2; }
  void submit(Batch b) {
    std::lock_guard<std::mutex> lock(mu_);
    ++in_flight_;
    queue_.push_back(std::move(b));
    cv_.notify_one();
  }
  // The next result in input order, if it is ready (or, with wait, once it is).
  bool next(BatchResult* out, bool wait) {
    std::unique_lock<std::mutex> lock(mu_);
    if (wait) done_.wait(lock, [&] { return results_.count(next_index_) > 0; });
    auto it = results_.find(next_index_);
    if (it == results_.end()) return false;
    *out = std::move(it->second);
    results_.erase(it);
    ++next_index_;
    --in_flight_;
    return true;
  }

 private:
  void work() {
    for (;;) {
      Batch b;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return closing_ || !queue_.empty(); });
        if (queue_.empty()) return;
        b = std::move(queue_.front());
        queue_.pop_front();
      }
      BatchResult r = process_batch(b, options_, tok_);
      {
        std::lock_guard<std::mutex> lock(mu_);
        results_[b.index] = std::move(r);
      }
      done_.notify_all();
    }
  }

  const PreprocessOptions& options_;
  const tokenizer::Tokenizer& tok_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_, done_;
  std::deque<Batch> queue_;
  std::map<long, BatchResult> results_;
  long next_index_ = 0;
  size_t in_flight_ = 0;
  bool closing_ = false;
};

}  // namespace

std::string preprocess_line(const std::string& line, const PreprocessOptions& o,
                            const tokenizer::Tokenizer& tok,
                            std::vector<std::vector<int>>* per_key) {
  size_t bad_byte;
  if (!tokenizer::is_valid_utf8(line, &bad_byte))
    return "invalid UTF-8 at byte " + std::to_string(bad_byte);
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded()) return "invalid JSON";
  if (!j.is_object()) return "not a JSON object";
  per_key->assign(o.json_keys.size(), {});
  for (size_t k = 0; k < o.json_keys.size(); ++k) {
    auto it = j.find(o.json_keys[k]);
    if (it == j.end()) return "missing key \"" + o.json_keys[k] + "\"";
    if (!it->is_string()) return "key \"" + o.json_keys[k] + "\" is not a string";
    std::vector<int>& ids = (*per_key)[k];
    if (o.add_bos) ids.push_back(tok.bos());
    tok.encode(it->get_ref<const std::string&>(), &ids);
    if (o.add_bos && ids.size() == 1) ids.clear();  // an empty document stays empty
    if (o.append_eod && !ids.empty()) ids.push_back((o.eod_id >= 0 ? o.eod_id : tok.eod()));
  }
  return "";
}

std::string output_prefix_for_key(const std::string& prefix, const std::string& key) {
  return prefix + "_" + key + "_document";
}

std::string loss_mask_prefix_for_key(const std::string& prefix, const std::string& key) {
  return prefix + "_" + key + "_loss_mask";
}

PreprocessReport preprocess(const PreprocessOptions& o, std::ostream& progress) {
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const std::unique_ptr<tokenizer::Tokenizer> built = tokenizer::build_tokenizer(o.tokenizer);
  const tokenizer::Tokenizer& tok = *built;
  if (o.eod_id >= tok.vocab_size())
    throw DatasetError("--eod-id " + std::to_string(o.eod_id) +
                       " is not an id of the tokenizer's " + std::to_string(tok.vocab_size()) +
                       " tokens");
  if (o.add_bos && tok.bos() < 0)
    throw DatasetError("--add-bos: the tokenizer has no beginning-of-sequence token");
  std::ifstream in(o.input, std::ios::binary);
  if (!in) throw DatasetError(o.input + ": cannot open");
  std::vector<std::unique_ptr<IndexedDatasetBuilder>> builders;
  PreprocessReport report;
  for (const std::string& key : o.json_keys) {
    report.outputs.push_back(output_prefix_for_key(o.output_prefix, key));
    builders.push_back(std::make_unique<IndexedDatasetBuilder>(report.outputs.back(),
                                                               dtype_for_vocab(tok.vocab_size())));
  }
  std::unique_ptr<IndexedDatasetBuilder> masks;
  if (o.chat_template) {
    if (o.json_keys.size() != 1)
      throw DatasetError("--apply-chat-template: give one --json-keys key (the conversations)");
    report.outputs.push_back(loss_mask_prefix_for_key(o.output_prefix, o.json_keys[0]));
    masks = std::make_unique<IndexedDatasetBuilder>(report.outputs.back(), TokenDtype::kUint8);
  }
  double last_progress = 0;
  auto consume = [&](BatchResult& r) {
    for (const std::string& b : r.bad) {
      ++report.bad_lines;
      if (!o.skip_bad_lines) throw BadLineError(o.input + ":" + b);
      if (report.bad_line_messages.size() < kMaxReported) report.bad_line_messages.push_back(b);
    }
    for (size_t k = 0; k < r.documents.size(); ++k)
      for (size_t d = 0; d < r.documents[k].size(); ++d) {
        const std::vector<int>& doc = r.documents[k][d];
        if (doc.empty()) {
          if (k == 0) ++report.empty_documents;
          continue;  // Megatron's preprocess_data skips documents without tokens
        }
        builders[k]->add_document(doc);
        if (masks) {
          const std::vector<int> mask(r.loss_masks[d].begin(), r.loss_masks[d].end());
          masks->add_document(mask);
        }
        report.tokens += (long)doc.size();
      }
    double t = elapsed();
    if (t - last_progress >= o.progress_seconds) {
      last_progress = t;
      progress << "preprocess: " << builders[0]->documents() << " documents, "
               << (long)(builders[0]->documents() / t) << " docs/s, " << report.bytes / t / 1e6
               << " MB/s" << std::endl;
    }
  };
  {
    BatchPipeline pipeline(o, tok);
    Batch batch;
    batch.first_line = 1;
    size_t batch_bytes = 0;
    long submitted = 0, consumed = 0;
    std::string line;
    BatchResult result;
    auto flush = [&] {
      if (batch.lines.empty()) return;
      long next_first = batch.first_line + (long)batch.lines.size();
      // Memory stays bounded: take finished batches back before submitting more.
      while (pipeline.in_flight() >= pipeline.capacity())
        pipeline.next(&result, true), consume(result), ++consumed;
      batch.index = submitted++;
      pipeline.submit(std::move(batch));
      batch = Batch{};
      batch.first_line = next_first;
      batch_bytes = 0;
      while (pipeline.next(&result, false)) consume(result), ++consumed;
    };
    while (std::getline(in, line)) {
      ++report.lines;
      report.bytes += (double)line.size() + 1;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      batch_bytes += line.size();
      batch.lines.push_back(std::move(line));
      if (batch.lines.size() >= kBatchLines || batch_bytes >= kBatchBytes) flush();
    }
    flush();
    while (consumed < submitted) pipeline.next(&result, true), consume(result), ++consumed;
  }
  report.documents = builders[0]->documents();
  for (auto& b : builders) b->finish();
  if (masks) masks->finish();
  report.seconds = elapsed();
  return report;
}

}  // namespace trident::data
