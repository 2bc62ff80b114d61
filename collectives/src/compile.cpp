// The collective compiler: see strata/collectives/compile.hpp for the window
// protocol and docs/algorithms.md for each algorithm's cost.
#include "strata/collectives/compile.hpp"

#include "strata/collectives/checks.hpp"
#include "strata/collectives/registry.hpp"
#include "strata/collectives/select.hpp"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>

#include "compile_common.hpp"
#include "patterns/fragment.hpp"
#include "patterns/multilevel.hpp"
#include "patterns/rank_order.hpp"
#include "patterns/tree.hpp"

namespace strata::coll {

using namespace cc;  // NOLINT: the compiler internals
using dag::NodeId;
using dag::PlanBuilder;
using dag::Region;

const char* to_string(Kind k) noexcept {
  switch (k) {
    case Kind::barrier:
      return "barrier";
    case Kind::broadcast:
      return "broadcast";
    case Kind::reduce:
      return "reduce";
    case Kind::allreduce:
      return "allreduce";
    case Kind::gather:
      return "gather";
    case Kind::gatherv:
      return "gatherv";
    case Kind::scatterv:
      return "scatterv";
    case Kind::allgatherv:
      return "allgatherv";
    case Kind::alltoallv:
      return "alltoallv";
    case Kind::reduce_scatter:
      return "reduce_scatter";
    case Kind::scatter:
      return "scatter";
    case Kind::allgather:
      return "allgather";
    case Kind::alltoall:
      return "alltoall";
    case Kind::reduce_scatter_block:
      return "reduce_scatter_block";
  }
  return "?";
}

const char* to_string(Direction d) noexcept { return d == Direction::pull ? "pull" : "push"; }

Direction edge_direction(const Group& g, const Algorithm& a, int parent, int child) noexcept {
  if (!a.hierarchical) return a.dir_single;
  const auto p = static_cast<std::size_t>(parent);
  const auto c = static_cast<std::size_t>(child);
  if (p >= g.host.size() || c >= g.host.size() || p >= g.numa.size() || c >= g.numa.size()) return Direction::push;
  if (g.host[p] != g.host[c]) return a.dir_host;
  if (!g.package.empty() && (p >= g.package.size() || c >= g.package.size())) return Direction::push;
  if (g.package_of(parent) != g.package_of(child)) return a.dir_package;
  if (g.numa[p] != g.numa[c]) return a.dir_numa;
  return a.dir_core;
}

Shape shape_of(std::uint64_t code) noexcept {
  if (code == 0) return {Shape::flat, 0};
  return {Shape::knomial, static_cast<int>(code)};
}

int shape_code(const Shape& s) noexcept {
  if (s.kind == Shape::flat) return 0;
  if (s.kind == Shape::binary) return -1;
  return std::max(1, s.radix);
}

Algorithm with_table(const Tuning& t, Kind kind, Algorithm a) {
  if (a.tree_from_table && (kind == Kind::broadcast || kind == Kind::reduce || kind == Kind::allreduce)) {
    const bool b = kind == Kind::broadcast, r = kind == Kind::reduce;
    a.host = shape_of(b ? t.broadcast_tree_host : r ? t.reduce_tree_host : t.allreduce_tree_host);
    a.package = shape_of(b ? t.broadcast_tree_package : r ? t.reduce_tree_package : t.allreduce_tree_package);
    a.numa = shape_of(b ? t.broadcast_tree_numa : r ? t.reduce_tree_numa : t.allreduce_tree_numa);
    a.core = shape_of(b ? t.broadcast_tree_core : r ? t.reduce_tree_core : t.allreduce_tree_core);
  }
  if (a.direction_from_table && kind == Kind::broadcast) {
    auto d = [](std::uint64_t v) { return v != 0 ? Direction::pull : Direction::push; };
    a.dir_host = d(t.broadcast_pull_host);
    a.dir_package = d(t.broadcast_pull_package);
    a.dir_numa = d(t.broadcast_pull_numa);
    a.dir_core = d(t.broadcast_pull_core);
  }
  a.tree_from_table = a.direction_from_table = false;
  return a;
}

namespace {

// ---------------------------------------------------------------- broadcast
// Down the tree, fragment by fragment, each edge push or pull (Direction):
//  - push: the receiver signals RTR(f) to its parent when its window region
//    (f mod R) is free, the parent waits for RTR(f) from all its push children
//    and put_with_signal's the fragment;
//  - pull: the parent signals READY(f) to the child once fragment f is in its
//    own window region (the root copies it there from the user buffer first);
//    the child, once its own region is free, gets the fragment from the
//    parent's region into its region (or, if it forwards nothing, straight
//    into its receive buffer) and signals DONE(f); the parent reuses the
//    region after every child's DONE(f) (and its push children's puts).
// Slots: DATA(f) / READY(f) = base + 2f on the receiver, RTR(f) = base + 2f + 1
// and DONE(f) = base + 2F + 2 + f (F fragments; pull only) on the parent.
struct BcastIO {
  // Where fragment f's bytes are at the root, and where they must end up.
  std::function<Region(std::uint64_t off, std::uint64_t len)> root_src;
  std::function<Region(std::uint64_t off, std::uint64_t len)> dst;  // null: leave in the window
  std::vector<NodeId> root_ready;  // per fragment: node after which root_src(f) is valid (kNoNode = at start)
  std::vector<NodeId> dst_after;   // per fragment: node the copy into dst(f) must follow (kNoNode = none)
  // Direct mode (persistent plans): fragments go straight into the receivers'
  // dst buffers (peer buffer 1 of `dst_bytes`); one RTR per edge, at start.
  bool direct = false;
  std::uint64_t dst_bytes = 0;
  // Whether the call's per-level directions apply (broadcast); false: push everywhere.
  bool allow_pull = false;
  // Single-copy edges (multi-host communicators with Group::publish_word):
  // every parent -> child edge between two ranks of one host reads the
  // fragment out of the parent's published user buffer straight into the
  // child's (read_peer after READY(f)); no window region, one copy per
  // fragment instead of two. Needs dst (every rank's whole buffer).
  bool single_copy = false;
};

// Slots used by emit_broadcast for `nfrag` fragments.
std::uint32_t bcast_slots(std::size_t nfrag, bool pull) {
  return static_cast<std::uint32_t>((pull ? 3 : 2) * nfrag + 2);
}

// Over ~80 lines: one loop per fragment over push, pull and direct edges that share the fragment's nodes.
void emit_broadcast(Ctx& x, const Topo& t, const std::vector<patterns::Fragment>& fr, std::size_t region,
                    std::uint64_t area_off, std::size_t area, std::uint32_t base, const BcastIO& io,
                    const std::vector<NodeId>& start_deps) {
  PlanBuilder& b = x.b();
  const Down d = down_edges(t, x.me());
  const std::size_t nregions = std::max<std::size_t>(1, area / region);
  const bool pulls = io.allow_pull && !io.direct && x.c().algo.any_pull();
  if (base + bcast_slots(fr.size(), pulls) > kDataSlotLimit)
    fail(Errc::unsupported, x.g(), x.c(),
         "too many fragments (" + std::to_string(fr.size()) + "); raise the fragment size");
  auto pull_edge = [&](int parent, int child) {
    return pulls && edge_direction(x.g(), x.c().algo, parent, child) == Direction::pull;
  };
  // (The root publishes root_src, every other rank dst: single copy needs it.)
  const bool sc = io.single_copy && !io.direct && x.g().publish_word != 0 && (d.parent < 0 || io.dst);
  const bool sc_in = sc && d.parent >= 0 && x.same_host(d.parent);
  const bool pull_in = !sc_in && d.parent >= 0 && pull_edge(d.parent, x.me());
  std::vector<int> push_kids, pull_kids, sc_kids;
  for (int ch : d.children)
    (sc && x.same_host(ch) ? sc_kids : pull_edge(x.me(), ch) ? pull_kids : push_kids).push_back(ch);
  // Single copy: this instance's publication record (its reads-done word follows).
  const std::uint32_t record = x.g().publish_word + dag::kPublishWords * x.slot();
  NodeId published = dag::kNoNode;   // parent: the publication of its whole user buffer
  NodeId parent_pub = dag::kNoNode;  // child: the wait for its parent's publication
  std::vector<NodeId> sc_reads;      // child: its reads out of the parent's buffer
  if (!sc_kids.empty()) {
    const Region whole = d.parent < 0 ? io.root_src(0, io.dst_bytes) : io.dst(0, io.dst_bytes);
    published = b.publish(record, whole, Region{}, start_deps);
  }
  if (sc_in) {
    parent_pub = b.flag_wait(x.world(d.parent), record, 0, start_deps);
    b.expect_signals_from(x.world(d.parent));
  }
  std::vector<NodeId> consumed(fr.size(), dag::kNoNode);
  NodeId ready0 = dag::kNoNode;      // direct mode: every child's single RTR arrived
  NodeId prev_round = dag::kNoNode;  // the previous fragment's first network put (fragment-major order)
  for (std::size_t f = 0; f < fr.size(); ++f) {
    const auto off = static_cast<std::uint64_t>(fr[f].offset);
    const auto len = static_cast<std::uint64_t>(fr[f].length);
    const std::uint64_t roff = area_off + (f % nregions) * region;
    const auto data_slot = static_cast<std::uint32_t>(base + 2 * f);
    if (io.direct) {
      Region src;
      std::vector<NodeId> src_deps = start_deps;
      if (d.parent < 0) {
        src = io.root_src(off, len);
        if (!io.root_ready.empty() && io.root_ready[f] != dag::kNoNode) src_deps.push_back(io.root_ready[f]);
      } else {
        if (f == 0) {
          b.signal(x.world(d.parent), base + 1, start_deps);
          b.expect_signals_from(x.world(d.parent));
        }
        const Region mine = io.dst(off, len);
        std::vector<NodeId> wdeps;
        if (!io.dst_after.empty() && io.dst_after[f] != dag::kNoNode) wdeps.push_back(io.dst_after[f]);
        src = mine;
        src_deps = {b.wait(data_slot, 1, wdeps, &mine)};
      }
      if (d.children.empty()) continue;
      if (f == 0) {
        for (int ch : d.children) b.expect_signals_from(x.world(ch));
        ready0 = b.wait(base + 1, static_cast<std::uint32_t>(d.children.size()), start_deps);
      }
      src_deps.push_back(ready0);
      for (int ch : d.children)
        b.put_with_signal(x.world(ch), src, x.peer_user(ch, 1, io.dst_bytes, off, len), data_slot, src_deps);
      continue;
    }
    Region src;
    std::vector<NodeId> src_deps = start_deps;
    std::vector<NodeId> uses;  // nodes reading the window region (for its reuse)
    const NodeId reuse = f >= nregions ? consumed[f - nregions] : dag::kNoNode;
    const auto done_slot = static_cast<std::uint32_t>(base + 2 * fr.size() + 2 + f);
    std::vector<NodeId> avail;     // pull children: after these, fragment f is in this rank's window region
    NodeId in_dst = dag::kNoNode;  // non-root: the node after which dst(f) holds fragment f
    if (d.parent < 0) {
      src = io.root_src(off, len);
      if (!io.root_ready.empty() && io.root_ready[f] != dag::kNoNode) src_deps.push_back(io.root_ready[f]);
      if (!pull_kids.empty()) {
        std::vector<NodeId> sdeps = src_deps;
        if (reuse != dag::kNoNode) sdeps.push_back(reuse);
        avail = {b.copy(src, x.my_win(roff, len), sdeps)};
      }
    } else if (sc_in) {
      // READY(f) from the parent (fragment f is in its published buffer),
      // then one read straight into the receive buffer.
      std::vector<NodeId> gdeps{parent_pub, b.wait(data_slot, 1, start_deps)};
      if (!io.dst_after.empty() && io.dst_after[f] != dag::kNoNode) gdeps.push_back(io.dst_after[f]);
      const Region mine = io.dst(off, len);
      in_dst = b.read_peer(x.world(d.parent), record, 0, off, mine, gdeps);
      sc_reads.push_back(in_dst);
      src = mine;
      src_deps = {in_dst};
      if (!pull_kids.empty()) {
        std::vector<NodeId> cdeps{in_dst};
        if (reuse != dag::kNoNode) cdeps.push_back(reuse);
        avail = {b.copy(mine, x.my_win(roff, len), cdeps)};
      }
    } else if (pull_in) {
      std::vector<NodeId> rdeps = start_deps;
      if (reuse != dag::kNoNode) rdeps.push_back(reuse);
      b.expect_signals_from(x.world(d.parent));
      const NodeId ready = b.wait(data_slot, 1, rdeps);
      const Region from = x.peer_win(d.parent, roff, len);
      NodeId got = dag::kNoNode;
      if (d.children.empty() && io.dst) {  // forwards nothing: straight into the receive buffer
        std::vector<NodeId> gdeps{ready};
        if (!io.dst_after.empty() && io.dst_after[f] != dag::kNoNode) gdeps.push_back(io.dst_after[f]);
        got = b.get(x.world(d.parent), from, io.dst(off, len), gdeps);
      } else {
        const Region win = x.my_win(roff, len);
        got = b.get(x.world(d.parent), from, win, {ready});
        src = win;
        src_deps = {got};
        avail = {got};
        if (io.dst) {
          std::vector<NodeId> cdeps{got};
          if (!io.dst_after.empty() && io.dst_after[f] != dag::kNoNode) cdeps.push_back(io.dst_after[f]);
          in_dst = b.copy(win, io.dst(off, len), cdeps);
          uses.push_back(in_dst);
        }
      }
      b.signal(x.world(d.parent), done_slot, {got});
    } else {
      std::vector<NodeId> rdeps = start_deps;
      if (f >= nregions && consumed[f - nregions] != dag::kNoNode) rdeps.push_back(consumed[f - nregions]);
      x.rtr(d.parent, data_slot + 1, rdeps, f < nregions);
      b.expect_signals_from(x.world(d.parent));
      const Region win = x.my_win(roff, len);
      const NodeId arrived = b.wait(data_slot, 1, {}, &win);
      src = win;
      src_deps = {arrived};
      avail = {arrived};
      if (io.dst) {
        std::vector<NodeId> cdeps{arrived};
        if (!io.dst_after.empty() && io.dst_after[f] != dag::kNoNode) cdeps.push_back(io.dst_after[f]);
        in_dst = b.copy(win, io.dst(off, len), cdeps);
        uses.push_back(in_dst);
      }
    }
    if (!push_kids.empty()) {
      const std::vector<NodeId> ready = x.rtr_waits(push_kids, data_slot + 1, src_deps, f < nregions);
      // Fragment-major order across several children on other hosts:
      // fragment f + 1's network puts wait for fragment f's first one.
      // Without it, when nothing gates the puts (granted flags: every put is
      // ready at start), the executor may post one child's fragments before
      // the next child's, and the last child's subtree starts a whole message
      // late (docs/algorithms.md, "Broadcast"; simulated 3072-rank 1 MiB
      // broadcast 3,579 -> 2,545 us). The first put of a round completes while
      // the rest of the round is still queued on the link. Same-host puts are
      // one memcpy at the post and need no order.
      NodeId first_net = dag::kNoNode;
      int net_kids = 0;
      for (int ch : push_kids) net_kids += x.same_host(ch) ? 0 : 1;
      for (std::size_t j = 0; j < push_kids.size(); ++j) {
        const int ch = push_kids[j];
        std::vector<NodeId> pdeps{ready[j]};
        const bool ordered = net_kids > 1 && !x.same_host(ch);
        if (ordered && prev_round != dag::kNoNode) pdeps.push_back(prev_round);
        const NodeId p = b.put_with_signal(x.world(ch), src, x.peer_win(ch, roff, len), data_slot, pdeps);
        if (ordered && first_net == dag::kNoNode) first_net = p;
        uses.push_back(p);
      }
      prev_round = first_net;
    }
    if (!pull_kids.empty()) {
      for (int ch : pull_kids) {
        x.b().expect_signals_from(x.world(ch));
        b.signal(x.world(ch), data_slot, avail);
      }
      uses.push_back(b.wait(done_slot, static_cast<std::uint32_t>(pull_kids.size())));
    }
    // Single-copy children: READY(f) once fragment f is in the published buffer.
    if (!sc_kids.empty()) {
      const std::vector<NodeId> ready = d.parent < 0 ? src_deps : std::vector<NodeId>{in_dst};
      for (int ch : sc_kids) b.signal(x.world(ch), data_slot, ready);
    }
    // The region of fragment f is free again after `uses` (or, if f did not
    // touch it, whenever the previous fragment in it is done). A root that
    // only pushes never writes its window.
    if (d.parent >= 0 || !pull_kids.empty())
      consumed[f] = uses.empty() ? reuse : uses.size() == 1 ? uses[0] : b.nop(uses);
  }
  // Single copy: the child says its reads are done; the parent's buffer stays
  // valid (its instance does not end) until every single-copy child said so.
  if (sc_in) b.flag_set(record + 1, sc_reads);
  for (int ch : sc_kids) b.flag_wait(x.world(ch), record + 1, 0, {published});
}

// ---------------------------------------------------------------- reduce (up the tree)
// Each child j of a node owns window regions (j, f mod R) at its parent. The
// parent signals RTR(f) to child j when region (j, f mod R) is free; the child
// waits for RTR(f) and put_with_signal's its partial result for fragment f.
// Slots on the parent: UP(f, j) = base + 2 (f * maxc + j); on the child:
// RTR(f) = base + 2 (f * maxc) + 1. Partial results fold in rank order.
struct ReduceIO {
  std::function<Region(std::uint64_t off, std::uint64_t len)> self;  // this rank's contribution
  std::function<Region(std::uint64_t off, std::uint64_t len)> acc;   // where partials accumulate
};

// Returns per fragment: at the tree root, the node after which acc(f) holds the
// result; elsewhere, the put that sent the partial of fragment f up.
// Over ~80 lines: one loop per fragment; the fold order and the regions it frees share its state.
std::vector<NodeId> emit_reduce(Ctx& x, const patterns::Tree& tree, const patterns::CombineOrder* order,
                                const std::vector<patterns::Fragment>& fr, std::size_t region, std::uint64_t area_off,
                                std::size_t area, std::uint32_t base, const ReduceIO& io,
                                std::vector<NodeId> start_deps) {
  PlanBuilder& b = x.b();
  const int me = x.me();
  const int parent = tree.parent(me);
  const int maxc = max_children(tree);
  const std::size_t nregions = std::max<std::size_t>(1, area / (region * static_cast<std::size_t>(maxc)));
  std::vector<int> kids(tree.children(me).begin(), tree.children(me).end());
  std::vector<int> operands;
  if (order) {
    for (int o : order->operands(me)) operands.push_back(o);
  } else {
    operands.push_back(patterns::CombineOrder::kSelf);
    operands.insert(operands.end(), kids.begin(), kids.end());
  }
  int my_index = -1;
  if (parent >= 0) {
    const auto pk = tree.children(parent);
    for (std::size_t j = 0; j < pk.size(); ++j)
      if (pk.begin()[j] == me) my_index = static_cast<int>(j);
  }
  std::vector<NodeId> result(fr.size(), dag::kNoNode);
  // consumed[j][f]: child j's region for fragment f has been read.
  std::vector<std::vector<NodeId>> consumed(kids.size(), std::vector<NodeId>(fr.size(), dag::kNoNode));
  for (std::size_t f = 0; f < fr.size(); ++f) {
    const auto off = static_cast<std::uint64_t>(fr[f].offset);
    const auto len = static_cast<std::uint64_t>(fr[f].length);
    std::vector<Region> child_region(kids.size());
    std::vector<NodeId> child_arrived(kids.size());
    for (std::size_t j = 0; j < kids.size(); ++j) {
      const std::uint64_t roff = area_off + ((j * nregions) + f % nregions) * region;
      std::vector<NodeId> rdeps = start_deps;
      if (f >= nregions) rdeps.push_back(consumed[j][f - nregions]);
      const auto rtr = static_cast<std::uint32_t>(base + 2 * (f * static_cast<std::size_t>(maxc)) + 1);
      x.rtr(kids[j], rtr, rdeps, f < nregions);
      b.expect_signals_from(x.world(kids[j]));
      child_region[j] = x.my_win(roff, len);
      const auto up = static_cast<std::uint32_t>(base + 2 * (f * static_cast<std::size_t>(maxc) + j));
      child_arrived[j] = b.wait(up, 1, {}, &child_region[j]);
    }
    // Fold operands left to right into acc.
    auto operand = [&](int o, Region* r, std::vector<NodeId>* deps) {
      if (o == patterns::CombineOrder::kSelf) {
        *r = io.self(off, len);
        deps->insert(deps->end(), start_deps.begin(), start_deps.end());
        return;
      }
      const auto j = static_cast<std::size_t>(std::find(kids.begin(), kids.end(), o) - kids.begin());
      *r = child_region[j];
      deps->push_back(child_arrived[j]);
    };
    Region cur;
    std::vector<NodeId> cur_deps;
    operand(operands[0], &cur, &cur_deps);
    NodeId last = dag::kNoNode;
    std::vector<std::vector<NodeId>> readers(kids.size());
    // In place (own contribution == accumulator) with two or more children's
    // partials ahead of it in rank order: accumulating them into acc would
    // overwrite the own value before it is folded in. The prefix accumulates
    // in the first child's window region instead (no extra memory); that
    // region then stays busy until the fold that reads the own value.
    const Region acc0 = io.acc(off, len);
    const Region self0 = io.self(off, len);
    const auto self_at = static_cast<std::size_t>(
        std::find(operands.begin(), operands.end(), patterns::CombineOrder::kSelf) - operands.begin());
    const bool self_is_acc = acc0.buf.kind == self0.buf.kind && acc0.buf.id == self0.buf.id &&
                             acc0.offset == self0.offset && self_at < operands.size();
    const std::size_t j_first =
        self_at >= 2 && self_is_acc
            ? static_cast<std::size_t>(std::find(kids.begin(), kids.end(), operands[0]) - kids.begin())
            : kids.size();
    for (std::size_t k = 1; k < operands.size(); ++k) {
      Region rhs;
      std::vector<NodeId> rdeps = cur_deps;
      operand(operands[k], &rhs, &rdeps);
      if (last != dag::kNoNode) rdeps.push_back(last);
      const bool prefix = j_first < kids.size() && k < self_at;
      const Region dst = prefix ? child_region[j_first] : acc0;
      last = x.reduce(cur, rhs, dst, rdeps);
      cur = dst;
      cur_deps.clear();
      for (std::size_t j = 0; j < kids.size(); ++j)
        if (operands[k] == kids[j] || (k == 1 && operands[0] == kids[j]) || (j == j_first && k <= self_at))
          readers[j].push_back(last);
    }
    for (std::size_t j = 0; j < kids.size(); ++j)
      consumed[j][f] = readers[j].empty() ? child_arrived[j] : readers[j].back();
    const bool cur_is_acc = operands.size() > 1;
    if (parent < 0) {
      if (!cur_is_acc) {  // a root without children: the result is its own contribution
        const Region dst = io.acc(off, len);
        std::vector<NodeId> d = cur_deps;
        result[f] = (dst.buf.kind == cur.buf.kind && dst.buf.id == cur.buf.id && dst.offset == cur.offset)
                        ? (d.empty() ? b.nop() : b.nop(d))
                        : b.copy(cur, dst, d);
      } else {
        result[f] = last;
      }
      continue;
    }
    // Send the partial for fragment f up to the parent.
    const auto rtr = static_cast<std::uint32_t>(base + 2 * (f * static_cast<std::size_t>(maxc)) + 1);
    std::vector<NodeId> sdeps = cur_deps;
    if (last != dag::kNoNode) sdeps.push_back(last);
    const std::size_t pregions =
        std::max<std::size_t>(1, area / (region * static_cast<std::size_t>(maxc)));  // same on every rank
    const NodeId ready = x.rtr_waits({parent}, rtr, sdeps, f < pregions)[0];
    const std::uint64_t proff = area_off + ((static_cast<std::size_t>(my_index) * pregions) + f % pregions) * region;
    const auto up = static_cast<std::uint32_t>(
        base + 2 * (f * static_cast<std::size_t>(maxc) + static_cast<std::size_t>(my_index)));
    result[f] = b.put_with_signal(x.world(parent), cur, x.peer_win(parent, proff, len), up, {ready});
  }
  return result;
}

// Slots used by emit_reduce for `nfrag` fragments.
std::uint32_t reduce_slots(std::size_t nfrag, int maxc) {
  return static_cast<std::uint32_t>(2 * nfrag * static_cast<std::size_t>(maxc) + 2);
}

// The group's own consistency (not a call argument: checked on every compile).
void check_group(const Group& g, const Call& c) {
  const int n = g.size();
  if (n < 1) fail(Errc::invalid_argument, g, c, "empty communicator");
  if (g.rank < 0 || g.rank >= n) fail(Errc::invalid_argument, g, c, "rank outside the communicator");
  if (g.host.size() != g.world.size() || g.numa.size() != g.world.size() ||
      (!g.package.empty() && g.package.size() != g.world.size()))
    fail(Errc::invalid_argument, g, c, "group places do not match its members");
}

std::shared_ptr<const dag::Plan> compile_barrier(const Group& g, const Call& c, int slot) {
  Ctx x(g, c, slot);
  x.b().require_output_coverage(false);
  x.barrier(0, {});
  if (x.b().size() == 0) x.b().nop();
  return x.build();
}

std::shared_ptr<const dag::Plan> compile_broadcast(const Group& g, const Call& c, int slot) {
  Ctx x(g, c, slot);
  const std::size_t bytes = c.count * x.esize();
  const bool root = g.rank == c.root;
  if (root)
    x.b().input(0, bytes);
  else
    x.b().output(0, bytes);
  x.b().require_output_coverage(false);
  const Topo t = make_topo(g, c, c.root);
  BcastIO io;
  io.root_src = [](std::uint64_t off, std::uint64_t len) { return dag::in(0, off, len); };
  if (!root) io.dst = [](std::uint64_t off, std::uint64_t len) { return dag::out(0, off, len); };
  io.direct = c.direct;
  io.dst_bytes = bytes;
  io.allow_pull = true;
  io.single_copy = host_single_copy(g, c, bytes);
  std::size_t region = 0;
  const std::vector<patterns::Fragment> fr = x.fragments(bytes, g.slot_bytes, 1, &region);
  emit_broadcast(x, t, fr, region, 0, g.slot_bytes, 0, io, entry(x));
  finish(x);
  if (x.b().size() == 0) x.b().nop();
  return x.build();
}

// Reduce tree: commutative ops use the (multilevel) tree as is; non-commutative
// ones use a tree whose subtrees are rank-contiguous (falls back to a tree rooted
// at 0 plus a hop when needed) and fold in rank order.
struct ReduceTree {
  patterns::Tree tree;
  int root = 0;  // the collective's root
  patterns::CombineOrder order;
  bool ordered = false;
};

ReduceTree make_reduce_tree(const Group& g, const Call& c, int root) {
  ReduceTree rt;
  Topo t = make_topo(g, c, root);
  if (c.user_op && !c.user_op->commutative) {
    patterns::RankOrderPlan p = patterns::plan_rank_order_reduce(std::move(t.tree), root, to_pattern(c.algo.single));
    rt.tree = std::move(p.tree);
    rt.order = std::move(p.order);
    rt.root = p.root;
    rt.ordered = true;
  } else {
    rt.tree = std::move(t.tree);
    rt.root = root;
  }
  return rt;
}

// Extra hop of a result from the tree root to the collective's root, through
// the root's window (RTR + put_with_signal), fragment by fragment.
void emit_hop(Ctx& x, int from, int to, const std::vector<patterns::Fragment>& fr, std::size_t region,
              std::uint64_t area_off, std::size_t area, std::uint32_t base,
              const std::function<Region(std::uint64_t, std::uint64_t)>& src, const std::vector<NodeId>& src_ready,
              const std::function<Region(std::uint64_t, std::uint64_t)>& dst, const std::vector<NodeId>& dst_after,
              const std::vector<NodeId>& start_deps) {
  PlanBuilder& b = x.b();
  const std::size_t nregions = std::max<std::size_t>(1, area / region);
  std::vector<NodeId> consumed(fr.size(), dag::kNoNode);
  for (std::size_t f = 0; f < fr.size(); ++f) {
    const auto off = static_cast<std::uint64_t>(fr[f].offset);
    const auto len = static_cast<std::uint64_t>(fr[f].length);
    const std::uint64_t roff = area_off + (f % nregions) * region;
    const auto slot = static_cast<std::uint32_t>(base + 2 * f);
    if (x.me() == to) {
      std::vector<NodeId> rdeps = start_deps;
      if (f >= nregions) rdeps.push_back(consumed[f - nregions]);
      b.signal(x.world(from), slot + 1, rdeps);
      b.expect_signals_from(x.world(from));
      const Region win = x.my_win(roff, len);
      const NodeId arrived = b.wait(slot, 1, {}, &win);
      std::vector<NodeId> cdeps{arrived};
      if (!dst_after.empty() && dst_after[f] != dag::kNoNode) cdeps.push_back(dst_after[f]);
      consumed[f] = b.copy(win, dst(off, len), cdeps);
    } else if (x.me() == from) {
      std::vector<NodeId> d;
      if (src_ready[f] != dag::kNoNode) d.push_back(src_ready[f]);
      b.expect_signals_from(x.world(to));
      const NodeId ready = b.wait(slot + 1, 1, d);
      b.put_with_signal(x.world(to), src(off, len), x.peer_win(to, roff, len), slot, {ready});
    }
  }
}

std::shared_ptr<const dag::Plan> compile_reduce(const Group& g, const Call& c, int slot) {
  Ctx x(g, c, slot);
  const std::size_t bytes = c.count * x.esize();
  const bool root = g.rank == c.root;
  x.b().require_output_coverage(false);
  if (!(c.in_place && root)) x.b().input(0, bytes);
  if (root) x.b().output(0, bytes);
  const ReduceTree rt = make_reduce_tree(g, c, c.root);
  const bool hop = rt.root != rt.tree.root();
  const std::size_t half = g.slot_bytes / 2;
  std::size_t region = 0;
  const std::vector<patterns::Fragment> fr =
      x.fragments(bytes, hop ? half : g.slot_bytes, max_children(rt.tree), &region);
  const std::uint32_t rslots = reduce_slots(fr.size(), max_children(rt.tree));
  if (rslots + 2 * fr.size() + 2 > kDataSlotLimit) fail(Errc::unsupported, g, c, "too many fragments");
  const bool tree_root = g.rank == rt.tree.root();
  if (!root && (tree_root || !rt.tree.children(g.rank).empty())) x.b().scratch(0, bytes);
  ReduceIO io;
  const bool self_in_out = c.in_place && root;
  io.self = [self_in_out](std::uint64_t off, std::uint64_t len) {
    return self_in_out ? dag::out(0, off, len) : dag::in(0, off, len);
  };
  io.acc = [root](std::uint64_t off, std::uint64_t len) {
    return root ? dag::out(0, off, len) : dag::scratch(0, off, len);
  };
  const std::vector<NodeId> start = entry(x);
  const std::vector<NodeId> res =
      emit_reduce(x, rt.tree, rt.ordered ? &rt.order : nullptr, fr, region, 0, hop ? half : g.slot_bytes, 0, io, start);
  if (hop)
    emit_hop(
        x, rt.tree.root(), rt.root, fr, region, half, half, rslots, io.acc, res,
        [](std::uint64_t off, std::uint64_t len) { return dag::out(0, off, len); }, res, start);
  finish(x);
  if (x.b().size() == 0) x.b().nop();
  return x.build();
}

// Allreduce over one tree: reduce to the tree root into outputs[0], then
// broadcast each fragment down as soon as it is reduced (fragment i's
// broadcast overlaps fragment i+1's reduction). Window halves: up / down.
std::shared_ptr<const dag::Plan> compile_allreduce_tree(const Group& g, const Call& c, int slot) {
  Ctx x(g, c, slot);
  const std::size_t bytes = c.count * x.esize();
  x.b().require_output_coverage(false);
  if (!c.in_place) x.b().input(0, bytes);
  x.b().output(0, bytes);
  const int tree_root = 0;
  const ReduceTree rt = make_reduce_tree(g, c, tree_root);
  const std::size_t half = g.slot_bytes / 2;
  std::size_t region = 0;
  const std::vector<patterns::Fragment> fr = x.fragments(bytes, half, max_children(rt.tree), &region);
  const std::uint32_t rslots = reduce_slots(fr.size(), max_children(rt.tree));
  ReduceIO io;
  const bool in_place = c.in_place;
  io.self = [in_place](std::uint64_t off, std::uint64_t len) {
    return in_place ? dag::out(0, off, len) : dag::in(0, off, len);
  };
  io.acc = [](std::uint64_t off, std::uint64_t len) { return dag::out(0, off, len); };
  const std::vector<NodeId> start = entry(x);
  const std::vector<NodeId> res =
      emit_reduce(x, rt.tree, rt.ordered ? &rt.order : nullptr, fr, region, 0, half, 0, io, start);
  // Down: the same tree (rooted where the reduction ended).
  Topo t;
  t.tree = rt.tree;
  t.root = rt.tree.root();
  BcastIO bio;
  bio.root_src = [](std::uint64_t off, std::uint64_t len) { return dag::out(0, off, len); };
  bio.dst = [](std::uint64_t off, std::uint64_t len) { return dag::out(0, off, len); };
  // The broadcast of fragment f follows its reduction at the root; elsewhere the
  // copy into outputs[0] follows the put that sent this rank's partial up.
  bio.root_ready = res;
  bio.dst_after = res;
  bio.direct = c.direct;
  bio.dst_bytes = bytes;
  emit_broadcast(x, t, fr, region, half, half, rslots, bio, start);
  finish(x);
  if (x.b().size() == 0) x.b().nop();
  return x.build();
}

}  // namespace

namespace cc {
std::shared_ptr<const dag::Plan> barrier_plan(const Group& g, const Call& c, int slot, const AlgorithmRow&) {
  return compile_barrier(g, c, slot);
}
std::shared_ptr<const dag::Plan> broadcast_plan(const Group& g, const Call& c, int slot, const AlgorithmRow&) {
  return compile_broadcast(g, c, slot);
}
std::shared_ptr<const dag::Plan> reduce_plan(const Group& g, const Call& c, int slot, const AlgorithmRow&) {
  return compile_reduce(g, c, slot);
}
std::shared_ptr<const dag::Plan> allreduce_tree_plan(const Group& g, const Call& c, int slot, const AlgorithmRow&) {
  return compile_allreduce_tree(g, c, slot);
}
}  // namespace cc

dag::BoundComputeFn bound_compute(const Call& c) {
  if (!c.compute && !c.on_block) return {};
  return [compute = c.compute, on_block = c.on_block](std::uint32_t k, const dag::ComputeArgs& a) {
    if (k == kComputeNode) {
      if (compute) compute();
    } else if (on_block) {
      on_block(static_cast<int>(k - kOnBlockNode), a.data, a.len);
    }
  };
}

std::shared_ptr<const dag::Plan> compile(const Group& g, const Call& call, int slot) {
  // Tree shapes / directions left to the tuning table: resolve them on a copy.
  if (call.algo.tree_from_table || call.algo.direction_from_table) {
    Call c = call;
    c.algo = with_table(cc::tuning(g), c.kind, c.algo);
    return compile(g, c, slot);
  }
  const Call& c = call;
  check_group(g, c);
  // The call's arguments: checked once, by the engine on the way in (Call::checked) or here.
  if (!c.checked) check_call(g, c);
  if (slot < 0 || slot >= g.credits)
    throw Error(Errc::invalid_argument, "compile: slot " + std::to_string(slot) + " outside [0, credits)");
  // The registry's row (a memory-protocol plan that applies, the named
  // algorithm, or the automatic choice); its compile function explains what
  // it needs when it cannot run the call.
  const AlgorithmRow* row = planned_algorithm(g, c);
  if (row == nullptr)
    fail(Errc::invalid_argument, g, c,
         "algorithm '" + c.algo.name + "' unknown (" + algorithm_names(c.kind) + "); see docs/algorithms.md");
  return row->compile(g, c, slot, *row);
}

std::shared_ptr<const dag::Plan> compile_skipped(const Group& g, Kind kind, int slot) {
  if (slot < 0 || slot >= g.credits)
    throw Error(Errc::invalid_argument, "compile_skipped: slot " + std::to_string(slot) + " outside [0, credits)");
  Call c;
  c.kind = kind;
  Ctx x(g, c, slot);
  x.b().require_output_coverage(false);
  x.b().algorithm("skipped (the call failed before it started)");
  return x.build();  // the slot's flag_set alone
}

std::vector<std::shared_ptr<const dag::Plan>> compile_all(const Group& g, const Call& c, int slot) {
  std::vector<std::shared_ptr<const dag::Plan>> out;
  Group each = g;
  for (int r = 0; r < g.size(); ++r) {
    each.rank = r;
    out.push_back(compile(each, c, slot));
  }
  return out;
}

}  // namespace strata::coll
