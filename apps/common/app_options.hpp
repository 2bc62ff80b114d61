// The command line every app shares (strata and MPI builds alike): CLI11
// through tools/common/strata_cli.hpp, the options all apps take
// (--check, --trace PREFIX, --backend NAME, -h/--help) and one error style.
#pragma once

#include <cstdio>
#include <string>

#include "strata_cli.hpp"

namespace apps {

/// Adds --check, --trace and --backend to @p app, stored in the fields of the same names of @p o.
template <class Options>
void add_common_options(CLI::App& app, Options& o) {
  app.add_flag("--check", o.check, "verify the result against a reference");
  app.add_option("--trace", o.trace, "write STRATA_TRACE files PREFIX.<rank>.json (strata backend)")
      ->type_name("PREFIX");
  app.add_option("--backend", o.backend,
                 "strata (default), or mpi|openmpi|mpich: run the MPI twin under mpirun with --np N ranks "
                 "(default 2); start it without strata-run");
}

/// Parses @p argv with @p app. Returns an error message naming the option, or
/// "" when every argument was understood; on -h/--help fills @p help with the
/// help text (and returns "").
/// @code
///   CLI::App app{"what the app does", "asp"};
///   apps::add_common_options(app, o);
///   app.add_option("--n", o.n, "vertices")->check(strata::cli::positive_integer());
///   return apps::parse_app(app, argc, argv, help);
/// @endcode
inline std::string parse_app(CLI::App& app, int argc, char** argv, std::string& help) {
  help.clear();
  strata::cli::strict_flags(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    help = app.help();
  } catch (const CLI::ParseError& e) {
    return strata::cli::describe(app, e);
  }
  return "";
}

/// After parse_app(): on an error or --help, prints it once (when @p root)
/// as "PROG: error: MSG (see PROG --help)" or the help text, stores the exit
/// status (2 or 0) in @p rc and returns true: the program should stop.
inline bool report_parse(bool root, const char* prog, const std::string& err, const std::string& help, int& rc) {
  if (err.empty() && help.empty()) return false;
  if (root) {
    if (!err.empty())
      std::fprintf(stderr, "%s: error: %s (see %s --help)\n", prog, err.c_str(), prog);
    else
      std::fputs(help.c_str(), stdout);
  }
  rc = help.empty() ? 2 : 0;
  return true;
}

}  // namespace apps
