#pragma once
// NumPy .npy files (format 1.0, little-endian, C order) for 1-d and 2-d integer arrays:
// the dataset index caches are written in the format numpy.load reads.
#include <cstdint>
#include <string>
#include <vector>

namespace trident::io {

struct NpyArray {
  std::string descr;  // '<i4', '<i8', '<u4'
  std::vector<long> shape;
  std::vector<std::int64_t> values;  // widened
};

// Written to path.tmp, then renamed.
void write_npy(const std::string& path, const std::string& descr, const std::vector<long>& shape,
               const std::vector<std::int64_t>& values);
// Throws FormatError when the file is not a valid array of those descriptors.
NpyArray read_npy(const std::string& path);

}  // namespace trident::io
