// Best-fit decreasing packing of whole documents: against a brute-force best fit written
// here (the bins' fill levels must agree; which of two equally full bins takes a piece does
// not change what follows), every document placed once and split only when longer than a
// sample, and a sample's tokens the concatenation of its bin with flagged padding and
// flagged loss-mask zeros.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "config/token_flags.h"
#include "data/data_test_util.h"
#include "data/packed_dataset.h"

namespace trident {
namespace {

// Best fit by definition: pieces longest first (ties in document order), each into the
// fullest bin that still has room for it, else a new bin. Returns the sorted fill levels.
std::vector<int> brute_force_fill(const std::vector<int>& sizes, int capacity) {
  std::vector<int> pieces;
  for (int n : sizes)
    for (int at = 0; at < n; at += capacity) pieces.push_back(std::min(capacity, n - at));
  std::stable_sort(pieces.begin(), pieces.end(), std::greater<int>());
  std::vector<int> fill;
  for (int p : pieces) {
    int best = -1;
    for (size_t b = 0; b < fill.size(); ++b)
      if (capacity - fill[b] >= p && (best < 0 || fill[b] > fill[best])) best = (int)b;
    if (best < 0)
      fill.push_back(p);
    else
      fill[best] += p;
  }
  std::sort(fill.begin(), fill.end());
  return fill;
}

TEST(PackedDataset, BestFitPlacesEveryDocumentWhole) {
  std::vector<int> sizes;
  for (int d = 0; d < 200; ++d) sizes.push_back(1 + (d * 37 + d * d) % 150);
  const int capacity = 129;
  const auto bins = data::best_fit_bins(sizes, 0, (long)sizes.size(), capacity);
  std::vector<int> fill;
  std::map<long, int> pieces, tokens;
  for (const auto& bin : bins) {
    int used = 0;
    for (const data::DocumentPiece& p : bin) {
      used += p.length;
      ++pieces[p.document];
      tokens[p.document] += p.length;
      EXPECT_EQ(p.offset % capacity, 0);
    }
    EXPECT_LE(used, capacity);
    fill.push_back(used);
  }
  std::sort(fill.begin(), fill.end());
  EXPECT_EQ(fill, brute_force_fill(sizes, capacity));
  for (size_t d = 0; d < sizes.size(); ++d) {
    EXPECT_EQ(tokens[(long)d], sizes[d]) << "document " << d;
    EXPECT_EQ(pieces[(long)d], (sizes[d] + capacity - 1) / capacity) << "document " << d;
  }
}

TEST(PackedDataset, SamplesAreTheirBinsPaddedAndFlagged) {
  const std::string dir = data_test::temp_dir("packed_dataset");
  const std::vector<std::vector<int>> docs = {{5, 6, 7}, {8, 9}, {10, 11, 12, 13, 14}, {15}};
  const std::vector<std::vector<int>> masks = {{0, 1, 1}, {1, 0}, {0, 0, 1, 1, 1}, {1}};
  data::IndexedDatasetBuilder tokens(dir + "/t", data::TokenDtype::kUint16);
  data::IndexedDatasetBuilder mask(dir + "/m", data::TokenDtype::kUint8);
  for (size_t d = 0; d < docs.size(); ++d)
    tokens.add_document(docs[d]), mask.add_document(masks[d]);
  tokens.finish(), mask.finish();
  auto t = std::make_shared<const data::IndexedDataset>(dir + "/t");
  auto m = std::make_shared<const data::IndexedDataset>(dir + "/m");
  data::PackedDataset packed(t, m, {"train", 0, 4, 5, 5, 7, 0});  // samples of 6 tokens
  ASSERT_EQ(packed.bins().size(), 2u);                            // [5 tokens + 1], [3 + 2 tokens]
  EXPECT_EQ(packed.size(), 5);
  int seen_full = 0;
  for (long i = 0; i < packed.size(); ++i) {
    std::vector<int> out(6);
    packed.sample(i, out.data());
    std::vector<int> want, want_mask;
    for (long b = 0; b < 2; ++b) {
      std::vector<int> w, wm;
      for (const data::DocumentPiece& p : packed.bins()[b])
        for (int k = 0; k < p.length; ++k)
          w.push_back(docs[p.document][p.offset + k]),
              wm.push_back(masks[p.document][p.offset + k]);
      while (w.size() < 6) w.push_back(0), wm.push_back(0);
      if (token_id(out[0]) == w[0]) want = w, want_mask = wm;
    }
    ASSERT_FALSE(want.empty());
    for (int k = 0; k < 6; ++k) {
      EXPECT_EQ(token_id(out[k]), want[k]) << "sample " << i << " token " << k;
      EXPECT_EQ(counted_target(out[k]), want_mask[k] == 1) << "sample " << i << " token " << k;
    }
    seen_full += want[5] != 0;
  }
  EXPECT_GT(seen_full, 0);
}

}  // namespace
}  // namespace trident
