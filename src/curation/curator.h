#pragma once
// The driver of `trident curate` (pipeline.h) and what its phases hand one another: only the
// pipeline's files include this. pipeline.cpp runs the phases and writes the report;
// pipeline_phase1.cpp holds the local stages, pipeline_phase2.cpp the global dedup,
// pipeline_phase3.cpp the decontamination and the writing of this rank's part.
#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "curation/decontaminate.h"
#include "curation/document.h"
#include "curation/exact_dedup.h"
#include "curation/exchange.h"
#include "curation/langid.h"
#include "curation/lsh.h"
#include "curation/minhash.h"
#include "curation/ordered_pool.h"
#include "curation/pipeline.h"
#include "curation/quality.h"
#include "curation/report.h"
#include "curation/union_find.h"

namespace trident::curation::detail {

// The stages in pipeline order, as indices into all_stages() and the stage reports.
enum Stage { kNormalize, kLangid, kQuality, kExact, kFuzzy, kDecontaminate, kStages };
constexpr int kLineBits = 40;
constexpr size_t kBatchLines = 256;
constexpr size_t kBatchBytes = 1 << 20;
constexpr size_t kMaxBadReported = 20;

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// CPU time of the calling thread: per-stage figures stay per-worker throughput when other
// processes share the cores (wall time would charge their time to the stage).
double thread_cpu_seconds();

// A document's place in the input: its file and line in one number, which sorts as the input.
inline std::uint64_t order_of(size_t file, long line) {
  return ((std::uint64_t)file << kLineBits) | (std::uint64_t)line;
}
inline size_t file_of(std::uint64_t order) {
  return (size_t)(order >> kLineBits);
}
inline long line_of(std::uint64_t order) {
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

void write_record(std::ostream& out, const SpoolRecord& r);
bool read_record(std::istream& in, SpoolRecord* r);

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

using Phase1Pool = OrderedPool<Phase1Job, Phase1Result>;

// One document on its way through the local stages.
struct LocalDocument {
  LocalDocument(const std::string& file, long line_no) : file(file), line_no(line_no) {}
  const std::string& file;
  long line_no;
  std::string id, text;
  long chars = 0;
  bool changed = false;  // normalised: the output line is written anew
  double score = -1;     // quality: a precomputed score, or the model's
};

// Charges the calling thread's CPU time since the last lap to a stage.
class StageTimer {
 public:
  StageTimer() : t_(thread_cpu_seconds()) {}
  void lap(StageReport& s) {
    const double now = thread_cpu_seconds();
    s.cpu_seconds += now - t_;
    t_ = now;
  }

 private:
  double t_;
};

// Where phase 1's results go: the spool, and the progress line's figures.
struct Phase1Output {
  std::ofstream& spool;
  Clock::time_point start;
  double last_progress = 0;
  long kept = 0;
};

// Phase 2's fuzzy dedup: the documents still in play across ranks and their LSH candidates.
struct FuzzyCandidates {
  std::vector<std::uint32_t> alive;  // this rank's, as local indices
  size_t offset = 0;                 // the global index of this rank's first
  std::vector<IndexEntry> all;       // every rank's, in rank order
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs;  // global indices
  std::vector<std::uint8_t> candidate;                         // per global index: in a pair
};

// Global index -> (id, shingle hashes), for the documents in candidate pairs.
using ShingleSets =
    std::unordered_map<std::uint32_t, std::pair<std::string, std::vector<std::uint64_t>>>;

struct Phase3Job {
  std::vector<std::uint32_t> local;
  std::vector<SpoolRecord> docs;
};
struct Phase3Result {
  std::string out, removed;
  long lines = 0;
  StageReport stage;
};

std::vector<StageReport> empty_stages();

std::string audit_line(const std::string& id, const std::string& file, long line, int stage,
                       const std::string& reason, nlohmann::json extra = nlohmann::json::object());

class Curator {
 public:
  Curator(const CurateOptions& o, const Exchange& ex, std::ostream& progress);

  CurateResult run();

 private:
  // pipeline.cpp: set-up, the commit of the ranks' parts, the report.
  void build_ngram_index();
  void name_temp_files();
  void stage_parts(const std::string& flag, const std::string& final_path,
                   const std::string& part_prefix);
  void stage_file(const std::string& flag, const std::string& final_path, const std::string& tmp);
  void publish();
  nlohmann::json local_report() const;
  nlohmann::json merged_report(const std::vector<std::string>& parts, double seconds,
                               double phase1_seconds, double phase3_seconds) const;
  void write_report(const nlohmann::json& report);
  std::string temp(const std::string& base, const std::string& what) const {
    return base + ".tmp." + token_ + "." + what;
  }

  // pipeline_phase1.cpp: this rank's slice of the input through the local stages.
  void phase1();
  void read_slice(size_t file, std::uint64_t begin, std::uint64_t end, std::uint64_t size,
                  Phase1Pool& pool, Phase1Output& out);
  void consume_phase1(Phase1Result& r, Phase1Output& out);
  Phase1Result phase1_batch(const Phase1Job& job) const;
  std::string parse_document(const std::string& line, ParsedLine* p, LocalDocument* d) const;
  bool run_local_stages(LocalDocument& d, StageTimer& timer, Phase1Result& r) const;
  bool normalize_stage(LocalDocument& d, StageTimer& timer, Phase1Result& r) const;
  bool langid_stage(const LocalDocument& d, StageTimer& timer, Phase1Result& r) const;
  bool quality_stage(LocalDocument& d, StageTimer& timer, Phase1Result& r) const;
  void hash_document(const LocalDocument& d, std::uint64_t order, std::vector<std::uint32_t>& sig,
                     StageTimer& timer, Phase1Result& r) const;

  // pipeline_phase2.cpp: the dedup decisions, the same on every rank.
  void exact_dedup();
  void fuzzy_dedup();
  FuzzyCandidates gather_candidates(StageReport& s);
  std::string candidate_shingles(const FuzzyCandidates& c) const;
  std::vector<float> verify_pairs(const FuzzyCandidates& c, const ShingleSets& sets) const;
  std::unordered_map<std::uint32_t, std::uint32_t> cluster_keepers(const FuzzyCandidates& c,
                                                                   UnionFind& uf) const;
  void remove_near_duplicates(const FuzzyCandidates& c, UnionFind& uf,
                              const std::unordered_map<std::uint32_t, std::uint32_t>& keeper,
                              const ShingleSets& sets, StageReport& s);
  void write_candidates(const FuzzyCandidates& c, const ShingleSets& sets,
                        const std::vector<float>& jaccards);

  // pipeline_phase3.cpp: the spool read back, decontaminated and written.
  void phase3();
  Phase3Result phase3_batch(const Phase3Job& job) const;
  void decontaminate_document(const SpoolRecord& rec, const std::string& file, long line,
                              Phase3Result& r) const;

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
  // Rank 0's outputs, complete under their temporary names, in the order they are renamed.
  struct StagedOutput {
    std::string flag, path, tmp;
  };
  std::vector<StagedOutput> staged_;
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
};

}  // namespace trident::curation::detail
