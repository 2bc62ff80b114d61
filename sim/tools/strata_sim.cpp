// strata-sim: predicts a collective's completion time on a synthetic machine
// by simulating the real compiled plans (docs/simulator.md).
//
//   strata-sim --hosts 64 --topology "package:2 numa:2 core:12 pu:1"
//              --coll broadcast --bytes 16M [--algo tree] [--tree host:4] [--strict]
//              [--machine FILE] [--nic-gbit 200 --nic-lat-us 2 ...] [--csv out.csv]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "comm.hpp"  // the engine's algorithm resolution (choose, parse_shape), so options mean the same
#include "strata/sim/sim.hpp"

namespace {

using strata::Errc;
using strata::Error;
namespace coll = strata::coll;
namespace sim = strata::sim;

const char* kUsage =
    "usage: strata-sim [options]\n"
    "machine:\n"
    "  --machine FILE          machine description (key = value lines, docs/simulator.md); flags override it\n"
    "  --hosts H               hosts (default 1)\n"
    "  --topology SPEC         hwloc synthetic topology of one host (default 'package:1 numa:1 core:4 pu:1')\n"
    "  --ppn N                 ranks per host (default: one per core)\n"
    "cost model (defaults in docs/simulator.md):\n"
    "  --nic-gbit G  --nic-lat-us U  --msg-bytes B  --shm-lat-us U  --copy-gbs G  --copy-numa-gbs G\n"
    "  --copy-package-gbs G  --numa-mem-gbs G  --reduce-gbs G  --node-us U  --progress-us U  --workers W\n"
    "  (a bandwidth of 'inf' costs nothing per byte)\n"
    "  --calibrate             measure memcpy and the float32 sum kernel here at --bytes, use them as copy_gbs and\n"
    "                          reduce_gbs (noisy on a shared machine)\n"
    "  --pure                  only NIC latency and bandwidth cost anything (closed-form checks); later flags "
    "override\n"
    "collective:\n"
    "  --coll NAME             barrier | broadcast | reduce | allreduce | gather | scatter | allgather | alltoall |\n"
    "                          reduce_scatter_block (default broadcast)\n"
    "  --bytes N[K|M|G]        bytes per rank as the compiler counts them (Call::count x element size; default 1M)\n"
    "  --root R                root rank (default 0)\n"
    "  --algo NAME --tree SPEC --fragment SPEC --direction SPEC   as CollOptions / STRATA_ALGO_* (docs/algorithms.md)\n"
    "  --strict                strict entry and exit synchronization (default loose)\n"
    "  --slot-bytes N --credits N   window geometry (engine defaults 1M, 4)\n"
    "  --calls K               K calls of the collective in a row (default 1), blocking unless --nonblocking\n"
    "  --nonblocking           the K calls are made at once; the engine keeps `credits` in flight per rank\n"
    "  --no-flags              peers use ready-to-receive signals instead of window flags (one host) and grants\n"
    "output:\n"
    "  --critical N            critical-path steps to print (default 12; 0 = none)\n"
    "  --csv FILE              per-rank completion times (rank,host,numa,finish_us)\n"
    "  --quiet                 one summary line only\n";

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "strata-sim: %s\n%s", what.c_str(), kUsage);
  std::exit(2);
}

std::uint64_t parse_bytes(const std::string& arg, const std::string& v) {
  char* end = nullptr;
  const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || end == v.c_str() || v[0] == '-') usage_error("argument " + arg + " = '" + v + "' is not a size");
  std::uint64_t mul = 1;
  const std::string suf = end;
  if (suf == "K" || suf == "k" || suf == "KiB")
    mul = 1ULL << 10;
  else if (suf == "M" || suf == "MiB")
    mul = 1ULL << 20;
  else if (suf == "G" || suf == "GiB")
    mul = 1ULL << 30;
  else if (!suf.empty())
    usage_error("argument " + arg + " = '" + v + "': unknown suffix '" + suf + "' (K, M, G)");
  return x * mul;
}

int parse_int(const std::string& arg, const std::string& v, int lo, int hi) {
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < lo || x > hi)
    usage_error("argument " + arg + " = '" + v + "' is not an integer in [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "]");
  return static_cast<int>(x);
}

coll::Kind parse_kind(const std::string& s) {
  for (int k = 0; k <= static_cast<int>(coll::Kind::reduce_scatter_block); ++k) {
    const auto kind = static_cast<coll::Kind>(k);
    if (s == coll::to_string(kind)) {
      if (kind == coll::Kind::gatherv || kind == coll::Kind::scatterv || kind == coll::Kind::allgatherv ||
          kind == coll::Kind::alltoallv || kind == coll::Kind::reduce_scatter)
        usage_error("--coll " + s + ": the v-variants are not simulated by the tool (use the library)");
      return kind;
    }
  }
  usage_error("--coll '" + s + "' is not a collective");
}

bool reduces(coll::Kind k) {
  return k == coll::Kind::reduce || k == coll::Kind::allreduce || k == coll::Kind::reduce_scatter_block;
}

// The engine's resolution of CollOptions into a coll::Algorithm
// (engine/src/api_*.cpp), for the collectives the tool simulates.
coll::Algorithm resolve(coll::Kind kind, const strata::CollOptions& o, const coll::Group& g, std::uint64_t bytes) {
  using strata::detail::choose_uncached;
  const std::string& name = o.algorithm;
  switch (kind) {
    case coll::Kind::barrier:
    case coll::Kind::broadcast:
    case coll::Kind::reduce:
      return choose_uncached(kind, o, -1);
    case coll::Kind::gather:
    case coll::Kind::scatter: {
      if (name == "flat" || name == "ring") {
        strata::CollOptions t = o;
        t.algorithm = "tree";
        coll::Algorithm a = choose_uncached(kind, t, -1);
        a.name = name;
        return a;
      }
      return choose_uncached(kind, o, -1);
    }
    case coll::Kind::allreduce: {
      std::string n = name;
      if (n.empty() || n == "auto") {
        n = coll::allreduce_auto(g, bytes, false);
        if (n == "tree") n.clear();
      }
      const bool tree = n.empty() || n == "tree" || n == "hierarchical" || n == "single" || n == "flat-tree";
      strata::CollOptions t = o;
      t.algorithm = tree && !n.empty() ? n : "tree";
      coll::Algorithm a = choose_uncached(kind, t, -1);
      if (!tree) a.name = n == "recursive-doubling" ? "rd" : n;
      return a;
    }
    default: {
      strata::CollOptions t = o;
      t.algorithm = "tree";
      t.tree.clear();
      coll::Algorithm a = choose_uncached(kind, t, -1);
      a.name = name.empty() || name == "tree" || name == "auto" ? "auto" : name;
      return a;
    }
  }
}

const std::vector<std::pair<std::string, std::string>> kCostFlags = {{"--nic-gbit", "nic_gbit"},
                                                                     {"--nic-lat-us", "nic_lat_us"},
                                                                     {"--msg-bytes", "msg_bytes"},
                                                                     {"--shm-lat-us", "shm_lat_us"},
                                                                     {"--copy-gbs", "copy_gbs"},
                                                                     {"--copy-numa-gbs", "copy_numa_gbs"},
                                                                     {"--copy-package-gbs", "copy_package_gbs"},
                                                                     {"--numa-mem-gbs", "numa_mem_gbs"},
                                                                     {"--reduce-gbs", "reduce_gbs"},
                                                                     {"--node-us", "node_us"},
                                                                     {"--progress-us", "progress_us"},
                                                                     {"--workers", "workers"}};

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  sim::MachineSpec m;
  sim::CostModel cost;
  // The machine file first, flags over it.
  for (std::size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--machine") sim::load_machine_file(args[i + 1], &m, &cost);
  if (std::find(args.begin(), args.end(), "--pure") != args.end())
    cost = sim::CostModel::pure_network(cost.nic_bw, cost.nic_lat);
  std::string kind_name = "broadcast";
  std::uint64_t bytes = 1ULL << 20;
  int root = 0;
  strata::CollOptions opts;
  std::size_t slot_bytes = 1u << 20;
  int credits = 4;
  bool flags = true;
  int critical = 12;
  std::string csv;
  bool quiet = false;
  bool calibrate = false;
  sim::Stream stream;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) usage_error("argument " + a + " needs a value");
      return args[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--machine") {
      value();
    } else if (a == "--calibrate") {
      calibrate = true;
    } else if (a == "--pure") {
    } else if (a == "--hosts") {
      m.hosts = parse_int(a, value(), 1, 1 << 20);
    } else if (a == "--topology") {
      m.topology = value();
    } else if (a == "--ppn") {
      m.ranks_per_host = parse_int(a, value(), 1, 1 << 16);
    } else if (a == "--coll") {
      kind_name = value();
    } else if (a == "--bytes") {
      bytes = parse_bytes(a, value());
    } else if (a == "--root") {
      root = parse_int(a, value(), 0, 1 << 22);
    } else if (a == "--algo") {
      opts.algorithm = value();
    } else if (a == "--tree") {
      opts.tree = value();
    } else if (a == "--fragment") {
      opts.fragment = value();
    } else if (a == "--direction") {
      opts.direction = value();
    } else if (a == "--strict") {
      opts.sync = strata::Sync::strict();
    } else if (a == "--slot-bytes") {
      slot_bytes = parse_bytes(a, value());
    } else if (a == "--credits") {
      credits = parse_int(a, value(), 1, 64);
    } else if (a == "--calls") {
      stream.instances = parse_int(a, value(), 1, 4096);
    } else if (a == "--nonblocking") {
      stream.blocking = false;
    } else if (a == "--no-flags") {
      flags = false;
    } else if (a == "--critical") {
      critical = parse_int(a, value(), 0, 1 << 20);
    } else if (a == "--csv") {
      csv = value();
    } else if (a == "--quiet") {
      quiet = true;
    } else {
      const auto it = std::find_if(kCostFlags.begin(), kCostFlags.end(), [&](const auto& f) { return f.first == a; });
      if (it == kCostFlags.end()) usage_error("unknown argument '" + a + "'");
      cost.set(it->second, value());
    }
  }
  if (calibrate) {
    // Flags given after --calibrate do not override it: the measurement wins.
    // Working set: input, window slot and output of every rank of one host.
    const std::uint64_t cb = std::max<std::uint64_t>(bytes, 4096);
    const std::uint64_t ppn = m.ranks_per_host > 0
                                  ? static_cast<std::uint64_t>(m.ranks_per_host)
                                  : static_cast<std::uint64_t>(strata::Machine(m.topology).num_cores());
    const sim::Calibration cal = sim::calibrate(cb, ppn * (2 * cb + std::min<std::uint64_t>(cb, slot_bytes)));
    cost.copy_bw = cal.copy_bw;
    cost.reduce_bw = cal.reduce_bw;
    std::printf("calibrated at %zu B (working set %zu B): copy_gbs = %.2f, reduce_gbs = %.2f\n", cal.bytes,
                cal.working_set, cal.copy_bw / 1e9, cal.reduce_bw / 1e9);
  }
  const coll::Kind kind = parse_kind(kind_name);
  const std::vector<strata::RankPlace> places = sim::place_ranks(m);
  const int n = static_cast<int>(places.size());
  {
    const int cores = strata::Machine(m.topology).num_cores();
    if (n / m.hosts > cores)
      std::fprintf(stderr,
                   "strata-sim: note: %d ranks per host on %d cores; the model gives every rank its own core "
                   "(no CPU sharing, docs/simulator.md)\n",
                   n / m.hosts, cores);
  }
  if (root >= n)
    usage_error("--root " + std::to_string(root) + " is outside the machine's " + std::to_string(n) + " ranks");
  const coll::Group g = sim::world_group(places, slot_bytes, credits, flags);
  coll::Call c;
  c.kind = kind;
  c.dtype = reduces(kind) ? strata::dag::DataType::f32 : strata::dag::DataType::u8;
  const std::uint64_t es = reduces(kind) ? 4 : 1;
  if (bytes % es != 0) usage_error("--bytes " + std::to_string(bytes) + " is not a multiple of the float32 size");
  c.count = bytes / es;
  c.root = root;
  c.entry_all = opts.sync.entry == strata::SyncMode::all;
  c.exit_all = opts.sync.exit == strata::SyncMode::all;
  c.algo = resolve(kind, opts, g, bytes);

  const sim::Result res = sim::simulate(g, c, places, cost, static_cast<std::size_t>(critical), stream);
  const double us = 1e6;
  std::printf("strata-sim: %s %llu B on %d ranks (%d hosts x '%s', %d per host), algorithm %s%s, %s\n",
              kind_name.c_str(), static_cast<unsigned long long>(bytes), n, m.hosts, m.topology.c_str(), n / m.hosts,
              c.algo.name.c_str(), c.algo.name == "tree" && !c.algo.hierarchical ? " (single)" : "",
              c.entry_all ? "strict" : "loose");
  std::printf("completion us: min %.2f median %.2f max %.2f\n", res.min_finish() * us, res.median_finish() * us,
              res.max_finish() * us);
  if (stream.instances > 1)
    std::printf("%d %s calls: %.2f us per call (last completion / calls)\n", stream.instances,
                stream.blocking ? "blocking" : "nonblocking", res.max_finish() * us / stream.instances);
  if (!quiet) {
    std::printf("simulated %llu nodes, %llu events; compile %.2f s, simulate %.2f s\n",
                static_cast<unsigned long long>(res.nodes), static_cast<unsigned long long>(res.events),
                res.compile_seconds, res.simulate_seconds);
    if (!res.critical_path.empty()) {
      std::printf("critical path (latest first; %zu steps shown):\n", res.critical_path.size());
      std::printf("  %10s %10s %10s  %-24s %s\n", "ready_us", "start_us", "end_us", "released by", "node");
      for (const sim::PathStep& s : res.critical_path)
        std::printf("  %10.2f %10.2f %10.2f  %-24s %s (%llu B)\n", s.ready * us, s.start * us, s.end * us,
                    s.via.c_str(), s.what.c_str(), static_cast<unsigned long long>(s.bytes));
    }
  }
  if (!csv.empty()) {
    std::ofstream out(csv);
    if (!out) throw Error(Errc::invalid_argument, "strata-sim: --csv '" + csv + "' cannot be written");
    out << "rank,host,numa,finish_us\n";
    for (int r = 0; r < n; ++r)
      out << r << ',' << places[static_cast<std::size_t>(r)].host << ',' << places[static_cast<std::size_t>(r)].numa
          << ',' << res.finish[static_cast<std::size_t>(r)] * us << '\n';
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    std::fprintf(stderr, "%s%s\n", what.rfind("strata-sim:", 0) == 0 ? "" : "strata-sim: ", what.c_str());
    return 1;
  }
}
