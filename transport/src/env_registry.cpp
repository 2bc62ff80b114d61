// The registry of STRATA_* environment variables (strata/detail/env.hpp).
// docs/environment.md is generated from this table: edit here, then run
// scripts/gen-env-doc.sh (the test env_doc_up_to_date fails until you do).
#include "strata/detail/env.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <unistd.h>

#include "strata/error.hpp"

namespace strata::detail::env {
namespace {

// clang-format off
const std::vector<Var> kVars = {
  // ------------------------------------------------------------ engine and collectives
  {"STRATA_PROGRESS_THREADS", "integer 0..64", "1", "engine",
   "communication-server threads per rank; 0 = inline mode (whoever waits drives progress)"},
  {"STRATA_PROGRESS_CPUS", "CPU list", "unbound", "engine",
   "CPU list for the servers, e.g. `1` or `0,2-3`"},
  {"STRATA_PROGRESS_SPIN", "integer 0..16777216", "256", "engine",
   "empty polls before a server yields, then blocks; in inline mode (`STRATA_PROGRESS_THREADS=0`) a waiter pauses "
   "for 8 x this many idle polls before it yields its core once (it yields at once when ranks outnumber CPUs)"},
  {"STRATA_PROGRESS_WAIT_SPIN", "integer 0..1000000 (us)", "2000", "engine",
   "microseconds a waiter polls the transport itself before sleeping (0 = never); every event restarts the count, "
   "so a transfer that keeps making progress is polled by its waiter to the end (docs/performance.md, \"Across hosts\"); "
   "the polling ends early while the executor's tasks and long nodes hold every CPU of the rank (docs/dag.md, "
   "\"Waiting\")"},
  {"STRATA_WAITER_BLOCK", "`transport` or `cv`", "transport", "engine",
   "where a waiter sleeps after its spin when progress servers run: `transport` (on the transport's descriptors plus "
   "its own eventfd, so an arriving message wakes it directly) or `cv` (on a condition variable, woken by a server "
   "that handled the message: two wake-ups in a row) (docs/fabric.md)"},
  {"STRATA_PROGRESS_MAX_BLOCK", "integer 100..600000000 (us)", "50000", "engine",
   "microseconds an idle progress server blocks at most before it looks again; bounds how late a silent peer's "
   "timeout is noticed. Fast-path calls do not depend on it: a blocked server counts as a sleeper and peers nudge it "
   "(docs/reliability.md)"},
  {"STRATA_TUNING", "path or `off`", "the per-user file", "collectives",
   "the tuning table (docs/tuning.md): a file path, or `off` for the built-in defaults. Unset: "
   "`$XDG_CONFIG_HOME/strata/tuning.json`, else `~/.config/strata/tuning.json`, if it exists. A file for another "
   "machine (fingerprint) means the defaults with one info line; a malformed file, a wrong version or a bad field "
   "stops the engine with an error naming the file and the field. Read once per engine; CTest sets `off`"},
  {"STRATA_START_SPINS", "integer 0..2^20", "the table's start_spins (16)", "engine",
   "overrides the tuning table's start_spins: times a straight start (a plan of memory nodes) whose flag is late looks again, a CPU pause between looks, "
   "before it publishes the instance; only while nothing else is in flight in the executor (0 = never; docs/dag.md, "
   "\"Waiting\")"},
  {"STRATA_INLINE_BYTES", "bytes 0..2^30", "1048576 (tuning table)", "engine",
   "copies/reductions up to this size run in the thread that made them ready instead of as a oneTBB task (wins over "
   "the tuning table's `inline_bytes`, as does a non-default `EngineOptions::inline_bytes`); a task hand-off costs "
   "tens of us on a busy core"},
  {"STRATA_INLINE_COMPUTE", "0 or 1", "1", "engine",
   "with 1, a rank whose executor has one thread's worth of CPU (bound to one core) runs compute nodes "
   "(CollOptions::compute, on_block) in the thread that has the core: at the end of the call's start, after every "
   "transfer was posted, or in a thread waiting in Future::get; 0 hands them to the oneTBB worker as tasks "
   "(docs/dag.md, \"Compute nodes on one core\")"},
  {"STRATA_THREADS", "integer 0..4096", "oneTBB default", "engine",
   "threads of the executor's task arena (0 = oneTBB default)"},
  {"STRATA_SLOT_BYTES", "bytes 4096..2^32", "1048576", "engine",
   "window bytes per in-flight collective per communicator"},
  {"STRATA_PLAN_CACHE_BYTES", "bytes 0..2^48", "67108864", "engine",
   "byte budget of the engine's plan cache, shared by all communicators; least recently used plans are evicted "
   "first, a plan larger than the budget is not cached, 0 caches nothing (docs/algorithms.md, \"Plan cache\")"},
  {"STRATA_WINDOW_BUDGET", "bytes 0..2^48", "1073741824", "engine",
   "bytes of communicator windows a rank registers before new communicators get smaller window slots (halved "
   "down to 64 KiB until their window fits every member's rest of the budget); 0 = no budget "
   "(docs/algorithms.md, \"Window memory\")"},
  {"STRATA_CREDITS", "power of two 1..64", "4", "engine",
   "collectives in flight per communicator (window slots)"},
  {"STRATA_CHECK", "0 or 1", "0", "engine",
   "1: before every collective, members compare (collective, root, datatype, op, count; the counts of allgatherv / "
   "reduce_scatter) with a small allreduce, and alltoallv checks that every rank i's `send_counts[j]` equals rank "
   "j's `recv_counts[i]` with one more 8-byte allreduce; a disagreement is an error on every rank (serializes calls: "
   "a debugging aid)"},
  {"STRATA_ALGO_<COLL>", "algorithm name", "automatic", "collectives",
   "algorithm of a collective (see docs/algorithms.md): BROADCAST, REDUCE: `tree`, `single`; ALLREDUCE: `tree`, "
   "`single`, `rd`, `rabenseifner`, `ring`, `hier`, `hier:rd`, `hier:rabenseifner`, `hier:ring`, `mapped`, "
   "`single-copy` (one host; not in place); GATHER(V), "
   "SCATTER(V): `tree`, `single`, `flat`, `ring`; ALLGATHER(V): `ring`, `rd`, `bruck`, `hier`, `numa-ring`; "
   "ALLTOALL(V): `pairwise`, `bruck` (not V), `pull`; REDUCE_SCATTER(_BLOCK): `ring`, `rh`, `pairwise`. Read once, "
   "at the first collective"},
  {"STRATA_TREE", "tree spec", "`host:binomial,package:binomial,numa:binomial,core:flat`", "collectives",
   "tree shape per level (`host:K,package:K,numa:K,core:K`, any subset, or `single:K`; K = flat, binary, chain, "
   "binomial or a radix; the package level has edges only on hosts with more than one package)"},
  {"STRATA_TREE_<COLL>", "tree spec", "`STRATA_TREE`", "collectives",
   "`STRATA_TREE` for one collective"},
  {"STRATA_FRAGMENT", "fragment spec", "auto", "collectives",
   "`none`, `fixed:BYTES`, `halves[:BYTES]`"},
  {"STRATA_FRAGMENT_<COLL>", "fragment spec", "`STRATA_FRAGMENT`", "collectives",
   "`STRATA_FRAGMENT` for one collective"},
  {"STRATA_DIRECTION_<COLL>", "direction spec", "`push`", "collectives",
   "who moves each fragment across a tree edge, for BROADCAST, SCATTER, SCATTERV (tree algorithms): `push` (sender "
   "writes after ready-to-receive), `pull` (receiver reads), or per level "
   "`host:pull,package:push,numa:push,core:pull` (any subset; `single:pull` for the single-level tree). `pull` in `STRATA_DIRECTION_<COLL>` of any other collective is an "
   "error naming `direction`. Below `CollOptions::direction`; read once"},
  {"STRATA_DIRECTION", "direction spec", "`push`", "collectives",
   "the same for every collective that can pull (broadcast, scatter, scatterv; scatterv with the automatic algorithm "
   "then uses the tree); the others ignore it. Below `STRATA_DIRECTION_<COLL>`"},
  {"STRATA_SINGLE_COPY", "on/off/always", "on", "engine",
   "single-copy (CMA) plans on one-host communicators (docs/algorithms.md, \"Single copy\"): `on` where the tuning "
   "table's windows (`bcast_single_copy_*`, `sym_single_copy_*`, `allreduce_single_copy_*`, `rs_single_copy_*`) say so, `always` for "
   "every automatic broadcast, allgather(v), alltoall, allreduce and reduce_scatter_block (the last three not in "
   "place) of any size, `off` never (two copies through the window). Read once"},
  {"STRATA_MAPPED", "on/off", "on", "engine",
   "`off`: no mapped plans on one-host communicators (docs/algorithms.md, \"Mapped plans\"): small calls run the "
   "window plans (puts and signals). Read once"},
  {"STRATA_FLAG_SHADOWS", "on/off", "on", "engine",
   "`off`: every credit check of a flag plan reads the same-host owner's flag word instead of this rank's recent "
   "copy of it first (docs/algorithms.md, \"Window flags\"; an A/B switch). Read once"},
  {"STRATA_VOUCH", "`off`", "on", "engine",
   "`off`: communicators spanning hosts run up to credits calls at once and grant per call instead of "
   "credits / 2 calls whose data signals vouch for the window slots (docs/algorithms.md, \"Vouching\")"},
  {"STRATA_WINDOW_FLAGS", "on/off", "on", "engine",
   "`off`: between ranks of one host keep the ready-to-receive signal before the first use of every window region "
   "instead of the window flags (docs/algorithms.md, \"Window flags\"). Read once"},
  {"STRATA_GRANTS", "on/off", "on", "engine",
   "`off`: between ranks on different hosts keep the ready-to-receive signal before the first use of every window "
   "region instead of grants (copies of the peers' window flags, docs/algorithms.md, \"Grants\"). Read once"},
  {"STRATA_ALLTOALL_MAX_OUTSTANDING", "integer 1..1048576", "128", "collectives",
   "alltoall(v): remote operations (puts; gets of `pull`) a rank keeps in flight. Read once"},
  {"STRATA_TRACE", "path prefix", "unset", "dag",
   "trace prefix: each rank writes `<prefix>.<rank>.json`; merge with `strata-trace-merge`"},
  // ------------------------------------------------------------ logging
  {"STRATA_LOG_LEVEL", "trace/debug/info/warn/error/critical/off", "warn", "log",
   "level of the strata logger. `info` adds one line each for the bootstrap (method, ranks, hosts), the topology, "
   "the transport (shm / fabric, provider, interface) and the algorithm of every compiled plan"},
  {"STRATA_LOG_FILE", "path", "stderr", "log",
   "write the log to this file instead of stderr (appending). `%r` in the name is replaced by the rank "
   "(`strata.%r.log` gives one file per rank); without `%r` all ranks append to one file"},
  // ------------------------------------------------------------ bootstrap and topology
  {"STRATA_TOPOLOGY", "hwloc synthetic spec or XML path", "real machine", "bootstrap",
   "hwloc synthetic description or XML path to place ranks on (also `strata-run --topology`)"},
  {"STRATA_REQUIRE_LAUNCHER", "0 or 1", "0", "bootstrap",
   "1: a program started without a launcher fails instead of running as one rank"},
  {"STRATA_BOOTSTRAP_TIMEOUT", "seconds (>= 0)", "none", "bootstrap",
   "seconds bounding each bootstrap allgather/barrier"},
  // ------------------------------------------------------------ transport
  {"STRATA_INTRA", "`shm` or `fabric`", "`shm`", "transport",
   "backend for same-host peers"},
  {"STRATA_PROVIDER", "libfabric provider name", "auto (`tcp;ofi_rxm` here)", "transport",
   "libfabric provider for the fabric backend, e.g. `shm`"},
  {"STRATA_TIMEOUT", "integer 1..86400000 (ms)", "30000", "transport",
   "ms without progress after which a peer is declared dead; a call pending this long makes its rank write a "
   "hang report (docs/reliability.md)"},
  {"STRATA_REPORT", "`on` or `off`", "`on`", "engine",
   "hang reports: a watchdog thread writes this rank's pending calls when one is older than STRATA_TIMEOUT or on "
   "SIGUSR2 (`off`: neither, and no SIGUSR2 handler)"},
  {"STRATA_REPORT_DIR", "directory", "`$STRATA_JOB_DIR/reports`, else `/tmp/strata-report-<job id>`", "engine",
   "where each rank writes its hang report (report.RANK); under mpirun / srun rank 0 merges them on SIGUSR2"},
  {"STRATA_CMA_THRESHOLD", "bytes (K/M/G suffix)", "64M", "shm",
   "bytes from which shm uses single-copy CMA"},
  {"STRATA_SHM_RING_BYTES", "power of two 4096..2^30", "262144", "shm",
   "bytes per shm signal ring"},
  {"STRATA_SHM_DIRECT", "bytes or `off`", "1024", "shm",
   "bytes from which puts/gets into a same-host peer's mapped region (communicator windows) are one direct memcpy; "
   "`off` = always through the ring"},
  {"STRATA_SHM_NT", "auto/on/off", "auto", "shm",
   "direct puts of >= 8 KiB into a same-host peer's mapping: `auto` times each memcpy and uses non-temporal stores "
   "for the next 64 puts to that peer when it ran below STRATA_SHM_NT_GBPS (docs/transport.md, \"Adaptive "
   "non-temporal puts\"); `on` always non-temporal; `off` always memcpy"},
  {"STRATA_SHM_NT_GBPS", "GB/s (0, 1e6]", "6", "shm",
   "STRATA_SHM_NT=auto: a timed memcpy into a peer's mapping slower than this switches puts to that peer to "
   "non-temporal stores"},
  {"STRATA_MR_CACHE", "integer 1..16777216", "1024", "transport",
   "registration cache bound (entries)"},
  {"STRATA_FI_SIGNAL", "`msg` or `cqdata`", "auto", "fabric",
   "force the fabric signal path"},
  {"STRATA_FI_ATOMICS", "`emulate`", "native", "fabric",
   "`emulate`: force emulated fetch_add (all ranks)"},
  {"STRATA_FI_DELIVERY", "`flush`", "auto", "fabric",
   "`flush`: a flush read instead of FI_DELIVERY_COMPLETE"},
  {"STRATA_FI_WAIT", "`fd` / `poll`", "fd for the `net` provider, else poll", "fabric",
   "`fd`: open the CQ with FI_WAIT_FD and block on it; `poll`: no wait object, the backend is polled"},
  {"STRATA_FI_DEBUG", "set or unset", "unset", "fabric",
   "set (any value): log every CQ entry at info level (with `STRATA_LOG_LEVEL=info` or lower)"},
  {"STRATA_FI_INLINE", "`off`", "on", "fabric",
   "`off`: message-path put_with_signal of <= 960 B as write + message instead of one message carrying the data "
   "(measurement only)"},
  {"STRATA_FI_MAILBOX", "`off`", "on", "fabric",
   "`off`: no mailboxes; signals and small put_with_signal travel as remote CQ data or messages (measurement only; "
   "docs/fabric.md)"},
  {"STRATA_FI_INJECT", "`off`", "on", "fabric",
   "`off`: signals and put_with_signal up to the provider's inject_size are posted with completions instead of "
   "fi_inject* (measurement only; docs/fabric.md)"},
  {"STRATA_FI_INJECT_GUARD", "`off`", "on with tcp;ofi_rxm before libfabric 1.18", "fabric",
   "`off`: no write counter on the endpoint, so ofi_rxm passes RMA injects straight to tcp, whose 1.17 error path "
   "crashes ofi_rxm when a peer dies with one queued (docs/fabric.md, \"The inject guard\"; measurement only)"},
  {"STRATA_FI_DOORBELL", "`off`", "on", "fabric",
   "`off`: no UDP doorbell; an idle rank polls libfabric every 1 ms instead of sleeping until a peer rings "
   "(docs/fabric.md)"},
  {"STRATA_FI_STREAM_POLL", "`off`", "on", "fabric",
   "`off`: pollers nap (20 us) during bulk fabric transfers too (measurement only; docs/fabric.md)"},
  // ------------------------------------------------------------ set by the launcher
  {"STRATA_RANK", "integer", "-", "launcher", "rank in [0, N)", true},
  {"STRATA_SIZE", "integer", "-", "launcher", "number of ranks N", true},
  {"STRATA_HOST", "integer", "-", "launcher", "virtual host of the rank", true},
  {"STRATA_NHOSTS", "integer", "-", "launcher", "number of virtual hosts", true},
  {"STRATA_LOCAL_RANK", "integer", "-", "launcher", "index among the ranks of its host", true},
  {"STRATA_LOCAL_SIZE", "integer", "-", "launcher", "number of ranks on its host", true},
  {"STRATA_JOB_ID", "string", "-", "launcher", "unique per job; part of every shared-memory object name", true},
  {"STRATA_JOB_SECRET", "64 hex digits", "-", "launcher",
   "32 random bytes (hex): authenticates the rendezvous, names segments", true},
  {"STRATA_JOB_DIR", "path", "-", "launcher", "the job's private 0700 directory, removed at exit", true},
  {"STRATA_RDV", "path", "-", "launcher", "path of the rendezvous socket", true},
  {"STRATA_BIND", "`core`, `numa` or `none`", "-", "launcher", "binding the launcher applied", true},
  {"STRATA_NET_RATE_BPS", "integer (bit/s)", "-", "launcher",
   "with `strata-run --net` / `strata-net`: the emulated links' rate (0 = unshaped)", true},
  {"STRATA_NET_HOSTS", "list", "-", "launcher", "`strata-net`: the emulated hosts' addresses, for the command it runs",
   true},
  {"STRATA_NET_HOSTFILE", "path", "-", "launcher", "`strata-net`: an Open MPI hostfile of the emulated hosts", true},
  {"STRATA_NET_MPICH_HOSTS", "path", "-", "launcher", "`strata-net`: an MPICH host list of the emulated hosts", true},
  {"STRATA_NET_RSH", "path", "-", "launcher", "`strata-net`: an rsh agent that enters an emulated host", true},
};
// clang-format on

constexpr const char* kHeader =
    "# Environment variables\n"
    "\n"
    "<!-- Generated by `strata-info --env-markdown` from transport/src/env_registry.cpp\n"
    "     (scripts/gen-env-doc.sh); edit the registry, not this file. -->\n"
    "\n"
    "Every variable strata reads, in one table. A malformed value is an error that\n"
    "names the variable and the expected type (never silently ignored). Set by the\n"
    "launcher = do not set by hand; `strata-run` (or PMIx) provides them.\n"
    "`strata-info --config` prints the same table with the values set in the\n"
    "current environment.\n";

constexpr const char* kFooter =
    "\n"
    "## Build and scripts\n"
    "\n"
    "| variable / option | meaning |\n"
    "|---|---|\n"
    "| `STRATA_BUILD_DIR` | build directory of `scripts/setup.sh` / `scripts/test.sh` (default `build/`) |\n"
    "| `STRATA_TEST_LABEL` | CTest label regex for `scripts/test.sh` |\n"
    "| CMake `STRATA_*` options | see docs/building.md |\n";

struct Section {
  const char* title;
  std::vector<const char*> components;
};

bool matches(const Var& v, std::string_view name) noexcept {
  const std::string_view n(v.name);
  const std::size_t lt = n.find('<');
  if (lt == std::string_view::npos) return n == name;
  return name.size() > lt && name.substr(0, lt) == n.substr(0, lt);
}

std::string escape_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

bool is_secret(const std::string& name) { return name.find("SECRET") != std::string::npos; }

}  // namespace

const std::vector<Var>& registry() { return kVars; }

const Var* find(std::string_view name) noexcept {
  for (const Var& v : kVars) {
    if (std::string_view(v.name).find('<') == std::string_view::npos && v.name == name) return &v;
  }
  for (const Var& v : kVars) {
    if (matches(v, name)) return &v;
  }
  return nullptr;
}

void require(std::string_view name) {
  if (find(name) == nullptr)
    throw std::logic_error("strata: environment variable " + std::string(name) +
                           " is read but not in the registry (transport/src/env_registry.cpp)");
}

const char* get(const char* name) {
  require(name);
  const char* v = std::getenv(name);
  return (v == nullptr || *v == '\0') ? nullptr : v;
}

std::string get_string(const char* name, const std::string& def) {
  const char* v = get(name);
  return v == nullptr ? def : std::string(v);
}

long long get_int(const char* name, long long def, long long lo, long long hi) {
  const char* v = get(name);
  if (v == nullptr) return def;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi)
    throw Error(Errc::invalid_argument, std::string(name) + "='" + v + "': expected an integer in [" +
                                            std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

bool get_switch(const char* name, bool def) {
  const char* v = get(name);
  if (v == nullptr) return def;
  const std::string s(v);
  if (s == "on" || s == "1" || s == "true" || s == "yes") return true;
  if (s == "off" || s == "0" || s == "false" || s == "no") return false;
  throw Error(Errc::invalid_argument, std::string(name) + "='" + s + "': expected on or off");
}

bool is(const char* name, const char* value) {
  const char* v = get(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

std::string markdown() {
  const std::vector<Section> sections = {
      {"Engine and collectives", {"engine", "collectives", "dag"}},
      {"Logging", {"log"}},
      {"Bootstrap and topology", {"bootstrap"}},
      {"Transport", {"transport", "shm", "fabric"}},
  };
  std::string out = kHeader;
  for (const Section& s : sections) {
    out += std::string("\n## ") + s.title +
           "\n\n| variable | type | default | component | meaning |\n|---|---|---|---|---|\n";
    for (const Var& v : kVars) {
      bool in = false;
      for (const char* c : s.components) in = in || std::strcmp(c, v.component) == 0;
      if (!in || v.launcher) continue;
      out += "| `" + std::string(v.name) + "` | " + escape_cell(v.type) + " | " + escape_cell(v.def) + " | " +
             v.component + " | " + escape_cell(v.doc) + " |\n";
    }
  }
  out += "\n## Set by the launcher\n\nDo not set these by hand.\n\n| variable | value | meaning |\n|---|---|---|\n";
  for (const Var& v : kVars) {
    if (!v.launcher) continue;
    out += "| `" + std::string(v.name) + "` | " + escape_cell(v.type) + " | " + escape_cell(v.doc) + " |\n";
  }
  out += kFooter;
  return out;
}

std::string describe() {
  std::string out;
  for (const Var& v : kVars) {
    out += std::string(v.name) + "  [" + v.type + "; default " + v.def + "; " + v.component +
           (v.launcher ? "; set by strata-run" : "") + "]\n";
    const std::string_view n(v.name);
    const std::size_t lt = n.find('<');
    if (lt == std::string_view::npos) {
      if (const char* val = std::getenv(v.name)) {
        out += std::string("    = ") +
               (is_secret(v.name) ? "(hidden, " + std::to_string(std::strlen(val)) + " chars)" : std::string(val)) +
               "\n";
      }
    } else {
      for (char** e = ::environ; e != nullptr && *e != nullptr; ++e) {
        const std::string kv = *e;
        const std::size_t eq = kv.find('=');
        if (eq == std::string::npos) continue;
        const std::string name = kv.substr(0, eq);
        if (matches(v, name) && find(name) == &v) out += "    " + kv + "\n";
      }
    }
    out += std::string("    ") + v.doc + "\n";
  }
  std::string unknown;
  for (char** e = ::environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('='));
    if (name.rfind("STRATA_", 0) == 0 && find(name) == nullptr) unknown += "    " + name + "\n";
  }
  if (!unknown.empty()) out += "\nset but not read by strata (a typo?):\n" + unknown;
  return out;
}

}  // namespace strata::detail::env
