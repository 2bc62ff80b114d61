// The oneTBB executor (see strata/dag/executor.hpp).
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
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <fstream>
#include <mutex>
#include <new>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/task_group.h>

#include "strata/dag/executor.hpp"
#include "strata/detail/clock.hpp"
#include "strata/detail/env.hpp"
#include "strata/detail/spinlock.hpp"
#include "strata/detail/tsan.hpp"
#include "strata/transport/copy.hpp"

namespace strata {
namespace dag {

namespace {

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
constexpr std::uint32_t kRefreshAge = 1u << 20;

// Half-range "at or after" on flag values and sequence numbers (modulo 2^28).
bool reached(std::uint32_t have, std::uint32_t need) { return ((have - need) & kSeqMask) < (kSeqMask >> 1); }

// Raises @p w to @p value unless it is already at or after it (grants and
// watermarks only ever move a copied flag word forward).
void raise_to(std::atomic<std::uint32_t>& w, std::uint32_t value) {
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

constexpr std::size_t kAlign = kInstanceAlign;
constexpr std::size_t kShards = 16;

std::size_t align_up(std::size_t v) { return (v + kAlign - 1) & ~(kAlign - 1); }

std::uint64_t make_key(std::uint16_t comm, std::uint32_t seq) { return (std::uint64_t{comm} << 32) | (seq & kSeqMask); }

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

// node: a DAG node ran (or, zero-length, completed); span: an event named by
// the caller (fast-path calls, transport events); flow_start / flow_end: the
// ends of a Chrome trace flow arrow (a signal's arrival -> the node it released).
enum class TraceType : std::uint8_t { node, span, flow_start, flow_end };

struct TraceEvent {
  std::uint64_t start_ns;
  std::uint64_t end_ns;
  std::uint32_t name;  // interned: the plan's name (node) or the event's name
  std::uint32_t seq;
  std::uint32_t node;
  NodeKind kind;
  TraceType type = TraceType::node;
  std::uint32_t cat = 0;  // interned category (span)
  std::uint64_t id = 0;   // flow id (flow_*)
  std::int64_t arg = -1;  // span: peer / source rank (-1: none)
};

// JSON string contents: quotes, backslashes and control characters escaped.
void write_escaped(std::ostream& f, const std::string& s) {
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      f << '\\' << ch;
    } else if (c < 0x20) {
      static const char* hex = "0123456789abcdef";
      f << "\\u00" << hex[c >> 4] << hex[c & 15];
    } else {
      f << ch;
    }
  }
}

void write_us(std::ostream& f, std::uint64_t ns) { f << (ns / 1000) << "." << (ns % 1000 / 100); }

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

thread_local const Executor::Impl* tls_in_task = nullptr;

// Debian's libtbb is not TSan-instrumented: annotate task hand-offs under TSan.
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
inline void tsan_release(void* p) noexcept { __tsan_release(p); }
inline void tsan_acquire(void* p) noexcept { __tsan_acquire(p); }

// A task's callable is copied into oneTBB's task object inside enqueue/run
// and read by the worker: the copy publishes itself once its members are
// written, and the call acquires it before reading them.
template <class F>
struct Handoff {
  F f;
  explicit Handoff(F fn) : f(std::move(fn)) { tsan_release(this); }
  Handoff(const Handoff& o) : f(o.f) { tsan_release(this); }
  Handoff(Handoff&& o) noexcept : f(std::move(o.f)) { tsan_release(this); }
  Handoff& operator=(const Handoff&) = delete;
  Handoff& operator=(Handoff&&) = delete;
  ~Handoff() = default;
  void operator()() const {
    tsan_acquire(const_cast<Handoff*>(this));
    f();
  }
};
template <class F>
Handoff<F> handoff(F f) {
  return Handoff<F>(std::move(f));
}
#else
template <class F>
F handoff(F f) {
  return f;
}
#endif

}  // namespace

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
  int nranks = 0;
  std::mutex seq_mu;
  std::unordered_map<std::uint16_t, std::uint32_t> seqs;
  // tracing
  bool tracing = false;
  // The arena has a single thread's worth of CPU (a rank bound to one core):
  // a task could only run on the core the releasing thread already holds, so
  // every copy / reduction / read runs inline where it became ready, whatever
  // its size (handing a 4 MiB copy to a worker there cost 1.5-5x: the waiter
  // and the progress server spun on the worker's core).
  bool serial = false;
  int concurrency = 1;  // the arena's max_concurrency
  std::string trace_file;
  std::uint32_t cat_dag = 0, cat_transport = 0, name_signal = 0, name_completion = 0;
  // Flow arrows: the node state a traced signal released -> the arrow's id.
  std::mutex flow_mu;
  std::unordered_map<const NodeState*, std::uint64_t> flows;
  std::atomic<std::size_t> nflows{0};
  std::atomic<std::uint64_t> next_flow{1};
  tbb::enumerable_thread_specific<std::vector<TraceEvent>> trace;
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

  void park(bool parking) {
    if (!parking) {
      parked.fetch_sub(1, std::memory_order_seq_cst);
      return;
    }
    parked.fetch_add(1, std::memory_order_seq_cst);
    if (owed_any.load(std::memory_order_acquire)) send_all_owed();
    if (nflag_pending.load(std::memory_order_seq_cst) == 0) return;
    {
      std::lock_guard<strata::detail::SpinLock> g(flag_mu);
      for (auto& [in, id] : flag_pending) {
        const Node& nd = in->plan->nodes()[id];
        if (!nd.granted && !in->failed.load(std::memory_order_acquire)) want_nudge(in, nd);
      }
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
    poll_flags();  // a flag set before the owner could see the wake words
  }
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
  void send_owed(Drain* d, const Plan* skip) {
    if (!d->any_owed.exchange(false, std::memory_order_acq_rel)) return;
    const bool active = d->active.load(std::memory_order_acquire);
    for (std::size_t r = 0; r < d->copies.size(); ++r) {
      if (d->owed[r].load(std::memory_order_relaxed) == 0) continue;
      if (active && skip != nullptr && skip->signals(static_cast<int>(r))) {
        d->any_owed.store(true, std::memory_order_release);
        continue;
      }
      const std::uint32_t v = d->owed[r].exchange(0, std::memory_order_acq_rel);
      if (v != 0 && active)
        (void)tp.signal(static_cast<int>(r), encode_grant(kWatermarkComm, d->comm, 0, v & kSeqMask), &grant_ctx);
    }
  }
  // Every owed watermark (a thread of this rank is about to block).
  void send_all_owed() {
    if (!owed_any.exchange(false, std::memory_order_acq_rel)) return;
    std::vector<Drain*> ds;
    {
      std::lock_guard<std::mutex> g(grant_mu);
      for (const auto& d : drain_store)
        if (d->any_owed.load(std::memory_order_acquire)) ds.push_back(d.get());
    }
    for (Drain* d : ds) send_owed(d, nullptr);
  }
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
    const std::uint32_t done = (seq - d->vouch) & kSeqMask;
    // Only instances from the bind on (earlier ones wrap to "behind" anyway).
    if (((done - d->first) & kSeqMask) >= (kSeqMask >> 1)) return;
    // credits is a power of two dividing 2^28: seq mod 2^28 keeps the slot.
    raise_copy(source, comm,
               [&](std::atomic<std::uint32_t>* copy) { raise_to(copy[done % d->credits], (done + 1) & kSeqMask); });
  }
  void apply_watermark(int source, std::uint16_t comm, std::uint32_t seq) {
    Drain* d = copying_drain(source, comm);
    if (d == nullptr) return;
    raise_copy(source, comm, [&](std::atomic<std::uint32_t>* copy) {
      for (std::uint32_t s = 0; s < d->credits && s < kMaxGrantSlots; ++s) raise_to(copy[s], seq);
    });
  }
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
  void raise_copy(int source, std::uint16_t comm, F raise) {
    {
      std::lock_guard<std::mutex> g(grant_mu);
      const auto it = grant_tables.find(comm);
      if (it == grant_tables.end() || static_cast<std::size_t>(source) >= it->second.second) return;
      std::atomic<std::uint32_t>* copy = it->second.first[source];
      if (copy == nullptr) return;
      raise(copy);
    }
    poll_flags();
  }
  std::atomic<std::size_t> ngrant_requests{0};
  // Completion context of grant messages (nothing waits for their sends).
  alignas(16) std::uint64_t grant_ctx = 0;  // even address: the engine routes odd contexts to windows
  std::mutex names_mu;
  std::vector<std::string> names;
  std::unordered_map<std::string, std::uint32_t> name_ids;

  Impl(transport::Transport& t, ExecutorOptions o) : tp(t), opts(std::move(o)) {
    nranks = tp.size();
    dead.reset(new std::atomic<bool>[static_cast<std::size_t>(std::max(nranks, 1))]);
    for (int i = 0; i < nranks; ++i) dead[static_cast<std::size_t>(i)].store(false);
    if (opts.arena != nullptr) {
      arena = opts.arena;
    } else {
      own_arena = opts.threads > 0 ? std::make_unique<tbb::task_arena>(opts.threads, 0)
                                   : std::make_unique<tbb::task_arena>(int{tbb::task_arena::automatic},
                                                                       1);  // int{}: no ODR-use (Debug links)
      arena = own_arena.get();
    }
    arena->initialize();
    concurrency = std::max(1, arena->max_concurrency());
    serial = concurrency <= 1;
    std::string path = opts.trace_path;
    if (path.empty()) {
      const char* env = strata::detail::env::get("STRATA_TRACE");
      if (env != nullptr) path = env;
    }
    if (!path.empty()) {
      tracing = true;
      trace_file = path + "." + std::to_string(tp.rank()) + ".json";
      // A new run starts a new file (flushes append to it; so may the application).
      std::ofstream truncate(trace_file, std::ios::trunc);
      cat_dag = intern("dag");
      cat_transport = intern("transport");
      name_signal = intern("signal arrived");
      name_completion = intern("completion");
    }
  }

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
  void fail_soft(Instance* in, const Status& why) {
    if (mark_failed(in, why, true)) announce(in);
  }
  // Records the first failure of @p in and releases its wait nodes; false if it had failed already.
  bool mark_failed(Instance* in, const Status& why, bool soft) {
    {
      std::lock_guard<std::mutex> g(in->err_mu);
      if (in->failed.load(std::memory_order_relaxed)) return false;
      in->error = why;
      in->soft = soft;
      in->failed.store(true, std::memory_order_release);
    }
    release_waits(in);
    return true;
  }
  void release_waits(Instance* in) {
    // Release wait nodes from the signals they still expect.
    for (NodeId w : in->plan->wait_nodes()) {
      const std::int32_t left = in->nodes[w].sig.exchange(0, std::memory_order_acq_rel);
      if (left > 0 && in->nodes[w].deps.fetch_sub(left, std::memory_order_acq_rel) == left) ready_outside(in, w);
    }
  }

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
  void remember(std::uint64_t key) {
    abort_order.push_back(key);
    while (abort_order.size() > 4096) {
      doomed.erase(abort_order.front());
      settled.erase(abort_order.front());
      abort_order.pop_front();
    }
  }

  // The size a report names for a call: its largest input or first output buffer.
  static std::uint64_t call_bytes(const Plan& p) {
    std::uint64_t bytes = 0;
    for (const BufferDecl& d : p.buffers())
      if (d.ref.kind == BufferKind::input || (d.ref.kind == BufferKind::output && d.ref.id == 0))
        bytes = std::max<std::uint64_t>(bytes, d.size);
    return bytes;
  }

  // The error of a member whose instance failed because rank @p origin's did.
  Status remote_failure(const Plan& p, std::uint16_t comm, std::uint32_t seq, int origin, Errc code) const {
    const std::uint64_t bytes = call_bytes(p);
    return Status(code, p.name() + " (communicator " + std::to_string(comm) + ", call #" + std::to_string(seq) + ", " +
                            std::to_string(bytes) + " B) on rank " + std::to_string(tp.rank()) + ": failed on rank " +
                            std::to_string(origin) + " (" + make_error_code(code).message() +
                            "); the call fails on every member; rank " + std::to_string(origin) +
                            "'s error has the cause");
  }

  // The origin: tells every other member of the plan's communicator.
  void announce(Instance* in) {
    const std::vector<int>& members = in->plan->members();
    std::vector<int> others;
    for (int m : members)
      if (m != tp.rank() && m >= 0 && m < nranks && !dead[static_cast<std::size_t>(m)].load()) others.push_back(m);
    const Errc code = in->error.code();  // set before (mark_failed), never changed after
    {
      std::lock_guard<std::mutex> g(abort_mu);
      if (others.empty()) {
        settled.insert(in->key);  // nobody to wait for
        remember(in->key);
      } else {
        if (awaiting.count(in->key) != 0) return;
        awaiting[in->key] = Announced{others, others};
      }
      count_abort();
    }
    for (int m : others) (void)tp.signal(m, encode_abort(kAbortNoticeComm, in->comm, in->seq, code), &grant_ctx);
  }

  void on_abort(int source, std::uint64_t payload) {
    const AbortKey k = decode_abort(payload);
    const std::uint64_t key = make_key(k.comm, k.seq);
    if (k.tag == kAbortNoticeComm) {
      // Remembered first, then looked up: a start that publishes its instance
      // between the two finds the entry (start() looks after publishing).
      {
        std::lock_guard<std::mutex> g(abort_mu);
        if (doomed.emplace(key, Doom{source, k.code}).second) remember(key);
        count_abort();
      }
      Instance* in = nullptr;
      {
        Shard& sh = shard(key);
        std::lock_guard<strata::detail::SpinLock> g(sh.mu);
        in = sh.find(key);
        if (in != nullptr && !pin(in)) in = nullptr;  // completing: complete() looks at `doomed`
      }
      if (in != nullptr) {
        (void)mark_failed(in, remote_failure(*in->plan, k.comm, k.seq, source, k.code), true);
        unpin(in);
      }
      (void)tp.signal(source, encode_abort(kAbortAckComm, k.comm, k.seq, Errc::ok), &grant_ctx);
      return;
    }
    if (k.tag == kAbortAckComm) {
      acked(key, source);
      return;
    }
    if (k.tag == kAbortSettleComm) settle(key);
  }

  // Member @p who marked the announced instance @p key failed (or died).
  void acked(std::uint64_t key, int who) {
    std::vector<int> all;
    {
      std::lock_guard<std::mutex> g(abort_mu);
      const auto it = awaiting.find(key);
      if (it == awaiting.end()) return;
      auto& w = it->second.missing;
      w.erase(std::remove(w.begin(), w.end(), who), w.end());
      if (!w.empty()) return;
      all = std::move(it->second.told);
      awaiting.erase(it);
      count_abort();
    }
    for (int m : all)
      if (!dead[static_cast<std::size_t>(m)].load())
        (void)tp.signal(m, encode_abort(kAbortSettleComm, key_comm(key), key_seq(key), Errc::ok), &grant_ctx);
    settle(key);
  }

  // Every member marked instance @p key failed: it may raise its flags and finish.
  void settle(std::uint64_t key) {
    Instance* in = nullptr;
    {
      std::lock_guard<std::mutex> g(abort_mu);
      const auto it = settling.find(key);
      if (it == settling.end()) {
        if (settled.insert(key).second) remember(key);
      } else {
        in = it->second;
        settling.erase(it);
      }
      count_abort();
    }
    if (in == nullptr) return;
    raise_flags(in);
    finish(in);
  }

  // The flag words a finished instance leaves (raised, never lowered): what the
  // window slot's next users and the peers' credit checks wait for.
  void raise_flags(Instance* in) {
    for (const Node& nd : in->plan->nodes())
      if (nd.kind == NodeKind::flag_set || nd.kind == NodeKind::publish) set_flag(in, nd, true);
  }

  // A member died: announcements stop waiting for it, and instances waiting
  // to settle whose communicator it belongs to finish now (that communicator
  // has failed as a whole).
  void abort_peer_died(int peer) {
    if (nabort.load(std::memory_order_acquire) == 0) return;
    std::vector<std::uint64_t> keys;
    std::vector<Instance*> hit;
    {
      std::lock_guard<std::mutex> g(abort_mu);
      for (auto& [k, a] : awaiting)
        if (std::find(a.missing.begin(), a.missing.end(), peer) != a.missing.end()) keys.push_back(k);
      for (auto it = settling.begin(); it != settling.end();) {
        const auto& m = it->second->plan->members();
        if (std::find(m.begin(), m.end(), peer) != m.end()) {
          hit.push_back(it->second);
          it = settling.erase(it);
        } else {
          ++it;
        }
      }
      count_abort();
    }
    for (std::uint64_t k : keys) acked(k, peer);
    for (Instance* in : hit) finish(in);
  }

  // Instance @p in starts (or completes) here after a member announced its
  // failure: it fails the same way. Returns whether it did.
  bool apply_doom(Instance* in, bool release) {
    Doom d;
    {
      std::lock_guard<std::mutex> g(abort_mu);
      const auto it = doomed.find(in->key);
      if (it == doomed.end()) return false;
      d = it->second;
    }
    const Status st = remote_failure(*in->plan, in->comm, in->seq, d.origin, d.code);
    if (release) return mark_failed(in, st, true);
    std::lock_guard<std::mutex> g(in->err_mu);
    if (in->failed.load(std::memory_order_relaxed)) return false;
    in->error = st;
    in->soft = true;
    in->failed.store(true, std::memory_order_release);
    return true;
  }

  // Shutdown: instances waiting to settle finish with their error now.
  std::size_t flush_settling() {
    if (nabort.load(std::memory_order_acquire) == 0) return 0;
    std::vector<Instance*> left;
    {
      std::lock_guard<std::mutex> g(abort_mu);
      for (auto& [k, in] : settling) left.push_back(in);
      settling.clear();
      count_abort();
    }
    for (Instance* in : left) finish(in);
    return left.size();
  }

  // Executor::pending_report: what each in-flight instance still waits for.
  std::vector<PendingCall> pending(std::int64_t older_than_ms) {
    std::vector<PendingCall> out;
    const std::int64_t now = strata::detail::coarse_ms();
    std::vector<Instance*> ins;
    for (Shard& sh : shards) {
      std::lock_guard<strata::detail::SpinLock> g(sh.mu);
      sh.each([&](Instance* in) {
        std::int64_t seen = 0;  // first sight: now; else the failed exchange loaded it
        if (in->seen_ms.compare_exchange_strong(seen, now, std::memory_order_relaxed)) seen = now;
        if (now - seen >= older_than_ms && pin(in)) ins.push_back(in);
      });
    }
    std::vector<std::pair<Instance*, NodeId>> flags;
    {
      std::lock_guard<strata::detail::SpinLock> g(flag_mu);
      flags = flag_pending;
    }
    for (Instance* in : ins) {
      const Plan& p = *in->plan;
      PendingCall c;
      c.comm = in->comm;
      c.seq = in->seq;
      c.collective = p.name();
      c.bytes = call_bytes(p);
      c.age_ms = now - in->seen_ms.load(std::memory_order_relaxed);
      c.failed = in->failed.load(std::memory_order_acquire);
      for (NodeId w : p.wait_nodes()) {
        const std::int32_t left = in->nodes[w].sig.load(std::memory_order_acquire);
        if (left <= 0) continue;
        std::string from;
        for (int r : p.peers()) from += (from.empty() ? "" : ",") + std::to_string(r);
        c.waiting.push_back("node " + std::to_string(w) + " wait(slot " + std::to_string(p.nodes()[w].slot) +
                            "): " + std::to_string(left) + " signal(s) missing, from ranks among {" + from + "}");
        c.peers.insert(c.peers.end(), p.peers().begin(), p.peers().end());
      }
      for (const auto& [fi, id] : flags) {
        if (fi != in) continue;
        const Node& nd = p.nodes()[id];
        const std::uint32_t need = (in->seq - nd.count + 1) & kSeqMask;
        const std::uint32_t word = flag_word(in, nd);
        const std::uint32_t have =
            in->flags != nullptr && in->flags[nd.peer] != nullptr ? in->flags[nd.peer][word].load() : 0;
        c.waiting.push_back("node " + std::to_string(id) + " flag_wait(rank " + std::to_string(nd.peer) + ", word " +
                            std::to_string(word) + "): needs " + std::to_string(need) + ", has " +
                            std::to_string(have) + (nd.granted ? " (a grant from another host)" : ""));
        c.peers.push_back(nd.peer);
      }
      if (c.waiting.empty())
        c.waiting.push_back(std::to_string(in->remaining.load(std::memory_order_acquire) - 1) +
                            " node(s) unfinished: transfers posted and not completed, or running");
      std::sort(c.peers.begin(), c.peers.end());
      c.peers.erase(std::unique(c.peers.begin(), c.peers.end()), c.peers.end());
      unpin(in);
      out.push_back(std::move(c));
    }
    std::sort(out.begin(), out.end(), [](const PendingCall& a, const PendingCall& b) {
      return a.comm != b.comm ? a.comm < b.comm : a.seq < b.seq;
    });
    return out;
  }

  // Forget what is known of communicator @p comm's calls (a new communicator takes its id).
  void forget_comm(std::uint16_t comm) {
    std::lock_guard<std::mutex> g(abort_mu);
    for (auto it = doomed.begin(); it != doomed.end();) it = key_comm(it->first) == comm ? doomed.erase(it) : ++it;
    for (auto it = settled.begin(); it != settled.end();) it = key_comm(*it) == comm ? settled.erase(it) : ++it;
    count_abort();
  }

  // ------------------------------------------------------------ running nodes
  // Executes node @p id; returns true when it finished synchronously.
  bool run(Instance* in, NodeId id) {
    if (in->failed.load(std::memory_order_acquire)) return true;
    const Plan& p = *in->plan;
    const Node& nd = p.nodes()[id];
    // Counted while it runs when it takes a while (Executor::cores_busy): a
    // waiter then sleeps instead of spinning on the core this node needs.
    const bool heavy =
        nd.kind == NodeKind::compute || ((nd.kind == NodeKind::copy || nd.kind == NodeKind::reduce ||
                                          nd.kind == NodeKind::read_peer || nd.kind == NodeKind::write_peer) &&
                                         nd.dst.len >= kBusyBytes);
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
    } const mark(heavy ? &working : nullptr);
    void* ctx = &in->nodes[id];
    Status st;
    switch (nd.kind) {
      case NodeKind::nop:
      case NodeKind::wait:
        return true;
      case NodeKind::copy:
        if (nd.src.len == 0) return true;
        if (nd.streaming)
          transport::stream_copy(addr(in, id, 2, nd.dst), operand(in, id, 0, nd.src, nd), nd.src.len);
        else
          std::memmove(addr(in, id, 2, nd.dst), operand(in, id, 0, nd.src, nd), nd.src.len);
        return true;
      case NodeKind::reduce: {
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
        ComputeArgs args;
        args.data = nd.src.len > 0 ? addr(in, id, 0, nd.src) : nullptr;
        args.len = nd.src.len;
        args.seq = in->seq;
        args.comm = in->comm;
        args.node = id;
        try {
          p.compute_fns()[static_cast<std::size_t>(nd.compute)](args);
        } catch (const Error& e) {
          fail_soft(in, Status(e.errc(), p.describe(id) + ": " + e.what()));
        } catch (const std::exception& e) {
          fail_soft(in, Status(Errc::internal, p.describe(id) + ": compute callable threw: " + e.what()));
        } catch (...) {
          fail_soft(in, Status(Errc::internal, p.describe(id) + ": compute callable threw"));
        }
        return true;
      }
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
      case NodeKind::flag_set:
        set_flag(in, nd);
        return true;
      case NodeKind::publish:
        publish(in, id, nd);
        return true;
      case NodeKind::read_peer: {
        if (nd.dst.len == 0 || !publication_mapped(in, id, nd)) return true;
        // The flag_wait before this node acquired the publication; the words hold the owner's address.
        const std::uint64_t base = published_word(in, nd, 2 + 2 * nd.src.buf.id);
        // The first region's handle (publish): through the reader's mapping when it has one.
        std::uint64_t h = nd.src.buf.id == 0 ? published_word(in, nd, 6) : 0;
        if (h != 0) h += nd.src.offset;
        unsigned char* d = addr(in, id, 2, nd.dst);
        if (nd.fold) {
          fold_peer(in, id, nd, d, h, base + nd.src.offset);
          return true;
        }
        Status rs(Errc::unsupported, "");
        if (h != 0) rs = tp.read_peer(nd.peer, d, h, nd.dst.len);
        if (rs.code() == Errc::unsupported)  // no handle, or not mapped here: CMA
          rs = tp.read_peer(nd.peer, d, base + nd.src.offset, nd.dst.len);
        if (!rs) fail(in, Status(rs.code(), p.describe(id) + ": " + rs.message()));
        return true;
      }
      case NodeKind::write_peer: {
        if (nd.src.len == 0 || !publication_mapped(in, id, nd)) return true;
        // The flag_wait before this node acquired the publication: the peer's address, then CMA into it.
        const std::uint64_t base = published_word(in, nd, 2 + 2 * nd.dst.buf.id);
        const Status ws = tp.write_peer(nd.peer, addr(in, id, 0, nd.src), base + nd.dst.offset, nd.src.len);
        if (!ws) fail(in, Status(ws.code(), p.describe(id) + ": " + ws.message()));
        return true;
      }
      case NodeKind::flag_wait:
        if (flag_ready(in, nd)) return true;  // the peer was on time: one load, nothing else
        if (nd.granted) {
          // Park first, then ask: the grant may arrive (and poll) at once.
          {
            std::lock_guard<strata::detail::SpinLock> g(flag_mu);
            flag_pending.emplace_back(in, id);
            nflag_pending.fetch_add(1, std::memory_order_release);
          }
          (void)tp.signal(nd.peer,
                          encode_grant(kGrantRequestComm, in->comm, nd.slot, (in->seq - nd.count + 1) & kSeqMask),
                          &grant_ctx);
          poll_flags();
          return false;
        }
        {
          // Park it; while a thread of this rank blocks (park), ask the owner
          // for a nudge and look again. A park(true) that comes later sees
          // the entry and asks itself (the pending entry, then `parked`, on
          // this side; `parked`, then the entries, on park's).
          {
            std::lock_guard<strata::detail::SpinLock> g(flag_mu);
            flag_pending.emplace_back(in, id);
            nflag_pending.fetch_add(1, std::memory_order_seq_cst);
          }
          std::atomic_thread_fence(std::memory_order_seq_cst);
          if (parked.load(std::memory_order_seq_cst) > 0) {
            want_nudge(in, nd);
            std::atomic_thread_fence(std::memory_order_seq_cst);
          }
          if (flag_ready(in, nd)) poll_flags();  // set meanwhile: release it now
        }
        return false;  // poll() releases it
    }
    if (!st) {
      fail(in, Status(st.code(), p.describe(id) + ": post rejected: " + st.message()));
      return true;
    }
    return false;  // completion releases it
  }

  // read_peer / write_peer: whether the peer's publication record is mapped
  // here (else the instance fails, naming the node and the peer).
  bool publication_mapped(Instance* in, NodeId id, const Node& nd) {
    if (in->flags != nullptr && in->flags[nd.peer] != nullptr) return true;
    fail(in, Status(Errc::invalid_argument, in->plan->describe(id) + ": flag words of rank " + std::to_string(nd.peer) +
                                                " are not mapped here (" + to_string(nd.kind) + ")"));
    return false;
  }
  // The 64-bit value in words @p at, @p at + 1 of the peer's publication record (low, high).
  static std::uint64_t published_word(const Instance* in, const Node& nd, std::uint32_t at) {
    const std::atomic<std::uint32_t>* w = in->flags[nd.peer] + nd.slot + at;
    return std::uint64_t{w[0].load(std::memory_order_relaxed)} | std::uint64_t{w[1].load(std::memory_order_relaxed)}
                                                                     << 32;
  }

  // read_peer with fold: d = d OP the peer's bytes, straight out of this
  // process's mapping of the peer's region (handle @p h), else out of a
  // temporary filled by read_peer of the plain address @p raw.
  void fold_peer(Instance* in, NodeId id, const Node& nd, unsigned char* d, std::uint64_t h, std::uint64_t raw) {
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
  static constexpr std::size_t kFoldPiece = std::size_t{64} << 10;
  // d = d OP src over @p elems elements (node @p id's operator); false when a user operator threw.
  bool fold_piece(Instance* in, NodeId id, const Node& nd, unsigned char* d, const void* src, std::size_t elems) {
    if (nd.user_op < 0) {
      reduce_kernel(nd.op, nd.dtype)(d, src, d, elems);
      return true;
    }
    return user_reduce(in, id, d, src, d, elems);
  }

  // d = a OP b with node @p id's user operator over its dst length; an
  // exception fails the instance naming the operator (never escapes).
  bool user_reduce(Instance* in, NodeId id, const void* a, const void* b, void* d) {
    const Plan& p = *in->plan;
    const Node& nd = p.nodes()[id];
    return user_reduce(in, id, a, b, d, nd.dst.len / p.user_ops()[static_cast<std::size_t>(nd.user_op)].elem_size);
  }
  bool user_reduce(Instance* in, NodeId id, const void* a, const void* b, void* d, std::size_t elems) {
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
  void set_flag(Instance* in, const Node& nd, bool raise = false) {
    if (in->flags == nullptr) return;  // unbound: no peer can wait on this rank's flags
    std::atomic<std::uint32_t>* blk = in->flags[tp.rank()];
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
  void publish(Instance* in, NodeId id, const Node& nd) {
    if (in->flags == nullptr || in->flags[tp.rank()] == nullptr) return;  // no peer can read them
    std::atomic<std::uint32_t>* blk = in->flags[tp.rank()];
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
    if (a != 0 && tp.shared_key(reinterpret_cast<const void*>(a), nd.src.len, &key))
      h = transport::region_handle(key, a);
    blk[nd.slot + 6].store(static_cast<std::uint32_t>(h), std::memory_order_relaxed);
    blk[nd.slot + 7].store(static_cast<std::uint32_t>(h >> 32), std::memory_order_relaxed);
    set_flag(in, nd);
  }

  // Sends a grant for each recorded request whose need this rank's flag now meets.
  void answer_requests() {
    std::vector<std::pair<int, std::uint64_t>> out;
    {
      std::lock_guard<std::mutex> g(grant_mu);
      std::size_t keep = 0;
      for (const GrantRequest& q : grant_requests) {
        const auto it = grant_tables.find(q.comm);
        std::atomic<std::uint32_t>* own = nullptr;
        if (it != grant_tables.end() && static_cast<std::size_t>(tp.rank()) < it->second.second)
          own = it->second.first[tp.rank()];
        if (own == nullptr) continue;  // communicator gone: drop
        const std::uint32_t have = own[q.slot].load(std::memory_order_acquire);
        Drain* const d = drain_of(q.comm);
        const auto from = static_cast<std::size_t>(q.from);
        if (d != nullptr && d->was_sent(from, q.slot, q.need)) continue;  // a grant that meets it is on its way
        if (reached(have, q.need)) {
          if (d == nullptr || d->note_sent(from, q.slot, have))
            out.emplace_back(q.from, encode_grant(kGrantComm, q.comm, q.slot, have));
        } else {
          grant_requests[keep++] = q;
        }
      }
      grant_requests.resize(keep);
      ngrant_requests.store(keep, std::memory_order_seq_cst);
    }
    for (const auto& [to, payload] : out) (void)tp.signal(to, payload, &grant_ctx);
  }

  // A grant or a request for one (payload tag kGrantComm / kGrantRequestComm).
  void handle_grant(int source, std::uint64_t payload) {
    const GrantKey k = decode_grant(payload);
    if (source < 0 || source >= nranks || k.slot >= kMaxGrantSlots) return;
    if (k.tag == kGrantComm) {
      {
        std::lock_guard<std::mutex> g(grant_mu);
        const auto it = grant_tables.find(k.comm);
        if (it == grant_tables.end() || static_cast<std::size_t>(source) >= it->second.second) return;
        std::atomic<std::uint32_t>* copy = it->second.first[source];
        if (copy == nullptr) return;
        raise_to(copy[k.slot], k.value);
      }
      poll_flags();
      return;
    }
    {
      std::lock_guard<std::mutex> g(grant_mu);
      grant_requests.push_back({k.comm, k.slot, k.value, source});
      ngrant_requests.store(grant_requests.size(), std::memory_order_seq_cst);
    }
    answer_requests();  // already met, or a flag_set raced with the push
  }

  // Never blocks: a caller that finds another thread scanning leaves a
  // re-poll request that the scanning thread honours before it returns (so a
  // flag or grant published while a scan runs is never missed).
  std::size_t poll_flags() {
    if (nflag_pending.load(std::memory_order_acquire) == 0) return 0;
    std::size_t total = 0;
    for (;;) {
      flag_repoll.store(true, std::memory_order_seq_cst);
      // The released waits: on the stack up to kSmall (no allocation per
      // released flag; this runs once per small call), beyond in `more`.
      constexpr std::size_t kSmall = 16;
      std::pair<Instance*, NodeId> small[kSmall];
      std::size_t nready = 0;
      std::vector<std::pair<Instance*, NodeId>> more;
      {
        std::unique_lock<strata::detail::SpinLock> g(flag_mu, std::try_to_lock);
        if (!g.owns_lock()) return total;  // the holder scans again
        flag_repoll.store(false, std::memory_order_seq_cst);
        std::size_t keep = 0;
        for (auto& e : flag_pending) {
          if (e.first->failed.load(std::memory_order_acquire) ||
              flag_ready(e.first, e.first->plan->nodes()[e.second])) {
            if (nready < kSmall)
              small[nready] = e;
            else
              more.push_back(e);
            ++nready;
          } else {
            flag_pending[keep++] = e;
          }
        }
        flag_pending.resize(keep);
        nflag_pending.fetch_sub(nready, std::memory_order_release);
      }
      const bool in_arena = tls_in_task == this;
      for (std::size_t i = 0; i < nready; ++i) {
        const auto [in, id] = i < kSmall ? small[i] : more[i - kSmall];
        if (tracing) record(in, id, now_ns());
        completed(in, id, in_arena);
      }
      total += nready;
      if (!flag_repoll.load(std::memory_order_seq_cst) || nflag_pending.load(std::memory_order_acquire) == 0)
        return total;
    }
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
  void finish(Instance* in, NodeId id, Work& w, bool in_arena) {
    const Plan& p = *in->plan;
    const Plan::Initial* init = p.initial().data();
    bool heavy_here = false;
    for (const NodeId* s = p.succ_begin(id); s != p.succ_end(id); ++s) {
      // A successor with one dependency (this node, no signals) is ready
      // without touching its counter: nobody else ever decrements it.
      if (init[*s].deps != 1 && in->nodes[*s].deps.fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
      const bool here = cheap(in, *s) || (in_arena && !heavy_here);
      if (here && w.push(*s)) {
        heavy_here = heavy_here || !cheap(in, *s);
        continue;
      }
      spawn(in, *s);
    }
    ++w.finished;  // counted in `remaining` when run_work ends
  }

  void run_work(Instance* in, Work& w, bool in_arena) {
    while (w.n > 0) {
      const NodeId cur = w.ids[--w.n];
      const std::uint64_t t0 = tracing ? now_ns() : 0;
      const bool finished = run(in, cur);
      if (tracing) record(in, cur, t0);
      if (finished) finish(in, cur, w, in_arena);
    }
    if (w.finished > 0) {
      const std::int64_t k = w.finished;
      w.finished = 0;
      if (in->remaining.fetch_sub(k, std::memory_order_acq_rel) == k) complete(in);
    }
  }

  void drive(Instance* in, NodeId id, bool in_arena) {
    Work w;
    w.push(id);
    run_work(in, w, in_arena);
  }

  // Node @p id completed elsewhere (a transport completion, a flag): release and run its successors.
  void completed(Instance* in, NodeId id, bool in_arena) {
    Work w;
    finish(in, id, w, in_arena);
    run_work(in, w, in_arena);
  }

  // A node became ready in a thread that may be outside the arena.
  void ready_outside(Instance* in, NodeId id) {
    const bool in_arena = tls_in_task == this;
    if (in_arena || cheap(in, id))
      drive(in, id, in_arena);
    else
      spawn(in, id);
  }

  // Inside our tasks: spawn into the task group (local deque, tracked by the
  // group). Elsewhere: enqueue into the arena, counted in `tasks`.
  void spawn(Instance* in, NodeId id) {
    spawned.fetch_add(1, std::memory_order_relaxed);
    queued.fetch_add(1, std::memory_order_relaxed);
    if (tls_in_task == this) {
      group.run(handoff([this, in, id] {
        queued.fetch_sub(1, std::memory_order_relaxed);
        drive(in, id, true);
      }));
      return;
    }
    tasks.fetch_add(1, std::memory_order_relaxed);
    arena->enqueue(handoff([this, in, id] {
      queued.fetch_sub(1, std::memory_order_relaxed);
      const Impl* prev = tls_in_task;
      tls_in_task = this;
      drive(in, id, true);
      tls_in_task = prev;
      tasks.fetch_sub(1, std::memory_order_release);
    }));
  }

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
  void complete(Instance* in, bool registered = true) {
    in->registered = registered;
    // A member announced this call failed: an instance that finished here
    // after its notice (it saw nothing of the failed data yet) fails too.
    if (nabort.load(std::memory_order_acquire) > 0 && !in->failed.load(std::memory_order_acquire))
      (void)apply_doom(in, false);
    const bool failed = in->failed.load(std::memory_order_acquire);
    if (registered) {
      Shard& sh = shard(in->key);
      std::lock_guard<strata::detail::SpinLock> g(sh.mu);
      if (in->listed)
        sh.unlink(in);
      else
        sh.map.erase(in->key);
      if (failed) tombstone(sh, in->key);
    }
    if (failed) {
      bool soft = false;
      {
        std::lock_guard<std::mutex> g(in->err_mu);
        soft = in->soft;
      }
      if (soft) {
        {
          std::lock_guard<std::mutex> g(abort_mu);
          doomed.erase(in->key);
          if (settled.erase(in->key) == 0) {
            settling[in->key] = in;  // settle() finishes it
            count_abort();
            return;
          }
          count_abort();
        }
        raise_flags(in);
      }
    }
    finish(in);
  }

  // The rest of complete(): the DoneFn, the drain watermark, the final grants.
  void finish(Instance* in) {
    const bool registered = in->registered;
    const bool failed = in->failed.load(std::memory_order_acquire);
    DoneFn done = std::move(in->done);
    Status st = failed ? in->error : Status::ok();
    // Grants of the final flag_set (set_flag), sent after done: keep the plan.
    std::shared_ptr<const Plan> gplan;
    const NodeId gnode = in->granting;
    const std::uint16_t gcomm = in->comm;
    const std::uint32_t gvalue = (in->seq + 1) & kSeqMask;
    // Nothing of the communicator left unfinished here: the next signal to a
    // peer carries kDrainedBit, which covers its next instance when the
    // communicator has >= 2 window slots; grants to the peers this plan
    // signals (and so will likely signal again) are skipped.
    // (A later instance that already runs may have signalled without the bit:
    // then the grant goes out as before.)
    // To a peer this plan does not signal (a broadcast's leaf granting its
    // root), one watermark grant every credits / 2 instances stands for all
    // of them: a peer one instance behind (lock-step) never needs more.
    bool drained = false, batch_due = false;
    Drain* const gdrain = in->drain;
    if (gdrain != nullptr) {
      const std::uint32_t wm = gdrain->done(in->seq);
      const bool last = registered ? gdrain->live.fetch_sub(1, std::memory_order_acq_rel) == 1
                                   : gdrain->live.load(std::memory_order_acquire) == 0;
      drained = last && wm == gvalue && gdrain->credits >= 2 && !failed;
      batch_due = wm % std::max<std::uint32_t>(1, gdrain->credits / 2) == 0;
    }
    if (gnode != kNoNode) {
      gplan = in->plan;
      sending.fetch_add(1, std::memory_order_acq_rel);  // the destructor waits for it
    }
    destroy(in);
    if (registered) live.fetch_sub(1, std::memory_order_acq_rel);
    if (done) done(st);
    if (gplan) {
      const Node& nd = gplan->nodes()[gnode];
      for (std::int32_t r : nd.grants) {
        // Vouching: this instance's successor `vouch` calls later signals r
        // again when the pattern repeats (a peer that needs it earlier asks).
        if (gdrain != nullptr && gdrain->vouch > 0 && gplan->signals(r)) continue;
        if (!drained) {
          // Not twice: an answer to the peer's request may have said as much already.
          if (gdrain == nullptr || gdrain->note_sent(static_cast<std::size_t>(r), nd.slot, gvalue))
            (void)tp.signal(r, encode_grant(kGrantComm, gcomm, nd.slot, gvalue), &grant_ctx);
        } else if (!gplan->signals(r) && batch_due) {
          gdrain->owe(static_cast<std::size_t>(r), gvalue);  // sent later, if at all (Drain::owed)
          owed_any.store(true, std::memory_order_release);
        }
      }
      sending.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  // Straight start (Plan::straight_preds): runs every node whose
  // predecessors are done, in id order, in this thread; a flag_wait whose
  // flag is not there yet stays undone, and so do the nodes after it. Returns
  // the mask of the nodes done. No counter, no atomic, no shard: a plan
  // whose peers are on time completes here (complete(in, false)).
  std::uint64_t run_straight(Instance* in, std::uint64_t done = 0) {
    const Plan& p = *in->plan;
    const std::uint64_t* preds = p.straight_preds().data();
    const Node* nodes = p.nodes().data();
    const std::size_t n = p.size();
    for (NodeId i = 0; i < n; ++i) {
      if (((done >> i) & 1) != 0 || (preds[i] & ~done) != 0) continue;
      const std::uint64_t t0 = tracing ? now_ns() : 0;
      if (nodes[i].kind == NodeKind::flag_wait) {
        if (!in->failed.load(std::memory_order_acquire) && !flag_ready(in, nodes[i])) continue;
      } else {
        (void)run(in, i);  // memory nodes finish synchronously
      }
      if (tracing) record(in, i, t0);
      done |= std::uint64_t{1} << i;
    }
    return done;
  }

  static void tombstone(Shard& sh, std::uint64_t key) {
    if (sh.tomb.insert(key).second) sh.tomb_order.push_back(key);
    while (sh.tomb_order.size() > 4096) {
      sh.tomb.erase(sh.tomb_order.front());
      sh.tomb_order.pop_front();
    }
  }

  static void destroy(Instance* in) {
    void* block = in->block;
    const std::size_t total = in->block_size;
    Impl* ex = in->ex;
    // Node states need no destructor (a straight start never constructs them).
    static_assert(std::is_trivially_destructible_v<NodeState>);
    // The block goes back to its plan for the next start (Plan::spare_block_);
    // the plan is held here, not by the instance being destroyed inside it.
    std::shared_ptr<const Plan> plan = std::move(in->plan);
    const std::uint64_t stamp = in->stamp;
    in->~Instance();
    new (block) Parked{stamp, ex};  // its bindings stay in the block for the next start with this stamp
    void* none = nullptr;
    if (!plan->spare_block_.compare_exchange_strong(none, block, std::memory_order_acq_rel))
      ex->free_block(block, total);
  }

  // ------------------------------------------------------------ tracing
  void record(Instance* in, NodeId id, std::uint64_t t0) {
    auto& buf = trace.local();
    if (nflows.load(std::memory_order_acquire) > 0) {
      // The node a signal released: the flow arrow from the signal ends here.
      std::uint64_t flow = 0;
      {
        std::lock_guard<std::mutex> g(flow_mu);
        auto it = flows.find(&in->nodes[id]);
        if (it != flows.end()) {
          flow = it->second;
          flows.erase(it);
          nflows.fetch_sub(1, std::memory_order_release);
        }
      }
      if (flow != 0) {
        TraceEvent f{t0, t0, name_signal, in->seq, id, in->plan->nodes()[id].kind};  // name and cat as the start
        f.type = TraceType::flow_end;
        f.id = flow;
        buf.push_back(f);
      }
    }
    buf.push_back({t0, now_ns(), in->trace_name, in->seq, id, in->plan->nodes()[id].kind});
  }
  /// An event named by the caller (category and name interned).
  void span(std::uint32_t cat, std::uint32_t name, std::uint64_t t0, std::uint64_t t1, std::int64_t arg,
            std::uint32_t seq = 0) {
    TraceEvent e{t0, t1, name, seq, 0, NodeKind::nop};
    e.type = TraceType::span;
    e.cat = cat;
    e.arg = arg;
    trace.local().push_back(e);
  }
  /// A signal arrived at @p t0 and released @p in's node @p id: a transport
  /// event on this thread and the start of a flow arrow to that node's event.
  void signal_flow(Instance* in, NodeId id, int source, std::uint64_t t0) {
    const std::uint64_t flow = next_flow.fetch_add(1, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> g(flow_mu);
      if (flows.emplace(&in->nodes[id], flow).second) nflows.fetch_add(1, std::memory_order_release);
    }
    auto& buf = trace.local();
    TraceEvent s{t0, t0, name_signal, in->seq, id, NodeKind::signal};
    s.type = TraceType::flow_start;
    s.id = flow;
    buf.push_back(s);
    span(cat_transport, name_signal, t0, now_ns(), source, in->seq);
  }
  std::uint32_t intern(const std::string& name) {
    std::lock_guard<std::mutex> g(names_mu);
    auto it = name_ids.find(name);
    if (it != name_ids.end()) return it->second;
    names.push_back(name);
    return name_ids[name] = static_cast<std::uint32_t>(names.size() - 1);
  }
  void flush() {
    if (!tracing) return;
    std::ofstream f(trace_file, std::ios::app);
    if (!f) return;
    std::lock_guard<std::mutex> g(names_mu);
    const int rank = tp.rank();
    std::size_t tid = 0;
    for (auto& buf : trace) {
      for (const TraceEvent& e : buf) {
        f << "{\"name\":\"";
        write_escaped(f, names[e.name]);
        if (e.type == TraceType::node) f << "#" << e.seq << " " << to_string(e.kind);
        f << "\",\"cat\":\"";
        write_escaped(f, e.type == TraceType::span ? names[e.cat] : std::string("dag"));
        f << "\",\"pid\":" << rank << ",\"tid\":" << tid << ",\"ts\":";
        write_us(f, e.start_ns);
        switch (e.type) {
          case TraceType::node:
            f << ",\"ph\":\"X\",\"dur\":";
            write_us(f, e.end_ns - e.start_ns);
            f << ",\"args\":{\"node\":" << e.node << "}}\n";
            break;
          case TraceType::span:
            f << ",\"ph\":\"X\",\"dur\":";
            write_us(f, e.end_ns - e.start_ns);
            f << ",\"args\":{\"seq\":" << e.seq;
            if (e.arg >= 0) f << ",\"peer\":" << e.arg;
            f << "}}\n";
            break;
          case TraceType::flow_start:
            f << ",\"ph\":\"s\",\"id\":" << e.id << "}\n";
            break;
          case TraceType::flow_end:
            f << ",\"ph\":\"f\",\"bp\":\"e\",\"id\":" << e.id << "}\n";
            break;
        }
      }
      buf.clear();
      ++tid;
    }
  }
};

// ------------------------------------------------------------------ Executor

Executor::Executor(transport::Transport& t, ExecutorOptions opts) : impl_(std::make_unique<Impl>(t, std::move(opts))) {
  if (impl_->opts.install_handlers) {
    t.set_completion_handler([this](void* ctx, const Status& s) { handle_completion(ctx, s); });
    t.set_signal_handler([this](int src, std::uint64_t p) { handle_signal(src, p); });
    t.set_peer_failure_handler([this](int peer, const Status& why) { handle_peer_failure(peer, why); });
  }
}

Executor::~Executor() {
  Impl& im = *impl_;
  // Cancel everything in flight, then let posted operations drain.
  std::vector<std::uint64_t> keys;
  for (Shard& sh : im.shards) {
    std::lock_guard<strata::detail::SpinLock> g(sh.mu);
    sh.each([&](Instance* in) { keys.push_back(in->key); });
  }
  for (std::uint64_t k : keys) cancel(static_cast<std::uint16_t>(k >> 32), static_cast<std::uint32_t>(k & kSeqMask));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((im.live.load() > 0 || im.tasks.load() > 0 || im.sending.load() > 0) &&
         std::chrono::steady_clock::now() < deadline) {
    if (im.tp.progress() + im.poll_flags() + im.flush_settling() == 0) std::this_thread::yield();
  }
  (void)im.flush_settling();  // straight-started ones are not counted in `live`
  im.arena->execute([&] { im.group.wait(); });
  im.flush();
  if (im.opts.install_handlers) {
    im.tp.set_completion_handler(nullptr);
    im.tp.set_signal_handler(nullptr);
    im.tp.set_peer_failure_handler(nullptr);
  }
}

tbb::task_arena& Executor::arena() noexcept { return *impl_->arena; }
transport::Transport& Executor::transport() noexcept { return impl_->tp; }
void Executor::flush_trace() { impl_->flush(); }
bool Executor::tracing() const noexcept { return impl_->tracing; }
void Executor::trace_event(const std::string& cat, const std::string& name, std::uint64_t start_ns,
                           std::uint64_t end_ns, std::uint32_t seq, std::int64_t peer) {
  Impl& im = *impl_;
  if (!im.tracing) return;
  im.span(im.intern(cat), im.intern(name), start_ns, end_ns, peer, seq);
}
std::uint64_t Executor::trace_now_ns() noexcept { return now_ns(); }
std::size_t Executor::poll() { return impl_->poll_flags(); }
std::vector<PendingCall> Executor::pending_report(std::int64_t older_than_ms) { return impl_->pending(older_than_ms); }
void Executor::park(bool parking) { impl_->park(parking); }
std::size_t Executor::in_flight() const { return static_cast<std::size_t>(impl_->live.load()); }
std::uint64_t Executor::tasks_spawned() const noexcept { return impl_->spawned.load(std::memory_order_relaxed); }
bool Executor::serial() const noexcept { return impl_->serial; }
bool Executor::cores_busy() const noexcept {
  // Tasks not started yet (they wait for the very CPU a spinning waiter
  // holds) plus long nodes running, in tasks or inline.
  return impl_->queued.load(std::memory_order_relaxed) + impl_->working.load(std::memory_order_relaxed) >=
         impl_->concurrency;
}

std::uint32_t Executor::next_seq(std::uint16_t comm) {
  std::lock_guard<std::mutex> g(impl_->seq_mu);
  return impl_->seqs[comm]++ & kSeqMask;
}

namespace {
// Offsets in an instance's block: Instance, node states, buffer bindings, scratch.
struct BlockLayout {
  std::size_t off_nodes = 0;
  std::size_t off_bufs = 0;
  std::size_t off_scratch = 0;
  std::size_t total = 0;
};
// Binds user input / output @p d from @p b into @p base; false (base
// untouched) when it is not bound. Inputs and outputs are bound at every
// start, pre-built or not.
bool bind_user(const BufferDecl& d, const Bindings& b, unsigned char*& base) {
  if (d.ref.kind == BufferKind::input) {
    if (d.ref.id >= b.inputs.size() || (b.inputs[d.ref.id] == nullptr && d.size > 0)) return false;
    base = static_cast<unsigned char*>(const_cast<void*>(b.inputs[d.ref.id]));
  } else {
    if (d.ref.id >= b.outputs.size() || (b.outputs[d.ref.id] == nullptr && d.size > 0)) return false;
    base = static_cast<unsigned char*>(b.outputs[d.ref.id]);
  }
  return true;
}

BlockLayout block_layout(const Plan& p) {
  BlockLayout L;
  L.off_nodes = align_up(sizeof(Instance));
  L.off_bufs = align_up(L.off_nodes + p.size() * sizeof(NodeState));
  L.off_scratch = align_up(L.off_bufs + p.buffers().size() * sizeof(BufBind));
  L.total = L.off_scratch;
  for (const BufferDecl& d : p.buffers())
    if (d.ref.kind == BufferKind::scratch) L.total = align_up(L.total + d.size);
  return L;
}
}  // namespace

Status Executor::start(std::shared_ptr<const Plan> plan, const Bindings& b, std::uint16_t comm, std::uint32_t seq,
                       DoneFn done) {
  Status st = start_unchecked(std::move(plan), b, comm, seq, std::move(done));
  // A sequence number that never starts never finishes: the communicator's
  // drain watermark (if any) can no longer pass it.
  if (!st)
    if (Drain* d = impl_->drain_of(comm); d != nullptr) d->abandon();
  return st;
}

Status Executor::start_unchecked(std::shared_ptr<const Plan> plan, const Bindings& b, std::uint16_t comm,
                                 std::uint32_t seq, DoneFn done) {
  Impl& im = *impl_;
  if (!plan) return {Errc::invalid_argument, "Executor::start: plan is null"};
  const Plan& p = *plan;
  // Built only on an error path: formatting it eagerly cost ~0.1 us per start (perf).
  const auto who = [&] {
    return "Executor::start(plan '" + p.name() + "', rank " + std::to_string(im.tp.rank()) + ", comm " +
           std::to_string(comm) + ", seq " + std::to_string(seq) + ")";
  };
  if (seq > kSeqMask) return {Errc::invalid_argument, who() + ": seq exceeds 2^28-1"};
  if (p.rank() != im.tp.rank() || p.nranks() != im.tp.size())
    return {Errc::invalid_argument, who() + ": plan is rank " + std::to_string(p.rank()) + " of " +
                                        std::to_string(p.nranks()) + " but the transport is rank " +
                                        std::to_string(im.tp.rank()) + " of " + std::to_string(im.tp.size())};
  for (int peer : p.peers())
    if (im.dead[static_cast<std::size_t>(peer)].load())
      return {Errc::peer_dead, who() + ": peer rank " + std::to_string(peer) + " is dead"};

  // One block: Instance, node states, buffer bindings, scratch.
  const std::size_t n = p.size();
  const std::size_t nb = p.buffers().size();
  const BlockLayout L = block_layout(p);
  // A block goes back to its plan for a later start, else to the executor.
  const auto unbound = [&](const BufferDecl& d) -> Status {
    return {Errc::invalid_argument, who() + (d.ref.kind == BufferKind::input ? ": input " : ": output ") +
                                        std::to_string(d.ref.id) + " (" + std::to_string(d.size) +
                                        " bytes) is not bound"};
  };
  const auto give_back = [&](void* blk) {
    void* none = nullptr;
    if (!p.spare_block_.compare_exchange_strong(none, blk, std::memory_order_acq_rel)) im.free_block(blk, L.total);
  };
  // Publishes the instance in @p block (bindings: @p binds, or already in the block when null) and launches its roots.
  const auto launch = [&](void* block, const BufBind* binds) -> Status {
    const std::uint64_t key = make_key(comm, seq);
    auto* in = new (block) Instance;  // member initializers only (no zeroing of the whole)
    in->ex = &im;
    in->block_size = L.total;
    in->stamp = b.stamp;
    in->plan = std::move(plan);
    in->key = key;
    in->comm = comm;
    in->seq = seq & kSeqMask;
    in->done = std::move(done);
    in->block = block;
    in->nodes = reinterpret_cast<NodeState*>(static_cast<unsigned char*>(block) + L.off_nodes);
    in->bufs = reinterpret_cast<BufBind*>(static_cast<unsigned char*>(block) + L.off_bufs);
    in->flags = b.flags;
    in->shadows = b.flag_shadows;
    in->shadow_words = b.flag_shadows != nullptr ? b.shadow_words : 0;
    in->flag_wake = b.flag_wake;
    in->shift = b.shift;
    in->drain = b.flags != nullptr ? im.drain_of(comm) : nullptr;
    if (im.tracing) in->trace_name = im.intern(in->plan->name());
    if (binds != nullptr)
      for (std::size_t j = 0; j < nb; ++j) {
        BufBind* bb = new (&in->bufs[j]) BufBind(binds[j]);
        if (p.buffers()[j].ref.kind == BufferKind::scratch) {
          bb->base = static_cast<unsigned char*>(block) + bb->key.reserved;
          bb->key = transport::RemoteKey{};
        }
      }
    // Watermarks earlier instances owe the peers this one does not signal.
    if (in->drain != nullptr && in->drain->any_owed.load(std::memory_order_acquire))
      im.send_owed(in->drain, in->plan.get());
    // A member announced this call failed before it started here: it runs
    // nothing (its waits expect no signal) and settles like the others.
    const bool pre_failed = im.nabort.load(std::memory_order_acquire) > 0 && im.apply_doom(in, false);
    // Straight plans whose memory nodes all run inline (cheap()): run them
    // here first; the instance is published only if a flag is not there yet.
    const std::vector<std::uint64_t>& preds = p.straight_preds();
    std::uint64_t ran = 0;
    if (!preds.empty() && (im.serial || p.straight_bytes() <= im.opts.inline_bytes)) {
      if (im.live.load(std::memory_order_acquire) > 0) {
        Shard& sh = im.shard(key);
        std::lock_guard<strata::detail::SpinLock> g(sh.mu);
        if (sh.find(key) != nullptr) {
          Impl::destroy(in);
          return {Errc::invalid_argument, who() + ": this (comm, seq) is already in flight"};
        }
      }
      ran = im.run_straight(in);
      const std::uint64_t all = n == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1;
      // A late flag when nothing else is in flight here (a blocking-style
      // call, not one of a stream): look again a few times before paying for
      // the publication (ExecutorOptions::start_spins, docs/dag.md).
      if (ran != all && im.opts.start_spins > 0 && im.live.load(std::memory_order_relaxed) == 0)
        for (int k = 0; k < im.opts.start_spins && ran != all; ++k) {
          strata::detail::cpu_relax();
          ran = im.run_straight(in, ran);
        }
      if (ran == all) {
        im.complete(in, false);
        return Status::ok();
      }
    }
    const Plan::Initial* init = p.initial().data();
    std::int64_t left = static_cast<std::int64_t>(n);
    for (NodeId i = 0; i < n; ++i) {
      NodeState* ns = new (&in->nodes[i]) NodeState();
      // After a partial straight run: the predecessors still to finish.
      // (ran != 0 only for straight plans: at most 64 nodes, so i < 64 below.)
      const std::int32_t deps =
          ran == 0 ? init[i].deps : static_cast<std::int32_t>(__builtin_popcountll(preds[i] & ~ran));
      if (ran != 0 && ((ran >> i) & 1) != 0) --left;
      ns->deps.store(deps, std::memory_order_relaxed);
      ns->sig.store(init[i].sig, std::memory_order_relaxed);
      ns->inst = in;
    }
    in->remaining.store(left + 1, std::memory_order_relaxed);  // + start token

    std::vector<std::uint32_t> early;
    // Counted before it is published: a signal handler may launch its nodes at once.
    Drain* const drain = in->drain;
    if (drain != nullptr) drain->live.fetch_add(1, std::memory_order_acq_rel);
    {
      Shard& sh = im.shard(key);
      std::lock_guard<strata::detail::SpinLock> g(sh.mu);
      if (sh.find(key) != nullptr) {
        Impl::destroy(in);
        if (drain != nullptr) drain->live.fetch_sub(1, std::memory_order_acq_rel);  // start() abandons the watermark
        return {Errc::invalid_argument, who() + ": this (comm, seq) is already in flight"};
      }
      if (p.wait_nodes().empty()) {
        sh.link(in);  // no signal can name it
      } else {
        Entry& e = sh.map[key];
        sh.tomb.erase(key);
        e.inst = in;
        early.swap(e.early);
      }
    }
    im.live.fetch_add(1, std::memory_order_acq_rel);
    // A failure notice that came while this instance was being started (the
    // check above was too early, the notice's lookup too): fail it now.
    if (pre_failed)
      im.release_waits(in);  // its waits expect no signal
    else if (im.nabort.load(std::memory_order_acquire) > 0)
      (void)im.apply_doom(in, true);
    for (std::uint32_t slot : early) {
      const NodeId w = in->plan->wait_node(slot);
      if (w == kNoNode) {
        im.fail(in, Status(Errc::internal, who() + ": an early signal named slot " + std::to_string(slot) +
                                               ", which no wait node uses"));
        continue;
      }
      NodeState& ns = in->nodes[w];
      std::int32_t v = ns.sig.load(std::memory_order_acquire);
      while (v > 0 && !ns.sig.compare_exchange_weak(v, v - 1, std::memory_order_acq_rel)) {
      }
      if (v > 0 && ns.deps.fetch_sub(1, std::memory_order_acq_rel) == 1) im.ready_outside(in, w);
    }
    // Roots (wait nodes are released by their signals only); the start token
    // keeps the instance alive while we launch them. After a partial straight
    // run: the nodes not done whose predecessors are (its late flag_waits).
    if (ran == 0) {
      for (const NodeId i : p.roots()) im.ready_outside(in, i);
    } else {
      for (NodeId i = 0; i < n; ++i)
        if (((ran >> i) & 1) == 0 && (preds[i] & ~ran) == 0) im.ready_outside(in, i);
    }
    im.unpin(in);
    return Status::ok();
  };

  // Pre-built instance: the block of this plan's last finished instance, with
  // its peer and scratch bindings still resolved and checked for the same
  // stamp (Bindings::stamp). Only the inputs and outputs are bound (and
  // checked) again: a cached plan's start resolves nothing else.
  if (b.stamp != 0) {
    void* spare = p.spare_block_.exchange(nullptr, std::memory_order_acq_rel);
    if (spare != nullptr) {
      const Parked parked = *static_cast<const Parked*>(spare);
      if (parked.stamp == b.stamp && parked.ex == &im) {
        auto* bufs = reinterpret_cast<BufBind*>(static_cast<unsigned char*>(spare) + L.off_bufs);
        for (std::size_t j = 0; j < nb; ++j) {
          const BufferDecl& d = p.buffers()[j];
          if ((d.ref.kind == BufferKind::input || d.ref.kind == BufferKind::output) && !bind_user(d, b, bufs[j].base)) {
            give_back(spare);
            return unbound(d);
          }
        }
        return launch(spare, nullptr);
      }
      give_back(spare);  // bound for another stamp: resolved again below
    }
  }

  // Resolve bindings before allocating.
  // Bindings resolved on the stack for the common small plans (no allocation).
  constexpr std::size_t kInlineBinds = 8;
  // Raw: only the entries used are constructed (zeroing all eight cost a
  // `rep stos` of 576 bytes per start, ~10% of it: perf).
  alignas(BufBind) unsigned char small[kInlineBinds * sizeof(BufBind)];
  std::vector<BufBind> large;
  if (nb > kInlineBinds) large.resize(nb);
  BufBind* binds = nb > kInlineBinds ? large.data() : reinterpret_cast<BufBind*>(small);
  std::size_t scratch_at = L.off_scratch;
  for (std::size_t j = 0; j < nb; ++j) {
    const BufferDecl& d = p.buffers()[j];
    if (nb <= kInlineBinds) new (&binds[j]) BufBind();
    switch (d.ref.kind) {
      case BufferKind::input:
      case BufferKind::output:
        if (!bind_user(d, b, binds[j].base)) return unbound(d);
        break;
      case BufferKind::scratch:
        binds[j].base = nullptr;  // fixed up after allocation
        binds[j].key.reserved = scratch_at;
        scratch_at = align_up(scratch_at + d.size);
        break;
      case BufferKind::peer: {
        const std::vector<PeerKey>& table = b.peer_table != nullptr ? *b.peer_table : b.peers;
        auto it = std::find_if(table.begin(), table.end(),
                               [&](const PeerKey& k) { return k.rank == d.ref.peer && k.id == d.ref.id; });
        if (it == table.end())
          return {Errc::invalid_argument, who() + ": peer buffer " + std::to_string(d.ref.id) + " of rank " +
                                              std::to_string(d.ref.peer) + " is not bound"};
        if (!it->key.valid() || it->key.owner != d.ref.peer || it->key.len < d.size)
          return {Errc::invalid_argument, who() + ": key of peer buffer " + std::to_string(d.ref.id) + " of rank " +
                                              std::to_string(d.ref.peer) + " is invalid or shorter than " +
                                              std::to_string(d.size) + " bytes"};
        binds[j].key = it->key;
        binds[j].base = static_cast<unsigned char*>(it->mapped);
        break;
      }
    }
  }
  for (const std::uint32_t j : p.mapped_reads())
    if (binds[j].base == nullptr)
      return {Errc::invalid_argument, who() + ": peer buffer " + std::to_string(p.buffers()[j].ref.id) + " of rank " +
                                          std::to_string(p.buffers()[j].ref.peer) +
                                          " is read directly but not mapped here (PeerKey::mapped)"};

  if (p.flag_words() > 0) {
    // Memory-protocol nodes: every flag_wait peer's flags must be mapped here
    // (flag_set without a bound block of its own does nothing).
    auto mapped = [&](int r) {
      return b.flags != nullptr && static_cast<std::size_t>(r) < b.nflags && b.flags[r] != nullptr;
    };
    for (const int r : p.flag_peers())
      if (!mapped(r))
        return {Errc::invalid_argument,
                who() + ": flag words of rank " + std::to_string(r) + " are not mapped here (flag_wait)"};
  }

  // The block of this plan's last finished instance, else a new one.
  void* block = p.spare_block_.exchange(nullptr, std::memory_order_acq_rel);
  if (block == nullptr) block = im.alloc_block(L.total);
  return launch(block, binds);
}

bool Executor::cancel(std::uint16_t comm, std::uint32_t seq) {
  Impl& im = *impl_;
  const std::uint64_t key = make_key(comm, seq);
  Instance* in = nullptr;
  {
    Shard& sh = im.shard(key);
    std::lock_guard<strata::detail::SpinLock> g(sh.mu);
    in = sh.find(key);
    if (in == nullptr || !im.pin(in)) return false;
  }
  im.fail(in, Status(Errc::cancelled, "plan '" + in->plan->name() + "' comm " + std::to_string(comm) + " seq " +
                                          std::to_string(seq) + " cancelled on rank " + std::to_string(im.tp.rank())));
  im.unpin(in);
  return true;
}

void Executor::handle_completion(void* context, const Status& status) {
  Impl& im = *impl_;
  if (context == &im.grant_ctx) return;  // a grant (or request) was sent: nothing waits for it
  auto* ns = static_cast<NodeState*>(context);
  if (ns == nullptr) return;  // operations posted by others without a context
  Instance* in = ns->inst;
  const auto id = static_cast<NodeId>(ns - in->nodes);
  if (!status) {
    const Node& nd = in->plan->nodes()[id];
    im.fail(in, Status(status.code(), in->plan->describe(id) + " on peer " + std::to_string(nd.peer) +
                                          " failed: " + status.message()));
  }
  if (im.tracing) {
    const std::uint64_t t = now_ns();
    im.span(im.cat_transport, im.name_completion, t, t, in->plan->nodes()[id].peer, in->seq);
    im.record(in, id, t);
  }
  im.completed(in, id, tls_in_task == &im);
}

void Executor::handle_signal(int source, std::uint64_t payload) {
  Impl& im = *impl_;
  const SignalKey k = decode_signal(payload);
  if (k.comm == kGrantComm || k.comm == kGrantRequestComm) {
    im.handle_grant(source, payload);
    return;
  }
  if (k.comm == kWatermarkComm) {
    const GrantKey g = decode_grant(payload);
    im.apply_watermark(source, g.comm, g.value);
    return;
  }
  if (k.comm == kAbortNoticeComm || k.comm == kAbortAckComm || k.comm == kAbortSettleComm) {
    im.on_abort(source, payload);
    return;
  }
  if (k.drained)
    im.apply_watermark(source, k.comm, k.seq);
  else
    im.apply_vouch(source, k.comm, k.seq);
  const std::uint64_t key = make_key(k.comm, k.seq);
  Instance* in = nullptr;
  {
    Shard& sh = im.shard(key);
    std::lock_guard<strata::detail::SpinLock> g(sh.mu);
    if (sh.tomb.count(key) != 0) return;  // instance already failed here
    // A listed instance (no wait nodes) is found too: the signal is then an
    // error below, not an early signal kept forever.
    in = sh.find(key);
    if (in == nullptr || !im.pin(in)) {
      sh.map[key].early.push_back(k.slot);
      return;
    }
  }
  const NodeId w = in->plan->wait_node(k.slot);
  if (w == kNoNode) {
    im.fail(in,
            Status(Errc::internal, "plan '" + in->plan->name() + "' rank " + std::to_string(im.tp.rank()) + " seq " +
                                       std::to_string(k.seq) + ": signal from rank " + std::to_string(source) +
                                       " for slot " + std::to_string(k.slot) + ", which no wait node uses"));
  } else {
    NodeState& ns = in->nodes[w];
    std::int32_t v = ns.sig.load(std::memory_order_acquire);
    while (v > 0 && !ns.sig.compare_exchange_weak(v, v - 1, std::memory_order_acq_rel)) {
    }
    if (v > 0 && ns.deps.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      if (im.tracing) im.signal_flow(in, w, source, now_ns());
      im.ready_outside(in, w);
    }
  }
  im.unpin(in);
}

void Executor::bind_flags(std::uint16_t comm, std::atomic<std::uint32_t>* const* table, std::size_t n) {
  bind_flags(comm, table, n, {}, 0, 0, 0);
}

void Executor::bind_flags(std::uint16_t comm, std::atomic<std::uint32_t>* const* table, std::size_t n,
                          std::vector<std::uint8_t> copies, std::uint32_t credits, std::uint32_t next_seq,
                          std::uint32_t vouch) {
  Impl& im = *impl_;
  im.forget_comm(comm);  // a new communicator with this id, or none: earlier failure notices are not its own
  std::lock_guard<std::mutex> g(im.grant_mu);
  if (std::atomic<std::atomic<Drain*>*>& at = im.drains_at; at.load(std::memory_order_relaxed) != nullptr)
    if (Drain* d = at.load(std::memory_order_relaxed)[comm].load(std::memory_order_relaxed); d != nullptr)
      d->active.store(false, std::memory_order_release);
  if (table == nullptr) {
    im.grant_tables.erase(comm);
    return;
  }
  im.grant_tables[comm] = {table, n};
  if (copies.empty()) return;
  if (im.drains == nullptr) {
    im.drains.reset(new std::atomic<Drain*>[std::size_t{1} << 16]());
    im.drains_at.store(im.drains.get(), std::memory_order_release);
  }
  im.drain_store.push_back(std::make_unique<Drain>());
  Drain* d = im.drain_store.back().get();
  d->wm.store(next_seq & kSeqMask, std::memory_order_relaxed);
  d->credits = credits;
  // Vouching needs the window slot of a 28-bit sequence number: credits a power of two.
  d->vouch = vouch > 0 && vouch < credits && credits <= kMaxGrantSlots && (credits & (credits - 1)) == 0 ? vouch : 0;
  d->first = next_seq & kSeqMask;
  d->copies = std::move(copies);
  d->sent.reset(new std::atomic<std::uint32_t>[d->copies.size() * kMaxGrantSlots]());
  d->owed.reset(new std::atomic<std::uint32_t>[d->copies.size()]());
  d->comm = comm;
  im.drains[comm].store(d, std::memory_order_release);
  d->active.store(true, std::memory_order_release);
}

void Executor::handle_peer_failure(int peer, const Status& why) {
  Impl& im = *impl_;
  if (peer < 0 || peer >= im.nranks) return;
  im.dead[static_cast<std::size_t>(peer)].store(true);
  std::vector<Instance*> hit;
  for (Shard& sh : im.shards) {
    std::lock_guard<strata::detail::SpinLock> g(sh.mu);
    sh.each([&](Instance* in) {
      if (in->plan->involves(peer) && im.pin(in)) hit.push_back(in);
    });
  }
  for (Instance* in : hit) {
    im.fail(in, Status(Errc::peer_dead, "plan '" + in->plan->name() + "' rank " + std::to_string(im.tp.rank()) +
                                            " seq " + std::to_string(in->seq) + ": peer " + std::to_string(peer) +
                                            " died: " + why.message()));
    im.unpin(in);
  }
  im.abort_peer_died(peer);
}

}  // namespace dag
}  // namespace strata
