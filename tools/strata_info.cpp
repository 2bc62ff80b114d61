// strata-info: what strata sees of this job and this machine.
//
// Runs alone (a single rank) or under strata-run -n N / a PMIx launcher. Every
// rank places itself (discover_hierarchy); rank 0 prints the machine of each
// host, the hierarchy with every rank's place, the leaders per level, the
// libfabric providers that offer RMA, the tuning table in effect (from where,
// every decision; docs/tuning.md) and the STRATA_* settings in effect.
//
//   strata-info [--json] [--version] [-c|--config] [--env-markdown]
//               [--algorithms [--markdown]]
//               [--plan COLL --bytes B --ranks N --hosts H [--algo A] [--tree T] [--topology SPEC]]
#include <rdma/fabric.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include "strata/collectives/compile.hpp"
#include "strata/collectives/registry.hpp"
#include "strata/collectives/select.hpp"
#include "strata/collectives/tuning.hpp"
#include "strata/detail/build_config.hpp"

#include "strata/detail/env.hpp"
#include "strata/transport/bootstrap.hpp"
#include "strata/transport/topology.hpp"
#include "strata/version.hpp"

extern char** environ;

namespace {

struct Provider {
  std::string name;                  ///< prov_name, e.g. "tcp;ofi_rxm"
  std::vector<std::string> fabrics;  ///< fabric names, e.g. "192.0.2.0/24"
};

// Providers (and their fabrics) that offer RMA on reliable datagram endpoints.
std::vector<Provider> rma_providers(std::string* error) {
  fi_info* hints = fi_allocinfo();
  if (hints == nullptr) {
    *error = "fi_allocinfo failed";
    return {};
  }
  hints->caps = FI_RMA;
  hints->ep_attr->type = FI_EP_RDM;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  fi_info* info = nullptr;
  const int rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr, 0, hints, &info);
  fi_freeinfo(hints);
  if (rc != 0) {
    if (rc != -FI_ENODATA) *error = std::string("fi_getinfo: ") + fi_strerror(-rc);
    return {};
  }
  std::map<std::string, std::set<std::string>> by_provider;
  for (const fi_info* i = info; i != nullptr; i = i->next) {
    if (i->fabric_attr == nullptr || i->fabric_attr->prov_name == nullptr) continue;
    auto& fabrics = by_provider[i->fabric_attr->prov_name];
    if (i->fabric_attr->name != nullptr) fabrics.insert(i->fabric_attr->name);
  }
  fi_freeinfo(info);
  std::vector<Provider> out;
  for (const auto& [name, fabrics] : by_provider) out.push_back({name, {fabrics.begin(), fabrics.end()}});
  return out;
}

bool is_secret_name(const std::string& name) {
  for (const char* word : {"SECRET", "KEY", "TOKEN", "PASS", "AUTH"}) {
    if (name.find(word) != std::string::npos) return true;
  }
  return false;
}

// STRATA_* variables, sorted, values of secret-looking names masked.
std::vector<std::pair<std::string, std::string>> strata_environment() {
  std::map<std::string, std::string> vars;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("STRATA_", 0) != 0) continue;
    const std::size_t eq = entry.find('=');
    const std::string name = entry.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : entry.substr(eq + 1);
    vars[name] = is_secret_name(name) ? "(hidden, " + std::to_string(value.size()) + " chars)" : value;
  }
  return {vars.begin(), vars.end()};
}

std::string list(const std::vector<int>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? " " : "") + std::to_string(v[i]);
  return out;
}

struct HostMachine {
  int host = 0;
  std::string summary;
  std::string source;
};

// Each host leader describes its machine; everybody takes part in the allgather.
std::vector<HostMachine> host_machines(strata::Bootstrap& boot, const strata::Hierarchy& hier) {
  std::string mine;
  if (hier.leader(boot.rank(), strata::Level::host) == boot.rank()) {
    std::string spec = boot.job().topology;
    if (spec.empty()) {
      if (const char* env = strata::detail::env::get("STRATA_TOPOLOGY")) spec = env;
    }
    try {
      const strata::Machine m(spec);
      mine = m.summary() + '\n' + m.source();
    } catch (const strata::Error& e) {  // still take part in the allgather
      mine = std::string("unavailable\n") + e.what();
    }
  }
  const auto blobs = boot.allgather(mine.data(), mine.size());
  std::vector<HostMachine> out;
  for (int leader : hier.host_leaders()) {
    const auto& b = blobs.at(static_cast<std::size_t>(leader));
    const std::string text(reinterpret_cast<const char*>(b.data()), b.size());
    const std::size_t nl = text.find('\n');
    out.push_back({hier.place(leader).host, text.substr(0, nl), nl == std::string::npos ? "" : text.substr(nl + 1)});
  }
  return out;
}

// The tuning table as every engine of this process would load it (the same
// resolution: STRATA_TUNING, the default location, built-in); error: the
// reason it would refuse to start.
struct TuningView {
  strata::coll::TuningChoice choice;
  std::string error;
};

TuningView tuning_view() {
  TuningView v;
  try {
    v.choice = strata::coll::load_tuning();
  } catch (const std::exception& e) {
    v.error = e.what();
    v.choice = strata::coll::TuningChoice{};
  }
  return v;
}

void print_tuning_text(const TuningView& v) {
  const strata::coll::Tuning def{};
  std::printf("\n== tuning table (docs/tuning.md; strata-tune writes it)\n");
  if (!v.error.empty()) {
    std::printf("ERROR: %s\n(engines refuse to start with it; STRATA_TUNING=off or run strata-tune again)\n",
                v.error.c_str());
  } else if (v.choice.path.empty()) {
    std::printf("in effect: built-in defaults (%s)\n", v.choice.note.c_str());
  } else {
    std::printf("in effect: %s (%s), written %s by %s\n", v.choice.path.c_str(), v.choice.origin.c_str(),
                v.choice.created.empty() ? "?" : v.choice.created.c_str(),
                v.choice.tool.empty() ? "?" : v.choice.tool.c_str());
  }
  const std::string dflt = strata::coll::default_tuning_path();
  std::printf("default location: %s\n", dflt.empty() ? "(none: HOME unset)" : dflt.c_str());
  for (const strata::coll::TuningField& f : strata::coll::tuning_fields()) {
    const std::uint64_t val = v.choice.table.*f.member;
    const std::uint64_t d = def.*f.member;
    std::printf("%-28s %12llu%s  %s\n", f.name, static_cast<unsigned long long>(val),
                val == d ? "          " : (" (def " + std::to_string(d) + ")").c_str(), f.what);
  }
}

void print_text(const strata::JobInfo& job, const strata::Hierarchy& hier, const std::vector<HostMachine>& machines,
                const std::vector<Provider>& providers, const std::string& fabric_error,
                const std::vector<std::pair<std::string, std::string>>& env) {
  std::printf("strata-info: %d rank(s) on %d host(s), launcher %s, job %s, bind %s\n", hier.size(), hier.num_hosts(),
              job.launcher.c_str(), job.job_id.c_str(), job.bind.empty() ? "none" : job.bind.c_str());

  std::printf("\n== machine\n");
  for (const HostMachine& m : machines) {
    std::printf("host %d: %s (%s)\n", m.host, m.summary.c_str(), m.source.c_str());
  }

  std::printf("\n== hierarchy\n%s", hier.describe().c_str());

  std::printf("\n== places\n%6s %5s %8s %5s %5s %5s\n", "rank", "host", "package", "numa", "core", "pu");
  for (const strata::RankPlace& p : hier.places()) {
    std::printf("%6d %5d %8d %5d %5d %5s\n", p.rank, p.host, p.package, p.numa, p.core,
                p.pu < 0 ? "-" : std::to_string(p.pu).c_str());
  }

  std::printf("\n== leaders\n");
  std::printf("hosts:    %s\n", list(hier.host_leaders()).c_str());
  for (int hl : hier.host_leaders()) {
    std::printf("host %d:   packages %s | numa %s\n", hier.place(hl).host,
                list(hier.package_leaders_on_host(hl)).c_str(), list(hier.numa_leaders_on_host(hl)).c_str());
  }

  std::printf("\n== transports\n");
  std::printf("same host:   shm (strata shared-memory segment: two-copy ring, CMA above STRATA_CMA_THRESHOLD)\n");
  if (!fabric_error.empty()) std::printf("libfabric:   %s\n", fabric_error.c_str());
  if (providers.empty() && fabric_error.empty()) std::printf("libfabric:   no provider offers RMA\n");
  for (const Provider& p : providers) {
    std::string fabrics;
    for (const std::string& f : p.fabrics) fabrics += (fabrics.empty() ? "" : ", ") + f;
    std::printf("libfabric:   %-14s %s\n", p.name.c_str(), fabrics.c_str());
  }

  const TuningView tv = tuning_view();
  print_tuning_text(tv);
  std::printf(
      "\n== collective algorithm selection (rules of the table above; STRATA_ALGO_<COLL> / CollOptions override)\n");
  for (const auto& [colls, rule] : strata::coll::selection_rules(tv.choice.table))
    std::printf("%-30s %s\n", colls.c_str(), rule.c_str());
  for (const auto& [name, value] : env)
    if (name.rfind("STRATA_ALGO_", 0) == 0 || name.rfind("STRATA_TREE", 0) == 0 ||
        name.rfind("STRATA_FRAGMENT", 0) == 0 || name.rfind("STRATA_DIRECTION", 0) == 0 ||
        name == "STRATA_ALLTOALL_MAX_OUTSTANDING")
      std::printf("override: %s=%s\n", name.c_str(), value.c_str());
  std::printf("(STRATA_LOG_LEVEL=debug logs the algorithm of every call)\n");

  std::printf("\n== STRATA_ environment (rank 0)\n");
  if (env.empty()) std::printf("(none set)\n");
  for (const auto& [name, value] : env)
    std::printf("%s=%s%s\n", name.c_str(), value.c_str(),
                strata::detail::env::find(name) == nullptr ? "  (not read by strata: a typo?)" : "");
  std::printf("(strata-info --config lists every variable with its type, default and meaning)\n");
}

void print_json(const strata::JobInfo& job, const strata::Hierarchy& hier, const std::vector<HostMachine>& machines,
                const std::vector<Provider>& providers, const std::string& fabric_error,
                const std::vector<std::pair<std::string, std::string>>& env) {
  using Json = nlohmann::ordered_json;
  Json doc;
  doc["ranks"] = hier.size();
  doc["hosts"] = hier.num_hosts();
  doc["launcher"] = job.launcher;
  doc["job_id"] = job.job_id;
  doc["bind"] = job.bind;
  doc["machines"] = Json::array();
  for (const HostMachine& m : machines)
    doc["machines"].push_back({{"host", m.host}, {"summary", m.summary}, {"source", m.source}});
  doc["places"] = Json::array();
  for (const strata::RankPlace& p : hier.places())
    doc["places"].push_back(
        {{"rank", p.rank}, {"host", p.host}, {"package", p.package}, {"numa", p.numa}, {"core", p.core}, {"pu", p.pu}});
  doc["leaders"] = {{"host", hier.leaders(strata::Level::host)},
                    {"package", hier.leaders(strata::Level::package)},
                    {"numa", hier.leaders(strata::Level::numa)}};
  doc["providers"] = Json::array();
  for (const Provider& p : providers) doc["providers"].push_back({{"provider", p.name}, {"fabrics", p.fabrics}});
  doc["fabric_error"] = fabric_error;
  doc["environment"] = Json::object();
  for (const auto& [name, value] : env) doc["environment"][name] = value;
  const TuningView tv = tuning_view();
  Json decisions = Json::object();
  for (const strata::coll::TuningField& f : strata::coll::tuning_fields())
    decisions[f.name] = tv.choice.table.*f.member;
  doc["tuning"] = {{"path", tv.choice.path},
                   {"origin", tv.choice.origin},
                   {"note", tv.choice.note},
                   {"error", tv.error},
                   {"default_location", strata::coll::default_tuning_path()},
                   {"decisions", decisions}};
  // Invalid UTF-8 in an environment value is replaced, not an exception.
  std::puts(doc.dump(2, ' ', false, Json::error_handler_t::replace).c_str());
}

void print_version() {
  std::printf("strata-info (strata %s, headers %s)\n", strata::version(), STRATA_VERSION_STRING);
  std::printf("build type: %s\ncompiler: %s (%s)\nsanitizers: %s\nassertions: %s\n", STRATA_BUILD_TYPE,
              STRATA_BUILD_COMPILER, __VERSION__, STRATA_BUILD_SANITIZE,
#ifdef NDEBUG
              "off"
#else
              "on"
#endif
  );
  std::printf("PMIx bootstrap: %s\nMPI interop: %s\nlibfabric: %s at build time, %u.%u at run time\nhwloc: %s\n",
              STRATA_BUILD_PMIX, STRATA_BUILD_MPI, STRATA_BUILD_LIBFABRIC, FI_MAJOR(fi_version()),
              FI_MINOR(fi_version()), STRATA_BUILD_HWLOC);
  std::string error;
  const std::vector<Provider> providers = rma_providers(&error);
  std::string names;
  for (const Provider& p : providers) names += (names.empty() ? "" : ", ") + p.name;
  std::printf("fabric providers with RMA: %s\n", !error.empty()  ? error.c_str()
                                                 : names.empty() ? "none"
                                                                 : names.c_str());
}

// --plan: one call on the engine's communicator of a synthetic world (coll::planning_group: ranks
// split evenly over hosts, one package and NUMA region each, or placed on each host as the
// engine places them on the machine of --topology / STRATA_TOPOLOGY; memory-protocol plans
// on one host).
struct PlanQuery {
  std::string coll;
  std::uint64_t bytes = 1024;
  int ranks = 4;
  int hosts = 1;
  std::string algo;
  std::string tree;       ///< CollOptions::tree
  std::string direction;  ///< CollOptions::direction
  std::string topology;   ///< hwloc synthetic string or XML path; empty: STRATA_TOPOLOGY, else one region
};

// The tree of a tree plan, one edge a line in pre-order from the root, indented by depth:
// "  -> 4  host 0 package 1 numa 2  [package, push]".
void print_tree(const strata::coll::Group& g, const strata::coll::Call& c) {
  namespace coll = strata::coll;
  const std::vector<coll::TreeEdge> edges = coll::plan_tree(g, c);
  const coll::Algorithm a = coll::with_table(g.tuning ? *g.tuning : coll::Tuning{}, c.kind, c.algo);
  auto shape = [](const coll::Shape& s) {
    if (s.kind == coll::Shape::flat) return std::string("flat");
    if (s.kind == coll::Shape::binary) return std::string("binary");
    return s.radix == 1 ? std::string("chain") : s.radix == 2 ? std::string("binomial") : std::to_string(s.radix);
  };
  if (a.hierarchical)
    std::printf("tree: host:%s,package:%s,numa:%s,core:%s\n", shape(a.host).c_str(), shape(a.package).c_str(),
                shape(a.numa).c_str(), shape(a.core).c_str());
  else
    std::printf("tree: single:%s\n", shape(a.single).c_str());
  auto place = [&](int r) {
    const auto ur = static_cast<std::size_t>(r);
    return "host " + std::to_string(g.host[ur]) + " package " + std::to_string(g.package_of(r)) + " numa " +
           std::to_string(g.numa[ur]);
  };
  std::vector<int> depth(static_cast<std::size_t>(g.size()), 0);
  std::printf("%d  %s  (root)\n", c.root, place(c.root).c_str());
  for (const coll::TreeEdge& e : edges) {
    const int d = depth[static_cast<std::size_t>(e.parent)] + 1;
    depth[static_cast<std::size_t>(e.child)] = d;
    std::printf("%*s-> %d  %s  [%s%s, %s]\n", 2 * d, "", e.child, place(e.child).c_str(), e.level.c_str(),
                e.hop ? ", extra hop" : "", e.single_copy ? "single copy" : coll::to_string(e.direction));
  }
}

// The algorithm registry (strata/collectives/registry.hpp).
void print_algorithms(bool markdown) {
  if (markdown) {
    std::fputs(strata::coll::algorithm_table_markdown().c_str(), stdout);
    return;
  }
  for (const strata::coll::AlgorithmRow& r : strata::coll::algorithm_table())
    std::printf("%-22s %-14s %s\n", strata::coll::to_string(r.kind), r.name.c_str(),
                r.chosen.empty() ? "(when named)" : r.chosen.c_str());
}

// Prints "<coll> <bytes> B on <ranks> ranks, <hosts> hosts: <algorithm>" (the
// registry's row compile() runs for the engine's selection of the call).
int print_plan(const PlanQuery& q) {
  namespace coll = strata::coll;
  try {
    int k = 0;
    while (k <= static_cast<int>(coll::Kind::reduce_scatter_block) &&
           q.coll != coll::to_string(static_cast<coll::Kind>(k)))
      ++k;
    if (k > static_cast<int>(coll::Kind::reduce_scatter_block) || q.ranks < 1 || q.hosts < 1 || q.hosts > q.ranks)
      throw std::invalid_argument("--plan '" + q.coll + "' with --ranks " + std::to_string(q.ranks) + " --hosts " +
                                  std::to_string(q.hosts) + ": not a collective or not a world");
    std::string spec = q.topology;
    if (spec.empty()) {
      if (const char* env = strata::detail::env::get("STRATA_TOPOLOGY")) spec = env;
    }
    std::vector<coll::LocalPlace> local;
    std::string machine;
    if (!spec.empty()) {  // each host's ranks placed as the engine places them (round robin over cores)
      const strata::Machine m(spec);
      for (int i = 0; i < m.num_cores(); ++i) {
        const strata::RankPlace p = m.place_local(i);
        local.push_back({p.package, p.numa});
      }
      machine = ", each host " + m.summary();
    }
    const coll::Group g = coll::planning_group(q.ranks, q.hosts, local);
    coll::Options o;
    o.algorithm = q.algo;
    o.tree = q.tree;
    o.direction = q.direction;
    const coll::Call c = coll::planning_call(g, static_cast<coll::Kind>(k), q.bytes, o);
    const coll::AlgorithmRow* row = coll::planned_algorithm(g, c);
    std::printf("%s %llu B on %d ranks, %d hosts%s: %s\n", q.coll.c_str(), static_cast<unsigned long long>(q.bytes),
                q.ranks, q.hosts, machine.c_str(), row != nullptr ? row->name.c_str() : "(none)");
    if (row != nullptr && row->tree && coll::uses_tree(c.kind, c.algo)) print_tree(g, c);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-info: %s\n", e.what());
    return 2;
  }
}

}  // namespace

// Over ~80 lines: CLI11 option declarations and the dispatch to the modes.
int main(int argc, char** argv) {
  CLI::App app{
      "Prints the machine, the rank hierarchy (host, package, NUMA, core), leaders, RMA providers, the tuning\n"
      "table and the STRATA_* settings. Run alone or under strata-run -n N [--hosts H] [--topology SPEC] --\n"
      "strata-info. Exits 1 when the job cannot start (bad topology, malformed tuning file).",
      "strata-info"};
  bool json = false;
  bool version = false;
  bool config = false;
  bool env_markdown = false;
  app.add_flag("--json", json, "machine-readable output");
  app.add_flag("--version", version, "version and build configuration, then exit");
  app.add_flag("-c,--config", config,
               "every STRATA_* variable: name, type, default, current value if set, description; then exit");
  app.add_flag("--env-markdown", env_markdown, "docs/environment.md (generated from the registry), then exit");
  bool algorithms = false;
  bool markdown = false;
  PlanQuery plan;
  app.add_flag("--algorithms", algorithms, "the algorithm registry (one row per collective x algorithm), then exit");
  app.add_flag("--markdown", markdown, "with --algorithms: the table of docs/algorithms.md");
  app.add_option("--plan", plan.coll,
                 "the algorithm the engine runs for one call of COLL (with --bytes, --ranks, "
                 "--hosts, --algo, --tree, --direction, --topology) and, for a tree algorithm, its tree; then exit");
  app.add_option("--bytes", plan.bytes, "with --plan: bytes per rank (default 1024)");
  app.add_option("--ranks", plan.ranks, "with --plan: ranks (default 4)");
  app.add_option("--hosts", plan.hosts, "with --plan: hosts, ranks split evenly (default 1)");
  app.add_option("--algo", plan.algo, "with --plan: CollOptions::algorithm (default automatic)");
  app.add_option("--tree", plan.tree,
                 "with --plan: CollOptions::tree, e.g. host:binomial,package:flat,numa:2,core:flat");
  app.add_option("--direction", plan.direction, "with --plan: CollOptions::direction, e.g. package:pull");
  app.add_option("--topology", plan.topology,
                 "with --plan: each host's machine (hwloc synthetic, e.g. 'package:2 numa:2 core:2 pu:1', or an XML "
                 "path; default STRATA_TOPOLOGY, else one package and NUMA region per host); tree plans print "
                 "their tree, each edge with its level");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "strata-info: %s (see strata-info --help)\n", e.what());
    return 2;
  }
  if (version) {
    print_version();
    return 0;
  }
  if (env_markdown) {
    std::fputs(strata::detail::env::markdown().c_str(), stdout);
    return 0;
  }
  if (algorithms) {
    print_algorithms(markdown);
    return 0;
  }
  if (!plan.coll.empty()) return print_plan(plan);
  if (config) {
    std::fputs(strata::detail::env::describe().c_str(), stdout);
    return 0;
  }

  int rank = -1;
  int rc = 0;
  try {
    const auto boot = strata::bootstrap_from_environment();
    rank = boot->rank();
    const strata::Hierarchy hier = strata::discover_hierarchy(*boot);
    const std::vector<HostMachine> machines = host_machines(*boot, hier);
    if (rank == 0) {
      std::string fabric_error;
      const std::vector<Provider> providers = rma_providers(&fabric_error);
      const auto env = strata_environment();
      if (json) {
        print_json(boot->job(), hier, machines, providers, fabric_error, env);
      } else {
        print_text(boot->job(), hier, machines, providers, fabric_error, env);
      }
      std::fflush(stdout);
      // Engines refuse to start with a malformed table: so does the exit status.
      const TuningView tv = tuning_view();
      if (!tv.error.empty()) {
        std::fprintf(stderr, "strata-info: the tuning table in effect is unusable: %s\n", tv.error.c_str());
        rc = 1;
      }
    }
    boot->barrier();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-info (rank %d): %s\n", rank, e.what());
    return 1;
  }
  return rc;
}
