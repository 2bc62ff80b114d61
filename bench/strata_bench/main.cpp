// strata-bench: strata's measuring instrument. One mode per run:
//
//   strata-run -n 2 --bind core -- strata-bench --transport [options]
//   strata-run -n 2 --bind core -- strata-bench --idle SECONDS
//   strata-run -n 2 --bind core -- strata-bench --coll NAME[,NAME]|all [options]
//   strata-run -n 2 --bind core -- strata-bench --engine
//   strata-bench --memcpy [--sizes ...]
//
// Each mode lives in its own file. Results: a table on stdout (rank 0; or
// --format json|osu|nccl, bench/README.md), per-size progress lines on stderr,
// JSON records (bench_util) with --json. Options: CLI11 (strata-bench --help).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "strata/detail/env.hpp"
#include "strata/error.hpp"
#include "strata_bench/bench.hpp"
#include "strata_cli.hpp"

namespace {

using strata::bench::Options;

bool is_rank0() {
  const char* r = strata::detail::env::get("STRATA_RANK");
  return r == nullptr || std::string(r) == "0";
}

[[noreturn]] void usage_error(const std::string& msg) { strata::cli::fail("strata-bench", msg, is_rank0()); }

// Over ~80 lines: CLI11 option declarations.
Options parse(int argc, char** argv) {
  Options o;
  CLI::App app{
      "strata's measuring instrument, one mode per run:\n"
      "  strata-run -n N [--bind core] -- strata-bench MODE [options]\n"
      "  strata-bench --memcpy [--sizes ...]",
      "strata-bench"};
  app.get_formatter()->column_width(28);
  auto mode = [&o](const std::string& m) {
    return [&o, m](auto&&...) {
      if (!o.mode.empty() && o.mode != m) usage_error("choose one mode, got --" + o.mode + " and --" + m);
      o.mode = m;
    };
  };
  const char* const modes = "Modes (exactly one)";
  const char* const coll = "--coll options";
  app.add_flag_callback("--transport", mode("transport"),
                        "put_with_signal / get latency and put bandwidth between ranks 0 and 1, beside the memcpy "
                        "ceiling of the same sizes (needs >= 2 ranks)")
      ->group(modes);
  app.add_option_function<double>(
         "--idle",
         [&](double v) {
           mode("idle")();
           o.idle_seconds = v;
         },
         "CPU time of an idle transport + progress servers over SECONDS, as a fraction of wall time")
      ->check(strata::cli::positive_number())
      ->group(modes);
  app.add_flag_callback("--memcpy", mode("memcpy"), "the single-process memcpy ceiling alone (hot and off-cache)")
      ->group(modes);
  app.add_flag_callback("--engine", mode("engine"),
                        "executor ns per node (chain, fan-out/fan-in, layered random DAG) beside bare oneTBB "
                        "(rank 0), and tiny collectives call to future ready (every rank)")
      ->group(modes);
  app.add_option_function<std::string>(
         "--coll",
         [&](const std::string& v) {
           mode("coll")();
           o.colls = strata::bench::split_colls(v);
         },
         "collectives OSU-style, NAME[,NAME] or all: bcast reduce allreduce allgather alltoall reduce_scatter "
         "(default set), all adds gather scatter barrier")
      ->group(modes);
  strata::bench::add_common_options(app, o);
  app.add_option("--window", o.window, "outstanding puts in the bandwidth test (default 8)")
      ->check(strata::cli::positive_integer());
  app.add_flag("!--no-memcpy", o.with_memcpy, "skip the memcpy ceiling in --transport and --coll");
  app.add_option("--backend", o.backend, "same-host backend (overrides STRATA_INTRA)")
      ->check(strata::cli::one_of({"shm", "fabric"}));
  app.add_option("--provider", o.provider, "libfabric provider (overrides STRATA_PROVIDER), e.g. 'tcp;ofi_rxm' or shm");
  app.add_option("--progress-threads", o.progress_threads,
                 "progress server threads, 0 = inline (overrides STRATA_PROGRESS_THREADS)")
      ->check(strata::cli::integer_at_least(0));
  app.add_option("--threads", o.threads, "--engine: executor arena threads (default: CPUs this process may use)")
      ->check(strata::cli::positive_integer());
  app.add_flag("--quiet", o.quiet, "no progress lines on stderr");
  app.add_option("--algo", o.algo, "algorithm (CollOptions::algorithm), default auto")->group(coll);
  app.add_option("--sync", o.sync, "entry/exit synchronization, default loose")
      ->check(strata::cli::one_of({"loose", "strict"}))
      ->group(coll);
  app.add_option("--tree", o.tree, "tree shapes (CollOptions::tree), e.g. single:binomial or host:flat,numa:2")
      ->group(coll);
  app.add_option("--fragment", o.fragment, "none | fixed:BYTES | halves[:BYTES] (CollOptions::fragment)")->group(coll);
  app.add_option("--direction", o.direction, "push | pull | host:pull,numa:push,core:pull (bcast, scatter only)")
      ->group(coll);
  app.add_flag("--persistent", o.persistent,
               "persistent plans (plan_* for bcast, reduce, allreduce, barrier; Communicator::plan for the others)")
      ->group(coll);
  app.add_flag("--shared-buffers", o.shared_buffers,
               "buffers from Engine::allocate, CollOptions::shared_buffers (single copy)")
      ->group(coll);
  app.add_flag("--overlap", o.overlap, "nonblocking + compute + wait vs each alone (OSU overlap %)")->group(coll);
  app.add_option("--compute-factor", o.compute_factor,
                 "--overlap: compute for F x the collective's time (default 1, as OSU)")
      ->check(strata::cli::positive_number())
      ->group(coll);
  app.add_option("--stream", o.stream, "K back-to-back calls then wait all, loose vs strict vs blocking")
      ->check(strata::cli::positive_integer())
      ->group(coll);
  strata::cli::parse(app, argc, argv, is_rank0());

  if (o.mode.empty())
    usage_error("no mode given: use --coll NAME|all, --engine, --transport, --idle SECONDS, --memcpy (or --help)");
  if ((o.overlap || o.stream > 0 || o.persistent || o.shared_buffers || !o.algo.empty() || o.sync != "loose" ||
       !o.tree.empty() || !o.fragment.empty() || !o.direction.empty()) &&
      o.mode != "coll")
    usage_error(
        "--overlap, --stream, --persistent, --shared-buffers, --algo, --sync, --tree, --fragment and --direction "
        "belong to --coll");
  if (o.overlap && o.stream > 0) usage_error("choose one of --overlap and --stream");
  if (o.persistent && (o.overlap || o.stream > 0)) usage_error("--persistent measures latency only");
  if (o.format != "table" && o.mode != "coll")
    usage_error("--format " + o.format + " belongs to --coll (the other modes print a table; --json FILE writes JSON)");
  if ((o.format == "osu" || o.format == "nccl") && (o.overlap || o.stream > 0))
    usage_error("--format " + o.format + " reports collective latencies: not with --overlap or --stream");
  if (o.full && o.format != "osu") usage_error("-f,--full belongs to --format osu");
  // The memcpy ceiling prints its own table; the other formats print only the collectives.
  if (o.format != "table" && o.mode == "coll") o.with_memcpy = false;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::vector<strata::bench::Record> records;
  int rc = 0;
  try {
    if (o.mode == "transport") {
      rc = strata::bench::run_transport(o, records);
    } else if (o.mode == "idle") {
      rc = strata::bench::run_idle(o, records);
    } else if (o.mode == "memcpy") {
      rc = strata::bench::run_memcpy(o, records);
    } else if (o.mode == "engine") {
      rc = strata::bench::run_engine(o, records);
    } else {
      rc = strata::bench::run_coll(o, records);
    }
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "strata-bench: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-bench: unexpected error: %s\n", e.what());
    return 1;
  }
  if (!records.empty()) {
    if (o.format != "table") strata::bench::print_records(o, records);
    if (!strata::bench::write_json_file(o, records, "strata-bench")) return 1;
  }
  return rc;
}
