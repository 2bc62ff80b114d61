// Single-copy plans for one-host communicators (docs/algorithms.md, "Single
// copy"): every rank publishes the address of its user buffer in its window's
// flag words (a publish node), each reader waits for that publication (a
// flag_wait with lag 0), copies the blocks it needs straight out of the
// owner's buffer into its own (read_peer: CMA, the kernel copies once, no
// staging in a window), then says so (a flag_set on its reads-done word); an
// owner's instance ends only when every reader of its buffer said so, so the
// buffer stays valid while it is read. No message, no window region, one copy
// per block instead of two.
//
// Cost (n ranks, blocks of B bytes, one host): allgather: n - 1 reads of B per
// rank, (n - 1) B bytes copied per rank, 2 flag waits per peer; alltoall: the
// same with each rank's own column; broadcast (flat): n - 1 readers copy the
// root's B bytes in parallel (the root's memory is read n - 1 times), the root
// copies nothing and waits for n - 1 reads-done flags; scatter: each of the
// n - 1 readers copies its own B out of the root's buffer (the root waits for
// n - 1 reads-done flags); gather: the root reads n - 1 blocks of B, one out
// of each member's buffer (each member waits for the root's reads-done flag).
// reduce_scatter_block: each rank folds its block of the n - 1 others'
// buffers into recv in rank order, straight out of their buffers (n - 1
// reductions of B, no copy with shared buffers; a temporary read per block
// through CMA otherwise).
// Scatter, gather and reduce_scatter_block run single copy only with shared buffers
// (CollOptions::shared_buffers, reads through the mappings) or when named.
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compile_common.hpp"
#include "compile_steps.hpp"

namespace strata::coll::cc {

namespace {

// Every member but this rank.
std::vector<int> others(const Ctx& x) {
  std::vector<int> v;
  for (int r = 0; r < x.g().size(); ++r)
    if (r != x.g().rank) v.push_back(r);
  return v;
}

// Owner's side when every other member reads it (none when @p any is false).
void wait_others(Ctx& x, NodeId pub, bool any) { wait_readers(x, any ? others(x) : std::vector<int>{}, pub); }

// Reader's side of one owner: waits for its publication, reads [off, +dst.len)
// of its first region into @p dst, then says it is done.
void read_owner(Ctx& x, int owner, std::uint64_t off, const Region& dst, const std::vector<NodeId>& start) {
  const std::uint32_t w = publication_record(x);
  const NodeId fw = x.b().flag_wait(x.world(owner), w, 0, start);
  const NodeId rd = x.b().read_peer(x.world(owner), w, 0, off, dst, {fw});
  x.b().flag_set(w + 1, {rd});
}

// One piece of a single-copy reduction in rank order (non-commutative
// operators keep it): acc <- the ranks' pieces at @p peer_off of their
// published region 0, this rank's own from @p own. The first other rank's
// piece is read straight into acc (read_peer) and the rest folded
// (read_peer_fold), the own one reduced locally; rank 0 reads rank 1's piece
// first and reduces its own into it from the left (own OP r1), so that no
// rank copies its own piece and then folds a peer's through a temporary (75 us
// against 40 + 18 for a read and a local reduce at 512 KiB: docs/algorithms.md
// "Allreduce in single copies"). Returns the last node; the fold reads go to
// @p reads.
NodeId fold_in_rank_order(Ctx& x, std::uint32_t w, std::uint64_t peer_off, const Region& acc, const Region& own,
                          const std::function<NodeId(int)>& published, const std::vector<NodeId>& start, NodeId prev,
                          std::vector<NodeId>* reads) {
  const Call& c = x.c();
  const int n = x.g().size();
  const int me = x.g().rank;
  std::vector<int> order;
  if (me == 0 && n > 1) {
    order.push_back(1);
    order.push_back(0);
    for (int r = 2; r < n; ++r) order.push_back(r);
  } else {
    for (int r = 0; r < n; ++r) order.push_back(r);
  }
  bool first = true;
  for (const int r : order) {
    std::vector<NodeId> d = start;
    if (prev != dag::kNoNode) d.push_back(prev);
    if (r == me) {
      if (first)
        prev = x.b().copy(own, acc, d);
      else
        prev = me == 0 ? x.reduce(own, acc, acc, d) : x.reduce(acc, own, acc, d);
      first = false;
      continue;
    }
    d.push_back(published(r));
    if (first)
      prev = x.b().read_peer(x.world(r), w, 0, peer_off, acc, d);
    else if (c.user_op)
      prev = x.b().read_peer_fold(x.world(r), w, 0, peer_off, acc, x.user_index(), d);
    else
      prev = x.b().read_peer_fold(x.world(r), w, 0, peer_off, acc, c.op, c.dtype, d);
    first = false;
    reads->push_back(prev);
  }
  return prev;
}

// Pieces of @p len bytes of a single-copy reduction (single_copy_fold_piece, whole elements).
std::uint64_t fold_piece_bytes(const Ctx& x, std::uint64_t len) {
  const std::uint64_t es = std::max<std::size_t>(x.esize(), 1);
  const std::uint64_t want = std::max<std::uint64_t>(tuning(x.g()).single_copy_fold_piece, es);
  return len == 0 ? 0 : std::min(len, want / es * es);
}

// Scatter (@p scatter) or gather: the root's n blocks of @p bb bytes (the
// scatter's input, the gather's output), its own block on the other side
// unless in place, and every other member's one block.
void declare_rooted(Ctx& x, bool scatter, std::uint64_t bb) {
  const Call& c = x.c();
  const std::uint64_t all = bb * static_cast<std::uint64_t>(x.g().size());
  x.b().require_output_coverage(false);
  const auto many = [&](std::uint64_t len) {
    if (scatter)
      x.b().input(0, len);
    else
      x.b().output(0, len);
  };
  const auto one = [&](std::uint64_t len) {
    if (scatter)
      x.b().output(0, len);
    else
      x.b().input(0, len);
  };
  if (x.g().rank == c.root) {
    many(all);
    if (!c.in_place) one(bb);
  } else {
    one(bb);
  }
  x.b().algorithm("single-copy");
}

}  // namespace

bool single_copy_possible(const Group& g, const Call& c) {
  return g.publish_word != 0 && g.size() >= 2 && !g.spans_hosts() && !c.direct && !c.on_block && !c.compute;
}

bool host_single_copy_eligible(const Group& g, const Call& c) {
  return g.publish_word != 0 && g.spans_hosts() && !c.direct && !c.on_block && !c.compute && c.fast_ok;
}

void require_host_single_copy(const Group& g, const Call& c, const AlgorithmRow& row) {
  if (g.publish_word == 0 || !g.spans_hosts())
    fail(Errc::unsupported, g, c,
         "algorithm '" + row.name +
             "' needs a communicator that spans hosts, window flags and a CMA path to every same-host member "
             "(not under STRATA_SINGLE_COPY=off)");
}

bool host_single_copy(const Group& g, const Call& c, std::uint64_t bytes) {
  // Multi-host communicators: the tree's edges between two ranks of one host
  // read out of the parent's user buffer (compile.cpp, emit_broadcast), for
  // automatic calls from bcast_host_single_copy_min_bytes to bcast_single_copy_max_bytes.
  if (!host_single_copy_eligible(g, c)) return false;
  const Tuning& t = tuning(g);
  return t.bcast_single_copy_max_bytes > 0 && bytes >= t.bcast_host_single_copy_min_bytes &&
         bytes <= t.bcast_single_copy_max_bytes;
}

bool single_copy(const Group& g, const Call& c, std::uint64_t block) {
  // Automatic only when the caller left every choice to strata (Call::fast_ok:
  // no algorithm, tree, fragmentation or direction asked for, loose sync),
  // for blocks inside the tuning table's window for the family.
  if (!single_copy_possible(g, c) || !c.fast_ok) return false;
  const Tuning& t = tuning(g);
  // Shared buffers (Engine::allocate, CollOptions::shared_buffers): every
  // reader maps the owners' buffers, so a read is one memcpy out of the
  // mapping (no system call): single copy wherever the mapped plans (tried
  // first, up to mapped_max_bytes per rank) do not apply.
  if (c.shared_buffers) return true;
  const bool bcast = c.kind == Kind::broadcast;
  const std::uint64_t lo = bcast ? t.bcast_single_copy_min_bytes : t.sym_single_copy_min_bytes;
  const std::uint64_t hi = bcast ? t.bcast_single_copy_max_bytes : t.sym_single_copy_max_bytes;
  return hi > 0 && block >= lo && block <= hi;
}

bool has_single_copy_plan(const Call& c) {
  switch (c.kind) {
    case Kind::broadcast:
    case Kind::scatter:
    case Kind::gather:
    case Kind::allgather:
      return true;
    case Kind::alltoall:
    case Kind::reduce_scatter_block:
      return !c.in_place;
    default:
      return false;
  }
}

bool shared_single_copy(const Group& g, const Call& c) {
  return c.shared_buffers &&
         single_copy(g, c, c.count * (c.user_op ? c.user_op->elem_size : dag::datatype_size(c.dtype)));
}

std::shared_ptr<const dag::Plan> compile_allgather_single(const Group& g, const Call& c, int slot) {
  Ctx x(g, c, slot);
  const int n = g.size();
  const std::size_t es = x.esize();
  std::vector<std::uint64_t> bytes(static_cast<std::size_t>(n)), at(static_cast<std::size_t>(n));
  std::uint64_t recv_total = 0;
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    const std::size_t cnt = c.kind == Kind::allgatherv ? c.counts[ur] : c.count;
    const std::size_t dsp = c.kind == Kind::allgatherv ? c.displs[ur] : ur * c.count;
    bytes[ur] = cnt * es;
    at[ur] = dsp * es;
    recv_total = std::max(recv_total, at[ur] + bytes[ur]);
  }
  const auto me = static_cast<std::size_t>(g.rank);
  x.b().require_output_coverage(false);
  if (!c.in_place) x.b().input(0, bytes[me]);
  x.b().output(0, recv_total);
  x.b().algorithm("single-copy");
  const std::uint32_t w = publication_record(x);
  const std::vector<NodeId> start = entry(x);
  // What the others read of mine: the send buffer, or (in place) my block of recv.
  const Region mine = c.in_place ? dag::out(0, at[me], bytes[me]) : dag::in(0, 0, bytes[me]);
  const NodeId pub = x.b().publish(w, bytes[me] > 0 ? mine : Region{}, Region{}, start);
  std::vector<NodeId> reads;
  for (int k = 1; k < n; ++k) {  // rotated: rank r reads r + 1 first, so no owner is read by all at once
    const int p = (g.rank + k) % n;
    const auto up = static_cast<std::size_t>(p);
    if (bytes[up] == 0) continue;
    const NodeId fw = x.b().flag_wait(x.world(p), w, 0, start);
    reads.push_back(x.b().read_peer(x.world(p), w, 0, 0, dag::out(0, at[up], bytes[up]), {fw}));
  }
  x.b().flag_set(w + 1, reads);
  // The own block after the reads-done flag (node order is the straight
  // run's order): the owners waiting for it need not wait for this copy too,
  // and it overlaps their last reads.
  if (!c.in_place && bytes[me] > 0) x.b().copy(mine, dag::out(0, at[me], bytes[me]), start);
  wait_others(x, pub, bytes[me] > 0);
  finish(x);
  return x.build();
}

std::shared_ptr<const dag::Plan> compile_alltoall_single(const Group& g, const Call& c, int slot) {
  Ctx x(g, c, slot);
  const int n = g.size();
  const std::uint64_t bb = c.count * x.esize();
  const auto me = static_cast<std::uint64_t>(g.rank);
  if (c.kind != Kind::alltoall || c.in_place)
    fail(Errc::unsupported, g, c,
         "algorithm 'single-copy' needs equal blocks and separate send and receive buffers (alltoall, not in place)");
  x.b().require_output_coverage(false);
  x.b().input(0, bb * static_cast<std::uint64_t>(n));
  x.b().output(0, bb * static_cast<std::uint64_t>(n));
  x.b().algorithm("single-copy");
  const std::uint32_t w = publication_record(x);
  const std::vector<NodeId> start = entry(x);
  const NodeId pub = x.b().publish(w, dag::in(0, 0, bb * static_cast<std::uint64_t>(n)), Region{}, start);
  std::vector<NodeId> reads;
  std::vector<int> readers;
  for (int k = 1; k < n && bb > 0; ++k) {
    const int p = (g.rank + k) % n;
    const NodeId fw = x.b().flag_wait(x.world(p), w, 0, start);
    reads.push_back(
        x.b().read_peer(x.world(p), w, 0, me * bb, dag::out(0, static_cast<std::uint64_t>(p) * bb, bb), {fw}));
    readers.push_back(p);
  }
  x.b().flag_set(w + 1, reads);
  // The own block after the reads-done flag, as in allgather.
  if (bb > 0) x.b().copy(dag::in(0, me * bb, bb), dag::out(0, me * bb, bb), start);
  wait_readers(x, readers, pub);
  finish(x);
  return x.build();
}

std::shared_ptr<const dag::Plan> compile_broadcast_single(const Group& g, const Call& c, int slot) {
  Ctx x(g, c, slot);
  const std::uint64_t bytes = c.count * x.esize();
  const bool root = g.rank == c.root;
  x.b().require_output_coverage(false);
  if (root)
    x.b().input(0, bytes);
  else
    x.b().output(0, bytes);
  x.b().algorithm("single-copy");
  const std::uint32_t w = publication_record(x);
  const std::vector<NodeId> start = entry(x);
  // Split (from bcast_single_copy_split_min_bytes, ordinary buffers): the
  // root writes the last `share` bytes of each reader's buffer while the
  // readers read the rest; each reader publishes its buffer, the root's
  // reads-done word says "written" (a root reads nothing).
  const int n = g.size();
  const std::uint64_t split = tuning(g).bcast_single_copy_split_min_bytes;
  const std::uint64_t share =
      split > 0 && bytes >= split && !c.shared_buffers ? bytes / static_cast<std::uint64_t>(n) / 64 * 64 : 0;
  const std::uint64_t head = bytes - share;
  if (root) {
    const NodeId pub = x.b().publish(w, bytes > 0 ? dag::in(0, 0, bytes) : Region{}, Region{}, start);
    if (share > 0) {
      std::vector<NodeId> writes;
      for (int k = 1; k < n; ++k) {  // rotated like the readers: the next rank first
        const int r = (g.rank + k) % n;
        const NodeId fw = x.b().flag_wait(x.world(r), w, 0, start);
        writes.push_back(x.b().write_peer(x.world(r), w, 0, head, dag::in(0, head, share), {fw}));
      }
      x.b().flag_set(w + 1, writes);
    }
    wait_others(x, pub, head > 0);
  } else if (bytes > 0) {
    if (share > 0) {
      const NodeId pub = x.b().publish(w, dag::out(0, 0, bytes), Region{}, start);
      x.b().flag_wait(x.world(c.root), w + 1, 0, {pub});
    }
    if (head > 0) read_owner(x, c.root, 0, dag::out(0, 0, head), start);
  }
  finish(x);
  if (x.b().size() == 0) x.b().nop();
  return x.build();
}

std::shared_ptr<const dag::Plan> compile_scatter_single(const Group& g, const Call& c, int slot) {
  Ctx x(g, c, slot);
  const std::uint64_t bb = c.count * x.esize();
  const int n = g.size();
  const bool root = g.rank == c.root;
  const auto me = static_cast<std::uint64_t>(g.rank);
  declare_rooted(x, true, bb);
  const std::uint32_t w = publication_record(x);
  const std::vector<NodeId> start = entry(x);
  if (root) {
    const NodeId pub =
        x.b().publish(w, bb > 0 ? dag::in(0, 0, bb * static_cast<std::uint64_t>(n)) : Region{}, Region{}, start);
    if (!c.in_place && bb > 0) x.b().copy(dag::in(0, me * bb, bb), dag::out(0, 0, bb), start);
    wait_others(x, pub, bb > 0);
  } else if (bb > 0) {
    read_owner(x, c.root, me * bb, dag::out(0, 0, bb), start);
  }
  finish(x);
  if (x.b().size() == 0) x.b().nop();
  return x.build();
}

std::shared_ptr<const dag::Plan> compile_gather_single(const Group& g, const Call& c, int slot) {
  Ctx x(g, c, slot);
  const std::uint64_t bb = c.count * x.esize();
  const int n = g.size();
  const bool root = g.rank == c.root;
  const auto me = static_cast<std::uint64_t>(g.rank);
  declare_rooted(x, false, bb);
  const std::uint32_t w = publication_record(x);
  const std::vector<NodeId> start = entry(x);
  if (root) {
    std::vector<NodeId> reads;
    if (!c.in_place && bb > 0) reads.push_back(x.b().copy(dag::in(0, 0, bb), dag::out(0, me * bb, bb), start));
    for (int k = 1; k < n && bb > 0; ++k) {
      const int p = (g.rank + k) % n;
      const NodeId fw = x.b().flag_wait(x.world(p), w, 0, start);
      reads.push_back(x.b().read_peer(x.world(p), w, 0, 0, dag::out(0, static_cast<std::uint64_t>(p) * bb, bb), {fw}));
    }
    // One reads-done flag for every member: each waits for the root's.
    if (bb > 0) x.b().flag_set(w + 1, reads);
  } else if (bb > 0) {
    const NodeId pub = x.b().publish(w, dag::in(0, 0, bb), Region{}, start);
    wait_readers(x, {c.root}, pub);
  }
  finish(x);
  if (x.b().size() == 0) x.b().nop();
  return x.build();
}

std::shared_ptr<const dag::Plan> compile_reduce_scatter_single(const Group& g, const Call& c, int slot) {
  Ctx x(g, c, slot);
  const std::uint64_t bb = c.count * x.esize();
  const int n = g.size();
  const auto me = static_cast<std::uint64_t>(g.rank);
  const auto un = static_cast<std::uint64_t>(n);
  if (c.kind != Kind::reduce_scatter_block || c.in_place)
    fail(Errc::unsupported, g, c,
         "algorithm 'single-copy' needs equal blocks and separate send and receive buffers (reduce_scatter_block, "
         "not in place)");
  x.b().require_output_coverage(false);
  x.b().input(0, bb * un);
  x.b().output(0, bb);
  x.b().algorithm("single-copy");
  const std::uint32_t w = publication_record(x);
  const std::vector<NodeId> start = entry(x);
  if (bb == 0 || n < 2) {
    if (bb > 0) x.b().copy(dag::in(0, 0, bb), dag::out(0, 0, bb), start);
    finish(x);
    if (x.b().size() == 0) x.b().nop();
    return x.build();
  }
  const NodeId pub = x.b().publish(w, dag::in(0, 0, bb * un), Region{}, start);
  // recv = the ranks' blocks folded in rank order (non-commutative
  // operators), straight out of their buffers (read_peer_fold: no staging
  // when the buffers are shared), in pieces of single_copy_fold_piece.
  std::vector<NodeId> reads;
  const std::function<NodeId(int)> published = publications(x, w, start);
  const std::uint64_t piece = fold_piece_bytes(x, bb);
  NodeId prev = dag::kNoNode;
  for (std::uint64_t off = 0; off < bb; off += piece) {
    const std::uint64_t k = std::min(piece, bb - off);
    prev = fold_in_rank_order(x, w, me * bb + off, dag::out(0, off, k), dag::in(0, me * bb + off, k), published, start,
                              prev, &reads);
  }
  x.b().flag_set(w + 1, reads);
  wait_readers(x, others(x), pub);
  finish(x);
  return x.build();
}

bool single_copy_reduce_scatter(const Group& g, const Call& c) {
  if (c.kind != Kind::reduce_scatter_block || c.in_place || !single_copy_possible(g, c) || c.direct || c.on_block ||
      c.compute)
    return false;
  if (shared_single_copy(g, c)) return true;  // shared buffers
  // Automatic with ordinary buffers (Call::fast_ok: the ring's name is the decision then).
  if (!c.fast_ok || c.shared_buffers) return false;
  const Tuning& t = tuning(g);
  const std::uint64_t bytes =
      c.count * static_cast<std::uint64_t>(g.size()) * (c.user_op ? c.user_op->elem_size : dag::datatype_size(c.dtype));
  return t.rs_single_copy_max_bytes > 0 && bytes >= t.rs_single_copy_min_bytes && bytes <= t.rs_single_copy_max_bytes;
}

bool single_copy_allreduce(const Group& g, const Call& c) {
  if (c.kind != Kind::allreduce || !single_copy_possible(g, c)) return false;
  // Automatic: the caller left the algorithm to strata (Call::fast_ok; the
  // allreduce's name is already the decision table's rd / rabenseifner /
  // ring then), ordinary buffers, not in place.
  if (!c.fast_ok || c.in_place || c.shared_buffers) return false;
  const Tuning& t = tuning(g);
  const std::uint64_t bytes = c.count * (c.user_op ? c.user_op->elem_size : dag::datatype_size(c.dtype));
  return t.allreduce_single_copy_max_bytes > 0 && bytes >= t.allreduce_single_copy_min_bytes &&
         bytes <= t.allreduce_single_copy_max_bytes;
}

// Allreduce, single copy both ways (docs/algorithms.md, "Allreduce in single
// copies"): rank r owns chunk r of the vector; it folds every rank's chunk r
// into its output in rank order, straight out of their send buffers
// (read_peer / read_peer_fold after their publication), then writes the
// finished chunk into every other rank's output (write_peer into region 1 of
// their publication), then raises its reads-done word ("done with your send
// buffer and your output"); each rank ends after every other's reads-done
// word. Per rank: (n - 1) B / n bytes read, (n - 1) B / n folded and (n - 1)
// B / n written, no staging, every core busy at once.
std::shared_ptr<const dag::Plan> compile_allreduce_single(const Group& g, const Call& c, int slot) {
  Ctx x(g, c, slot);
  const int n = g.size();
  const auto un = static_cast<std::uint64_t>(n);
  const std::uint64_t es = x.esize();
  if (c.kind != Kind::allreduce || c.in_place)
    fail(Errc::unsupported, g, c,
         "algorithm 'single-copy' needs separate send and receive buffers (allreduce, not in place)");
  const std::uint64_t total = c.count * es;
  x.b().require_output_coverage(false);
  x.b().input(0, total);
  x.b().output(0, total);
  x.b().algorithm("single-copy");
  const std::uint32_t w = publication_record(x);
  const std::vector<NodeId> start = entry(x);
  // Chunk r: count / n elements, one more for the first count % n ranks.
  const auto chunk = [&](int r, std::uint64_t* at) {
    const auto ur = static_cast<std::uint64_t>(r);
    const std::uint64_t q = c.count / un, m = c.count % un;
    *at = (ur * q + std::min(ur, m)) * es;
    return (q + (ur < m ? 1 : 0)) * es;
  };
  std::uint64_t at = 0;
  const std::uint64_t len = chunk(g.rank, &at);
  const NodeId pub = x.b().publish(w, total > 0 ? dag::in(0, 0, total) : Region{},
                                   total > 0 ? dag::out(0, 0, total) : Region{}, start);
  const std::function<NodeId(int)> published = publications(x, w, start);
  std::vector<NodeId> done;
  // In pieces of single_copy_fold_piece bytes (whole elements), one after
  // the other: a piece is folded and written out while it is still in this
  // core's cache.
  const std::uint64_t piece = fold_piece_bytes(x, len);
  NodeId prev = dag::kNoNode;
  for (std::uint64_t off = 0; off < len; off += piece) {
    const std::uint64_t k = std::min(piece, len - off);
    const Region acc = dag::out(0, at + off, k);
    prev = fold_in_rank_order(x, w, at + off, acc, dag::in(0, at + off, k), published, start, prev, &done);
    for (int j = 1; j < n; ++j) {  // rotated: the next rank first
      const int r = (g.rank + j) % n;
      prev = x.b().write_peer(x.world(r), w, 1, at + off, acc, {prev, published(r)});
      done.push_back(prev);
    }
  }
  // Without a chunk of its own (count < n) a rank still says so: the others wait for it.
  x.b().flag_set(w + 1, done.empty() ? std::vector<NodeId>{pub} : done);
  wait_readers(x, others(x), pub);
  finish(x);
  return x.build();
}

}  // namespace strata::coll::cc
