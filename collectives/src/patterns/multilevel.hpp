// Multilevel (hierarchy-aware) trees, Mallón et al.: a tree among host leaders, a
// tree among the package (socket) leaders of each host rooted at its host
// leader, a tree among the NUMA leaders of each package rooted at its package
// leader, and a tree among the ranks of each NUMA region rooted at its NUMA
// leader. Each level has its own shape; a level with one group per parent
// group (one package per host, the usual case) adds no edge, so with one
// package per host the tree is the three-level host -> NUMA -> core tree.
// Kept independent of strata::Hierarchy: the input is a plain (host, numa,
// package) triple per rank, so it is testable without hwloc.
#pragma once

#include <cstdint>
#include <vector>

#include "patterns/tree.hpp"

namespace strata::patterns {

/// @brief Where one rank sits: host id, NUMA region id and package id (any
/// integers; the package id only needs to be unique within its host, the NUMA
/// id within its package). The package comes last so that {host, numa}
/// initialisers mean one package per host.
struct Place {
  int host = 0;
  int numa = 0;
  int package = 0;
};

/// @brief Level tags of multilevel tree edges (Tree::level of the child), in
/// the order of strata::Level. Not persisted: only trees and tests read them.
enum class TreeLevel : std::uint8_t {
  host = 0,     ///< edge between host leaders
  package = 1,  ///< edge between package leaders of one host
  numa = 2,     ///< edge between NUMA leaders of one package
  core = 3,     ///< edge inside one NUMA region
};

/// @brief Lower-case name of a level ("host", "package", "numa", "core").
[[nodiscard]] const char* to_string(TreeLevel level) noexcept;

/// @brief What to do when the collective's root is not a leader.
enum class RootPolicy : std::uint8_t {
  /// Seed 000: the trees are fixed (leaders are the lowest rank of each group);
  /// the root hands its data to its host leader first (one extra copy), and a
  /// reduction / gather ends with one extra copy from the host leader to the root.
  extra_hop,
  /// The root replaces the leader of its host and of its NUMA region (no extra
  /// copy, but the tree depends on the root).
  promote,
};

/// @brief Shapes per level and the root policy.
struct MultilevelShape {
  TreeShape host = TreeShape::binomial();  ///< shape A, among host leaders
  TreeShape numa = TreeShape::binomial();  ///< shape B, among NUMA leaders of a package
  TreeShape core = TreeShape::flat();      ///< shape C, among the ranks of a NUMA region
  RootPolicy policy = RootPolicy::extra_hop;
  /// Shape among the package leaders of a host (last, so that {host, numa,
  /// core, policy} initialisers keep their meaning).
  TreeShape package = TreeShape::binomial();
};

/// @brief A multilevel tree plus the hop that connects the collective's root to it.
///
/// For broadcast / scatter: if has_extra_hop(), root sends to tree.root() first,
/// then the data flows down `tree` (the root, a node of the tree, already holds
/// the data and skips its own receive). For reduce / gather: data flows up
/// `tree` to tree.root(), which then sends the result to root.
struct MultilevelTree {
  Tree tree;     ///< spanning tree over all ranks, edges tagged with TreeLevel
  int root = 0;  ///< the collective's root
  /// True when the collective's root is not the tree's root.
  [[nodiscard]] bool has_extra_hop() const noexcept { return root != tree.root(); }
};

/// @brief Builds the four-level tree for @p places (one per rank) rooted at @p root.
///
/// Host leaders are ordered by rank and the host-level tree is rotated so the
/// root's host leader is its root (virtual ranks among leaders, Mallón et al.'s
/// fixed tree); each host's package leaders (ascending) form a tree rooted at
/// the host leader, each package's NUMA leaders one rooted at the package
/// leader, each NUMA region's ranks one rooted at the NUMA leader. Children
/// are in send order: host-level children first, then package-level, then
/// NUMA-level, then core-level (farthest, widest subtrees first).
/// Throws std::invalid_argument for empty @p places or a root out of range.
[[nodiscard]] MultilevelTree build_multilevel_tree(const std::vector<Place>& places, int root,
                                                   const MultilevelShape& shape);

/// @brief The single-level variant (ignores the hierarchy), for comparison:
/// one tree of @p shape over all ranks, rooted at @p root, no extra hop.
[[nodiscard]] MultilevelTree build_single_level_tree(int n, int root, TreeShape shape);

/// @brief Leaders computed by build_multilevel_tree (exposed for tests and tools).
struct Leaders {
  std::vector<int> host_leader;     ///< per rank: its host leader
  std::vector<int> numa_leader;     ///< per rank: its NUMA leader
  std::vector<int> package_leader;  ///< per rank: its package leader
};

/// @brief Host, package and NUMA leaders per rank under @p policy for @p
/// root: the lowest rank of each group, except that under RootPolicy::promote
/// the root leads its own host, package and NUMA region. A host leader always
/// leads its package, and a package leader its NUMA region.
[[nodiscard]] Leaders compute_leaders(const std::vector<Place>& places, int root, RootPolicy policy);

}  // namespace strata::patterns
