// The collective compiler: see strata/collectives/compile.hpp for the window
// protocol and docs/collectives.md for each algorithm's cost.
#include "strata/collectives/compile.hpp"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>

#include "patterns/fragment.hpp"
#include "patterns/multilevel.hpp"
#include "patterns/rank_order.hpp"
#include "patterns/tree.hpp"

namespace strata::coll {

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

namespace {

// Signal slots: data phases count up from 0; the strict-sync barriers live at the top.
constexpr std::uint32_t kEntryBarrier = dag::kMaxSlot - 255;
constexpr std::uint32_t kExitBarrier = dag::kMaxSlot - 127;
constexpr std::uint32_t kDataSlotLimit = kEntryBarrier;

[[noreturn]] void fail(Errc code, const Group& g, const Call& c, const std::string& what) {
  throw Error(code, std::string(to_string(c.kind)) + " on rank " + std::to_string(g.rank) + ": " + what);
}

patterns::TreeShape to_pattern(const Shape& s) {
  switch (s.kind) {
    case Shape::flat:
      return patterns::TreeShape::flat();
    case Shape::binary:
      return patterns::TreeShape::binary();
    case Shape::knomial:
      return patterns::TreeShape::knomial(std::max(1, s.radix));
  }
  return patterns::TreeShape::binomial();
}

// Parent / children of every communicator rank for data flowing from `root`
// (broadcast) or to `root` (reduce); `tree_root` is where the tree itself is
// rooted (differs from root when the multilevel tree needs an extra hop).
struct Topo {
  patterns::Tree tree;
  int root = 0;
  [[nodiscard]] bool extra_hop() const { return root != tree.root(); }
};

Topo make_topo(const Group& g, const Call& c, int root) {
  Topo t;
  const int n = g.size();
  if (c.algo.hierarchical && n > 1) {
    std::vector<patterns::Place> places(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r)
      places[static_cast<std::size_t>(r)] = {g.host[static_cast<std::size_t>(r)], g.numa[static_cast<std::size_t>(r)]};
    patterns::MultilevelShape ms;
    ms.host = to_pattern(c.algo.host);
    ms.numa = to_pattern(c.algo.numa);
    ms.core = to_pattern(c.algo.core);
    ms.policy = patterns::RootPolicy::extra_hop;
    patterns::MultilevelTree mt = patterns::build_multilevel_tree(places, root, ms);
    t.tree = std::move(mt.tree);
    t.root = mt.root;
  } else {
    t.tree = patterns::build_tree(n, root, to_pattern(c.algo.single));
    t.root = root;
  }
  return t;
}

// Downward edges for a broadcast over `t`: with an extra hop, the root sends to
// the tree root first and does not receive from its own tree parent.
struct Down {
  int parent = -1;
  std::vector<int> children;
};

Down down_edges(const Topo& t, int r) {
  Down d;
  const int tr = t.tree.root();
  for (int ch : t.tree.children(r))
    if (!(t.extra_hop() && ch == t.root)) d.children.push_back(ch);
  if (!t.extra_hop()) {
    d.parent = t.tree.parent(r);
    return d;
  }
  if (r == t.root) {
    d.parent = -1;
    d.children.insert(d.children.begin(), tr);
  } else if (r == tr) {
    d.parent = t.root;
  } else {
    d.parent = t.tree.parent(r);
  }
  return d;
}

int max_children(const patterns::Tree& tree) {
  int m = 1;
  for (int r = 0; r < tree.size(); ++r) m = std::max(m, static_cast<int>(tree.children(r).size()));
  return m;
}

// Everything one rank's compilation needs.
class Ctx {
 public:
  Ctx(const Group& g, const Call& c, int slot)
      : g_(g),
        c_(c),
        slot_base_(static_cast<std::uint64_t>(slot) * g.slot_bytes),
        b_(std::string(to_string(c.kind)), g.world[static_cast<std::size_t>(g.rank)], g.world_size) {
    esize_ = c.user_op ? c.user_op->elem_size : dag::datatype_size(c.dtype);
    b_.output(1, g.slot_bytes);
  }

  PlanBuilder& b() { return b_; }
  const Group& g() const { return g_; }
  const Call& c() const { return c_; }
  std::size_t esize() const { return esize_; }
  int me() const { return g_.rank; }
  int world(int r) const { return g_.world[static_cast<std::size_t>(r)]; }

  void declare_peer(int r) {
    if (declared_.size() < static_cast<std::size_t>(g_.size()))
      declared_.assign(static_cast<std::size_t>(g_.size()), 0);
    if (declared_[static_cast<std::size_t>(r)]) return;
    declared_[static_cast<std::size_t>(r)] = 1;
    b_.peer_buffer(world(r), 0, g_.slot_bytes * static_cast<std::uint64_t>(g_.credits));
  }

  // Window region of this rank / of peer r, at offset `off` inside the instance's slot.
  Region my_win(std::uint64_t off, std::uint64_t len) const { return dag::out(1, off, len); }
  Region peer_win(int r, std::uint64_t off, std::uint64_t len) {
    declare_peer(r);
    return dag::peer(world(r), 0, slot_base_ + off, len);
  }

  NodeId reduce(const Region& a, const Region& bb, const Region& dst, std::vector<NodeId> deps) {
    if (c_.user_op) {
      if (user_index_ < 0) user_index_ = b_.add_user_op(*c_.user_op);
      return b_.reduce(a, bb, dst, user_index_, std::move(deps));
    }
    return b_.reduce(a, bb, dst, c_.op, c_.dtype, std::move(deps));
  }

  bool commutative() const { return !c_.user_op || c_.user_op->commutative; }

  // Fragments of a `bytes` message whose regions must fit `area` bytes split
  // `ways` ways (one region set per sender into one receiver).
  std::vector<patterns::Fragment> fragments(std::size_t bytes, std::size_t area, int ways, std::size_t* region) {
    const std::size_t align = esize_;
    std::size_t cap = area / static_cast<std::size_t>(std::max(1, ways));
    cap -= cap % align;
    if (cap == 0) fail(Errc::invalid_argument, g_, c_, "window slot too small (STRATA_SLOT_BYTES)");
    patterns::FragPolicy pol;
    if (c_.algo.halves_threshold > 0) {
      pol = patterns::FragPolicy::halves(c_.algo.halves_threshold, align);
    } else if (c_.algo.fragment > 0) {
      pol = patterns::FragPolicy::fixed(std::min(c_.algo.fragment, cap), align);
    } else {
      // Default: whole message if it fits a region, else 32 KiB pipeline fragments (seed 000).
      pol = bytes <= cap ? patterns::FragPolicy::none()
                         : patterns::FragPolicy::fixed(std::min<std::size_t>(32768, cap), align);
    }
    std::vector<patterns::Fragment> fr;
    patterns::fragments(bytes, pol, fr);
    std::size_t longest = 0;
    for (const auto& f : fr) longest = std::max(longest, f.length);
    if (longest > cap) {  // halves of a big message: re-split to fit the window
      patterns::fragments(bytes, patterns::FragPolicy::fixed(std::min<std::size_t>(32768, cap), align), fr);
      longest = 0;
      for (const auto& f : fr) longest = std::max(longest, f.length);
    }
    *region = std::max<std::size_t>(longest, align);
    return fr;
  }

  // Dissemination barrier over the communicator at slots [base, base + rounds);
  // returns the node after which every rank has entered (kNoNode for n == 1).
  NodeId barrier(std::uint32_t base, std::vector<NodeId> deps) {
    const int n = g_.size();
    if (n == 1) return deps.empty() ? dag::kNoNode : b_.nop(std::move(deps));
    NodeId prev = deps.empty() ? dag::kNoNode : b_.nop(std::move(deps));
    std::uint32_t k = 0;
    for (int dist = 1; dist < n; dist *= 2, ++k) {
      const int to = (me() + dist) % n;
      const int from = (me() - dist % n + n) % n;
      std::vector<NodeId> d;
      if (prev != dag::kNoNode) d.push_back(prev);
      b_.signal(world(to), base + k, d);
      b_.expect_signals_from(world(from));
      prev = b_.wait(base + k, 1, d);
    }
    return prev;
  }

  std::shared_ptr<const dag::Plan> build() { return b_.build(); }

 private:
  const Group& g_;
  const Call& c_;
  std::uint64_t slot_base_;
  PlanBuilder b_;
  std::size_t esize_ = 1;
  std::int32_t user_index_ = -1;
  std::vector<char> declared_;
};

// ---------------------------------------------------------------- broadcast
// Push down the tree with ready-to-receive: for fragment f, a receiver signals
// RTR(f) to its parent when its window region (f mod R) is free, the parent
// waits for RTR(f) from all its children and put_with_signal's the fragment.
// Slots: DATA(f) = base + 2f on the receiver, RTR(f) = base + 2f + 1 on the parent.
struct BcastIO {
  // Where fragment f's bytes are at the root, and where they must end up.
  std::function<Region(std::uint64_t off, std::uint64_t len)> root_src;
  std::function<Region(std::uint64_t off, std::uint64_t len)> dst;  // null: leave in the window
  std::vector<NodeId> root_ready;  // per fragment: node after which root_src(f) is valid (kNoNode = at start)
  std::vector<NodeId> dst_after;   // per fragment: node the copy into dst(f) must follow (kNoNode = none)
};

void emit_broadcast(Ctx& x, const Topo& t, const std::vector<patterns::Fragment>& fr, std::size_t region,
                    std::uint64_t area_off, std::size_t area, std::uint32_t base, const BcastIO& io,
                    const std::vector<NodeId>& start_deps) {
  PlanBuilder& b = x.b();
  const Down d = down_edges(t, x.me());
  const std::size_t nregions = std::max<std::size_t>(1, area / region);
  if (base + 2 * fr.size() + 2 > kDataSlotLimit)
    fail(Errc::unsupported, x.g(), x.c(),
         "too many fragments (" + std::to_string(fr.size()) + "); raise the fragment size");
  std::vector<NodeId> consumed(fr.size(), dag::kNoNode);
  for (std::size_t f = 0; f < fr.size(); ++f) {
    const auto off = static_cast<std::uint64_t>(fr[f].offset);
    const auto len = static_cast<std::uint64_t>(fr[f].length);
    const std::uint64_t roff = area_off + (f % nregions) * region;
    const auto data_slot = static_cast<std::uint32_t>(base + 2 * f);
    Region src;
    std::vector<NodeId> src_deps = start_deps;
    std::vector<NodeId> uses;  // nodes reading the window region (for its reuse)
    if (d.parent < 0) {
      src = io.root_src(off, len);
      if (!io.root_ready.empty() && io.root_ready[f] != dag::kNoNode) src_deps.push_back(io.root_ready[f]);
    } else {
      std::vector<NodeId> rdeps = start_deps;
      if (f >= nregions && consumed[f - nregions] != dag::kNoNode) rdeps.push_back(consumed[f - nregions]);
      b.signal(x.world(d.parent), data_slot + 1, rdeps);
      b.expect_signals_from(x.world(d.parent));
      const Region win = x.my_win(roff, len);
      const NodeId arrived = b.wait(data_slot, 1, {}, &win);
      src = win;
      src_deps = {arrived};
      if (io.dst) {
        std::vector<NodeId> cdeps{arrived};
        if (!io.dst_after.empty() && io.dst_after[f] != dag::kNoNode) cdeps.push_back(io.dst_after[f]);
        uses.push_back(b.copy(win, io.dst(off, len), cdeps));
      }
    }
    if (!d.children.empty()) {
      const NodeId ready = b.wait(data_slot + 1, static_cast<std::uint32_t>(d.children.size()), src_deps);
      for (int ch : d.children) {
        x.b().expect_signals_from(x.world(ch));
        const NodeId p = b.put_with_signal(x.world(ch), src, x.peer_win(ch, roff, len), data_slot, {ready});
        uses.push_back(p);
      }
    }
    if (d.parent >= 0) consumed[f] = uses.size() == 1 ? uses[0] : b.nop(uses);
  }
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
      b.signal(x.world(kids[j]), rtr, rdeps);
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
    for (std::size_t k = 1; k < operands.size(); ++k) {
      Region rhs;
      std::vector<NodeId> rdeps = cur_deps;
      operand(operands[k], &rhs, &rdeps);
      if (last != dag::kNoNode) rdeps.push_back(last);
      const Region dst = io.acc(off, len);
      last = x.reduce(cur, rhs, dst, rdeps);
      cur = dst;
      cur_deps.clear();
      for (std::size_t j = 0; j < kids.size(); ++j)
        if (operands[k] == kids[j] || (k == 1 && operands[0] == kids[j])) readers[j].push_back(last);
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
    b.expect_signals_from(x.world(parent));
    const NodeId ready = b.wait(rtr, 1, sdeps);
    const std::size_t pregions =
        std::max<std::size_t>(1, area / (region * static_cast<std::size_t>(maxc)));  // same on every rank
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

// Strict entry: everything waits for an entry barrier.
std::vector<NodeId> entry(Ctx& x) {
  if (!x.c().entry_all) return {};
  const NodeId n = x.barrier(kEntryBarrier, {});
  return n == dag::kNoNode ? std::vector<NodeId>{} : std::vector<NodeId>{n};
}

void finish(Ctx& x) {
  if (!x.c().exit_all) return;
  // Exit barrier after every node so far.
  std::vector<NodeId> all;
  for (NodeId i = 0; i < x.b().size(); ++i) all.push_back(i);
  x.barrier(kExitBarrier, all.empty() ? std::vector<NodeId>{} : std::vector<NodeId>{x.b().nop(all)});
}

void check_common(const Group& g, const Call& c) {
  const int n = g.size();
  if (n < 1) fail(Errc::invalid_argument, g, c, "empty communicator");
  if (g.rank < 0 || g.rank >= n) fail(Errc::invalid_argument, g, c, "rank outside the communicator");
  if (g.host.size() != g.world.size() || g.numa.size() != g.world.size())
    fail(Errc::invalid_argument, g, c, "group places do not match its members");
  if (c.root < 0 || c.root >= n)
    fail(Errc::invalid_argument, g, c,
         "argument 'root' = " + std::to_string(c.root) + " outside [0, " + std::to_string(n) + ")");
  if (c.user_op && (!c.user_op->fn || c.user_op->elem_size == 0))
    fail(Errc::invalid_argument, g, c, "argument 'op': user op without a function or with elem_size 0");
  if (!c.user_op && (c.kind == Kind::reduce || c.kind == Kind::allreduce) &&
      dag::reduce_kernel(c.op, c.dtype) == nullptr)
    fail(Errc::unsupported, g, c,
         std::string("argument 'op': ") + dag::to_string(c.op) + " is not defined on " + dag::to_string(c.dtype));
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
  emit_broadcast(x, t, fr, region, half, half, rslots, bio, start);
  finish(x);
  if (x.b().size() == 0) x.b().nop();
  return x.build();
}

}  // namespace

std::shared_ptr<const dag::Plan> compile(const Group& g, const Call& c, int slot) {
  check_common(g, c);
  if (slot < 0 || slot >= g.credits)
    throw Error(Errc::invalid_argument, "compile: slot " + std::to_string(slot) + " outside [0, credits)");
  switch (c.kind) {
    case Kind::barrier:
      return compile_barrier(g, c, slot);
    case Kind::broadcast:
      return compile_broadcast(g, c, slot);
    case Kind::reduce:
      return compile_reduce(g, c, slot);
    case Kind::allreduce:
      return compile_allreduce_tree(g, c, slot);
    default:
      break;
  }
  fail(Errc::unsupported, g, c, "not implemented by the compiler yet");
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
