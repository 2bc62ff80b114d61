// plan_tree(): the tree a tree call moves its data along, for strata-info
// --plan and the tests (strata/collectives/compile.hpp).
#include <string>
#include <vector>

#include "compile_common.hpp"
#include "strata/collectives/compile.hpp"

namespace strata::coll {

const char* edge_level(const Group& g, int a, int b) noexcept {
  const auto ua = static_cast<std::size_t>(a);
  const auto ub = static_cast<std::size_t>(b);
  if (ua >= g.host.size() || ub >= g.host.size() || ua >= g.numa.size() || ub >= g.numa.size()) return "?";
  if (!g.package.empty() && (ua >= g.package.size() || ub >= g.package.size())) return "?";
  if (g.host[ua] != g.host[ub]) return "host";
  if (g.package_of(a) != g.package_of(b)) return "package";
  if (g.numa[ua] != g.numa[ub]) return "numa";
  return "core";
}

std::vector<TreeEdge> plan_tree(const Group& g, const Call& call) {
  Call c = call;
  c.algo = with_table(cc::tuning(g), c.kind, c.algo);
  const int n = g.size();
  if (c.root < 0 || c.root >= n)
    throw Error(Errc::invalid_argument, "plan_tree: root " + std::to_string(c.root) + " outside the communicator");
  const bool pulls = c.kind == Kind::broadcast || c.kind == Kind::scatter || c.kind == Kind::scatterv;
  const bool sc = c.kind == Kind::broadcast && cc::host_single_copy(g, c, c.count * dag::datatype_size(c.dtype));
  const cc::Topo t = cc::make_topo(g, c, c.root);
  std::vector<TreeEdge> out;
  std::vector<int> stack{c.root};
  while (!stack.empty()) {
    const int r = stack.back();
    stack.pop_back();
    const cc::Down d = cc::down_edges(t, r);
    for (auto it = d.children.rbegin(); it != d.children.rend(); ++it) stack.push_back(*it);
    if (d.parent < 0) continue;
    TreeEdge e;
    e.parent = d.parent;
    e.child = r;
    e.level = c.algo.hierarchical ? edge_level(g, d.parent, r) : "single";
    e.hop = t.extra_hop() && d.parent == t.root && r == t.tree.root();
    e.direction = pulls ? edge_direction(g, c.algo, d.parent, r) : Direction::push;
    e.single_copy = sc && g.host[static_cast<std::size_t>(d.parent)] == g.host[static_cast<std::size_t>(r)];
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace strata::coll
