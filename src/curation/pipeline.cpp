#include "curation/pipeline.h"

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>

#include "core/files.h"
#include "curation/curator.h"

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

namespace detail {

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

namespace {

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

// The ranks' counters, summed (the peak RSS: the largest), and the first bad lines.
struct RankTotals {
  long lines = 0, bad = 0, docs_out = 0, indexed = 0;
  double bytes = 0, bytes_out = 0, rss = 0, cpu = 0;
  std::vector<std::string> messages;

  void add(const nlohmann::json& j) {
    lines += j.at("lines").get<long>();
    bytes += j.at("bytes").get<double>();
    bad += j.at("bad_lines").get<long>();
    docs_out += j.at("documents_out").get<long>();
    bytes_out += j.at("bytes_out").get<double>();
    indexed += j.at("documents_indexed").get<long>();
    rss = std::max(rss, j.at("max_rss_mb").get<double>());
    cpu += j.at("cpu_seconds").get<double>();
    for (const auto& m : j.at("bad_line_messages"))
      if (messages.size() < kMaxBadReported) messages.push_back(m);
  }
};

}  // namespace

void write_record(std::ostream& out, const SpoolRecord& r) {
  write_string(out, r.json);
  write_string(out, r.text);
  write_string(out, r.id);
}

bool read_record(std::istream& in, SpoolRecord* r) {
  return read_string(in, &r->json) && read_string(in, &r->text) && read_string(in, &r->id);
}

std::vector<StageReport> empty_stages() {
  std::vector<StageReport> s(kStages);
  for (int i = 0; i < kStages; ++i) s[i].name = all_stages()[i];
  return s;
}

std::string audit_line(const std::string& id, const std::string& file, long line, int stage,
                       const std::string& reason, nlohmann::json extra) {
  nlohmann::json j = {{"id", id},
                      {"file", file},
                      {"line", line},
                      {"stage", all_stages()[stage]},
                      {"reason", reason}};
  for (auto& [k, v] : extra.items()) j[k] = v;
  return dump(j);
}

Curator::Curator(const CurateOptions& o, const Exchange& ex, std::ostream& progress)
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

// One name for this run's temporary files, chosen by rank 0; this rank's spool and parts.
void Curator::name_temp_files() {
  token_ = ex_.all_gather(std::to_string(getpid()) + "-" +
                          std::to_string(Clock::now().time_since_epoch().count() % 1000000007))[0];
  const std::string r = std::to_string(ex_.rank());
  spool_path_ = temp(o_.output, "spool" + r);
  out_part_ = temp(o_.output, "part" + r);
  removed_part_ = o_.removed.empty() ? "/dev/null" : temp(o_.removed, "part" + r);
  temp_files_ = {spool_path_, out_part_};
  if (!o_.removed.empty()) temp_files_.push_back(removed_part_);
}

// Rank 0 joins the ranks' parts, in rank order, under a temporary name, renamed by publish().
void Curator::stage_parts(const std::string& flag, const std::string& final_path,
                          const std::string& part_prefix) {
  if (ex_.rank() != 0) return;
  const std::string tmp = final_path + ".tmp." + token_;
  temp_files_.push_back(tmp);
  std::ofstream out(tmp, std::ios::binary);
  for (int r = 0; r < ex_.size(); ++r) {
    std::ifstream in(part_prefix + std::to_string(r), std::ios::binary);
    if (!in) throw std::runtime_error(part_prefix + std::to_string(r) + ": missing part");
    if (in.peek() != std::ifstream::traits_type::eof()) out << in.rdbuf();
  }
  out.close();
  if (!out) throw std::runtime_error(flag + " " + final_path + ": cannot write " + tmp);
  stage_file(flag, final_path, tmp);
}

void Curator::stage_file(const std::string& flag, const std::string& final_path,
                         const std::string& tmp) {
  staged_.push_back({flag, final_path, tmp});
}

namespace {

// "prefix: --flag path, --flag path" for outputs [from, to), or `none` when there are none.
template <class Outputs>
std::string listed(const Outputs& outputs, size_t from, size_t to, const std::string& prefix,
                   const std::string& none) {
  std::string out;
  for (size_t j = from; j < to; ++j)
    out += (out.empty() ? prefix : ", ") + outputs[j].flag + " " + outputs[j].path;
  return out.empty() ? none : out;
}

}  // namespace

// Every output is complete: each is renamed into place. A failed rename says which are in
// place already (renamed, or overwritten: nothing can be undone) and which are not.
void Curator::publish() {
  // The curated output first; the report, which describes the others, last.
  const std::vector<std::string> order = {"--output", "--removed", "--candidates-out", "--report"};
  const auto rank = [&](const StagedOutput& s) {
    return std::find(order.begin(), order.end(), s.flag) - order.begin();
  };
  std::stable_sort(staged_.begin(), staged_.end(),
                   [&](const StagedOutput& a, const StagedOutput& b) { return rank(a) < rank(b); });
  for (size_t i = 0; i < staged_.size(); ++i) {
    const StagedOutput& s = staged_[i];
    if (std::rename(s.tmp.c_str(), s.path.c_str()) == 0) continue;
    std::string message = s.flag + " " + s.path + ": cannot rename " + s.tmp + " to it (" +
                          std::strerror(errno) + ")";
    throw PublishError(message + "; " + listed(staged_, 0, i, "written: ", "nothing written") +
                       "; " + listed(staged_, i, staged_.size(), "not written: ", ""));
  }
  // Durable, as the checkpoints' renames (core/files.h). Every output is in place by now.
  try {
    for (const StagedOutput& s : staged_) {
      const std::string dir = std::filesystem::path(s.path).parent_path().string();
      fsync_directory(dir.empty() ? "." : dir);
    }
  } catch (const std::exception& e) {
    throw PublishError(std::string(e.what()) + "; " +
                       listed(staged_, 0, staged_.size(), "written (maybe not yet on disk): ", ""));
  }
}

// This rank's stages and counters, for rank 0 to merge.
nlohmann::json Curator::local_report() const {
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
  return mine;
}

// Rank 0's report: every rank's local report (parts) merged.
nlohmann::json Curator::merged_report(const std::vector<std::string>& parts, double seconds,
                                      double phase1_seconds, double phase3_seconds) const {
  std::vector<StageReport> merged = empty_stages();
  nlohmann::json rep = {{"inputs", o_.inputs},
                        {"output", o_.output},
                        {"ranks", ex_.size()},
                        {"workers", o_.workers},
                        {"stages_run", o_.stages}};
  RankTotals total;
  for (const std::string& part : parts) {
    const nlohmann::json j = nlohmann::json::parse(part);
    for (int s = 0; s < kStages; ++s) merged[s].merge(StageReport::from_json(j.at("stages").at(s)));
    total.add(j);
  }
  rep["lines_in"] = total.lines;
  rep["bytes_in"] = total.bytes;
  rep["bad_lines"] = total.bad;
  rep["bad_line_messages"] = total.messages;
  rep["documents_out"] = total.docs_out;
  rep["bytes_out"] = total.bytes_out;
  rep["seconds"] = seconds;
  rep["mb_per_s"] = seconds > 0 ? total.bytes / seconds / 1e6 : 0.0;
  // Whole-pipeline throughput per CPU second of every thread and rank: MB/s per worker on
  // cores of its own, whatever else runs on the machine.
  rep["cpu_seconds"] = total.cpu;
  rep["mb_per_cpu_second"] = total.cpu > 0 ? total.bytes / total.cpu / 1e6 : 0.0;
  rep["phase_seconds_rank0"] = {{"local_stages", phase1_seconds}, {"write", phase3_seconds}};
  rep["documents_indexed"] = total.indexed;
  rep["max_rss_mb"] = total.rss;
  rep["stages"] = nlohmann::json::array();
  for (int s = 0; s < kStages; ++s)
    if (o_.has(all_stages()[s])) rep["stages"].push_back(merged[s].to_json());
  return rep;
}

void Curator::write_report(const nlohmann::json& report) {
  if (o_.report.empty()) return;
  const std::string tmp = o_.report + ".tmp." + token_;
  temp_files_.push_back(tmp);
  std::ofstream f(tmp, std::ios::binary);
  f << report.dump(2) << '\n';
  f.close();
  if (!f) throw std::runtime_error("--report " + o_.report + ": cannot write " + tmp);
  stage_file("--report", o_.report, tmp);
}

CurateResult Curator::run() {
  const auto start = Clock::now();
  name_temp_files();
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
  stage_parts("--output", o_.output, temp(o_.output, "part"));
  if (!o_.removed.empty()) stage_parts("--removed", o_.removed, temp(o_.removed, "part"));

  // The report: every rank's stages and counters, merged on rank 0.
  std::vector<std::string> parts = ex_.all_gather(dump(local_report()));
  CurateResult result;
  if (o_.has("fuzzy-dedup")) result.s_curve = s_curve_table(lsh_, o_.jaccard_threshold);
  const double seconds = ex_.max(since(start));
  if (ex_.rank() != 0) return result;
  result.report = merged_report(parts, seconds, phase1_seconds, phase3_seconds);
  write_report(result.report);
  publish();
  return result;
}

}  // namespace detail

CurateResult curate(const CurateOptions& options, const Exchange& exchange,
                    std::ostream& progress) {
  detail::Curator c(options, exchange, progress);
  return c.run();
}

}  // namespace trident::curation
