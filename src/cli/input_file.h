#pragma once
// `--input -`: a command's input file, or standard input spooled to a temporary file, so
// every reader (one that reopens its input, maps it, or splits it among threads) sees a
// plain file. The temporary is removed when the InputFile is destroyed.
#include <string>

namespace trident::cli {

class InputFile {
 public:
  // "-" reads standard input to its end now; any other path is used as it is.
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  // The file to read.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool temporary_ = false;
};

}  // namespace trident::cli
