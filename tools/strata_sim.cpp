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
#include <memory>
#include <string>
#include <vector>

#include "strata/collectives/registry.hpp"
#include "strata/collectives/select.hpp"  // the engine's selection, so options mean the same
#include "strata/detail/env.hpp"
#include "strata/engine.hpp"
#include "strata/sim/sim.hpp"
#include "strata_cli.hpp"

namespace {

using strata::Errc;
using strata::Error;
namespace coll = strata::coll;
namespace sim = strata::sim;

[[noreturn]] void usage_error(const std::string& what) { strata::cli::fail("strata-sim", what); }

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

// The engine's resolution of CollOptions into a coll::Algorithm: the public
// selection (strata/collectives/select.hpp) under this process's STRATA_* variables.
coll::Algorithm resolve(coll::Kind kind, const strata::CollOptions& o, const coll::Group& g, std::uint64_t bytes) {
  coll::Request r;
  r.kind = kind;
  r.options = {o.algorithm, o.tree, o.fragment, o.direction};
  r.bytes = bytes;
  return coll::select_algorithm(r, g, coll::Environment::process());
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
                                                                     {"--handoff-write-gbs", "handoff_write_gbs"},
                                                                     {"--handoff-read-gbs", "handoff_read_gbs"},
                                                                     {"--node-us", "node_us"},
                                                                     {"--progress-us", "progress_us"},
                                                                     {"--workers", "workers"}};

// Over ~80 lines: the CLI11 option declarations and one straight run read best in one place.
int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  sim::MachineSpec m;
  sim::CostModel cost;
  // The machine file first, flags over it.
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--machine" && i + 1 < args.size()) sim::load_machine_file(args[i + 1], &m, &cost);
    if (args[i].rfind("--machine=", 0) == 0) sim::load_machine_file(args[i].substr(10), &m, &cost);
  }
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
  CLI::App app{"Simulates one collective (the engine's compiled plans) on a synthetic machine (docs/simulator.md)",
               "strata-sim"};
  app.get_formatter()->column_width(30);
  const char* const machine = "Machine";
  const char* const costs = "Cost model (defaults in docs/simulator.md; a bandwidth of 'inf' costs nothing per byte)";
  const char* const call = "Collective";
  const char* const output = "Output";
  std::string machine_file;  // read before the other flags, above
  app.add_option("--machine", machine_file,
                 "machine description (key = value lines, docs/simulator.md); flags override it")
      ->type_name("FILE")
      ->group(machine);
  app.add_option("--hosts", m.hosts, "hosts (default 1)")->check(strata::cli::integer(1, 1 << 20))->group(machine);
  app.add_option("--topology", m.topology,
                 "hwloc synthetic topology of one host (default 'package:1 numa:1 core:4 pu:1')")
      ->group(machine);
  app.add_option("--ppn", m.ranks_per_host, "ranks per host (default: one per core)")
      ->check(strata::cli::integer(1, 1 << 16))
      ->group(machine);
  for (const auto& f : kCostFlags) {
    const std::string flag = f.first, key = f.second;
    app.add_option_function<std::string>(
           flag,
           [&cost, flag, key](const std::string& v) {
             try {
               cost.set(key, v);
             } catch (const std::exception& e) {
               std::string what = e.what();
               if (what.rfind("strata-sim: ", 0) == 0) what = what.substr(12);
               usage_error(flag + ": " + what);
             }
           },
           "cost model: " + key)
        ->group(costs);
  }
  app.add_flag("--calibrate", calibrate,
               "measure memcpy and the float32 sum kernel here at --bytes, use them as copy_gbs and reduce_gbs "
               "(noisy on a shared machine)")
      ->group(costs);
  bool pure = false;  // applied before the other flags, above
  app.add_flag("--pure", pure,
               "only NIC latency and bandwidth cost anything (closed-form checks); cost flags override it")
      ->group(costs);
  app.add_option("--coll", kind_name,
                 "barrier | broadcast | reduce | allreduce | gather | scatter | allgather | alltoall | "
                 "reduce_scatter_block (default broadcast)")
      ->group(call);
  auto size = [](std::uint64_t& out) { return [&out](const std::string& v) { out = parse_bytes("size", v); }; };
  auto size_check = CLI::Validator(
      [](std::string& v) -> std::string {
        char* end = nullptr;
        std::strtoull(v.c_str(), &end, 10);
        const std::string suf = end;
        const bool ok = !v.empty() && end != v.c_str() && v[0] != '-' &&
                        (suf.empty() || suf == "K" || suf == "k" || suf == "KiB" || suf == "M" || suf == "MiB" ||
                         suf == "G" || suf == "GiB");
        return ok ? "" : "expects a size N[K|M|G], got '" + v + "'";
      },
      "N[K|M|G]");
  app.add_option_function<std::string>("--bytes", size(bytes),
                                       "bytes per rank as the compiler counts them (Call::count x element size; "
                                       "default 1M)")
      ->check(size_check)
      ->group(call);
  app.add_option("--root", root, "root rank (default 0)")->check(strata::cli::integer(0, 1 << 22))->group(call);
  app.add_option("--algo", opts.algorithm, "as CollOptions::algorithm / STRATA_ALGO_* (docs/algorithms.md)")
      ->group(call);
  app.add_option("--tree", opts.tree, "as CollOptions::tree")->group(call);
  app.add_option("--fragment", opts.fragment, "as CollOptions::fragment")->group(call);
  app.add_option("--direction", opts.direction, "as CollOptions::direction")->group(call);
  app.add_flag_callback(
         "--strict", [&opts] { opts.sync = strata::Sync::strict(); },
         "strict entry and exit synchronization (default loose)")
      ->group(call);
  std::uint64_t slot = slot_bytes;
  app.add_option_function<std::string>("--slot-bytes", size(slot), "window slot size (engine default 1M)")
      ->check(size_check)
      ->group(call);
  app.add_option("--credits", credits, "window credits (engine default 4)")
      ->check(strata::cli::integer(1, 64))
      ->group(call);
  app.add_option("--calls", stream.instances,
                 "K calls of the collective in a row (default 1), blocking unless --nonblocking")
      ->check(strata::cli::integer(1, 4096))
      ->group(call);
  app.add_flag_callback(
         "--nonblocking", [&stream] { stream.blocking = false; },
         "the K calls are made at once; the engine keeps `credits` in flight per rank")
      ->group(call);
  app.add_flag_callback(
         "--no-flags", [&flags] { flags = false; },
         "peers use ready-to-receive signals instead of window flags (one host) and grants")
      ->group(call);
  app.add_option("--critical", critical, "critical-path steps to print (default 12; 0 = none)")
      ->check(strata::cli::integer(0, 1 << 20))
      ->group(output);
  app.add_option("--csv", csv, "per-rank completion times (rank,host,numa,finish_us)")->group(output);
  app.add_flag("--quiet", quiet, "one summary line only")->group(output);
  std::string tuning_file;
  app.add_option("--tuning", tuning_file,
                 "tuning table to compile the plans under (docs/tuning.md; e.g. from strata-tune --simulate); "
                 "default STRATA_TUNING when it names a file, else the built-in defaults")
      ->type_name("FILE")
      ->group(call);
  strata::cli::parse(app, argc, argv);
  slot_bytes = static_cast<std::size_t>(slot);
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
  coll::Group g = sim::world_group(places, slot_bytes, credits, flags);
  if (tuning_file.empty()) {
    const char* env = strata::detail::env::get("STRATA_TUNING");
    if (env != nullptr && *env != '\0' && std::string(env) != "off") tuning_file = env;
  }
  if (!tuning_file.empty()) {
    // The table applies whatever machine it was written for: the simulated
    // machine is not this one (an engine would check the fingerprint).
    const coll::TuningFile tf = coll::read_tuning_file(tuning_file);
    if (tf.machine.cpu_model.rfind("simulated:", 0) != 0)
      std::fprintf(stderr, "strata-sim: note: %s was measured on a real machine ('%s'), applied as given\n",
                   tuning_file.c_str(), tf.machine.cpu_model.c_str());
    g.tuning = std::make_shared<const coll::Tuning>(tf.table);
  }
  // As the engine on a one-host communicator with window flags: single copy and the mapped plans.
  coll::memory_plans(&g, !strata::detail::env::is("STRATA_SINGLE_COPY", "off"),
                     !strata::detail::env::is("STRATA_MAPPED", "off"));
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
  // As the engine (apply_sync): an automatic, loose call may run a memory-protocol plan.
  c.fast_ok = coll::automatic_call(kind, {opts.algorithm, opts.tree, opts.fragment, opts.direction}, c.entry_all,
                                   coll::Environment::process());
  const coll::AlgorithmRow* planned = coll::planned_algorithm(g, c);

  const sim::Result res = sim::simulate(g, c, places, cost, static_cast<std::size_t>(critical), stream);
  const double us = 1e6;
  std::printf("strata-sim: %s %llu B on %d ranks (%d hosts x '%s', %d per host), algorithm %s, %s%s\n",
              kind_name.c_str(), static_cast<unsigned long long>(bytes), n, m.hosts, m.topology.c_str(), n / m.hosts,
              planned != nullptr ? planned->name.c_str() : c.algo.name.c_str(), c.entry_all ? "strict" : "loose",
              tuning_file.empty() ? "" : (", tuning " + tuning_file).c_str());
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
