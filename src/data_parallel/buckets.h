#pragma once
// Gradient buckets as a pure function of a chunk's tensors: the reducer cuts its buffer with
// it, and the memory plan (and so the planner) sizes the buckets a rank holds at once with
// the same cut.
#include <utility>
#include <vector>

namespace trident::data_parallel {

struct Bucket {
  int spec_begin, spec_end;  // parameter specs [begin, end)
  long offset, floats;       // range in the flat buffer
  // Reduced only when its owner asks (GradientReducer::reduce_range), never with the others:
  // a block of the output layer's weight, or the sparsely updated input word embedding.
  bool on_demand = false;
};

// Sharded weights (ZeRO-3) keep the vocabulary-sized tensors out of the units and buckets
// the rest of the chunk moves in, so no rank ever holds one whole: the output layer's weight
// (the word embedding when tied) is gathered, and its gradient reduce-scattered, in blocks
// of whole rows as the output layer reaches each; the input word embedding is read and
// updated row by row (data_parallel/sharded_embedding.h), never gathered or reduced.
// Tensors are indices into the chunk's tensor list; -1: none.
struct VocabularyBlocks {
  int head_tensor = -1;
  int sparse_tensor = -1;
  long block_floats = 0;  // whole rows
  bool active() const { return head_tensor >= 0 || sparse_tensor >= 0; }
};

// The (offset, floats) blocks the head tensor is cut into, in order.
std::vector<std::pair<long, long>> vocabulary_blocks(
    const std::vector<std::pair<long, long>>& tensors, const VocabularyBlocks& vocab);

// Floats of [lo, hi) in each data-parallel rank's shard [r S / d, (r + 1) S / d) of a
// buffer of S floats, in rank order: the blocks of the uneven collectives over the range.
std::vector<long> shard_counts(long lo, long hi, long buffer_floats, int ranks);

// Tensors (offset, floats), in layout order, grouped from the last (the order backward
// finishes them, as Megatron's DDP does) into buckets of at least bucket_floats; the first
// bucket (the last tensors) also takes the buffer's padding up to buffer_floats.
// The vocabulary's tensors (if any) are buckets of their own, on demand: each head block one,
// the sparse tensor one.
std::vector<Bucket> gradient_buckets(const std::vector<std::pair<long, long>>& tensors,
                                     long buffer_floats, long bucket_floats,
                                     const VocabularyBlocks& vocab = {});

// Weight units (offset, floats; in layout order) with the vocabulary's tensors taken out of
// them: the head's blocks become units of their own, in place of the unit that held it;
// the sparse tensor is in none.
std::vector<std::pair<long, long>> vocabulary_units(
    const std::vector<std::pair<long, long>>& units,
    const std::vector<std::pair<long, long>>& tensors, const VocabularyBlocks& vocab);

// The most floats of buckets held at once when each bucket, in order, is filled while up to
// `in_flight` earlier ones are still being reduced.
long largest_bucket_window(const std::vector<Bucket>& buckets, int in_flight);

// The same with sharded gradients, for the data-parallel rank that holds the most: its
// shard [r S / d, (r + 1) S / d) of the buffer (S floats) stays, and so do the buckets of
// the window around it; the whole 2 MiB pages that bucket edges split stay too.
// last_bucket_held: the last bucket (the word embedding's) is written from the forward on
// (a tied output layer's gradient is formed with the loss) and stays through backward.
long largest_sharded_gradient_floats(const std::vector<Bucket>& buckets, long buffer_floats,
                                     int data_ranks, int in_flight, bool last_bucket_held);

// Sharded weights (ZeRO-3): the most floats of a weight buffer of S floats that a
// data-parallel rank holds at once, for the rank that holds the most: its shard of S / d,
// and outside it the units (offset, floats; in layout order) a pass holds together —
// `window` consecutive ones (those running and the next, prefetched), with `wrap` each with
// the first (a tied word embedding, kept through the forward for the output layer) — plus
// the whole 2 MiB pages their edges split.
long largest_sharded_weight_floats(const std::vector<std::pair<long, long>>& units,
                                   long buffer_floats, int data_ranks, int window, bool wrap);
// The most floats of units held together, as above, shard or not.
long largest_unit_window(const std::vector<std::pair<long, long>>& units, int window, bool wrap);

}  // namespace trident::data_parallel
