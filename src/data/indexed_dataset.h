#pragma once
// Megatron-LM's indexed dataset: `<prefix>.bin` holds the token arrays of every sequence
// back to back; `<prefix>.idx` (little-endian) holds
//   magic "MMIDIDX\0\0" | u64 version = 1 | u8 dtype code | u64 N sequences |
//   u64 D document-index entries | i32 sizes[N] | i64 byte pointers[N] | i64 doc_idx[D]
// Files written here are read by Megatron and vice versa.
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace trident::data {

class DatasetError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class TokenDtype : std::uint8_t {
  kUint8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kFloat32 = 7,
  kUint16 = 8
};
int dtype_bytes(TokenDtype d);
// uint16 when every id fits (vocab < 65500, Megatron's rule), int32 otherwise.
TokenDtype dtype_for_vocab(int vocab_size);

// Streams documents to <prefix>.bin.tmp / .idx.tmp; finish() renames both into place.
// Destroying an unfinished builder deletes the temporary files.
class IndexedDatasetBuilder {
 public:
  IndexedDatasetBuilder(const std::string& prefix, TokenDtype dtype);
  ~IndexedDatasetBuilder();
  // One document = one sequence (no sentence splitting).
  void add_document(std::span<const int> tokens);
  void finish();
  long documents() const { return (long)sizes_.size(); }
  long tokens() const { return tokens_; }

 private:
  std::string prefix_;
  TokenDtype dtype_;
  std::FILE* bin_ = nullptr;
  std::vector<std::int32_t> sizes_;
  long tokens_ = 0;
  bool finished_ = false;
  std::vector<char> buffer_;
};

// A `.idx` file's contents, checked: no negative size, byte pointers back to back from 0,
// a document index that starts at 0, never decreases and ends at the sequence count.
struct IndexContents {
  TokenDtype dtype = TokenDtype::kUint16;
  std::vector<std::int32_t> sizes;
  std::vector<std::int64_t> pointers, doc_idx;
  std::uint64_t bin_bytes = 0;  // the size of the `.bin` these pointers describe
};
// Parses the bytes of a `.idx` file; throws DatasetError naming `path` and the problem.
IndexContents parse_index(std::span<const char> bytes, const std::string& path);

// Memory-mapped reader; the constructor validates everything before returning.
class IndexedDataset {
 public:
  explicit IndexedDataset(const std::string& prefix);
  ~IndexedDataset();
  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;

  long sequences() const { return (long)sizes_.size(); }
  std::int32_t size(long i) const { return sizes_[i]; }
  const std::vector<std::int32_t>& sizes() const { return sizes_; }
  const std::vector<std::int64_t>& document_index() const { return doc_idx_; }
  TokenDtype dtype() const { return dtype_; }
  // Tokens [offset, offset + count) of sequence i, appended to out.
  void read(long i, long offset, long count, std::vector<int>* out) const;
  const std::string& prefix() const { return prefix_; }

 private:
  std::string prefix_;
  TokenDtype dtype_;
  std::vector<std::int32_t> sizes_;
  std::vector<std::int64_t> pointers_, doc_idx_;
  const unsigned char* bin_ = nullptr;
  size_t bin_size_ = 0;
};

}  // namespace trident::data
