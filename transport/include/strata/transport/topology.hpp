// Topology: the machine hierarchy (host -> package -> NUMA region -> core)
// and where every rank sits on it.
//
// The pure part (Hierarchy, built from a list of RankPlace) has no I/O and is
// unit-tested over synthetic placements. The hwloc part (Machine) discovers the
// real machine, or loads a synthetic description / XML (STRATA_TOPOLOGY).
// docs/topology.md describes placement, leaders and the STRATA_TOPOLOGY forms.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "strata/error.hpp"

namespace strata {

/// @brief Where one rank sits. Indices are logical, per host.
struct RankPlace {
  int rank = 0;
  int host = 0;     ///< (virtual) host id from the launcher
  int package = 0;  ///< package (socket) index on the host
  int numa = 0;     ///< NUMA region index on the host (host-wide numbering)
  int core = 0;     ///< core index on the host (host-wide numbering)
  int pu = -1;      ///< OS index of the PU it is bound to, -1 if unbound

  friend bool operator==(const RankPlace& a, const RankPlace& b) noexcept {
    return a.rank == b.rank && a.host == b.host && a.package == b.package && a.numa == b.numa && a.core == b.core &&
           a.pu == b.pu;
  }
  friend bool operator!=(const RankPlace& a, const RankPlace& b) noexcept { return !(a == b); }
};

/// @brief Levels of the hierarchy, from widest to narrowest.
enum class Level { host = 0, package = 1, numa = 2, core = 3 };

/// @brief Lower-case name of a level ("host", "package", "numa", "core").
const char* level_name(Level level) noexcept;

/// @brief Leaders and groups of every level, computed once from placements.
///
/// A group at level host is every rank of one host; at level package, every
/// rank of one package of one host; at level numa, every rank of one NUMA
/// region of one host; at level core, the rank alone. Leaders are the lowest
/// rank of each group, so the host leader is also the leader of its package and
/// NUMA region (Mallón et al.).
///
/// Every accessor taking a rank throws strata::Error(Errc::unknown_peer) when
/// the rank is outside [0, size()).
///
/// @code
///   std::vector<RankPlace> places = ...;  // one per rank, places[i].rank == i
///   Hierarchy h(places);
///   int node_leader = h.leader(rank, Level::host);
///   for (int r : h.group(rank, Level::numa)) { ... }
/// @endcode
class Hierarchy {
 public:
  Hierarchy() = default;
  /// @brief Builds leaders and groups.
  /// @param places one entry per rank, indexed by rank (places[i].rank == i),
  ///        with non-negative host/package/numa/core and pu >= -1. Throws
  ///        strata::Error(Errc::invalid_argument) naming the offending rank.
  explicit Hierarchy(std::vector<RankPlace> places);

  /// @brief Number of ranks.
  [[nodiscard]] int size() const noexcept { return static_cast<int>(places_.size()); }
  /// @brief Place of @p rank.
  /// @param rank a rank in [0, size()).
  [[nodiscard]] const RankPlace& place(int rank) const;
  /// @brief All places, indexed by rank.
  [[nodiscard]] const std::vector<RankPlace>& places() const noexcept { return places_; }
  /// @brief Number of hosts that have ranks.
  [[nodiscard]] int num_hosts() const noexcept { return static_cast<int>(host_leaders_.size()); }
  /// @brief Number of groups at @p level over the whole job (hosts, packages
  ///        with ranks, NUMA regions with ranks, ranks).
  [[nodiscard]] int num_groups(Level level) const;

  /// @brief Leader (lowest rank) of @p rank's group at @p level.
  /// @param rank a rank in [0, size()).
  /// @param level the level; Level::core gives @p rank itself.
  [[nodiscard]] int leader(int rank, Level level) const;
  /// @brief True when @p rank leads its group at @p level.
  [[nodiscard]] bool is_leader(int rank, Level level) const { return leader(rank, level) == rank; }
  /// @brief All ranks in @p rank's group at @p level, ascending.
  /// @param rank a rank in [0, size()).
  /// @param level the level; Level::core gives {rank}.
  [[nodiscard]] std::vector<int> group(int rank, Level level) const;
  /// @brief Every leader at @p level over the whole job, ascending.
  [[nodiscard]] std::vector<int> leaders(Level level) const;
  /// @brief Host leaders, ascending (one per host that has ranks).
  [[nodiscard]] const std::vector<int>& host_leaders() const noexcept { return host_leaders_; }
  /// @brief Leaders at @p level of the groups on @p rank's host, ascending.
  /// @param rank a rank in [0, size()).
  /// @param level package, numa or core (host gives the host leader alone).
  [[nodiscard]] std::vector<int> leaders_on_host(int rank, Level level) const;
  /// @brief Package leaders on @p rank's host, ascending.
  [[nodiscard]] std::vector<int> package_leaders_on_host(int rank) const {
    return leaders_on_host(rank, Level::package);
  }
  /// @brief NUMA leaders on @p rank's host, ascending.
  [[nodiscard]] std::vector<int> numa_leaders_on_host(int rank) const { return leaders_on_host(rank, Level::numa); }
  /// @brief Ranks sharing a host with @p rank (same virtual host), ascending.
  [[nodiscard]] std::vector<int> host_ranks(int rank) const { return group(rank, Level::host); }
  /// @brief True when ranks @p a and @p b are on the same (virtual) host.
  [[nodiscard]] bool same_host(int a, int b) const { return place(a).host == place(b).host; }

  /// @brief Multi-line human-readable description (strata-info): hosts,
  ///        packages, NUMA regions and cores with the ranks on each, leaders
  ///        marked.
  [[nodiscard]] std::string describe() const;

  /// @brief Size in bytes of an encoded RankPlace.
  static constexpr std::size_t kEncodedSize = 32;
  /// @brief Fixed-size (kEncodedSize bytes, little-endian) serialisation of
  ///        one place, for the start-up exchange.
  static std::vector<std::byte> encode(const RankPlace& p);
  /// @brief Inverse of encode(). Throws strata::Error(Errc::invalid_argument)
  ///        when @p len is not kEncodedSize or the blob is not an encoded place.
  /// @param data the bytes; @param len their number.
  static RankPlace decode(const std::byte* data, std::size_t len);

 private:
  struct Table {
    std::vector<std::vector<int>> groups;  ///< ascending members per group, groups ordered by leader
    std::vector<int> group_of;             ///< rank -> index into groups
  };
  void check_rank(int rank, const char* what) const;
  [[nodiscard]] const Table& table(Level level) const;

  std::vector<RankPlace> places_;
  std::vector<int> host_leaders_;
  std::array<Table, 3> tables_;  // host, package, numa
};

/// @brief One host's machine as hwloc sees it (real, synthetic or XML).
///
/// @code
///   Machine m("package:2 numa:2 core:4 pu:1");
///   RankPlace p = m.place_local(5);  // package 0, numa 1, core 5
/// @endcode
class Machine {
 public:
  /// @brief Loads the machine.
  /// @param spec empty: the real machine; a string containing ':' or starting
  /// with an hwloc type keyword (or made of arities only): an hwloc synthetic
  /// description ("package:2 numa:2 core:4 pu:1"); otherwise a path to an
  /// hwloc XML file. Throws strata::Error(Errc::invalid_argument) naming
  /// STRATA_TOPOLOGY and the spec on failure.
  explicit Machine(const std::string& spec = {});
  ~Machine();
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  /// @brief True for an hwloc synthetic description.
  [[nodiscard]] bool synthetic() const noexcept { return synthetic_; }
  /// @brief True for a synthetic description or an XML file (not this machine).
  [[nodiscard]] bool emulated() const noexcept;
  /// @brief The spec the machine was loaded from (empty: the real machine).
  [[nodiscard]] const std::string& spec() const noexcept;
  [[nodiscard]] int num_packages() const noexcept;
  [[nodiscard]] int num_numa() const noexcept;
  /// @brief Number of cores (PUs when the topology has no core level).
  [[nodiscard]] int num_cores() const noexcept;
  [[nodiscard]] int num_pus() const noexcept;
  /// @brief Where the local_rank-th rank of a host sits under round-robin
  /// placement over cores (core = local_rank % cores); host and rank left for
  /// the caller, pu is -1.
  /// @param local_rank index of the rank on its host, >= 0 (else Errc::invalid_argument).
  [[nodiscard]] RankPlace place_local(int local_rank) const;
  /// @brief Where the calling thread is bound, when on the real machine and
  /// bound to within one core (pu = first PU of the binding); otherwise
  /// place_local(local_rank).
  [[nodiscard]] RankPlace place_self(int local_rank) const;
  /// @brief Binds the calling process per policy as the local_rank-th rank
  /// of the host: "core" binds to core (local_rank % cores), "numa" to that
  /// core's NUMA region, "none" (or empty) does nothing. On an emulated
  /// machine nothing is bound and OK is returned.
  /// @param local_rank index of the rank on its host, >= 0.
  /// @param policy core | numa | none.
  /// @return OK, or Errc::invalid_argument (bad policy / local_rank) or
  ///         Errc::unsupported (the OS refused the binding), with a message.
  Status bind_self(int local_rank, const std::string& policy) const;
  /// @brief Short summary ("1 package, 1 NUMA, 2 cores, 2 PUs").
  [[nodiscard]] std::string summary() const;
  /// @brief Where the machine comes from: "this machine", "synthetic '...'",
  ///        "XML '...'".
  [[nodiscard]] std::string source() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool synthetic_ = false;
};

class Bootstrap;

/// @brief Builds the job's Hierarchy: each rank places itself on its Machine
/// (spec from JobInfo::topology, else the STRATA_TOPOLOGY variable; host from
/// JobInfo::host), ranks exchange places through @p boot. Collective: every
/// rank must call it. When the machine fails to load on some rank, every rank
/// throws strata::Error naming that rank and the cause (no rank is left
/// waiting).
/// @param boot the job's bootstrap.
Hierarchy discover_hierarchy(Bootstrap& boot);

}  // namespace strata
