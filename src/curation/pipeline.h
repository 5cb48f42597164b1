#pragma once
// `trident curate`: MT-NLG's curation pipeline over JSONL, streaming, multi-threaded and
// across MPI ranks.
//
// Each rank reads a contiguous block of the input files. Phase 1 (per rank, --workers
// threads): parse, normalise, language ID, quality + Pareto, and per document the exact-dedup
// hash and the LSH band hashes of its MinHash signature; survivors are spooled to a temporary
// file, so memory holds only the per-document index (hash, bands, length, position). Phase 2
// (global): the index is exchanged; every rank takes the same exact and fuzzy dedup decisions;
// candidate pairs are verified on their true shingle Jaccard (the shingle sets of candidate
// documents only are exchanged). Phase 3 (per rank): the spool is read back, decontaminated
// and written; rank 0 joins the ranks' parts in rank order under a temporary name and renames
// it, so the output is the same set, in the same order, for any number of ranks and workers.
#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace trident::curation {

class Exchange;

inline const std::vector<std::string>& all_stages() {
  static const std::vector<std::string> s = {"normalize",   "langid",      "quality",
                                             "exact-dedup", "fuzzy-dedup", "decontaminate"};
  return s;
}

struct CurateOptions {
  std::vector<std::string> inputs;
  std::string output, report, removed;  // removed: audit file ("" = none)
  std::string text_key = "text", id_key = "id";
  std::vector<std::string> stages;  // resolved, in pipeline order
  int workers = 1;
  bool skip_bad_lines = false;
  double progress_seconds = 2.0;
  // normalize
  long min_chars = 128;
  // langid
  std::vector<std::string> langs = {"en"};
  double lang_threshold = 0.5;
  long langid_sample_bytes = 2048;  // 0: CLD2 on whole documents always (see langid.h)
  // quality
  std::string quality_model;      // fastText model from train-quality
  std::string quality_score_key;  // or a precomputed score in [0, 1] read from this field
  double pareto_alpha = 3.0;
  std::uint64_t seed = 1234;
  // dedup
  std::string keep = "longest";  // or "first"
  int minhash_perms = 128, shingle_size = 5, max_bucket = 64;
  double jaccard_threshold = 0.7;
  std::string candidates_out;  // every LSH candidate pair with its true Jaccard ("" = none)
  // decontaminate
  std::vector<std::string> decontaminate_files, decontaminate_keys = {"text"};
  int ngram = 13;
  long context_chars = 200, min_piece_chars = 200;
  int max_pieces = 10;

  bool has(const std::string& stage) const;
};

// The stages run when --stages is not given: every one whose inputs are given.
std::vector<std::string> default_stages(const CurateOptions& o);

struct CurateResult {
  nlohmann::json report;  // complete on rank 0
  std::string s_curve;    // the LSH S-curve table ("" without fuzzy dedup)
};

class BadLineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Every output (--output, --removed, --candidates-out, --report) is written whole under a
// temporary name first, and only then are they renamed into place, in that order. A rename
// that fails (the last step, which leaves nothing half written) throws PublishError, whose
// message names the outputs already in place and those not written.
class PublishError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws BadLineError or std::runtime_error (bad input, unreadable files, an output that
// cannot be written) before any output is in place, and no file is then left behind by this
// rank; or PublishError.
CurateResult curate(const CurateOptions& options, const Exchange& exchange, std::ostream& progress);

}  // namespace trident::curation
