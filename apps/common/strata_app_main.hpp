// The strata side of every app's main(): option parsing with errors and usage
// on rank 0 only, the --backend check, --trace (STRATA_TRACE must be set
// before the Engine exists), the Engine, and errors turned into exit codes.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "strata/strata.hpp"

namespace apps {

/// True on rank 0 of a launched job (or without a launcher), before any Engine exists.
inline bool is_rank0() {
  const char* r = std::getenv("STRATA_RANK");
  return r == nullptr || std::string(r) == "0";
}

/// @param name app name for messages ("asp", "fft3d")
/// @param parse `std::string(int, char**, Options&, bool& help)`: empty string = parsed
/// @param usage text printed with --help or after a parse error
/// @param run `int(strata::Engine&, const Options&)`: the app's body, returns the exit code
template <class Options, class Parse, class Run>
int strata_app_main(const char* name, int argc, char** argv, Parse parse, const char* usage, Run run) {
  Options o;
  bool help = false;
  const std::string err = parse(argc, argv, o, help);
  if (!err.empty() || help) {
    if (is_rank0()) {
      if (!err.empty()) std::fprintf(stderr, "%s: error: %s\n", name, err.c_str());
      std::fputs(usage, stderr);
    }
    return help ? 0 : 2;
  }
  if (!o.backend.empty() && o.backend != "strata") {
    if (is_rank0())
      std::fprintf(stderr, "%s: error: --backend %s: this binary is the strata backend; run %s-%s under mpirun\n", name,
                   o.backend.c_str(), name, o.backend.c_str());
    return 2;
  }
  if (!o.trace.empty()) setenv("STRATA_TRACE", o.trace.c_str(), 1);  // before the Engine exists
  try {
    strata::Engine engine;
    const int rc = run(engine, o);
    if (!o.trace.empty() && engine.rank() == 0)
      std::printf("%s: trace: %s.<rank>.json; merge with strata-trace-merge -o %s.json --prefix %s\n", name,
                  o.trace.c_str(), o.trace.c_str(), o.trace.c_str());
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace apps
