// Rank-ordered reduction: a symbolic non-commutative op (concatenation of rank
// ids) must give "0,1,...,n-1" for every shape, root and size.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "patterns/multilevel.hpp"
#include "patterns/rank_order.hpp"

namespace sp = strata::patterns;

namespace {

std::string expected(int n) {
  std::string s;
  for (int r = 0; r < n; ++r) s += (r ? "," : "") + std::to_string(r);
  return s;
}

// Evaluates the reduction bottom-up with op = "a,b" (associative, not commutative).
std::string reduce(const sp::Tree& t, const sp::CombineOrder& order) {
  std::vector<std::string> partial(static_cast<std::size_t>(t.size()));
  const auto bfs = t.bfs_order();
  for (std::size_t i = bfs.size(); i-- > 0;) {
    const int r = bfs[i];
    std::string acc;
    for (int op : order.operands(r)) {
      const std::string& x = op == sp::CombineOrder::kSelf ? std::to_string(r) : partial[static_cast<std::size_t>(op)];
      acc += (acc.empty() ? "" : ",") + x;
    }
    partial[static_cast<std::size_t>(r)] = acc;
  }
  return partial[static_cast<std::size_t>(t.root())];
}

std::vector<sp::TreeShape> all_shapes() {
  std::vector<sp::TreeShape> s{sp::TreeShape::flat(), sp::TreeShape::binary()};
  for (int k = 1; k <= 8; ++k) s.push_back(sp::TreeShape::knomial(k));
  return s;
}

}  // namespace

TEST(RankOrder, EveryShapeRootAndSizeReducesInRankOrder) {
  for (sp::TreeShape shape : all_shapes()) {
    for (int n = 1; n <= 64; ++n) {
      const std::string want = expected(n);
      for (int root = 0; root < n; ++root) {
        const sp::RankOrderPlan p = sp::plan_rank_order_reduce(n, root, shape);
        ASSERT_EQ(p.root, root);
        ASSERT_EQ(reduce(p.tree, p.order), want)
            << "kind=" << static_cast<int>(shape.kind) << " k=" << shape.radix << " n=" << n << " root=" << root;
        // Each operand list holds the rank itself once plus each child once.
        for (int r = 0; r < n; ++r) ASSERT_EQ(p.order.operands(r).size(), p.tree.children(r).size() + 1);
        // Fallback only when needed, and always to a tree rooted at 0.
        if (p.has_extra_hop()) {
          EXPECT_EQ(p.tree.root(), 0);
          sp::CombineOrder o;
          EXPECT_FALSE(sp::compute_rank_order(sp::build_tree(n, root, shape), o));
        } else {
          EXPECT_EQ(p.tree.root(), root);
        }
      }
    }
  }
}

TEST(RankOrder, RootZeroAndFlatTreesNeverNeedTheExtraHop) {
  for (sp::TreeShape shape : all_shapes())
    for (int n = 1; n <= 64; ++n) EXPECT_FALSE(sp::plan_rank_order_reduce(n, 0, shape).has_extra_hop());
  for (int n = 1; n <= 64; ++n)
    for (int root = 0; root < n; ++root)
      EXPECT_FALSE(sp::plan_rank_order_reduce(n, root, sp::TreeShape::flat()).has_extra_hop());
}

TEST(RankOrder, WrappingSubtreesAreRefusedAndFallBackToRootZero) {
  // Chain rooted at 1 over 3 ranks: 1 -> 2 -> 0, subtree of 2 is {2, 0}: wraps.
  sp::CombineOrder o;
  EXPECT_FALSE(sp::compute_rank_order(sp::build_tree(3, 1, sp::TreeShape::chain()), o));
  const sp::RankOrderPlan p = sp::plan_rank_order_reduce(3, 1, sp::TreeShape::chain());
  EXPECT_TRUE(p.has_extra_hop());
  EXPECT_EQ(p.tree.root(), 0);
  EXPECT_EQ(reduce(p.tree, p.order), "0,1,2");
  // Chain rooted at n-1 does not wrap: n-1 <- 0 <- 1 <- ... folds as (0..n-2), n-1.
  const sp::RankOrderPlan q = sp::plan_rank_order_reduce(5, 4, sp::TreeShape::chain());
  EXPECT_FALSE(q.has_extra_hop());
  const std::vector<int> ops(q.order.operands(4).begin(), q.order.operands(4).end());
  EXPECT_EQ(ops, (std::vector<int>{0, sp::CombineOrder::kSelf}));
}

TEST(RankOrder, BinomialRootZeroCombinesOwnValueFirst) {
  const sp::RankOrderPlan p = sp::plan_rank_order_reduce(8, 0, sp::TreeShape::binomial());
  const std::vector<int> ops(p.order.operands(0).begin(), p.order.operands(0).end());
  EXPECT_EQ(ops, (std::vector<int>{sp::CombineOrder::kSelf, 1, 2, 4}));
  EXPECT_EQ(p.order.first_rank(4), 4);
}

TEST(RankOrder, MultilevelTreesFallBackOnCyclicPlacement) {
  // Cyclic placement over 2 hosts: host 0 = {0,2,4,...}; subtrees are not intervals.
  std::vector<sp::Place> cyc;
  std::vector<sp::Place> blk;
  for (int r = 0; r < 12; ++r) {
    cyc.push_back({r % 2, 0});
    blk.push_back({r / 6, (r % 6) / 3});
  }
  for (int root = 0; root < 12; ++root) {
    sp::RankOrderPlan c =
        sp::plan_rank_order_reduce(sp::build_multilevel_tree(cyc, root, {}).tree, root, sp::TreeShape::binomial());
    EXPECT_EQ(reduce(c.tree, c.order), expected(12));
    EXPECT_TRUE(c.has_extra_hop() || root == 0);
    sp::RankOrderPlan b =
        sp::plan_rank_order_reduce(sp::build_multilevel_tree(blk, root, {}).tree, root, sp::TreeShape::binomial());
    EXPECT_EQ(reduce(b.tree, b.order), expected(12));
  }
  // Block placement rooted at 0 keeps the hierarchical tree.
  const sp::MultilevelTree mt = sp::build_multilevel_tree(blk, 0, {});
  const sp::RankOrderPlan b0 = sp::plan_rank_order_reduce(mt.tree, 0, sp::TreeShape::binomial());
  EXPECT_FALSE(b0.has_extra_hop());
  EXPECT_EQ(b0.tree.parent(6), 0);
}
