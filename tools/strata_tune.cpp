// strata-tune: measures this machine and writes its tuning table (docs/tuning.md).
//
// Measures the hot and off-cache memcpy bandwidth per size, the same-host data
// paths (shm ring, mapped windows, CMA, libfabric), the executor's cost per
// node and per tiny collective, then searches the crossovers of the tuning
// table by measurement: for each searched field it runs real collectives on 2
// ranks (build/bin/strata-run + strata-bench, real engines that load a
// candidate table through STRATA_TUNING), the default and every alternative
// value in interleaved rounds, and keeps the default unless an alternative
// wins by more than the spread of its per-round ratios and a margin
// (common/tune_rule.hpp). Prints a line per phase and per decision as it
// goes, then the table; writes the table with the machine's fingerprint and
// every measurement behind each decision.
//
//   strata-tune [--quick | --smoke] [-o FILE] [--ranks N] [--rounds R] [--verbose]
//   strata-tune --simulate --machine FILE [--hosts H --ppn P --topology T] [--quick] [-o FILE]
//
// --simulate searches the table of a synthetic machine with the simulator
// instead (strata::sim::autotune, in this process; docs/tuning.md "Tuning a
// simulated machine").
// Over ~800 lines: one program's search plan, measurement and output share the Tuner class.
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "strata/collectives/tuning.hpp"
#include "strata/error.hpp"
#include "strata/sim/autotune.hpp"
#include "strata/version.hpp"
#include "strata_cli.hpp"
#include "tune_rule.hpp"

extern char** environ;

namespace {

using strata::coll::Tuning;
using strata::coll::TuningField;
using Value = nlohmann::ordered_json;  // the measurements (TuningFile::measurements holds their text)

enum class Mode { smoke, quick, full };

struct Options {
  Mode mode = Mode::full;
  std::string out;
  int ranks = 2;
  int rounds = 0;  // interleaved rounds per search (0: 3 in --quick and --smoke, 5 in full mode)
  bool verbose = false;
};

struct Record {
  std::string library, collective, variant;
  std::uint64_t bytes = 0;
  double median_us = 0, min_us = 0, mbps = 0;
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "strata-tune: %s\n", what.c_str());
  std::exit(1);
}

std::string self_dir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) die("cannot read /proc/self/exe");
  buf[n] = '\0';
  return std::filesystem::path(buf).parent_path().string();
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tail(const std::string& s, std::size_t n) { return s.size() <= n ? s : s.substr(s.size() - n); }

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// A value for people (progress lines): 1T, 1G, 128K, 16.
std::string label(std::uint64_t b) {
  constexpr std::uint64_t G = 1ull << 30;
  if (b >= 1024 * G && b % (1024 * G) == 0) return std::to_string(b / (1024 * G)) + "T";
  if (b >= G && b % G == 0) return std::to_string(b / G) + "G";
  if (b >= (1u << 20) && b % (1u << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

std::string human(std::uint64_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

class Tuner {
 public:
  Tuner(Options o) : o_(std::move(o)) {
    dir_ = self_dir();
    run_ = dir_ + "/strata-run";
    bench_ = dir_ + "/strata-bench";
    probe_ = dir_ + "/strata-handoff-probe";
    if (access(probe_.c_str(), X_OK) != 0) probe_.clear();  // measured without placement control
    for (const std::string& p : {run_, bench_})
      if (access(p.c_str(), X_OK) != 0)
        die("needs " + p +
            " (strata-tune runs real collectives with strata-run and strata-bench from its own "
            "directory; build the whole project)");
    std::string base = "/tmp";
    if (const char* t = std::getenv("TMPDIR"); t != nullptr && *t == '/') base = t;
    std::string templ = base + "/strata-tune.XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) die("cannot create a temporary directory under " + base);
    tmp_ = buf.data();
    here_ = strata::coll::Fingerprint::here();
    // The children see this environment without any STRATA_ setting (a
    // user's STRATA_FRAGMENT or STRATA_INLINE_BYTES would falsify the
    // measurements); strata-run sets what the ranks need.
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string kv = *e;
      if (kv.rfind("STRATA_", 0) == 0 && kv.rfind("STRATA_LOG_LEVEL=", 0) != 0) continue;
      base_env_.push_back(kv);
    }
  }
  ~Tuner() {
    std::error_code ec;
    if (!tmp_.empty()) std::filesystem::remove_all(tmp_, ec);
  }
  Tuner(const Tuner&) = delete;
  Tuner& operator=(const Tuner&) = delete;

  int run() {
    t0_ = std::chrono::steady_clock::now();
    std::printf("strata-tune %s: %zu search(es), %d interleaved rounds each (%s), writing %s\n", mode_name(),
                plan().size(), rounds_count(), duration_hint(), out_path().c_str());
    std::fflush(stdout);
    file_.machine = here_;
    file_.tool = std::string("strata-tune ") + mode_name() + " (strata " + STRATA_VERSION_STRING + ")";
    Value m = Value::object();
    m["mode"] = Value(mode_name());
    m["ranks"] = Value(static_cast<std::uint64_t>(o_.ranks));
    m["note"] = Value(
        "medians in microseconds; a search measures the default and its alternatives in interleaved rounds and "
        "lists per alternative its per-round ratio to the default (geometric mean over the points of alt / "
        "default time, < 1: faster), their median and min-max, and per point the median over the rounds; an "
        "alternative replaces the default only if its win (1 - median ratio) exceeds the margin plus the "
        "min-max spread of its ratios, and it is nowhere slower than the point tolerance");
    step("memcpy bandwidth (hot, off-cache)");
    m["memcpy"] = memcpy_bw();
    step("same-host data paths");
    m["paths"] = paths();
    if (o_.mode != Mode::smoke) {
      step("executor cost");
      m["executor"] = executor();
    }
    step("crossover searches (one line per decision)");
    Value rl = Value::object();
    rl["rounds"] = Value(static_cast<std::uint64_t>(rounds_count()));
    rl["margin"] = Value(rule().margin);
    rl["point_tolerance"] = Value(rule().point_tolerance);
    rl["spread"] = Value("max - min of the per-round ratios");
    m["rule"] = std::move(rl);
    m["searches"] = searches();
    m["not_measured"] = not_measured();
    const double secs = elapsed();
    m["duration_s"] = Value(secs);
    file_.measurements = m.dump();
    file_.created = now_utc();
    strata::coll::write_tuning_file(out_path(), file_);
    // Read back what was written: a file the engines refuse must not be left behind silently.
    (void)strata::coll::read_tuning_file(out_path());
    std::printf("strata-tune: wrote %s (%s mode, %.1f s, %zu bytes)\n", out_path().c_str(), mode_name(), secs,
                static_cast<std::size_t>(std::filesystem::file_size(out_path())));
    // The table: every searched field, its value, the default and why (two runs diff line by line).
    // probe_us: the search's placement reference (strata-handoff-probe, 64 KiB; 0: no probe). Two runs
    // whose tables differ where this differs measured two placements of the machine (docs/tuning.md).
    std::printf("%-34s %14s %14s %8s %-8s %s\n", "field", "value", "default", "probe_us", "decision", "reason");
    for (const Decision& d : decisions_)
      std::printf("%-34s %14llu %14llu %8.1f %-8s %s\n", d.field.c_str(), static_cast<unsigned long long>(d.value),
                  static_cast<unsigned long long>(d.def), d.probe_us, d.status.c_str(), d.reason.c_str());
    std::printf("(%zu fields not searched keep their defaults: measurements.not_measured says why)\n",
                strata::coll::tuning_fields().size() - decisions_.size());
    return 0;
  }

  std::string out_path() const {
    if (!o_.out.empty()) return o_.out;
    const std::string p = strata::coll::default_tuning_path();
    if (p.empty()) die("no default location (HOME and XDG_CONFIG_HOME unset): give -o FILE");
    return p;
  }

 private:
  const char* mode_name() const {
    return o_.mode == Mode::smoke ? "--smoke" : o_.mode == Mode::quick ? "--quick" : "full";
  }
  // Progress: one line per measurement phase, flushed (stdout, like the decisions).
  void step(const char* what) const {
    std::printf("[%5.1f s] %s\n", elapsed(), what);
    std::fflush(stdout);
  }
  // What the mode takes (docs/tuning.md, "Run time and repeatability").
  const char* duration_hint() const {
    return o_.mode == Mode::smoke   ? "about 5 s"
           : o_.mode == Mode::quick ? "about 1 min on 2 cores"
                                    : "about 5 min on 2 cores";
  }

  // Runs strata-bench (under strata-run with @p ranks > 0) with @p args and
  // extra environment @p env; returns its JSON records.
  // @p launch: more strata-run arguments (e.g. --hosts 2).
  std::vector<Record> bench(int ranks, const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                            const std::vector<std::string>& launch = {}) {
    const std::string json = tmp_ + "/run" + std::to_string(++nrun_) + ".json";
    const std::string log = tmp_ + "/run" + std::to_string(nrun_) + ".log";
    std::vector<std::string> argv;
    if (ranks > 0) {
      argv = {run_, "-n", std::to_string(ranks), "--timeout", o_.mode == Mode::full ? "120" : "60"};
      argv.insert(argv.end(), launch.begin(), launch.end());
      argv.insert(argv.end(), {"--", bench_});
    } else {
      argv = {bench_};
    }
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--json", json, "--quiet"});
    std::vector<std::string> envs = base_env_;
    envs.insert(envs.end(), env.begin(), env.end());
    std::string cmd;
    for (const auto& e : env) cmd += e + " ";
    for (const auto& a : argv) cmd += a + " ";
    if (o_.verbose) std::fprintf(stderr, "  %s\n", cmd.c_str());
    std::vector<char*> av, ev;
    for (auto& a : argv) av.push_back(a.data());
    av.push_back(nullptr);
    for (auto& e : envs) ev.push_back(e.data());
    ev.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, av[0], &fa, nullptr, av.data(), ev.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      throw std::runtime_error("measurement failed (" + cmd + "):\n" + tail(slurp(log), 2000));
    std::vector<Record> out;
    // strata-bench's --json records (bench/common/bench_util.hpp), read with nlohmann-json.
    const nlohmann::json doc = nlohmann::json::parse(slurp(json), nullptr, /*allow_exceptions=*/false);
    if (!doc.is_array()) throw std::runtime_error(json + ": strata-bench wrote no JSON array");
    for (const nlohmann::json& r : doc) {
      if (!r.is_object()) throw std::runtime_error(json + ": a record that is not a JSON object");
      Record x;
      auto str = [&r](const char* k) {
        const auto v = r.find(k);
        return v != r.end() && v->is_string() ? v->get<std::string>() : std::string();
      };
      auto num = [&r](const char* k) {
        const auto v = r.find(k);
        return v != r.end() && v->is_number() ? v->get<double>() : 0.0;
      };
      x.library = str("library");
      x.collective = str("collective");
      x.variant = str("variant");
      x.bytes = static_cast<std::uint64_t>(num("bytes"));
      x.median_us = num("median_us");
      x.min_us = num("min_us");
      x.mbps = num("bandwidth_MBps");
      out.push_back(std::move(x));
    }
    return out;
  }

  std::string sizes_arg(const std::vector<std::uint64_t>& sizes) const {
    std::string s;
    for (std::uint64_t b : sizes) s += (s.empty() ? "" : ",") + human(b);
    return s;
  }

  // ---- measurements
  Value memcpy_bw() {
    std::vector<std::uint64_t> sizes;
    if (o_.mode == Mode::smoke)
      sizes = {4096, 65536};
    else if (o_.mode == Mode::quick)
      sizes = {4096, 65536, 524288, 1u << 20, 2u << 20, 8u << 20};
    else
      for (std::uint64_t b = 4096; b <= (64u << 20); b *= 4) sizes.push_back(b);
    std::vector<std::string> args = {"--memcpy", "--sizes", sizes_arg(sizes)};
    if (o_.mode != Mode::full) args.insert(args.end(), {"--iters", o_.mode == Mode::smoke ? "3" : "20"});
    const auto recs = bench(0, args);
    Value hot = Value::array(), cold = Value::array();
    for (const Record& r : recs) {
      Value e = Value::object();
      e["bytes"] = Value(r.bytes);
      e["GBps"] = Value(r.mbps / 1000.0);
      e["median_us"] = Value(r.median_us);
      (r.variant == "hot" ? hot : cold).push_back(std::move(e));
    }
    Value m = Value::object();
    m["hot"] = std::move(hot);
    m["off_cache"] = std::move(cold);
    return m;
  }

  Value paths() {
    struct Path {
      const char* name;
      std::vector<std::string> env, args;
    };
    std::vector<Path> list = {{"shm", {}, {}}};
    if (o_.mode != Mode::smoke) {
      list.push_back({"shm-ring", {"STRATA_SHM_DIRECT=off"}, {}});
      list.push_back({"shm-cma", {"STRATA_CMA_THRESHOLD=4096"}, {}});
    }
    if (o_.mode == Mode::full) {
      list.push_back({"fabric", {}, {"--backend", "fabric"}});
      list.push_back({"fabric-shm", {}, {"--backend", "fabric", "--provider", "shm"}});
    }
    const std::vector<std::uint64_t> sizes = o_.mode == Mode::smoke
                                                 ? std::vector<std::uint64_t>{8, 4096}
                                                 : std::vector<std::uint64_t>{8, 4096, 65536, 1u << 20, 4u << 20};
    Value out = Value::object();
    for (const Path& p : list) {
      std::vector<std::string> args = {
          "--transport",    "--no-memcpy", "--sizes",
          sizes_arg(sizes), "--iters",     o_.mode == Mode::smoke ? "5" : o_.mode == Mode::quick ? "30" : "200"};
      args.insert(args.end(), p.args.begin(), p.args.end());
      Value rows = Value::array();
      try {
        for (const Record& r : bench(2, args, p.env)) {
          Value e = Value::object();
          e["op"] = Value(r.collective);
          e["variant"] = Value(r.variant);
          e["bytes"] = Value(r.bytes);
          e["median_us"] = Value(r.median_us);
          e["MBps"] = Value(r.mbps);
          rows.push_back(std::move(e));
        }
      } catch (const std::exception& e) {
        rows = Value(std::string("not measured: ") + e.what());
      }
      out[p.name] = std::move(rows);
    }
    return out;
  }

  Value executor() {
    // Executor cost per node, and a tiny collective's call-to-ready time with a
    // progress server (1 thread) and inline (0: the waiter drives progress);
    // their difference (server_minus_inline_us) bounds the progress hand-off (negative:
    // the server answers sooner than the waiter polling itself).
    Value ns = Value::object(), call = Value::object(), inl = Value::object(), handoff = Value::object();
    for (const Record& r : bench(2, {"--engine"})) {
      if (r.collective.rfind("engine-", 0) != 0) continue;
      const std::string what = r.collective.substr(7);
      if (r.variant == "call-to-ready") {
        call[what] = Value(r.median_us);
      } else if (r.library == "strata") {
        ns[what] = Value(r.median_us * 1000.0);
      }
    }
    for (const Record& r : bench(2, {"--engine"}, {"STRATA_PROGRESS_THREADS=0"})) {
      if (r.collective.rfind("engine-", 0) != 0 || r.variant != "call-to-ready") continue;
      const std::string what = r.collective.substr(7);
      inl[what] = Value(r.median_us);
      if (const auto srv = call.find(what); srv != call.end()) handoff[what] = Value(srv->get<double>() - r.median_us);
    }
    Value m = Value::object();
    m["ns_per_node"] = std::move(ns);
    m["tiny_call_to_ready_us"] = std::move(call);
    m["tiny_call_to_ready_us_inline_progress"] = std::move(inl);
    m["server_minus_inline_us"] = std::move(handoff);
    return m;
  }

  // ---- crossover searches
  struct Search {
    const char* field;
    std::vector<std::uint64_t> candidates;  // the default is always added
    std::vector<std::string> colls;
    std::vector<std::uint64_t> sizes;
    const char* why;
    std::vector<std::string> extra = {};   // more strata-bench arguments (e.g. --persistent)
    std::vector<std::string> launch = {};  // more strata-run arguments (e.g. --hosts 2)
    // Which measured (collective, bytes) points count, given the table so far
    // (null: all): a point where every candidate runs the same plan adds only noise.
    std::function<bool(const std::string&, std::uint64_t, const Tuning&)> scored = nullptr;
    // Whether a point of @p bytes runs another plan under value @p alt than under @p def (null: every
    // point counts). An alternative is compared with the default only where it differs: a point where
    // both run one plan adds its noise to the ratio's spread and can veto a real win.
    std::function<bool(std::uint64_t bytes, std::uint64_t alt, std::uint64_t def, const Tuning&)> differs = nullptr;
  };

  // Over ~80 lines: the whole search plan is one table, read top to bottom.
  std::vector<Search> plan() const {
    constexpr std::uint64_t K = 1024, M = 1024 * 1024;
    if (o_.mode == Mode::smoke) return {{"pipeline_fragment", {64 * K}, {"bcast"}, {256 * K}, "smoke test"}};
    const bool q = o_.mode == Mode::quick;
    // Search::differs of a threshold compared as "bytes <= value" (up_to) or "bytes >= value" (from):
    // the allreduce crossovers (allreduce_auto in compile_allreduce.cpp).
    const auto up_to = [](std::uint64_t b, std::uint64_t alt, std::uint64_t def, const Tuning&) {
      return (b <= alt) != (b <= def);
    };
    const auto from = [](std::uint64_t b, std::uint64_t alt, std::uint64_t def, const Tuning&) {
      return (b >= alt) != (b >= def);
    };
    std::vector<Search> s = {
        {"pipeline_fragment",
         q ? std::vector<std::uint64_t>{64 * K, 256 * K} : std::vector<std::uint64_t>{32 * K, 64 * K, 256 * K, 512 * K},
         {"bcast", "reduce"},
         q ? std::vector<std::uint64_t>{256 * K, 1 * M, 4 * M}
           : std::vector<std::uint64_t>{256 * K, 1 * M, 4 * M, 16 * M},
         "tree pipelines: fragment size for messages above it"},
        {"allreduce_rd_max_bytes",
         q ? std::vector<std::uint64_t>{4 * K, 64 * K} : std::vector<std::uint64_t>{4 * K, 64 * K, 256 * K},
         {"allreduce"},
         q ? std::vector<std::uint64_t>{8 * K, 32 * K} : std::vector<std::uint64_t>{8 * K, 32 * K, 128 * K},
         "allreduce on one host: recursive doubling vs rabenseifner",
         {},
         {},
         nullptr,
         up_to},
        // The same choice across two virtual hosts (loopback). Session 23: the
        // one-host table's 4 KiB, applied to the network too, took the
        // 2 x 1 host 8 KiB allreduce (10 Gbit/s) from 11.6-11.9 to 22.2-22.7 us.
        // Loopback shows the rounds' latency but no link's bandwidth: it chose
        // 256 KiB, and rd at 64 KiB then lost 48 vs 37 us to rabenseifner at
        // 10 Gbit/s. Hence candidates up to 32 KiB (full: 64 KiB).
        {"allreduce_net_rd_max_bytes",
         q ? std::vector<std::uint64_t>{4 * K, 32 * K} : std::vector<std::uint64_t>{4 * K, 32 * K, 64 * K},
         {"allreduce"},
         q ? std::vector<std::uint64_t>{8 * K, 16 * K, 32 * K}
           : std::vector<std::uint64_t>{8 * K, 16 * K, 32 * K, 64 * K},
         "allreduce across hosts: recursive doubling vs rabenseifner (measured across 2 virtual hosts over loopback)",
         {},
         {"--hosts", "2"},
         nullptr,
         up_to},
        {"allreduce_ring_min_bytes",
         q ? std::vector<std::uint64_t>{512 * K, 8 * M} : std::vector<std::uint64_t>{512 * K, 8 * M, 32 * M},
         {"allreduce"},
         q ? std::vector<std::uint64_t>{1 * M, 4 * M} : std::vector<std::uint64_t>{1 * M, 4 * M, 16 * M},
         "allreduce: rabenseifner vs ring",
         {},
         {},
         nullptr,
         from},
        // Across two virtual hosts (loopback): tcp;ofi_rxm against the default,
        // libfabric's net provider (event-driven progress; docs/fabric.md).
        {"fabric_prefer_net",
         {0},
         {"allreduce", "alltoall", "bcast"},
         q ? std::vector<std::uint64_t>{8 * K, 1 * M} : std::vector<std::uint64_t>{8 * K, 64 * K, 1 * M, 4 * M},
         "communicators spanning hosts: tcp;ofi_rxm instead of libfabric's net provider (measured across 2 virtual "
         "hosts over loopback)",
         {},
         {"--hosts", "2"}},
        // Across two virtual hosts of this machine (the libfabric path, over
        // loopback): what a fragment costs the network path here.
        {"net_pipeline_fragment",
         q ? std::vector<std::uint64_t>{128 * K} : std::vector<std::uint64_t>{128 * K, 256 * K},
         q ? std::vector<std::string>{"bcast", "allreduce"}
           : std::vector<std::string>{"bcast", "allreduce", "alltoall"},
         q ? std::vector<std::uint64_t>{1 * M, 4 * M} : std::vector<std::uint64_t>{1 * M, 4 * M, 16 * M},
         "communicators spanning hosts: fragment size (measured across 2 virtual hosts over loopback)",
         {},
         {"--hosts", "2"}},
        // 2 MiB: on 2026-11-26 (session 16) a 2 MiB window took allgather
        // 256 KiB-2 MiB to 0.49-0.68x and alltoall 1-2 MiB to 0.49-0.68x of
        // the default's time, alltoall 256-512 KiB 1.04-1.07x (4 alternating
        // rounds); earlier sessions measured single copy losing from 256 KiB.
        // 1 GiB: no limit in practice. On 2026-11-27 (session 19) single copy
        // took allgather / alltoall 4 MiB from 1.27-1.45 ms to 0.78-0.88 ms
        // and 16 MiB from 5.9-6.8 ms to 4.1-6.0 ms against the window path.
        // Quick: no 2 MiB candidate. It differs from 1 GiB only at the 4 MiB
        // point, where single copy won every measurement (session 25's table:
        // 852 vs 1153 us allgather), but the 1 MiB point is bimodal per launch
        // (136 or 212 us for the same plan), and one fast launch made the quick
        // search choose 2 MiB (then allgather / alltoall 4 MiB 1.5-1.6x MPI).
        {"sym_single_copy_max_bytes",
         q ? std::vector<std::uint64_t>{0, 128 * K, 1024 * M}
           : std::vector<std::uint64_t>{0, 128 * K, 1 * M, 2 * M, 1024 * M},
         {"allgather", "alltoall"},
         q ? std::vector<std::uint64_t>{64 * K, 256 * K, 1 * M, 4 * M}
           : std::vector<std::uint64_t>{64 * K, 256 * K, 1 * M, 4 * M, 16 * M},
         "one host: single copy (CMA reads from the owner's buffer) vs two copies through the window"},
    };
    // Mapped plans vs the window plans at 8-16 KiB (quick) / 8-32 KiB (full).
    // On the reference VM (session 12) the mapped plans won 7-16% at 8-16 KiB
    // in its fast placement and lost 2-3x in its slow one; on the session-19
    // VM they won 1.2-1.5x at 8-16 KiB (bcast, allgather, allreduce). The
    // search runs under the placement control of measure(), so it decides in
    // the placement the machine is in (docs/tuning.md, "Placement"). Before
    // the single-copy searches below, which then decide where single copy
    // takes over from the plan this one chose.
    // Session 22: 32 KiB took allreduce 32 KiB from 9.0-9.4 to 8.0-8.1 us and
    // reduce_scatter 32 KiB from 4.6-5.7 to 4.0-4.1 (broadcast, allgather and
    // alltoall read single copy from 16 KiB by default, so they are measured
    // only where mapped vs window still decides them: 8-16 KiB).
    s.push_back({"mapped_max_bytes",
                 q ? std::vector<std::uint64_t>{16 * K, 32 * K} : std::vector<std::uint64_t>{0, 16 * K, 32 * K, 64 * K},
                 {"allgather", "alltoall", "allreduce", "reduce_scatter"},
                 q ? std::vector<std::uint64_t>{8 * K, 16 * K, 32 * K}
                   : std::vector<std::uint64_t>{8 * K, 16 * K, 32 * K, 64 * K},
                 "one host: mapped plans (flags, reads through the mapping) vs the window plans (puts and signals)",
                 {},
                 {},
                 // allgather / alltoall blocks inside the single-copy window read single copy whatever this field says.
                 [](const std::string& coll, std::uint64_t bytes, const Tuning& t) {
                   return (coll != "allgather" && coll != "alltoall") || bytes < t.sym_single_copy_min_bytes ||
                          bytes > t.sym_single_copy_max_bytes;
                 }});
    // reduce_scatter_block's own mapped limit (Tuning::mapped_rs_max_bytes),
    // after mapped_max_bytes (which sizes the slot it must fit). Session 24 (2
    // ranks, one per core): 64 KiB 5.0 us mapped vs 8-11 on the ring.
    s.push_back({"mapped_rs_max_bytes",
                 q ? std::vector<std::uint64_t>{0} : std::vector<std::uint64_t>{0, 32 * K, 128 * K},
                 {"reduce_scatter"},
                 q ? std::vector<std::uint64_t>{32 * K, 64 * K} : std::vector<std::uint64_t>{32 * K, 64 * K, 128 * K},
                 "one host: reduce_scatter_block as a mapped plan up to this vector size (at least mapped_max_bytes)"});
    // Slots of the mapped area (Tuning::mapped_slots): how many calls pass
    // before a rank rewrites the slot its peers read. Session 23 (2 ranks, one
    // per core): 16 took 8 KiB allgather from 1.87-2.09 to 1.69-1.74 us and
    // allreduce 8 KiB from 2.69-2.92 to 2.22-2.27, 32 KiB from 8.0-8.6 to
    // 6.2-6.6, against the credits' 4. The caches' sizes decide it.
    s.push_back(
        {"mapped_slots",
         q ? std::vector<std::uint64_t>{4, 32} : std::vector<std::uint64_t>{4, 8, 32, 64},
         {"allgather", "allreduce", "reduce_scatter"},
         q ? std::vector<std::uint64_t>{8, 8 * K, 16 * K} : std::vector<std::uint64_t>{8, 8 * K, 16 * K, 32 * K},
         "one host: slots of the mapped area (a slot is rewritten this many calls after it was read)",
         {},
         {},
         // Only where a mapped plan runs (the bytes one rank writes into its
         // slot: the whole vector for allreduce and reduce_scatter, the block for allgather).
         [](const std::string& coll, std::uint64_t bytes, const Tuning& t) {
           if (bytes > t.mapped_max_bytes) return false;
           return coll != "allgather" || bytes < t.sym_single_copy_min_bytes;
         }});
    // Where single copy (CMA reads out of the owner's buffer) starts to beat
    // the mapped plans (two copies through the owner's slot) and the window
    // plans: inside its window single copy is chosen before the mapped plans
    // (compile_mapped.cpp). Session 22 (2-core VM): single copy won from
    // 8 KiB (broadcast 16 KiB 1.8 vs 2.9 us; allgather 32 KiB 3.4 vs 9.0 us on
    // the window plan the old 64 KiB minimum left it on; alltoall alike).
    s.push_back({"bcast_single_copy_min_bytes",
                 q ? std::vector<std::uint64_t>{8 * K, 32 * K} : std::vector<std::uint64_t>{4 * K, 8 * K, 32 * K},
                 {"bcast"},
                 q ? std::vector<std::uint64_t>{4 * K, 8 * K, 16 * K}
                   : std::vector<std::uint64_t>{4 * K, 8 * K, 16 * K, 32 * K},
                 "one host: broadcast read out of the root's buffer (CMA) from this size, vs the mapped plan",
                 {},
                 {},
                 nullptr,
                 // Single copy for a broadcast of b bytes when min <= b <= max (compile_single_copy.cpp).
                 [](std::uint64_t b, std::uint64_t alt, std::uint64_t def, const Tuning& t) {
                   return b <= t.bcast_single_copy_max_bytes && (b >= alt) != (b >= def);
                 }});
    // The mapped broadcast in two halves (Tuning::mapped_bcast_split_min_bytes),
    // where the mapped plan still decides a broadcast (below the single-copy
    // window this machine just chose). Session 24 (2 ranks, one per core): 8
    // KiB 1.58-1.63 vs 1.64-1.69 us split, 12 KiB 2.01-2.08 vs 2.14-2.24; 4
    // KiB split lost (1.44-1.55 vs 0.77-1.21).
    s.push_back({"mapped_bcast_split_min_bytes",
                 q ? std::vector<std::uint64_t>{0, 4 * K} : std::vector<std::uint64_t>{0, 4 * K, 16 * K},
                 {"bcast"},
                 q ? std::vector<std::uint64_t>{4 * K, 8 * K, 12 * K}
                   : std::vector<std::uint64_t>{4 * K, 8 * K, 12 * K, 16 * K, 24 * K},
                 "one host: mapped broadcast in two halves from this size (readers copy the first while the root "
                 "copies the second), vs whole",
                 {},
                 {},
                 [](const std::string&, std::uint64_t bytes, const Tuning& t) {
                   return bytes < t.bcast_single_copy_min_bytes && bytes <= t.mapped_max_bytes;
                 },
                 // Two halves when split > 0 and b >= split (compile_mapped.cpp).
                 [](std::uint64_t b, std::uint64_t alt, std::uint64_t def, const Tuning&) {
                   return (alt > 0 && b >= alt) != (def > 0 && b >= def);
                 }});
    // Where the broadcast's single copy hands over to the pipelined window
    // tree (two copies). Session 23 (2 ranks, one per core, hot buffers):
    // single copy 9.3-9.9 vs 19-21 us at 256 KiB, 18-20 vs 33-49 at 512 KiB,
    // 53-88 vs 69-72 at 1 MiB (bimodal), 206-222 vs 178-190 at 2 MiB; the
    // reference VM of session 12 chose 0 (never). Full: also 0 and 256 KiB.
    // The 1 MiB point is bimodal on both VMs (about 35 or 90 us from one
    // launch to the next): the per-point worst-case rule keeps a candidate
    // that only won on the slow mode from being chosen.
    // Session 25: with the split single copy (the root writes 1/n of each
    // reader's buffer) single copy beat the tree at every size measured (2
    // ranks, one per core: 1 MiB 25-29 vs 78-84 us, 4 MiB 231 vs 456-632, 16
    // MiB 1.2 vs 2.8 ms; off-cache 16 MiB 1.7-1.8 vs 3.3-3.8 ms), hence the
    // default 1 TiB ("always") and the candidates that stop earlier.
    s.push_back({"bcast_single_copy_max_bytes",
                 q ? std::vector<std::uint64_t>{256 * K, 1 * M} : std::vector<std::uint64_t>{0, 256 * K, 1 * M, 4 * M},
                 {"bcast"},
                 q ? std::vector<std::uint64_t>{512 * K, 1 * M, 2 * M}
                   : std::vector<std::uint64_t>{256 * K, 512 * K, 1 * M, 2 * M, 4 * M, 8 * M},
                 "one host: broadcast read out of the root's buffer (CMA) up to this size, vs the pipelined window "
                 "tree"});
    // The split single-copy broadcast (Tuning::bcast_single_copy_split_min_bytes):
    // the root writes the last 1/n of each reader's buffer while they read
    // the rest. Session 25 (2 ranks, one per core): 16 KiB 1.80-1.87 vs
    // 1.96-1.99 us, 64 KiB 2.9-3.0 vs 3.5-3.6, 1 MiB 26-35 vs 86-87; 8 KiB
    // mixed. Only where the single-copy plan decides a broadcast.
    s.push_back({"bcast_single_copy_split_min_bytes",
                 q ? std::vector<std::uint64_t>{0, 64 * K} : std::vector<std::uint64_t>{0, 8 * K, 64 * K},
                 {"bcast"},
                 q ? std::vector<std::uint64_t>{16 * K, 32 * K, 256 * K}
                   : std::vector<std::uint64_t>{8 * K, 16 * K, 32 * K, 64 * K, 256 * K, 1 * M},
                 "one host: the single-copy broadcast's root writes 1/n of each reader's buffer from this size (the "
                 "readers read the rest), vs the readers copying all",
                 {},
                 {},
                 [](const std::string&, std::uint64_t bytes, const Tuning& t) {
                   return bytes >= t.bcast_single_copy_min_bytes && bytes <= t.bcast_single_copy_max_bytes;
                 }});
    // The single-copy allreduce (Tuning::allreduce_single_copy_*): each rank
    // folds its chunk out of the others' send buffers and writes it into their
    // outputs. Session 25 (2 ranks, one per core): 64 KiB 5.4 vs 9.6 us, 1 MiB
    // 113 vs 184, 4 MiB 576 vs 990 against the table's rabenseifner / ring;
    // off-cache 1 MiB 352 vs 326. "Never" (0) and stopping at 1 MiB are the
    // candidates; the per-point rule keeps it off where it loses.
    s.push_back({"allreduce_single_copy_max_bytes",
                 q ? std::vector<std::uint64_t>{0} : std::vector<std::uint64_t>{0, 1 * M, 4 * M},
                 {"allreduce"},
                 q ? std::vector<std::uint64_t>{64 * K, 1 * M, 4 * M}
                   : std::vector<std::uint64_t>{64 * K, 256 * K, 1 * M, 4 * M, 16 * M},
                 "one host: allreduce in single copies (fold the own chunk out of the others' buffers, write it into "
                 "theirs) up to this size, vs the table's rd / rabenseifner / ring",
                 {},
                 {},
                 [](const std::string&, std::uint64_t bytes, const Tuning& t) {
                   return bytes >= t.allreduce_single_copy_min_bytes && bytes > t.mapped_max_bytes;
                 }});
    // reduce_scatter_block in single copies (Tuning::rs_single_copy_*). Session
    // 25 (2 ranks, one per core) against the ring: 64 KiB 3.6 vs 5.0 us, 1 MiB
    // 49 vs 93, 4 MiB 364 vs 445, 16 MiB 1.5 vs 2.2 ms.
    s.push_back(
        {"rs_single_copy_max_bytes",
         q ? std::vector<std::uint64_t>{0} : std::vector<std::uint64_t>{0, 1 * M, 4 * M},
         {"reduce_scatter"},
         q ? std::vector<std::uint64_t>{64 * K, 1 * M, 4 * M}
           : std::vector<std::uint64_t>{64 * K, 256 * K, 1 * M, 4 * M, 16 * M},
         "one host: reduce_scatter_block folding each block straight out of the others' buffers up to this "
         "size (the whole vector), vs the mapped plans and the ring",
         {},
         {},
         [](const std::string&, std::uint64_t bytes, const Tuning& t) { return bytes >= t.rs_single_copy_min_bytes; }});
    s.push_back(
        {"sym_single_copy_min_bytes",
         q ? std::vector<std::uint64_t>{8 * K, 64 * K} : std::vector<std::uint64_t>{4 * K, 8 * K, 32 * K, 64 * K},
         {"allgather", "alltoall"},
         q ? std::vector<std::uint64_t>{4 * K, 8 * K, 16 * K, 32 * K}
           : std::vector<std::uint64_t>{4 * K, 8 * K, 16 * K, 32 * K, 64 * K},
         "one host: allgather / alltoall blocks read out of their owner's buffer (CMA) from this size, vs the "
         "mapped and window plans"});
    // Start spins (docs/dag.md, "Waiting"): a blocking small call whose peer
    // is a little late looks again before it publishes its instance. Session
    // 20: 2-rank 8 B allreduce 0.45 -> 0.37 us, barrier 0.42-0.46 -> 0.37 us
    // with 16; the pause between looks and the peers' lateness are the
    // machine's, so the count is measured here.
    s.push_back({"start_spins",
                 q ? std::vector<std::uint64_t>{0} : std::vector<std::uint64_t>{0, 64},
                 {"allreduce", "barrier"},
                 {8, 64},
                 "blocking small calls: looks at a late flag before publishing the instance"});
    if (!q) {
      s.push_back({"sym_large_fragment",
                   {64 * K, 256 * K, 512 * K},
                   {"allgather", "alltoall"},
                   {2 * M, 8 * M},
                   "allgather / alltoall large messages: fragment size"});
      s.push_back({"persistent_direct_min_bytes",
                   {0, 256 * K},
                   {"bcast", "allreduce"},
                   {256 * K, 1 * M, 4 * M},
                   "persistent plans: direct mode (into the receivers' buffers) vs the window path",
                   {"--persistent"}});
      s.push_back({"inline_bytes",
                   {64 * K, 8 * M},
                   {"bcast", "allreduce"},
                   {256 * K, 2 * M},
                   "copies / reductions inline vs as oneTBB tasks"});
      s.push_back({"sym_stream_min_bytes",
                   {4 * M, 48 * M},
                   {"allgather"},
                   {2 * M, 8 * M},
                   "allgather: non-temporal copies into recv"});
    }
    return s;
  }

  // Median time per (collective, bytes) of one run with table @p t.
  std::map<std::pair<std::string, std::uint64_t>, double> measure(const Tuning& t, const Search& s) {
    strata::coll::TuningFile f;
    f.machine = here_;
    f.table = t;
    f.tool = "strata-tune candidate";
    const std::string path = tmp_ + "/candidate.json";
    strata::coll::write_tuning_file(path, f);
    std::string colls;
    for (const auto& c : s.colls) colls += (colls.empty() ? "" : ",") + c;
    std::vector<std::string> args = {"--coll", colls, "--no-memcpy", "--sizes", sizes_arg(s.sizes)};
    args.insert(args.end(), s.extra.begin(), s.extra.end());
    if (o_.mode == Mode::smoke) args.insert(args.end(), {"--iters", "3", "--warmup", "1"});
    if (o_.mode == Mode::quick) args.insert(args.end(), {"--iters", "15", "--warmup", "3"});
    std::map<std::pair<std::string, std::uint64_t>, double> out;
    // Placement control (docs/tuning.md, "Placement"): a VM's two cores can
    // change how fast they hand data to each other (2-4x) under a running
    // job. Each measurement is bracketed by strata-handoff-probe; one whose
    // probes disagree with each other or with the search's first measurement
    // (reference) is taken again, up to 3 times, so that the candidates of
    // one search are compared in one placement.
    for (int attempt = 0;; ++attempt) {
      // One probe between two measurements brackets both (the previous one's after is this one's before).
      const double before = last_probe_ > 0 ? last_probe_ : placement();
      out.clear();
      for (const Record& r : bench(o_.ranks, args, {"STRATA_TUNING=" + path}, s.launch))
        if (r.library == "strata" && (!s.scored || s.scored(r.collective, r.bytes, file_.table)))
          out[{r.collective, r.bytes}] = r.median_us;
      const double after = placement();
      last_probe_ = after;
      if (before <= 0 || after <= 0) break;  // no probe: nothing to compare
      if (ref_probe_ <= 0 && same_state(before, after)) ref_probe_ = std::min(before, after);
      if (same_state(before, after) && same_state(before, ref_probe_)) break;
      if (attempt == 2) {
        // Steady, but not in the reference placement: the machine moved for
        // good; searches() measures the search again from the start.
        if (same_state(before, after))
          moved_ = true;
        else
          ++unstable_;
        break;
      }
      ++remeasured_;
    }
    return out;
  }

  // 64 KiB handed between two processes (strata-handoff-probe), median us; 0 without the probe.
  double placement() {
    if (probe_.empty()) return 0;
    const std::string cmd = probe_ + " --iters 1000 --size 65536 2>/dev/null";
    FILE* f = ::popen(cmd.c_str(), "r");
    if (f == nullptr) return 0;
    char line[256] = {0};
    double us = 0;
    if (std::fgets(line, sizeof line, f) != nullptr) {
      const char* m = std::strstr(line, "median ");
      if (m != nullptr) us = std::strtod(m + 7, nullptr);
    }
    (void)::pclose(f);
    probes_.push_back(us);
    return us;
  }
  static bool same_state(double a, double b) { return a > 0 && b > 0 && std::max(a, b) / std::min(a, b) < 1.5; }

  using Times = std::map<std::pair<std::string, std::uint64_t>, double>;  // (collective, bytes) -> median us

  // The searched field's candidates, their measurements per round, and placement bookkeeping.
  struct Rounds {
    std::vector<std::uint64_t> cand;  // sorted, the default among them
    std::size_t idef = 0;
    std::vector<std::vector<Times>> t;  // t[round][candidate]
    bool restarted = false;
  };

  // Measures every candidate of @p s in interleaved rounds: round r runs them
  // in ascending order when r is even, descending when odd, so that drift
  // over a search hits the default and its alternatives alike. A placement
  // that changed for good during the search (measure()) runs all rounds once
  // more in the new one.
  void measure_rounds(const Search& s, const TuningField& field, Rounds& m) {
    const int rounds = rounds_count();
    for (int pass = 0; pass < 2; ++pass) {
      moved_ = false;
      ref_probe_ = 0;
      last_probe_ = 0;
      m.t.assign(static_cast<std::size_t>(rounds), std::vector<Times>(m.cand.size()));
      for (int r = 0; r < rounds; ++r)
        for (std::size_t j = 0; j < m.cand.size(); ++j) {
          const std::size_t i = r % 2 == 0 ? j : m.cand.size() - 1 - j;
          Tuning t = file_.table;
          t.*field.member = m.cand[i];
          m.t[static_cast<std::size_t>(r)][i] = measure(t, s);
        }
      if (!moved_ || pass == 1) break;
      m.restarted = true;
    }
  }

  // The alternative @p i against the default, per round (paired: both from
  // the same round) and per point (median over the rounds).
  strata::tune::Alternative compare(const Search& s, const Rounds& m, std::size_t i) const {
    strata::tune::Alternative a;
    a.value = m.cand[i];
    std::map<std::pair<std::string, std::uint64_t>, std::vector<double>> per_point;
    for (const std::vector<Times>& round : m.t) {
      double lg = 0;
      std::size_t n = 0;
      for (const auto& [k, us] : round[i]) {
        const auto d = round[m.idef].find(k);
        if (d == round[m.idef].end() || d->second <= 0 || us <= 0) continue;
        if (s.differs && !s.differs(k.second, m.cand[i], m.cand[m.idef], file_.table)) continue;
        lg += std::log(us / d->second);
        ++n;
        per_point[k].push_back(us / d->second);
      }
      if (n > 0) a.ratios.push_back(std::exp(lg / static_cast<double>(n)));
    }
    for (const auto& [k, v] : per_point) {
      const double med = strata::tune::median(v);
      if (a.worst_where.empty() || med > a.worst_point) {
        a.worst_point = med;
        a.worst_where = k.first + " " + human(k.second);
      }
    }
    return a;
  }

  strata::tune::Rule rule() const {
    strata::tune::Rule r;
    r.margin = 0.05;
    r.point_tolerance = o_.mode == Mode::full ? 0.05 : 0.08;
    r.min_rounds = 3;
    return r;
  }
  int rounds_count() const { return o_.rounds > 0 ? o_.rounds : o_.mode == Mode::full ? 5 : 3; }
  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

  // Over ~80 lines: one search's record in the file and its progress line are written together.
  Value record(const Search& s, const Rounds& m, const std::vector<strata::tune::Alternative>& alts,
               const strata::tune::Choice& c, std::size_t ibest, std::size_t index, std::size_t count) {
    Value cands = Value::array();
    std::string line;
    char buf[160];
    for (std::size_t i = 0; i < m.cand.size(); ++i) {
      // Per point: the median over the rounds of this candidate's medians.
      std::map<std::pair<std::string, std::uint64_t>, std::vector<double>> pts;
      for (const std::vector<Times>& round : m.t)
        for (const auto& [k, us] : round[i]) pts[k].push_back(us);
      Value per = Value::array();
      for (const auto& [k, v] : pts) {
        Value e = Value::object();
        e["collective"] = Value(k.first);
        e["bytes"] = Value(k.second);
        e["median_us"] = Value(strata::tune::median(v));
        Value rr = Value::array();
        for (double x : v) rr.push_back(Value(x));
        e["rounds_us"] = std::move(rr);
        per.push_back(std::move(e));
      }
      Value cv = Value::object();
      cv["value"] = Value(m.cand[i]);
      cv["runs"] = Value(static_cast<std::uint64_t>(m.t.size()));
      if (i != m.idef) {
        const std::size_t a = i < m.idef ? i : i - 1;
        const strata::tune::Verdict& v = c.verdicts[a];
        Value rr = Value::array();
        for (double x : alts[a].ratios) rr.push_back(Value(x));
        cv["round_ratios"] = std::move(rr);
        cv["ratio_median"] = Value(v.r.median);
        cv["ratio_min"] = Value(v.r.lo);
        cv["ratio_max"] = Value(v.r.hi);
        cv["worst_vs_default"] = Value(alts[a].worst_point);
        cv["worst_at"] = Value(alts[a].worst_where);
        cv["verdict"] = Value(v.why);
        std::snprintf(buf, sizeof buf, "%s%s %.3f [%.3f-%.3f]", line.empty() ? "" : ", ", label(m.cand[i]).c_str(),
                      v.r.median, v.r.lo, v.r.hi);
        line += buf;
      }
      cv["times"] = std::move(per);
      cands.push_back(std::move(cv));
    }
    Value r = Value::object();
    r["what"] = Value(s.why);
    std::string cl;
    for (const auto& x : s.colls) cl += (cl.empty() ? "" : ",") + x;
    r["collectives"] = Value(cl);
    Value sz = Value::array();
    for (std::uint64_t b : s.sizes) sz.push_back(Value(b));
    r["bytes"] = std::move(sz);
    r["ranks"] = Value(static_cast<std::uint64_t>(o_.ranks));
    if (!s.launch.empty()) {
      std::string la;
      for (const auto& x : s.launch) la += (la.empty() ? "" : " ") + x;
      r["launcher_args"] = Value(la);
    }
    r["rounds"] = Value(static_cast<std::uint64_t>(m.t.size()));
    r["default"] = Value(m.cand[m.idef]);
    r["chosen"] = Value(m.cand[ibest]);
    r["reason"] = Value(c.reason);
    r["candidates"] = std::move(cands);
    if (!probes_.empty()) {
      Value pl = Value::object();
      pl["reference_us"] = Value(ref_probe_);
      Value all_probes = Value::array();
      for (double v : probes_) all_probes.push_back(Value(v));
      pl["probes_us"] = std::move(all_probes);
      pl["remeasured"] = Value(static_cast<std::uint64_t>(remeasured_));
      pl["unstable"] = Value(static_cast<std::uint64_t>(unstable_));
      pl["restarted"] = Value(m.restarted);
      r["placement"] = std::move(pl);
    }
    // Progress: one line per decision, as it is made.
    std::printf(
        "[%2zu/%zu %5.1f s] %s: default %s vs %s (alt/default, median [min-max] of %zu rounds; placement probe %.1f "
        "us) -> %s: %s\n",
        index, count, elapsed(), s.field, label(m.cand[m.idef]).c_str(), line.c_str(), m.t.size(), ref_probe_,
        label(m.cand[ibest]).c_str(), c.reason.c_str());
    std::fflush(stdout);
    return r;
  }

  // The searches run in one sequence, each deciding from the table the ones before wrote.
  Value searches() {
    Value all = Value::object();
    const Tuning def{};
    const std::vector<Search> list = plan();
    for (std::size_t si = 0; si < list.size(); ++si) {
      const Search& s = list[si];
      const TuningField* field = nullptr;
      for (const TuningField& f : strata::coll::tuning_fields())
        if (std::strcmp(f.name, s.field) == 0) field = &f;
      if (field == nullptr) die(std::string("internal: no field ") + s.field);
      remeasured_ = unstable_ = 0;
      probes_.clear();
      Rounds m;
      m.cand = s.candidates;
      const std::uint64_t dv = def.*field->member;
      if (std::find(m.cand.begin(), m.cand.end(), dv) == m.cand.end()) m.cand.push_back(dv);
      std::sort(m.cand.begin(), m.cand.end());
      m.idef = static_cast<std::size_t>(std::find(m.cand.begin(), m.cand.end(), dv) - m.cand.begin());
      try {
        measure_rounds(s, *field, m);
      } catch (const std::exception& e) {
        // A search that needs more of the machine (virtual hosts: the
        // libfabric path) may not run everywhere: without it the field keeps
        // its value and the rest of the table is still written.
        if (s.launch.empty()) throw;
        Value r = Value::object();
        r["what"] = Value(s.why);
        r["default"] = Value(dv);
        r["chosen"] = Value(file_.table.*field->member);
        r["reason"] = Value(std::string("not measured (default kept): ") + e.what());
        all[s.field] = std::move(r);
        decisions_.push_back(
            {s.field, file_.table.*field->member, dv, 0.0, "skipped", "not measured: " + first_line(e.what())});
        std::printf("[%2zu/%zu %5.1f s] %s: not measured (default kept): %s\n", si + 1, list.size(), elapsed(), s.field,
                    first_line(e.what()).c_str());
        std::fflush(stdout);
        continue;
      }
      std::vector<strata::tune::Alternative> alts;
      for (std::size_t i = 0; i < m.cand.size(); ++i)
        if (i != m.idef) alts.push_back(compare(s, m, i));
      const strata::tune::Choice c = strata::tune::choose(alts, rule());
      std::size_t ibest = m.idef;
      if (c.index >= 0) {
        const auto a = static_cast<std::size_t>(c.index);
        ibest = a < m.idef ? a : a + 1;
      }
      file_.table.*field->member = m.cand[ibest];
      decisions_.push_back({s.field, m.cand[ibest], dv, ref_probe_, ibest == m.idef ? "kept" : "changed", c.reason});
      all[s.field] = record(s, m, alts, c, ibest, si + 1, list.size());
    }
    return all;
  }

  Value not_measured() const {
    Value m = Value::object();
    std::vector<std::string> searched;
    for (const Search& s : plan()) searched.emplace_back(s.field);
    auto why = [](const std::string& f) -> std::string {
      if (f == "allgather_bruck_max_bytes") return "Bruck is chosen only for n > 2 ranks; measured on 2: default kept";
      if (f == "alltoall_bruck_min_ranks" || f == "alltoall_bruck_max_block")
        return "needs at least 5 ranks (one per core) to measure: default kept";
      if (f == "allreduce_hier_rd_max_bytes") return "needs several hosts: default kept";
      if (f == "sym_large_message") return "not searched (tied to sym_large_fragment): default kept";
      if (f.find("_tree_") != std::string::npos || f.find("_pull_") != std::string::npos)
        return "tree shapes need several hosts (strata-tune --simulate searches them for a simulated machine): "
               "default kept";
      if (f == "fallback_fragment" || f == "gather_token_bytes") return "not searched (rare paths): default kept";
      return "searched only in full mode: default kept";
    };
    for (const TuningField& f : strata::coll::tuning_fields())
      if (std::find(searched.begin(), searched.end(), f.name) == searched.end()) m[f.name] = Value(why(f.name));
    return m;
  }

  struct Decision {
    std::string field;
    std::uint64_t value = 0, def = 0;
    double probe_us = 0;         // the search's placement reference
    std::string status, reason;  // status: "kept", "changed" or "skipped" (not measured)
  };
  std::vector<Decision> decisions_;

  Options o_;
  std::string dir_, run_, bench_, probe_, tmp_;
  std::vector<std::string> base_env_;
  strata::coll::Fingerprint here_;
  strata::coll::TuningFile file_;
  int nrun_ = 0;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  // Placement control of the current search (measure()).
  double ref_probe_ = 0, last_probe_ = 0;
  int remeasured_ = 0, unstable_ = 0;
  bool moved_ = false;
  std::vector<double> probes_;
};

// strata-tune --simulate: the model-based search (strata::sim::autotune) of a synthetic machine.
int simulate_main(const Options& o, const std::string& machine, int hosts, int ppn, const std::string& topology,
                  double max_loss) {
  namespace sim = strata::sim;
  if (machine.empty() && hosts == 0) die("--simulate needs --machine FILE (or --hosts and --topology)");
  if (o.ranks != 2) die("--ranks does not apply to --simulate (the machine file gives the ranks)");
  if (o.rounds != 0) die("--rounds does not apply to --simulate (nothing is measured, so nothing is noisy)");
  sim::MachineSpec m;
  sim::CostModel cost;
  if (!machine.empty()) sim::load_machine_file(machine, &m, &cost);
  if (hosts != 0) m.hosts = hosts;
  if (ppn != 0) m.ranks_per_host = ppn;
  if (!topology.empty()) m.topology = topology;
  sim::AutotuneOptions ao;
  ao.quick = o.mode != Mode::full;
  ao.max_loss = max_loss;
  if (o.mode == Mode::smoke) {
    ao.sizes = {8, 64 << 10};
    ao.allreduce_sizes = {1024, 64 << 10};
  }
  const std::string name = machine.empty() ? "synthetic" : std::filesystem::path(machine).filename().string();
  ao.machine_name = name;
  const char* mode = o.mode == Mode::full ? "" : o.mode == Mode::quick ? " --quick" : " --smoke";
  ao.tool = std::string("strata-tune --simulate") + mode + " --machine " + name + " (" + std::to_string(m.hosts) +
            " hosts x '" + m.topology + "', strata " + STRATA_VERSION_STRING + ")";
  ao.progress = [](const std::string& s) {
    std::printf("%s\n", s.c_str());
    std::fflush(stdout);
  };
  const sim::AutotuneResult r = sim::autotune(m, cost, ao);
  std::string out = o.out;
  if (out.empty()) out = "tuning-" + std::filesystem::path(name).stem().string() + ".json";
  strata::coll::write_tuning_file(out, r.file);
  (void)strata::coll::read_tuning_file(out);  // a file the parser refuses must not be left behind
  std::printf("%-10s %10s %12s %12s %8s\n", "collective", "bytes", "default_us", "tuned_us", "speedup");
  for (const sim::AutotunePoint& p : r.compare)
    std::printf("%-10s %10llu %12.2f %12.2f %8.3f\n", p.collective.c_str(), static_cast<unsigned long long>(p.bytes),
                p.default_us, p.tuned_us, p.tuned_us > 0 ? p.default_us / p.tuned_us : 0.0);
  std::printf("decisions (changed from the built-in defaults):\n");
  const Tuning def{};
  int changed = 0;
  for (const TuningField& f : strata::coll::tuning_fields()) {
    if (r.file.table.*f.member == def.*f.member) continue;
    ++changed;
    std::printf("  %-28s %llu (default %llu)\n", f.name, static_cast<unsigned long long>(r.file.table.*f.member),
                static_cast<unsigned long long>(def.*f.member));
  }
  if (changed == 0) std::printf("  none: the defaults are best on this model\n");
  std::printf(
      "strata-tune: wrote %s (%llu simulations; machine fingerprint cpu_model '%s': engines on a real "
      "machine ignore it, strata-sim --tuning applies it)\n",
      out.c_str(), static_cast<unsigned long long>(r.simulations), r.file.machine.cpu_model.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "Measures this machine (memcpy, same-host data paths, executor cost) and searches the tuning "
      "table's crossovers with real collectives on N ranks (strata-run + strata-bench from this "
      "directory). Writes the table (docs/tuning.md) to FILE, default " +
          strata::coll::default_tuning_path() + ".",
      "strata-tune"};
  auto* quick = app.add_flag_callback(
      "--quick", [&o] { o.mode = Mode::quick; },
      "about 1 min on 2 cores (46-67 s measured on a shared one): fewer sizes and candidates, 3 rounds");
  auto* smoke = app.add_flag_callback(
      "--smoke", [&o] { o.mode = Mode::smoke; },
      "about 5 s: tiny sizes, one search (tests; the table is not worth using)");
  auto* full = app.add_flag_callback(
      "--full", [&o] { o.mode = Mode::full; },
      "the default, about 5 min on 2 cores (310 s measured on a shared one): more candidates and sizes, 5 rounds");
  quick->excludes(smoke)->excludes(full);
  smoke->excludes(full);
  app.add_option("-o,--output", o.out, "tuning file to write");
  app.add_option("--ranks", o.ranks, "ranks for the collective runs, 2..64 (run one per core for meaningful numbers)")
      ->check(strata::cli::integer(2, 64));
  app.add_option("--rounds", o.rounds,
                 "interleaved rounds per search (default 3 in --quick and --smoke, 5 in full mode); an alternative "
                 "replaces a default only if it wins by more than 5% plus the spread of its per-round ratios")
      ->check(strata::cli::integer(3, 100));
  app.add_flag("-v,--verbose", o.verbose, "print every measurement command");
  bool simulate = false;
  std::string machine;
  int hosts = 0, ppn = 0;
  std::string topology;
  app.add_flag("--simulate", simulate,
               "search the table of a simulated machine (--machine) with strata-sim's model instead of measuring");
  app.add_option("--machine", machine, "--simulate: machine description file (sim/machines/*.machine)")
      ->type_name("FILE");
  app.add_option("--hosts", hosts, "--simulate: hosts (overrides the machine file)")
      ->check(strata::cli::integer(1, 1 << 20));
  app.add_option("--ppn", ppn, "--simulate: ranks per host (overrides the machine file)")
      ->check(strata::cli::integer(1, 1 << 16));
  double max_loss = 25;
  app.add_option("--max-loss", max_loss,
                 "--simulate: a candidate may be at most PCT percent slower than the current value at any size "
                 "(default 25)")
      ->type_name("PCT")
      ->check(CLI::Range(0.0, 1000.0));
  app.add_option("--topology", topology, "--simulate: hwloc synthetic topology of one host (overrides the file)");
  strata::cli::parse(app, argc, argv);
  if (simulate) {
    try {
      return simulate_main(o, machine, hosts, ppn, topology, max_loss / 100);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "strata-tune: %s\n", e.what());
      return 1;
    }
  }
  if (!machine.empty() || hosts != 0 || ppn != 0 || !topology.empty())
    die("--machine, --hosts, --ppn and --topology need --simulate");
  try {
    Tuner t(o);
    return t.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-tune: %s\n", e.what());
    return 1;
  }
}
