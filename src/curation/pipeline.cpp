#include "curation/pipeline.h"

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <ostream>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "curation/decontaminate.h"
#include "curation/document.h"
#include "curation/exact_dedup.h"
#include "curation/exchange.h"
#include "curation/langid.h"
#include "curation/lsh.h"
#include "curation/minhash.h"
#include "curation/normalize.h"
#include "curation/ordered_pool.h"
#include "curation/pareto.h"
#include "curation/quality.h"
#include "curation/report.h"
#include "curation/union_find.h"

namespace trident::curation {

bool CurateOptions::has(const std::string& stage) const {
  return std::find(stages.begin(), stages.end(), stage) != stages.end();
}

std::vector<std::string> default_stages(const CurateOptions& o) {
  std::vector<std::string> s = {"normalize", "langid"};
  if (!o.quality_model.empty() || !o.quality_score_key.empty()) s.push_back("quality");
  s.push_back("exact-dedup");
  s.push_back("fuzzy-dedup");
  if (!o.decontaminate_files.empty()) s.push_back("decontaminate");
  return s;
}

namespace {

enum Stage { kNormalize, kLangid, kQuality, kExact, kFuzzy, kDecontaminate, kStages };
constexpr int kLineBits = 40;
constexpr size_t kBatchLines = 256;
constexpr size_t kBatchBytes = 1 << 20;
constexpr size_t kMaxBadReported = 20;

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// CPU time of the calling thread: per-stage figures stay per-worker throughput when other
// processes share the cores (wall time would charge their time to the stage).
double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

std::uint64_t order_of(size_t file, long line) {
  return ((std::uint64_t)file << kLineBits) | (std::uint64_t)line;
}
size_t file_of(std::uint64_t order) {
  return (size_t)(order >> kLineBits);
}
long line_of(std::uint64_t order) {
  return (long)(order & ((1ULL << kLineBits) - 1));
}

template <class Json>
std::string dump(const Json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// What phase 1 keeps of a surviving document: its output line (normalised text), the text
// again (so phases 2 and 3 need not parse JSON) and its id.
struct SpoolRecord {
  std::string json, text, id;
};

void write_string(std::ostream& out, const std::string& s) {
  const std::uint64_t n = s.size();
  out.write((const char*)&n, sizeof n);
  out.write(s.data(), (std::streamsize)n);
}
bool read_string(std::istream& in, std::string* s) {
  std::uint64_t n;
  if (!in.read((char*)&n, sizeof n)) return false;
  s->resize(n);
  return (bool)in.read(s->data(), (std::streamsize)n);
}
bool read_record(std::istream& in, SpoolRecord* r) {
  return read_string(in, &r->json) && read_string(in, &r->text) && read_string(in, &r->id);
}

// The per-document index that stays in memory: what the global steps need.
struct IndexEntry {
  std::uint64_t order = 0, chars = 0, bytes = 0;
};

struct Phase1Job {
  size_t file = 0;
  long first_line = 1;
  std::vector<std::string> lines;
};

struct Phase1Result {
  std::vector<SpoolRecord> docs;
  std::vector<IndexEntry> index;
  std::vector<HashedDoc> exact;
  std::vector<std::uint64_t> bands;
  std::vector<std::string> removed, bad;
  std::vector<StageReport> stages;
  long lines = 0;
  double bytes = 0;
};

std::vector<StageReport> empty_stages() {
  std::vector<StageReport> s(kStages);
  for (int i = 0; i < kStages; ++i) s[i].name = all_stages()[i];
  return s;
}

std::string audit_line(const std::string& id, const std::string& file, long line, int stage,
                       const std::string& reason, nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json j = {{"id", id},
                      {"file", file},
                      {"line", line},
                      {"stage", all_stages()[stage]},
                      {"reason", reason}};
  for (auto& [k, v] : extra.items()) j[k] = v;
  return dump(j);
}

class Curator {
 public:
  Curator(const CurateOptions& o, const Exchange& ex, std::ostream& progress)
      : o_(o),
        ex_(ex),
        progress_(progress),
        stages_(empty_stages()),
        hasher_(o.minhash_perms, o.seed),
        ngrams_(o.ngram) {
    if (o.has("fuzzy-dedup")) lsh_ = choose_lsh_params(o.jaccard_threshold, o.minhash_perms);
    if (o.has("quality") && !o.quality_model.empty())
      quality_ = std::make_unique<QualityModel>(o.quality_model);
    if (o.has("decontaminate")) build_ngram_index();
    rules_ = {o.context_chars, o.min_piece_chars, o.max_pieces};
    language_filter_ = {o.langs, o.lang_threshold};
  }

  CurateResult run();

 private:
  void build_ngram_index();
  Phase1Result phase1_batch(const Phase1Job& job) const;
  void phase1();
  void exact_dedup();
  void fuzzy_dedup();
  void phase3();
  void commit(const std::string& final_path, const std::string& part_prefix);
  std::string temp(const std::string& base, const std::string& what) const {
    return base + ".tmp." + token_ + "." + what;
  }

  const CurateOptions& o_;
  const Exchange& ex_;
  std::ostream& progress_;
  std::vector<StageReport> stages_;
  MinHasher hasher_;
  LshParams lsh_;
  std::unique_ptr<QualityModel> quality_;
  NgramIndex ngrams_;
  DecontaminationRules rules_;
  LanguageFilter language_filter_;
  std::string token_;
  std::string spool_path_, out_part_, removed_part_;
  std::vector<std::string> temp_files_;
  std::ofstream removed_out_;

  // Phase 1 results: the index of this rank's surviving documents.
  std::vector<IndexEntry> index_;
  std::vector<HashedDoc> exact_;
  std::vector<std::uint64_t> bands_;
  // Phase 2 decisions, per local document: 0 kept, else the stage that removed it, with the
  // audit record's details.
  std::vector<std::uint8_t> removed_by_;
  std::unordered_map<std::uint32_t, nlohmann::json> removal_detail_;

  long lines_ = 0, bad_lines_ = 0, documents_out_ = 0;
  double bytes_ = 0, bytes_out_ = 0;
  std::vector<std::string> bad_messages_;
  nlohmann::json fuzzy_facts_ = nlohmann::json::object();
  std::string s_curve_;
};

void Curator::build_ngram_index() {
  for (const std::string& f : o_.decontaminate_files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) throw std::runtime_error(f + ": cannot open the task file");
    std::string line;
    long n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object())
        throw std::runtime_error(f + ":" + std::to_string(n) + ": not a JSON object");
      for (const std::string& key : o_.decontaminate_keys) {
        auto it = j.find(key);
        if (it == j.end()) continue;
        // Choices and answers are lists of strings in several task formats.
        if (it->is_string()) ngrams_.add_text(it->get<std::string>());
        if (it->is_array())
          for (const auto& v : *it)
            if (v.is_string()) ngrams_.add_text(v.get<std::string>());
      }
    }
  }
}

Phase1Result Curator::phase1_batch(const Phase1Job& job) const {
  Phase1Result r;
  r.stages = empty_stages();
  ParsedLine p;
  const std::string& file = o_.inputs[job.file];
  std::vector<std::uint32_t> sig(o_.minhash_perms);
  for (size_t k = 0; k < job.lines.size(); ++k) {
    const std::string& line = job.lines[k];
    const long line_no = job.first_line + (long)k;
    ++r.lines;
    r.bytes += (double)line.size() + 1;
    if (line.find_first_not_of(" \t") == std::string::npos)
      continue;  // blank lines are no documents
    std::string reason = parse_curate_line(line, o_.text_key, o_.id_key, &p);
    double score = -1;
    if (reason.empty() && o_.has("quality") && !quality_) {
      auto it = p.object.find(o_.quality_score_key);
      if (it == p.object.end() || !it->is_number() || it->get<double>() < 0 ||
          it->get<double>() > 1)
        reason = "key \"" + o_.quality_score_key + "\" is not a number in [0, 1]";
      else
        score = it->get<double>();
    }
    if (!reason.empty()) {
      r.bad.push_back(file + ":" + std::to_string(line_no) + ": " + reason);
      continue;
    }
    const std::string id = p.has_id ? p.id : file + ":" + std::to_string(line_no);
    std::string text = std::move(p.text);
    double t = thread_cpu_seconds();
    auto lap = [&](StageReport& s) {
      const double now = thread_cpu_seconds();
      s.cpu_seconds += now - t;
      t = now;
    };
    auto enter = [&](StageReport& s) { ++s.documents_in, s.bytes_in += (double)text.size(); };
    bool changed = false;
    long chars;
    if (o_.has("normalize")) {
      StageReport& s = r.stages[kNormalize];
      enter(s);
      std::string normal = normalize_text(text);
      changed = normal != text;
      text = std::move(normal);
      chars = count_chars(text);
      lap(s);
      if (chars < o_.min_chars) {
        s.remove("shorter than --min-chars");
        r.removed.push_back(audit_line(id, file, line_no, kNormalize, "shorter than --min-chars",
                                       {{"chars", chars}}));
        continue;
      }
      ++s.kept;
    } else {
      chars = count_chars(text);
    }
    if (o_.has("langid")) {
      StageReport& s = r.stages[kLangid];
      enter(s);
      LanguageGuess g = identify_language(text, language_filter_, o_.langid_sample_bytes);
      lap(s);
      ++s.languages[g.code];
      const bool wanted = language_filter_.wanted(g.code);
      if (!language_filter_.keeps(g)) {
        const std::string why =
            wanted ? "language confidence below --lang-threshold" : "language not in --langs";
        s.remove(why);
        r.removed.push_back(audit_line(id, file, line_no, kLangid, why,
                                       {{"language", g.code}, {"confidence", g.confidence}}));
        continue;
      }
      ++s.kept;
    }
    if (o_.has("quality")) {
      StageReport& s = r.stages[kQuality];
      enter(s);
      if (quality_) score = quality_->score(text);
      const double draw = pareto_draw(o_.seed, id, o_.pareto_alpha);
      lap(s);
      if (!pareto_keep(score, draw)) {
        s.remove("pareto draw <= 1 - quality score");
        r.removed.push_back(audit_line(id, file, line_no, kQuality,
                                       "pareto draw <= 1 - quality score",
                                       {{"score", score}, {"draw", draw}}));
        continue;
      }
      ++s.kept;
    }
    const std::uint64_t order = order_of(job.file, line_no);
    if (o_.has("exact-dedup")) {
      r.exact.push_back(exact_hash(text, order));
      lap(r.stages[kExact]);
    }
    if (o_.has("fuzzy-dedup")) {
      hasher_.signature(text, o_.shingle_size, sig.data());
      const size_t at = r.bands.size();
      r.bands.resize(at + lsh_.bands);
      band_hashes(sig.data(), lsh_, r.bands.data() + at);
      lap(r.stages[kFuzzy]);
    }
    r.index.push_back({order, (std::uint64_t)chars, (std::uint64_t)text.size()});
    SpoolRecord rec;
    if (changed) {
      p.object[o_.text_key] = text;
      rec.json = dump(p.object);
    } else {
      rec.json = line;  // untouched: the input line as it was
    }
    rec.text = std::move(text);
    rec.id = id;
    r.docs.push_back(std::move(rec));
  }
  return r;
}

void Curator::phase1() {
  const auto start = Clock::now();
  std::ofstream spool(spool_path_, std::ios::binary);
  if (!spool) throw std::runtime_error(spool_path_ + ": cannot write");
  // This rank's share: the lines that start in its slice [lo, hi) of all input bytes taken
  // as one stream (so one big file is shared as well as many small ones). Slices follow rank
  // order, so the ranks' outputs joined in rank order are the input order.
  const size_t nfiles = o_.inputs.size();
  std::vector<std::uint64_t> sizes(nfiles);
  std::uint64_t total = 0;
  for (size_t f = 0; f < nfiles; ++f) {
    std::error_code ec;
    sizes[f] = std::filesystem::file_size(o_.inputs[f], ec);
    if (ec) throw std::runtime_error(o_.inputs[f] + ": cannot open (" + ec.message() + ")");
    total += sizes[f];
  }
  const std::uint64_t lo = total * ex_.rank() / ex_.size();
  const std::uint64_t hi = total * (ex_.rank() + 1) / ex_.size();
  double last_progress = 0;
  long kept = 0;
  auto consume = [&](Phase1Result& r) {
    for (const std::string& b : r.bad) {
      ++bad_lines_;
      if (!o_.skip_bad_lines) throw BadLineError(b);
      if (bad_messages_.size() < kMaxBadReported) bad_messages_.push_back(b);
    }
    lines_ += r.lines;
    bytes_ += r.bytes;
    for (const SpoolRecord& rec : r.docs) {
      write_string(spool, rec.json);
      write_string(spool, rec.text);
      write_string(spool, rec.id);
    }
    kept += (long)r.docs.size();
    index_.insert(index_.end(), r.index.begin(), r.index.end());
    exact_.insert(exact_.end(), r.exact.begin(), r.exact.end());
    bands_.insert(bands_.end(), r.bands.begin(), r.bands.end());
    for (const std::string& a : r.removed) removed_out_ << a << '\n';
    for (int s = 0; s < kStages; ++s) stages_[s].merge(r.stages[s]);
    const double t = since(start);
    if (ex_.rank() == 0 && t - last_progress >= o_.progress_seconds) {
      last_progress = t;
      progress_ << "curate: " << (ex_.size() > 1 ? "rank 0: " : "") << lines_ << " lines, "
                << (long)(lines_ / t) << " docs/s, " << bytes_ / t / 1e6 << " MB/s, " << kept
                << " kept so far" << std::endl;
    }
  };
  OrderedPool<Phase1Job, Phase1Result> pool(o_.workers,
                                            [this](Phase1Job& j) { return phase1_batch(j); });
  long submitted = 0, consumed = 0;
  Phase1Result result;
  std::uint64_t file_start = 0;
  for (size_t f = 0; f < nfiles; ++f) {
    const std::uint64_t fb = file_start, fe = file_start + sizes[f];
    file_start = fe;
    if (std::max(lo, fb) >= std::min(hi, fe)) continue;
    const std::uint64_t a = std::max(lo, fb) - fb, b = std::min(hi, fe) - fb;
    std::ifstream in(o_.inputs[f], std::ios::binary);
    if (!in) throw std::runtime_error(o_.inputs[f] + ": cannot open");
    // Line numbers stay those of the whole file: count the newlines before the slice, then
    // skip the line that started before it (the previous rank's).
    long line_no = 0;
    std::uint64_t pos = 0;
    std::string line;
    if (a > 0) {
      std::vector<char> buf(1 << 20);
      while (pos < a - 1) {
        const size_t want = (size_t)std::min<std::uint64_t>(buf.size(), a - 1 - pos);
        in.read(buf.data(), (std::streamsize)want);
        line_no += (long)std::count(buf.data(), buf.data() + in.gcount(), '\n');
        pos += (std::uint64_t)in.gcount();
        if ((size_t)in.gcount() < want) break;
      }
      char c = 0;
      if (in.get(c) && c != '\n') {  // byte a - 1 is inside a line: skip to its end
        ++pos;
        if (std::getline(in, line))
          pos += line.size() + 1, ++line_no;
        else
          pos = fe - fb;
      } else {
        ++pos;
        line_no += c == '\n';
      }
    }
    Phase1Job job{f, line_no + 1, {}};
    size_t job_bytes = 0;
    auto flush = [&] {
      if (job.lines.empty()) return;
      while (pool.in_flight() >= pool.capacity())
        pool.next(&result, true), consume(result), ++consumed;
      pool.submit(std::move(job));
      ++submitted;
      job = Phase1Job{f, line_no + 1, {}};
      job_bytes = 0;
      while (pool.next(&result, false)) consume(result), ++consumed;
    };
    while (pos < b && std::getline(in, line)) {
      ++line_no;
      pos += line.size() + 1;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      job_bytes += line.size();
      job.lines.push_back(std::move(line));
      if (job.lines.size() >= kBatchLines || job_bytes >= kBatchBytes) flush();
    }
    flush();
  }
  while (consumed < submitted) pool.next(&result, true), consume(result), ++consumed;
  spool.close();
  if (!spool) throw std::runtime_error(spool_path_ + ": write failed");
  removed_by_.assign(index_.size(), 0);
}

void Curator::exact_dedup() {
  const auto start = Clock::now();
  StageReport& s = stages_[kExact];
  size_t offset = 0;
  std::vector<HashedDoc> all = ex_.all_gather_vector(exact_, &offset);
  std::vector<std::uint32_t> keeper = exact_keepers(all);
  for (size_t i = 0; i < index_.size(); ++i) {
    ++s.documents_in;
    s.bytes_in += (double)index_[i].bytes;
    const std::uint32_t k = keeper[offset + i];
    if (k == offset + i) {
      ++s.kept;
      continue;
    }
    s.remove("exact duplicate");
    removed_by_[i] = kExact + 1;
    const std::uint64_t ko = all[k].order;
    removal_detail_[(std::uint32_t)i] = {
        {"kept", o_.inputs[file_of(ko)] + ":" + std::to_string(line_of(ko))}};
  }
  s.global_seconds = since(start);
  exact_ = {};
}

void Curator::fuzzy_dedup() {
  const auto start = Clock::now();
  StageReport& s = stages_[kFuzzy];
  const int nb = lsh_.bands;
  // The documents still in play, and their index entries and bands.
  std::vector<std::uint32_t> alive;
  std::vector<IndexEntry> entries;
  std::vector<std::uint64_t> bands;
  for (size_t i = 0; i < index_.size(); ++i) {
    if (removed_by_[i]) continue;
    alive.push_back((std::uint32_t)i);
    entries.push_back(index_[i]);
    bands.insert(bands.end(), bands_.begin() + (long)i * nb, bands_.begin() + (long)(i + 1) * nb);
    ++s.documents_in;
    s.bytes_in += (double)index_[i].bytes;
  }
  bands_ = {};
  size_t offset = 0;
  std::vector<IndexEntry> all = ex_.all_gather_vector(entries, &offset);
  std::vector<std::uint64_t> all_bands = ex_.all_gather_vector(bands);
  bands = {};
  const long n = (long)all.size();
  auto pairs = candidate_pairs(all_bands, n, nb, o_.max_bucket);
  all_bands = {};
  std::vector<std::uint8_t> candidate(n, 0);
  for (auto [a, b] : pairs) candidate[a] = candidate[b] = 1;
  // The shingle sets of this rank's candidates, from the spool, then everyone's.
  std::string mine;
  {
    std::ifstream spool(spool_path_, std::ios::binary);
    SpoolRecord rec;
    size_t a = 0;
    for (std::uint32_t i = 0; read_record(spool, &rec); ++i) {
      if (a < alive.size() && alive[a] < i) ++a;
      if (a >= alive.size() || alive[a] != i || !candidate[offset + a]) continue;
      const std::uint32_t g = (std::uint32_t)(offset + a);
      std::vector<std::uint64_t> sh = shingle_hashes(rec.text, o_.shingle_size);
      const std::uint32_t idlen = (std::uint32_t)rec.id.size(), count = (std::uint32_t)sh.size();
      mine.append((const char*)&g, 4).append((const char*)&idlen, 4).append(rec.id);
      mine.append((const char*)&count, 4).append((const char*)sh.data(), sh.size() * 8);
    }
  }
  std::vector<std::string> parts = ex_.all_gather(mine);
  mine.clear();
  std::unordered_map<std::uint32_t, std::pair<std::string, std::vector<std::uint64_t>>> sets;
  for (const std::string& part : parts) {
    size_t at = 0;
    while (at < part.size()) {
      std::uint32_t g, idlen, count;
      std::memcpy(&g, part.data() + at, 4);
      std::memcpy(&idlen, part.data() + at + 4, 4);
      auto& [id, sh] = sets[g];
      id = part.substr(at + 8, idlen);
      at += 8 + idlen;
      std::memcpy(&count, part.data() + at, 4);
      sh.resize(count);
      std::memcpy(sh.data(), part.data() + at + 4, (size_t)count * 8);
      at += 4 + (size_t)count * 8;
    }
  }
  parts = {};
  // Verify every candidate pair on its true Jaccard, the workers sharing the pairs.
  std::vector<float> jac(pairs.size());
  {
    std::vector<std::thread> threads;
    const int w = std::max(1, o_.workers);
    for (int t = 0; t < w; ++t)
      threads.emplace_back([&, t] {
        for (size_t k = t; k < pairs.size(); k += w)
          jac[k] = (float)jaccard(sets.at(pairs[k].first).second, sets.at(pairs[k].second).second);
      });
    for (auto& th : threads) th.join();
  }
  UnionFind uf(n);
  long duplicate_pairs = 0;
  for (size_t k = 0; k < pairs.size(); ++k)
    if (jac[k] >= o_.jaccard_threshold)
      ++duplicate_pairs, uf.unite(pairs[k].first, pairs[k].second);
  // One keeper per cluster: the longest (then the first) or the first.
  std::unordered_map<std::uint32_t, std::uint32_t> keeper;
  for (long g = 0; g < n; ++g) {
    if (!candidate[g]) continue;
    const std::uint32_t root = uf.find((std::uint32_t)g);
    auto it = keeper.find(root);
    if (it == keeper.end()) {
      keeper[root] = (std::uint32_t)g;
      continue;
    }
    const IndexEntry &a = all[g], &b = all[it->second];
    const bool better = o_.keep == "longest"
                            ? (a.chars > b.chars || (a.chars == b.chars && a.order < b.order))
                            : a.order < b.order;
    if (better) it->second = (std::uint32_t)g;
  }
  long clusters = 0;
  for (const auto& [root, k] : keeper) clusters += uf.size_of(root) > 1;
  for (size_t a = 0; a < alive.size(); ++a) {
    const std::uint32_t g = (std::uint32_t)(offset + a);
    if (!candidate[g] || keeper.at(uf.find(g)) == g) {
      ++s.kept;
      continue;
    }
    const std::uint32_t k = keeper.at(uf.find(g));
    s.remove("near duplicate");
    removed_by_[alive[a]] = kFuzzy + 1;
    removal_detail_[alive[a]] = {
        {"kept", sets.at(k).first},
        {"jaccard_with_kept", jaccard(sets.at(g).second, sets.at(k).second)},
        {"cluster_size", uf.size_of(g)}};
  }
  if (ex_.rank() == 0 && !o_.candidates_out.empty()) {
    std::ofstream c(o_.candidates_out + ".tmp." + token_, std::ios::binary);
    for (size_t k = 0; k < pairs.size(); ++k)
      c << dump(nlohmann::json{{"a", sets.at(pairs[k].first).first},
                               {"b", sets.at(pairs[k].second).first},
                               {"jaccard", jac[k]},
                               {"duplicate", jac[k] >= o_.jaccard_threshold}})
        << '\n';
    c.close();
    if (!c ||
        std::rename((o_.candidates_out + ".tmp." + token_).c_str(), o_.candidates_out.c_str()))
      throw std::runtime_error(o_.candidates_out + ": cannot write");
  }
  // What each document costs in memory during the run: its index entry and band hashes (the
  // signature itself is not kept; verification uses the candidates' shingle sets).
  const double per_doc =
      (double)sizeof(IndexEntry) + 8.0 * nb + (o_.has("exact-dedup") ? sizeof(HashedDoc) : 0);
  s.extra = {{"permutations", o_.minhash_perms},
             {"shingle_size", o_.shingle_size},
             {"jaccard_threshold", o_.jaccard_threshold},
             {"bands", lsh_.bands},
             {"rows", lsh_.rows},
             {"candidate_pairs", (long)pairs.size()},
             {"duplicate_pairs", duplicate_pairs},
             {"clusters", clusters},
             {"index_bytes_per_document", per_doc},
             {"keep", o_.keep}};
  s.global_seconds = since(start);
}

struct Phase3Job {
  std::vector<std::uint32_t> local;
  std::vector<SpoolRecord> docs;
};
struct Phase3Result {
  std::string out, removed;
  long lines = 0;
  StageReport stage;
};

void Curator::phase3() {
  std::ofstream out(out_part_, std::ios::binary);
  if (!out) throw std::runtime_error(out_part_ + ": cannot write");
  const bool decontaminate_on = o_.has("decontaminate");
  auto work = [&](Phase3Job& job) {
    Phase3Result r;
    r.stage.name = "decontaminate";
    for (size_t k = 0; k < job.docs.size(); ++k) {
      const std::uint32_t i = job.local[k];
      SpoolRecord& rec = job.docs[k];
      const std::uint64_t order = index_[i].order;
      const std::string& file = o_.inputs[file_of(order)];
      if (removed_by_[i]) {
        const int stage = removed_by_[i] - 1;
        r.removed += audit_line(rec.id, file, line_of(order), stage,
                                stage == kExact ? "exact duplicate" : "near duplicate",
                                removal_detail_.at(i)) +
                     "\n";
        continue;
      }
      if (!decontaminate_on) {
        r.out += rec.json + "\n";
        ++r.lines;
        continue;
      }
      const double t = thread_cpu_seconds();
      ++r.stage.documents_in;
      r.stage.bytes_in += (double)rec.text.size();
      Decontaminated d = decontaminate(rec.text, ngrams_, rules_);
      if (!d.matched) {
        r.stage.cpu_seconds += thread_cpu_seconds() - t;
        ++r.stage.kept;
        r.out += rec.json + "\n";
        ++r.lines;
        continue;
      }
      if (d.dropped) {
        const std::string why = d.pieces_before_drop > rules_.max_pieces
                                    ? "more than --max-pieces pieces"
                                    : "no piece of --min-piece-chars left";
        r.stage.remove(why);
        r.removed += audit_line(rec.id, file, line_of(order), kDecontaminate, why,
                                {{"matched_ngrams", d.matches}, {"pieces", d.pieces_before_drop}}) +
                     "\n";
        r.stage.cpu_seconds += thread_cpu_seconds() - t;
        continue;
      }
      ++r.stage.kept;
      ++r.stage.reasons["cut (kept in pieces)"];
      r.removed +=
          audit_line(rec.id, file, line_of(order), kDecontaminate, "matched n-grams cut out",
                     {{"matched_ngrams", d.matches}, {"pieces_kept", d.pieces.size()}}) +
          "\n";
      nlohmann::ordered_json obj = nlohmann::ordered_json::parse(rec.json);
      for (size_t p = 0; p < d.pieces.size(); ++p) {
        obj[o_.text_key] = d.pieces[p];
        obj[o_.id_key] = rec.id + "_" + std::to_string(p);
        r.out += dump(obj) + "\n";
        ++r.lines;
      }
      r.stage.cpu_seconds += thread_cpu_seconds() - t;
    }
    return r;
  };
  OrderedPool<Phase3Job, Phase3Result> pool(o_.workers, work);
  long submitted = 0, consumed = 0;
  Phase3Result result;
  auto consume = [&](Phase3Result& r) {
    out << r.out;
    bytes_out_ += (double)r.out.size();
    removed_out_ << r.removed;
    documents_out_ += r.lines;
    if (decontaminate_on) stages_[kDecontaminate].merge(r.stage);
  };
  std::ifstream spool(spool_path_, std::ios::binary);
  Phase3Job job;
  size_t job_bytes = 0;
  auto flush = [&] {
    if (job.docs.empty()) return;
    while (pool.in_flight() >= pool.capacity())
      pool.next(&result, true), consume(result), ++consumed;
    pool.submit(std::move(job));
    ++submitted;
    job = Phase3Job{};
    job_bytes = 0;
    while (pool.next(&result, false)) consume(result), ++consumed;
  };
  SpoolRecord rec;
  for (std::uint32_t i = 0; read_record(spool, &rec); ++i) {
    job_bytes += rec.json.size() + rec.text.size();
    job.local.push_back(i);
    job.docs.push_back(std::move(rec));
    if (job.docs.size() >= kBatchLines || job_bytes >= kBatchBytes) flush();
  }
  flush();
  while (consumed < submitted) pool.next(&result, true), consume(result), ++consumed;
  out.close();
  if (!out) throw std::runtime_error(out_part_ + ": write failed");
}

// Rank 0 joins the ranks' parts, in rank order, under a temporary name and renames it.
void Curator::commit(const std::string& final_path, const std::string& part_prefix) {
  if (ex_.rank() != 0) return;
  const std::string tmp = final_path + ".tmp." + token_;
  temp_files_.push_back(tmp);
  {
    std::ofstream out(tmp, std::ios::binary);
    for (int r = 0; r < ex_.size(); ++r) {
      std::ifstream in(part_prefix + std::to_string(r), std::ios::binary);
      if (!in) throw std::runtime_error(part_prefix + std::to_string(r) + ": missing part");
      if (in.peek() != std::ifstream::traits_type::eof()) out << in.rdbuf();
    }
    out.close();
    if (!out) throw std::runtime_error(tmp + ": write failed");
  }
  if (std::rename(tmp.c_str(), final_path.c_str()) != 0)
    throw std::runtime_error(final_path + ": cannot rename " + tmp + " to it");
}

CurateResult Curator::run() {
  const auto start = Clock::now();
  // One name for this run's temporary files, chosen by rank 0.
  token_ = ex_.all_gather(std::to_string(getpid()) + "-" +
                          std::to_string(Clock::now().time_since_epoch().count() % 1000000007))[0];
  const std::string r = std::to_string(ex_.rank());
  spool_path_ = temp(o_.output, "spool" + r);
  out_part_ = temp(o_.output, "part" + r);
  removed_part_ = o_.removed.empty() ? "/dev/null" : temp(o_.removed, "part" + r);
  temp_files_ = {spool_path_, out_part_};
  if (!o_.removed.empty()) temp_files_.push_back(removed_part_);
  struct Cleanup {
    std::vector<std::string>* files;
    ~Cleanup() {
      for (const std::string& f : *files) std::remove(f.c_str());
    }
  } cleanup{&temp_files_};
  removed_out_.open(removed_part_, std::ios::binary);
  if (!removed_out_) throw std::runtime_error(removed_part_ + ": cannot write");

  auto t = Clock::now();
  phase1();
  const double phase1_seconds = since(t);
  if (o_.has("exact-dedup")) exact_dedup();
  if (o_.has("fuzzy-dedup")) fuzzy_dedup();
  t = Clock::now();
  phase3();
  const double phase3_seconds = since(t);
  removed_out_.close();
  if (!removed_out_) throw std::runtime_error(removed_part_ + ": write failed");
  ex_.barrier();  // every part is complete
  commit(o_.output, temp(o_.output, "part"));
  if (!o_.removed.empty()) commit(o_.removed, temp(o_.removed, "part"));

  // The report: every rank's stages and counters, merged on rank 0.
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  nlohmann::json mine = {
      {"stages", nlohmann::json::array()},
      {"lines", lines_},
      {"bytes", bytes_},
      {"bad_lines", bad_lines_},
      {"bad_line_messages", bad_messages_},
      {"documents_out", documents_out_},
      {"bytes_out", bytes_out_},
      {"max_rss_mb", ru.ru_maxrss / 1024.0},
      {"documents_indexed", (long)index_.size()},
      {"cpu_seconds", (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                          (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec}};
  for (const StageReport& s : stages_) mine["stages"].push_back(s.to_json());
  std::vector<std::string> all = ex_.all_gather(dump(mine));
  CurateResult result;
  if (o_.has("fuzzy-dedup")) result.s_curve = s_curve_table(lsh_, o_.jaccard_threshold);
  const double seconds = ex_.max(since(start));
  if (ex_.rank() != 0) return result;
  std::vector<StageReport> merged = empty_stages();
  nlohmann::json rep = {{"inputs", o_.inputs},
                        {"output", o_.output},
                        {"ranks", ex_.size()},
                        {"workers", o_.workers},
                        {"stages_run", o_.stages}};
  long lines = 0, bad = 0, docs_out = 0, indexed = 0;
  double bytes = 0, bytes_out = 0, rss = 0, cpu = 0;
  std::vector<std::string> messages;
  for (const std::string& part : all) {
    nlohmann::json j = nlohmann::json::parse(part);
    for (int s = 0; s < kStages; ++s) merged[s].merge(StageReport::from_json(j["stages"][s]));
    lines += j["lines"].get<long>();
    bytes += j["bytes"].get<double>();
    bad += j["bad_lines"].get<long>();
    docs_out += j["documents_out"].get<long>();
    bytes_out += j["bytes_out"].get<double>();
    indexed += j["documents_indexed"].get<long>();
    rss = std::max(rss, j["max_rss_mb"].get<double>());
    cpu += j["cpu_seconds"].get<double>();
    for (const auto& m : j["bad_line_messages"])
      if (messages.size() < kMaxBadReported) messages.push_back(m);
  }
  rep["lines_in"] = lines;
  rep["bytes_in"] = bytes;
  rep["bad_lines"] = bad;
  rep["bad_line_messages"] = messages;
  rep["documents_out"] = docs_out;
  rep["bytes_out"] = bytes_out;
  rep["seconds"] = seconds;
  rep["mb_per_s"] = seconds > 0 ? bytes / seconds / 1e6 : 0.0;
  // Whole-pipeline throughput per CPU second of every thread and rank: MB/s per worker on
  // cores of its own, whatever else runs on the machine.
  rep["cpu_seconds"] = cpu;
  rep["mb_per_cpu_second"] = cpu > 0 ? bytes / cpu / 1e6 : 0.0;
  rep["phase_seconds_rank0"] = {{"local_stages", phase1_seconds}, {"write", phase3_seconds}};
  rep["documents_indexed"] = indexed;
  rep["max_rss_mb"] = rss;
  rep["stages"] = nlohmann::json::array();
  for (int s = 0; s < kStages; ++s)
    if (o_.has(all_stages()[s])) rep["stages"].push_back(merged[s].to_json());
  result.report = rep;
  if (!o_.report.empty()) {
    const std::string tmp = o_.report + ".tmp." + token_;
    std::ofstream f(tmp, std::ios::binary);
    f << rep.dump(2) << '\n';
    f.close();
    if (!f || std::rename(tmp.c_str(), o_.report.c_str()) != 0) {
      std::remove(tmp.c_str());
      throw std::runtime_error(o_.report + ": cannot write");
    }
  }
  return result;
}

}  // namespace

CurateResult curate(const CurateOptions& options, const Exchange& exchange,
                    std::ostream& progress) {
  Curator c(options, exchange, progress);
  return c.run();
}

}  // namespace trident::curation
