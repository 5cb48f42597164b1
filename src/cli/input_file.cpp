#include "cli/input_file.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace trident::cli {

InputFile::InputFile(const std::string& path) : path_(path) {
  if (path != "-") return;
  const char* tmpdir = std::getenv("TMPDIR");
  std::string name = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/trident-stdin-XXXXXX";
  const int fd = mkstemp(name.data());
  if (fd < 0) throw std::runtime_error("--input -: cannot create a temporary file in " + name);
  path_ = name;
  temporary_ = true;
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, stdin)) > 0;)
    for (size_t done = 0; done < n;) {
      const ssize_t w = ::write(fd, buf + done, n - done);
      if (w < 0) {
        ::close(fd);
        std::remove(name.c_str());
        throw std::runtime_error("--input -: cannot write " + name);
      }
      done += (size_t)w;
    }
  ::close(fd);
}

InputFile::~InputFile() {
  std::error_code ignored;
  if (temporary_) std::filesystem::remove(path_, ignored);
}

}  // namespace trident::cli
