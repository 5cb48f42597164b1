#pragma once
// Helpers of the tests of src/data/: scratch directories and a small indexed dataset whose
// tokens say where they come from.
#include <string>
#include <vector>

#include "data/indexed_dataset.h"
#include "test_util.h"

namespace trident::data_test {

// An empty directory for one test, under <system temp>/trident_data_tests.
inline std::string temp_dir(const std::string& name) {
  return testing::empty_temp_dir("trident_data_tests", name);
}

// Documents of deterministic lengths 1..97 holding their index and position.
inline std::string write_documents(const std::string& dir, int n) {
  std::string prefix = dir + "/docs";
  data::IndexedDatasetBuilder b(prefix, data::TokenDtype::kUint16);
  for (int d = 0; d < n; ++d) {
    std::vector<int> doc(1 + (d * 37) % 97);
    for (size_t i = 0; i < doc.size(); ++i) doc[i] = (d * 100 + (int)i) % 60000;
    b.add_document(doc);
  }
  b.finish();
  return prefix;
}

}  // namespace trident::data_test
