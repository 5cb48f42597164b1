#pragma once
// Shared by every subcommand: parse argv with CLI11, printing help or the parse error.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace trident::cli {

// Returns true when the command should run; otherwise *exit_code is 0 (--help) or 2.
inline bool parse_args(CLI::App& app, const std::vector<std::string>& args, int* exit_code) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    *exit_code = app.exit(e) == 0 ? 0 : 2;
    return false;
  }
  *exit_code = 0;
  return true;
}

}  // namespace trident::cli
