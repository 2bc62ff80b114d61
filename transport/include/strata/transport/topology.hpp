// Topology: the machine hierarchy (host -> package -> NUMA region -> core)
// and where every rank sits on it.
//
// The pure part (Hierarchy, built from a list of RankPlace) has no I/O and is
// unit-tested over synthetic placements. The hwloc part (Machine) discovers the
// real machine, or loads a synthetic description / XML (STRATA_TOPOLOGY).
#pragma once

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
};

/// @brief Levels of the hierarchy, from widest to narrowest.
enum class Level { host = 0, package = 1, numa = 2, core = 3 };

/// @brief Leaders and groups of every level, computed once from placements.
///
/// Leaders are the lowest rank of each group. The host leader is also the
/// leader of its package and NUMA region (seed 000).
class Hierarchy {
 public:
  Hierarchy() = default;
  /// @param places one entry per rank, indexed by rank (places[i].rank == i).
  explicit Hierarchy(std::vector<RankPlace> places);

  [[nodiscard]] int size() const noexcept { return static_cast<int>(places_.size()); }
  [[nodiscard]] const RankPlace& place(int rank) const { return places_.at(static_cast<size_t>(rank)); }
  [[nodiscard]] const std::vector<RankPlace>& places() const noexcept { return places_; }
  [[nodiscard]] int num_hosts() const noexcept { return static_cast<int>(host_leaders_.size()); }

  /// Leader of @p rank's group at @p level (host leader, package leader, ...).
  [[nodiscard]] int leader(int rank, Level level) const;
  /// All ranks in @p rank's group at @p level, ascending.
  [[nodiscard]] std::vector<int> group(int rank, Level level) const;
  /// Host leaders, ascending (one per host that has ranks).
  [[nodiscard]] const std::vector<int>& host_leaders() const noexcept { return host_leaders_; }
  /// NUMA leaders on @p rank's host, ascending.
  [[nodiscard]] std::vector<int> numa_leaders_on_host(int rank) const;
  /// Ranks sharing a host with @p rank (same virtual host), ascending.
  [[nodiscard]] std::vector<int> host_ranks(int rank) const { return group(rank, Level::host); }
  [[nodiscard]] bool same_host(int a, int b) const { return place(a).host == place(b).host; }

  /// Multi-line human-readable description (strata-info).
  [[nodiscard]] std::string describe() const;

  /// Fixed-size serialisation of one place, for the start-up exchange.
  static std::vector<std::byte> encode(const RankPlace& p);
  static RankPlace decode(const std::byte* data, size_t len);

 private:
  std::vector<RankPlace> places_;
  std::vector<int> host_leaders_;
};

/// @brief One host's machine as hwloc sees it (real, synthetic or XML).
class Machine {
 public:
  /// @param spec empty: the real machine; a string containing ':' : an hwloc
  /// synthetic description ("package:2 numa:2 core:4 pu:1"); otherwise a path to
  /// an hwloc XML file. Throws strata::Error naming the spec on failure.
  explicit Machine(const std::string& spec = {});
  ~Machine();
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  [[nodiscard]] bool synthetic() const noexcept { return synthetic_; }
  [[nodiscard]] int num_packages() const noexcept;
  [[nodiscard]] int num_numa() const noexcept;
  [[nodiscard]] int num_cores() const noexcept;
  [[nodiscard]] int num_pus() const noexcept;
  /// Where the local_rank-th rank of a host sits under round-robin placement
  /// over cores (core = local_rank % cores); host and rank left for the caller.
  [[nodiscard]] RankPlace place_local(int local_rank) const;
  /// Where the calling process is bound (real machine only; falls back to place_local).
  [[nodiscard]] RankPlace place_self(int local_rank) const;
  /// Binds the calling process per policy ("core", "numa", "none") as the
  /// local_rank-th rank on the host (real machine only). Returns a Status.
  Status bind_self(int local_rank, const std::string& policy) const;
  /// Short summary ("1 package, 1 NUMA, 2 cores, 2 PUs").
  [[nodiscard]] std::string summary() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool synthetic_ = false;
};

/// @brief Builds the job's Hierarchy: each rank places itself on its Machine
/// (spec from JobInfo::topology), ranks exchange places through @p boot.
class Bootstrap;
Hierarchy discover_hierarchy(Bootstrap& boot);

}  // namespace strata
