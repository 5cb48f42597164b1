#pragma once
// The GGUF v3 container llama.cpp reads (ggml's docs/gguf.md): "GGUF", version 3, the tensor
// and metadata counts, the metadata as typed key/value pairs, each tensor's name, dimensions
// (innermost first, as ggml counts them), type and offset, then the tensors' data, each
// starting on a multiple of the alignment (32). Everything is little-endian. The file is
// written under a temporary name and renamed, so a reader sees no half-written model.
#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

namespace trident::deploy {

// ggml's tensor types that trident writes (ggml.h's enum ggml_type).
enum class GgmlType : std::uint32_t { kF32 = 0, kF16 = 1, kQ8_0 = 8, kBF16 = 30 };
const char* ggml_type_name(GgmlType t);

// A metadata value: GGUF's UINT32, INT32, FLOAT32, BOOL, STRING, and ARRAYs of STRING,
// INT32 and FLOAT32 (what llama.cpp's keys use).
using GgufValue =
    std::variant<std::uint32_t, std::int32_t, float, bool, std::string, std::vector<std::string>,
                 std::vector<std::int32_t>, std::vector<float>>;

struct GgufTensor {
  std::string name;
  std::vector<long> shape;  // row-major, outermost first (written reversed, as ggml's ne)
  GgmlType type = GgmlType::kF32;
  // The tensor's bytes in `type`, made only when the file is written (one tensor in memory
  // at a time); must return exactly gguf_tensor_bytes(shape, type) bytes.
  std::function<std::string()> encode;
};

// Bytes of a tensor of this shape and type (Q8_0: 34 per block of 32 innermost values).
std::uint64_t gguf_tensor_bytes(const std::vector<long>& shape, GgmlType type);

class GgufWriter {
 public:
  static constexpr std::uint32_t kAlignment = 32;  // general.alignment's default

  // Metadata in the order first set; setting a key again replaces its value.
  void set(const std::string& key, GgufValue value);
  // A string literal is a STRING (the variant alone would take it for a bool).
  void set(const std::string& key, const char* value) { set(key, std::string(value)); }
  const GgufValue* find(const std::string& key) const;
  void add_tensor(GgufTensor tensor);
  const std::vector<GgufTensor>& tensors() const { return tensors_; }

  // Everything before the data: header, metadata, tensor infos, padding to the alignment.
  std::string header() const;
  // Writes the file (path + ".tmp", fsync, rename); returns its size in bytes. Throws
  // std::runtime_error when an encoder returns the wrong number of bytes or a write fails.
  std::uint64_t write(const std::string& path) const;

 private:
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<GgufTensor> tensors_;
};

}  // namespace trident::deploy
