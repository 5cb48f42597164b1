#include "tokenizer/bpe_merge.h"

#include <algorithm>
#include <functional>

namespace trident::tokenizer {

namespace {

struct Candidate {
  int rank, pos, merged;  // pos: the left symbol's index in the piece
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

// One thread's buffers, reused across pieces: most pieces are a few symbols long, and an
// allocation per piece would cost more than merging it.
struct Workspace {
  std::vector<int> prev, next;  // the linked list; -1 ends it
  std::vector<Candidate> heap;  // a min-heap under std::greater
  std::vector<Candidate> held;  // kEveryOccurrence: pairs made by the current rank's merges

  void reset(int n) {
    prev.resize(n);
    next.resize(n);
    for (int i = 0; i < n; ++i) prev[i] = i - 1, next[i] = i + 1 < n ? i + 1 : -1;
    heap.clear();
    held.clear();
  }
  // A long word's buffers are given back rather than kept for the thread's life.
  void release_if_large() {
    constexpr size_t kKeep = 1u << 16;
    if (prev.capacity() > kKeep) *this = Workspace();
  }
  void push(const Candidate& c) {
    heap.push_back(c);
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  }
  Candidate pop() {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const Candidate top = heap.back();
    heap.pop_back();
    return top;
  }
};

class Merger {
 public:
  Merger(const BpeMerges& merges, MergeOrder order, std::vector<int>& id, Workspace& w)
      : merges_(merges), order_(order), id_(id), w_(w) {}

  void run() {
    const int n = (int)id_.size();
    w_.reset(n);
    Candidate c;
    for (int i = 0; i + 1 < n; ++i)
      if (pair_at(i, &c)) w_.heap.push_back(c);
    std::make_heap(w_.heap.begin(), w_.heap.end(), std::greater<>());
    while (!w_.heap.empty()) {
      const Candidate top = w_.pop();
      if (stands(top)) {
        merge(top);
        queue_made(w_.prev[top.pos]);
        queue_made(top.pos);
      }
      // The current rank is done when the heap's next entry has another: the pairs its merges
      // made join the queue now (GPT-2 rescans the word once per rank).
      if (!w_.held.empty() && (w_.heap.empty() || w_.heap.front().rank != top.rank)) {
        for (const Candidate& h : w_.held) w_.push(h);
        w_.held.clear();
      }
    }
    id_.erase(std::remove(id_.begin(), id_.end(), -1), id_.end());
  }

 private:
  // The merge of the pair that starts at symbol `pos` now; false if none (or pos is no symbol).
  bool pair_at(int pos, Candidate* c) const {
    if (pos < 0 || id_[pos] < 0 || w_.next[pos] < 0) return false;
    auto it = merges_.find(bpe_pair_key(id_[pos], id_[w_.next[pos]]));
    if (it == merges_.end()) return false;
    *c = {it->second.first, pos, it->second.second};
    return true;
  }

  // A pair a merge made: in the heap at once (HF), or held until the current rank is done.
  void queue_made(int pos) {
    Candidate c;
    if (!pair_at(pos, &c)) return;
    if (order_ == MergeOrder::kLowestRankFirst)
      w_.push(c);
    else
      w_.held.push_back(c);
  }

  // Whether a popped entry still describes a pair to merge.
  bool stands(const Candidate& popped) const {
    Candidate now;
    if (!pair_at(popped.pos, &now)) return false;
    return order_ == MergeOrder::kLowestRankFirst ? now.merged == popped.merged
                                                  : now.rank == popped.rank;
  }

  // The symbol at c.pos becomes the merged token; its right neighbour leaves the list.
  void merge(const Candidate& c) {
    const int right = w_.next[c.pos];
    id_[c.pos] = c.merged;
    id_[right] = -1;
    w_.next[c.pos] = w_.next[right];
    if (w_.next[c.pos] >= 0) w_.prev[w_.next[c.pos]] = c.pos;
  }

  const BpeMerges& merges_;
  const MergeOrder order_;
  std::vector<int>& id_;
  Workspace& w_;
};

}  // namespace

void merge_symbols(const BpeMerges& merges, MergeOrder order, std::vector<int>* symbols) {
  if (symbols->size() < 2) return;
  thread_local Workspace workspace;
  Merger(merges, order, *symbols, workspace).run();
  workspace.release_if_large();
}

}  // namespace trident::tokenizer
