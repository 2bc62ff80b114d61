// The strata side of every app's main(): option parsing (CLI11) with errors and --help
// on rank 0 only, --backend (strata here; mpi/openmpi/mpich run the app's MPI
// twin under mpirun instead), --trace (STRATA_TRACE must be set before the
// Engine exists), the Engine, and errors turned into exit codes.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "strata/detail/env.hpp"
#include "strata/strata.hpp"
#include "strata_cli.hpp"

namespace apps {

/// True on rank 0 of a launched job (or without a launcher), before any Engine exists.
inline bool is_rank0() {
  const char* r = strata::detail::env::get("STRATA_RANK");
  return r == nullptr || std::string(r) == "0";
}

/// `--backend mpi|openmpi|mpich [--np N]` on a strata binary: replaces this
/// process with `mpirun -n N <dir>/<name>-mpi ARGS` (Open MPI; `mpirun.openmpi`,
/// else `mpirun`) or `mpirun.mpich -n N <dir>/<name>-mpich ARGS` (MPICH; else
/// `mpiexec.hydra`), where dir is this binary's directory and ARGS the other
/// arguments. One rank per core is bound when N fits the cores. Returns only
/// on error (the exit code to return); returns -1 when argv asks for no MPI backend.
// Over ~80 lines: (81) the argument scan and the exec in one sequence.
inline int exec_mpi_twin(const char* name, int argc, char** argv) {
  // Only --backend and --np here (the app's own parser reads the rest, and reports any error).
  std::string backend, np_text;
  CLI::App pre{"", name};
  pre.allow_extras();
  pre.set_help_flag();
  pre.add_option("--backend", backend);
  pre.add_option("--np", np_text);
  try {
    pre.parse(argc, argv);
  } catch (const CLI::ParseError&) {
    return -1;
  }
  const std::vector<std::string> rest = pre.remaining();
  int np = 2;
  if (!np_text.empty()) {
    long n = 0;
    if (!strata::cli::detail::to_long(np_text, n) || n < 1 || n > 4096) {
      if (is_rank0()) std::fprintf(stderr, "%s: error: bad --np '%s' (use a rank count >= 1)\n", name, np_text.c_str());
      return 2;
    }
    np = static_cast<int>(n);
  }
  const bool openmpi = backend == "mpi" || backend == "openmpi";
  if (!openmpi && backend != "mpich") return -1;
  if (strata::detail::env::get("STRATA_RANK") != nullptr) {
    if (is_rank0())
      std::fprintf(stderr,
                   "%s: error: --backend %s starts its own mpirun: run '%s --backend %s --np N ...' without "
                   "strata-run\n",
                   name, backend.c_str(), name, backend.c_str());
    return 2;
  }
  // The twin sits next to this binary.
  std::string dir = ".";
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len > 0) {
    self[len] = '\0';
    dir = self;
    dir = dir.substr(0, dir.rfind('/'));
  }
  const std::string twin = dir + "/" + name + (openmpi ? "-mpi" : "-mpich");
  if (access(twin.c_str(), X_OK) != 0) {
    std::fprintf(stderr,
                 "%s: error: --backend %s needs %s, which is not built (%s was not found at configure time; "
                 "scripts/setup.sh --mpi installs it)\n",
                 name, backend.c_str(), twin.c_str(), openmpi ? "Open MPI" : "MPICH");
    return 2;
  }
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const bool bind = cores <= 0 || np <= cores;
  std::vector<std::string> args;
  args.emplace_back();  // the launcher, below
  if (openmpi) {
    args.insert(args.end(), {"--allow-run-as-root", "-n", std::to_string(np)});
    if (bind)
      args.insert(args.end(), {"--bind-to", "core"});
    else
      args.insert(args.end(), {"--oversubscribe", "--bind-to", "none"});
  } else {
    args.insert(args.end(), {"-n", std::to_string(np), "-bind-to", bind ? "core" : "none"});
  }
  args.push_back(twin);
  args.insert(args.end(), rest.begin(), rest.end());
  std::fflush(stdout);
  std::fflush(stderr);
  int err = 0;
  for (const char* launcher : openmpi ? std::vector<const char*>{"mpirun.openmpi", "mpirun"}
                                      : std::vector<const char*>{"mpirun.mpich", "mpiexec.hydra"}) {
    args[0] = launcher;
    std::vector<char*> av;
    for (auto& x : args) av.push_back(x.data());
    av.push_back(nullptr);
    execvp(launcher, av.data());
    err = errno;  // only returns on failure: try the next name
  }
  std::fprintf(stderr, "%s: error: --backend %s: cannot start %s: %s\n", name, backend.c_str(),
               openmpi ? "mpirun.openmpi or mpirun" : "mpirun.mpich or mpiexec.hydra", std::strerror(err));
  return 2;
}

/// @param name app name for messages ("asp", "fft3d")
/// @param parse `std::string(int, char**, Options&, std::string& help)`: empty string = parsed;
///        a non-empty @p help (the --help text) is printed and the app exits 0
/// @param run `int(strata::Engine&, const Options&)`: the app's body, returns the exit code
template <class Options, class Parse, class Run>
int strata_app_main(const char* name, int argc, char** argv, Parse parse, Run run) {
  const int twin_rc = exec_mpi_twin(name, argc, argv);
  if (twin_rc >= 0) return twin_rc;
  Options o;
  std::string help;
  const std::string err = parse(argc, argv, o, help);
  if (!err.empty() || !help.empty()) {
    if (is_rank0()) {
      if (!err.empty())
        std::fprintf(stderr, "%s: error: %s (see %s --help)\n", name, err.c_str(), name);
      else
        std::fputs(help.c_str(), stdout);
    }
    return help.empty() ? 2 : 0;
  }
  if (!o.backend.empty() && o.backend != "strata") {
    if (is_rank0())
      std::fprintf(stderr, "%s: error: unknown --backend '%s' (strata, mpi, openmpi or mpich)\n", name,
                   o.backend.c_str());
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
