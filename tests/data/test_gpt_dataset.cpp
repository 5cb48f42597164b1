// GPTDataset: the split proportions, the sampling algorithm's coverage of the shuffled
// document stream, and its cache. (Parity with numpy lives in dataset_reference_test.py.)
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/data_test_util.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset.h"

namespace trident::data {
namespace {

using namespace data_test;

TEST(Split, MegatronProportions) {
  auto r = split_ranges(parse_split("969,30,1"), 1000);
  EXPECT_EQ(r[0], (std::pair<long, long>{0, 969}));
  EXPECT_EQ(r[1], (std::pair<long, long>{969, 999}));
  EXPECT_EQ(r[2], (std::pair<long, long>{999, 1000}));
  auto two = split_ranges(parse_split("98,2"), 7);  // rounding leaves the total exact
  EXPECT_EQ(two[2].second, 7);
  EXPECT_THROW(parse_split("a,b"), std::invalid_argument);
  EXPECT_THROW(parse_split("0,0,0"), std::invalid_argument);
  EXPECT_THROW(parse_split("1,2,3,4"), std::invalid_argument);
}

TEST(GPTDataset, SamplesTileTheShuffledDocumentStream) {
  std::string dir = temp_dir("tile");
  auto data = std::make_shared<const IndexedDataset>(write_documents(dir, 30));
  GPTDatasetSpec spec{"train", 5, 25, 200, 16, 99, dir + "/cache"};
  GPTDataset ds(data, spec, nullptr);
  // Megatron shuffles all epochs' entries together: every document appears once per epoch.
  long split_docs = 20, epochs = (long)ds.document_index().size() / split_docs;
  ASSERT_EQ((long)ds.document_index().size(), epochs * split_docs);
  ASSERT_GE(epochs, 2);
  std::map<int, long> count;
  for (int d : ds.document_index()) ++count[d];
  ASSERT_EQ((long)count.size(), split_docs);
  for (const auto& [doc, n] : count) {
    EXPECT_GE(doc, 5);
    EXPECT_LT(doc, 25);
    EXPECT_EQ(n, epochs);
  }
  // Samples in sample-index order, overlapping by their extra token, are the stream.
  std::vector<int> stream;
  for (int d : ds.document_index()) data->read(d, 0, data->size(d), &stream);
  long n = (long)ds.shuffle_index().size();
  ASSERT_GE(n, 200);
  std::vector<long> position(n);
  for (long i = 0; i < n; ++i) position[ds.shuffle_index()[i]] = i;  // invert the shuffle
  std::vector<int> sample(17);
  for (long s = 0; s < n; ++s) {
    ds.sample(position[s], sample.data());
    for (int t = 0; t < 17; ++t) ASSERT_EQ(sample[t], stream[s * 16 + t]) << "sample " << s;
  }
  std::vector<long> sorted(ds.shuffle_index().begin(), ds.shuffle_index().end());
  std::sort(sorted.begin(), sorted.end());
  for (long i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i);
}

TEST(GPTDataset, SeedDeterminesOrderAndCacheIsKeyedAndRefreshed) {
  std::string dir = temp_dir("cache");
  std::string prefix = write_documents(dir, 30);
  auto data = std::make_shared<const IndexedDataset>(prefix);
  GPTDatasetSpec spec{"train", 0, 30, 50, 16, 7, dir + "/cache"};
  GPTDataset a(data, spec, nullptr);
  EXPECT_FALSE(a.loaded_from_cache());
  GPTDataset b(data, spec, nullptr);
  EXPECT_TRUE(b.loaded_from_cache());
  EXPECT_EQ(a.shuffle_index(), b.shuffle_index());
  spec.seed = 8;
  GPTDataset c(data, spec, nullptr);
  EXPECT_FALSE(c.loaded_from_cache());
  EXPECT_NE(a.shuffle_index(), c.shuffle_index());
  // Rewriting the data makes the cache stale: it is rebuilt, not reused.
  spec.seed = 7;
  write_documents(dir, 31);
  auto fresh = std::make_shared<const IndexedDataset>(prefix);
  GPTDataset d(fresh, spec, nullptr);
  EXPECT_FALSE(d.loaded_from_cache());
}

}  // namespace
}  // namespace trident::data
