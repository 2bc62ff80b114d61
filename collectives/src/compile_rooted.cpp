// Gather, scatter and their v-variants (docs/algorithms.md, "Gather and scatter").
//
// Three algorithms, all over the window / RTR protocol:
//  - tree (default for gather / scatter; "single" = the single-level tree):
//    the (multilevel) tree of make_topo, with the root's extra hop folded in
//    (down_edges), laid out in *pre-order*: every subtree is a contiguous
//    range of that order, so the bytes of a subtree are one contiguous range
//    of the "packed" axis (the blocks concatenated in pre-order). The packed
//    axis is cut into global cells (the fragments of the whole message); cell
//    g always sits at the same offset of window region g mod R on every rank,
//    so a node forwards the part of a cell that belongs to a child straight
//    from its window region into the child's (scatter), or a child writes its
//    part of a cell straight into its parent's region (gather, sender-writing:
//    its own block from its send buffer, its descendants' from its window).
//    Only the root touches rank-ordered user buffers (pieces split at block
//    boundaries, merged when contiguous there).
//    Scatter edges may pull instead (Algorithm::dir_*): the parent signals
//    READY(g) once the child's part of cell g is in its own region (the root
//    copies it there from send first), the child gets that one contiguous
//    range into the same offset of its region (or, if it forwards nothing of
//    g, straight into recv) and signals DONE(g) back. Gather always pushes.
//  - flat: the root exchanges with every rank directly. Gather: the root's
//    window slot is split into n-1 equal areas, one per non-root.
//  - ring: flat plus Mallón et al.'s token (3.2): non-roots move their block in the
//    order root+1, ..., root-1; the token passes before the copy if the rank
//    shares the root's host or its block is small, else after all but the last
//    threshold bytes.
// v-variants: flat and ring need only what each rank knows (a non-root its own
// count, the root all counts / displacements); the tree needs counts and
// displacements on every rank (the engine broadcasts them from the root first).
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "compile_common.hpp"
#include "patterns/schedule.hpp"

namespace strata::coll::cc {

namespace {

constexpr std::uint32_t kTokenSlot = kDataSlotLimit - 1;

bool is_gather(Kind k) { return k == Kind::gather || k == Kind::gatherv; }
bool is_v(Kind k) { return k == Kind::gatherv || k == Kind::scatterv; }

// Byte sizes and offsets (into the root's buffer) of every rank's block.
struct Layout {
  std::vector<std::uint64_t> len;   // per rank
  std::vector<std::uint64_t> disp;  // per rank, into the root's rooted buffer
  bool all_known = true;            // false: only len[me] is known (v-variant at a non-root)
  std::uint64_t extent = 0;         // bytes of the root's rooted buffer
};

Layout make_layout(const Group& g, const Call& c, std::size_t es) {
  const int n = g.size();
  const auto un = static_cast<std::size_t>(n);
  Layout l;
  l.len.assign(un, 0);
  l.disp.assign(un, 0);
  if (!is_v(c.kind)) {
    for (std::size_t r = 0; r < un; ++r) {
      l.len[r] = c.count * es;
      l.disp[r] = r * c.count * es;
    }
    l.extent = un * c.count * es;
    return l;
  }
  // The counts and displacements were checked once (check_call() or the engine).
  if (c.counts.empty() && c.displs.empty()) {  // a non-root of flat / ring: its own count only
    l.all_known = false;
    l.len[static_cast<std::size_t>(g.rank)] = c.count * es;
    return l;
  }
  for (std::size_t r = 0; r < un; ++r) {
    l.len[r] = c.counts[r] * es;
    l.disp[r] = c.displs[r] * es;
    if (l.len[r] > 0) l.extent = std::max(l.extent, l.disp[r] + l.len[r]);
  }
  return l;
}

// Declares the user buffers this rank touches.
void declare_buffers(Ctx& x, const Layout& l) {
  const Call& c = x.c();
  const auto me = static_cast<std::size_t>(x.me());
  const bool root = x.me() == c.root;
  const bool gather = is_gather(c.kind);
  x.b().require_output_coverage(false);
  if (gather) {
    if (root) {
      x.b().output(0, l.extent);
      if (!c.in_place) x.b().input(0, l.len[me]);
    } else {
      x.b().input(0, l.len[me]);
    }
  } else {
    if (root) {
      x.b().input(0, l.extent);
      if (!c.in_place) x.b().output(0, l.len[me]);
    } else {
      x.b().output(0, l.len[me]);
    }
  }
}

// The root's own block: a local copy unless in place.
void own_block_at_root(Ctx& x, const Layout& l, const std::vector<NodeId>& start) {
  const Call& c = x.c();
  const auto me = static_cast<std::size_t>(x.me());
  if (c.in_place || l.len[me] == 0) return;
  if (is_gather(c.kind))
    x.b().copy(dag::in(0, 0, l.len[me]), dag::out(0, l.disp[me], l.len[me]), start);
  else
    x.b().copy(dag::in(0, l.disp[me], l.len[me]), dag::out(0, 0, l.len[me]), start);
}

std::vector<NodeId> with(std::vector<NodeId> v, NodeId n) {
  if (n != dag::kNoNode) v.push_back(n);
  return v;
}

// ---------------------------------------------------------------- tree

struct Interval {
  std::uint64_t lo = 0, hi = 0;
  [[nodiscard]] bool empty() const { return hi <= lo; }
  [[nodiscard]] std::uint64_t len() const { return hi - lo; }
};

Interval meet(Interval a, Interval b) {
  Interval r{std::max(a.lo, b.lo), std::min(a.hi, b.hi)};
  if (r.hi < r.lo) r.hi = r.lo;
  return r;
}

// The scatter / gather tree of every rank, in pre-order, with packed ranges.
struct PackedTree {
  std::vector<int> parent;
  std::vector<std::vector<int>> kids;
  std::vector<int> order;             // pre-order from the root
  std::vector<std::uint64_t> start;   // per rank: packed offset of its own block (= of its subtree)
  std::vector<std::uint64_t> end;     // per rank: end of its subtree's range
  std::vector<std::uint64_t> ostart;  // per pre-order index: start[order[i]]
  std::uint64_t total = 0;
  Interval subtree(int r) const { return {start[static_cast<std::size_t>(r)], end[static_cast<std::size_t>(r)]}; }
};

PackedTree make_packed_tree(const Group& g, const Call& c, const Layout& l) {
  const int n = g.size();
  const auto un = static_cast<std::size_t>(n);
  PackedTree pt;
  pt.parent.assign(un, -1);
  pt.kids.assign(un, {});
  const Topo t = make_topo(g, c, c.root);
  for (int r = 0; r < n; ++r) {
    const Down d = down_edges(t, r);
    pt.parent[static_cast<std::size_t>(r)] = d.parent;
    pt.kids[static_cast<std::size_t>(r)] = d.children;
  }
  std::vector<int> stack{c.root};
  while (!stack.empty()) {
    const int r = stack.back();
    stack.pop_back();
    pt.order.push_back(r);
    const auto& k = pt.kids[static_cast<std::size_t>(r)];
    for (auto it = k.rbegin(); it != k.rend(); ++it) stack.push_back(*it);
  }
  if (pt.order.size() != un) fail(Errc::internal, g, c, "scatter/gather tree does not span the communicator");
  pt.start.assign(un, 0);
  pt.end.assign(un, 0);
  std::uint64_t pos = 0;
  for (int r : pt.order) {
    pt.start[static_cast<std::size_t>(r)] = pos;
    pt.ostart.push_back(pos);
    pos += l.len[static_cast<std::size_t>(r)];
  }
  pt.total = pos;
  for (auto it = pt.order.rbegin(); it != pt.order.rend(); ++it) {  // children before parents
    const auto r = static_cast<std::size_t>(*it);
    std::uint64_t e = pt.start[r] + l.len[r];
    for (int k : pt.kids[r]) e = std::max(e, pt.end[static_cast<std::size_t>(k)]);
    pt.end[r] = e;
  }
  return pt;
}

// One contiguous piece of the packed axis and where it is in the root's buffer.
struct Piece {
  std::uint64_t packed = 0;
  std::uint64_t user = 0;
  std::uint64_t len = 0;
};

// The packed range [iv) split at block boundaries into pieces of the root's
// buffer, merged where consecutive pieces are contiguous there too.
std::vector<Piece> root_pieces(const PackedTree& pt, const Layout& l, Interval iv) {
  std::vector<Piece> out;
  if (iv.empty()) return out;
  auto it = std::upper_bound(pt.ostart.begin(), pt.ostart.end(), iv.lo);
  std::size_t i = static_cast<std::size_t>(it - pt.ostart.begin());
  i = i == 0 ? 0 : i - 1;
  for (; i < pt.order.size() && pt.ostart[i] < iv.hi; ++i) {
    const auto q = static_cast<std::size_t>(pt.order[i]);
    const Interval blk = meet(iv, {pt.start[q], pt.start[q] + l.len[q]});
    if (blk.empty()) continue;
    const Piece p{blk.lo, l.disp[q] + (blk.lo - pt.start[q]), blk.len()};
    if (!out.empty() && out.back().packed + out.back().len == p.packed && out.back().user + out.back().len == p.user)
      out.back().len += p.len;
    else
      out.push_back(p);
  }
  return out;
}

struct Cells {
  std::vector<patterns::Fragment> cell;
  std::size_t region = 0;
  std::size_t nregions = 1;
  // Cells intersecting [iv): [first, last).
  std::pair<std::size_t, std::size_t> span(Interval iv) const {
    if (iv.empty()) return {0, 0};
    auto lo = std::upper_bound(cell.begin(), cell.end(), iv.lo,
                               [](std::uint64_t v, const patterns::Fragment& f) { return v < f.offset; });
    auto hi = std::lower_bound(cell.begin(), cell.end(), iv.hi,
                               [](const patterns::Fragment& f, std::uint64_t v) { return f.offset < v; });
    return {static_cast<std::size_t>(lo - cell.begin()) - 1, static_cast<std::size_t>(hi - cell.begin())};
  }
  Interval at(std::size_t gi) const { return {cell[gi].offset, cell[gi].offset + cell[gi].length}; }
  // Offset of packed byte x (in cell gi) inside the window slot: the same on every rank.
  std::uint64_t win(std::size_t gi, std::uint64_t x) const { return (gi % nregions) * region + (x - cell[gi].offset); }
};

// Slots of cell gi (of ncells): DATA / READY on the child, RTR and DONE (pull) on the parent.
std::uint32_t data_slot(std::size_t gi) { return static_cast<std::uint32_t>(2 * gi); }
std::uint32_t rtr_slot(std::size_t gi) { return static_cast<std::uint32_t>(2 * gi + 1); }
std::uint32_t done_slot(std::size_t ncells, std::size_t gi) { return static_cast<std::uint32_t>(2 * ncells + 2 + gi); }

// Signals the parent's puts of cell gi into child `ch` carry.
std::uint32_t scatter_pieces(const PackedTree& pt, const Layout& l, const Cells& cs, int parent, int ch, int root,
                             std::size_t gi) {
  const Interval iv = meet(pt.subtree(ch), cs.at(gi));
  if (iv.empty()) return 0;
  if (parent != root) return 1;
  return static_cast<std::uint32_t>(root_pieces(pt, l, iv).size());
}

// Puts child `ch` makes into cell gi of its parent: its own block and its descendants' part.
std::uint32_t gather_pieces(const PackedTree& pt, const Layout& l, const Cells& cs, int ch, std::size_t gi) {
  const auto u = static_cast<std::size_t>(ch);
  const Interval own{pt.start[u], pt.start[u] + l.len[u]};
  const Interval below{own.hi, pt.end[u]};
  return static_cast<std::uint32_t>(!meet(own, cs.at(gi)).empty()) +
         static_cast<std::uint32_t>(!meet(below, cs.at(gi)).empty());
}

// Over ~80 lines: one loop over the tree's cells, whose gather and scatter sides share the cell's nodes.
void emit_tree(Ctx& x, const Layout& l, const std::vector<NodeId>& start) {
  const Group& g = x.g();
  const Call& c = x.c();
  PlanBuilder& b = x.b();
  if (!l.all_known)
    fail(Errc::invalid_argument, g, c,
         "the tree algorithm needs 'counts' and 'displs' on every rank (the engine broadcasts them; or use flat | "
         "ring)");
  const PackedTree pt = make_packed_tree(g, c, l);
  Cells cs;
  cs.cell = x.fragments(pt.total, g.slot_bytes, 1, &cs.region);
  cs.nregions = std::max<std::size_t>(1, g.slot_bytes / cs.region);
  const std::size_t ncells = cs.cell.size();
  const bool pulls = !is_gather(c.kind) && c.algo.any_pull();
  if ((pulls ? 3 : 2) * ncells + 2 > kTokenSlot)
    fail(Errc::unsupported, g, c, "too many fragments (" + std::to_string(ncells) + "); raise the fragment size");
  const int me = x.me();
  const auto ume = static_cast<std::size_t>(me);
  const bool root = me == c.root;
  const int parent = pt.parent[ume];
  const auto& kids = pt.kids[ume];
  const Interval mine = pt.subtree(me);
  const Interval own{pt.start[ume], pt.start[ume] + l.len[ume]};
  const Interval below{own.hi, mine.hi};
  if (root) own_block_at_root(x, l, start);
  for (int k : kids) b.expect_signals_from(x.world(k));
  if (parent >= 0) b.expect_signals_from(x.world(parent));
  auto pull_edge = [&](int p, int ch) { return pulls && edge_direction(g, c.algo, p, ch) == Direction::pull; };
  const bool pull_in = parent >= 0 && pull_edge(parent, me);

  const auto [g0, g1] = cs.span(mine);
  std::vector<NodeId> consumed(g1 > g0 ? g1 - g0 : 0, dag::kNoNode);
  // Certainly the first use of cell gi's region (gi mod nregions) on the
  // receiver, whichever rank that is: every rank's first cell is >= 0.
  auto first_use = [&](std::size_t gi) { return gi < cs.nregions; };
  auto reuse = [&](std::size_t gi) {  // the node after which cell gi's region is free again
    return gi >= g0 + cs.nregions ? consumed[gi - cs.nregions - g0] : dag::kNoNode;
  };
  for (std::size_t gi = g0; gi < g1; ++gi) {
    const Interval cell = cs.at(gi);
    const Interval in_cell = meet(mine, cell);
    const Interval own_part = meet(own, cell);
    const Interval below_part = meet(below, cell);
    std::vector<NodeId> uses;
    if (!is_gather(c.kind)) {
      // ---- scatter: receive the cell part from the parent (or read the user buffer at the root).
      NodeId arrived = dag::kNoNode;
      if (!root && pull_in) {
        const NodeId ready = b.wait(data_slot(gi), 1, with(start, reuse(gi)));
        if (below_part.empty()) {  // forwards nothing of this cell: straight into recv
          arrived = b.get(x.world(parent), x.peer_win(parent, cs.win(gi, own_part.lo), own_part.len()),
                          dag::out(0, own_part.lo - own.lo, own_part.len()), {ready});
        } else {
          const Region win = x.my_win(cs.win(gi, in_cell.lo), in_cell.len());
          arrived = b.get(x.world(parent), x.peer_win(parent, cs.win(gi, in_cell.lo), in_cell.len()), win, {ready});
          if (!own_part.empty())
            uses.push_back(b.copy(x.my_win(cs.win(gi, own_part.lo), own_part.len()),
                                  dag::out(0, own_part.lo - own.lo, own_part.len()), {arrived}));
        }
        b.signal(x.world(parent), done_slot(ncells, gi), {arrived});
      } else if (!root) {
        x.rtr(parent, rtr_slot(gi), with(start, reuse(gi)), first_use(gi));
        const Region win = x.my_win(cs.win(gi, in_cell.lo), in_cell.len());
        arrived = b.wait(data_slot(gi), scatter_pieces(pt, l, cs, parent, me, c.root, gi), {}, &win);
        if (!own_part.empty())
          uses.push_back(b.copy(x.my_win(cs.win(gi, own_part.lo), own_part.len()),
                                dag::out(0, own_part.lo - own.lo, own_part.len()), {arrived}));
      }
      if (!below_part.empty()) {
        std::uint32_t npull = 0;
        std::vector<int> push_kids;
        for (int k : kids) {
          if (meet(pt.subtree(k), cell).empty()) continue;
          if (pull_edge(me, k))
            ++npull;
          else
            push_kids.push_back(k);
        }
        const std::vector<NodeId> ready = x.rtr_waits(push_kids, rtr_slot(gi), start, first_use(gi));
        for (int k : kids) {
          const Interval kp = meet(pt.subtree(k), cell);
          if (kp.empty()) continue;
          const auto kpos = std::find(push_kids.begin(), push_kids.end(), k);
          const NodeId rtr =
              kpos == push_kids.end() ? dag::kNoNode : ready[static_cast<std::size_t>(kpos - push_kids.begin())];
          if (pull_edge(me, k)) {
            // Make k's part available in this rank's region (the root stages it from send), then READY.
            std::vector<NodeId> avail = with(start, arrived);
            if (root) {
              avail.clear();
              for (const Piece& p : root_pieces(pt, l, kp))
                avail.push_back(
                    b.copy(dag::in(0, p.user, p.len), x.my_win(cs.win(gi, p.packed), p.len), with(start, reuse(gi))));
            }
            b.signal(x.world(k), data_slot(gi), avail);
            continue;
          }
          if (root) {
            for (const Piece& p : root_pieces(pt, l, kp))
              b.put_with_signal(x.world(k), dag::in(0, p.user, p.len), x.peer_win(k, cs.win(gi, p.packed), p.len),
                                data_slot(gi), {rtr});
          } else {
            uses.push_back(b.put_with_signal(x.world(k), x.my_win(cs.win(gi, kp.lo), kp.len()),
                                             x.peer_win(k, cs.win(gi, kp.lo), kp.len()), data_slot(gi),
                                             {rtr, arrived}));
          }
        }
        if (npull > 0) uses.push_back(b.wait(done_slot(ncells, gi), npull));
      }
    } else {
      // ---- gather: collect the descendants' part of the cell, then push the cell part up.
      NodeId arrived = dag::kNoNode;
      if (!below_part.empty()) {
        std::uint32_t cnt = 0;
        for (int k : kids) {
          if (meet(pt.subtree(k), cell).empty()) continue;
          cnt += gather_pieces(pt, l, cs, k, gi);
          x.rtr(k, rtr_slot(gi), with(start, reuse(gi)), first_use(gi));
        }
        const Region win = x.my_win(cs.win(gi, below_part.lo), below_part.len());
        arrived = b.wait(data_slot(gi), cnt, {}, &win);
        if (root) {
          for (const Piece& p : root_pieces(pt, l, below_part))
            uses.push_back(b.copy(x.my_win(cs.win(gi, p.packed), p.len), dag::out(0, p.user, p.len), {arrived}));
        }
      }
      if (!root) {
        const NodeId rtr = x.rtr_waits({parent}, rtr_slot(gi), start, first_use(gi))[0];
        if (!own_part.empty())
          b.put_with_signal(x.world(parent), dag::in(0, own_part.lo - own.lo, own_part.len()),
                            x.peer_win(parent, cs.win(gi, own_part.lo), own_part.len()), data_slot(gi), {rtr});
        if (!below_part.empty())
          uses.push_back(b.put_with_signal(x.world(parent), x.my_win(cs.win(gi, below_part.lo), below_part.len()),
                                           x.peer_win(parent, cs.win(gi, below_part.lo), below_part.len()),
                                           data_slot(gi), {rtr, arrived}));
      }
    }
    // Cell gi's region is free again after `uses`; a cell that did not touch
    // it passes on whatever the previous cell in the region waited for.
    consumed[gi - g0] = uses.empty() ? reuse(gi) : uses.size() == 1 ? uses[0] : b.nop(uses);
  }
}

// ---------------------------------------------------------------- flat and ring

// Over ~80 lines: flat and ring share one loop over the blocks.
void emit_direct(Ctx& x, const Layout& l, bool ring, const std::vector<NodeId>& start) {
  const Group& g = x.g();
  const Call& c = x.c();
  PlanBuilder& b = x.b();
  const int n = g.size();
  const int me = x.me();
  const int root = c.root;
  const bool gather = is_gather(c.kind);
  if (me == root) own_block_at_root(x, l, start);
  if (n == 1) return;
  const auto un1 = static_cast<std::size_t>(n - 1);
  // Gather: the root's slot is split into one area per non-root; scatter: each
  // non-root receives into its own whole slot.
  std::size_t area = gather ? g.slot_bytes / un1 : g.slot_bytes;
  area -= area % x.esize();
  auto vrank = [&](int r) { return static_cast<std::size_t>((r - root + n) % n); };
  auto slot_of = [&](std::size_t j, std::size_t f, bool rtr) {
    const std::size_t s = 2 * (f * un1 + (j - 1)) + (rtr ? 1 : 0);
    if (s >= kTokenSlot)
      fail(Errc::unsupported, g, c, "too many fragments (" + std::to_string(f) + "); raise the fragment size");
    return static_cast<std::uint32_t>(s);
  };
  if (me == root) {
    for (std::size_t j = 1; j < static_cast<std::size_t>(n); ++j) {
      const int r = (root + static_cast<int>(j)) % n;
      const auto ur = static_cast<std::size_t>(r);
      std::size_t region = 0;
      const std::vector<patterns::Fragment> fr = x.fragments(l.len[ur], area, 1, &region);
      if (fr.empty()) continue;
      const std::size_t nregions = std::max<std::size_t>(1, area / region);
      const std::uint64_t base = gather ? (j - 1) * area : 0;
      b.expect_signals_from(x.world(r));
      std::vector<NodeId> consumed(fr.size(), dag::kNoNode);
      for (std::size_t f = 0; f < fr.size(); ++f) {
        const std::uint64_t off = fr[f].offset, len = fr[f].length;
        const std::uint64_t woff = base + (f % nregions) * region;
        if (gather) {
          x.rtr(r, slot_of(j, f, true), with(start, f >= nregions ? consumed[f - nregions] : dag::kNoNode),
                f < nregions);
          const Region win = x.my_win(woff, len);
          const NodeId arrived = b.wait(slot_of(j, f, false), 1, {}, &win);
          consumed[f] = b.copy(win, dag::out(0, l.disp[ur] + off, len), {arrived});
        } else {
          const NodeId rtr = x.rtr_waits({r}, slot_of(j, f, true), start, f < nregions)[0];
          b.put_with_signal(x.world(r), dag::in(0, l.disp[ur] + off, len), x.peer_win(r, woff, len),
                            slot_of(j, f, false), {rtr});
        }
      }
    }
    return;
  }
  // A non-root.
  const std::size_t j = vrank(me);
  const auto ume = static_cast<std::size_t>(me);
  std::size_t region = 0;
  const std::vector<patterns::Fragment> fr = x.fragments(l.len[ume], area, 1, &region);
  const std::size_t nregions = std::max<std::size_t>(1, area / region);
  const std::uint64_t base = gather ? (j - 1) * area : 0;
  b.expect_signals_from(x.world(root));
  std::vector<NodeId> gate = start;
  patterns::TokenRingRole role;
  if (ring) {
    role = patterns::token_ring(me, n, root);
    if (role.token_from >= 0) {
      b.expect_signals_from(x.world(role.token_from));
      gate = {b.wait(kTokenSlot, 1, start)};
    }
  }
  std::vector<NodeId> done(fr.size(), dag::kNoNode);  // per fragment: moved (gather) / arrived (scatter)
  std::vector<NodeId> consumed(fr.size(), dag::kNoNode);
  for (std::size_t f = 0; f < fr.size(); ++f) {
    const std::uint64_t off = fr[f].offset, len = fr[f].length;
    const std::uint64_t woff = base + (f % nregions) * region;
    if (gather) {
      const NodeId rtr = x.rtr_waits({root}, slot_of(j, f, true), gate, f < nregions)[0];
      done[f] = b.put_with_signal(x.world(root), dag::in(0, off, len), x.peer_win(root, woff, len),
                                  slot_of(j, f, false), {rtr});
    } else {
      x.rtr(root, slot_of(j, f, true), with(gate, f >= nregions ? consumed[f - nregions] : dag::kNoNode), f < nregions);
      const Region win = x.my_win(woff, len);
      done[f] = b.wait(slot_of(j, f, false), 1, {}, &win);
      consumed[f] = b.copy(win, dag::out(0, off, len), {done[f]});
    }
  }
  if (ring && role.token_to >= 0) {
    const patterns::TokenSplit sp =
        patterns::token_split(l.len[ume], static_cast<std::size_t>(tuning(g).gather_token_bytes),
                              g.host[ume] == g.host[static_cast<std::size_t>(root)]);
    std::vector<NodeId> deps;
    for (std::size_t f = 0; f < fr.size(); ++f)
      if (fr[f].offset < sp.before_pass) deps.push_back(done[f]);
    if (deps.empty()) deps = gate;
    b.signal(x.world(role.token_to), kTokenSlot, deps);
  }
}

std::shared_ptr<const dag::Plan> compile_rooted(const Group& g, const Call& c, int slot, const AlgorithmRow& row) {
  // The group and the arguments were checked once, by compile() or the engine (Call::checked).
  Ctx x(g, c, slot);
  const Layout l = make_layout(g, c, x.esize());
  declare_buffers(x, l);
  const std::vector<NodeId> start = entry(x);
  if (row.variant == Variant::flat || row.variant == Variant::ring) {
    x.b().algorithm(row.name);
    emit_direct(x, l, row.variant == Variant::ring, start);
  } else {
    emit_tree(x, l, start);
  }
  finish(x);
  if (x.b().size() == 0) x.b().nop();
  return x.build();
}

}  // namespace

std::shared_ptr<const dag::Plan> compile_gather(const Group& g, const Call& c, int slot, const AlgorithmRow& row) {
  return compile_rooted(g, c, slot, row);
}

std::shared_ptr<const dag::Plan> compile_scatter(const Group& g, const Call& c, int slot, const AlgorithmRow& row) {
  return compile_rooted(g, c, slot, row);
}

}  // namespace strata::coll::cc
