// Multilevel trees: host leaders -> NUMA leaders -> cores.
#include "patterns/multilevel.hpp"

#include <algorithm>
#include <numeric>
#include <utility>

namespace strata::patterns {

namespace {

// Ranks sorted by (host, numa, rank): groups become contiguous runs.
std::vector<int> sorted_by_place(const std::vector<Place>& places) {
  std::vector<int> order(places.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const Place& pa = places[static_cast<std::size_t>(a)];
    const Place& pb = places[static_cast<std::size_t>(b)];
    if (pa.host != pb.host) return pa.host < pb.host;
    if (pa.numa != pb.numa) return pa.numa < pb.numa;
    return a < b;
  });
  return order;
}

int index_of(const std::vector<int>& v, int x) {
  return static_cast<int>(std::find(v.begin(), v.end(), x) - v.begin());
}

}  // namespace

Leaders compute_leaders(const std::vector<Place>& places, int root, RootPolicy policy) {
  const int n = static_cast<int>(places.size());
  if (n < 1) detail::bad_argument("compute_leaders", "number of places", n);
  if (root < 0 || root >= n) detail::bad_argument("compute_leaders", "root", root);
  const std::vector<int> order = sorted_by_place(places);
  Leaders l;
  l.host_leader.assign(places.size(), -1);
  l.numa_leader.assign(places.size(), -1);
  const Place& rp = places[static_cast<std::size_t>(root)];
  const bool promote = policy == RootPolicy::promote;
  // Runs of equal host, then of equal (host, numa), in the sorted order.
  for (std::size_t i = 0; i < order.size();) {
    const int host = places[static_cast<std::size_t>(order[i])].host;
    std::size_t j = i;
    while (j < order.size() && places[static_cast<std::size_t>(order[j])].host == host) ++j;
    int hl = *std::min_element(order.begin() + static_cast<long>(i), order.begin() + static_cast<long>(j));
    if (promote && host == rp.host) hl = root;
    const int hl_numa = places[static_cast<std::size_t>(hl)].numa;
    for (std::size_t a = i; a < j;) {
      const int numa = places[static_cast<std::size_t>(order[a])].numa;
      std::size_t b = a;
      while (b < j && places[static_cast<std::size_t>(order[b])].numa == numa) ++b;
      int nl = order[a];  // lowest rank of the region (sorted by rank within it)
      if (promote && host == rp.host && numa == rp.numa) nl = root;
      if (numa == hl_numa) nl = hl;  // the host leader leads its NUMA region
      for (std::size_t c = a; c < b; ++c) {
        l.numa_leader[static_cast<std::size_t>(order[c])] = nl;
        l.host_leader[static_cast<std::size_t>(order[c])] = hl;
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

  // Level A: host leaders, ascending rank, rotated to the root's host leader.
  std::vector<int> members;
  for (int r = 0; r < n; ++r)
    if (l.host_leader[static_cast<std::size_t>(r)] == r) members.push_back(r);
  const int tree_root = l.host_leader[static_cast<std::size_t>(root)];
  std::size_t from = edges.size();
  append_tree_edges(members, index_of(members, tree_root), shape.host, edges);
  tag(from, TreeLevel::host);

  // Level B: per host, NUMA leaders ascending, rooted at the host leader.
  from = edges.size();
  for (std::size_t i = 0; i < order.size();) {
    const int host = places[static_cast<std::size_t>(order[i])].host;
    members.clear();
    std::size_t j = i;
    for (; j < order.size() && places[static_cast<std::size_t>(order[j])].host == host; ++j) {
      const int r = order[j];
      if (l.numa_leader[static_cast<std::size_t>(r)] == r) members.push_back(r);
    }
    std::sort(members.begin(), members.end());
    append_tree_edges(members, index_of(members, l.host_leader[static_cast<std::size_t>(order[i])]), shape.numa, edges);
    i = j;
  }
  tag(from, TreeLevel::numa);

  // Level C: per NUMA region, its ranks ascending, rooted at the NUMA leader.
  from = edges.size();
  for (std::size_t i = 0; i < order.size();) {
    const Place p = places[static_cast<std::size_t>(order[i])];
    members.clear();
    std::size_t j = i;
    for (; j < order.size(); ++j) {
      const Place q = places[static_cast<std::size_t>(order[j])];
      if (q.host != p.host || q.numa != p.numa) break;
      members.push_back(order[j]);  // already ascending
    }
    append_tree_edges(members, index_of(members, l.numa_leader[static_cast<std::size_t>(order[i])]), shape.core, edges);
    i = j;
  }
  tag(from, TreeLevel::core);

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
