#include "core/files.h"

#include <fcntl.h>
#include <unistd.h>

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

AtomicFile::AtomicFile(const std::string& path) : path_(path), tmp_(path + ".tmp") {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot write " + tmp_ + ": " + std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(tmp_.c_str());
}

void AtomicFile::write(const char* data, std::size_t size) {
  for (std::size_t done = 0; done < size;) {
    ssize_t n = ::write(fd_, data + done, size - done);
    if (n <= 0) throw std::runtime_error("write to " + tmp_ + " failed: " + std::strerror(errno));
    done += (std::size_t)n;
  }
}

void AtomicFile::commit() {
  const bool synced = ::fsync(fd_) == 0;
  const int sync_errno = errno;
  ::close(fd_);
  fd_ = -1;
  if (!synced) {
    ::unlink(tmp_.c_str());
    throw std::runtime_error("fsync of " + tmp_ + " failed: " + std::strerror(sync_errno));
  }
  rename_durably(tmp_, path_);
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  AtomicFile file(path);
  file.write(bytes.data(), bytes.size());
  file.commit();
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
