// Phase 2 of `trident curate` (global): the index exchanged, every rank takes the same exact
// and fuzzy dedup decisions; fuzzy candidates are verified on their true shingle Jaccard, the
// shingle sets of candidate documents only being exchanged.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>

#include "curation/curator.h"

namespace trident::curation::detail {

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

namespace {

// Every rank's candidate_shingles, read back into one map.
ShingleSets decode_shingle_sets(const std::vector<std::string>& parts) {
  ShingleSets sets;
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
  return sets;
}

}  // namespace

void Curator::fuzzy_dedup() {
  const auto start = Clock::now();
  StageReport& s = stages_[kFuzzy];
  const FuzzyCandidates c = gather_candidates(s);
  const ShingleSets sets = decode_shingle_sets(ex_.all_gather(candidate_shingles(c)));
  const std::vector<float> jac = verify_pairs(c, sets);
  UnionFind uf(c.all.size());
  long duplicate_pairs = 0;
  for (size_t k = 0; k < c.pairs.size(); ++k)
    if (jac[k] >= o_.jaccard_threshold)
      ++duplicate_pairs, uf.unite(c.pairs[k].first, c.pairs[k].second);
  const std::unordered_map<std::uint32_t, std::uint32_t> keeper = cluster_keepers(c, uf);
  long clusters = 0;
  for (const auto& [root, k] : keeper) clusters += uf.size_of(root) > 1;
  remove_near_duplicates(c, uf, keeper, sets, s);
  write_candidates(c, sets, jac);
  // What each document costs in memory during the run: its index entry and band hashes (the
  // signature itself is not kept; verification uses the candidates' shingle sets).
  const double per_doc = (double)sizeof(IndexEntry) + 8.0 * lsh_.bands +
                         (o_.has("exact-dedup") ? sizeof(HashedDoc) : 0);
  s.extra = {{"permutations", o_.minhash_perms},
             {"shingle_size", o_.shingle_size},
             {"jaccard_threshold", o_.jaccard_threshold},
             {"bands", lsh_.bands},
             {"rows", lsh_.rows},
             {"candidate_pairs", (long)c.pairs.size()},
             {"duplicate_pairs", duplicate_pairs},
             {"clusters", clusters},
             {"index_bytes_per_document", per_doc},
             {"keep", o_.keep}};
  s.global_seconds = since(start);
}

// The documents exact dedup left, with their index entries and bands gathered from every
// rank, and the LSH's candidate pairs among them.
FuzzyCandidates Curator::gather_candidates(StageReport& s) {
  const int nb = lsh_.bands;
  FuzzyCandidates c;
  std::vector<IndexEntry> entries;
  std::vector<std::uint64_t> bands;
  for (size_t i = 0; i < index_.size(); ++i) {
    if (removed_by_[i]) continue;
    c.alive.push_back((std::uint32_t)i);
    entries.push_back(index_[i]);
    bands.insert(bands.end(), bands_.begin() + (long)i * nb, bands_.begin() + (long)(i + 1) * nb);
    ++s.documents_in;
    s.bytes_in += (double)index_[i].bytes;
  }
  bands_ = {};
  c.all = ex_.all_gather_vector(entries, &c.offset);
  std::vector<std::uint64_t> all_bands = ex_.all_gather_vector(bands);
  bands = {};
  const long n = (long)c.all.size();
  c.pairs = candidate_pairs(all_bands, n, nb, o_.max_bucket);
  all_bands = {};
  c.candidate.assign(n, 0);
  for (auto [a, b] : c.pairs) c.candidate[a] = c.candidate[b] = 1;
  return c;
}

// The shingle sets of this rank's candidates, from the spool, as bytes for the exchange:
// per document its global index, id length, id, shingle count and shingle hashes.
std::string Curator::candidate_shingles(const FuzzyCandidates& c) const {
  std::string mine;
  std::ifstream spool(spool_path_, std::ios::binary);
  SpoolRecord rec;
  size_t a = 0;
  for (std::uint32_t i = 0; read_record(spool, &rec); ++i) {
    if (a < c.alive.size() && c.alive[a] < i) ++a;
    if (a >= c.alive.size() || c.alive[a] != i || !c.candidate[c.offset + a]) continue;
    const std::uint32_t g = (std::uint32_t)(c.offset + a);
    std::vector<std::uint64_t> sh = shingle_hashes(rec.text, o_.shingle_size);
    const std::uint32_t idlen = (std::uint32_t)rec.id.size(), count = (std::uint32_t)sh.size();
    mine.append((const char*)&g, 4).append((const char*)&idlen, 4).append(rec.id);
    mine.append((const char*)&count, 4).append((const char*)sh.data(), sh.size() * 8);
  }
  return mine;
}

// Every candidate pair's true Jaccard, the workers sharing the pairs.
std::vector<float> Curator::verify_pairs(const FuzzyCandidates& c, const ShingleSets& sets) const {
  const auto& pairs = c.pairs;
  std::vector<float> jac(pairs.size());
  std::vector<std::thread> threads;
  const int w = std::max(1, o_.workers);
  for (int t = 0; t < w; ++t)
    threads.emplace_back([&, t] {
      for (size_t k = t; k < pairs.size(); k += w)
        jac[k] = (float)jaccard(sets.at(pairs[k].first).second, sets.at(pairs[k].second).second);
    });
  for (auto& th : threads) th.join();
  return jac;
}

// One keeper per cluster (by its root): the longest (then the first) or the first.
std::unordered_map<std::uint32_t, std::uint32_t> Curator::cluster_keepers(const FuzzyCandidates& c,
                                                                          UnionFind& uf) const {
  std::unordered_map<std::uint32_t, std::uint32_t> keeper;
  for (long g = 0; g < (long)c.all.size(); ++g) {
    if (!c.candidate[g]) continue;
    const std::uint32_t root = uf.find((std::uint32_t)g);
    auto it = keeper.find(root);
    if (it == keeper.end()) {
      keeper[root] = (std::uint32_t)g;
      continue;
    }
    const IndexEntry &a = c.all[g], &b = c.all[it->second];
    const bool better = o_.keep == "longest"
                            ? (a.chars > b.chars || (a.chars == b.chars && a.order < b.order))
                            : a.order < b.order;
    if (better) it->second = (std::uint32_t)g;
  }
  return keeper;
}

// This rank's documents that are not their cluster's keeper are removed, the audit naming
// the keeper, their Jaccard with it and the cluster's size.
void Curator::remove_near_duplicates(const FuzzyCandidates& c, UnionFind& uf,
                                     const std::unordered_map<std::uint32_t, std::uint32_t>& keeper,
                                     const ShingleSets& sets, StageReport& s) {
  for (size_t a = 0; a < c.alive.size(); ++a) {
    const std::uint32_t g = (std::uint32_t)(c.offset + a);
    if (!c.candidate[g] || keeper.at(uf.find(g)) == g) {
      ++s.kept;
      continue;
    }
    const std::uint32_t k = keeper.at(uf.find(g));
    s.remove("near duplicate");
    removed_by_[c.alive[a]] = kFuzzy + 1;
    removal_detail_[c.alive[a]] = {
        {"kept", sets.at(k).first},
        {"jaccard_with_kept", jaccard(sets.at(g).second, sets.at(k).second)},
        {"cluster_size", uf.size_of(g)}};
  }
}

// --candidates-out (rank 0): every candidate pair with its Jaccard, written under a
// temporary name, renamed with the other outputs at the end.
void Curator::write_candidates(const FuzzyCandidates& c, const ShingleSets& sets,
                               const std::vector<float>& jaccards) {
  if (ex_.rank() != 0 || o_.candidates_out.empty()) return;
  const std::string tmp = o_.candidates_out + ".tmp." + token_;
  temp_files_.push_back(tmp);
  std::ofstream out(tmp, std::ios::binary);
  for (size_t k = 0; k < c.pairs.size(); ++k)
    out << dump(nlohmann::json{{"a", sets.at(c.pairs[k].first).first},
                               {"b", sets.at(c.pairs[k].second).first},
                               {"jaccard", jaccards[k]},
                               {"duplicate", jaccards[k] >= o_.jaccard_threshold}})
        << '\n';
  out.close();
  if (!out) throw std::runtime_error(o_.candidates_out + ": cannot write " + tmp);
  stage_file("--candidates-out", o_.candidates_out, tmp);
}

}  // namespace trident::curation::detail
