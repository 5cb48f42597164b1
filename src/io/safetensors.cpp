#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/low_precision.h"

namespace trident::io {

namespace {

constexpr std::uint64_t kMaxHeader = 100u << 20;
constexpr std::uint64_t kMaxElements = 1ull << 62;

int dtype_size(const std::string& d) {
  static const std::map<std::string, int> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
      {"I8", 1},  {"U8", 1},  {"BOOL", 1}, {"U16", 2},  {"U32", 4}, {"U64", 8}};
  auto it = sizes.find(d);
  return it == sizes.end() ? 0 : it->second;
}

float half_to_float(std::uint16_t h) {
  std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) mant <<= 1, --exp;
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

long TensorEntry::numel() const {
  long n = 1;
  for (long d : shape) n *= d;
  return n;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  auto fail = [&](const std::string& why) { throw FormatError(path + ": " + why); };
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail(std::string("cannot open file: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) ::close(fd), fail("not a regular file");
  const size_t file_size = (size_t)st.st_size;
  if (file_size > 0) {  // mmap refuses an empty file; parse() reports it as too short
    void* m = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) ::close(fd), fail(std::string("mmap failed: ") + std::strerror(errno));
    map_ = static_cast<const char*>(m);
    map_size_ = file_size;
  }
  ::close(fd);
  try {
    parse(map_, file_size);
  } catch (...) {
    if (map_) ::munmap(const_cast<char*>(map_), map_size_);
    throw;
  }
}

SafetensorsFile::SafetensorsFile(const char* bytes, size_t size, const std::string& name)
    : path_(name) {
  parse(bytes, size);
}

void SafetensorsFile::parse(const char* bytes, size_t size) {
  auto fail = [&](const std::string& why) { throw FormatError(path_ + ": " + why); };
  const std::uint64_t file_size = size;
  if (file_size < 8)
    fail("file is " + std::to_string(file_size) + " bytes, shorter than the 8-byte header length");
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | (unsigned char)bytes[i];
  if (header_len > kMaxHeader)
    fail("header length " + std::to_string(header_len) + " exceeds the 100 MiB limit");
  if (8 + header_len > file_size)
    fail("header length " + std::to_string(header_len) + " runs past the end of the " +
         std::to_string(file_size) + "-byte file (truncated?)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(bytes + 8, bytes + 8 + header_len);
  } catch (const std::exception& e) {
    fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) fail("header must be a JSON object");
  const std::uint64_t data_size = file_size - 8 - header_len;
  for (auto& [name, entry] : j.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail("__metadata__ must be an object of strings");
      for (auto& [k, v] : entry.items()) {
        if (!v.is_string()) fail("__metadata__." + k + " must be a string");
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "': ";
    if (!entry.is_object()) fail(where + "entry must be an object");
    if (!entry.contains("dtype") || !entry["dtype"].is_string()) fail(where + "missing dtype");
    if (!entry.contains("shape") || !entry["shape"].is_array()) fail(where + "missing shape");
    if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() ||
        entry["data_offsets"].size() != 2)
      fail(where + "data_offsets must be [begin, end]");
    TensorEntry t;
    t.name = name;
    t.dtype = entry["dtype"].get<std::string>();
    int elem = dtype_size(t.dtype);
    if (!elem) fail(where + "unknown dtype '" + t.dtype + "'");
    // The non-zero dimensions multiply to at most 2^62, so numel() cannot overflow whatever
    // the order of its factors (a zero among them makes any others possible).
    std::uint64_t nonzero_product = 1;
    for (auto& d : entry["shape"]) {
      if (!d.is_number_unsigned()) fail(where + "shape entries must be non-negative integers");
      const std::uint64_t v = d.get<std::uint64_t>();
      if (v > 0 && nonzero_product > kMaxElements / v)
        fail(where + "shape " + entry["shape"].dump() + " has more than 2^62 elements");
      if (v > 0) nonzero_product *= v;
      t.shape.push_back((long)v);
    }
    for (int k = 0; k < 2; ++k)
      if (!entry["data_offsets"][k].is_number_unsigned())
        fail(where + "data_offsets must be non-negative integers");
    t.begin = entry["data_offsets"][0].get<std::uint64_t>();
    t.end = entry["data_offsets"][1].get<std::uint64_t>();
    if (t.end < t.begin) fail(where + "data_offsets end < begin");
    if (t.end > data_size)
      fail(where + "data_offsets end " + std::to_string(t.end) + " is past the data section (" +
           std::to_string(data_size) + " bytes; truncated file?)");
    const std::uint64_t numel = (std::uint64_t)t.numel(), span = t.end - t.begin;
    if (numel > span / elem || numel * elem != span)
      fail(where + "shape and dtype need " +
           (numel > UINT64_MAX / elem ? "more than 2^64" : std::to_string(numel * elem)) +
           " bytes but data_offsets span " + std::to_string(span));
    tensors_.push_back(std::move(t));
  }
  std::vector<TensorEntry> sorted = tensors_;
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.begin < b.begin; });
  std::uint64_t cursor = 0;
  for (const TensorEntry& t : sorted) {
    if (t.begin != cursor)
      fail("tensor '" + t.name + "' starts at " + std::to_string(t.begin) + ", expected " +
           std::to_string(cursor) +
           " (tensors must tile the data section without gaps or overlap)");
    cursor = t.end;
  }
  if (cursor != data_size)
    fail("tensors cover " + std::to_string(cursor) + " of " + std::to_string(data_size) +
         " data bytes");
  data_ = bytes + 8 + header_len;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(const_cast<char*>(map_), map_size_);
}

const TensorEntry* SafetensorsFile::find(const std::string& name) const {
  for (const TensorEntry& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::vector<float> SafetensorsFile::read_float(const TensorEntry& t) const {
  std::vector<float> out(t.numel());
  copy_float(t, out.data());
  return out;
}

void SafetensorsFile::copy_float(const TensorEntry& t, float* dst) const {
  copy_float_range(t, 0, t.numel(), dst);
}

void SafetensorsFile::copy_float_range(const TensorEntry& t, long first, long count,
                                       float* dst) const {
  if (first < 0 || count < 0 || first > t.numel() - count)
    throw std::out_of_range(path_ + ": tensor '" + t.name + "' has " + std::to_string(t.numel()) +
                            " elements, not [" + std::to_string(first) + ", " +
                            std::to_string(first + count) + ")");
  const long n = count;
  const char* src = data_ + t.begin + (size_t)first * (t.dtype == "F32" ? 4 : 2);
  if (t.dtype == "F32") {
    std::memcpy(dst, src, (size_t)n * 4);
  } else if (t.dtype == "F16" || t.dtype == "BF16") {
    for (long i = 0; i < n; ++i) {
      std::uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      if (t.dtype == "F16") {
        dst[i] = half_to_float(h);
      } else {
        std::uint32_t bits = (std::uint32_t)h << 16;
        std::memcpy(&dst[i], &bits, 4);
      }
    }
  } else {
    throw FormatError(path_ + ": tensor '" + t.name + "' has dtype " + t.dtype +
                      ", expected F32, F16 or BF16");
  }
}

const char* safetensors_dtype_name(StoredDtype d) {
  return d == StoredDtype::kBF16 ? "BF16" : "F32";
}

namespace {

long element_count(const std::vector<long>& shape) {
  long n = 1;
  for (long d : shape) n *= d;
  return n;
}

long element_bytes(StoredDtype d) {
  return d == StoredDtype::kBF16 ? 2 : 4;
}

// A tensor's bytes as stored: F32 as they are, BF16 rounded in blocks (no copy of the
// whole tensor).
void put_tensor(const TensorToWrite& t, const std::function<void(const char*, size_t)>& put) {
  const long n = element_count(t.shape);
  if (t.dtype == StoredDtype::kF32) {
    // In pieces that stay in the last-level cache between the file's copy of them and the
    // observer's checksum: one pass over memory instead of two.
    constexpr size_t kPiece = 2u << 20;
    const char* bytes = reinterpret_cast<const char*>(t.data);
    for (size_t at = 0, size = (size_t)n * 4; at < size; at += kPiece)
      put(bytes + at, std::min(kPiece, size - at));
    return;
  }
  constexpr long kBlock = 1 << 16;
  std::vector<std::uint8_t> block((size_t)std::min(n, kBlock) * 2);
  for (long i = 0; i < n; i += kBlock) {
    const long m = std::min(kBlock, n - i);
    for (long k = 0; k < m; ++k) {  // little-endian, as the format stores every dtype
      const kernels::bf16_t b = kernels::bf16_from_float(t.data[i + k]);
      block[2 * k] = (std::uint8_t)(b & 0xff), block[2 * k + 1] = (std::uint8_t)(b >> 8);
    }
    put(reinterpret_cast<const char*>(block.data()), (size_t)m * 2);
  }
}

}  // namespace

SafetensorsLayout safetensors_layout(const std::vector<TensorToWrite>& tensors,
                                     const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<std::uint64_t> relative;
  std::uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    const std::uint64_t bytes = (std::uint64_t)element_count(t.shape) * element_bytes(t.dtype);
    header[t.name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    relative.push_back(offset);
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // keep the data section 8-byte aligned
  SafetensorsLayout layout;
  layout.header.assign(8, '\0');
  std::uint64_t len = json.size();
  for (int i = 0; i < 8; ++i) layout.header[i] = (char)((len >> (8 * i)) & 0xff);
  layout.header += json;
  for (std::uint64_t r : relative) layout.offsets.push_back(layout.header.size() + r);
  layout.file_bytes = layout.header.size() + offset;
  return layout;
}

size_t write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata,
                         const std::function<void(const char*, size_t)>& observe) {
  const SafetensorsLayout layout = safetensors_layout(tensors, metadata);
  // Streamed tensor by tensor (no copy of the whole file in memory), past the page cache (a
  // checkpoint is written once and not read back by this process), then flushed and renamed.
  AtomicFile file(path, WriteMode::kDirect);
  auto put = [&](const char* data, size_t size) {
    file.write(data, size);
    if (observe) observe(data, size);
  };
  put(layout.header.data(), layout.header.size());
  for (const TensorToWrite& t : tensors) put_tensor(t, put);
  file.commit();
  return layout.file_bytes;
}

}  // namespace trident::io
