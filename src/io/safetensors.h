#pragma once
// The safetensors format: an 8-byte little-endian header length, a JSON header naming
// each tensor's dtype, shape and [begin, end) byte range, then the raw data. The reader
// checks every claim the header makes before any byte of data is used.
#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/files.h"

namespace trident::io {

struct TensorEntry {
  std::string name;
  std::string dtype;
  std::vector<long> shape;
  std::uint64_t begin = 0, end = 0;  // relative to the data section
  long numel() const;
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);  // throws FormatError naming path + rule
  // The same checks over a whole file already in memory (`name` stands for the path in
  // messages); the bytes must outlive this object.
  SafetensorsFile(const char* bytes, size_t size, const std::string& name);
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  const TensorEntry* find(const std::string& name) const;
  // F32, F16 and BF16 are converted to float.
  std::vector<float> read_float(const TensorEntry& t) const;
  // The same into dst (t.numel() floats), without an intermediate copy.
  void copy_float(const TensorEntry& t, float* dst) const;
  // Elements [first, first + count) of t (in its row-major order) into dst; a range outside
  // the tensor throws std::out_of_range.
  void copy_float_range(const TensorEntry& t, long first, long count, float* dst) const;
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

 private:
  // Checks the length, the header and every tensor's claims against the file's bytes.
  void parse(const char* bytes, size_t size);

  std::string path_;
  // A file is memory-mapped: tensors are read from the page cache, nothing is zero-filled.
  const char* map_ = nullptr;  // owned mapping (nullptr for bytes given in memory)
  size_t map_size_ = 0;
  const char* data_ = nullptr;  // start of the data section
  std::vector<TensorEntry> tensors_;
  std::map<std::string, std::string> metadata_;
};

// How a tensor is stored: F32 as it is, or BF16 rounded to nearest even (HF's bfloat16
// checkpoints; the values of a BF16 file read as float come back to the same bits).
enum class StoredDtype { kF32, kBF16 };
const char* safetensors_dtype_name(StoredDtype d);  // "F32" / "BF16"

struct TensorToWrite {
  std::string name;
  std::vector<long> shape;
  const float* data;
  StoredDtype dtype = StoredDtype::kF32;
};

// Where write_safetensors puts everything, a pure function of the tensors' names, shapes and
// dtypes and the metadata (their data is not read): the header's bytes (the 8-byte length and
// the JSON, padded to 8 bytes) and each tensor's first byte in the file. Several writers of one
// file (checkpoint/sharded_write.h) each place their pieces from it.
struct SafetensorsLayout {
  std::string header;
  std::vector<std::uint64_t> offsets;  // absolute, one per tensor in order
  std::uint64_t file_bytes = 0;
};
SafetensorsLayout safetensors_layout(const std::vector<TensorToWrite>& tensors,
                                     const std::map<std::string, std::string>& metadata = {});

// Writes the tensors (F32, or BF16 where they say so) to path + ".tmp", fsyncs, renames over path
// and fsyncs the directory (so the rename itself survives a power loss). Returns the file's size;
// `observe` (optional) sees every byte in order as it is written (e.g. to checksum).
size_t write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata = {},
                         const std::function<void(const char*, size_t)>& observe = {});

}  // namespace trident::io
