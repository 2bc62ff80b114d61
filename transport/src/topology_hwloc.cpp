// Machine: one host's topology through hwloc (real machine, synthetic
// description or XML file).
//
// hwloc 2.x attaches NUMA nodes as memory children, so they are not ancestors
// of cores: a core's NUMA region is the NUMA node whose cpuset includes the
// core's cpuset.
#include <hwloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "strata/transport/topology.hpp"

namespace strata {
namespace {

enum class SpecKind { real, synthetic, xml };

// First whitespace-separated token of @p s.
std::string first_token(const std::string& s) {
  std::istringstream is(s);
  std::string t;
  is >> t;
  return t;
}

bool all_digits_or_space(const std::string& s) {
  bool any_digit = false;
  for (char c : s) {
    if (std::isdigit(static_cast<unsigned char>(c)) != 0) {
      any_digit = true;
    } else if (std::isspace(static_cast<unsigned char>(c)) == 0) {
      return false;
    }
  }
  return any_digit;
}

SpecKind classify(const std::string& spec) {
  if (spec.empty()) return SpecKind::real;
  if (spec.find(':') != std::string::npos) return SpecKind::synthetic;
  if (all_digits_or_space(spec)) return SpecKind::synthetic;
  // A bare type keyword ("core", "package") is a (bad) synthetic description,
  // not a file name; hwloc reports what is wrong with it. Paths contain '/' or
  // '.', type keywords never do.
  const std::string tok = first_token(spec);
  if (!tok.empty() && tok.find('/') == std::string::npos && tok.find('.') == std::string::npos) {
    hwloc_obj_type_t type;
    union hwloc_obj_attr_u attr;
    std::memset(&attr, 0, sizeof attr);
    if (hwloc_type_sscanf(tok.c_str(), &type, &attr, sizeof attr) == 0) return SpecKind::synthetic;
  }
  return SpecKind::xml;
}

[[noreturn]] void bad_spec(const std::string& spec, const std::string& why) {
  throw Error(Errc::invalid_argument, "STRATA_TOPOLOGY='" + spec + "': " + why +
                                          " (expected empty for this machine, an hwloc synthetic description such as "
                                          "'package:2 numa:2 core:4 pu:1', or the path of an hwloc XML file)");
}

/// Largest number of processing units a synthetic description may describe:
/// hwloc builds every object of it (a description of 10^10 PUs ran for
/// minutes and grew without bound before this check).
constexpr unsigned long long kMaxSyntheticPus = 65536;
/// Largest XML file accepted (real machines' exports are a few hundred KiB).
constexpr long long kMaxXmlBytes = 64LL << 20;

/// Product of the arities in a synthetic description ("package:2 core:4" ->
/// 8; bare "2 4" -> 8), saturated at kMaxSyntheticPus + 1.
unsigned long long synthetic_leaves(const std::string& spec) {
  std::istringstream is(spec);
  std::string tok;
  unsigned long long product = 1;
  while (is >> tok) {
    const std::size_t colon = tok.find(':');
    const std::string num = colon == std::string::npos ? tok : tok.substr(colon + 1);
    if (num.empty() || std::isdigit(static_cast<unsigned char>(num[0])) == 0) continue;
    unsigned long long v = 0;
    for (char c : num) {
      if (std::isdigit(static_cast<unsigned char>(c)) == 0) break;
      v = std::min<unsigned long long>(v * 10 + static_cast<unsigned>(c - '0'), kMaxSyntheticPus + 1);
    }
    if (v == 0) continue;  // hwloc rejects it with its own message
    product = std::min<unsigned long long>(product * v, kMaxSyntheticPus + 1);
  }
  return product;
}

struct CoreInfo {
  int package = 0;
  int numa = 0;
  hwloc_obj_t obj = nullptr;
};

}  // namespace

struct Machine::Impl {
  hwloc_topology_t topo = nullptr;
  std::string spec;
  SpecKind kind = SpecKind::real;
  std::vector<CoreInfo> cores;
  int packages = 0;
  int numas = 0;
  int pus = 0;

  ~Impl() {
    if (topo != nullptr) hwloc_topology_destroy(topo);
  }

  [[nodiscard]] RankPlace place_of_core(int core) const {
    RankPlace p;
    p.core = core;
    p.package = cores[static_cast<std::size_t>(core)].package;
    p.numa = cores[static_cast<std::size_t>(core)].numa;
    p.pu = -1;
    return p;
  }
};

Machine::Machine(const std::string& spec) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.spec = spec;
  m.kind = classify(spec);
  synthetic_ = m.kind == SpecKind::synthetic;
  if (m.kind == SpecKind::xml) {
    // stat first: opening a FIFO or a device would block or never end.
    struct stat st {};
    if (::stat(spec.c_str(), &st) != 0)
      bad_spec(spec, "not a synthetic description, and no readable XML file at that path");
    if (!S_ISREG(st.st_mode)) bad_spec(spec, "the path is not a regular file (an XML file is expected)");
    if (st.st_size > kMaxXmlBytes)
      bad_spec(spec, "the XML file has " + std::to_string(st.st_size) + " bytes, more than the limit of " +
                         std::to_string(kMaxXmlBytes));
    std::ifstream probe(spec);
    if (!probe) bad_spec(spec, "not a synthetic description, and no readable XML file at that path");
  }
  if (m.kind == SpecKind::synthetic && synthetic_leaves(spec) > kMaxSyntheticPus)
    bad_spec(spec, "the description has more than " + std::to_string(kMaxSyntheticPus) +
                       " processing units (the product of its arities)");

  if (hwloc_topology_init(&m.topo) != 0) {
    m.topo = nullptr;
    throw Error(Errc::internal, std::string("hwloc_topology_init failed: ") + std::strerror(errno));
  }
  if (m.kind == SpecKind::synthetic && hwloc_topology_set_synthetic(m.topo, spec.c_str()) != 0) {
    // hwloc wants the last level to be PUs; "core:4" means single-PU cores.
    const bool has_pu = spec.find("pu") != std::string::npos || spec.find("PU") != std::string::npos;
    const std::string with_pu = spec + " pu:1";
    if (has_pu || hwloc_topology_set_synthetic(m.topo, with_pu.c_str()) != 0) {
      bad_spec(spec, "hwloc rejected the synthetic description");
    }
  }
  if (m.kind == SpecKind::xml && hwloc_topology_set_xml(m.topo, spec.c_str()) != 0) {
    bad_spec(spec, std::string("hwloc cannot use the XML file: ") + std::strerror(errno));
  }
  if (hwloc_topology_load(m.topo) != 0) {
    if (m.kind == SpecKind::real) {
      throw Error(Errc::internal, std::string("hwloc cannot load this machine's topology: ") + std::strerror(errno));
    }
    bad_spec(spec, std::string("hwloc failed to load it: ") + std::strerror(errno));
  }

  m.packages = hwloc_get_nbobjs_by_type(m.topo, HWLOC_OBJ_PACKAGE);
  m.numas = hwloc_get_nbobjs_by_type(m.topo, HWLOC_OBJ_NUMANODE);
  m.pus = hwloc_get_nbobjs_by_type(m.topo, HWLOC_OBJ_PU);
  // Cores; a topology without a core level uses its PUs as cores.
  hwloc_obj_type_t core_type = HWLOC_OBJ_CORE;
  int ncores = hwloc_get_nbobjs_by_type(m.topo, HWLOC_OBJ_CORE);
  if (ncores <= 0) {
    core_type = HWLOC_OBJ_PU;
    ncores = m.pus;
  }
  if (ncores <= 0) bad_spec(spec, "the topology has no core and no PU");

  for (int i = 0; i < ncores; ++i) {
    CoreInfo ci;
    ci.obj = hwloc_get_obj_by_type(m.topo, core_type, static_cast<unsigned>(i));
    if (ci.obj == nullptr) continue;
    const hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(m.topo, HWLOC_OBJ_PACKAGE, ci.obj);
    ci.package = pkg != nullptr ? static_cast<int>(pkg->logical_index) : 0;
    // NUMA nodes are not ancestors in hwloc 2.x: pick the first (smallest)
    // NUMA node whose cpuset covers the core's cpuset.
    ci.numa = 0;
    for (int n = 0; n < m.numas; ++n) {
      const hwloc_obj_t node = hwloc_get_obj_by_type(m.topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(n));
      if (node != nullptr && node->cpuset != nullptr && ci.obj->cpuset != nullptr &&
          hwloc_bitmap_isincluded(ci.obj->cpuset, node->cpuset)) {
        ci.numa = static_cast<int>(node->logical_index);
        break;
      }
    }
    m.cores.push_back(ci);
  }
  if (m.cores.empty()) bad_spec(spec, "the topology has no usable core");
  if (m.packages <= 0) m.packages = 1;  // no package level: the machine is one package
  if (m.numas <= 0) m.numas = 1;
}

Machine::~Machine() = default;

bool Machine::emulated() const noexcept { return impl_->kind != SpecKind::real; }
const std::string& Machine::spec() const noexcept { return impl_->spec; }
int Machine::num_packages() const noexcept { return impl_->packages; }
int Machine::num_numa() const noexcept { return impl_->numas; }
int Machine::num_cores() const noexcept { return static_cast<int>(impl_->cores.size()); }
int Machine::num_pus() const noexcept { return impl_->pus; }

RankPlace Machine::place_local(int local_rank) const {
  if (local_rank < 0) {
    throw Error(Errc::invalid_argument,
                "Machine::place_local: local_rank is " + std::to_string(local_rank) + ", must be >= 0");
  }
  return impl_->place_of_core(local_rank % num_cores());
}

RankPlace Machine::place_self(int local_rank) const {
  const Impl& m = *impl_;
  if (m.kind != SpecKind::real) return place_local(local_rank);
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  if (set == nullptr) return place_local(local_rank);
  RankPlace out = place_local(local_rank);
  if (hwloc_get_cpubind(m.topo, set, HWLOC_CPUBIND_THREAD) == 0 && !hwloc_bitmap_iszero(set)) {
    for (std::size_t c = 0; c < m.cores.size(); ++c) {
      if (hwloc_bitmap_isincluded(set, m.cores[c].obj->cpuset)) {
        out = m.place_of_core(static_cast<int>(c));
        out.pu = hwloc_bitmap_first(set);
        break;
      }
    }
  }
  hwloc_bitmap_free(set);
  return out;
}

Status Machine::bind_self(int local_rank, const std::string& policy) const {
  if (local_rank < 0) {
    return {Errc::invalid_argument, "bind: local_rank is " + std::to_string(local_rank) + ", must be >= 0"};
  }
  if (policy.empty() || policy == "none") return Status::ok();
  if (policy != "core" && policy != "numa") {
    return {Errc::invalid_argument, "bind: policy '" + policy + "' unknown (use core, numa or none)"};
  }
  const Impl& m = *impl_;
  if (m.kind != SpecKind::real) return Status::ok();  // emulated cores do not exist
  const CoreInfo& core = m.cores[static_cast<std::size_t>(local_rank % num_cores())];
  hwloc_const_cpuset_t set = core.obj->cpuset;
  if (policy == "numa") {
    const hwloc_obj_t node = hwloc_get_obj_by_type(m.topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(core.numa));
    if (node != nullptr && node->cpuset != nullptr) set = node->cpuset;
  }
  if (hwloc_set_cpubind(m.topo, set, HWLOC_CPUBIND_PROCESS) != 0) {
    return {Errc::unsupported, "bind: binding local rank " + std::to_string(local_rank) + " to its " + policy +
                                   " failed: " + std::strerror(errno)};
  }
  return Status::ok();
}

std::string Machine::summary() const {
  const auto plural = [](int n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  return plural(num_packages(), "package", "packages") + ", " + plural(num_numa(), "NUMA", "NUMA") + ", " +
         plural(num_cores(), "core", "cores") + ", " + plural(num_pus(), "PU", "PUs");
}

std::string Machine::source() const {
  switch (impl_->kind) {
    case SpecKind::real:
      return "this machine";
    case SpecKind::synthetic:
      return "synthetic '" + impl_->spec + "'";
    case SpecKind::xml:
      return "XML '" + impl_->spec + "'";
  }
  return "unknown";
}

}  // namespace strata
