#pragma once
// Byte-pair merging of one piece's symbols in O(n log n), for both BPE tokenizers (GPT-2's and
// a tokenizer.json's BPE model): the symbols form a linked list, the adjacent pairs that have a
// merge wait in a min-heap keyed by (rank, position), and an entry an earlier merge made stale
// is dropped when it is popped. Rescanning every pair for the lowest rank after each merge,
// as GPT-2's encoder.py does, costs O(n^2) on one long word (a 1 MB word: minutes).
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace trident::tokenizer {

// (left id, right id), as bpe_pair_key makes it -> (rank, id of the merged token).
using BpeMerges = std::unordered_map<std::uint64_t, std::pair<int, int>>;

inline std::uint64_t bpe_pair_key(int left, int right) {
  return ((std::uint64_t)(std::uint32_t)left << 32) | (std::uint32_t)right;
}

// The two published merge loops. They give the same ids whenever no merge ranks before a
// merge that makes one of its tokens (true of merges learned in order, as GPT-2's and HF's
// files are); each tokenizer keeps its own loop, so any file gives the ids its reference gives.
enum class MergeOrder {
  // HF `tokenizers`' Word::merge_all: the lowest-ranked pair anywhere, the leftmost of equals;
  // a pair a merge makes competes at once. A popped entry stands when its pair still merges
  // into the same token (HF's test, which compares the merged id only).
  kLowestRankFirst,
  // GPT-2's encoder.py: the lowest-ranked pair, then every occurrence of it left to right (not
  // overlapping), before the pairs those merges made are looked at.
  kEveryOccurrence,
};

// Merges `symbols` (token ids, none negative) in place until no adjacent pair has a merge.
void merge_symbols(const BpeMerges& merges, MergeOrder order, std::vector<int>* symbols);

}  // namespace trident::tokenizer
