// Rank-ordered reduction over a tree, for non-commutative (but associative)
// operations (Mallón et al. 3.1): the result must be x0 op x1 op ... op x(n-1).
//
// Every rank combines its own value with the partial results of its children's
// subtrees. If the subtree of every non-root rank covers a contiguous interval
// of *real* ranks (no wrap-around from n-1 to 0), sorting a rank's operands (its
// own value and its children's partials) by the first rank they cover yields
// an order whose left fold is again a contiguous, rank-ordered product; at the
// root this is the whole result.
//
// Which trees qualify:
//  - any single-level shape (flat, k-nomial, chain, binary) rooted at rank 0:
//    virtual = real ranks and every subtree is [v, v + size) (always);
//  - a flat tree with any root (leaf subtrees are single ranks);
//  - other roots: only when no subtree straddles the n-1 -> 0 boundary (for
//    example a chain rooted at n-1); compute_rank_order reports it;
//  - multilevel trees whose groups are contiguous blocks of ranks (block
//    placement); cyclic placements generally do not qualify.
// When a tree does not qualify, plan_rank_order_reduce falls back to the same
// shape rooted at rank 0 followed by one extra hop 0 -> root (the same extra
// copy Mallón et al. pays for a root that is not the tree root).
#pragma once

#include <vector>

#include "patterns/tree.hpp"

namespace strata::patterns {

/// @brief Per-rank combine sequences, CSR layout. Operand kSelf is the rank's
/// own value; any other operand is a child rank, standing for the partial
/// result of that child's subtree.
class CombineOrder {
 public:
  static constexpr int kSelf = -1;  ///< operand: the rank's own contribution

  /// Operands of @p rank in combine order: result = op0 op op1 op ... (left fold).
  [[nodiscard]] View<int> operands(int rank) const {
    const auto r = static_cast<std::size_t>(rank);
    return {ops_.data() + off_[r], ops_.data() + off_[r + 1]};
  }
  /// First real rank covered by @p rank's partial result (its interval is [first, first + subtree_size)).
  [[nodiscard]] int first_rank(int rank) const { return first_[static_cast<std::size_t>(rank)]; }
  [[nodiscard]] int size() const noexcept { return static_cast<int>(first_.size()); }

 private:
  friend bool compute_rank_order(const Tree& tree, CombineOrder& out);
  std::vector<int> off_;
  std::vector<int> ops_;
  std::vector<int> first_;
};

/// @brief Computes the rank-ordered combine sequence of every rank of @p tree.
/// @return false (and @p out left unspecified) when some non-root subtree is
/// not a contiguous interval of real ranks, i.e. the tree cannot reduce a
/// non-commutative op in rank order.
bool compute_rank_order(const Tree& tree, CombineOrder& out);

/// @brief A non-commutative reduction plan: tree, combine order and the final hop.
struct RankOrderPlan {
  Tree tree;
  CombineOrder order;
  int root = 0;  ///< the collective's root; if != tree.root(), tree.root() sends the result to it
  [[nodiscard]] bool has_extra_hop() const noexcept { return root != tree.root(); }
};

/// @brief Plans a rank-ordered reduction of @p shape to @p root over @p n ranks:
/// the tree rooted at @p root if it qualifies, else the tree rooted at 0 plus the hop 0 -> root.
[[nodiscard]] RankOrderPlan plan_rank_order_reduce(int n, int root, TreeShape shape);

/// @brief Same for a given tree (e.g. multilevel); falls back to @p fallback_shape rooted at 0 if @p tree does not
/// qualify.
[[nodiscard]] RankOrderPlan plan_rank_order_reduce(Tree tree, int root, TreeShape fallback_shape);

}  // namespace strata::patterns
