// strata-bench: options shared by every mode and the entry point of each mode.
//
// Each mode lives in its own file (mode_<name>.cpp) and returns an exit status:
// 0 measured (and, with --check, verified), 1 a measurement or check failed,
// 2 bad usage or a mode this build cannot run.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/bench_cli.hpp"
#include "common/bench_util.hpp"
#include "strata/strata.hpp"

namespace strata::bench {

/// @brief Command line of strata-bench (see main.cpp's options); --sizes,
/// --iters, --warmup, --off-cache, --check, --json, --format and -f are the
/// CommonOptions it shares with strata-mpi-bench.
struct Options : CommonOptions {
  std::string mode;                ///< transport | memcpy | idle | engine | coll
  std::vector<std::string> colls;  ///< --coll NAME[,NAME] or all
  int window = 8;                  ///< --window: outstanding puts in the bandwidth test
  bool with_memcpy = true;         ///< --no-memcpy skips the ceiling beside --transport
  std::string backend;             ///< --backend shm|fabric (overrides STRATA_INTRA)
  std::string provider;            ///< --provider NAME (overrides STRATA_PROVIDER)
  int progress_threads = -1;       ///< --progress-threads N (-1: STRATA_PROGRESS_THREADS)
  double idle_seconds = 0;         ///< --idle SECONDS
  bool quiet = false;              ///< --quiet: no per-size progress lines on stderr
  std::string algo;                ///< --algo NAME|auto (--coll; empty = auto)
  std::string sync = "loose";      ///< --sync loose|strict (--coll)
  std::string tree;                ///< --tree SPEC: CollOptions::tree (--coll; empty = default)
  std::string fragment;            ///< --fragment SPEC: CollOptions::fragment (--coll; empty = default)
  std::string direction;           ///< --direction SPEC: CollOptions::direction (--coll bcast / scatter)
  bool persistent = false;         ///< --persistent: plan_* where strata has them (--coll)
  bool shared_buffers = false;  ///< --shared-buffers: Engine::allocate buffers + CollOptions::shared_buffers (--coll)
  bool overlap = false;         ///< --overlap: OSU overlap percentage (--coll)
  double compute_factor = 1.0;  ///< --compute-factor F: --overlap computes F x t_pure (default 1, OSU)
  int stream = 0;               ///< --stream K: K back-to-back calls, loose vs strict (--coll)
  int threads = 0;              ///< --threads N: executor arena threads of --engine (0: CPUs allowed)
};

/// Exit status of a mode that cannot run in this build or with these options.
constexpr int kUnavailable = 2;

/// --transport: put_with_signal and get latency, put bandwidth between ranks 0 and 1.
int run_transport(const Options& o, std::vector<Record>& out);
/// --idle SECONDS: process CPU time of an idle transport + progress servers.
int run_idle(const Options& o, std::vector<Record>& out);
/// --coll: collectives OSU-style (latency, --overlap, --stream K) beside the memcpy ceiling.
int run_coll(const Options& o, std::vector<Record>& out);

/// The CPU time a minimal transfer of a collective's bytes costs a rank's core
/// (overlap_floor.cpp): the overlap reachable on this machine is
/// 1 - cpu_us() / t_pure.
struct OverlapFloor {
  bool measured = false;
  std::string why;      // when not measured
  double t_raw_us = 0;  // one raw transfer (blocking TCP sockets), wall time
  double user_us = 0;   // per transfer: process user time (all threads)
  double sys_us = 0;    // process system time
  double core_us = 0;   // busy time of the rank's core (/proc/stat): the CPU the transfer cost it
  int reps = 0;
  [[nodiscard]] double cpu_us() const { return core_us; }
};
/// Busy time of CPU @p cpu so far (/proc/stat: user, nice, system, irq,
/// softirq, steal), seconds: everything that ran on that core.
double core_busy_seconds(int cpu);
/// This process's user (@p user) or system time so far, all threads, seconds.
double process_seconds(bool user);
/// Collective over @p world (2 ranks; allreduce, alltoall, bcast; else
/// measured = false with the reason). @p t_pure_us sizes the repetitions.
OverlapFloor overlap_floor(Communicator& world, const std::string& coll, std::size_t bytes, double t_pure_us);
/// --engine: executor ns per node vs bare oneTBB, tiny collectives call to ready.
int run_engine(const Options& o, std::vector<Record>& out);
/// --memcpy: the single-process memcpy ceiling alone (no launcher needed).
int run_memcpy(const Options& o, std::vector<Record>& out);

/// @brief Hot and off-cache memcpy of every size in one process.
/// Appends records library "memcpy", collective "memcpy", variant "hot" /
/// "off-cache", ranks 1, times per copy. Progress lines go to stderr unless
/// @p quiet.
std::vector<Record> memcpy_ceiling(const std::vector<std::size_t>& sizes, int iters, bool quiet);

/// Default sizes of the transport and memcpy modes: 8 B ... 64 MiB.
inline std::vector<std::size_t> default_transport_sizes() { return parse_sizes("8:64M"); }

}  // namespace strata::bench
