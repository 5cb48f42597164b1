#pragma once
// Duplicate clusters as connected components of verified pairs: union by size with path
// halving, near-constant time per operation.
#include <cstdint>
#include <numeric>
#include <vector>

namespace trident::curation {

class UnionFind {
 public:
  explicit UnionFind(std::size_t n) : parent_(n), size_(n, 1) {
    std::iota(parent_.begin(), parent_.end(), std::uint32_t{0});
  }
  std::uint32_t find(std::uint32_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  bool unite(std::uint32_t a, std::uint32_t b) {
    a = find(a), b = find(b);
    if (a == b) return false;
    if (size_[a] < size_[b]) std::swap(a, b);
    parent_[b] = a;
    size_[a] += size_[b];
    return true;
  }
  std::uint32_t size_of(std::uint32_t x) { return size_[find(x)]; }

 private:
  std::vector<std::uint32_t> parent_, size_;
};

}  // namespace trident::curation
