// Internals shared by the collective compilers (compile.cpp and the
// compile_*.cpp files): window layout helpers, tree topologies, the per-rank
// compilation context. Not installed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "patterns/fragment.hpp"
#include "patterns/multilevel.hpp"
#include "patterns/rank_order.hpp"
#include "patterns/tree.hpp"
#include "strata/collectives/compile.hpp"
#include "strata/collectives/registry.hpp"

namespace strata::coll::cc {

// ---------------------------------------------------------------- decision table
// The automatic selection's thresholds (docs/algorithms.md, "Automatic
// selection"; strata-info prints them through coll::selection_rules()) are the
// fields of the tuning table in effect (strata/collectives/tuning.hpp,
// docs/tuning.md): Group::tuning, else the built-in defaults (Tuning{}).
// allgather(v), alltoall(v) with large blocks (docs/algorithms.md "Large blocks"; measured on 2 ranks, one per
// core): messages of at least sym_large_message bytes travel in sym_large_fragment fragments (else the pipeline
// fragment), and an own block of at least sym_large_message bytes is copied fragment by fragment, each after the
// puts of the same send bytes (allgather) or of the first message (alltoall); from sym_stream_min_bytes of send +
// recv per rank the copies into recv use non-temporal stores (PlanBuilder::streaming).
// pipeline_fragment: default fragment of the trees (broadcast, reduce,
// gather/scatter) and the step schedules: messages above it are cut into
// fragments of this size even when they fit a window region. Measured on 2
// ranks, one per core (strata-bench, STRATA_FRAGMENT=fixed:N;
// docs/algorithms.md "Fragmentation"): 32 KiB fragments and unfragmented 1 MiB
// messages left a 1 MiB broadcast at 184 us (two serial out-of-cache copies),
// 128 KiB fragments bring it to 40 us and every collective from 128 KiB to 4
// MiB to within 0-10% of its best fixed size (64 KiB was up to 10% slower at 4
// MiB). The papers used 32 KiB (Mallon et al.) and 16 / 512 KiB (Ma et al.) on
// other machines: strata-tune measures it per machine.
inline const Tuning& tuning(const Group& g) {
  static const Tuning kDefaults{};
  return g.tuning ? *g.tuning : kDefaults;
}

// net_pipeline_fragment replaces pipeline_fragment (and the large-message
// fragment of allgather / alltoall) when the members span hosts. Measured 2 x 1
// across loopback virtual hosts (libfabric tcp;ofi_rxm), 3 alternating rounds,
// medians, --fragment fixed:524288 against the 128 KiB default: broadcast 1-16
// MiB 0.17-0.34x the time, allreduce 0.44-0.72x, allgather 0.58-0.80x,
// alltoall 0.34-0.60x, reduce_scatter 0.56-0.72x (docs/performance.md "Across
// hosts"): each fragment across the network is a write with its signal and
// completions on both sides.
inline std::uint64_t default_fragment(const Group& g) {
  return g.spans_hosts() ? tuning(g).net_pipeline_fragment : tuning(g).pipeline_fragment;
}

using dag::NodeId;
using dag::PlanBuilder;
using dag::Region;

// Signal slots: data phases count up from 0; the strict-sync barriers live at the top.
constexpr std::uint32_t kEntryBarrier = dag::kMaxSlot - 255;
constexpr std::uint32_t kExitBarrier = dag::kMaxSlot - 127;
constexpr std::uint32_t kDataSlotLimit = kEntryBarrier;

[[noreturn]] inline void fail(Errc code, const Group& g, const Call& c, const std::string& what) {
  throw Error(code, std::string(to_string(c.kind)) + " on rank " + std::to_string(g.rank) + ": " + what);
}

inline patterns::TreeShape to_pattern(const Shape& s) {
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

inline Topo make_topo(const Group& g, const Call& c, int root) {
  Topo t;
  const int n = g.size();
  if (c.algo.hierarchical && n > 1) {
    std::vector<patterns::Place> places(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r)
      places[static_cast<std::size_t>(r)] = {g.host[static_cast<std::size_t>(r)], g.numa[static_cast<std::size_t>(r)],
                                             g.package_of(r)};
    patterns::MultilevelShape ms;
    ms.host = to_pattern(c.algo.host);
    ms.package = to_pattern(c.algo.package);
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

inline Down down_edges(const Topo& t, int r) {
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

inline int max_children(const patterns::Tree& tree) {
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
        slot_(static_cast<std::uint32_t>(slot)),
        slot_base_(static_cast<std::uint64_t>(slot) * g.slot_bytes),
        b_(std::string(to_string(c.kind)), g.world[static_cast<std::size_t>(g.rank)], g.world_size) {
    esize_ = c.user_op ? c.user_op->elem_size : dag::datatype_size(c.dtype);
    b_.output(1, g.slot_bytes);
    b_.members(g.world);
  }

  PlanBuilder& b() { return b_; }
  const Group& g() const { return g_; }
  /// The instance's window slot (its credit slot).
  std::uint32_t slot() const { return slot_; }
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
  // Region of peer r's registered user buffer `id` (persistent plans, direct mode).
  Region peer_user(int r, std::uint32_t id, std::uint64_t size, std::uint64_t off, std::uint64_t len) {
    if (declared_user_.size() < static_cast<std::size_t>(g_.size()))
      declared_user_.assign(static_cast<std::size_t>(g_.size()), 0);
    if (!declared_user_[static_cast<std::size_t>(r)]) {
      declared_user_[static_cast<std::size_t>(r)] = 1;
      b_.peer_buffer(world(r), id, size);
    }
    return dag::peer(world(r), id, off, len);
  }
  Region peer_win(int r, std::uint64_t off, std::uint64_t len) {
    declare_peer(r);
    return dag::peer(world(r), 0, slot_base_ + off, len);
  }

  /// The call's user operator registered in this plan (once), for nodes that fold with it.
  std::int32_t user_index() {
    if (user_index_ < 0) user_index_ = b_.add_user_op(*c_.user_op);
    return user_index_;
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
      // Default: whole message up to one pipeline fragment (and if it fits a
      // region), else pipeline_fragment pieces.
      const auto pf = static_cast<std::size_t>(default_fragment(g_));
      pol = bytes <= std::min<std::size_t>(cap, pf)
                ? patterns::FragPolicy::none()
                : patterns::FragPolicy::fixed(std::min<std::size_t>(pf, cap), align);
    }
    std::vector<patterns::Fragment> fr;
    patterns::fragments(bytes, pol, fr);
    std::size_t longest = 0;
    for (const auto& f : fr) longest = std::max(longest, f.length);
    if (longest > cap) {  // halves of a big message: re-split to fit the window
      patterns::fragments(
          bytes,
          patterns::FragPolicy::fixed(
              std::min<std::size_t>(static_cast<std::size_t>(tuning(g_).fallback_fragment), cap), align),
          fr);
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

  // ---- window flags (docs/algorithms.md, "Window flags")
  // Whether the first use of a window region of peer r in this instance needs
  // no ready-to-receive signal: r shares this host and the group's flag words
  // are mapped. The receiver then sends nothing; the sender's put waits on
  // slot_free(r) instead of the signal.
  // With grants (Group::grants) a peer on another host is a flag edge too:
  // the sender reads its copy of r's flag, kept current by r's grants.
  [[nodiscard]] bool flag_edge(int r) const { return g_.flags && (same_host(r) || g_.grants); }
  [[nodiscard]] bool same_host(int r) const {
    return g_.host[static_cast<std::size_t>(r)] == g_.host[static_cast<std::size_t>(me())];
  }
  // Node after which peer r's window slot is free for this instance: r's flag
  // for this slot shows its instance seq - credits (the slot's previous user)
  // finished. One flag_wait per peer and plan, a root node (checked at start).
  NodeId slot_free(int r) {
    if (flag_waits_.size() < static_cast<std::size_t>(g_.size()))
      flag_waits_.assign(static_cast<std::size_t>(g_.size()), dag::kNoNode);
    NodeId& w = flag_waits_[static_cast<std::size_t>(r)];
    if (w == dag::kNoNode)
      w = b_.flag_wait(world(r), slot_, static_cast<std::uint32_t>(g_.credits), {}, /*granted=*/!same_host(r));
    return w;
  }
  // Ready-to-receive from this rank to peer r for a region of this rank's
  // window: a signal on `slot` after `deps`, or nothing when `first_use` of
  // the region and r is a flag edge (r waits on this rank's flag instead).
  // A remote flag edge r gets this slice's flag_set value (a grant) instead.
  void rtr(int r, std::uint32_t slot, std::vector<NodeId> deps, bool first_use) {
    if (first_use && flag_edge(r)) {
      if (!same_host(r) && std::find(grant_to_.begin(), grant_to_.end(), world(r)) == grant_to_.end())
        grant_to_.push_back(world(r));
      return;
    }
    b_.signal(world(r), slot, std::move(deps));
  }
  // The sender's side of rtr() for the push children `kids` of one region use:
  // per kid, the node its put must follow (the flag wait, or one shared wait
  // for the RTR signals of the non-flag kids on `slot`, after `deps`).
  std::vector<NodeId> rtr_waits(const std::vector<int>& kids, std::uint32_t slot, const std::vector<NodeId>& deps,
                                bool first_use) {
    std::vector<NodeId> out(kids.size(), dag::kNoNode);
    std::uint32_t nsig = 0;
    for (std::size_t j = 0; j < kids.size(); ++j) {
      b_.expect_signals_from(world(kids[j]));
      if (first_use && flag_edge(kids[j])) {
        std::vector<NodeId> d = deps;
        d.push_back(slot_free(kids[j]));
        out[j] = d.size() == 1 ? d[0] : b_.nop(std::move(d));
      } else {
        ++nsig;
      }
    }
    if (nsig > 0) {
      const NodeId w = b_.wait(slot, nsig, deps);
      for (NodeId& o : out)
        if (o == dag::kNoNode) o = w;
    }
    return out;
  }

  // Freezes the slice. Every slice ends with a flag_set after all its nodes:
  // this rank's flag for the slot then counts every finished instance from the
  // communicator's first call on, whatever protocol the slices used (the
  // agreement that turns window flags on runs before they are on), so a peer's
  // flag_wait can rely on it. Without a bound flag block it does nothing.
  std::shared_ptr<const dag::Plan> build() {
    if (b_.algorithm().empty()) {
      // The tree plans (Variant::tree) record their shape here; every other
      // compile function records its row's name before build().
      if (c_.kind == Kind::barrier)
        b_.algorithm("dissemination");
      else
        b_.algorithm(c_.algo.hierarchical ? "tree (host/numa/core levels)" : "tree (single level)");
    }
    if (c_.compute) {  // CollOptions::compute: a root, so it starts with the call; the end waits for it
      const NodeId w = b_.compute_bound(kComputeNode, Region{});
      b_.label(w, "application compute");
    }
    {
      const std::size_t n = b_.size();
      std::vector<char> has_succ(n, 0);
      for (NodeId i = 0; i < n; ++i)
        for (NodeId d : b_.deps_of(i))
          if (d < n) has_succ[d] = 1;
      std::vector<NodeId> sinks;
      for (NodeId i = 0; i < n; ++i)
        if (!has_succ[i]) sinks.push_back(i);
      // The slot's words that only some plans raise, kept recent by every
      // instance (dag::Node::refresh): the mapped record word and the
      // publication / reads-done words, whose readers wait "at or after".
      std::vector<std::uint32_t> refresh;
      if (g_.mapped_word != 0)
        refresh.push_back(g_.mapped_word + static_cast<std::uint32_t>(g_.mapped_slot_bytes / 4) * slot_);
      if (g_.publish_word != 0) {
        refresh.push_back(g_.publish_word + dag::kPublishWords * slot_);
        refresh.push_back(g_.publish_word + dag::kPublishWords * slot_ + 1);
      }
      const bool record = g_.mapped_word != 0;
      const NodeId end = b_.flag_set(slot_, std::move(sinks), grant_to_, std::move(refresh));
      // The record word refreshed is the instance's mapped slot's (Bindings::shift).
      if (record) b_.relative(end, dag::kRelRefreshFirst);
    }
    return b_.build();
  }

 private:
  const Group& g_;
  const Call& c_;
  std::uint32_t slot_ = 0;
  std::vector<NodeId> flag_waits_;
  std::vector<std::int32_t> grant_to_;  // remote flag edges that put into this rank's window
  std::uint64_t slot_base_;
  PlanBuilder b_;
  std::size_t esize_ = 1;
  std::int32_t user_index_ = -1;
  std::vector<char> declared_;
  std::vector<char> declared_user_;
};

// ---- single-copy publication records (docs/algorithms.md, "Single copy")
// Flag word of this instance's publication record (publish / read_peer /
// write_peer); its reads-done word follows.
inline std::uint32_t publication_record(const Ctx& x) { return x.g().publish_word + dag::kPublishWords * x.slot(); }

// The flag_wait (lag 0) on rank r's publication at word @p w, made once per rank on first use.
inline std::function<NodeId(int)> publications(Ctx& x, std::uint32_t w, const std::vector<NodeId>& start) {
  auto made = std::make_shared<std::vector<NodeId>>(static_cast<std::size_t>(x.g().size()), dag::kNoNode);
  return [&x, w, start, made](int r) {
    NodeId& f = (*made)[static_cast<std::size_t>(r)];
    if (f == dag::kNoNode) f = x.b().flag_wait(x.world(r), w, 0, start);
    return f;
  };
}

// Owner's side: wait until every reader in @p readers raised its reads-done
// word (after @p after), so the published buffers stay valid while they read.
inline void wait_readers(Ctx& x, const std::vector<int>& readers, NodeId after) {
  const std::uint32_t w = publication_record(x);
  for (int r : readers) x.b().flag_wait(x.world(r), w + 1, 0, {after});
}

// Strict entry: everything waits for an entry barrier.
inline std::vector<NodeId> entry(Ctx& x) {
  if (!x.c().entry_all) return {};
  const NodeId n = x.barrier(kEntryBarrier, {});
  return n == dag::kNoNode ? std::vector<NodeId>{} : std::vector<NodeId>{n};
}

inline void finish(Ctx& x) {
  if (!x.c().exit_all) return;
  // Exit barrier after every node so far.
  std::vector<NodeId> all;
  for (NodeId i = 0; i < x.b().size(); ++i) all.push_back(i);
  x.barrier(kExitBarrier, all.empty() ? std::vector<NodeId>{} : std::vector<NodeId>{x.b().nop(all)});
}

// The compile functions of the registry's rows (registry.cpp; CompileFn):
// each dispatches on its row's Variant and records its row's name.
// compile.cpp: the tree collectives.
std::shared_ptr<const dag::Plan> barrier_plan(const Group& g, const Call& c, int slot, const AlgorithmRow& row);
std::shared_ptr<const dag::Plan> broadcast_plan(const Group& g, const Call& c, int slot, const AlgorithmRow& row);
std::shared_ptr<const dag::Plan> reduce_plan(const Group& g, const Call& c, int slot, const AlgorithmRow& row);
std::shared_ptr<const dag::Plan> allreduce_tree_plan(const Group& g, const Call& c, int slot, const AlgorithmRow& row);

// Mapped plans (compile_mapped.cpp): whether @p c on @p g can run as one
// (named), whether the automatic selection runs it as one, and the plan.
bool mapped_possible(const Group& g, const Call& c);
bool mapped_plan(const Group& g, const Call& c);
std::shared_ptr<const dag::Plan> compile_mapped(const Group& g, const Call& c, int slot, const AlgorithmRow& row);

// The step-schedule and rooted families (compile_symmetric.cpp, compile_rooted.cpp).
std::shared_ptr<const dag::Plan> compile_gather(const Group& g, const Call& c, int slot, const AlgorithmRow& row);
std::shared_ptr<const dag::Plan> compile_scatter(const Group& g, const Call& c, int slot, const AlgorithmRow& row);
std::shared_ptr<const dag::Plan> compile_allgather(const Group& g, const Call& c, int slot, const AlgorithmRow& row);
std::shared_ptr<const dag::Plan> compile_alltoall(const Group& g, const Call& c, int slot, const AlgorithmRow& row);
std::shared_ptr<const dag::Plan> compile_reduce_scatter(const Group& g, const Call& c, int slot,
                                                        const AlgorithmRow& row);
// compile_single_copy.cpp (docs/algorithms.md, "Single copy"): whether the
// group and call allow single copy at all (one-host communicator with
// Group::publish_word, no persistent plan or on_block: a named
// "single-copy" row needs it), whether the automatic selection reads blocks
// of `block` bytes straight out of the owners' user buffers (Call::fast_ok,
// block inside the family's window of the tuning table, or shared buffers),
// and the plans.
bool single_copy_possible(const Group& g, const Call& c);
bool single_copy(const Group& g, const Call& c, std::uint64_t block);
// Whether broadcast @p c of @p bytes on a multi-host communicator reads each
// fragment out of the parent's user buffer across the tree's same-host edges
// (Group::publish_word there: every same-host member readable; automatic
// calls from bcast_host_single_copy_min_bytes to bcast_single_copy_max_bytes).
bool host_single_copy(const Group& g, const Call& c, std::uint64_t bytes);
// What every automatic single-copy plan across hosts needs: publication
// records on a communicator that spans hosts, and a call that left every
// choice to strata with no on_block, compute or persistent direct plan.
bool host_single_copy_eligible(const Group& g, const Call& c);
// Fails @p c (naming @p row's algorithm) unless @p g spans hosts and has publication records.
void require_host_single_copy(const Group& g, const Call& c, const AlgorithmRow& row);
std::shared_ptr<const dag::Plan> compile_allgather_single(const Group& g, const Call& c, int slot);
std::shared_ptr<const dag::Plan> compile_alltoall_single(const Group& g, const Call& c, int slot);
std::shared_ptr<const dag::Plan> compile_broadcast_single(const Group& g, const Call& c, int slot);
std::shared_ptr<const dag::Plan> compile_scatter_single(const Group& g, const Call& c, int slot);
std::shared_ptr<const dag::Plan> compile_gather_single(const Group& g, const Call& c, int slot);
std::shared_ptr<const dag::Plan> compile_reduce_scatter_single(const Group& g, const Call& c, int slot);
// Allreduce not in place, one host: automatic within the tuning table's
// allreduce_single_copy_min_bytes .. max_bytes (ordinary buffers).
bool single_copy_allreduce(const Group& g, const Call& c);
// reduce_scatter_block not in place, one host: automatic with shared
// buffers, or within rs_single_copy_min_bytes .. max_bytes (the whole vector).
bool single_copy_reduce_scatter(const Group& g, const Call& c);
std::shared_ptr<const dag::Plan> compile_allreduce_single(const Group& g, const Call& c, int slot);
// Whether @p c's kind has a single-copy plan (broadcast, scatter, gather,
// allgather, alltoall and reduce_scatter_block not in place).
bool has_single_copy_plan(const Call& c);
// Whether scatter / gather / reduce_scatter_block @p c runs single copy
// automatically: shared buffers and single_copy().
bool shared_single_copy(const Group& g, const Call& c);
// compile_allreduce.cpp: the schedule-based allreduces (rd, rabenseifner, ring, hier*).
std::shared_ptr<const dag::Plan> compile_allreduce(const Group& g, const Call& c, int slot, const AlgorithmRow& row);
// Allreduce across hosts with single copy inside each host ("hier-single-copy"):
// automatic for commutative, not-in-place calls inside
// allreduce_single_copy_min_bytes .. max_bytes when every host holds the same
// number (>= 2) of members and the group has publication records.
bool host_single_copy_allreduce(const Group& g, const Call& c);
std::shared_ptr<const dag::Plan> compile_allreduce_host_single(const Group& g, const Call& c, int slot,
                                                               const AlgorithmRow& row);
// Allgather(v) across hosts with single copy inside each host
// ("hier-single-copy", compile_symmetric.cpp): automatic for loose calls
// whose mean @p block is inside sym_single_copy_min_bytes .. max_bytes, when
// every host holds the same number (>= 2) of members and the group has
// publication records (in place too; not with shared buffers, persistent
// direct plans, on_block or compute).
bool host_single_copy_allgather(const Group& g, const Call& c, std::uint64_t block);
std::shared_ptr<const dag::Plan> compile_allgather_host_single(const Group& g, const Call& c, int slot,
                                                               const AlgorithmRow& row);

}  // namespace strata::coll::cc
