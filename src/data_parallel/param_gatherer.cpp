#include "data_parallel/param_gatherer.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "core/first_touch.h"

namespace trident::data_parallel {

ParameterGatherer::ParameterGatherer(Parameters& params, comm::Communicator& data,
                                     std::vector<GatherUnit> units)
    : params_(params), data_(data), units_(std::move(units)) {
  const long piece = params.size() / data.size();
  if (piece * data.size() != params.size())
    throw std::logic_error("ParameterGatherer: a buffer of " + std::to_string(params.size()) +
                           " floats does not split over " + std::to_string(data.size()) +
                           " data-parallel ranks");
  shard_begin_ = piece * data.rank();
  shard_end_ = shard_begin_ + piece;
  for (GatherUnit& unit : units_)
    if (unit.pieces.empty()) unit.pieces.push_back({unit.offset, unit.floats, false});
  state_.assign(units_.size(), State::kReleased);
  requests_.resize(units_.size());
}

ParameterGatherer::UnitSet ParameterGatherer::units_of(int begin, int end) const {
  UnitSet out;
  for (size_t u = 0; u < units_.size(); ++u)
    if (units_[u].spec_begin < end && begin < units_[u].spec_end && !units_[u].block)
      out.push_back((int)u);
  return out;
}

void ParameterGatherer::begin_pass(Pass pass) {
  if (in_pass_) end_pass();
  pass_ = pass;
  in_pass_ = true;
  step_ = 0;
  const int k = (int)pass;
  following_ = recorded_[k];
  if (!recorded_[k]) record_[k].clear();
}

const ParameterGatherer::UnitSet* ParameterGatherer::next_in_record() const {
  const std::vector<UnitSet>& record = record_[(int)pass_];
  return following_ && step_ + 1 < record.size() ? &record[step_ + 1] : nullptr;
}

void ParameterGatherer::need(int spec_begin, int spec_end) {
  need_units(units_of(spec_begin, spec_end));
}

void ParameterGatherer::need_range(long begin, long end) {
  UnitSet wanted;
  for (size_t u = 0; u < units_.size(); ++u)
    if (units_[u].block && units_[u].offset >= begin && units_[u].offset < end)
      wanted.push_back((int)u);
  need_units(wanted);
}

void ParameterGatherer::need_units(const UnitSet& wanted) {
  if (!in_pass_) throw std::logic_error("ParameterGatherer::need outside a pass");
  std::vector<UnitSet>& record = record_[(int)pass_];
  if (!recorded_[(int)pass_])
    record.push_back(wanted);
  else if (following_)
    following_ = step_ < record.size() && record[step_] == wanted;
  for (int u : wanted)
    if (state_[u] == State::kReleased) start(u), ++stats_.unprefetched;
  static const UnitSet kNone;
  const UnitSet& next = next_in_record() ? *next_in_record() : kNone;
  for (int u : next)
    if (state_[u] == State::kReleased) start(u);
  auto kept = [&](int u) {
    return std::binary_search(wanted.begin(), wanted.end(), u) ||
           std::binary_search(next.begin(), next.end(), u) || needed_later(u);
  };
  for (int u = 0; u < (int)units_.size(); ++u)
    if (state_[u] != State::kReleased && !kept(u)) release(u);
  const auto start_wait = std::chrono::steady_clock::now();
  for (int u : wanted) complete(u);
  stats_.wait_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_wait).count();
  ++step_;
}

// A unit the recorded pass asks for again after the next step stays (a tied word embedding,
// read by the embedding first and by the output layer last: gathered once per forward).
bool ParameterGatherer::needed_later(int u) const {
  if (!following_ || units_[u].block) return false;
  const std::vector<UnitSet>& record = record_[(int)pass_];
  for (size_t k = step_ + 2; k < record.size(); ++k)
    if (std::binary_search(record[k].begin(), record[k].end(), u)) return true;
  return false;
}

void ParameterGatherer::end_pass() {
  if (!in_pass_) return;
  const int other = 1 - (int)pass_;
  static const UnitSet kNone;
  const UnitSet& next = prefetch_after_[(int)pass_] && recorded_[other] && !record_[other].empty()
                            ? record_[other].front()
                            : kNone;
  for (int u = 0; u < (int)units_.size(); ++u)
    if (state_[u] != State::kReleased && !std::binary_search(next.begin(), next.end(), u))
      release(u);
  recorded_[(int)pass_] = true;
  in_pass_ = false;
  for (int u : next)
    if (state_[u] == State::kReleased) start(u);
}

void ParameterGatherer::progress() {
  for (auto& unit : requests_)
    for (auto& r : unit) r->test();
}

void ParameterGatherer::start(int u) {
  if (shard_copy_stale_) {
    params_.refresh_low_precision(shard_begin_, shard_end_);
    shard_copy_stale_ = false;
  }
  for (const GatherPiece& piece : units_[u].pieces) {
    std::vector<long> counts =
        shard_counts(piece.offset, piece.offset + piece.floats, params_.size(), data_.size());
    float* at = params_.values() + piece.offset;
    if (piece.low_only) {  // 16-bit pairs, as floats: shard edges and offsets are even
      for (long& c : counts) c /= 2;
      at = reinterpret_cast<float*>(params_.low_values() + piece.offset);
    }
    requests_[u].push_back(data_.iall_gather_v(at, counts));
  }
  state_[u] = State::kGathering;
  ++stats_.gathers;
}

void ParameterGatherer::complete(int u) {
  if (state_[u] != State::kGathering) return;
  for (auto& r : requests_[u]) r->wait();
  requests_[u].clear();
  for (const GatherPiece& piece : units_[u].pieces)  // the copy of what came in fp32
    if (!piece.low_only) params_.refresh_low_precision(piece.offset, piece.offset + piece.floats);
  state_[u] = State::kHere;
}

// The unit's weights and 16-bit copy outside the shard go.
void ParameterGatherer::release(int u) {
  complete(u);  // a prefetch no one asked for: MPI still writes into it until it completes
  state_[u] = State::kReleased;
  const long lo = units_[u].offset, hi = lo + units_[u].floats;
  release_unheld(lo, std::min(hi, shard_begin_));
  release_unheld(std::max(lo, shard_end_), hi);
}

// [lo, hi) goes, with the rest of the 2 MiB pages at its edges where nothing held (the shard,
// a unit gathered) shares them: else a page split between two units would stay once either
// had touched it, one more for every unit edge as the pass moves on.
void ParameterGatherer::release_unheld(long lo, long hi) {
  if (hi <= lo) return;
  const long page = (long)(kHugePageBytes / sizeof(float));
  long begin = lo / page * page, end = std::min(params_.size(), (hi + page - 1) / page * page);
  auto keep_out = [&](long held_lo, long held_hi) {
    if (held_hi <= begin || held_lo >= end || held_hi <= held_lo) return;
    if (held_hi <= lo) begin = std::max(begin, held_hi);
    if (held_lo >= hi) end = std::min(end, held_lo);
  };
  keep_out(shard_begin_, shard_end_);
  for (size_t k = 0; k < units_.size(); ++k)
    if (state_[k] != State::kReleased)
      keep_out(units_[k].offset, units_[k].offset + units_[k].floats);
  params_.release_values(begin, end);
}

void ParameterGatherer::gather_all() {
  if (in_pass_) end_pass();
  for (int u = 0; u < (int)units_.size(); ++u) complete(u);
  data_.all_gather(params_.values() + shard_begin_, params_.values(), shard_end_ - shard_begin_);
  params_.refresh_low_precision(0, params_.size());
  std::fill(state_.begin(), state_.end(), State::kHere);
}

void ParameterGatherer::release_all() {
  if (in_pass_) end_pass();
  for (int u = 0; u < (int)units_.size(); ++u) complete(u);
  params_.release_values(0, shard_begin_);
  params_.release_values(shard_end_, params_.size());
  std::fill(state_.begin(), state_.end(), State::kReleased);
  shard_copy_stale_ = true;  // the shard's values may change now (a step, a load)
}

ParameterGatherer::Stats ParameterGatherer::take_stats() {
  Stats s = stats_;
  stats_ = {};
  return s;
}

}  // namespace trident::data_parallel
