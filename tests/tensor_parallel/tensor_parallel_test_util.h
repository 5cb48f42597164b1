#pragma once
// Helpers of the tests of src/tensor_parallel/: cutting a global [rows, cols] matrix into the
// block a rank holds and putting the ranks' blocks back together, and an in-process group of
// t ranks (thread_group.h) to run a layer's shards on.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tensor_parallel/thread_group.h"
#include "test_util.h"

namespace trident::tensor_parallel_test {

// Rows [first, first + count) of a row-major matrix of `cols` columns.
template <typename T>
std::vector<T> row_block(const std::vector<T>& m, int cols, int first, int count) {
  return std::vector<T>(m.begin() + (long)first * cols, m.begin() + (long)(first + count) * cols);
}

// Columns [first, first + count) of a row-major [rows, cols] matrix.
template <typename T>
std::vector<T> column_block(const std::vector<T>& m, int rows, int cols, int first, int count) {
  std::vector<T> out((size_t)rows * count);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < count; ++c) out[(size_t)r * count + c] = m[(size_t)r * cols + first + c];
  return out;
}

// The ranks' column blocks [rows, cols / t] side by side: [rows, cols].
inline std::vector<float> join_columns(const std::vector<std::vector<float>>& blocks, int rows) {
  const int t = (int)blocks.size(), w = (int)(blocks[0].size() / rows);
  std::vector<float> out((size_t)rows * w * t);
  for (int k = 0; k < t; ++k)
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < w; ++c) out[((size_t)r * t + k) * w + c] = blocks[k][(size_t)r * w + c];
  return out;
}

// The ranks' row blocks one after another.
inline std::vector<float> join_rows(const std::vector<std::vector<float>>& blocks) {
  std::vector<float> out;
  for (const std::vector<float>& b : blocks) out.insert(out.end(), b.begin(), b.end());
  return out;
}

// Names the instances of a test parameterised by the tensor-parallel size: t1, t2, t4.
inline std::string tensor_parallel_size(const ::testing::TestParamInfo<int>& info) {
  std::string name = "t";
  name += std::to_string(info.param);
  return name;
}

}  // namespace trident::tensor_parallel_test
