#include "deploy/gguf_file.h"

#include <stdexcept>
#include <type_traits>

#include "core/files.h"

namespace trident::deploy {

namespace {

// GGUF's value types (gguf.md: enum gguf_metadata_value_type).
enum ValueType : std::uint32_t {
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10
};

template <typename T>
void put(std::string& out, T v) {  // little-endian: this machine's order (x86-64)
  static_assert(std::is_trivially_copyable_v<T>);
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void put_string(std::string& out, const std::string& s) {
  put<std::uint64_t>(out, s.size());
  out += s;
}

template <typename T>
std::uint32_t type_of() {
  if constexpr (std::is_same_v<T, std::uint32_t>) return kUint32;
  if constexpr (std::is_same_v<T, std::int32_t>) return kInt32;
  if constexpr (std::is_same_v<T, float>) return kFloat32;
  if constexpr (std::is_same_v<T, bool>) return kBool;
  return kString;
}

void put_scalar(std::string& out, const std::string& s) {
  put_string(out, s);
}
template <typename T>
void put_scalar(std::string& out, T v) {
  if constexpr (std::is_same_v<T, bool>)
    put<std::uint8_t>(out, v ? 1 : 0);
  else
    put<T>(out, v);
}

// A value's type tag and bytes.
void put_value(std::string& out, const GgufValue& value) {
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (requires { typename V::value_type; } && !std::is_same_v<V, std::string>) {
          using E = typename V::value_type;
          put<std::uint32_t>(out, kArray);
          put<std::uint32_t>(out, type_of<E>());
          put<std::uint64_t>(out, v.size());
          for (const E& e : v) put_scalar(out, e);
        } else {
          put<std::uint32_t>(out, type_of<V>());
          put_scalar(out, v);
        }
      },
      value);
}

std::uint64_t padded(std::uint64_t n) {
  return (n + GgufWriter::kAlignment - 1) / GgufWriter::kAlignment * GgufWriter::kAlignment;
}

}  // namespace

const char* ggml_type_name(GgmlType t) {
  switch (t) {
    case GgmlType::kF32:
      return "F32";
    case GgmlType::kF16:
      return "F16";
    case GgmlType::kQ8_0:
      return "Q8_0";
    case GgmlType::kBF16:
      return "BF16";
  }
  return "?";
}

std::uint64_t gguf_tensor_bytes(const std::vector<long>& shape, GgmlType type) {
  std::uint64_t n = 1;
  for (long d : shape) n *= (std::uint64_t)d;
  switch (type) {
    case GgmlType::kF32:
      return 4 * n;
    case GgmlType::kF16:
    case GgmlType::kBF16:
      return 2 * n;
    case GgmlType::kQ8_0:
      return n / 32 * 34;  // a 2-byte fp16 scale and 32 int8 per block
  }
  return 0;
}

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& [k, v] : metadata_)
    if (k == key) {
      v = std::move(value);
      return;
    }
  metadata_.emplace_back(key, std::move(value));
}

const GgufValue* GgufWriter::find(const std::string& key) const {
  for (const auto& [k, v] : metadata_)
    if (k == key) return &v;
  return nullptr;
}

void GgufWriter::add_tensor(GgufTensor tensor) {
  tensors_.push_back(std::move(tensor));
}

std::string GgufWriter::header() const {
  std::string out = "GGUF";
  put<std::uint32_t>(out, 3);
  put<std::uint64_t>(out, tensors_.size());
  put<std::uint64_t>(out, metadata_.size());
  for (const auto& [key, value] : metadata_) {
    put_string(out, key);
    put_value(out, value);
  }
  std::uint64_t offset = 0;  // relative to the data section, each tensor aligned
  for (const GgufTensor& t : tensors_) {
    put_string(out, t.name);
    put<std::uint32_t>(out, (std::uint32_t)t.shape.size());
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) put<std::uint64_t>(out, *d);
    put<std::uint32_t>(out, (std::uint32_t)t.type);
    put<std::uint64_t>(out, offset);
    offset = padded(offset + gguf_tensor_bytes(t.shape, t.type));
  }
  out.resize(padded(out.size()), '\0');
  return out;
}

std::uint64_t GgufWriter::write(const std::string& path) const {
  AtomicFile file(path, WriteMode::kDirect);
  const std::string head = header();
  file.write(head.data(), head.size());
  std::uint64_t size = head.size();
  for (const GgufTensor& t : tensors_) {
    std::string bytes = t.encode();
    const std::uint64_t want = gguf_tensor_bytes(t.shape, t.type);
    if (bytes.size() != want)
      throw std::runtime_error("GGUF tensor " + t.name + ": encoded " +
                               std::to_string(bytes.size()) + " bytes, its shape and type need " +
                               std::to_string(want));
    bytes.resize(padded(want), '\0');
    file.write(bytes.data(), bytes.size());
    size += bytes.size();
  }
  file.commit();
  return size;
}

}  // namespace trident::deploy
