// Communication trees over the ranks 0..n-1 of a group, rooted at any rank.
//
// Shapes (all built over *virtual* ranks v = (rank - root) mod n, so the root is
// v = 0):
//  - flat:      the root is the parent of everyone; children in ascending v.
//  - k-nomial of radix k >= 2: write v in base k; the parent of v > 0 clears
//    v's lowest non-zero digit; the children of v are v + j*k^i for the digit
//    positions i below that digit (every position for the root), j = 1..k-1.
//    In every round each holder sends to k-1 new ranks, so a broadcast needs
//    ceil(log_k n) rounds. Radix 2 is the binomial tree.
//  - radix 1 is defined as the chain (Nishtala and Yelick: "a radix 1 k-nomial tree is a
//    chain"): parent v-1, child v+1.
//  - binary: the complete binary tree (heap shape: every level full except the
//    last, filled from the left), labelled in pre-order so that, like the
//    k-nomial trees, every subtree covers a contiguous range of virtual ranks.
//
// Children are stored in *send order*, widest branch first (Mallón et al.: "the
// communication starts towards the deepest branch"). For the k-nomial tree
// that is the highest digit position (largest stride k^i) first and, within a
// position, j ascending; when n is not a power of k the first child's subtree
// may be truncated (binomial, n = 5: 0 sends to 4, 2, 1), which keeps the
// classic schedule and its ceil(log2 n) broadcast steps. Flat, chain and
// binary children are in non-increasing subtree size.
//
// Contiguity: for every shape above, the subtree of virtual rank v is exactly
// the virtual ranks [v, v + subtree_size). Scatter and gather with contiguous
// blocks rely on this; Tree::contiguous() reports it (it is computed, not
// assumed, so multilevel trees report it too).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "patterns/common.hpp"

namespace strata::patterns {

/// @brief Kind of single-level tree.
enum class TreeKind : std::uint8_t {
  flat,     ///< root sends to everyone
  knomial,  ///< k-nomial of TreeShape::radix (1 = chain, 2 = binomial)
  binary,   ///< complete binary tree, pre-order labelled
};

/// @brief A tree shape: kind plus radix (radix is used by knomial only).
struct TreeShape {
  TreeKind kind = TreeKind::knomial;
  int radix = 2;

  [[nodiscard]] static constexpr TreeShape flat() noexcept { return {TreeKind::flat, 0}; }
  [[nodiscard]] static constexpr TreeShape chain() noexcept { return {TreeKind::knomial, 1}; }
  [[nodiscard]] static constexpr TreeShape binomial() noexcept { return {TreeKind::knomial, 2}; }
  [[nodiscard]] static constexpr TreeShape knomial(int k) noexcept { return {TreeKind::knomial, k}; }
  [[nodiscard]] static constexpr TreeShape binary() noexcept { return {TreeKind::binary, 0}; }
};

/// @brief Parent of virtual rank @p v (> 0) in the k-nomial tree of @p n ranks and radix @p k >= 1.
/// O(log_k v), no allocation. Returns -1 for v == 0.
[[nodiscard]] int knomial_parent(int v, int n, int k) noexcept;

/// @brief Children of virtual rank @p v in the k-nomial tree, in send order, appended to @p out.
/// O(number of children), no allocation beyond @p out's growth.
void knomial_children(int v, int n, int k, std::vector<int>& out);

/// @brief A rooted spanning tree over ranks 0..size()-1 (real ranks).
///
/// Built once (communicator creation), read many times. All per-rank queries
/// are O(1) and allocation-free.
///
/// @code
///   Tree t = build_tree(11, /*root=*/3, TreeShape::binomial());
///   for (int c : t.children(3)) { /* emit a send to c */ }
///   int p = t.parent(5);  // -1 for the root
/// @endcode
class Tree {
 public:
  Tree() = default;

  /// Builds a tree from per-parent child lists given as (parent, child) edges.
  /// Edges of one parent must appear in send order; edges of different parents
  /// may interleave. The edges must form a spanning tree rooted at @p root
  /// (checked: throws std::invalid_argument otherwise). @p level, if not empty,
  /// holds one tag per rank: the level of the edge into that rank.
  Tree(int n, int root, const std::vector<std::pair<int, int>>& edges, const std::vector<std::uint8_t>& level = {});

  [[nodiscard]] int size() const noexcept { return static_cast<int>(parent_.size()); }
  [[nodiscard]] int root() const noexcept { return root_; }
  /// Parent of @p rank, -1 for the root.
  [[nodiscard]] int parent(int rank) const { return parent_[static_cast<std::size_t>(rank)]; }
  /// Children of @p rank, in send order.
  [[nodiscard]] View<int> children(int rank) const {
    const auto r = static_cast<std::size_t>(rank);
    return {child_.data() + child_off_[r], child_.data() + child_off_[r + 1]};
  }
  /// Number of edges from the root to @p rank.
  [[nodiscard]] int depth(int rank) const { return depth_[static_cast<std::size_t>(rank)]; }
  /// Step at which @p rank receives in a broadcast where every rank, once it
  /// has the data, sends to its children one at a time in send order, one step
  /// per send (Mallón et al.'s model). 0 for the root.
  [[nodiscard]] int arrival(int rank) const { return arrival_[static_cast<std::size_t>(rank)]; }
  /// Number of ranks in the subtree of @p rank (itself included).
  [[nodiscard]] int subtree_size(int rank) const { return sub_[static_cast<std::size_t>(rank)]; }
  /// Level tag of the edge from parent(rank) to @p rank (0 for the root and for single-level trees).
  [[nodiscard]] int level(int rank) const { return level_.empty() ? 0 : level_[static_cast<std::size_t>(rank)]; }
  /// (rank - root) mod n.
  [[nodiscard]] int virtual_rank(int rank) const { return to_virtual(rank, root_, size()); }
  /// Maximum depth (edges on the longest root-to-leaf path).
  [[nodiscard]] int height() const noexcept { return height_; }
  /// Maximum arrival: the number of one-send-per-step steps a broadcast takes.
  [[nodiscard]] int steps() const noexcept { return steps_; }
  /// True when the subtree of every rank r covers exactly the virtual ranks
  /// [virtual_rank(r), virtual_rank(r) + subtree_size(r)).
  [[nodiscard]] bool contiguous() const noexcept { return contiguous_; }
  /// Ranks in breadth-first order from the root (parents before children).
  [[nodiscard]] View<int> bfs_order() const { return {bfs_.data(), bfs_.data() + bfs_.size()}; }

 private:
  int root_ = 0;
  int height_ = 0;
  int steps_ = 0;
  bool contiguous_ = true;
  std::vector<int> parent_;
  std::vector<int> child_off_;
  std::vector<int> child_;
  std::vector<int> depth_;
  std::vector<int> arrival_;
  std::vector<int> sub_;
  std::vector<int> bfs_;
  std::vector<std::uint8_t> level_;
};

/// @brief Appends the edges of a single-level tree of @p shape over @p members
/// (real ranks; the tree's virtual rank i is members[(i + root_index) mod m])
/// to @p edges, parents' children in send order. Used to assemble multilevel trees from one tree per group.
void append_tree_edges(const std::vector<int>& members, int root_index, TreeShape shape,
                       std::vector<std::pair<int, int>>& edges);

/// @brief Builds a single-level tree of @p shape over ranks 0..n-1 rooted at @p root.
/// Throws std::invalid_argument for n < 1, root outside [0, n) or radix < 1.
[[nodiscard]] Tree build_tree(int n, int root, TreeShape shape);

}  // namespace strata::patterns
