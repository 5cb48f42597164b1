#include "core/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace trident {

namespace {

// The parent directory of a path ("." for a bare name).
std::string parent_of(const std::string& path) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace

// O_DIRECT wants the buffer, the length and the file offset aligned to the device's logical
// block; 4 KiB covers the devices in use. The staging buffer is a whole number of blocks.
constexpr std::size_t kDirectAlignment = 4096;
constexpr std::size_t kStagingBytes = 8u << 20;

AtomicFile::AtomicFile(const std::string& path, WriteMode mode) : path_(path), tmp_(path + ".tmp") {
  const int flags = O_WRONLY | O_CREAT | O_TRUNC;
  if (mode == WriteMode::kDirect) {
    staging_.reset(static_cast<char*>(std::aligned_alloc(kDirectAlignment, kStagingBytes)));
    fd_ = staging_ ? ::open(tmp_.c_str(), flags | O_DIRECT, 0644) : -1;
    direct_ = fd_ >= 0;
  }
  if (fd_ < 0) fd_ = ::open(tmp_.c_str(), flags, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot write " + tmp_ + ": " + std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(tmp_.c_str());
}

void AtomicFile::write_at(const char* data, std::size_t size, std::size_t offset) {
  for (std::size_t done = 0; done < size;) {
    ssize_t n = ::pwrite(fd_, data + done, size - done, (off_t)(offset + done));
    if (n <= 0) throw std::runtime_error("write to " + tmp_ + " failed: " + std::strerror(errno));
    done += (std::size_t)n;
  }
}

void AtomicFile::write(const char* data, std::size_t size) {
  if (!direct_) {
    write_at(data, size, written_);
    written_ += size;
    return;
  }
  while (size > 0) {
    const std::size_t n = std::min(size, kStagingBytes - staged_);
    std::memcpy(staging_.get() + staged_, data, n);
    staged_ += n, data += n, size -= n;
    if (staged_ == kStagingBytes) flush_staging();
  }
}

// Writes the staged bytes, the last block padded with zeros (commit() truncates the padding).
// Only the file's last flush can be short of a whole buffer, so every offset stays aligned.
void AtomicFile::flush_staging() {
  const std::size_t padded = (staged_ + kDirectAlignment - 1) / kDirectAlignment * kDirectAlignment;
  std::memset(staging_.get() + staged_, 0, padded - staged_);
  const ssize_t n = ::pwrite(fd_, staging_.get(), padded, (off_t)written_);
  if (n < 0 && errno == EINVAL && written_ == 0) return fall_back_to_page_cache();
  if (n < 0) throw std::runtime_error("write to " + tmp_ + " failed: " + std::strerror(errno));
  // A short direct write (a full disk) is finished through the same loop, aligned or refused.
  write_at(staging_.get() + n, padded - (std::size_t)n, written_ + (std::size_t)n);
  written_ += staged_;
  staged_ = 0;
}

// The file system opened the file O_DIRECT but refuses direct writes: nothing is written yet,
// so the staged bytes go out through the page cache and so does the rest.
void AtomicFile::fall_back_to_page_cache() {
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_DIRECT) != 0)
    throw std::runtime_error("write to " + tmp_ + " failed: " + std::strerror(errno));
  direct_ = false;
  write_at(staging_.get(), staged_, 0);
  written_ = staged_;
  staged_ = 0;
}

void AtomicFile::commit() {
  if (direct_ && staged_ > 0) flush_staging();
  // The direct writes padded the last block: cut the file back to the bytes written.
  bool synced = ::ftruncate(fd_, (off_t)written_) == 0 && ::fsync(fd_) == 0;
  const int sync_errno = errno;
  ::close(fd_);
  fd_ = -1;
  if (!synced) {
    ::unlink(tmp_.c_str());
    throw std::runtime_error("fsync of " + tmp_ + " failed: " + std::strerror(sync_errno));
  }
  rename_durably(tmp_, path_);
}

SharedFile::SharedFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  staging_.reset(static_cast<char*>(std::aligned_alloc(kDirectAlignment, kStagingBytes)));
  if (staging_) direct_fd_ = ::open(path.c_str(), O_WRONLY | O_DIRECT);
}

SharedFile::~SharedFile() {
  if (direct_fd_ >= 0) ::close(direct_fd_);
  if (fd_ >= 0) ::close(fd_);
}

void SharedFile::write_buffered(const char* data, std::size_t size, std::size_t offset) {
  for (std::size_t done = 0; done < size;) {
    ssize_t n = ::pwrite(fd_, data + done, size - done, (off_t)(offset + done));
    if (n <= 0) throw std::runtime_error("write to " + path_ + " failed: " + std::strerror(errno));
    done += (std::size_t)n;
  }
}

// Whole blocks: offset and size are multiples of kDirectAlignment.
void SharedFile::write_direct(const char* data, std::size_t size, std::size_t offset) {
  for (std::size_t done = 0; done < size;) {
    const std::size_t n = std::min(kStagingBytes, size - done);
    std::memcpy(staging_.get(), data + done, n);
    const ssize_t w = ::pwrite(direct_fd_, staging_.get(), n, (off_t)(offset + done));
    if (w < 0 && errno == EINVAL) {  // opened O_DIRECT, but direct writes are refused
      ::close(direct_fd_);
      direct_fd_ = -1;
      return write_buffered(data + done, size - done, offset + done);
    }
    if (w < 0) throw std::runtime_error("write to " + path_ + " failed: " + std::strerror(errno));
    // A short direct write (a full disk) is finished through the page cache, or refused.
    write_buffered(staging_.get() + w, n - (std::size_t)w, offset + done + (std::size_t)w);
    done += n;
  }
}

void SharedFile::write_at(const char* data, std::size_t size, std::size_t offset) {
  const std::size_t end = offset + size;
  const std::size_t first = (offset + kDirectAlignment - 1) / kDirectAlignment * kDirectAlignment;
  const std::size_t last = end / kDirectAlignment * kDirectAlignment;
  if (direct_fd_ < 0 || first >= last) return write_buffered(data, size, offset);
  write_buffered(data, first - offset, offset);
  write_direct(data + (first - offset), last - first, first);
  write_buffered(data + (last - offset), end - last, last);
}

void SharedFile::resize(std::size_t bytes) {
  if (::ftruncate(fd_, (off_t)bytes) != 0)
    throw std::runtime_error("cannot size " + path_ + ": " + std::strerror(errno));
}

void SharedFile::sync_and_close() {
  const bool synced = ::fsync(fd_) == 0;
  const int sync_errno = errno;
  if (synced) ::posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED);
  if (direct_fd_ >= 0) ::close(direct_fd_);
  ::close(fd_);
  fd_ = direct_fd_ = -1;
  if (!synced)
    throw std::runtime_error("fsync of " + path_ + " failed: " + std::strerror(sync_errno));
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  AtomicFile file(path);
  file.write(bytes.data(), bytes.size());
  file.commit();
}

namespace {

// check_output_directory's work; with keep_created the directories it makes stay (a file's
// writer writes into its parent directory without creating it).
void probe_directory(const std::string& dir, const std::string& flag, bool keep_created) {
  const std::string where = flag + " " + dir + ": ";
  // The outermost directory this check creates: removed again, so a refused run leaves
  // nothing behind (the writers create their directories when they write).
  std::filesystem::path created;
  for (std::filesystem::path p = std::filesystem::absolute(dir);
       !p.empty() && !std::filesystem::exists(p); p = p.parent_path()) {
    created = p;
    if (p == p.parent_path()) break;
  }
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw FormatError(where + "cannot create the directory (" + error.message() + ")");
  if (!std::filesystem::is_directory(dir)) throw FormatError(where + "not a directory");
  const std::string probe =
      (std::filesystem::path(dir) / (".trident-write-probe-" + std::to_string(::getpid())))
          .string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int open_errno = errno;
  if (fd >= 0) ::close(fd), ::unlink(probe.c_str());
  if (!created.empty() && !keep_created) std::filesystem::remove_all(created, error);
  if (fd < 0)
    throw FormatError(where + "cannot write in the directory (" + std::strerror(open_errno) + ")");
}

}  // namespace

void check_output_directory(const std::string& dir, const std::string& flag) {
  probe_directory(dir, flag, false);
}

void check_output_file(const std::string& path, const std::string& flag) {
  if (std::filesystem::is_directory(path))
    throw FormatError(flag + " " + path + ": is a directory, not a file");
  probe_directory(parent_of(path), flag, true);
  if (std::filesystem::exists(path) && ::access(path.c_str(), W_OK) != 0)
    throw FormatError(flag + " " + path + ": cannot write the file (" + std::strerror(errno) + ")");
}

void fsync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    throw std::runtime_error("cannot open directory " + dir + ": " + std::strerror(errno));
  // Some file systems cannot sync a directory (EINVAL): nothing more can be done there.
  const bool synced = ::fsync(fd) == 0 || errno == EINVAL;
  const int sync_errno = errno;
  ::close(fd);
  if (!synced)
    throw std::runtime_error("fsync of " + dir + " failed: " + std::strerror(sync_errno));
}

void rename_durably(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    throw std::runtime_error("cannot rename " + from + " to " + to + ": " + std::strerror(errno));
  fsync_directory(parent_of(to));
  if (parent_of(from) != parent_of(to)) fsync_directory(parent_of(from));
}

}  // namespace trident
