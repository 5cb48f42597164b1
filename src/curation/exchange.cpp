#include "curation/exchange.h"

#include <mpi.h>

#include <limits>
#include <stdexcept>

namespace trident::curation {

Exchange::Exchange() {
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

std::vector<std::string> Exchange::all_gather(const std::string& mine) const {
  if (size_ == 1) return {mine};
  long long n = (long long)mine.size();
  std::vector<long long> sizes(size_);
  MPI_Allgather(&n, 1, MPI_LONG_LONG, sizes.data(), 1, MPI_LONG_LONG, MPI_COMM_WORLD);
  std::vector<int> counts(size_), displs(size_);
  long long total = 0;
  for (int r = 0; r < size_; ++r) {
    displs[r] = (int)total;
    counts[r] = (int)sizes[r];
    total += sizes[r];
  }
  // MPI counts are int: past 2 GiB the exchange would need chunking (an index of ~20M
  // documents at 100 bytes each); say so rather than corrupt it.
  if (total > std::numeric_limits<int>::max())
    throw std::runtime_error("curate: global exchange over 2 GiB; use fewer documents per run");
  std::string all((size_t)total, '\0');
  MPI_Allgatherv(mine.data(), (int)n, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE,
                 MPI_COMM_WORLD);
  std::vector<std::string> parts(size_);
  for (int r = 0; r < size_; ++r) parts[r] = all.substr(displs[r], counts[r]);
  return parts;
}

double Exchange::sum(double x) const {
  double y = x;
  if (size_ > 1) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return y;
}

double Exchange::max(double x) const {
  double y = x;
  if (size_ > 1) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return y;
}

void Exchange::barrier() const {
  if (size_ > 1) MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace trident::curation
