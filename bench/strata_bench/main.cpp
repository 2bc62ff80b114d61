// strata-bench: strata's measuring instrument (issue 7). One mode per run:
//
//   strata-run -n 2 --bind core -- strata-bench --transport [options]
//   strata-run -n 2 --bind core -- strata-bench --idle SECONDS
//   strata-run -n 2 --bind core -- strata-bench --coll NAME[,NAME]|all [options]
//   strata-run -n 2 --bind core -- strata-bench --engine
//   strata-bench --memcpy [--sizes ...]
//
// Each mode lives in its own file. Results: a table on stdout (rank 0),
// per-size progress lines on stderr, JSON records (bench_util) with --json.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "strata/detail/env.hpp"
#include "strata/error.hpp"
#include "strata_bench/bench.hpp"

namespace {

using strata::bench::Options;

const char* const kUsage =
    "usage: strata-run -n N [--bind core] -- strata-bench MODE [options]\n"
    "modes (exactly one):\n"
    "  --transport          put_with_signal / get latency and put bandwidth between ranks 0 and 1,\n"
    "                       beside the memcpy ceiling of the same sizes (needs >= 2 ranks)\n"
    "  --idle SECONDS       CPU time of an idle transport + progress servers, as a fraction of wall time\n"
    "  --memcpy             the single-process memcpy ceiling alone (hot and off-cache)\n"
    "  --engine             executor ns per node (chain, fan-out/fan-in, layered random DAG) beside bare\n"
    "                       oneTBB (rank 0), and tiny collectives call to future ready (every rank)\n"
    "  --coll NAME[,..]|all collectives OSU-style: bcast reduce allreduce allgather alltoall reduce_scatter\n"
    "                       (default set), all adds gather scatter barrier; sizes as strata-mpi-bench\n"
    "options:\n"
    "  --sizes SPEC         8:64M (powers of two), a list 1K,3,5M, or one size; default 8:64M\n"
    "  --iters N            repetitions per size (default: sized to the message)\n"
    "  --warmup N           untimed repetitions first (default: max(2, iters/10))\n"
    "  --window W           outstanding puts in the bandwidth test (default 8)\n"
    "  --off-cache          rotate buffers through a region larger than the last-level cache\n"
    "  --check              verify the transferred bytes\n"
    "  --no-memcpy          skip the memcpy ceiling in --transport\n"
    "  --backend shm|fabric same-host backend (overrides STRATA_INTRA)\n"
    "  --provider NAME      libfabric provider (overrides STRATA_PROVIDER), e.g. 'tcp;ofi_rxm' or shm\n"
    "  --progress-threads N progress server threads, 0 = inline (overrides STRATA_PROGRESS_THREADS)\n"
    "  --algo NAME|auto     --coll: algorithm (CollOptions::algorithm), default auto\n"
    "  --sync loose|strict  --coll: entry/exit synchronization, default loose\n"
    "  --tree SPEC          --coll: tree shapes (CollOptions::tree), e.g. single:binomial or host:flat,numa:2\n"
    "  --fragment SPEC      --coll: none | fixed:BYTES | halves[:BYTES] (CollOptions::fragment)\n"
    "  --direction SPEC     --coll: push | pull | host:pull,numa:push,core:pull (bcast, scatter only)\n"
    "  --persistent         --coll: persistent plans (plan_*: bcast, reduce, allreduce, barrier)\n"
    "  --shared-buffers     --coll: buffers from Engine::allocate, CollOptions::shared_buffers (single copy)\n"
    "  --overlap            --coll: nonblocking + compute + wait vs each alone (OSU overlap %)\n"
    "  --compute-factor F   --overlap: compute for F x the collective's time (default 1, as OSU)\n"
    "  --stream K           --coll: K back-to-back calls then wait all, loose vs strict vs blocking\n"
    "  --threads N          --engine: executor arena threads (default: CPUs this process may use)\n"
    "  --json FILE          write the records as JSON (rank 0)\n"
    "  --quiet              no progress lines on stderr\n";

bool is_rank0() {
  const char* r = strata::detail::env::get("STRATA_RANK");
  return r == nullptr || std::string(r) == "0";
}

[[noreturn]] void usage_error(const std::string& msg) {
  if (is_rank0()) std::fprintf(stderr, "strata-bench: %s\n(strata-bench --help for usage)\n", msg.c_str());
  std::exit(strata::bench::kUnavailable);
}

int to_int(const std::string& opt, const std::string& v, int lo) {
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < lo || x > (1L << 30))
    usage_error(opt + ": expected an integer >= " + std::to_string(lo) + ", got '" + v + "'");
  return static_cast<int>(x);
}

void set_mode(Options& o, const std::string& m) {
  if (!o.mode.empty() && o.mode != m) usage_error("choose one mode, got --" + o.mode + " and --" + m);
  o.mode = m;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string inline_value;
    bool has_inline = false;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      inline_value = a.substr(a.find('=') + 1);
      a = a.substr(0, a.find('='));
      has_inline = true;
    }
    auto value = [&]() -> std::string {
      if (has_inline) return inline_value;
      if (i + 1 >= argc) usage_error("missing value for " + a);
      return argv[++i];
    };
    try {
      if (a == "-h" || a == "--help") {
        std::fputs(kUsage, stdout);
        std::exit(0);
      } else if (a == "--transport" || a == "--memcpy" || a == "--engine") {
        set_mode(o, a.substr(2));
      } else if (a == "--idle") {
        set_mode(o, "idle");
        const std::string v = value();
        char* end = nullptr;
        o.idle_seconds = std::strtod(v.c_str(), &end);
        if (v.empty() || *end != '\0' || !(o.idle_seconds > 0))
          usage_error("--idle: expected a positive number of seconds, got '" + v + "'");
      } else if (a == "--coll") {
        set_mode(o, "coll");
        const std::string v = value();
        for (std::size_t s = 0; s <= v.size();) {
          const std::size_t c = v.find(',', s);
          o.colls.push_back(v.substr(s, c == std::string::npos ? std::string::npos : c - s));
          if (c == std::string::npos) break;
          s = c + 1;
        }
      } else if (a == "--algo") {
        o.algo = value();
      } else if (a == "--sync") {
        o.sync = value();
        if (o.sync != "loose" && o.sync != "strict")
          usage_error("--sync: expected loose or strict, got '" + o.sync + "'");
      } else if (a == "--tree") {
        o.tree = value();
      } else if (a == "--fragment") {
        o.fragment = value();
      } else if (a == "--direction") {
        o.direction = value();
      } else if (a == "--persistent") {
        o.persistent = true;
      } else if (a == "--shared-buffers") {
        o.shared_buffers = true;
      } else if (a == "--overlap") {
        o.overlap = true;
      } else if (a == "--compute-factor") {
        const std::string v = value();
        char* end = nullptr;
        o.compute_factor = std::strtod(v.c_str(), &end);
        if (v.empty() || *end != '\0' || !(o.compute_factor > 0))
          usage_error("--compute-factor: expected a positive number, got '" + v + "'");
      } else if (a == "--stream") {
        o.stream = to_int(a, value(), 1);
      } else if (a == "--threads") {
        o.threads = to_int(a, value(), 1);
      } else if (a == "--sizes") {
        o.sizes = strata::bench::parse_sizes(value());
      } else if (a == "--iters") {
        o.iters = to_int(a, value(), 1);
      } else if (a == "--warmup") {
        o.warmup = to_int(a, value(), 0);
      } else if (a == "--window") {
        o.window = to_int(a, value(), 1);
      } else if (a == "--off-cache") {
        o.off_cache = true;
      } else if (a == "--check") {
        o.check = true;
      } else if (a == "--no-memcpy") {
        o.with_memcpy = false;
      } else if (a == "--quiet") {
        o.quiet = true;
      } else if (a == "--json") {
        o.json = value();
      } else if (a == "--backend") {
        o.backend = value();
        if (o.backend != "shm" && o.backend != "fabric")
          usage_error("--backend: expected shm or fabric, got '" + o.backend + "'");
      } else if (a == "--provider") {
        o.provider = value();
      } else if (a == "--progress-threads") {
        o.progress_threads = to_int(a, value(), 0);
      } else {
        usage_error("unknown option '" + a + "'");
      }
    } catch (const std::invalid_argument& e) {
      usage_error(e.what());
    }
  }
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
  if (!o.json.empty() && !records.empty()) {
    std::FILE* f = std::fopen(o.json.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "strata-bench: cannot write --json %s\n", o.json.c_str());
      return 1;
    }
    strata::bench::write_json(f, records);
    std::fclose(f);
  }
  return rc;
}
