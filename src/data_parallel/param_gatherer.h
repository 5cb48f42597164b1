#pragma once
// Sharded weights (ZeRO-3, --data-parallel-sharding-strategy optim_grads_params): each
// data-parallel rank keeps only its shard [r S / d, (r + 1) S / d) of a chunk's weight buffer
// (the optimizer's shard). The chunk runs in units — the embedding, each layer, the final
// norm with an untied output layer, a last stage's copy of a tied word embedding — and
// before a unit runs its weights are all-gathered into their place in the buffer (so every
// pointer into it stays valid), the 16-bit copy re-rounded from them; when the pass moves
// past a unit, its weights outside the shard are given back to the system.
// Prefetch: the units a pass asks for, in order, are recorded on the first pass of each kind
// (forward, backward) and replayed by the later ones, which start the next unit's gather
// before the current one computes, and keep a unit they ask for again (a tied word embedding,
// read first by the embedding and last by the output layer, is gathered once per forward).
// A pass that asks differently loses only its prefetch.
// Every data-parallel rank runs the same passes, so all issue the same gathers in the same
// order, as MPI's collectives require.
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "data_parallel/buckets.h"
#include "parameters/parameters.h"

namespace trident::data_parallel {

// A piece of a unit: a flat range whose weights are gathered in fp32, or (low_only) only in
// their 16-bit copy — the linear weights of a bf16/fp16 run, which nothing outside the
// optimizer reads in fp32: half the bytes, and nothing to re-round on arrival.
struct GatherPiece {
  long offset, floats;
  bool low_only = false;
};

// A unit: a spec range, its flat range in the buffer, and its pieces in order (empty: one
// fp32 piece over the whole range).
struct GatherUnit {
  int spec_begin, spec_end;
  long offset, floats;
  std::vector<GatherPiece> pieces;
  // A block of the output layer's weight (buckets.h VocabularyBlocks), asked for by flat
  // range (need_range) and never kept for a later use in the pass: the output layer reads
  // every block twice per chunk of rows, and holding them would hold the whole weight.
  bool block = false;
};

enum class Pass { kForward, kBackward };

class ParameterGatherer {
 public:
  // units: in layout order, covering the specs a pass asks for. The buffer must be padded to
  // a multiple of d (the shards split it exactly).
  ParameterGatherer(Parameters& params, comm::Communicator& data, std::vector<GatherUnit> units);
  void begin_pass(Pass pass);
  // Specs [begin, end) are about to run: waits for their units' weights (gathering any that
  // are not here), starts gathering what the pass asked for next last time, and gives back
  // every other unit.
  void need(int spec_begin, int spec_end);
  // The same for the block units within flat range [begin, end).
  void need_range(long begin, long end);
  // The pass is over: gathers in flight complete and every unit is given back. Then, if the
  // caller allowed it for this kind of pass, the first units the other kind asks for start
  // gathering (the weights must not change before that pass: no step in between).
  void end_pass();
  // Whether the end of a forward (backward) pass may prefetch for a backward (forward) one.
  void allow_prefetch_after(Pass pass, bool allowed) { prefetch_after_[(int)pass] = allowed; }
  // Lets gathers in flight move (MPI progresses them only inside its calls).
  void progress();
  // Outside passes (a sample, an export): the whole buffer, then back to the shard alone
  // (also before a step: nothing gathered may outlive the weights it copied).
  void gather_all();
  void release_all();
  long shard_begin() const { return shard_begin_; }
  long shard_end() const { return shard_end_; }
  // Since the last take: gathers made, and of those the ones that had to be waited for
  // because no prefetch had started them; seconds spent waiting in need().
  struct Stats {
    long gathers = 0, unprefetched = 0;
    double wait_seconds = 0;
  };
  Stats take_stats();

 private:
  using UnitSet = std::vector<int>;  // unit indices, ascending
  UnitSet units_of(int spec_begin, int spec_end) const;
  void need_units(const UnitSet& wanted);
  void start(int unit);
  void complete(int unit);
  void release(int unit);
  void release_unheld(long begin, long end);
  // The units the recorded pass asks for after the current step, if this pass follows it.
  const UnitSet* next_in_record() const;
  bool needed_later(int unit) const;

  Parameters& params_;
  comm::Communicator& data_;
  std::vector<GatherUnit> units_;
  long shard_begin_ = 0, shard_end_ = 0;
  enum class State { kReleased, kGathering, kHere };
  std::vector<State> state_;
  std::vector<std::vector<std::unique_ptr<comm::Request>>> requests_;  // per unit, per piece
  // This rank's shard of the 16-bit copy: the source of low-only pieces, re-rounded from the
  // shard's values before the first gather after they change (a step, a load).
  bool shard_copy_stale_ = true;
  // Per pass kind: the units each need() asked for, as first recorded; whether it is
  // complete (a whole pass ran); this pass's step, while it follows the record.
  std::vector<UnitSet> record_[2];
  bool recorded_[2] = {false, false};
  Pass pass_ = Pass::kForward;
  bool in_pass_ = false, following_ = false;
  bool prefetch_after_[2] = {false, false};
  size_t step_ = 0;
  Stats stats_;
};

}  // namespace trident::data_parallel
