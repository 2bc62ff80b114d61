// The oneTBB executor: what each node kind does when it runs (copies,
// reductions, posts, flags, publications, reads and writes of peers).
// Executor::Impl::run is called from the scheduler (executor.cpp) once per
// node; it was an out-of-line function there already (never inlined into
// run_work / run_straight), so the call across files costs what it did.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "executor_impl.hpp"
#include "strata/dag/reduce.hpp"
#include "strata/detail/tsan.hpp"
#include "strata/transport/copy.hpp"

namespace strata {
namespace dag {

// ------------------------------------------------------------ running nodes
// Executes node @p id; returns true when it finished synchronously.
// Over ~80 lines: the hot per-node switch, one case per node kind, kept in one function for speed.
bool Executor::Impl::run(Instance* in, NodeId id) {
  if (in->failed.load(std::memory_order_acquire)) return true;
  const Plan& p = *in->plan;
  const Node& nd = p.nodes()[id];
  // Counted while it runs when it takes a while (Executor::cores_busy): a
  // waiter then sleeps instead of spinning on the core this node needs.
  // Only the data kinds below construct one (a flag or a small copy pays a
  // test, not the counter).
  struct Mark {
    std::atomic<int>* n;
    explicit Mark(std::atomic<int>* c) : n(c) {
      if (n != nullptr) n->fetch_add(1, std::memory_order_relaxed);
    }
    ~Mark() {
      if (n != nullptr) n->fetch_sub(1, std::memory_order_relaxed);
    }
    Mark(const Mark&) = delete;
    Mark& operator=(const Mark&) = delete;
  };
  std::atomic<int>* const busy = nd.dst.len >= kBusyBytes ? &working : nullptr;
  switch (nd.kind) {
    case NodeKind::nop:
    case NodeKind::wait:
      return true;
    case NodeKind::copy: {
      if (nd.src.len == 0) return true;
      const Mark mark(busy);
      if (nd.streaming)
        transport::stream_copy(addr(in, id, 2, nd.dst), operand(in, id, 0, nd.src, nd), nd.src.len);
      else
        std::memmove(addr(in, id, 2, nd.dst), operand(in, id, 0, nd.src, nd), nd.src.len);
      return true;
    }
    case NodeKind::reduce: {
      const Mark mark(busy);
      unsigned char* d = addr(in, id, 2, nd.dst);
      const unsigned char* a = operand(in, id, 0, nd.src, nd);
      const unsigned char* b = operand(in, id, 1, nd.src2, nd);
      if (nd.user_op >= 0) {
        user_reduce(in, id, a, b, d);
      } else {
        reduce_kernel(nd.op, nd.dtype)(a, b, d, nd.dst.len / datatype_size(nd.dtype));
      }
      return true;
    }
    case NodeKind::compute: {
      const Mark mark(&working);
      run_compute(in, id, nd);
      return true;
    }
    case NodeKind::flag_set:
      set_flag(in, nd);
      return true;
    case NodeKind::publish:
      publish(in, id, nd);
      return true;
    case NodeKind::read_peer: {
      const Mark mark(busy);
      if (nd.dst.len > 0 && publication_mapped(in, id, nd)) run_read_peer(in, id, nd);
      return true;
    }
    case NodeKind::write_peer: {
      const Mark mark(busy);
      if (nd.src.len > 0 && publication_mapped(in, id, nd)) run_write_peer(in, id, nd);
      return true;
    }
    case NodeKind::flag_wait:
      if (flag_ready(in, nd)) return true;  // the peer was on time: one load, nothing else
      wait_flag(in, id, nd);                // the window protocol (executor_window.cpp)
      return false;                         // poll() releases it
    case NodeKind::put:
    case NodeKind::get:
    case NodeKind::put_with_signal:
    case NodeKind::signal:
      break;
  }
  return post(in, id, nd);
}

// The transport kinds of run(): posts the operation; false (its completion
// releases the node) unless the transport refused it (the instance fails).
bool Executor::Impl::post(Instance* in, NodeId id, const Node& nd) {
  void* ctx = &in->nodes[id];
  Status st;
  switch (nd.kind) {
    case NodeKind::put:
      st = tp.put(nd.peer, addr(in, id, 0, nd.src), nd.src.len, rkey(in, id, 2), nd.dst.offset, ctx);
      break;
    case NodeKind::get:
      st = tp.get(nd.peer, addr(in, id, 2, nd.dst), nd.dst.len, rkey(in, id, 0), nd.src.offset, ctx);
      break;
    case NodeKind::put_with_signal:
      st = tp.put_with_signal(nd.peer, addr(in, id, 0, nd.src), nd.src.len, rkey(in, id, 2), nd.dst.offset,
                              signal_payload(in, nd), ctx);
      break;
    case NodeKind::signal:
      st = tp.signal(nd.peer, signal_payload(in, nd), ctx);
      break;
    default:
      st = Status(Errc::internal, "not a transport node");
      break;
  }
  if (!st) {
    fail(in, Status(st.code(), in->plan->describe(id) + ": post rejected: " + st.message()));
    return true;
  }
  return false;  // completion releases it
}

// compute: the plan's callable; an exception fails the call on every member.
void Executor::Impl::run_compute(Instance* in, NodeId id, const Node& nd) {
  const Plan& p = *in->plan;
  ComputeArgs args;
  args.data = nd.src.len > 0 ? addr(in, id, 0, nd.src) : nullptr;
  args.len = nd.src.len;
  args.seq = in->seq;
  args.comm = in->comm;
  args.node = id;
  try {
    if (nd.compute > kBoundCompute) {
      p.compute_fns()[static_cast<std::size_t>(nd.compute)](args);
    } else if (in->compute != nullptr && *in->compute) {
      (*in->compute)(static_cast<std::uint32_t>(kBoundCompute - nd.compute), args);
    } else {
      fail_soft(in,
                Status(Errc::invalid_argument,
                       p.describe(id) + ": a bound compute node, but the start bound no callable (Bindings::compute)"));
    }
  } catch (const Error& e) {
    fail_soft(in, Status(e.errc(), p.describe(id) + ": " + e.what()));
  } catch (const std::exception& e) {
    fail_soft(in, Status(Errc::internal, p.describe(id) + ": compute callable threw: " + e.what()));
  } catch (...) {
    fail_soft(in, Status(Errc::internal, p.describe(id) + ": compute callable threw"));
  }
}

// read_peer (its publication mapped): a copy, or a fold, out of the peer's region.
void Executor::Impl::run_read_peer(Instance* in, NodeId id, const Node& nd) {
  const Plan& p = *in->plan;
  // The flag_wait before this node acquired the publication; the words hold the owner's address.
  const std::uint64_t base = published_word(in, nd, 2 + 2 * nd.src.buf.id);
  // The first region's handle (publish): through the reader's mapping when it has one.
  std::uint64_t h = nd.src.buf.id == 0 ? published_word(in, nd, 6) : 0;
  if (h != 0) h += nd.src.offset;
  unsigned char* d = addr(in, id, 2, nd.dst);
  if (nd.fold) {
    fold_peer(in, id, nd, d, h, base + nd.src.offset);
    return;
  }
  Status rs(Errc::unsupported, "");
  if (h != 0) rs = tp.read_peer(nd.peer, d, h, nd.dst.len);
  if (rs.code() == Errc::unsupported)  // no handle, or not mapped here: CMA
    rs = tp.read_peer(nd.peer, d, base + nd.src.offset, nd.dst.len);
  if (!rs) fail(in, Status(rs.code(), p.describe(id) + ": " + rs.message()));
}

// write_peer (its publication mapped): CMA into the peer's region.
void Executor::Impl::run_write_peer(Instance* in, NodeId id, const Node& nd) {
  const Plan& p = *in->plan;
  // The flag_wait before this node acquired the publication: the peer's address, then CMA into it.
  const std::uint64_t base = published_word(in, nd, 2 + 2 * nd.dst.buf.id);
  const Status ws = tp.write_peer(nd.peer, addr(in, id, 0, nd.src), base + nd.dst.offset, nd.src.len);
  if (!ws) fail(in, Status(ws.code(), p.describe(id) + ": " + ws.message()));
}

// read_peer / write_peer: whether the peer's publication record is mapped
// here (else the instance fails, naming the node and the peer).
bool Executor::Impl::publication_mapped(Instance* in, NodeId id, const Node& nd) {
  if (in->flags != nullptr && in->flags[nd.peer] != nullptr) return true;
  fail(in, Status(Errc::invalid_argument, in->plan->describe(id) + ": flag words of rank " + std::to_string(nd.peer) +
                                              " are not mapped here (" + to_string(nd.kind) + ")"));
  return false;
}

// The 64-bit value in words @p at, @p at + 1 of the peer's publication record (low, high).
std::uint64_t Executor::Impl::published_word(const Instance* in, const Node& nd, std::uint32_t at) {
  const std::atomic<std::uint32_t>* w = in->flags[nd.peer] + nd.slot + at;
  return std::uint64_t{w[0].load(std::memory_order_relaxed)} | std::uint64_t{w[1].load(std::memory_order_relaxed)}
                                                                   << 32;
}

// read_peer with fold: d = d OP the peer's bytes, straight out of this
// process's mapping of the peer's region (handle @p h), else out of a
// temporary filled by read_peer of the plain address @p raw.
void Executor::Impl::fold_peer(Instance* in, NodeId id, const Node& nd, unsigned char* d, std::uint64_t h,
                               std::uint64_t raw) {
  const Plan& p = *in->plan;
  const std::size_t len = nd.dst.len;
  const void* src = h != 0 ? tp.mapped_peer(nd.peer, h, len) : nullptr;
  const std::size_t es =
      nd.user_op < 0 ? datatype_size(nd.dtype) : p.user_ops()[static_cast<std::size_t>(nd.user_op)].elem_size;
  if (src != nullptr) {
    fold_piece(in, id, nd, d, src, len / es);
    return;
  }
  // Through a temporary in pieces of kFoldPiece bytes (whole elements):
  // read, fold, next; the piece stays in this core's cache between the two
  // (a whole 512 KiB temporary did not: docs/algorithms.md "Allreduce in
  // single copies").
  thread_local std::vector<unsigned char> tmp;
  const std::size_t piece = std::max<std::size_t>(es, kFoldPiece / es * es);
  tmp.resize(std::min(len, piece));
  for (std::size_t off = 0; off < len; off += piece) {
    const std::size_t k = std::min(piece, len - off);
    const Status rs = tp.read_peer(nd.peer, tmp.data(), raw + off, k);
    if (!rs) {
      fail(in, Status(rs.code(), p.describe(id) + ": " + rs.message()));
      return;
    }
    if (!fold_piece(in, id, nd, d + off, tmp.data(), k / es)) return;
  }
}

// d = d OP src over @p elems elements (node @p id's operator); false when a user operator threw.
bool Executor::Impl::fold_piece(Instance* in, NodeId id, const Node& nd, unsigned char* d, const void* src,
                                std::size_t elems) {
  if (nd.user_op < 0) {
    reduce_kernel(nd.op, nd.dtype)(d, src, d, elems);
    return true;
  }
  return user_reduce(in, id, d, src, d, elems);
}

// d = a OP b with node @p id's user operator over its dst length; an
// exception fails the instance naming the operator (never escapes).
bool Executor::Impl::user_reduce(Instance* in, NodeId id, const void* a, const void* b, void* d) {
  const Plan& p = *in->plan;
  const Node& nd = p.nodes()[id];
  return user_reduce(in, id, a, b, d, nd.dst.len / p.user_ops()[static_cast<std::size_t>(nd.user_op)].elem_size);
}

bool Executor::Impl::user_reduce(Instance* in, NodeId id, const void* a, const void* b, void* d, std::size_t elems) {
  const Plan& p = *in->plan;
  const Node& nd = p.nodes()[id];
  const UserReduce& u = p.user_ops()[static_cast<std::size_t>(nd.user_op)];
  try {
    u.fn(a, b, d, elems);
    return true;
  } catch (const std::exception& e) {
    fail_soft(in, Status(Errc::invalid_argument,
                         p.describe(id) + ": argument 'op': user reduction '" + u.name + "' threw: " + e.what()));
  } catch (...) {
    fail_soft(in, Status(Errc::invalid_argument, p.describe(id) + ": argument 'op': user reduction '" + u.name +
                                                     "' threw an exception that is not a std::exception"));
  }
  return false;
}

// flag_set: publish seq + 1, then nudge the same-host ranks that wait on it.
// @p raise: only move the word forward (a failed instance settling after
// later instances of the communicator may already have raised it).
void Executor::Impl::set_flag(Instance* in, const Node& nd, bool raise) {
  if (in->flags == nullptr) return;  // unbound: no peer can wait on this rank's flags
  std::atomic<std::uint32_t>* blk = in->flags[my_rank];
  if (blk == nullptr) return;
  const std::uint32_t value = (in->seq + 1) & kSeqMask;
  strata::detail::tsan_release_to_peers();  // what the peers do once they see it (strata/detail/tsan.hpp)
  if (raise)
    raise_to(blk[flag_word(in, nd)], value);
  else
    blk[flag_word(in, nd)].store(value, std::memory_order_release);
  // Words only some plans raise (mapped record, publication): kept recent
  // so that a half-range "at or after" never mistakes one written 2^27
  // instances ago (or never) for a raised one. One load when recent.
  for (std::size_t k = 0; k < nd.refresh.size(); ++k) {
    const std::uint32_t w = k == 0 && (nd.relative & kRelRefreshFirst) != 0
                                ? nd.refresh[0] + static_cast<std::uint32_t>(in->shift / 4)
                                : nd.refresh[k];
    const std::uint32_t v = blk[w].load(std::memory_order_relaxed);
    if (((value - v) & kSeqMask) >= kRefreshAge) blk[w].store(value, std::memory_order_release);
  }
  // A mapped record word (kRelFlagWord) is always followed by its
  // instance's end flag_set, and nothing between them waits on a rank that
  // parked waiting for the record (every mapped plan raises its record
  // before it waits on another's): that end flag_set does the fence and
  // the nudge and grant checks for both. Here the fence would wait for the
  // store of the record's line (owned by a reader until this store) and of
  // the contribution in it. Measured 2 ranks, one per core, three
  // alternating rounds: barrier 0.400-0.407 -> 0.372-0.376 us, allreduce 64 B
  // 0.496-0.537 -> 0.478-0.509 (docs/algorithms.md, "Mapped plans"). The
  // store itself is a release store: readers see the data before it.
  if ((nd.relative & kRelFlagWord) != 0) return;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // The grants go out once the instance completed (complete()): a send costs
  // microseconds, which the caller's call-to-ready need not include.
  if (!nd.grants.empty()) in->granting = static_cast<NodeId>(&nd - in->plan->nodes().data());
  if (ngrant_requests.load(std::memory_order_seq_cst) > 0) answer_requests();
  if (blk[in->flag_wake].load(std::memory_order_seq_cst) == 0) return;
  blk[in->flag_wake].store(0, std::memory_order_seq_cst);
  for (int r = 0; r < nranks; ++r) {
    std::atomic<std::uint32_t>& w = blk[in->flag_wake + 1 + static_cast<std::uint32_t>(r)];
    if (w.load(std::memory_order_relaxed) == 0 || w.exchange(0, std::memory_order_acq_rel) == 0) continue;
    if (opts.nudge_payload != 0) (void)tp.signal(r, opts.nudge_payload, opts.nudge_context);
  }
}

// publish: the addresses of the two regions, then the flag (set_flag's release orders them).
void Executor::Impl::publish(Instance* in, NodeId id, const Node& nd) {
  if (in->flags == nullptr || in->flags[my_rank] == nullptr) return;  // no peer can read them
  std::atomic<std::uint32_t>* blk = in->flags[my_rank];
  const std::uint64_t a = nd.src.len > 0 ? reinterpret_cast<std::uintptr_t>(addr(in, id, 0, nd.src)) : 0;
  const std::uint64_t b = nd.src2.len > 0 ? reinterpret_cast<std::uintptr_t>(addr(in, id, 1, nd.src2)) : 0;
  blk[nd.slot + 2].store(static_cast<std::uint32_t>(a), std::memory_order_relaxed);
  blk[nd.slot + 3].store(static_cast<std::uint32_t>(a >> 32), std::memory_order_relaxed);
  blk[nd.slot + 4].store(static_cast<std::uint32_t>(b), std::memory_order_relaxed);
  blk[nd.slot + 5].store(static_cast<std::uint32_t>(b >> 32), std::memory_order_relaxed);
  // The first region's handle when it lies in a shared region the peers map
  // (Engine::allocate): their reads then copy out of their mappings.
  std::uint64_t h = 0;
  transport::RemoteKey key;
  if (a != 0 && tp.shared_key(reinterpret_cast<const void*>(a), nd.src.len, &key)) h = transport::region_handle(key, a);
  blk[nd.slot + 6].store(static_cast<std::uint32_t>(h), std::memory_order_relaxed);
  blk[nd.slot + 7].store(static_cast<std::uint32_t>(h >> 32), std::memory_order_relaxed);
  set_flag(in, nd);
}

}  // namespace dag
}  // namespace strata
