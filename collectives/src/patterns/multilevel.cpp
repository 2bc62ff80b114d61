// Multilevel trees: host leaders -> package leaders -> NUMA leaders -> cores.
#include "patterns/multilevel.hpp"

#include <algorithm>
#include <numeric>
#include <utility>

namespace strata::patterns {

namespace {

// Ranks sorted by (host, package, numa, rank): groups become contiguous runs.
std::vector<int> sorted_by_place(const std::vector<Place>& places) {
  std::vector<int> order(places.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const Place& pa = places[static_cast<std::size_t>(a)];
    const Place& pb = places[static_cast<std::size_t>(b)];
    if (pa.host != pb.host) return pa.host < pb.host;
    if (pa.package != pb.package) return pa.package < pb.package;
    if (pa.numa != pb.numa) return pa.numa < pb.numa;
    return a < b;
  });
  return order;
}

int index_of(const std::vector<int>& v, int x) {
  return static_cast<int>(std::find(v.begin(), v.end(), x) - v.begin());
}

bool same_package(const Place& a, const Place& b) { return a.host == b.host && a.package == b.package; }
bool same_numa(const Place& a, const Place& b) { return same_package(a, b) && a.numa == b.numa; }

}  // namespace

const char* to_string(TreeLevel level) noexcept {
  switch (level) {
    case TreeLevel::host:
      return "host";
    case TreeLevel::package:
      return "package";
    case TreeLevel::numa:
      return "numa";
    case TreeLevel::core:
      return "core";
  }
  return "?";
}

Leaders compute_leaders(const std::vector<Place>& places, int root, RootPolicy policy) {
  const int n = static_cast<int>(places.size());
  if (n < 1) detail::bad_argument("compute_leaders", "number of places", n);
  if (root < 0 || root >= n) detail::bad_argument("compute_leaders", "root", root);
  const std::vector<int> order = sorted_by_place(places);
  Leaders l;
  l.host_leader.assign(places.size(), -1);
  l.package_leader.assign(places.size(), -1);
  l.numa_leader.assign(places.size(), -1);
  const Place& rp = places[static_cast<std::size_t>(root)];
  const bool promote = policy == RootPolicy::promote;
  auto at = [&](std::size_t i) -> const Place& { return places[static_cast<std::size_t>(order[i])]; };
  auto lowest = [&](std::size_t i, std::size_t j) {
    return *std::min_element(order.begin() + static_cast<long>(i), order.begin() + static_cast<long>(j));
  };
  // Runs of equal host, then of equal (host, package), then of equal (host,
  // package, numa), in the sorted order.
  for (std::size_t i = 0; i < order.size();) {
    const int host = at(i).host;
    std::size_t j = i;
    while (j < order.size() && at(j).host == host) ++j;
    int hl = lowest(i, j);
    if (promote && host == rp.host) hl = root;
    const Place& hp = places[static_cast<std::size_t>(hl)];
    for (std::size_t a = i; a < j;) {
      const Place& pa = at(a);
      std::size_t b = a;
      while (b < j && same_package(at(b), pa)) ++b;
      int pl = lowest(a, b);
      if (promote && same_package(pa, rp)) pl = root;
      if (same_package(pa, hp)) pl = hl;  // the host leader leads its package
      const Place& pp = places[static_cast<std::size_t>(pl)];
      for (std::size_t c = a; c < b;) {
        const Place& pc = at(c);
        std::size_t d = c;
        while (d < b && same_numa(at(d), pc)) ++d;
        int nl = order[c];  // lowest rank of the region (sorted by rank within it)
        if (promote && same_numa(pc, rp)) nl = root;
        if (same_numa(pc, pp)) nl = pl;  // the package leader leads its NUMA region
        for (std::size_t e = c; e < d; ++e) {
          const auto r = static_cast<std::size_t>(order[e]);
          l.numa_leader[r] = nl;
          l.package_leader[r] = pl;
          l.host_leader[r] = hl;
        }
        c = d;
      }
      a = b;
    }
    i = j;
  }
  return l;
}

MultilevelTree build_multilevel_tree(const std::vector<Place>& places, int root, const MultilevelShape& shape) {
  const int n = static_cast<int>(places.size());
  const Leaders l = compute_leaders(places, root, shape.policy);  // validates
  const std::vector<int> order = sorted_by_place(places);
  std::vector<std::pair<int, int>> edges;
  edges.reserve(places.size());
  std::vector<std::uint8_t> level(places.size(), 0);
  auto tag = [&](std::size_t from, TreeLevel lv) {
    for (std::size_t e = from; e < edges.size(); ++e)
      level[static_cast<std::size_t>(edges[e].second)] = static_cast<std::uint8_t>(lv);
  };
  auto at = [&](std::size_t i) -> const Place& { return places[static_cast<std::size_t>(order[i])]; };

  // Level A: host leaders, ascending rank, rotated to the root's host leader.
  std::vector<int> members;
  for (int r = 0; r < n; ++r)
    if (l.host_leader[static_cast<std::size_t>(r)] == r) members.push_back(r);
  const int tree_root = l.host_leader[static_cast<std::size_t>(root)];
  std::size_t from = edges.size();
  append_tree_edges(members, index_of(members, tree_root), shape.host, edges);
  tag(from, TreeLevel::host);

  // One tree per group of the sorted order (a run of `same` places): among the
  // ranks that lead their subgroup (`leader_of(r) == r`), ascending, rooted at
  // the group's leader. A group with one subgroup adds no edge.
  auto level_trees = [&](auto same, const std::vector<int>& group_leader, const std::vector<int>* leader_of,
                         TreeShape sh, TreeLevel lv) {
    from = edges.size();
    for (std::size_t i = 0; i < order.size();) {
      const Place& p = at(i);
      members.clear();
      std::size_t j = i;
      for (; j < order.size() && same(at(j), p); ++j) {
        const int r = order[j];
        if (leader_of == nullptr || (*leader_of)[static_cast<std::size_t>(r)] == r) members.push_back(r);
      }
      std::sort(members.begin(), members.end());
      append_tree_edges(members, index_of(members, group_leader[static_cast<std::size_t>(order[i])]), sh, edges);
      i = j;
    }
    tag(from, lv);
  };
  // Level B: per host, package leaders, rooted at the host leader.
  level_trees([](const Place& a, const Place& b) { return a.host == b.host; }, l.host_leader, &l.package_leader,
              shape.package, TreeLevel::package);
  // Level C: per package, NUMA leaders, rooted at the package leader.
  level_trees(same_package, l.package_leader, &l.numa_leader, shape.numa, TreeLevel::numa);
  // Level D: per NUMA region, its ranks, rooted at the NUMA leader.
  level_trees(same_numa, l.numa_leader, nullptr, shape.core, TreeLevel::core);

  MultilevelTree t;
  t.tree = Tree(n, tree_root, edges, level);
  t.root = root;
  return t;
}

MultilevelTree build_single_level_tree(int n, int root, TreeShape shape) {
  MultilevelTree t;
  t.tree = build_tree(n, root, shape);
  t.root = root;
  return t;
}

}  // namespace strata::patterns
