// Multilevel trees (host leaders -> package leaders -> NUMA leaders -> cores) over synthetic placements.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "patterns/multilevel.hpp"
#include "patterns/rank_order.hpp"

namespace sp = strata::patterns;

namespace {

struct Layout {
  std::string name;
  std::vector<sp::Place> places;
};

// Block placement: hosts of the given sizes, each split into `numa` regions of equal-ish size.
Layout block(const std::vector<int>& host_sizes, int numa) {
  Layout l{"block", {}};
  for (std::size_t h = 0; h < host_sizes.size(); ++h) {
    l.name += "_" + std::to_string(host_sizes[h]);
    for (int i = 0; i < host_sizes[h]; ++i) l.places.push_back({static_cast<int>(h), i * numa / host_sizes[h]});
  }
  l.name += "x" + std::to_string(numa);
  return l;
}

// Cyclic placement: rank r on host r % hosts, NUMA (r / hosts) % numa.
Layout cyclic(int n, int hosts, int numa) {
  Layout l{"cyclic" + std::to_string(n) + "_" + std::to_string(hosts) + "x" + std::to_string(numa), {}};
  for (int r = 0; r < n; ++r) l.places.push_back({r % hosts, (r / hosts) % numa});
  return l;
}

std::vector<Layout> layouts() {
  std::vector<Layout> v;
  v.push_back(block({1}, 1));
  v.push_back(block({2}, 1));
  v.push_back(block({8}, 2));
  v.push_back(block({4, 4}, 2));
  v.push_back(block({3, 5, 2}, 2));
  v.push_back(block({6, 6, 6}, 3));
  v.push_back(block({1, 1, 1, 1, 1}, 1));
  v.push_back(block({7, 4, 9}, 4));
  v.push_back(cyclic(12, 3, 2));
  v.push_back(cyclic(11, 2, 3));
  // Host ids need not be dense or sorted.
  v.push_back({"sparse_ids", {{7, 1}, {3, 0}, {7, 0}, {3, 0}, {7, 1}, {3, 5}, {9, 2}}});
  return v;
}

// Block placement over `hosts` hosts of `packages` packages x `numa` NUMA regions
// x `cores` cores each ('package:P numa:N core:C pu:1' per host): host-wide NUMA
// ids, as strata::RankPlace numbers them.
Layout packaged(int hosts, int packages, int numa, int cores) {
  Layout l{"pkg" + std::to_string(hosts) + "x" + std::to_string(packages) + "x" + std::to_string(numa) + "x" +
               std::to_string(cores),
           {}};
  for (int h = 0; h < hosts; ++h)
    for (int p = 0; p < packages; ++p)
      for (int m = 0; m < numa; ++m)
        for (int c = 0; c < cores; ++c) l.places.push_back({h, p * numa + m, p});
  return l;
}

// Layouts with more than one package per host.
std::vector<Layout> package_layouts() {
  std::vector<Layout> v;
  v.push_back(packaged(1, 2, 2, 2));
  v.push_back(packaged(2, 2, 2, 2));
  v.push_back(packaged(3, 2, 1, 3));
  v.push_back(packaged(1, 4, 1, 1));
  v.push_back(packaged(2, 3, 2, 1));
  // Cyclic over two hosts, packages and NUMA ids reused across packages (one
  // NUMA node spanning both packages: 'package:2 core:2').
  Layout c{"cyclic_pkg", {}};
  for (int r = 0; r < 13; ++r) c.places.push_back({r % 2, 0, (r / 2) % 2});
  v.push_back(c);
  v.push_back({"sparse_pkg", {{7, 1, 4}, {3, 0, 2}, {7, 0, 4}, {3, 0, 0}, {7, 1, 1}, {3, 5, 2}, {9, 2, 9}}});
  return v;
}

std::vector<sp::MultilevelShape> shapes() {
  std::vector<sp::MultilevelShape> v;
  const sp::TreeShape s[] = {sp::TreeShape::binomial(), sp::TreeShape::flat(), sp::TreeShape::chain(),
                             sp::TreeShape::knomial(3), sp::TreeShape::binary()};
  for (auto pol : {sp::RootPolicy::extra_hop, sp::RootPolicy::promote})
    for (std::size_t i = 0; i < 5; ++i) v.push_back({s[i], s[(i + 1) % 5], s[(i + 2) % 5], pol, s[(i + 3) % 5]});
  return v;
}

}  // namespace

TEST(Multilevel, LeadersAreLowestRanksAndHostLeadersLeadTheirNumaRegion) {
  for (const Layout& l : layouts()) {
    const int n = static_cast<int>(l.places.size());
    for (int root = 0; root < n; ++root) {
      for (auto pol : {sp::RootPolicy::extra_hop, sp::RootPolicy::promote}) {
        const sp::Leaders ld = sp::compute_leaders(l.places, root, pol);
        for (int r = 0; r < n; ++r) {
          const auto ur = static_cast<std::size_t>(r);
          const int hl = ld.host_leader[ur];
          const int nl = ld.numa_leader[ur];
          EXPECT_EQ(l.places[static_cast<std::size_t>(hl)].host, l.places[ur].host);
          EXPECT_EQ(l.places[static_cast<std::size_t>(nl)].host, l.places[ur].host);
          EXPECT_EQ(l.places[static_cast<std::size_t>(nl)].numa, l.places[ur].numa);
          EXPECT_EQ(ld.numa_leader[static_cast<std::size_t>(hl)], hl) << l.name;
          EXPECT_EQ(ld.package_leader[static_cast<std::size_t>(hl)], hl) << l.name;
          EXPECT_EQ(ld.package_leader[ur], hl) << l.name;  // one package per host in these layouts
          const bool root_group =
              pol == sp::RootPolicy::promote && l.places[ur].host == l.places[static_cast<std::size_t>(root)].host;
          if (root_group) {
            EXPECT_EQ(hl, root);
          }
          if (r == hl) {
            EXPECT_EQ(nl, r);
          }
        }
        for (int r = 0; r < n; ++r) {
          // Leader is the lowest rank of its group (unless promoted): check the host leader.
          const auto ur = static_cast<std::size_t>(r);
          if (pol == sp::RootPolicy::extra_hop) {
            for (int q = 0; q < ld.host_leader[ur]; ++q)
              EXPECT_NE(l.places[static_cast<std::size_t>(q)].host, l.places[ur].host) << l.name;
          }
        }
      }
    }
  }
}

TEST(Multilevel, EdgesRespectTheirLevelAndCountsMatchTheHierarchy) {
  std::vector<Layout> all = layouts();
  for (Layout& l : package_layouts()) all.push_back(std::move(l));
  for (const Layout& l : all) {
    const int n = static_cast<int>(l.places.size());
    std::set<int> hosts;
    std::set<std::pair<int, int>> packages;
    std::set<std::tuple<int, int, int>> regions;
    for (const sp::Place& p : l.places) {
      hosts.insert(p.host);
      packages.insert({p.host, p.package});
      regions.insert({p.host, p.package, p.numa});
    }
    for (const sp::MultilevelShape& shape : shapes()) {
      for (int root = 0; root < n; ++root) {
        const sp::MultilevelTree mt = sp::build_multilevel_tree(l.places, root, shape);
        const sp::Tree& t = mt.tree;
        const sp::Leaders ld = sp::compute_leaders(l.places, root, shape.policy);
        const std::string ctx = l.name + " root=" + std::to_string(root);
        ASSERT_EQ(t.size(), n);
        EXPECT_EQ(t.root(), ld.host_leader[static_cast<std::size_t>(root)]) << ctx;
        if (shape.policy == sp::RootPolicy::promote) {
          EXPECT_FALSE(mt.has_extra_hop()) << ctx;
        } else {
          EXPECT_EQ(mt.has_extra_hop(), ld.host_leader[static_cast<std::size_t>(root)] != root) << ctx;
        }
        int count[4] = {0, 0, 0, 0};
        for (int r = 0; r < n; ++r) {
          const auto ur = static_cast<std::size_t>(r);
          const int p = t.parent(r);
          if (p < 0) continue;
          const auto up = static_cast<std::size_t>(p);
          const sp::Place a = l.places[up];
          const sp::Place b = l.places[ur];
          const int lv = t.level(r);
          ASSERT_GE(lv, 0);
          ASSERT_LE(lv, 3);
          ++count[lv];
          switch (static_cast<sp::TreeLevel>(lv)) {
            case sp::TreeLevel::host:
              EXPECT_NE(a.host, b.host) << ctx;
              EXPECT_EQ(ld.host_leader[up], p) << ctx;
              EXPECT_EQ(ld.host_leader[ur], r) << ctx;
              break;
            case sp::TreeLevel::package:
              EXPECT_EQ(a.host, b.host) << ctx;
              EXPECT_NE(a.package, b.package) << ctx;
              EXPECT_EQ(ld.package_leader[up], p) << ctx;
              EXPECT_EQ(ld.package_leader[ur], r) << ctx;
              break;
            case sp::TreeLevel::numa:
              EXPECT_EQ(a.host, b.host) << ctx;
              EXPECT_EQ(a.package, b.package) << ctx;
              EXPECT_NE(a.numa, b.numa) << ctx;
              EXPECT_EQ(ld.numa_leader[up], p) << ctx;
              EXPECT_EQ(ld.numa_leader[ur], r) << ctx;
              break;
            case sp::TreeLevel::core:
              EXPECT_EQ(a.host, b.host) << ctx;
              EXPECT_EQ(a.package, b.package) << ctx;
              EXPECT_EQ(a.numa, b.numa) << ctx;
              EXPECT_NE(ld.numa_leader[ur], r) << ctx;
              break;
          }
          // Send order: wider levels first.
          const auto kids = t.children(p);
          for (std::size_t i = 1; i < kids.size(); ++i) EXPECT_LE(t.level(kids[i - 1]), t.level(kids[i])) << ctx;
        }
        EXPECT_EQ(count[0], static_cast<int>(hosts.size()) - 1) << ctx;
        EXPECT_EQ(count[1], static_cast<int>(packages.size() - hosts.size())) << ctx;
        EXPECT_EQ(count[2], static_cast<int>(regions.size() - packages.size())) << ctx;
        EXPECT_EQ(count[3], n - static_cast<int>(regions.size())) << ctx;
      }
    }
  }
}

TEST(Multilevel, RootOfTheTreeIsTheRootsHostLeaderAndTheExtraHopIsExposed) {
  // Two hosts of 4, two NUMA regions each: root 6 is not a leader.
  const std::vector<sp::Place> places = block({4, 4}, 2).places;
  const sp::MultilevelTree hop = sp::build_multilevel_tree(places, 6, {});
  EXPECT_EQ(hop.tree.root(), 4);
  EXPECT_EQ(hop.root, 6);
  EXPECT_TRUE(hop.has_extra_hop());
  EXPECT_EQ(hop.tree.parent(0), 4);  // host level rotated to the root's host
  sp::MultilevelShape promote;
  promote.policy = sp::RootPolicy::promote;
  const sp::MultilevelTree pr = sp::build_multilevel_tree(places, 6, promote);
  EXPECT_EQ(pr.tree.root(), 6);
  EXPECT_FALSE(pr.has_extra_hop());
  EXPECT_EQ(pr.tree.parent(0), 6);
  EXPECT_EQ(pr.tree.parent(4), 6);  // NUMA level: 6 leads host 1 and region (1, 1)
  EXPECT_EQ(pr.tree.parent(7), 6);
}

TEST(Multilevel, FlatShapesGiveTheTwoLevelPictureOfSeed000) {
  // 3 hosts x 4 ranks, 1 NUMA region each, all flat: leaders 0,4,8.
  const std::vector<sp::Place> places = block({4, 4, 4}, 1).places;
  sp::MultilevelShape s{sp::TreeShape::flat(), sp::TreeShape::flat(), sp::TreeShape::flat(), sp::RootPolicy::extra_hop};
  const sp::MultilevelTree mt = sp::build_multilevel_tree(places, 0, s);
  const std::vector<int> kids(mt.tree.children(0).begin(), mt.tree.children(0).end());
  EXPECT_EQ(kids, (std::vector<int>{4, 8, 1, 2, 3}));
  EXPECT_EQ(mt.tree.height(), 2);
}

TEST(Multilevel, SingleLevelVariantIgnoresTheHierarchy) {
  for (int n = 1; n <= 20; ++n)
    for (int root = 0; root < n; ++root) {
      const sp::MultilevelTree t = sp::build_single_level_tree(n, root, sp::TreeShape::binomial());
      EXPECT_FALSE(t.has_extra_hop());
      EXPECT_EQ(t.tree.root(), root);
      for (int r = 0; r < n; ++r) EXPECT_EQ(t.tree.level(r), 0);
    }
}

TEST(Multilevel, BlockPlacementRootedAtZeroKeepsContiguousSubtrees) {
  std::vector<Layout> all = layouts();
  for (Layout& l : package_layouts()) all.push_back(std::move(l));
  for (const Layout& l : all) {
    if (l.name.rfind("block", 0) != 0 && l.name.rfind("pkg", 0) != 0) continue;
    for (const sp::MultilevelShape& shape : shapes()) {
      const sp::MultilevelTree mt = sp::build_multilevel_tree(l.places, 0, shape);
      EXPECT_TRUE(mt.tree.contiguous()) << l.name;
      sp::CombineOrder order;
      EXPECT_TRUE(sp::compute_rank_order(mt.tree, order)) << l.name;
    }
  }
}

TEST(Multilevel, RejectsBadArguments) {
  EXPECT_THROW((void)sp::build_multilevel_tree({}, 0, {}), std::invalid_argument);
  EXPECT_THROW((void)sp::build_multilevel_tree({{0, 0}, {0, 0}}, 2, {}), std::invalid_argument);
}

namespace {

// The three-level builder as it was before the package level (host leaders ->
// NUMA leaders of each host -> cores, lowest ranks lead; extra-hop policy),
// kept as the reference the four-level tree must equal with one package per host.
struct RefTree {
  std::vector<int> parent;
  std::vector<std::vector<int>> children;
  std::vector<int> level;  // 0 host, 1 numa, 2 core
};

RefTree three_level_reference(const std::vector<sp::Place>& places, int root, const sp::MultilevelShape& shape) {
  const int n = static_cast<int>(places.size());
  std::vector<int> order(places.size());
  for (int r = 0; r < n; ++r) order[static_cast<std::size_t>(r)] = r;
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const sp::Place& pa = places[static_cast<std::size_t>(a)];
    const sp::Place& pb = places[static_cast<std::size_t>(b)];
    if (pa.host != pb.host) return pa.host < pb.host;
    if (pa.numa != pb.numa) return pa.numa < pb.numa;
    return a < b;
  });
  std::vector<int> hl(places.size()), nl(places.size());
  for (int r = 0; r < n; ++r) {
    int h = n, m = n;
    for (int q = 0; q < n; ++q) {
      if (places[static_cast<std::size_t>(q)].host != places[static_cast<std::size_t>(r)].host) continue;
      h = std::min(h, q);
      if (places[static_cast<std::size_t>(q)].numa == places[static_cast<std::size_t>(r)].numa) m = std::min(m, q);
    }
    hl[static_cast<std::size_t>(r)] = h;
    nl[static_cast<std::size_t>(r)] = m;
  }
  for (int r = 0; r < n; ++r)  // the host leader leads its NUMA region
    if (places[static_cast<std::size_t>(r)].numa ==
        places[static_cast<std::size_t>(hl[static_cast<std::size_t>(r)])].numa)
      nl[static_cast<std::size_t>(r)] = hl[static_cast<std::size_t>(r)];
  std::vector<std::pair<int, int>> edges;
  std::vector<int> level(places.size(), 0);
  auto tag = [&](std::size_t from, int lv) {
    for (std::size_t e = from; e < edges.size(); ++e) level[static_cast<std::size_t>(edges[e].second)] = lv;
  };
  auto idx = [](const std::vector<int>& v, int x) {
    return static_cast<int>(std::find(v.begin(), v.end(), x) - v.begin());
  };
  std::vector<int> members;
  for (int r = 0; r < n; ++r)
    if (hl[static_cast<std::size_t>(r)] == r) members.push_back(r);
  std::size_t from = 0;
  sp::append_tree_edges(members, idx(members, hl[static_cast<std::size_t>(root)]), shape.host, edges);
  tag(from, 0);
  from = edges.size();
  for (std::size_t i = 0; i < order.size();) {
    const int host = places[static_cast<std::size_t>(order[i])].host;
    members.clear();
    std::size_t j = i;
    for (; j < order.size() && places[static_cast<std::size_t>(order[j])].host == host; ++j)
      if (nl[static_cast<std::size_t>(order[j])] == order[j]) members.push_back(order[j]);
    std::sort(members.begin(), members.end());
    sp::append_tree_edges(members, idx(members, hl[static_cast<std::size_t>(order[i])]), shape.numa, edges);
    i = j;
  }
  tag(from, 1);
  from = edges.size();
  for (std::size_t i = 0; i < order.size();) {
    const sp::Place p = places[static_cast<std::size_t>(order[i])];
    members.clear();
    std::size_t j = i;
    for (; j < order.size(); ++j) {
      const sp::Place q = places[static_cast<std::size_t>(order[j])];
      if (q.host != p.host || q.numa != p.numa) break;
      members.push_back(order[j]);
    }
    sp::append_tree_edges(members, idx(members, nl[static_cast<std::size_t>(order[i])]), shape.core, edges);
    i = j;
  }
  tag(from, 2);
  RefTree t;
  t.parent.assign(places.size(), -1);
  t.children.assign(places.size(), {});
  for (auto [p, c] : edges) {
    t.parent[static_cast<std::size_t>(c)] = p;
    t.children[static_cast<std::size_t>(p)].push_back(c);
  }
  t.level = level;
  return t;
}

std::vector<int> kids_of(const sp::Tree& t, int r) {
  const auto k = t.children(r);
  return {k.begin(), k.end()};
}

}  // namespace

// One package per host (whatever its id): the four-level tree is the
// three-level host -> NUMA -> core tree, edge for edge and in the same send order.
TEST(Multilevel, OnePackagePerHostGivesTheThreeLevelTreeUnchanged) {
  const sp::TreeLevel old_level[] = {sp::TreeLevel::host, sp::TreeLevel::numa, sp::TreeLevel::core};
  for (const Layout& base : layouts()) {
    for (int package_id : {0, 1, -1}) {  // -1: package = 3 x host + 2 (per-host ids)
      std::vector<sp::Place> places = base.places;
      for (sp::Place& p : places) p.package = package_id >= 0 ? package_id : 3 * p.host + 2;
      const int n = static_cast<int>(places.size());
      for (const sp::MultilevelShape& shape : shapes()) {
        if (shape.policy != sp::RootPolicy::extra_hop) continue;
        for (int root = 0; root < n; ++root) {
          const std::string ctx =
              base.name + " package=" + std::to_string(package_id) + " root=" + std::to_string(root);
          const sp::MultilevelTree mt = sp::build_multilevel_tree(places, root, shape);
          const RefTree ref = three_level_reference(places, root, shape);
          for (int r = 0; r < n; ++r) {
            const auto ur = static_cast<std::size_t>(r);
            EXPECT_EQ(mt.tree.parent(r), ref.parent[ur]) << ctx << " rank " << r;
            EXPECT_EQ(kids_of(mt.tree, r), ref.children[ur]) << ctx << " rank " << r;
            if (ref.parent[ur] >= 0) {
              EXPECT_EQ(static_cast<sp::TreeLevel>(mt.tree.level(r)), old_level[ref.level[ur]]) << ctx << " rank " << r;
            }
          }
        }
      }
    }
  }
}

// 'package:2 numa:2 core:2 pu:1' on one host (ranks 0..7: package r / 4, NUMA r / 2),
// default shapes: 0 sends to package leader 4, then to its NUMA neighbour 2, then to 1.
TEST(Multilevel, TwoPackagesOneHostTreeHasPackageEdgesBetweenPackageLeaders) {
  const std::vector<sp::Place> places = packaged(1, 2, 2, 2).places;
  const sp::MultilevelTree mt = sp::build_multilevel_tree(places, 0, {});
  const sp::Tree& t = mt.tree;
  EXPECT_EQ(t.root(), 0);
  EXPECT_EQ(kids_of(t, 0), (std::vector<int>{4, 2, 1}));
  EXPECT_EQ(kids_of(t, 4), (std::vector<int>{6, 5}));
  EXPECT_EQ(t.parent(6), 4);  // NUMA region 3 hangs off its package leader, not off rank 0
  EXPECT_EQ(t.parent(3), 2);
  EXPECT_EQ(t.parent(7), 6);
  EXPECT_EQ(static_cast<sp::TreeLevel>(t.level(4)), sp::TreeLevel::package);
  EXPECT_EQ(static_cast<sp::TreeLevel>(t.level(2)), sp::TreeLevel::numa);
  EXPECT_EQ(static_cast<sp::TreeLevel>(t.level(6)), sp::TreeLevel::numa);
  for (int r : {1, 3, 5, 7}) EXPECT_EQ(static_cast<sp::TreeLevel>(t.level(r)), sp::TreeLevel::core) << r;
  int package_edges = 0;
  for (int r = 0; r < 8; ++r) package_edges += t.level(r) == static_cast<int>(sp::TreeLevel::package) && r != 0;
  EXPECT_EQ(package_edges, 1);
  EXPECT_STREQ(sp::to_string(sp::TreeLevel::package), "package");

  const sp::Leaders ld = sp::compute_leaders(places, 0, sp::RootPolicy::extra_hop);
  EXPECT_EQ(ld.package_leader, (std::vector<int>{0, 0, 0, 0, 4, 4, 4, 4}));
  EXPECT_EQ(ld.numa_leader, (std::vector<int>{0, 0, 2, 2, 4, 4, 6, 6}));
  EXPECT_EQ(ld.host_leader, (std::vector<int>(8, 0)));
}

// Two hosts of two packages: host edge 0 -> 8, then each host's package edge
// (0 -> 4, 8 -> 12); a flat package level with four packages; promotion.
TEST(Multilevel, TwoPackagesPerHostLeadersAndPromotion) {
  const std::vector<sp::Place> places = packaged(2, 2, 2, 2).places;
  const sp::MultilevelTree mt = sp::build_multilevel_tree(places, 0, {});
  EXPECT_EQ(kids_of(mt.tree, 0), (std::vector<int>{8, 4, 2, 1}));
  EXPECT_EQ(kids_of(mt.tree, 8), (std::vector<int>{12, 10, 9}));
  EXPECT_EQ(static_cast<sp::TreeLevel>(mt.tree.level(8)), sp::TreeLevel::host);
  EXPECT_EQ(static_cast<sp::TreeLevel>(mt.tree.level(12)), sp::TreeLevel::package);
  EXPECT_EQ(mt.tree.height(), 4);  // 0 -> 8 -> 12 -> 14 -> 15

  // Root 13 (package 1 of host 1, not a leader): extra hop to its host leader 8.
  const sp::MultilevelTree hop = sp::build_multilevel_tree(places, 13, {});
  EXPECT_EQ(hop.tree.root(), 8);
  EXPECT_TRUE(hop.has_extra_hop());
  EXPECT_EQ(hop.tree.parent(0), 8);
  EXPECT_EQ(hop.tree.parent(12), 8);

  // Promoted, root 13 leads host 1, package (1, 1) and its NUMA region.
  sp::MultilevelShape promote;
  promote.policy = sp::RootPolicy::promote;
  const sp::MultilevelTree pr = sp::build_multilevel_tree(places, 13, promote);
  EXPECT_EQ(pr.tree.root(), 13);
  EXPECT_FALSE(pr.has_extra_hop());
  EXPECT_EQ(pr.tree.parent(0), 13);
  EXPECT_EQ(pr.tree.parent(8), 13);   // package level of host 1: leaders {8, 13}
  EXPECT_EQ(pr.tree.parent(14), 13);  // NUMA level of package (1, 1): leaders {13, 14}
  EXPECT_EQ(pr.tree.parent(12), 13);  // core level of region (1, 1, 2)
  EXPECT_EQ(static_cast<sp::TreeLevel>(pr.tree.level(8)), sp::TreeLevel::package);

  const std::vector<sp::Place> four = packaged(1, 4, 1, 2).places;
  sp::MultilevelShape flat_pkg;
  flat_pkg.package = sp::TreeShape::flat();
  const sp::MultilevelTree f = sp::build_multilevel_tree(four, 0, flat_pkg);
  EXPECT_EQ(kids_of(f.tree, 0), (std::vector<int>{2, 4, 6, 1}));
  sp::MultilevelShape chain_pkg;
  chain_pkg.package = sp::TreeShape::chain();
  const sp::MultilevelTree c = sp::build_multilevel_tree(four, 0, chain_pkg);
  EXPECT_EQ(c.tree.parent(6), 4);
  EXPECT_EQ(c.tree.parent(4), 2);
}
