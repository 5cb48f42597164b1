// Phase 3 of `trident curate` (per rank, --workers threads): the spool read back in order;
// the documents phase 2 removed audited, the others decontaminated and written to this rank's
// part of the output.
#include <fstream>
#include <ostream>

#include "curation/curator.h"

namespace trident::curation::detail {

void Curator::phase3() {
  std::ofstream out(out_part_, std::ios::binary);
  if (!out) throw std::runtime_error(out_part_ + ": cannot write");
  const bool decontaminate_on = o_.has("decontaminate");
  OrderedPool<Phase3Job, Phase3Result> pool(o_.workers,
                                            [this](Phase3Job& j) { return phase3_batch(j); });
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
    pool.submit_bounded(std::move(job), consume);
    job = Phase3Job{};
    job_bytes = 0;
  };
  SpoolRecord rec;
  for (std::uint32_t i = 0; read_record(spool, &rec); ++i) {
    job_bytes += rec.json.size() + rec.text.size();
    job.local.push_back(i);
    job.docs.push_back(std::move(rec));
    if (job.docs.size() >= kBatchLines || job_bytes >= kBatchBytes) flush();
  }
  flush();
  pool.drain(consume);
  out.close();
  if (!out) throw std::runtime_error(out_part_ + ": write failed");
}

// A worker's batch: the output lines and audit records of its documents, in order.
Phase3Result Curator::phase3_batch(const Phase3Job& job) const {
  const bool decontaminate_on = o_.has("decontaminate");
  Phase3Result r;
  r.stage.name = "decontaminate";
  for (size_t k = 0; k < job.docs.size(); ++k) {
    const std::uint32_t i = job.local[k];
    const SpoolRecord& rec = job.docs[k];
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
    decontaminate_document(rec, file, line_of(order), r);
  }
  return r;
}

// Kept whole when no task n-gram matches; otherwise cut into pieces (each written with the id
// <id>_<k>) or dropped when too few or too many pieces are left.
void Curator::decontaminate_document(const SpoolRecord& rec, const std::string& file, long line,
                                     Phase3Result& r) const {
  const double t = thread_cpu_seconds();
  ++r.stage.documents_in;
  r.stage.bytes_in += (double)rec.text.size();
  Decontaminated d = decontaminate(rec.text, ngrams_, rules_);
  if (!d.matched) {
    r.stage.cpu_seconds += thread_cpu_seconds() - t;
    ++r.stage.kept;
    r.out += rec.json + "\n";
    ++r.lines;
    return;
  }
  if (d.dropped) {
    const std::string why = d.pieces_before_drop > rules_.max_pieces
                                ? "more than --max-pieces pieces"
                                : "no piece of --min-piece-chars left";
    r.stage.remove(why);
    r.removed += audit_line(rec.id, file, line, kDecontaminate, why,
                            {{"matched_ngrams", d.matches}, {"pieces", d.pieces_before_drop}}) +
                 "\n";
    r.stage.cpu_seconds += thread_cpu_seconds() - t;
    return;
  }
  ++r.stage.kept;
  ++r.stage.reasons["cut (kept in pieces)"];
  r.removed += audit_line(rec.id, file, line, kDecontaminate, "matched n-grams cut out",
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

}  // namespace trident::curation::detail
