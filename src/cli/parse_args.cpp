#include "cli/parse_args.h"

#include <algorithm>
#include <cctype>
#include <iostream>

#include "cli/suggest.h"

namespace trident::cli {

namespace {

// The long and short names of the flags --help shows.
std::vector<std::string> visible_flags(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_group().empty()) continue;
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
    for (const std::string& s : o->get_snames()) names.push_back("-" + s);
  }
  return names;
}

// The first argument, in command-line order, that CLI11 left over and that looks like a
// flag (not a negative number); "" when there is none.
std::string first_unknown_flag(const CLI::App& app, const std::vector<std::string>& args) {
  const std::vector<std::string> left = app.remaining();
  for (const std::string& a : args) {
    if (a.size() < 2 || a[0] != '-' || std::isdigit((unsigned char)a[1]) || a[1] == '.') continue;
    if (std::find(left.begin(), left.end(), a) != left.end()) return a.substr(0, a.find('='));
  }
  return "";
}

}  // namespace

bool parse_args(CLI::App& app, const std::vector<std::string>& args, int* exit_code) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back
  try {
    app.parse(reversed);
  } catch (const CLI::ExtrasError& e) {
    const std::string flag = first_unknown_flag(app, args);
    if (flag.empty()) {
      *exit_code = app.exit(e) == 0 ? 0 : 2;
      return false;
    }
    const std::string meant = nearest_name(flag, visible_flags(app));
    std::cerr << app.get_name() << ": unknown flag " << flag
              << (meant.empty() ? "" : "; did you mean " + meant + "?") << " (" << app.get_name()
              << " --help lists the flags)\n";
    *exit_code = 2;
    return false;
  } catch (const CLI::ParseError& e) {
    *exit_code = app.exit(e) == 0 ? 0 : 2;
    return false;
  }
  *exit_code = 0;
  return true;
}

}  // namespace trident::cli
