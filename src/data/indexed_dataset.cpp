#include "data/indexed_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace trident::data {

namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
constexpr std::uint64_t kVersion = 1;
constexpr size_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void write_all(const std::string& path, const std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw DatasetError(path + ": cannot create: " + std::strerror(errno));
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = std::fflush(f) == 0 && ok;
  ok = ::fsync(fileno(f)) == 0 && ok;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) throw DatasetError(path + ": write failed: " + std::strerror(errno));
}

}  // namespace

int dtype_bytes(TokenDtype d) {
  switch (d) {
    case TokenDtype::kUint8:
    case TokenDtype::kInt8:
      return 1;
    case TokenDtype::kInt16:
    case TokenDtype::kUint16:
      return 2;
    case TokenDtype::kInt32:
    case TokenDtype::kFloat32:
      return 4;
    case TokenDtype::kInt64:
    case TokenDtype::kFloat64:
      return 8;
  }
  return 0;
}

TokenDtype dtype_for_vocab(int vocab_size) {
  return vocab_size < 65500 ? TokenDtype::kUint16 : TokenDtype::kInt32;
}

IndexedDatasetBuilder::IndexedDatasetBuilder(const std::string& prefix, TokenDtype dtype)
    : prefix_(prefix), dtype_(dtype) {
  if (dtype != TokenDtype::kUint16 && dtype != TokenDtype::kInt32 && dtype != TokenDtype::kUint8)
    throw DatasetError("token dtype must be uint16 or int32 (uint8 for loss masks)");
  std::string tmp = prefix + ".bin.tmp";
  bin_ = std::fopen(tmp.c_str(), "wb");
  if (!bin_) throw DatasetError(tmp + ": cannot create: " + std::strerror(errno));
}

IndexedDatasetBuilder::~IndexedDatasetBuilder() {
  if (bin_) std::fclose(bin_);
  if (!finished_) {
    std::remove((prefix_ + ".bin.tmp").c_str());
    std::remove((prefix_ + ".idx.tmp").c_str());
  }
}

void IndexedDatasetBuilder::add_document(std::span<const int> tokens) {
  const int elem = dtype_bytes(dtype_);
  buffer_.resize(tokens.size() * elem);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (dtype_ == TokenDtype::kUint8) {
      if (tokens[i] < 0 || tokens[i] > 255) throw DatasetError("a value does not fit uint8");
      buffer_[i] = (char)tokens[i];
    } else if (dtype_ == TokenDtype::kUint16) {
      if (tokens[i] < 0 || tokens[i] > 65535) throw DatasetError("token id does not fit uint16");
      std::uint16_t v = (std::uint16_t)tokens[i];
      std::memcpy(buffer_.data() + i * 2, &v, 2);
    } else {
      std::int32_t v = tokens[i];
      std::memcpy(buffer_.data() + i * 4, &v, 4);
    }
  }
  if (std::fwrite(buffer_.data(), 1, buffer_.size(), bin_) != buffer_.size())
    throw DatasetError(prefix_ + ".bin.tmp: write failed: " + std::strerror(errno));
  sizes_.push_back((std::int32_t)tokens.size());
  tokens_ += (long)tokens.size();
}

void IndexedDatasetBuilder::finish() {
  bool ok = std::fflush(bin_) == 0 && ::fsync(fileno(bin_)) == 0;
  ok = std::fclose(bin_) == 0 && ok;
  bin_ = nullptr;
  if (!ok) throw DatasetError(prefix_ + ".bin.tmp: write failed: " + std::strerror(errno));
  std::string idx(kMagic, 9);
  put<std::uint64_t>(idx, kVersion);
  put<std::uint8_t>(idx, (std::uint8_t)dtype_);
  put<std::uint64_t>(idx, sizes_.size());
  put<std::uint64_t>(idx, sizes_.size() + 1);
  for (std::int32_t s : sizes_) put<std::int32_t>(idx, s);
  std::int64_t pointer = 0;
  for (std::int32_t s : sizes_) {
    put<std::int64_t>(idx, pointer);
    pointer += (std::int64_t)s * dtype_bytes(dtype_);
  }
  for (size_t d = 0; d <= sizes_.size(); ++d) put<std::int64_t>(idx, (std::int64_t)d);
  write_all(prefix_ + ".idx.tmp", idx);
  // The .idx goes last: a reader never sees an index pointing into a missing .bin.
  if (std::rename((prefix_ + ".bin.tmp").c_str(), (prefix_ + ".bin").c_str()) != 0 ||
      std::rename((prefix_ + ".idx.tmp").c_str(), (prefix_ + ".idx").c_str()) != 0)
    throw DatasetError(prefix_ + ": cannot rename the finished files: " + std::strerror(errno));
  finished_ = true;
}

IndexContents parse_index(std::span<const char> idx, const std::string& idx_path) {
  auto fail = [&](const std::string& why) { throw DatasetError(idx_path + ": " + why); };
  if (idx.size() < kHeaderBytes)
    fail("truncated header (" + std::to_string(idx.size()) + " bytes)");
  if (std::memcmp(idx.data(), kMagic, 9) != 0) fail("bad magic: not a Megatron MMIDIDX index");
  std::uint64_t version, n, d;
  std::uint8_t code;
  std::memcpy(&version, idx.data() + 9, 8);
  std::memcpy(&code, idx.data() + 17, 1);
  std::memcpy(&n, idx.data() + 18, 8);
  std::memcpy(&d, idx.data() + 26, 8);
  if (version != kVersion) fail("version " + std::to_string(version) + ", expected 1");
  if (code != 1 && code != 2 && code != 3 && code != 4 && code != 5 && code != 8)
    fail("dtype code " + std::to_string(code) + " is not an integer token type");
  IndexContents c;
  c.dtype = (TokenDtype)code;
  const std::uint64_t expect = kHeaderBytes + n * 4 + n * 8 + d * 8;
  if (n > (1ull << 40) || d > (1ull << 40) || idx.size() != expect)
    fail("size " + std::to_string(idx.size()) + " bytes, but the header (" + std::to_string(n) +
         " sequences, " + std::to_string(d) + " document entries) needs " + std::to_string(expect) +
         " (truncated or corrupt)");
  c.sizes.resize(n);
  c.pointers.resize(n);
  c.doc_idx.resize(d);
  const char* p = idx.data() + kHeaderBytes;
  // An empty vector's data() may be null, which memcpy must not get even for 0 bytes.
  if (n > 0) {
    std::memcpy(c.sizes.data(), p, n * 4);
    std::memcpy(c.pointers.data(), p + n * 4, n * 8);
  }
  if (d > 0) std::memcpy(c.doc_idx.data(), p + n * 12, d * 8);
  const std::int64_t elem = dtype_bytes(c.dtype);
  std::int64_t expected_pointer = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    if (c.sizes[i] < 0) fail("sequence " + std::to_string(i) + " has negative size");
    if (c.pointers[i] != expected_pointer)
      fail("pointer of sequence " + std::to_string(i) + " is " + std::to_string(c.pointers[i]) +
           ", expected " + std::to_string(expected_pointer));
    expected_pointer += c.sizes[i] * elem;
  }
  c.bin_bytes = (std::uint64_t)expected_pointer;
  if (d == 0 || c.doc_idx[0] != 0 || c.doc_idx[d - 1] != (std::int64_t)n)
    fail("document index must start at 0 and end at the sequence count");
  for (std::uint64_t i = 1; i < d; ++i)
    if (c.doc_idx[i] < c.doc_idx[i - 1]) fail("document index is not sorted");
  return c;
}

IndexedDataset::IndexedDataset(const std::string& prefix) : prefix_(prefix) {
  const std::string idx_path = prefix + ".idx", bin_path = prefix + ".bin";
  auto fail = [&](const std::string& path, const std::string& why) {
    throw DatasetError(path + ": " + why);
  };
  std::ifstream in(idx_path, std::ios::binary);
  if (!in) fail(idx_path, "cannot open (is --data-path a prefix of a .bin/.idx pair?)");
  std::vector<char> idx((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  IndexContents contents = parse_index(idx, idx_path);
  dtype_ = contents.dtype;
  sizes_ = std::move(contents.sizes);
  pointers_ = std::move(contents.pointers);
  doc_idx_ = std::move(contents.doc_idx);

  int fd = ::open(bin_path.c_str(), O_RDONLY);
  if (fd < 0) fail(bin_path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  bin_size_ = (size_t)st.st_size;
  if (contents.bin_bytes != bin_size_)
    ::close(fd),
        fail(bin_path, "size " + std::to_string(bin_size_) + " bytes, the index describes " +
                           std::to_string(contents.bin_bytes) + " (truncated or mismatched pair)");
  if (bin_size_ > 0) {
    void* m = ::mmap(nullptr, bin_size_, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
      ::close(fd), fail(bin_path, std::string("mmap failed: ") + std::strerror(errno));
    bin_ = static_cast<const unsigned char*>(m);
  }
  ::close(fd);
}

IndexedDataset::~IndexedDataset() {
  if (bin_) ::munmap(const_cast<unsigned char*>(bin_), bin_size_);
}

void IndexedDataset::read(long i, long offset, long count, std::vector<int>* out) const {
  if (offset < 0 || count < 0 || offset + count > sizes_[i])
    throw std::out_of_range("read past the end of sequence " + std::to_string(i));
  const unsigned char* base = bin_ + pointers_[i];
  for (long k = offset; k < offset + count; ++k) {
    switch (dtype_) {
      case TokenDtype::kUint16: {
        std::uint16_t v;
        std::memcpy(&v, base + 2 * k, 2);
        out->push_back(v);
        break;
      }
      case TokenDtype::kInt32: {
        std::int32_t v;
        std::memcpy(&v, base + 4 * k, 4);
        out->push_back(v);
        break;
      }
      case TokenDtype::kUint8:
        out->push_back(base[k]);
        break;
      case TokenDtype::kInt8:
        out->push_back((std::int8_t)base[k]);
        break;
      case TokenDtype::kInt16: {
        std::int16_t v;
        std::memcpy(&v, base + 2 * k, 2);
        out->push_back(v);
        break;
      }
      default: {
        std::int64_t v;
        std::memcpy(&v, base + 8 * k, 8);
        out->push_back((int)v);
      }
    }
  }
}

}  // namespace trident::data
