// The tuning table and its file (collectives/include/strata/collectives/tuning.hpp, docs/tuning.md).
#include "strata/collectives/tuning.hpp"
#include "strata/detail/env.hpp"

#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "json_codec.hpp"
#include "strata/error.hpp"

namespace strata::coll {

namespace {
constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kGiB = kKiB * kKiB * kKiB;
}  // namespace

// Over ~80 lines: a table, one entry per tuning field.
const std::vector<TuningField>& tuning_fields() {
  static const std::vector<TuningField> f = {
      {"allgather_bruck_max_bytes", &Tuning::allgather_bruck_max_bytes, 0, kGiB, 1,
       "allgather(v): Bruck up to this receive total (n > 2), ring above"},
      {"alltoall_bruck_min_ranks", &Tuning::alltoall_bruck_min_ranks, 2, 1u << 20, 1,
       "alltoall: Bruck from this many ranks (with small blocks), pairwise below"},
      {"alltoall_bruck_max_block", &Tuning::alltoall_bruck_max_block, 0, kGiB, 1,
       "alltoall: Bruck for blocks up to this many bytes"},
      {"allreduce_rd_max_bytes", &Tuning::allreduce_rd_max_bytes, 0, kGiB, 1,
       "allreduce: recursive doubling up to this many bytes (one-host communicators)"},
      {"allreduce_net_rd_max_bytes", &Tuning::allreduce_net_rd_max_bytes, 0, kGiB, 1,
       "allreduce: recursive doubling up to this many bytes on communicators that span hosts"},
      {"allreduce_ring_min_bytes", &Tuning::allreduce_ring_min_bytes, 0, 64 * kGiB, 1,
       "allreduce: ring from this many bytes, rabenseifner between"},
      {"allreduce_hier_rd_max_bytes", &Tuning::allreduce_hier_rd_max_bytes, 0, kGiB, 1,
       "\"hier\" allreduce: rd among the host leaders up to this, rabenseifner above"},
      {"sym_large_message", &Tuning::sym_large_message, 4 * kKiB, 64 * kGiB, 1,
       "allgather(v) / alltoall(v): messages from this size are large (own block copied per fragment)"},
      {"sym_large_fragment", &Tuning::sym_large_fragment, 4 * kKiB, kGiB, 64,
       "allgather(v) / alltoall(v): fragment size of large messages"},
      {"sym_stream_min_bytes", &Tuning::sym_stream_min_bytes, 0, 1024 * kGiB, 1,
       "allgather(v) / alltoall(v): non-temporal copies into recv from send + recv of this many bytes"},
      {"pipeline_fragment", &Tuning::pipeline_fragment, 4 * kKiB, kGiB, 64,
       "trees and step schedules: messages above this travel in fragments of this size"},
      {"fabric_prefer_net", &Tuning::fabric_prefer_net, 0, 1, 1,
       "ranks on several hosts, automatic provider choice: 1 = libfabric's net provider first where present, 0 = "
       "the usual order (tcp;ofi_rxm on socket networks); STRATA_PROVIDER overrides"},
      {"net_pipeline_fragment", &Tuning::net_pipeline_fragment, 4 * kKiB, kGiB, 64,
       "... of communicators spanning hosts (also allgather(v) / alltoall(v) large messages); capped by the window "
       "region"},
      {"fallback_fragment", &Tuning::fallback_fragment, 4 * kKiB, kGiB, 64,
       "fragment size when halves of a message exceed a window region"},
      {"gather_token_bytes", &Tuning::gather_token_bytes, 64, kGiB, 1,
       "ring gather/scatter: token hand-off split threshold"},
      {"broadcast_tree_host", &Tuning::broadcast_tree_host, 0, 64, 1,
       "broadcast: tree among the hosts (0 flat, 1 chain, k k-nomial radix k)"},
      {"broadcast_tree_package", &Tuning::broadcast_tree_package, 0, 64, 1,
       "broadcast: tree among one host's packages (0 flat, 1 chain, k k-nomial)"},
      {"broadcast_tree_numa", &Tuning::broadcast_tree_numa, 0, 64, 1,
       "broadcast: tree among one package's NUMA regions (0 flat, 1 chain, k k-nomial)"},
      {"broadcast_tree_core", &Tuning::broadcast_tree_core, 0, 64, 1,
       "broadcast: tree among one NUMA region's ranks (0 flat, 1 chain, k k-nomial)"},
      {"broadcast_pull_host", &Tuning::broadcast_pull_host, 0, 1, 1,
       "broadcast: edges between hosts pull (1) or push (0)"},
      {"broadcast_pull_package", &Tuning::broadcast_pull_package, 0, 1, 1,
       "broadcast: edges between packages of a host pull (1) or push (0)"},
      {"broadcast_pull_numa", &Tuning::broadcast_pull_numa, 0, 1, 1,
       "broadcast: edges between NUMA regions of a package pull (1) or push (0)"},
      {"broadcast_pull_core", &Tuning::broadcast_pull_core, 0, 1, 1,
       "broadcast: edges inside a NUMA region pull (1) or push (0)"},
      {"reduce_tree_host", &Tuning::reduce_tree_host, 0, 64, 1,
       "reduce: tree among the hosts (0 flat, 1 chain, k k-nomial radix k)"},
      {"reduce_tree_package", &Tuning::reduce_tree_package, 0, 64, 1,
       "reduce: tree among one host's packages (0 flat, 1 chain, k k-nomial)"},
      {"reduce_tree_numa", &Tuning::reduce_tree_numa, 0, 64, 1,
       "reduce: tree among one package's NUMA regions (0 flat, 1 chain, k k-nomial)"},
      {"reduce_tree_core", &Tuning::reduce_tree_core, 0, 64, 1,
       "reduce: tree among one NUMA region's ranks (0 flat, 1 chain, k k-nomial)"},
      {"allreduce_tree_host", &Tuning::allreduce_tree_host, 0, 64, 1,
       "tree allreduce: tree among the hosts (0 flat, 1 chain, k k-nomial radix k)"},
      {"allreduce_tree_package", &Tuning::allreduce_tree_package, 0, 64, 1,
       "tree allreduce: tree among one host's packages (0 flat, 1 chain, k k-nomial)"},
      {"allreduce_tree_numa", &Tuning::allreduce_tree_numa, 0, 64, 1,
       "tree allreduce: tree among one package's NUMA regions (0 flat, 1 chain, k k-nomial)"},
      {"allreduce_tree_core", &Tuning::allreduce_tree_core, 0, 64, 1,
       "tree allreduce: tree among one NUMA region's ranks (0 flat, 1 chain, k k-nomial)"},
      {"bcast_single_copy_min_bytes", &Tuning::bcast_single_copy_min_bytes, 0, 1024 * kGiB, 1,
       "one host: broadcasts of at least this many bytes are read straight out of the root's buffer (single copy, "
       "CMA) ..."},
      {"bcast_single_copy_max_bytes", &Tuning::bcast_single_copy_max_bytes, 0, 1024 * kGiB, 1,
       "... up to this many bytes (0: never)"},
      {"bcast_single_copy_split_min_bytes", &Tuning::bcast_single_copy_split_min_bytes, 0, 1024 * kGiB, 1,
       "one host, single-copy broadcast: from this many bytes the root writes the last 1/n of each reader's buffer "
       "(CMA write) while the readers read the rest (0: never)"},
      {"bcast_host_single_copy_min_bytes", &Tuning::bcast_host_single_copy_min_bytes, 0, 1024 * kGiB, 1,
       "across hosts: a broadcast of at least this many bytes (up to bcast_single_copy_max_bytes) reads single copy "
       "across the tree's same-host edges"},
      {"allreduce_single_copy_min_bytes", &Tuning::allreduce_single_copy_min_bytes, 0, 1024 * kGiB, 1,
       "one host: allreduce (not in place) of at least this many bytes in single copies: each rank folds its chunk "
       "straight out of the others' send buffers, then writes it into their outputs (CMA) ..."},
      {"allreduce_single_copy_max_bytes", &Tuning::allreduce_single_copy_max_bytes, 0, 1024 * kGiB, 1,
       "... up to this many bytes (0: never)"},
      {"rs_single_copy_min_bytes", &Tuning::rs_single_copy_min_bytes, 0, 1024 * kGiB, 1,
       "one host: reduce_scatter_block (not in place) of at least this many bytes (the whole vector) folds each "
       "rank's block straight out of the others' send buffers (single copy, CMA) ..."},
      {"rs_single_copy_max_bytes", &Tuning::rs_single_copy_max_bytes, 0, 1024 * kGiB, 1,
       "... up to this many bytes (0: never)"},
      {"single_copy_fold_piece", &Tuning::single_copy_fold_piece, 1, 1024 * kGiB, 1,
       "one host, single-copy allreduce and reduce_scatter_block: each rank's chunk in pieces of this many bytes, "
       "each folded (and written out) before the next"},
      {"sym_single_copy_min_bytes", &Tuning::sym_single_copy_min_bytes, 0, 1024 * kGiB, 1,
       "one host: allgather(v) / alltoall blocks of at least this many bytes are read straight out of their owner's "
       "buffer (single copy, CMA); across hosts (the same L >= 2 members on every host) allgather(v) blocks run "
       "hier-single-copy ..."},
      {"sym_single_copy_max_bytes", &Tuning::sym_single_copy_max_bytes, 0, 1024 * kGiB, 1,
       "... up to this many bytes (0: never)"},
      {"persistent_direct_min_bytes", &Tuning::persistent_direct_min_bytes, 0, 1024 * kGiB, 1,
       "persistent broadcast / allreduce plans of at least this many bytes write straight into the receivers' "
       "buffers (direct mode, one ready-to-receive signal per start; 0: never, always the window path)"},
      {"mapped_max_bytes", &Tuning::mapped_max_bytes, 0, 1024 * kGiB, 1,
       "one host: calls whose contribution per rank is at most this many bytes run as mapped plans (each rank's "
       "contribution copied into its own window, read or folded by the others through their mappings; 0: never)"},
      {"shared_mapped_max_bytes", &Tuning::shared_mapped_max_bytes, 0, 1024 * kGiB, 1,
       "one host, shared buffers: mapped plans up to this contribution per rank for the kinds with a single-copy "
       "plan (broadcast, scatter, gather, allgather, alltoall, reduce_scatter_block); above it they read straight "
       "out of the owners' buffers through the mappings"},
      {"mapped_rs_max_bytes", &Tuning::mapped_rs_max_bytes, 0, 1024 * kGiB, 1,
       "one host, reduce_scatter_block: mapped plans while the whole vector is at most the larger of this and "
       "mapped_max_bytes (and fits the mapped slot)"},
      {"mapped_bcast_split_min_bytes", &Tuning::mapped_bcast_split_min_bytes, 0, 1024 * kGiB, 1,
       "one host, mapped broadcast: from this many bytes the root offers its block in two halves, the readers "
       "copy the first while the root copies the second (0: never)"},
      {"mapped_slots", &Tuning::mapped_slots, 0, 1024, 1,
       "one host, mapped plans: slots of each rank's mapped area (a power of two, at least the credits; a slot is "
       "rewritten this many calls after it was read)"},
      {"inline_bytes", &Tuning::inline_bytes, 0, kGiB, 1,
       "engine: copies and reductions up to this run inline, not as a task (STRATA_INLINE_BYTES overrides)"},
      {"start_spins", &Tuning::start_spins, 0, std::uint64_t{1} << 20, 1,
       "engine: a straight start whose flag is late looks again this many times before it publishes the instance, "
       "while nothing else is in flight (0: never; STRATA_START_SPINS overrides)"},
  };
  return f;
}

const TuningField* tuning_field(const std::string& name) {
  for (const TuningField& f : tuning_fields())
    if (name == f.name) return &f;
  return nullptr;
}

bool Tuning::operator==(const Tuning& o) const noexcept {
  for (const TuningField& f : tuning_fields())
    if (this->*f.member != o.*f.member) return false;
  return true;
}

std::uint64_t Tuning::hash() const noexcept {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over (index, value) pairs
  std::uint64_t i = 0;
  for (const TuningField& f : tuning_fields()) {
    for (std::uint64_t w : {i++, this->*f.member})
      for (int b = 0; b < 8; ++b) {
        h ^= (w >> (8 * b)) & 0xFF;
        h *= 1099511628211ull;
      }
  }
  return h;
}

// ---------------------------------------------------------------- fingerprint
namespace {

std::string slurp(const std::string& path, bool* ok) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (ok != nullptr) *ok = false;
    return {};
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (ok != nullptr) *ok = !in.bad();
  return ss.str();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.pop_back();
  std::size_t a = 0;
  while (a < s.size() && (s[a] == ' ' || s[a] == '\t')) ++a;
  return s.substr(a);
}

}  // namespace

Fingerprint Fingerprint::here() {
  Fingerprint f;
  f.cpu_model = "unknown";
  {
    std::istringstream in(slurp("/proc/cpuinfo", nullptr));
    std::string line;
    while (std::getline(in, line)) {
      const std::size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      const std::string key = trim(line.substr(0, colon));
      if (key == "model name" || key == "Model" || key == "cpu model") {
        f.cpu_model = trim(line.substr(colon + 1));
        break;
      }
    }
  }
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  f.cores = n > 0 ? static_cast<std::uint64_t>(n) : 1;
  {
    std::uint64_t nodes = 0;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/sys/devices/system/node", ec)) {
      const std::string name = e.path().filename().string();
      if (name.size() > 4 && name.compare(0, 4, "node") == 0 &&
          name.find_first_not_of("0123456789", 4) == std::string::npos)
        ++nodes;
    }
    f.numa_nodes = nodes > 0 ? nodes : 1;
  }
  {
    std::istringstream in(slurp("/proc/meminfo", nullptr));
    std::string key;
    std::uint64_t kb = 0;
    while (in >> key) {
      if (key == "MemTotal:") {
        in >> kb;
        break;
      }
      in.ignore(1 << 20, '\n');
    }
    f.memory_bytes = kb * 1024;
  }
  struct utsname u {};
  f.kernel = uname(&u) == 0 ? std::string(u.release) : "unknown";
  return f;
}

std::string Fingerprint::difference(const Fingerprint& h) const {
  auto q = [](const std::string& s) { return "'" + s + "'"; };
  if (cpu_model != h.cpu_model) return "cpu_model: " + q(cpu_model) + " in the file, " + q(h.cpu_model) + " here";
  if (cores != h.cores) return "cores: " + std::to_string(cores) + " in the file, " + std::to_string(h.cores) + " here";
  if (numa_nodes != h.numa_nodes)
    return "numa_nodes: " + std::to_string(numa_nodes) + " in the file, " + std::to_string(h.numa_nodes) + " here";
  if (memory_bytes != h.memory_bytes)
    return "memory_bytes: " + std::to_string(memory_bytes) + " in the file, " + std::to_string(h.memory_bytes) +
           " here";
  if (kernel != h.kernel) return "kernel: " + q(kernel) + " in the file, " + q(h.kernel) + " here";
  return {};
}

namespace {

using detail::Json;

Json machine_json(const Fingerprint& m) {
  Json o = Json::object();
  o["cpu_model"] = m.cpu_model;
  o["cores"] = m.cores;
  o["numa_nodes"] = m.numa_nodes;
  o["memory_bytes"] = m.memory_bytes;
  o["kernel"] = m.kernel;
  return o;
}

}  // namespace

std::string Fingerprint::to_json() const { return detail::dump_pretty(machine_json(*this)); }

// ---------------------------------------------------------------- file
std::string TuningFile::to_json() const {
  Json doc = Json::object();
  doc["strata_tuning"] = kTuningVersion;
  doc["created"] = created;
  doc["tool"] = tool;
  doc["machine"] = machine_json(machine);
  Json d = Json::object();
  for (const TuningField& f : tuning_fields()) d[f.name] = table.*f.member;
  doc["decisions"] = std::move(d);
  Json meas = detail::parse_strict(measurements.empty() ? std::string("{}") : measurements, "tuning measurements");
  if (!meas.is_object())
    throw Error(Errc::invalid_argument,
                std::string("tuning measurements: expected an object, got ") + detail::type_name(meas));
  doc["measurements"] = std::move(meas);
  return detail::dump_pretty(doc);
}

namespace {

[[noreturn]] void bad(const std::string& where, const std::string& path, const std::string& what) {
  throw Error(Errc::invalid_argument, "tuning file " + where + ": field '" + path + "': " + what);
}

/// What a type check expects: the JSON type names of the files' messages.
enum class Want { object, string, number };

bool is(const Json& v, Want t) {
  switch (t) {
    case Want::object:
      return v.is_object();
    case Want::string:
      return v.is_string();
    case Want::number:
      return v.is_number();
  }
  return false;
}

const char* name(Want t) { return t == Want::object ? "object" : t == Want::string ? "string" : "number"; }

const Json& need(const Json& obj, const char* key, Want t, const std::string& where, const std::string& prefix) {
  const std::string path = prefix.empty() ? key : prefix + "." + key;
  const auto it = obj.find(key);
  if (it == obj.end()) bad(where, path, "missing");
  if (!is(*it, t)) bad(where, path, std::string("expected ") + name(t) + ", got " + detail::type_name(*it));
  return *it;
}

/// The number's text, for messages ("expected an unsigned integer, got 65536.5").
std::string number_text(const Json& v) {
  std::string s = detail::dump_pretty(v);
  s.pop_back();  // the trailing newline
  return s;
}

std::uint64_t need_uint(const Json& obj, const char* key, const std::string& where, const std::string& prefix) {
  const Json& v = need(obj, key, Want::number, where, prefix);
  if (!v.is_number_unsigned())
    bad(where, prefix.empty() ? key : prefix + "." + key, "expected an unsigned integer, got " + number_text(v));
  return v.get<std::uint64_t>();
}

void parse_machine(const Json& doc, const std::string& where, Fingerprint* m) {
  const Json& mach = need(doc, "machine", Want::object, where, "");
  m->cpu_model = need(mach, "cpu_model", Want::string, where, "machine").get<std::string>();
  m->cores = need_uint(mach, "cores", where, "machine");
  m->numa_nodes = need_uint(mach, "numa_nodes", where, "machine");
  m->memory_bytes = need_uint(mach, "memory_bytes", where, "machine");
  m->kernel = need(mach, "kernel", Want::string, where, "machine").get<std::string>();
}

void parse_decisions(const Json& doc, const std::string& where, Tuning* table) {
  const Json& dec = need(doc, "decisions", Want::object, where, "");
  for (const auto& m : dec.items()) {
    const TuningField* field = tuning_field(m.key());
    const std::string path = "decisions." + m.key();
    // Retired decisions of older tables: accepted, without effect (fastpath_bytes:
    // the small-message fast path, replaced by plans in 0.18; docs/tuning.md).
    const bool retired = field == nullptr && m.key() == "fastpath_bytes";
    if (field == nullptr && !retired) bad(where, path, "unknown decision (docs/tuning.md lists them)");
    if (!m.value().is_number())
      bad(where, path, std::string("expected an unsigned integer, got ") + detail::type_name(m.value()));
    if (!m.value().is_number_unsigned())
      bad(where, path, "expected an unsigned integer, got " + number_text(m.value()));
    if (retired) continue;
    const auto v = m.value().get<std::uint64_t>();
    if (v < field->lo || v > field->hi)
      bad(where, path,
          std::to_string(v) + " is out of range [" + std::to_string(field->lo) + ", " + std::to_string(field->hi) +
              "]");
    if (v % field->multiple != 0)
      bad(where, path, std::to_string(v) + " is not a multiple of " + std::to_string(field->multiple));
    table->*field->member = v;
  }
}

}  // namespace

TuningFile parse_tuning(const std::string& text, const std::string& where) {
  const Json doc = detail::parse_strict(text, "tuning file " + where);
  if (!doc.is_object()) bad(where, "$", std::string("expected an object, got ") + detail::type_name(doc));
  const std::uint64_t version = need_uint(doc, "strata_tuning", where, "");
  if (version != kTuningVersion)
    bad(where, "strata_tuning",
        "version " + std::to_string(version) + " is not supported (this build reads version " +
            std::to_string(kTuningVersion) + "; run strata-tune again)");
  TuningFile f;
  for (const auto& m : doc.items()) {
    const std::string& k = m.key();
    if (k != "strata_tuning" && k != "created" && k != "tool" && k != "machine" && k != "decisions" &&
        k != "measurements")
      bad(where, k, "unknown field (expected strata_tuning, created, tool, machine, decisions, measurements)");
  }
  if (doc.contains("created")) f.created = need(doc, "created", Want::string, where, "").get<std::string>();
  if (doc.contains("tool")) f.tool = need(doc, "tool", Want::string, where, "").get<std::string>();
  parse_machine(doc, where, &f.machine);
  parse_decisions(doc, where, &f.table);
  if (const auto meas = doc.find("measurements"); meas != doc.end()) {
    if (!meas->is_object()) bad(where, "measurements", std::string("expected object, got ") + detail::type_name(*meas));
    f.measurements = meas->dump();
  }
  return f;
}

TuningFile read_tuning_file(const std::string& path) {
  // stat first: a FIFO would block the open, a device (/dev/zero) never end.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      throw Error(Errc::invalid_argument, "tuning file " + path +
                                              ": not a regular file (a JSON file is expected); STRATA_TUNING=off "
                                              "ignores it");
    constexpr long long kMaxBytes = 16LL << 20;  // strata-tune writes a few KiB
    if (st.st_size > kMaxBytes)
      throw Error(Errc::invalid_argument, "tuning file " + path + ": " + std::to_string(st.st_size) +
                                              " bytes, more than the limit of " + std::to_string(kMaxBytes) +
                                              "; STRATA_TUNING=off ignores it");
  }
  bool ok = false;
  const std::string text = slurp(path, &ok);
  if (!ok)
    throw Error(Errc::invalid_argument, "tuning file " + path + ": cannot read it (" + std::strerror(errno) +
                                            "); STRATA_TUNING=off ignores it");
  return parse_tuning(text, path);
}

void write_tuning_file(const std::string& path, const TuningFile& f) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  const std::string text = f.to_json();  // throws for bad measurements, before any file exists
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(Errc::invalid_argument, "tuning file " + path + ": cannot write " + tmp);
    out << text;
    out.flush();
    if (!out) throw Error(Errc::invalid_argument, "tuning file " + path + ": write to " + tmp + " failed");
  }
  fs::rename(tmp, p, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error(Errc::invalid_argument, "tuning file " + path + ": cannot rename the temporary into place");
  }
}

std::string default_tuning_path() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  if (xdg != nullptr && *xdg == '/') return std::string(xdg) + "/strata/tuning.json";
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home != '\0') return std::string(home) + "/.config/strata/tuning.json";
  return {};
}

TuningChoice load_tuning(const Fingerprint& here) {
  TuningChoice c;
  c.origin = "built-in";
  const char* env = strata::detail::env::get("STRATA_TUNING");
  std::string path;
  std::string origin;
  if (env != nullptr && *env != '\0') {
    const std::string v = env;
    if (v == "off") {
      c.note = "STRATA_TUNING=off";
      return c;
    }
    path = v;
    origin = "STRATA_TUNING";
  } else {
    path = default_tuning_path();
    origin = "default location";
    std::error_code ec;
    if (path.empty() || !std::filesystem::exists(path, ec)) {
      c.note = path.empty() ? "no tuning file (HOME and XDG_CONFIG_HOME unset, STRATA_TUNING unset)"
                            : "no tuning file at " + path + " (run strata-tune, or set STRATA_TUNING)";
      return c;
    }
  }
  TuningFile f = read_tuning_file(path);
  const std::string diff = f.machine.difference(here);
  if (!diff.empty()) {
    c.note = "tuning file " + path + " is for another machine (" + diff + "); run strata-tune here";
    return c;
  }
  c.table = f.table;
  c.path = path;
  c.origin = origin;
  c.created = f.created;
  c.tool = f.tool;
  return c;
}

}  // namespace strata::coll
