// Phase 1 of `trident curate` (per rank, --workers threads): this rank's slice of the input,
// parsed, normalised, language-identified and quality-filtered document by document; each
// survivor spooled, with its exact-dedup hash and LSH band hashes kept in memory.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <ostream>

#include "curation/curator.h"
#include "curation/normalize.h"
#include "curation/pareto.h"

namespace trident::curation::detail {

namespace {

void enter(StageReport& s, const std::string& text) {
  ++s.documents_in, s.bytes_in += (double)text.size();
}

// Positions `in` (at the start of a file of `size` bytes) on the first line that starts at or
// after byte `begin`: the line running across `begin` is the previous rank's. Line numbers stay
// those of the whole file: *line_no counts the lines passed, *pos the bytes.
void skip_to_slice(std::ifstream& in, std::uint64_t begin, std::uint64_t size, long* line_no,
                   std::uint64_t* pos) {
  if (begin == 0) return;
  std::vector<char> buf(1 << 20);
  while (*pos < begin - 1) {
    const size_t want = (size_t)std::min<std::uint64_t>(buf.size(), begin - 1 - *pos);
    in.read(buf.data(), (std::streamsize)want);
    *line_no += (long)std::count(buf.data(), buf.data() + in.gcount(), '\n');
    *pos += (std::uint64_t)in.gcount();
    if ((size_t)in.gcount() < want) break;
  }
  char c = 0;
  std::string line;
  if (in.get(c) && c != '\n') {  // byte begin - 1 is inside a line: skip to its end
    ++*pos;
    if (std::getline(in, line))
      *pos += line.size() + 1, ++*line_no;
    else
      *pos = size;
  } else {
    ++*pos;
    *line_no += c == '\n';
  }
}

}  // namespace

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
  Phase1Output out{spool, start};
  Phase1Pool pool(o_.workers, [this](Phase1Job& j) { return phase1_batch(j); });
  std::uint64_t file_start = 0;
  for (size_t f = 0; f < nfiles; ++f) {
    const std::uint64_t fb = file_start, fe = file_start + sizes[f];
    file_start = fe;
    if (std::max(lo, fb) >= std::min(hi, fe)) continue;
    read_slice(f, std::max(lo, fb) - fb, std::min(hi, fe) - fb, sizes[f], pool, out);
  }
  pool.drain([&](Phase1Result& r) { consume_phase1(r, out); });
  spool.close();
  if (!spool) throw std::runtime_error(spool_path_ + ": write failed");
  removed_by_.assign(index_.size(), 0);
}

// The lines of input file f that start in [begin, end) (byte offsets), in batches of
// kBatchLines lines or kBatchBytes bytes for the workers.
void Curator::read_slice(size_t f, std::uint64_t begin, std::uint64_t end, std::uint64_t size,
                         Phase1Pool& pool, Phase1Output& out) {
  std::ifstream in(o_.inputs[f], std::ios::binary);
  if (!in) throw std::runtime_error(o_.inputs[f] + ": cannot open");
  long line_no = 0;
  std::uint64_t pos = 0;
  skip_to_slice(in, begin, size, &line_no, &pos);
  Phase1Job job{f, line_no + 1, {}};
  size_t job_bytes = 0;
  auto flush = [&] {
    if (job.lines.empty()) return;
    pool.submit_bounded(std::move(job), [&](Phase1Result& r) { consume_phase1(r, out); });
    job = Phase1Job{f, line_no + 1, {}};
    job_bytes = 0;
  };
  std::string line;
  while (pos < end && std::getline(in, line)) {
    ++line_no;
    pos += line.size() + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    job_bytes += line.size();
    job.lines.push_back(std::move(line));
    if (job.lines.size() >= kBatchLines || job_bytes >= kBatchBytes) flush();
  }
  flush();
}

// A batch's results, in input order: bad lines counted (or fatal), survivors spooled and
// indexed, removals audited, stage reports merged; rank 0 prints progress now and then.
void Curator::consume_phase1(Phase1Result& r, Phase1Output& out) {
  for (const std::string& b : r.bad) {
    ++bad_lines_;
    if (!o_.skip_bad_lines) throw BadLineError(b);
    if (bad_messages_.size() < kMaxBadReported) bad_messages_.push_back(b);
  }
  lines_ += r.lines;
  bytes_ += r.bytes;
  for (const SpoolRecord& rec : r.docs) write_record(out.spool, rec);
  out.kept += (long)r.docs.size();
  index_.insert(index_.end(), r.index.begin(), r.index.end());
  exact_.insert(exact_.end(), r.exact.begin(), r.exact.end());
  bands_.insert(bands_.end(), r.bands.begin(), r.bands.end());
  for (const std::string& a : r.removed) removed_out_ << a << '\n';
  for (int s = 0; s < kStages; ++s) stages_[s].merge(r.stages[s]);
  const double t = since(out.start);
  if (ex_.rank() == 0 && t - out.last_progress >= o_.progress_seconds) {
    out.last_progress = t;
    progress_ << "curate: " << (ex_.size() > 1 ? "rank 0: " : "") << lines_ << " lines, "
              << (long)(lines_ / t) << " docs/s, " << bytes_ / t / 1e6 << " MB/s, " << out.kept
              << " kept so far" << std::endl;
  }
}

// A worker's batch of lines, each through the local stages.
Phase1Result Curator::phase1_batch(const Phase1Job& job) const {
  Phase1Result r;
  r.stages = empty_stages();
  ParsedLine p;
  std::vector<std::uint32_t> sig(o_.minhash_perms);
  for (size_t k = 0; k < job.lines.size(); ++k) {
    const std::string& line = job.lines[k];
    const long line_no = job.first_line + (long)k;
    ++r.lines;
    r.bytes += (double)line.size() + 1;
    if (line.find_first_not_of(" \t") == std::string::npos)
      continue;  // blank lines are no documents
    LocalDocument d(o_.inputs[job.file], line_no);
    if (const std::string reason = parse_document(line, &p, &d); !reason.empty()) {
      r.bad.push_back(d.file + ":" + std::to_string(line_no) + ": " + reason);
      continue;
    }
    StageTimer timer;
    if (!run_local_stages(d, timer, r)) continue;
    hash_document(d, order_of(job.file, line_no), sig, timer, r);
    SpoolRecord rec;
    if (d.changed) {
      p.object[o_.text_key] = d.text;
      rec.json = dump(p.object);
    } else {
      rec.json = line;  // untouched: the input line as it was
    }
    rec.text = std::move(d.text);
    rec.id = std::move(d.id);
    r.docs.push_back(std::move(rec));
  }
  return r;
}

// The line's JSON, and the quality score when it is read from a field. Returns why the line is
// bad, or "" (then *d holds the document's id and text).
std::string Curator::parse_document(const std::string& line, ParsedLine* p,
                                    LocalDocument* d) const {
  std::string reason = parse_curate_line(line, o_.text_key, o_.id_key, p);
  if (reason.empty() && o_.has("quality") && !quality_) {
    auto it = p->object.find(o_.quality_score_key);
    if (it == p->object.end() || !it->is_number() || it->get<double>() < 0 || it->get<double>() > 1)
      reason = "key \"" + o_.quality_score_key + "\" is not a number in [0, 1]";
    else
      d->score = it->get<double>();
  }
  if (!reason.empty()) return reason;
  d->id = p->has_id ? p->id : d->file + ":" + std::to_string(d->line_no);
  d->text = std::move(p->text);
  return "";
}

// normalize, langid and quality, those that run; false when one removes the document.
bool Curator::run_local_stages(LocalDocument& d, StageTimer& timer, Phase1Result& r) const {
  if (o_.has("normalize")) {
    if (!normalize_stage(d, timer, r)) return false;
  } else {
    d.chars = count_chars(d.text);
  }
  if (o_.has("langid") && !langid_stage(d, timer, r)) return false;
  return !o_.has("quality") || quality_stage(d, timer, r);
}

bool Curator::normalize_stage(LocalDocument& d, StageTimer& timer, Phase1Result& r) const {
  StageReport& s = r.stages[kNormalize];
  enter(s, d.text);
  std::string normal = normalize_text(d.text);
  d.changed = normal != d.text;
  d.text = std::move(normal);
  d.chars = count_chars(d.text);
  timer.lap(s);
  if (d.chars < o_.min_chars) {
    s.remove("shorter than --min-chars");
    r.removed.push_back(audit_line(d.id, d.file, d.line_no, kNormalize, "shorter than --min-chars",
                                   {{"chars", d.chars}}));
    return false;
  }
  ++s.kept;
  return true;
}

bool Curator::langid_stage(const LocalDocument& d, StageTimer& timer, Phase1Result& r) const {
  StageReport& s = r.stages[kLangid];
  enter(s, d.text);
  LanguageGuess g = identify_language(d.text, language_filter_, o_.langid_sample_bytes);
  timer.lap(s);
  ++s.languages[g.code];
  const bool wanted = language_filter_.wanted(g.code);
  if (!language_filter_.keeps(g)) {
    const std::string why =
        wanted ? "language confidence below --lang-threshold" : "language not in --langs";
    s.remove(why);
    r.removed.push_back(audit_line(d.id, d.file, d.line_no, kLangid, why,
                                   {{"language", g.code}, {"confidence", g.confidence}}));
    return false;
  }
  ++s.kept;
  return true;
}

bool Curator::quality_stage(LocalDocument& d, StageTimer& timer, Phase1Result& r) const {
  StageReport& s = r.stages[kQuality];
  enter(s, d.text);
  if (quality_) d.score = quality_->score(d.text);
  const double draw = pareto_draw(o_.seed, d.id, o_.pareto_alpha);
  timer.lap(s);
  if (!pareto_keep(d.score, draw)) {
    s.remove("pareto draw <= 1 - quality score");
    r.removed.push_back(audit_line(d.id, d.file, d.line_no, kQuality,
                                   "pareto draw <= 1 - quality score",
                                   {{"score", d.score}, {"draw", draw}}));
    return false;
  }
  ++s.kept;
  return true;
}

// A survivor's index entry, exact-dedup hash and LSH band hashes (its MinHash signature is
// computed into sig and dropped).
void Curator::hash_document(const LocalDocument& d, std::uint64_t order,
                            std::vector<std::uint32_t>& sig, StageTimer& timer,
                            Phase1Result& r) const {
  if (o_.has("exact-dedup")) {
    r.exact.push_back(exact_hash(d.text, order));
    timer.lap(r.stages[kExact]);
  }
  if (o_.has("fuzzy-dedup")) {
    hasher_.signature(d.text, o_.shingle_size, sig.data());
    const size_t at = r.bands.size();
    r.bands.resize(at + lsh_.bands);
    band_hashes(sig.data(), lsh_, r.bands.data() + at);
    timer.lap(r.stages[kFuzzy]);
  }
  r.index.push_back({order, (std::uint64_t)d.chars, (std::uint64_t)d.text.size()});
}

}  // namespace trident::curation::detail
