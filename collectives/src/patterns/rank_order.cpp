// Rank-ordered combine sequences for non-commutative reductions.
#include "patterns/rank_order.hpp"

#include <utility>

namespace strata::patterns {

bool compute_rank_order(const Tree& tree, CombineOrder& out) {
  const int n = tree.size();
  const auto un = static_cast<std::size_t>(n);
  out.first_.assign(un, 0);
  out.off_.assign(un + 1, 0);
  for (int r = 0; r < n; ++r)
    out.off_[static_cast<std::size_t>(r) + 1] =
        out.off_[static_cast<std::size_t>(r)] + static_cast<int>(tree.children(r).size()) + 1;
  out.ops_.assign(static_cast<std::size_t>(out.off_[un]), CombineOrder::kSelf);
  // Bottom-up: children before parents (reverse breadth-first order).
  const View<int> bfs = tree.bfs_order();
  std::vector<int> last(un, 0);  // last rank covered, to check contiguity
  for (std::size_t i = bfs.size(); i-- > 0;) {
    const int r = bfs[i];
    const auto ur = static_cast<std::size_t>(r);
    int* ops = out.ops_.data() + out.off_[ur];
    std::size_t m = 0;
    ops[m++] = CombineOrder::kSelf;
    for (int c : tree.children(r)) ops[m++] = c;
    auto key = [&](int op) { return op == CombineOrder::kSelf ? r : out.first_[static_cast<std::size_t>(op)]; };
    // Insertion sort by first covered rank (operand counts are small).
    for (std::size_t a = 1; a < m; ++a) {
      const int x = ops[a];
      std::size_t b = a;
      for (; b > 0 && key(ops[b - 1]) > key(x); --b) ops[b] = ops[b - 1];
      ops[b] = x;
    }
    // The operands must abut: each starts right after the previous one ends.
    int expect = key(ops[0]);
    for (std::size_t a = 0; a < m; ++a) {
      const int op = ops[a];
      if (key(op) != expect) return false;
      expect = op == CombineOrder::kSelf ? r + 1 : last[static_cast<std::size_t>(op)] + 1;
    }
    out.first_[ur] = key(ops[0]);
    last[ur] = expect - 1;
  }
  return true;
}

RankOrderPlan plan_rank_order_reduce(int n, int root, TreeShape shape) {
  return plan_rank_order_reduce(build_tree(n, root, shape), root, shape);
}

RankOrderPlan plan_rank_order_reduce(Tree tree, int root, TreeShape fallback_shape) {
  RankOrderPlan p;
  p.root = root;
  if (compute_rank_order(tree, p.order)) {
    p.tree = std::move(tree);
    return p;
  }
  p.tree = build_tree(tree.size(), 0, fallback_shape);
  if (!compute_rank_order(p.tree, p.order))
    detail::bad_argument("plan_rank_order_reduce", "fallback shape", static_cast<int>(fallback_shape.kind));
  return p;
}

}  // namespace strata::patterns
