// Mapped plans for one-host communicators (docs/algorithms.md, "Mapped
// plans"): the small-message protocol as DAG nodes. Every member's window is
// mapped into every other member's process, so no data or signal message is
// needed: each rank copies what it contributes into its own window slot (a
// copy node), raises its record word for the slot (flag_set: seq + 1), and
// every rank that needs that contribution waits for the word (flag_wait, lag
// 0: one load when the owner was on time) and reads the owner's slot through
// its mapping (a copy or reduce node whose source is the peer's window). A
// window slot is rewritten only after every reader finished the instance that
// read it before (the owner's copy waits on slot_free(reader): the reader's
// end-of-instance flag for the slot shows instance seq - credits), so the
// protocol needs no acknowledgement either. The slots are a mapped area of
// their own at the end of the window (Group::mapped_at), which only mapped
// plans write: a loose instance completes before its readers finished, so a
// window plan's put into (or a pull out of) the regular window slot must
// never land where a mapped reader may still read. Every mapped plan guards
// its write with every member's end flag, whatever the slot's previous
// instance was. The record word is the slot's first word (Group::mapped_word)
// and the contribution follows it in the same cache line: a reader that finds
// the owner on time pays one cache-line transfer for both. The end flags are
// read through this rank's shadows of them (Bindings::flag_shadows): in a
// loop a credit check costs no transfer.
//
// Cost per call (n ranks, B bytes per contribution, one host): one copy of B
// into the own slot (n B for scatter / alltoall / reduce_scatter_block at
// their owners), n - 1 flag loads, and per reader the reads it needs straight
// out of the owners' slots: allreduce / allgather / reduce_scatter_block read
// (n - 1) B per rank, reduce and gather (n - 1) B at the root, broadcast and
// scatter B per non-root. No message, no progress thread on the path: a rank
// whose peers are on time completes the call inside the call itself. The
// fold of a reduction is in rank order (0 op 1 op 2 ...), so non-commutative
// operators are correct.
#include <algorithm>
#include <string>
#include <vector>

#include "compile_common.hpp"
#include "compile_steps.hpp"

namespace strata::coll::cc {

namespace {

// Record word of this instance's slot (the owner raises it when its slot
// holds the contribution): the slot's first word, in the contribution's line.
std::uint32_t record_word(const Ctx& x) {
  return x.g().mapped_word + static_cast<std::uint32_t>(x.g().mapped_slot_bytes / 4) * x.slot();
}

constexpr std::uint64_t kHeader = Group::kMappedHeader;

// This rank's slot of its mapped area (outputs[2]), past the record word.
Region mine(std::uint64_t off, std::uint64_t len) { return dag::out(2, kHeader + off, len); }

// Peer r's slot of its mapped area, read through this process's mapping of
// r's window (peer buffer (r, 0), PeerKey::mapped).
Region theirs(Ctx& x, int r, std::uint64_t off, std::uint64_t len) {
  const Group& g = x.g();
  x.b().peer_buffer(x.world(r), 0, g.mapped_at + g.mapped_slot_bytes * static_cast<std::uint64_t>(g.mapped_ring()));
  return dag::peer(x.world(r), 0, g.mapped_at + g.mapped_slot_bytes * x.slot() + kHeader + off, len);
}

// Bytes one rank writes into its own slot for @p c (B = count x element size).
std::uint64_t slot_need(const Group& g, const Call& c, std::uint64_t block) {
  const auto n = static_cast<std::uint64_t>(g.size());
  switch (c.kind) {
    case Kind::scatter:
    case Kind::alltoall:
    case Kind::reduce_scatter_block:
      return n * block;
    default:
      return block;
  }
}

bool kind_supported(const Call& c) {
  switch (c.kind) {
    case Kind::barrier:
    case Kind::broadcast:
    case Kind::reduce:
    case Kind::allreduce:
    case Kind::allgather:
      return true;
    case Kind::gather:
    case Kind::scatter:
      return true;  // in place at the root only: the decision must not depend on it
    case Kind::alltoall:
    case Kind::reduce_scatter_block:
      return !c.in_place;  // in place on every rank
    default:
      return false;  // v-variants and reduce_scatter: the step and tree plans
  }
}

std::vector<int> others(const Group& g) {
  std::vector<int> v;
  for (int r = 0; r < g.size(); ++r)
    if (r != g.rank) v.push_back(r);
  return v;
}

// Copies @p src into the own slot at @p off once every member finished the
// slot's previous instance (its readers may have been any of them), then
// raises the record word; returns the copy (kNoNode when nothing is copied).
// @p raised (optional): the record word's flag_set.
NodeId offer(Ctx& x, const Region& src, std::uint64_t off, NodeId* raised = nullptr) {
  std::vector<NodeId> free;
  for (int r : others(x.g())) free.push_back(x.slot_free(r));
  const NodeId guard = free.size() == 1 ? free[0] : x.b().nop(std::move(free));
  const NodeId put = src.len > 0 ? x.b().copy(src, mine(off, src.len), {guard}) : dag::kNoNode;
  const NodeId set = x.b().flag_set(record_word(x), {put != dag::kNoNode ? put : guard});
  if (raised != nullptr) *raised = set;
  return put;
}

// Rank-order fold of the n contributions into @p dst: contribution r is peer
// r's slot at @p off (this rank's own: @p self after @p self_ready).
void fold(Ctx& x, const Region& self, NodeId self_ready, std::uint64_t off, const Region& dst) {
  const int n = x.g().size();
  const std::uint64_t len = dst.len;
  std::vector<NodeId> waits(static_cast<std::size_t>(n), dag::kNoNode);
  auto operand = [&](int r) { return r == x.me() ? self : theirs(x, r, off, len); };
  auto wait_of = [&](int r) {
    if (r == x.me()) return self_ready;
    NodeId& w = waits[static_cast<std::size_t>(r)];
    if (w == dag::kNoNode) w = x.b().flag_wait(x.world(r), record_word(x), 0);
    return w;
  };
  std::vector<NodeId> d;
  for (NodeId a : {wait_of(0), wait_of(1), self_ready})
    if (a != dag::kNoNode && std::find(d.begin(), d.end(), a) == d.end()) d.push_back(a);
  NodeId prev = x.reduce(operand(0), operand(1), dst, d);
  for (int r = 2; r < n; ++r) {
    std::vector<NodeId> dr{prev};
    if (wait_of(r) != dag::kNoNode) dr.push_back(wait_of(r));
    prev = x.reduce(dst, operand(r), dst, dr);
  }
}

}  // namespace

bool mapped_possible(const Group& g, const Call& c) {
  if (g.mapped_word == 0 || g.size() < 2 || c.direct || c.on_block || c.compute || c.entry_all || c.exit_all)
    return false;
  if (!kind_supported(c) || c.count > (std::size_t{1} << 30)) return false;
  const std::size_t es = c.user_op ? c.user_op->elem_size : dag::datatype_size(c.dtype);
  const std::uint64_t block = c.kind == Kind::barrier ? 0 : c.count * es;
  return slot_need(g, c, block) + kHeader <= g.mapped_slot_bytes;
}

bool mapped_plan(const Group& g, const Call& c) {
  if (!mapped_possible(g, c)) return false;
  const std::size_t es = c.user_op ? c.user_op->elem_size : dag::datatype_size(c.dtype);
  const std::uint64_t block = c.kind == Kind::barrier ? 0 : c.count * es;
  // Automatic only when the caller left every choice to strata (Call::fast_ok:
  // no algorithm, tree, fragmentation or direction asked for, loose sync; the
  // engine may have resolved the name from the decision table already).
  // The bytes one rank writes into its slot, as the fast path's limit counts
  // them (n blocks at the owners of scatter, alltoall, reduce_scatter_block).
  if (!c.fast_ok) return false;
  std::uint64_t limit = tuning(g).mapped_max_bytes;
  if (c.kind == Kind::reduce_scatter_block) limit = std::max(limit, tuning(g).mapped_rs_max_bytes);
  if (c.shared_buffers && has_single_copy_plan(c)) limit = std::min(limit, tuning(g).shared_mapped_max_bytes);
  // Ordinary buffers: a broadcast, allgather or alltoall block inside the
  // table's single-copy window reads straight out of the owner's buffer
  // (one copy) rather than through the owner's slot (two): the window is the
  // narrower decision, measured per family (strata-tune; on the session-22 VM
  // single copy won from 8 KiB: 16 KiB broadcast 1.8 vs 2.9 us mapped,
  // allgather 2.5 vs 3.3, alltoall 2.5 vs 4.9).
  if (!c.shared_buffers && (c.kind == Kind::broadcast || c.kind == Kind::allgather || c.kind == Kind::alltoall) &&
      single_copy(g, c, block))
    return false;
  // The single-copy reductions' windows alike (allreduce, reduce_scatter_block
  // not in place: 64 KiB reduce_scatter 3.6 us single copy vs 4.8-5.0 mapped).
  if (!c.shared_buffers && (single_copy_allreduce(g, c) || single_copy_reduce_scatter(g, c))) return false;
  return slot_need(g, c, block) <= limit;
}

// Over ~80 lines: one switch with a short case per collective.
std::shared_ptr<const dag::Plan> compile_mapped(const Group& g, const Call& c, int slot, const AlgorithmRow& row) {
  if (!mapped_possible(g, c))
    fail(Errc::unsupported, g, c,
         "algorithm 'mapped' needs a communicator whose members share this host with mapped windows and window "
         "flags (not under STRATA_WINDOW_FLAGS=off), loose synchronization, a collective other than the v-variants "
         "and reduce_scatter (alltoall and reduce_scatter_block not in place), and data that fits "
         "a window slot (STRATA_SLOT_BYTES)");
  Ctx x(g, c, slot);
  x.b().require_output_coverage(false);
  x.b().algorithm(row.name);
  x.b().output(2, g.mapped_slot_bytes);
  const int n = g.size();
  const int me = g.rank;
  const std::uint64_t B = c.kind == Kind::barrier ? 0 : c.count * x.esize();
  const std::uint32_t w = record_word(x);
  const std::vector<int> all = others(g);
  auto wait_for = [&](int r) { return x.b().flag_wait(x.world(r), w, 0); };

  switch (c.kind) {
    case Kind::barrier:
      x.b().flag_set(w);
      for (int r : all) wait_for(r);
      break;
    case Kind::broadcast: {
      // In two halves from mapped_bcast_split_min_bytes: the record word
      // announces the first, the root's end-of-instance flag (word `slot`,
      // raised after every node of its instance, lag 0) the second, so a
      // reader copies the first half while the root copies the second.
      const std::uint64_t split = tuning(g).mapped_bcast_split_min_bytes;
      const std::uint64_t h1 = split > 0 && B >= split && B >= 2 * x.esize() ? B / 2 / x.esize() * x.esize() : B;
      if (me == c.root) {
        x.b().input(0, B);
        NodeId raised = dag::kNoNode;
        offer(x, dag::in(0, 0, h1), 0, &raised);
        if (h1 < B) x.b().copy(dag::in(0, h1, B - h1), mine(h1, B - h1), {raised});  // after the announcement
      } else {
        x.b().output(0, B);
        if (B > 0) x.b().copy(theirs(x, c.root, 0, h1), dag::out(0, 0, h1), {wait_for(c.root)});
        if (h1 < B) {
          const NodeId ended = x.b().flag_wait(x.world(c.root), static_cast<std::uint32_t>(x.slot()), 0);
          x.b().copy(theirs(x, c.root, h1, B - h1), dag::out(0, h1, B - h1), {ended});
        }
      }
      break;
    }
    case Kind::reduce:
    case Kind::allreduce: {
      const bool all_get = c.kind == Kind::allreduce;
      const bool gets = all_get || me == c.root;
      const bool self_in_out = c.in_place && gets;
      if (!self_in_out) x.b().input(0, B);
      if (gets) x.b().output(0, B);
      const Region own = self_in_out ? dag::out(0, 0, B) : dag::in(0, 0, B);
      const NodeId put = offer(x, own, 0);
      if (gets && B > 0) fold(x, mine(0, B), put, 0, dag::out(0, 0, B));
      break;
    }
    case Kind::allgather: {
      if (!c.in_place) x.b().input(0, B);
      x.b().output(0, B * static_cast<std::uint64_t>(n));
      const Region own = c.in_place ? dag::out(0, B * static_cast<std::uint64_t>(me), B) : dag::in(0, 0, B);
      offer(x, own, 0);
      if (!c.in_place && B > 0) x.b().copy(own, dag::out(0, B * static_cast<std::uint64_t>(me), B));
      for (int k = 1; k < n && B > 0; ++k) {  // rotated: rank r reads r + 1 first, no slot read by all at once
        const int r = (me + k) % n;
        x.b().copy(theirs(x, r, 0, B), dag::out(0, B * static_cast<std::uint64_t>(r), B), {wait_for(r)});
      }
      break;
    }
    case Kind::gather:
      if (!(c.in_place && me == c.root)) x.b().input(0, B);
      if (me == c.root) {
        x.b().output(0, B * static_cast<std::uint64_t>(n));
        if (B > 0 && !c.in_place) x.b().copy(dag::in(0, 0, B), dag::out(0, B * static_cast<std::uint64_t>(me), B));
        for (int k = 1; k < n && B > 0; ++k) {
          const int r = (me + k) % n;
          x.b().copy(theirs(x, r, 0, B), dag::out(0, B * static_cast<std::uint64_t>(r), B), {wait_for(r)});
        }
      } else {
        offer(x, dag::in(0, 0, B), 0);
      }
      break;
    case Kind::scatter:
      if (!(c.in_place && me == c.root)) x.b().output(0, B);
      if (me == c.root) {
        x.b().input(0, B * static_cast<std::uint64_t>(n));
        offer(x, dag::in(0, 0, B * static_cast<std::uint64_t>(n)), 0);
        if (B > 0 && !c.in_place) x.b().copy(dag::in(0, B * static_cast<std::uint64_t>(me), B), dag::out(0, 0, B));
      } else if (B > 0) {
        x.b().copy(theirs(x, c.root, B * static_cast<std::uint64_t>(me), B), dag::out(0, 0, B), {wait_for(c.root)});
      }
      break;
    case Kind::alltoall: {
      const std::uint64_t total = B * static_cast<std::uint64_t>(n);
      x.b().input(0, total);
      x.b().output(0, total);
      offer(x, dag::in(0, 0, total), 0);
      if (B > 0)
        x.b().copy(dag::in(0, B * static_cast<std::uint64_t>(me), B),
                   dag::out(0, B * static_cast<std::uint64_t>(me), B));
      for (int k = 1; k < n && B > 0; ++k) {
        const int r = (me + k) % n;
        x.b().copy(theirs(x, r, B * static_cast<std::uint64_t>(me), B),
                   dag::out(0, B * static_cast<std::uint64_t>(r), B), {wait_for(r)});
      }
      break;
    }
    case Kind::reduce_scatter_block: {
      const std::uint64_t total = B * static_cast<std::uint64_t>(n);
      x.b().input(0, total);
      x.b().output(0, B);
      const NodeId put = offer(x, dag::in(0, 0, total), 0);
      if (B > 0)
        fold(x, mine(B * static_cast<std::uint64_t>(me), B), put, B * static_cast<std::uint64_t>(me),
             dag::out(0, 0, B));
      break;
    }
    default:
      fail(Errc::internal, g, c, "mapped plan for an unsupported kind");
  }
  if (x.b().size() == 0) x.b().nop();
  // Compiled for mapped slot = credit slot; the instance's own slot (output 2)
  // is bound per start, and the peers' slots and the record words move with
  // it (Group::mapped_slots, dag::Bindings::shift).
  for (NodeId i = 0; i < x.b().size(); ++i) {
    const dag::Node& nd = x.b().node(i);
    const bool peer_read = nd.src.buf.kind == dag::BufferKind::peer || nd.src2.buf.kind == dag::BufferKind::peer;
    if ((nd.kind == dag::NodeKind::copy || nd.kind == dag::NodeKind::reduce) && peer_read)
      x.b().relative(i, dag::kRelPeerRegions);
    if ((nd.kind == dag::NodeKind::flag_wait || nd.kind == dag::NodeKind::flag_set) && nd.slot == w)
      x.b().relative(i, dag::kRelFlagWord);
  }
  return x.build();
}

}  // namespace strata::coll::cc

namespace strata::coll {

std::size_t mapped_slot_bytes(std::uint64_t mapped_max_bytes, int members, std::size_t slot_bytes) {
  if (members < 2) return 0;
  // Room for the widest call (scatter, alltoall, reduce_scatter_block: one block per member).
  const std::uint64_t block = std::max<std::uint64_t>(mapped_max_bytes, 4096);
  const std::uint64_t want = block * static_cast<std::uint64_t>(members) + 64;  // + the record's line
  return static_cast<std::size_t>((std::min<std::uint64_t>(want, slot_bytes) + 63) / 64 * 64);
}

}  // namespace strata::coll
