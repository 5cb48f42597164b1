#include "data/mock_dataset.h"

#include <algorithm>

#include "core/random.h"

namespace trident::data {

namespace {
constexpr int kMinRun = 16, kMaxRun = 80, kMaxStride = 7;
}

MockGPTDataset::MockGPTDataset(int vocab_size, int seq_length, std::uint64_t seed)
    : seq_length_(seq_length),
      alphabet_(std::max(2, std::min(vocab_size - 1, 1000))),
      eod_(vocab_size - 1),
      seed_(seed) {}

void MockGPTDataset::sample(long index, int* out) const {
  const std::uint64_t stream = 0x6d6f636bULL + (std::uint64_t)index;  // "mock"
  std::uint64_t draw = 0;
  auto uniform_int = [&](int lo, int hi) {  // inclusive
    return lo + (int)(uniform_at(seed_, stream, draw++) * (hi - lo + 1));
  };
  int pos = 0;
  while (pos < seq_length_ + 1) {
    int start = uniform_int(0, alphabet_ - 1), stride = uniform_int(1, kMaxStride);
    int run = uniform_int(kMinRun, kMaxRun);
    for (int j = 0; j < run && pos < seq_length_ + 1; ++j)
      out[pos++] = (int)(((long)start + (long)stride * j) % alphabet_);
    if (pos < seq_length_ + 1) out[pos++] = eod_;
  }
}

}  // namespace trident::data
