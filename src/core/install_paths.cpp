#include "core/install_paths.h"

#include <system_error>

namespace trident {

namespace fs = std::filesystem;

std::string installed_path_for(const fs::path& binary, const std::string& relative) {
  std::error_code ec;
  const fs::path folder = binary.parent_path();
  for (const fs::path& root : {folder.parent_path(), folder}) {
    if (root.empty()) continue;
    const fs::path candidate = (root / relative).lexically_normal();
    if (fs::exists(candidate, ec)) return candidate.string();
  }
  return relative;
}

std::string installed_path(const std::string& relative) {
  std::error_code ec;
  const fs::path binary = fs::read_symlink("/proc/self/exe", ec);
  return ec ? relative : installed_path_for(binary, relative);
}

}  // namespace trident
