#pragma once
// Files that survive crashes, and the error every reader of outside input throws.
// A file is written under path + ".tmp", fsynced, renamed over path, and its directory is
// fsynced, so a reader sees the old file or the whole new one, also after a power loss.
#include <cstddef>
#include <stdexcept>
#include <string>

namespace trident {

// Bad outside input (a file, a flag's value, a request): the message names the input and
// the rule it breaks. Commands turn it into exit code 2.
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A file being written under path + ".tmp"; commit() makes it path, durably. Destroyed
// without commit(), the temporary is removed and path is untouched.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(const char* data, std::size_t size);
  void commit();

 private:
  std::string path_, tmp_;
  int fd_ = -1;
};

// Writes bytes to path atomically (temporary name, fsync, rename, fsync of the directory).
void write_file_atomically(const std::string& path, const std::string& bytes);

// Flushes a directory's entries (created, renamed, removed names) to disk: a rename is only
// durable once its parent directory is fsynced.
void fsync_directory(const std::string& dir);

// Renames from -> to, then fsyncs the parent directory of both.
void rename_durably(const std::string& from, const std::string& to);

}  // namespace trident
