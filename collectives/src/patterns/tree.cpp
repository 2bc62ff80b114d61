// Single-level trees: flat, k-nomial (radix 1 = chain), complete binary.
#include "patterns/tree.hpp"

#include <algorithm>

namespace strata::patterns {

namespace detail {
void bad_argument(const char* function, const char* what, long long value) {
  throw std::invalid_argument(std::string("strata::patterns::") + function + ": invalid " + what + " (" +
                              std::to_string(value) + ")");
}
}  // namespace detail

int knomial_parent(int v, int n, int k) noexcept {
  if (v <= 0 || v >= n) return -1;
  if (k <= 1) return v - 1;
  // Clear the lowest non-zero base-k digit of v.
  long long s = 1;
  while (v % (s * k) == 0) s *= k;
  return v - static_cast<int>(v % (s * k));
}

void knomial_children(int v, int n, int k, std::vector<int>& out) {
  if (v < 0 || v >= n) return;
  if (k <= 1) {
    if (v + 1 < n) out.push_back(v + 1);
    return;
  }
  // s = k^p where p is the position of v's lowest non-zero digit; for the root
  // the smallest power of k that is >= n.
  long long s = 1;
  if (v == 0) {
    while (s < n) s *= k;
  } else {
    while (v % (s * k) == 0) s *= k;
  }
  for (long long stride = s / k; stride >= 1; stride /= k) {
    for (long long j = 1; j < k; ++j) {
      const long long c = v + j * stride;
      if (c >= n) break;
      out.push_back(static_cast<int>(c));
    }
  }
}

namespace {

// Virtual-rank edges (parent, child) of a complete binary tree of m nodes,
// labelled in pre-order; left (larger or equal) subtree first.
void binary_edges(int m, std::vector<std::pair<int, int>>& vedges) {
  const auto um = static_cast<std::size_t>(m);
  std::vector<int> size(um, 1);
  for (int h = m - 1; h >= 1; --h) size[static_cast<std::size_t>((h - 1) / 2)] += size[static_cast<std::size_t>(h)];
  std::vector<int> label(um, 0);
  for (int h = 0; h < m; ++h) {
    const int l = 2 * h + 1;
    const int r = 2 * h + 2;
    const int lab = label[static_cast<std::size_t>(h)];
    if (l < m) {
      label[static_cast<std::size_t>(l)] = lab + 1;
      vedges.emplace_back(lab, lab + 1);
    }
    if (r < m) {
      label[static_cast<std::size_t>(r)] = lab + 1 + size[static_cast<std::size_t>(l)];
      vedges.emplace_back(lab, label[static_cast<std::size_t>(r)]);
    }
  }
}

}  // namespace

void append_tree_edges(const std::vector<int>& members, int root_index, TreeShape shape,
                       std::vector<std::pair<int, int>>& edges) {
  const int m = static_cast<int>(members.size());
  if (m == 0) return;
  if (root_index < 0 || root_index >= m) detail::bad_argument("append_tree_edges", "root_index", root_index);
  auto real = [&](int v) { return members[static_cast<std::size_t>(mod(v + root_index, m))]; };
  switch (shape.kind) {
    case TreeKind::flat:
      for (int v = 1; v < m; ++v) edges.emplace_back(real(0), real(v));
      break;
    case TreeKind::knomial: {
      if (shape.radix < 1) detail::bad_argument("append_tree_edges", "radix", shape.radix);
      std::vector<int> kids;
      for (int v = 0; v < m; ++v) {
        kids.clear();
        knomial_children(v, m, shape.radix, kids);
        for (int c : kids) edges.emplace_back(real(v), real(c));
      }
      break;
    }
    case TreeKind::binary: {
      std::vector<std::pair<int, int>> vedges;
      vedges.reserve(static_cast<std::size_t>(m));
      binary_edges(m, vedges);
      for (auto [p, c] : vedges) edges.emplace_back(real(p), real(c));
      break;
    }
  }
}

Tree::Tree(int n, int root, const std::vector<std::pair<int, int>>& edges, const std::vector<std::uint8_t>& level)
    : root_(root), level_(level) {
  if (n < 1) detail::bad_argument("Tree", "size", n);
  if (root < 0 || root >= n) detail::bad_argument("Tree", "root", root);
  if (static_cast<int>(edges.size()) != n - 1)
    detail::bad_argument("Tree", "edge count", static_cast<long long>(edges.size()));
  if (!level_.empty() && static_cast<int>(level_.size()) != n)
    detail::bad_argument("Tree", "level size", static_cast<long long>(level_.size()));
  const auto un = static_cast<std::size_t>(n);
  parent_.assign(un, -1);
  child_off_.assign(un + 1, 0);
  for (auto [p, c] : edges) {
    if (p < 0 || p >= n) detail::bad_argument("Tree", "edge parent", p);
    if (c < 0 || c >= n || c == root) detail::bad_argument("Tree", "edge child", c);
    if (parent_[static_cast<std::size_t>(c)] != -1) detail::bad_argument("Tree", "child with two parents", c);
    parent_[static_cast<std::size_t>(c)] = p;
    ++child_off_[static_cast<std::size_t>(p) + 1];
  }
  for (std::size_t i = 0; i < un; ++i) child_off_[i + 1] += child_off_[i];
  child_.assign(un - 1, 0);
  {
    std::vector<int> fill(child_off_.begin(), child_off_.end() - 1);
    for (auto [p, c] : edges) child_[static_cast<std::size_t>(fill[static_cast<std::size_t>(p)]++)] = c;
  }
  // Breadth-first from the root: detects cycles / disconnected parts.
  depth_.assign(un, 0);
  arrival_.assign(un, 0);
  bfs_.clear();
  bfs_.reserve(un);
  bfs_.push_back(root);
  for (std::size_t head = 0; head < bfs_.size(); ++head) {
    const int u = bfs_[head];
    const auto uu = static_cast<std::size_t>(u);
    int j = 0;
    for (int c : children(u)) {
      const auto uc = static_cast<std::size_t>(c);
      depth_[uc] = depth_[uu] + 1;
      arrival_[uc] = arrival_[uu] + (++j);
      height_ = std::max(height_, depth_[uc]);
      steps_ = std::max(steps_, arrival_[uc]);
      bfs_.push_back(c);
    }
  }
  if (bfs_.size() != un)
    detail::bad_argument("Tree", "edges (not a spanning tree), reached", static_cast<long long>(bfs_.size()));
  // Subtree sizes and virtual-rank extents, bottom-up.
  sub_.assign(un, 1);
  std::vector<int> lo(un);
  std::vector<int> hi(un);
  for (int r = 0; r < n; ++r) lo[static_cast<std::size_t>(r)] = hi[static_cast<std::size_t>(r)] = virtual_rank(r);
  contiguous_ = true;
  for (std::size_t i = un; i-- > 0;) {
    const auto u = static_cast<std::size_t>(bfs_[i]);
    if (lo[u] != virtual_rank(bfs_[i]) || hi[u] - lo[u] + 1 != sub_[u]) contiguous_ = false;
    const int p = parent_[u];
    if (p >= 0) {
      const auto up = static_cast<std::size_t>(p);
      sub_[up] += sub_[u];
      lo[up] = std::min(lo[up], lo[u]);
      hi[up] = std::max(hi[up], hi[u]);
    }
  }
}

Tree build_tree(int n, int root, TreeShape shape) {
  if (n < 1) detail::bad_argument("build_tree", "size", n);
  if (root < 0 || root >= n) detail::bad_argument("build_tree", "root", root);
  if (shape.kind == TreeKind::knomial && shape.radix < 1) detail::bad_argument("build_tree", "radix", shape.radix);
  std::vector<int> members(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) members[static_cast<std::size_t>(i)] = i;
  std::vector<std::pair<int, int>> edges;
  edges.reserve(static_cast<std::size_t>(n));
  append_tree_edges(members, root, shape, edges);
  return Tree(n, root, edges);
}

}  // namespace strata::patterns
