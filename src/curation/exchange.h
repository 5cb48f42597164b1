#pragma once
// The global steps of curation over MPI_COMM_WORLD: every rank contributes its part and every
// rank receives all parts in rank order, so each one takes the same dedup decisions without a
// coordinator. With one process (no mpirun) these are copies.
#include <cstring>
#include <string>
#include <vector>

namespace trident::curation {

class Exchange {
 public:
  Exchange();  // MPI must be initialised (comm::MpiRuntime)
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Every rank's bytes, indexed by rank.
  std::vector<std::string> all_gather(const std::string& mine) const;
  double sum(double x) const;
  double max(double x) const;
  void barrier() const;

  // Every rank's vector of trivially copyable T, concatenated in rank order; *offset (if
  // given) is where this rank's part starts.
  template <class T>
  std::vector<T> all_gather_vector(const std::vector<T>& mine, size_t* offset = nullptr) const {
    std::string bytes((const char*)mine.data(), mine.size() * sizeof(T));
    std::vector<std::string> parts = all_gather(bytes);
    std::vector<T> all;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_ && offset) *offset = all.size();
      const size_t n = parts[r].size() / sizeof(T);
      all.resize(all.size() + n);
      if (n) std::memcpy((void*)(all.data() + all.size() - n), parts[r].data(), n * sizeof(T));
    }
    return all;
  }

 private:
  int rank_ = 0, size_ = 1;
};

}  // namespace trident::curation
