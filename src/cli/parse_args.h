#pragma once
// Shared by every subcommand: parse argv with CLI11, printing help or the parse error.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace trident::cli {

// Returns true when the command should run; otherwise *exit_code is 0 (--help) or 2. A
// mistyped flag is named with the nearest one the command has ("unknown flag --hiden-size;
// did you mean --hidden-size?").
bool parse_args(CLI::App& app, const std::vector<std::string>& args, int* exit_code);

// The group that keeps a flag out of --help while the command still accepts it (the flags
// of the tests, such as --inject-fault-iteration).
inline const char* const kHiddenGroup = "";

}  // namespace trident::cli
