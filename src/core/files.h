#pragma once
// Files that survive crashes, and the error every reader of outside input throws.
// A file is written under path + ".tmp", fsynced, renamed over path, and its directory is
// fsynced, so a reader sees the old file or the whole new one, also after a power loss.
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

namespace trident {

// Bad outside input (a file, a flag's value, a request): the message names the input and
// the rule it breaks. Commands turn it into exit code 2.
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How a file's bytes reach the disk. kPageCache: plain writes. kDirect: O_DIRECT from an
// aligned staging buffer, for large files written once (checkpoints, exported weights). On
// these VMs a buffered write of a 400 MB checkpoint spent up to ~1.2 s of system time on
// page-cache pages (allocation, reclaim, write-back) against ~0.03 s for the same bytes
// written direct, and that time is taken from the cores training runs on while an
// asynchronous save writes. A file system that refuses O_DIRECT (tmpfs, some FUSE) gets
// plain writes instead.
enum class WriteMode { kPageCache, kDirect };

// A file being written under path + ".tmp"; commit() makes it path, durably. Destroyed
// without commit(), the temporary is removed and path is untouched.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path, WriteMode mode = WriteMode::kPageCache);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(const char* data, std::size_t size);
  void commit();
  // Whether the bytes bypass the page cache (false for kPageCache and after a fallback).
  bool direct() const { return direct_; }

 private:
  void write_at(const char* data, std::size_t size, std::size_t offset);
  void flush_staging();
  void fall_back_to_page_cache();

  std::string path_, tmp_;
  int fd_ = -1;
  bool direct_ = false;
  std::unique_ptr<char, void (*)(void*)> staging_{nullptr, std::free};
  std::size_t staged_ = 0;   // bytes in staging_ not yet written
  std::size_t written_ = 0;  // bytes of the file written so far
};

// One file written by several processes at once, each its own byte ranges (a checkpoint
// sharded over data parallelism). Opened for writing, created when missing and never
// truncated, so the writers may open it in any order. A piece's whole 4 KiB blocks go out
// O_DIRECT from an aligned staging buffer (as AtomicFile's, and for the same reason); its
// partial first and last blocks, which a neighbouring piece of another writer may share, go
// through the page cache, where both writers' bytes meet in one page. Nothing is renamed: the
// caller writes a temporary name and renames it once every writer has synced.
class SharedFile {
 public:
  explicit SharedFile(const std::string& path);
  ~SharedFile();
  SharedFile(const SharedFile&) = delete;
  SharedFile& operator=(const SharedFile&) = delete;
  void write_at(const char* data, std::size_t size, std::size_t offset);
  // Sets the file's length (the writer of the last bytes need not be the last to write).
  void resize(std::size_t bytes);
  // This process's pieces durable, then the page cache's copy of them dropped (written once,
  // read back at most once: the pages would only crowd out the training's memory).
  void sync_and_close();

 private:
  void write_buffered(const char* data, std::size_t size, std::size_t offset);
  void write_direct(const char* data, std::size_t size, std::size_t offset);

  std::string path_;
  int fd_ = -1;
  int direct_fd_ = -1;  // -1: the file system refuses O_DIRECT, everything is buffered
  std::unique_ptr<char, void (*)(void*)> staging_{nullptr, std::free};
};

// Writes bytes to path atomically (temporary name, fsync, rename, fsync of the directory).
void write_file_atomically(const std::string& path, const std::string& bytes);

// Output paths checked at start-up, so that a run does not find out at its end that it
// cannot write what it made: the directory (a file's parent directory) is created, a probe
// file written in it and removed; the directories the check made are removed again for a
// directory (its writers make it) and kept for a file's parent (its writer does not make
// it); an existing file must be writable, and a file path must not name a directory. Throws
// FormatError naming the flag, the path and the reason. Not for several processes on one path at
// once.
void check_output_directory(const std::string& dir, const std::string& flag);
void check_output_file(const std::string& path, const std::string& flag);

// Flushes a directory's entries (created, renamed, removed names) to disk: a rename is only
// durable once its parent directory is fsynced.
void fsync_directory(const std::string& dir);

// Renames from -> to, then fsyncs the parent directory of both.
void rename_durably(const std::string& from, const std::string& to);

}  // namespace trident
