// Private to the executor's translation units (dag/src/executor*.cpp,
// trace_chrome.cpp): Executor::Impl and the types of an instance in flight.
// The .cpp files carve it by concern:
//   executor.cpp          scheduling: start, node states, tasks, shards, instance end
//   executor_nodes.cpp    what each node kind does (copies, reductions, flags, posts)
//   executor_window.cpp   the window protocol: flag waits, nudges, grants, drain
//                         watermarks, vouching (Executor::bind_flags)
//   executor_abort.cpp    failed calls (notice / ack / settle) and dead peers
//   executor_pending.cpp  the pending-call report (Executor::pending_report)
//   trace_chrome.cpp      the Chrome-trace writer (an ExecutorObserver, trace.hpp)
// Hot helpers (flag checks, addresses, pin / unpin, the fast paths of the
// window protocol) are defined here, inline, so that every caller keeps them
// inlined as when all of this was one file.
//
// Instance lifetime: `remaining` counts unfinished nodes plus one token per
// temporary pin (start, cancel, signal delivery, peer failure). The thread
// that drops it to zero unregisters the instance, calls its DoneFn and frees
// it. A thread counts the nodes it finished in one subtraction when its work
// on the instance ends (Work::finished) and touches instance memory only
// before it, so the nodes it finished keep the instance alive until then.
//
// Failure: the first failure records the cause, then every not-yet-run node is
// skipped (counted as done without effect) and wait nodes are released from
// their outstanding signals, so the instance drains as soon as the operations
// already posted have completed (the transport guarantees one completion each).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include "strata/dag/executor.hpp"
#include "strata/detail/spinlock.hpp"
#include "trace.hpp"

namespace strata {
namespace dag {
namespace exec {

struct Instance;

struct NodeState {
  std::atomic<std::int32_t> deps{0};
  std::atomic<std::int32_t> sig{0};  // wait nodes: signals still expected
  Instance* inst = nullptr;
};

struct BufBind {
  unsigned char* base = nullptr;  // local buffers
  transport::RemoteKey key;       // peer buffers
};

// flag_set's refresh words (Node::refresh) are rewritten once they fall this
// many instances behind (far from the half-range limit of 2^27).
inline constexpr std::uint32_t kRefreshAge = 1u << 20;

// Half-range "at or after" on flag values and sequence numbers (modulo 2^28).
inline bool reached(std::uint32_t have, std::uint32_t need) { return ((have - need) & kSeqMask) < (kSeqMask >> 1); }

// Raises @p w to @p value unless it is already at or after it (grants and
// watermarks only ever move a copied flag word forward).
inline void raise_to(std::atomic<std::uint32_t>& w, std::uint32_t value) {
  std::uint32_t cur = w.load(std::memory_order_relaxed);
  while (!reached(cur, value) &&
         !w.compare_exchange_weak(cur, value, std::memory_order_release, std::memory_order_relaxed)) {
  }
}

// Which instances of one communicator finished on this rank (bind_flags with
// copies): every instance before wm did; bit i of above: instance wm + 1 + i
// did. Lives as long as the executor (each bind makes a new one and keeps the
// old), so an instance and a signal handler may keep a plain pointer.
struct Drain {
  strata::detail::SpinLock mu;  // a few stores per completion
  std::atomic<bool> active{false};
  // Never equal to a sequence number: the watermark once it is lost.
  static constexpr std::uint32_t kLost = kSeqMask + 1;
  std::atomic<std::uint32_t> wm{0};
  std::atomic<int> live{0};  // instances of the communicator started and not finished here
  std::uint64_t above = 0;   // under mu
  // Under mu: a completion beyond the 64-instance window, or a sequence
  // number that will never finish here (a start that failed): from then on
  // wm is kLost, no signal carries kDrainedBit and every grant goes out.
  bool lost = false;
  std::uint32_t credits = 0;
  // Vouching (bind_flags' @p vouch): the peers start at most `vouch` calls of
  // the communicator at once, so a signal of their instance u proves that
  // their instance u - vouch finished (0: off).
  std::uint32_t vouch = 0;
  std::uint32_t first = 0;           // the communicator's first sequence number bound here
  std::vector<std::uint8_t> copies;  // written before active (release), read after it (acquire)
  // sent[r * kMaxGrantSlots + w]: the largest grant value this rank sent
  // world rank r for flag word w (eager grants and answers to requests): a
  // later grant or answer that says no more is not sent again.
  std::unique_ptr<std::atomic<std::uint32_t>[]> sent;

  // Records a grant of @p value to @p r for word @p w; false if one that
  // says as much already went out (then the caller sends nothing).
  bool note_sent(std::size_t r, std::uint32_t w, std::uint32_t value) {
    if (r >= copies.size() || w >= kMaxGrantSlots) return true;
    std::atomic<std::uint32_t>& s = sent[r * kMaxGrantSlots + w];
    std::uint32_t cur = s.load(std::memory_order_relaxed);
    for (;;) {
      if (cur != 0 && reached(cur, value)) return false;
      if (s.compare_exchange_weak(cur, value, std::memory_order_acq_rel, std::memory_order_relaxed)) return true;
    }
  }
  // Watermark grants owed to peers (owed[r] = value | kOwed; 0: none): an
  // instance that completes drained does not send its watermark to a peer
  // its plan did not signal (a broadcast's leaf to its root); the next
  // drained signal to that peer says as much, or the watermark goes out when
  // a later instance that does not signal the peer starts, or when a thread
  // of this rank is about to block (Executor::Impl::send_owed). A peer that
  // needs it earlier asks, as for any late grant. Sent at completion it cost
  // the leaf one message on its way back to the caller in every lock-step
  // loop that alternates a broadcast with a call that signals the root
  // (2 emulated hosts, 8 B broadcast + barrier: 4 us more per iteration).
  static constexpr std::uint32_t kOwed = std::uint32_t{1} << 31;
  std::unique_ptr<std::atomic<std::uint32_t>[]> owed;
  std::atomic<bool> any_owed{false};
  std::uint16_t comm = 0;

  // Records the watermark @p value (kept if a later one is owed already) for @p r.
  void owe(std::size_t r, std::uint32_t value) {
    if (r >= copies.size()) return;
    std::uint32_t cur = owed[r].load(std::memory_order_relaxed);
    while ((cur == 0 || !reached(cur & kSeqMask, value)) &&
           !owed[r].compare_exchange_weak(cur, value | kOwed, std::memory_order_acq_rel, std::memory_order_relaxed)) {
    }
    any_owed.store(true, std::memory_order_release);
  }
  // A drained signal of instance @p seq goes to @p r: it covers a watermark owed up to seq.
  void covered(std::size_t r, std::uint32_t seq) {
    if (r >= copies.size()) return;
    std::uint32_t cur = owed[r].load(std::memory_order_acquire);
    while (cur != 0 && reached(seq, cur & kSeqMask) &&
           !owed[r].compare_exchange_weak(cur, 0, std::memory_order_acq_rel, std::memory_order_acquire)) {
    }
  }

  // Whether a grant of at least @p need went to @p r for word @p w.
  bool was_sent(std::size_t r, std::uint32_t w, std::uint32_t need) const {
    if (r >= copies.size() || w >= kMaxGrantSlots) return false;
    const std::uint32_t cur = sent[r * kMaxGrantSlots + w].load(std::memory_order_acquire);
    return cur != 0 && reached(cur, need);
  }

  // Records that instance @p seq finished; returns the watermark after it (kLost once lost).
  std::uint32_t done(std::uint32_t seq) {
    std::lock_guard<strata::detail::SpinLock> g(mu);
    if (lost) return kLost;
    std::uint32_t w = wm.load(std::memory_order_relaxed);
    const std::uint32_t off = (seq - w) & kSeqMask;
    if (off == 0) {
      w = (w + 1) & kSeqMask;
      while ((above & 1u) != 0) {
        above >>= 1;
        w = (w + 1) & kSeqMask;
      }
      above >>= 1;
      wm.store(w, std::memory_order_release);
    } else if (off <= 64) {
      above |= std::uint64_t{1} << (off - 1);
    } else {
      abandon_locked();
    }
    return lost ? kLost : w;
  }
  void abandon() {
    std::lock_guard<strata::detail::SpinLock> g(mu);
    abandon_locked();
  }
  void abandon_locked() {
    lost = true;
    wm.store(kLost, std::memory_order_release);
  }
};

struct Instance {
  Executor::Impl* ex = nullptr;
  std::shared_ptr<const Plan> plan;
  std::uint64_t key = 0;
  std::uint16_t comm = 0;
  std::uint32_t seq = 0;
  std::uint32_t trace_name = 0;
  DoneFn done;
  std::atomic<std::int64_t> remaining{0};
  std::atomic<bool> failed{false};
  std::mutex err_mu;
  Status error;
  // The failure leaves every member alive (Executor, "Failed calls"): the
  // instance settles (raises its flags) once every member marked it failed.
  bool soft = false;        // under err_mu
  bool registered = false;  // complete(): it was published (kept while it waits to settle)
  NodeState* nodes = nullptr;
  BufBind* bufs = nullptr;
  std::atomic<std::uint32_t>* const* flags = nullptr;    // Bindings::flags (memory-protocol nodes)
  std::uint32_t flag_wake = 0;                           // Bindings::flag_wake
  std::atomic<std::uint64_t>* const* shadows = nullptr;  // Bindings::flag_shadows
  std::uint32_t shadow_words = 0;                        // Bindings::shadow_words
  std::uint64_t shift = 0;                               // Bindings::shift (relative nodes)
  const BoundComputeFn* compute = nullptr;               // Bindings::compute (bound compute nodes)
  NodeId granting = kNoNode;      // the flag_set whose grants go out after the instance completed
  struct Drain* drain = nullptr;  // the communicator's drain watermark (bind_flags with copies)
  void* block = nullptr;
  std::size_t block_size = 0;
  // Instances of plans without wait nodes (no signal names them) sit in their
  // shard's list instead of its hash map (no node allocation per start).
  Instance* prev = nullptr;
  Instance* next = nullptr;
  bool listed = false;
  std::uint64_t stamp = 0;  // Bindings::stamp (kept in the parked block for the next start)
  // Coarse ms when a pending report first saw it in flight (0: not yet):
  // set there, not at the start, which then pays no clock read.
  std::atomic<std::int64_t> seen_ms{0};
};

// What a finished instance leaves at the start of its block when the block
// goes back to its plan (Plan::spare_block_): the bindings' stamp and the
// executor, so that the next start with the same stamp skips resolving the
// peer and scratch bindings, which stay in the block (pre-built instance).
struct Parked {
  std::uint64_t stamp = 0;
  const void* ex = nullptr;
};

inline constexpr std::size_t kAlign = kInstanceAlign;
inline constexpr std::size_t kShards = 16;

inline std::size_t align_up(std::size_t v) { return (v + kAlign - 1) & ~(kAlign - 1); }

inline std::uint64_t make_key(std::uint16_t comm, std::uint32_t seq) {
  return (std::uint64_t{comm} << 32) | (seq & kSeqMask);
}

struct Entry {
  Instance* inst = nullptr;
  std::vector<std::uint32_t> early;  // slots signalled before the instance started
};

struct Shard {
  strata::detail::SpinLock mu;  // short sections only (a map insert at most): per start and completion
  std::unordered_map<std::uint64_t, Entry> map;
  Instance* listed = nullptr;  // instances without wait nodes (Instance::listed), under mu
  void link(Instance* in) {
    in->prev = nullptr;
    in->next = listed;
    if (listed != nullptr) listed->prev = in;
    listed = in;
    in->listed = true;
  }
  void unlink(Instance* in) {
    (in->prev != nullptr ? in->prev->next : listed) = in->next;
    if (in->next != nullptr) in->next->prev = in->prev;
    in->listed = false;
  }
  // The in-flight instance under @p key (hashed or listed), or nullptr.
  Instance* find(std::uint64_t key) {
    const auto it = map.find(key);
    if (it != map.end() && it->second.inst != nullptr) return it->second.inst;
    for (Instance* in = listed; in != nullptr; in = in->next)
      if (in->key == key) return in;
    return nullptr;
  }
  // Every in-flight instance.
  template <class F>
  void each(F f) {
    for (auto& [k, e] : map)
      if (e.inst != nullptr) f(e.inst);
    for (Instance* in = listed; in != nullptr; in = in->next) f(in);
  }
  std::unordered_set<std::uint64_t> tomb;  // failed instances: late signals are dropped
  std::deque<std::uint64_t> tomb_order;
};

}  // namespace exec

using exec::align_up;
using exec::BufBind;
using exec::Drain;
using exec::Entry;
using exec::ExecutorObserver;
using exec::Instance;
using exec::kAlign;
using exec::kRefreshAge;
using exec::kShards;
using exec::make_key;
using exec::NodeState;
using exec::Parked;
using exec::raise_to;
using exec::reached;
using exec::Shard;

// The Impl whose task the calling thread runs (null outside the arena's tasks).
inline thread_local const Executor::Impl* tls_in_task = nullptr;
// The Impl whose work the calling thread waits for (WaiterScope, a start's deferred compute).
inline thread_local const Executor::Impl* tls_waiter = nullptr;
// Depth of transport callbacks into an executor on this thread (completions,
// signals, flag polls): 0 in a user's thread that calls start().
inline thread_local int tls_handler_depth = 0;
// Compute nodes this thread keeps to run itself (DeferredCompute: a start's
// while it launches its roots, a WaiterScope's while its thread polls).
inline thread_local DeferredCompute* tls_defer = nullptr;
struct HandlerDepth {
  HandlerDepth() noexcept { ++tls_handler_depth; }
  ~HandlerDepth() { --tls_handler_depth; }
  HandlerDepth(const HandlerDepth&) = delete;
  HandlerDepth& operator=(const HandlerDepth&) = delete;
};

struct Executor::Impl {
  transport::Transport& tp;
  ExecutorOptions opts;
  std::unique_ptr<tbb::task_arena> own_arena;
  tbb::task_arena* arena = nullptr;
  tbb::task_group group;  // spawns from inside our tasks
  std::atomic<std::int64_t> tasks{0};
  std::atomic<std::uint64_t> spawned{0};  // nodes handed to the arena as tasks (Executor::tasks_spawned)
  // Threads running a compute node or a copy / reduction / read of at least
  // kBusyBytes right now (Executor::cores_busy).
  std::atomic<int> working{0};
  std::atomic<int> queued{0};  // tasks handed to oneTBB and not started yet
  static constexpr std::size_t kBusyBytes = std::size_t{64} << 10;
  std::atomic<std::int64_t> live{0};
  Shard shards[kShards];
  std::unique_ptr<std::atomic<bool>[]> dead;
  std::atomic<int> ndead{0};  // entries of `dead` set: the start path skips its loop while 0
  int nranks = 0;
  int my_rank = 0;  // tp.rank(), read once (a virtual call per start otherwise)
  std::mutex seq_mu;
  std::unordered_map<std::uint16_t, std::uint32_t> seqs;
  // The trace observer (trace.hpp): null when tracing is off, which is all
  // the hot paths look at (`obs != nullptr`, no virtual call).
  std::unique_ptr<ExecutorObserver> observer;
  ExecutorObserver* obs = nullptr;
  // The arena has a single thread's worth of CPU (a rank bound to one core):
  // a task could only run on the core the releasing thread already holds, so
  // every copy / reduction / read runs inline where it became ready, whatever
  // its size (handing a 4 MiB copy to a worker there cost 1.5-5x: the waiter
  // and the progress server spun on the worker's core).
  bool serial = false;
  int concurrency = 1;  // the arena's max_concurrency
  // flag_wait nodes whose flag was not set when they became ready (poll()).
  strata::detail::SpinLock flag_mu;                        // short sections: a push, a scan of the pending flag waits
  std::vector<std::pair<Instance*, NodeId>> flag_pending;  // under flag_mu
  std::atomic<std::size_t> nflag_pending{0};
  std::atomic<int> parked{0};  // threads of this rank blocked (park): flag waits ask for nudges meanwhile

  // Asks the owner of flag_wait @p nd to nudge this rank when it sets the flag
  // (the wake words of its block; a Dekker pair with set_flag: this side
  // stores them, then reads the flag; the owner stores the flag, then reads them).
  void want_nudge(Instance* in, const Node& nd) {
    std::atomic<std::uint32_t>* blk = in->flags[nd.peer];
    blk[in->flag_wake + 1 + static_cast<std::uint32_t>(tp.rank())].store(1, std::memory_order_seq_cst);
    blk[in->flag_wake].store(1, std::memory_order_seq_cst);
  }

  void park(bool parking);
  std::atomic<bool> flag_repoll{false};  // poll_flags() found the scan busy
  std::atomic<int> sending{0};           // complete() calls still sending grants
  // Instance blocks of finished instances, kept for the next start of the
  // same size (aligned operator new cost ~700 instructions of a small
  // collective's ~8,000 on the calling thread: callgrind).
  static constexpr std::size_t kCachedBlocks = 32;
  static constexpr std::size_t kCachedBlockMax = std::size_t{256} << 10;
  std::mutex block_mu;
  std::vector<std::pair<std::size_t, void*>> free_blocks;  // (size, block), under block_mu

  void* alloc_block(std::size_t total) {
    if (total <= kCachedBlockMax) {
      std::lock_guard<std::mutex> g(block_mu);
      for (std::size_t i = free_blocks.size(); i-- > 0;) {
        if (free_blocks[i].first == total) {
          void* b = free_blocks[i].second;
          free_blocks[i] = free_blocks.back();
          free_blocks.pop_back();
          return b;
        }
      }
    }
    return ::operator new(total, std::align_val_t(kAlign));
  }
  void free_block(void* block, std::size_t total) {
    if (total <= kCachedBlockMax) {
      std::lock_guard<std::mutex> g(block_mu);
      if (free_blocks.size() < kCachedBlocks) {
        free_blocks.emplace_back(total, block);
        return;
      }
    }
    ::operator delete(block, std::align_val_t(kAlign));
  }
  ~Impl() {
    for (auto& fb : free_blocks) ::operator delete(fb.second, std::align_val_t(kAlign));
  }
  // Grants (flag words of peers on other hosts, see Executor::bind_flags):
  // communicator -> its flag table; requests from peers whose flag word was
  // late, answered by the flag_set that reaches their need.
  struct GrantRequest {
    std::uint16_t comm;
    std::uint32_t slot;
    std::uint32_t need;
    int from;
  };
  std::mutex grant_mu;
  std::unordered_map<std::uint16_t, std::pair<std::atomic<std::uint32_t>* const*, std::size_t>> grant_tables;
  std::vector<GrantRequest> grant_requests;  // under grant_mu
  // Drain watermarks by communicator id (bind_flags with copies): allocated
  // at the first such bind (runs with members on several hosts only).
  std::unique_ptr<std::atomic<Drain*>[]> drains;  // 65536 entries; the pointer is set once under grant_mu
  std::atomic<std::atomic<Drain*>*> drains_at{nullptr};
  std::vector<std::unique_ptr<Drain>> drain_store;  // under grant_mu
  std::atomic<bool> owed_any{false};                // some drain owes a watermark (Drain::owed)
  // Sends the watermarks @p d owes, except to the peers @p skip signals (its
  // drained signals carry them).
  void send_owed(Drain* d, const Plan* skip);
  // Every owed watermark (a thread of this rank is about to block).
  void send_all_owed();
  Drain* drain_of(std::uint16_t comm) const {
    std::atomic<Drain*>* t = drains_at.load(std::memory_order_acquire);
    if (t == nullptr) return nullptr;
    Drain* d = t[comm].load(std::memory_order_acquire);
    return d != nullptr && d->active.load(std::memory_order_acquire) ? d : nullptr;
  }
  // The payload of a signal of @p in: with kDrainedBit when every earlier
  // instance of its communicator finished here.
  static std::uint64_t signal_payload(const Instance* in, const Node& nd) {
    std::uint64_t p = encode_signal(in->comm, in->seq, nd.slot);
    if (in->drain != nullptr && in->drain->wm.load(std::memory_order_acquire) == in->seq) {
      p |= kDrainedBit;
      if (in->drain->any_owed.load(std::memory_order_acquire))
        in->drain->covered(static_cast<std::size_t>(nd.peer), in->seq);
    }
    return p;
  }
  // A signal from @p source said it finished every instance of @p comm before
  // @p seq: each of its flag words in the copy is at least seq (a flag word
  // w is read as "finished every instance up to w - 1 that used the slot";
  // finishing all of them says more), which also keeps every word fresh.
  // A signal of @p source's instance @p seq of @p comm, whose peers vouch
  // (Drain::vouch = V): @p source finished its instance seq - V, the previous
  // user of window slot (seq - V) % credits for a call seq - V + credits: that
  // word of the copy is at least seq - V + 1.
  void apply_vouch(int source, std::uint16_t comm, std::uint32_t seq) {
    Drain* d = copying_drain(source, comm);
    if (d == nullptr || d->vouch == 0) return;
    vouch(d, source, comm, seq);
  }
  void vouch(Drain* d, int source, std::uint16_t comm, std::uint32_t seq);
  void apply_watermark(int source, std::uint16_t comm, std::uint32_t seq) {
    Drain* d = copying_drain(source, comm);
    if (d == nullptr) return;
    raise_watermark(d, source, comm, seq);
  }
  void raise_watermark(Drain* d, int source, std::uint16_t comm, std::uint32_t seq);
  // The drain of @p comm when this rank keeps a copy of @p source's flags, else null.
  Drain* copying_drain(int source, std::uint16_t comm) {
    Drain* d = drain_of(comm);
    if (d == nullptr || source < 0 || static_cast<std::size_t>(source) >= d->copies.size() ||
        d->copies[static_cast<std::size_t>(source)] == 0)
      return nullptr;
    return d;
  }
  // Runs @p raise on this rank's copy of @p source's flag words of @p comm
  // (under grant_mu; nothing when the communicator is not bound), then
  // releases what the raised words satisfy.
  template <class F>
  void raise_copy(int source, std::uint16_t comm, F raise);
  std::atomic<std::size_t> ngrant_requests{0};
  // Completion context of grant messages (nothing waits for their sends).
  alignas(16) std::uint64_t grant_ctx = 0;  // even address: the engine routes odd contexts to windows

  Impl(transport::Transport& t, ExecutorOptions o);

  Shard& shard(std::uint64_t key) { return shards[(key ^ (key >> 29)) % kShards]; }

  // ------------------------------------------------------------ addresses
  unsigned char* addr(Instance* in, NodeId id, int which, const Region& r) const {
    return in->bufs[in->plan->buffer_index(id, which)].base + r.offset;
  }
  // A copy / reduce operand: a peer region of a kRelPeerRegions node moves by the instance's shift.
  unsigned char* operand(Instance* in, NodeId id, int which, const Region& r, const Node& nd) const {
    unsigned char* a = addr(in, id, which, r);
    if ((nd.relative & kRelPeerRegions) != 0 && r.buf.kind == BufferKind::peer) a += in->shift;
    return a;
  }
  // The flag word of a flag_wait / flag_set (kRelFlagWord: moved by the instance's shift).
  static std::uint32_t flag_word(const Instance* in, const Node& nd) {
    return (nd.relative & kRelFlagWord) != 0 ? nd.slot + static_cast<std::uint32_t>(in->shift / 4) : nd.slot;
  }
  const transport::RemoteKey& rkey(Instance* in, NodeId id, int which) const {
    return in->bufs[in->plan->buffer_index(id, which)].key;
  }

  // ------------------------------------------------------------ failure
  void fail(Instance* in, const Status& why) { (void)mark_failed(in, why, false); }
  // A failure that leaves every member alive (a user operator or callable
  // threw): announced to the members, who fail their instance of the call too.
  void fail_soft(Instance* in, const Status& why);
  // Records the first failure of @p in and releases its wait nodes; false if it had failed already.
  bool mark_failed(Instance* in, const Status& why, bool soft);
  void release_waits(Instance* in);

  // ------------------------------------------------------------ failed calls (notice / ack / settle)
  std::mutex abort_mu;
  std::atomic<int> nabort{0};  // entries in the maps below (a start or completion looks only when > 0)
  struct Doom {
    int origin = -1;
    Errc code = Errc::internal;
  };
  std::unordered_map<std::uint64_t, Doom> doomed;  // announced failed, not (yet) failed here
  struct Announced {
    std::vector<int> told;     // the members the notice went to
    std::vector<int> missing;  // those whose ack has not come
  };
  std::unordered_map<std::uint64_t, Announced> awaiting;  // this rank's announcements
  std::unordered_set<std::uint64_t> settled;              // settle arrived before the instance finished
  std::unordered_map<std::uint64_t, Instance*> settling;  // finished, waiting for settle
  std::deque<std::uint64_t> abort_order;                  // bounds doomed and settled (stale entries)

  static std::uint16_t key_comm(std::uint64_t key) { return static_cast<std::uint16_t>(key >> 32); }
  static std::uint32_t key_seq(std::uint64_t key) { return static_cast<std::uint32_t>(key & kSeqMask); }
  void count_abort() {
    nabort.store(static_cast<int>(doomed.size() + awaiting.size() + settled.size() + settling.size()),
                 std::memory_order_release);
  }
  void remember(std::uint64_t key);

  // The size a report names for a call: its largest input or first output buffer.
  static std::uint64_t call_bytes(const Plan& p);

  // The error of a member whose instance failed because rank @p origin's did.
  Status remote_failure(const Plan& p, std::uint16_t comm, std::uint32_t seq, int origin, Errc code) const;

  // The origin: tells every other member of the plan's communicator.
  void announce(Instance* in);

  void on_abort(int source, std::uint64_t payload);

  // Member @p who marked the announced instance @p key failed (or died).
  void acked(std::uint64_t key, int who);

  // Every member marked instance @p key failed: it may raise its flags and finish.
  void settle(std::uint64_t key);

  // The flag words a finished instance leaves (raised, never lowered): what the
  // window slot's next users and the peers' credit checks wait for.
  void raise_flags(Instance* in);

  // A member died: announcements stop waiting for it, and instances waiting
  // to settle whose communicator it belongs to finish now (that communicator
  // has failed as a whole).
  void abort_peer_died(int peer);

  // Instance @p in starts (or completes) here after a member announced its
  // failure: it fails the same way. Returns whether it did.
  bool apply_doom(Instance* in, bool release);

  // Shutdown: instances waiting to settle finish with their error now.
  std::size_t flush_settling();

  // Executor::pending_report: what each in-flight instance still waits for.
  std::vector<PendingCall> pending(std::int64_t older_than_ms);

  // Forget what is known of communicator @p comm's calls (a new communicator takes its id).
  void forget_comm(std::uint16_t comm);

  // ------------------------------------------------------------ running nodes
  // Executes node @p id; returns true when it finished synchronously.
  bool run(Instance* in, NodeId id);
  // run()'s transport kinds (put, get, put_with_signal, signal): posts; false = the completion releases it.
  bool post(Instance* in, NodeId id, const Node& nd);

  // The bodies of run()'s longer cases (compute, read_peer, write_peer).
  void run_compute(Instance* in, NodeId id, const Node& nd);
  void run_read_peer(Instance* in, NodeId id, const Node& nd);
  void run_write_peer(Instance* in, NodeId id, const Node& nd);
  // read_peer / write_peer: whether the peer's publication record is mapped
  // here (else the instance fails, naming the node and the peer).
  bool publication_mapped(Instance* in, NodeId id, const Node& nd);
  // The 64-bit value in words @p at, @p at + 1 of the peer's publication record (low, high).
  static std::uint64_t published_word(const Instance* in, const Node& nd, std::uint32_t at);

  // read_peer with fold: d = d OP the peer's bytes, straight out of this
  // process's mapping of the peer's region (handle @p h), else out of a
  // temporary filled by read_peer of the plain address @p raw.
  void fold_peer(Instance* in, NodeId id, const Node& nd, unsigned char* d, std::uint64_t h, std::uint64_t raw);
  static constexpr std::size_t kFoldPiece = std::size_t{64} << 10;
  // d = d OP src over @p elems elements (node @p id's operator); false when a user operator threw.
  bool fold_piece(Instance* in, NodeId id, const Node& nd, unsigned char* d, const void* src, std::size_t elems);

  // d = a OP b with node @p id's user operator over its dst length; an
  // exception fails the instance naming the operator (never escapes).
  bool user_reduce(Instance* in, NodeId id, const void* a, const void* b, void* d);
  bool user_reduce(Instance* in, NodeId id, const void* a, const void* b, void* d, std::size_t elems);

  // flag_wait: has the peer finished instance seq - lag (the window slot's previous user)?
  // Flags hold seq + 1 modulo 2^28 and only grow; "at or after" is a half-range comparison.
  static bool flag_ready(const Instance* in, const Node& nd) {
    const std::uint32_t need = (in->seq - nd.count + 1) & kSeqMask;
    const std::uint32_t word = flag_word(in, nd);
    if (word < in->shadow_words && in->shadows != nullptr && in->shadows[nd.peer] != nullptr)
      return shadow_ready(in, nd, word, need);
    return reached(in->flags[nd.peer][word].load(std::memory_order_acquire), need);
  }

  // Bindings::flag_shadows: this rank's copy of the word, if it was observed
  // recently (entry: the observer's seq << 32 | the value; a flag value only
  // grows, so an old observation that shows `need` proves it). Otherwise one
  // read of the owner's words in the word's cache line (the transfer is of
  // the whole line anyway), each copied into the shadow: in a loop the next
  // credit checks of that peer then cost no transfer at all.
  static bool shadow_ready(const Instance* in, const Node& nd, std::uint32_t word, std::uint32_t need) {
    std::atomic<std::uint64_t>* sh = in->shadows[nd.peer];
    const std::uint64_t e = sh[word].load(std::memory_order_acquire);
    // Recent: observed fewer than 2^20 instances ago (the half-range
    // comparison could not be fooled by a value 2^27 instances old).
    const std::uint32_t age = (in->seq - static_cast<std::uint32_t>(e >> 32)) & kSeqMask;
    const bool recent = age < (1u << 20) || age > kSeqMask - (1u << 20);
    if (e != 0 && recent && reached(static_cast<std::uint32_t>(e), need)) return true;
    const std::atomic<std::uint32_t>* w = in->flags[nd.peer];
    const std::uint32_t lo = word & ~15u;  // 16 words: the line (flag blocks are 64-byte aligned)
    const std::uint32_t hi = std::min(lo + 16, in->shadow_words);
    bool ok = false;
    for (std::uint32_t i = lo; i < hi; ++i) {
      const std::uint32_t v = w[i].load(std::memory_order_acquire);
      if (i == word) ok = reached(v, need);
      // A racing observer may store an older value: the shadow stays a lower bound.
      sh[i].store(std::uint64_t{in->seq} << 32 | v, std::memory_order_release);
    }
    return ok;
  }

  // flag_set: publish seq + 1, then nudge the same-host ranks that wait on it.
  // @p raise: only move the word forward (a failed instance settling after
  // later instances of the communicator may already have raised it).
  void set_flag(Instance* in, const Node& nd, bool raise = false);

  // publish: the addresses of the two regions, then the flag (set_flag's release orders them).
  void publish(Instance* in, NodeId id, const Node& nd);

  // Sends a grant for each recorded request whose need this rank's flag now meets.
  void answer_requests();

  // A grant or a request for one (payload tag kGrantComm / kGrantRequestComm).
  void handle_grant(int source, std::uint64_t payload);

  // Never blocks: a caller that finds another thread scanning leaves a
  // re-poll request that the scanning thread honours before it returns (so a
  // flag or grant published while a scan runs is never missed). The check
  // for nothing pending stays inline: Executor::poll runs it in every
  // progress loop.
  std::size_t poll_flags() {
    if (nflag_pending.load(std::memory_order_acquire) == 0) return 0;
    return poll_pending_flags();
  }
  std::size_t poll_pending_flags();
  // A flag_wait whose flag was not there (run()): parks it in flag_pending
  // (after asking for a grant or a nudge); poll_flags() releases it.
  void wait_flag(Instance* in, NodeId id, const Node& nd);
  // The grants of @p nd (the final flag_set of a finished instance of
  // @p comm, which raised it to @p value), sent after its DoneFn ran.
  void send_grants(const Plan& plan, const Node& nd, Drain* d, std::uint16_t comm, std::uint32_t value, bool drained,
                   bool batch_due);
  // complete() of a failed instance: false when it waits for the members to
  // settle (settle() finishes it), true when it finishes now.
  bool settle_failed(Instance* in);

  // A compute node that becomes ready in this thread runs here
  // (ExecutorOptions::inline_compute): a serial arena, and a thread that is
  // not the arena's, that waits for this executor (mark_waiter) or is a
  // user's thread starting a call (no transport callback on its stack: not
  // a progress server).
  [[nodiscard]] bool compute_here() const noexcept {
    return serial && opts.inline_compute && tls_in_task != this && (tls_waiter == this || tls_handler_depth == 0);
  }

  // A compute node @p id released in this thread while a start launches its
  // roots: queued for the end of the start (true), not run now.
  bool defer_compute(Instance* in, NodeId id) const {
    if (tls_defer == nullptr || tls_defer->im != this || in->plan->nodes()[id].kind != NodeKind::compute) return false;
    tls_defer->nodes.emplace_back(in, id);
    return true;
  }

  [[nodiscard]] bool cheap(const Instance* in, NodeId id) const {
    const Node& nd = in->plan->nodes()[id];
    switch (nd.kind) {
      case NodeKind::compute:
        return false;
      case NodeKind::copy:
      case NodeKind::reduce:
      case NodeKind::read_peer:
      case NodeKind::write_peer:
        return serial || nd.dst.len <= opts.inline_bytes;
      default:
        return true;
    }
  }

  // Nodes released in this thread and run by it before it returns (a small
  // stack; what does not fit becomes a task).
  struct Work {
    static constexpr std::size_t kCap = 32;
    NodeId ids[kCap];
    std::size_t n = 0;
    // Nodes finished by this thread and not yet counted in `remaining`: one
    // atomic subtraction when the thread's work on the instance ends instead
    // of one per node (each locked RMW costs ~7-10 ns here: perf annotate of
    // finish()); the uncounted nodes keep the instance alive meanwhile.
    std::int64_t finished = 0;
    bool push(NodeId id) {
      if (n == kCap) return false;
      ids[n++] = id;
      return true;
    }
  };

  // Node @p id finished: releases its successors, then counts it done. Inline
  // vs task by cost: every cheap successor (a post, a flag, a small copy: less
  // work than waking a worker) runs in this thread; of the expensive ones, in
  // the arena the first runs here too (a chain costs no spawn) and the others
  // become tasks that the arena's threads run in parallel; outside the arena
  // (progress and handler threads) all of them become tasks. In a serial
  // arena (one thread) nothing but compute nodes is expensive (`cheap`).
  void finish(Instance* in, NodeId id, Work& w, bool in_arena);

  void run_work(Instance* in, Work& w, bool in_arena);

  void drive(Instance* in, NodeId id, bool in_arena);

  // Node @p id completed elsewhere (a transport completion, a flag): release and run its successors.
  void completed(Instance* in, NodeId id, bool in_arena);

  // A node became ready in a thread that may be outside the arena.
  void ready_outside(Instance* in, NodeId id);

  // Inside our tasks: spawn into the task group (local deque, tracked by the
  // group). Elsewhere: enqueue into the arena, counted in `tasks`.
  void spawn(Instance* in, NodeId id);

  // ------------------------------------------------------------ instance end
  bool pin(Instance* in) {
    std::int64_t v = in->remaining.load(std::memory_order_acquire);
    while (v > 0)
      if (in->remaining.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel)) return true;
    return false;
  }
  void unpin(Instance* in) {
    if (in->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) complete(in);
  }

  // @p registered: the instance was published (shard, `live`, its drain's
  // `live`); a straight start that finished every node in the starting thread
  // never was (straight()).
  // @p ended: not null for a straight start's own completion
  // (Executor::start's `ended_inline`): set instead of calling the DoneFn
  // when the instance did not fail.
  void complete(Instance* in, bool registered = true, bool* ended = nullptr);

  // The rest of complete(): the DoneFn (or *@p ended, above), the drain
  // watermark, the final grants.
  void finish(Instance* in, bool* ended = nullptr);

  // Straight start (Plan::straight_preds): runs every node whose
  // predecessors are done, in id order, in this thread; a flag_wait whose
  // flag is not there yet stays undone, and so do the nodes after it. Returns
  // the mask of the nodes done. No counter, no atomic, no shard: a plan
  // whose peers are on time completes here (complete(in, false)).
  std::uint64_t run_straight(Instance* in, std::uint64_t done = 0);

  static void tombstone(Shard& sh, std::uint64_t key);

  static void destroy(Instance* in);
};

}  // namespace dag
}  // namespace strata
