// Single-level trees: flat, k-nomial (radix 1..8), binary, for n = 1..64 and every root.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "patterns/tree.hpp"

namespace sp = strata::patterns;

namespace {

std::vector<sp::TreeShape> all_shapes() {
  std::vector<sp::TreeShape> s{sp::TreeShape::flat(), sp::TreeShape::binary()};
  for (int k = 1; k <= 8; ++k) s.push_back(sp::TreeShape::knomial(k));
  return s;
}

std::string name(sp::TreeShape s) {
  switch (s.kind) {
    case sp::TreeKind::flat:
      return "flat";
    case sp::TreeKind::binary:
      return "binary";
    case sp::TreeKind::knomial:
      return "knomial" + std::to_string(s.radix);
  }
  return "?";
}

// ceil(log_k n) for k >= 2.
int ceil_log(int n, int k) {
  int l = 0;
  long long p = 1;
  while (p < n) {
    p *= k;
    ++l;
  }
  return l;
}

// Lowest non-zero digit weight of v > 0 in base k: the stride at which v's parent sends to it.
long long span(int v, int k) {
  long long s = 1;
  while (v % (s * k) == 0) s *= k;
  return s;
}

bool is_power_of(int n, int k) {
  long long p = 1;
  while (p < n) p *= k;
  return p == n;
}

}  // namespace

TEST(Tree, EveryShapeIsASpanningTreeWithConsistentParentsAndChildren) {
  for (sp::TreeShape shape : all_shapes()) {
    for (int n = 1; n <= 64; ++n) {
      for (int root = 0; root < n; ++root) {
        const sp::Tree t = sp::build_tree(n, root, shape);
        const std::string ctx = name(shape) + " n=" + std::to_string(n) + " root=" + std::to_string(root);
        ASSERT_EQ(t.size(), n) << ctx;
        ASSERT_EQ(t.root(), root) << ctx;
        ASSERT_EQ(t.parent(root), -1) << ctx;
        ASSERT_EQ(static_cast<int>(t.bfs_order().size()), n) << ctx;
        int edges = 0;
        for (int r = 0; r < n; ++r) {
          if (r != root) {
            ASSERT_GE(t.parent(r), 0) << ctx << " r=" << r;
            ASSERT_EQ(t.depth(r), t.depth(t.parent(r)) + 1) << ctx;
            // r is listed exactly once among its parent's children.
            int seen = 0;
            for (int c : t.children(t.parent(r))) seen += c == r;
            ASSERT_EQ(seen, 1) << ctx << " r=" << r;
          }
          int sub = 1;
          for (int c : t.children(r)) {
            ASSERT_EQ(t.parent(c), r) << ctx;
            sub += t.subtree_size(c);
            ++edges;
          }
          ASSERT_EQ(t.subtree_size(r), sub) << ctx;
        }
        ASSERT_EQ(edges, n - 1) << ctx;
        ASSERT_EQ(t.subtree_size(root), n) << ctx;
        // Acyclic and connected: walking up from any rank reaches the root in depth steps.
        for (int r = 0; r < n; ++r) {
          int u = r;
          for (int i = 0; i < t.depth(r); ++i) u = t.parent(u);
          ASSERT_EQ(u, root) << ctx << " r=" << r;
        }
      }
    }
  }
}

TEST(Tree, ChildrenAreInSendOrderWidestBranchFirst) {
  for (sp::TreeShape shape : all_shapes()) {
    for (int n = 1; n <= 64; ++n) {
      for (int root = 0; root < n; ++root) {
        const sp::Tree t = sp::build_tree(n, root, shape);
        for (int r = 0; r < n; ++r) {
          const auto kids = t.children(r);
          for (std::size_t i = 1; i < kids.size(); ++i) {
            if (shape.kind == sp::TreeKind::knomial && shape.radix >= 2) {
              // k-nomial: widest span (largest stride k^i) first, i.e. the child
              // that would root the largest subtree if n were a power of k.
              ASSERT_GE(span(t.virtual_rank(kids[i - 1]), shape.radix), span(t.virtual_rank(kids[i]), shape.radix))
                  << name(shape) << " n=" << n << " root=" << root << " r=" << r;
            } else {
              ASSERT_GE(t.subtree_size(kids[i - 1]), t.subtree_size(kids[i]))
                  << name(shape) << " n=" << n << " root=" << root << " r=" << r;
            }
          }
          // Arrival: the i-th child receives i+1 steps after its parent.
          for (std::size_t i = 0; i < kids.size(); ++i)
            ASSERT_EQ(t.arrival(kids[i]), t.arrival(r) + static_cast<int>(i) + 1);
        }
      }
    }
  }
}

TEST(Tree, EverySubtreeIsAContiguousRangeOfVirtualRanks) {
  for (sp::TreeShape shape : all_shapes()) {
    for (int n = 1; n <= 64; ++n) {
      for (int root = 0; root < n; ++root) {
        const sp::Tree t = sp::build_tree(n, root, shape);
        ASSERT_TRUE(t.contiguous()) << name(shape) << " n=" << n << " root=" << root;
        // Independent check: every rank in [v, v + size) descends from r.
        for (int r = 0; r < n; ++r) {
          const int v = t.virtual_rank(r);
          for (int w = v; w < v + t.subtree_size(r); ++w) {
            int u = sp::to_real(w, root, n);
            while (u != r && u != root) u = t.parent(u);
            ASSERT_EQ(u, r) << name(shape) << " n=" << n << " root=" << root << " r=" << r << " w=" << w;
          }
        }
      }
    }
  }
}

TEST(Tree, DepthAndStepBoundsPerShape) {
  for (int n = 1; n <= 64; ++n) {
    const int l2 = sp::ceil_log2(n);
    for (int root = 0; root < n; ++root) {
      const sp::Tree flat = sp::build_tree(n, root, sp::TreeShape::flat());
      EXPECT_EQ(flat.height(), n > 1 ? 1 : 0);
      EXPECT_EQ(flat.steps(), n - 1);
      const sp::Tree chain = sp::build_tree(n, root, sp::TreeShape::chain());
      EXPECT_EQ(chain.height(), n - 1);
      EXPECT_EQ(chain.steps(), n - 1);
      const sp::Tree binom = sp::build_tree(n, root, sp::TreeShape::binomial());
      EXPECT_EQ(binom.steps(), l2) << "binomial broadcast takes ceil(log2 n) steps, n=" << n;
      EXPECT_LE(binom.height(), l2);
      EXPECT_EQ(static_cast<int>(binom.children(root).size()), l2);
      const sp::Tree bin = sp::build_tree(n, root, sp::TreeShape::binary());
      EXPECT_EQ(bin.height(), sp::ceil_log2(n + 1) - 1) << "complete binary tree height, n=" << n;
      for (int r = 0; r < n; ++r) EXPECT_LE(bin.children(r).size(), 2u);
      for (int k = 2; k <= 8; ++k) {
        const sp::Tree t = sp::build_tree(n, root, sp::TreeShape::knomial(k));
        EXPECT_LE(t.height(), ceil_log(n, k)) << "k=" << k << " n=" << n;
        if (is_power_of(n, k)) {
          EXPECT_EQ(t.height(), ceil_log(n, k)) << "k=" << k << " n=" << n;
        }
        EXPECT_LE(t.steps(), (k - 1) * ceil_log(n, k)) << "k=" << k << " n=" << n;
        for (int r = 0; r < n; ++r) EXPECT_LE(static_cast<int>(t.children(r).size()), (k - 1) * ceil_log(n, k));
      }
    }
  }
}

TEST(Tree, KnomialFreeFunctionsMatchTheBuiltTree) {
  std::vector<int> kids;
  for (int k = 1; k <= 8; ++k) {
    for (int n = 1; n <= 64; ++n) {
      const int root = n / 3;
      const sp::Tree t = sp::build_tree(n, root, sp::TreeShape::knomial(k));
      for (int v = 0; v < n; ++v) {
        const int r = sp::to_real(v, root, n);
        const int p = sp::knomial_parent(v, n, k);
        EXPECT_EQ(p < 0 ? -1 : sp::to_real(p, root, n), t.parent(r));
        kids.clear();
        sp::knomial_children(v, n, k, kids);
        ASSERT_EQ(kids.size(), t.children(r).size());
        for (std::size_t i = 0; i < kids.size(); ++i) EXPECT_EQ(sp::to_real(kids[i], root, n), t.children(r)[i]);
      }
    }
  }
}

TEST(Tree, BinomialMatchesTheClassicBitDefinition) {
  // Parent of v clears v's lowest set bit; children v + 2^i for 2^i below it, largest first.
  const sp::Tree t = sp::build_tree(16, 0, sp::TreeShape::binomial());
  EXPECT_EQ(t.parent(12), 8);
  EXPECT_EQ(t.parent(7), 6);
  const std::vector<int> root_kids(t.children(0).begin(), t.children(0).end());
  EXPECT_EQ(root_kids, (std::vector<int>{8, 4, 2, 1}));
  const std::vector<int> kids8(t.children(8).begin(), t.children(8).end());
  EXPECT_EQ(kids8, (std::vector<int>{12, 10, 9}));
}

TEST(Tree, RadixThreeExample) {
  // n = 9, radix 3: root 0 sends to 3, 6 (stride 3), then 1, 2 (stride 1).
  const sp::Tree t = sp::build_tree(9, 0, sp::TreeShape::knomial(3));
  const std::vector<int> root_kids(t.children(0).begin(), t.children(0).end());
  EXPECT_EQ(root_kids, (std::vector<int>{3, 6, 1, 2}));
  EXPECT_EQ(t.parent(8), 6);
  EXPECT_EQ(t.parent(5), 3);
  EXPECT_EQ(t.height(), 2);
}

TEST(Tree, BinaryIsPreorderLabelledCompleteTree) {
  // n = 6: heap shape 0:(1,2) 1:(3,4) 2:(5); pre-order labels 0:(1,4) 1:(2,3) 4:(5).
  const sp::Tree t = sp::build_tree(6, 0, sp::TreeShape::binary());
  const std::vector<int> root_kids(t.children(0).begin(), t.children(0).end());
  EXPECT_EQ(root_kids, (std::vector<int>{1, 4}));
  EXPECT_EQ(t.subtree_size(1), 3);
  EXPECT_EQ(t.subtree_size(4), 2);
  EXPECT_EQ(t.parent(5), 4);
}

TEST(Tree, RejectsBadArguments) {
  EXPECT_THROW((void)sp::build_tree(0, 0, sp::TreeShape::binomial()), std::invalid_argument);
  EXPECT_THROW((void)sp::build_tree(4, 4, sp::TreeShape::binomial()), std::invalid_argument);
  EXPECT_THROW((void)sp::build_tree(4, -1, sp::TreeShape::flat()), std::invalid_argument);
  EXPECT_THROW((void)sp::build_tree(4, 0, sp::TreeShape::knomial(0)), std::invalid_argument);
  // A cycle is not a tree.
  EXPECT_THROW(sp::Tree(3, 0, {{1, 2}, {2, 1}}), std::invalid_argument);
}
