#pragma once
// Where the files that come with trident (data/gpt2's vocabulary, data/tasks) are found by
// default: beside the installation — the repository whose build/ holds the binary — so
// `cd /tmp && /path/to/build/trident generate ...` finds them, not the working directory.
#include <filesystem>
#include <string>

namespace trident {

// `relative` (e.g. "data/gpt2/encoder.json") under the first of these that holds it: the
// folder above the binary's (build/trident -> the repository), the binary's own folder,
// the working directory. When none holds it, `relative` itself (messages then name it).
std::string installed_path(const std::string& relative);

// The same for a binary at `binary` (installed_path uses /proc/self/exe).
std::string installed_path_for(const std::filesystem::path& binary, const std::string& relative);

}  // namespace trident
