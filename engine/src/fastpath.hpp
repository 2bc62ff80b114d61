// The small-message fast path (docs/algorithms.md, "Fast path").
//
// A collective whose data per rank is small and whose members all share one
// host skips the plan and the executor: every member owns a small area at the
// end of its communicator window (a mapped SharedRegion), with a ring of
// `slots` entries. Call k of the communicator's fast calls writes this rank's
// contribution into its entry k % slots and publishes the entry's sequence
// word (release); every member that needs it reads the entry straight out of
// its own mapping of the owner's area (acquire), folds or copies it into the
// receive buffer, and publishes its `done` count. An entry is rewritten only
// when every member's `done` shows it finished the call that used it before,
// so the ring needs no acknowledgement messages.
//
// Completion is driven by whoever looks: the posting call itself (the last
// member to arrive completes at once), a waiter's spin, and every
// Transport::progress() call (the progress hook: server threads and inline
// waiters). A waiter that gives up spinning and blocks counts itself in its
// area's sleeper word first (FutureContext::park); a member that arrives later
// and sees a sleeper sends that rank one transport signal (the "nudge",
// communicator id kFastNudgeComm) so that its progress servers wake up; a
// Dekker pair (the sleeper count and the sequence word, each followed by a full
// fence) makes sure no wake-up is lost. A call never blocks its caller for a
// ring entry: when entry k % slots still serves call k - slots on some member,
// call k is queued (Op::posted false) and published later, in order, by
// whoever drives completion (poll: waiters, the progress hook). A rank with
// queued calls publishes the done count it waits for in its `want` word; a
// member whose done count reaches it nudges that rank when it has a sleeper
// (Dekker again: want then done on one side, done then want on the other).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "strata/collectives/compile.hpp"
#include "strata/dag/executor.hpp"
#include "strata/future.hpp"
#include "strata/transport/progress.hpp"
#include "strata/transport/transport.hpp"

namespace strata::detail {

/// Communicator id of nudge signals (never given to a communicator; 0xFFFF is the windows').
inline constexpr std::uint16_t kFastNudgeComm = 0xFFFE;
/// Completion context of a nudge signal (executor contexts are aligned, window ones have bit 0 set).
inline void* fast_nudge_context() noexcept { return reinterpret_cast<void*>(std::uintptr_t{2}); }

/// Guards the engine's future-context hooks (progress, spin, park) against the
/// engine's shutdown: a hook call enters (false once closed) and leaves;
/// close() clears `live` (FutureContext::live) and waits for the calls inside.
struct HookGuard {
  std::atomic<bool> live{true};
  std::atomic<int> users{0};
  [[nodiscard]] bool enter() noexcept {
    users.fetch_add(1, std::memory_order_seq_cst);
    if (live.load(std::memory_order_seq_cst)) return true;
    users.fetch_sub(1, std::memory_order_release);
    return false;
  }
  void leave() noexcept { users.fetch_sub(1, std::memory_order_release); }
  void close() noexcept {
    live.store(false, std::memory_order_seq_cst);
    while (users.load(std::memory_order_acquire) > 0) std::this_thread::yield();
  }
  /// Runs @p f inside the guard; @p closed when the engine is gone.
  template <class F, class R>
  R run(F&& f, R closed) {
    if (!enter()) return closed;
    struct Leave {
      HookGuard* g;
      ~Leave() { g->leave(); }
    } l{this};
    return f();
  }
};

/// STRATA_FASTPATH (on | off, default on) and STRATA_FASTPATH_BYTES (largest
/// contribution per rank, default 0: ring entries off, only the shared-buffer
/// direct mode; else the tuning table's
/// fastpath_bytes, per engine), read once.
struct FastConfig {
  bool enabled = true;
  std::size_t bytes = 0;
  bool bytes_from_env = false;  ///< STRATA_FASTPATH_BYTES was given (wins over the tuning table)
  int slots = 8;                ///< calls in flight per communicator before a rank waits for the slowest
  static const FastConfig& get();
};

/// Bytes of the fast area at the end of each member's window for @p n ranks.
std::size_t fast_area_bytes(const FastConfig& cfg);

/// One communicator's fast path on this rank.
class FastChannel : public std::enable_shared_from_this<FastChannel> {
 public:
  /// @p areas[r] is communicator rank r's area as mapped here (areas[me] is
  /// this rank's own); @p world maps communicator ranks to world ranks.
  static std::shared_ptr<FastChannel> create(transport::Transport& t, transport::ProgressServer* servers,
                                             std::shared_ptr<FutureContext> base, std::shared_ptr<HookGuard> guard,
                                             std::uint16_t comm_id, int me, std::vector<int> world,
                                             std::vector<std::byte*> areas, const FastConfig& cfg);
  FastChannel(const FastChannel&) = delete;
  FastChannel& operator=(const FastChannel&) = delete;

  /// True when @p c runs on the fast path (kind, automatic algorithm, size;
  /// or larger with CollOptions::shared_buffers, see direct()).
  [[nodiscard]] bool takes(const coll::Call& c) const noexcept;
  /// True when @p c (taken) runs in single-copy mode: too large for a ring
  /// entry, shared_buffers set; the entries then carry the key of the
  /// owner's buffer and the readers copy straight out of it.
  [[nodiscard]] bool direct(const coll::Call& c) const noexcept;
  /// Posts @p c (send / recv as CommImpl::submit receives them).
  /// Posts @p c; the owner (set_owner) stays alive until the call completes.
  Future<void> submit(const coll::Call& c, const void* send, void* recv);
  /// The communicator that owns this channel (kept alive by pending calls).
  void set_owner(std::weak_ptr<void> owner) { owner_ = std::move(owner); }
  /// Records every call as a trace event ("<kind> fast path", category
  /// "fast", args seq = the call's number k, from the call to its completion) through @p exec while it is
  /// non-null (the engine clears it before the executor goes). Set before the first call.
  void set_tracer(const std::atomic<dag::Executor*>* exec) { tracer_ = exec; }
  /// Completes what can be completed (never blocks: skips when another thread
  /// is at it); returns the calls completed.
  std::size_t poll();
  /// Fails every pending call and every later one with @p why.
  void fail(const Status& why);
  [[nodiscard]] bool pending() const noexcept { return npending_.load(std::memory_order_acquire) > 0; }
  /// A progress server of this rank blocks (true) or runs again (false):
  /// counted in the sleeper word like a parked waiter.
  void park_server(bool parking);
  /// The waiter spin budget pending direct calls ask for (0 when none is pending).
  [[nodiscard]] std::chrono::microseconds direct_spin() const noexcept {
    return std::chrono::microseconds(
        ndirect_.load(std::memory_order_relaxed) > 0 ? spin_us_.load(std::memory_order_relaxed) : 0u);
  }

 private:
  FastChannel(transport::Transport& t, transport::ProgressServer* servers, std::shared_ptr<FutureContext> base,
              std::uint16_t comm_id, int me, std::vector<int> world, std::vector<std::byte*> areas,
              const FastConfig& cfg);
  struct Op {
    std::uint64_t k = 0;
    coll::Kind kind = coll::Kind::barrier;
    std::size_t count = 0;
    std::size_t esize = 1;
    dag::ReduceKernel kernel = nullptr;
    std::shared_ptr<const dag::UserReduce> user;
    int root = 0;
    bool in_place = false;
    const void* send = nullptr;
    void* recv = nullptr;
    bool posted = false;                   // entry k published (false: queued behind a busy ring entry)
    bool direct = false;                   // single-copy mode (the entries hold buffer keys)
    bool finished = false;                 // direct: own copies done, waiting for the readers of own buffers
    const std::byte* own = nullptr;        // direct: the buffer this rank published
    std::shared_ptr<const Status> error;   // direct: a peer's buffer could not be read (null: fine)
    std::optional<Promise<void>> promise;  // empty until the call is posted (a Promise allocates its state)
    std::shared_ptr<void> keep;            // the communicator, alive until the call completes
    std::uint64_t t0 = 0;                  // tracing: when the call was made
  };
  // Shared layout (see fastpath.cpp).
  std::atomic<std::uint64_t>& done_of(int r) const noexcept;
  std::atomic<std::uint32_t>& sleepers_of(int r) const noexcept;
  std::atomic<std::uint64_t>& seq_of(int r, std::uint64_t k) const noexcept;
  std::byte* data_of(int r, std::uint64_t k) const noexcept;

  [[nodiscard]] bool needs(const Op& op, int r) const noexcept;
  std::size_t publish_bytes(const coll::Call& c) const noexcept;
  /// The buffer this rank contributes to @p op (nullptr, 0: none).
  std::pair<const void*, std::size_t> contribution(const Op& op) const;
  /// Publishes entry op.k: the contribution's bytes, or (op.direct) its key; sets op.own and op.posted.
  void publish(Op& op);
  /// Whether ring entry k % slots is free: every member finished call k - slots.
  [[nodiscard]] bool entry_free(std::uint64_t k) const noexcept;
  /// Publishes the queued calls whose entries are free, in order; mu_ held.
  /// Returns the calls posted.
  std::size_t post_queued_locked();
  /// Builds the receive side of @p op from the entries (or the owners' buffers).
  Status finish(const Op& op);
  /// Direct mode: [off, off + len) of member @p r's published buffer, through
  /// this process's mapping of it, else read through CMA into @p tmp.
  const std::byte* direct_source(const Op& op, int r, std::size_t off, std::size_t len, std::vector<std::byte>& tmp,
                                 Status& err) const;
  /// Direct mode: does member @p r read this rank's published buffer in @p op?
  [[nodiscard]] bool reads_mine(const Op& op, int r) const noexcept;
  [[nodiscard]] bool readers_done(const Op& op) const noexcept;
  /// Direct mode, after own copies: nudges the owners read from that block (Dekker with park).
  void nudge_owners(const Op& op);
  /// The error of a call whose user reduction op threw @p what.
  [[nodiscard]] Status user_op_error(const Op& op, const std::string& what) const;
  /// Phase 1 of @p op (finish, publish done); mu_ held.
  void run_locked(Op& op);
  /// Fulfils @p done's promises (value or the op's error); mu_ not held.
  void settle(std::vector<Op>& done);
  /// Fails @p failed's promises; mu_ not held.
  void settle_failed(std::vector<std::pair<Op, Status>>& failed);
  /// Tracing: the event of a finished call.
  void trace_done(coll::Kind kind, std::uint64_t k, std::uint64_t t0, bool ok);
  /// Completes pending calls in order; mu_ held. Completed calls go to @p out.
  std::size_t poll_locked(std::vector<Op>& out);
  [[nodiscard]] bool ready_locked(const Op& op) const noexcept;
  void nudge_sleepers(const Op& op);
  /// After this rank's done count reached @p done: nudges the members with a
  /// sleeping waiter whose queued calls wait for it (their `want` word).
  void nudge_wanting(std::uint64_t done);
  std::atomic<std::uint64_t>& want_of(int r) const noexcept;
  Status check_peers_locked(const Op& op);
  void fail_locked(const Status& why, std::vector<std::pair<Op, Status>>& out);
  [[nodiscard]] std::string where(coll::Kind k) const;
  /// Sends member @p r one nudge signal (its progress servers wake up).
  void nudge(int r);
  /// peer_dead naming member @p r when the transport reports it dead; ok otherwise.
  [[nodiscard]] Status peer_dead(coll::Kind k, int r) const;

  transport::Transport& t_;
  transport::ProgressServer* servers_;
  std::shared_ptr<FutureContext> ctx_;  // futures of this channel: arena, progress, spin
  std::uint16_t id_;
  int me_;
  int n_;
  std::vector<int> world_;
  std::vector<std::byte*> areas_;
  std::size_t cap_;
  std::uint64_t slots_;
  std::size_t stride_;

  std::weak_ptr<void> owner_;
  const std::atomic<dag::Executor*>* tracer_ = nullptr;
  detail::StatePtr<void> ready_;  // completed once: the futures of calls that complete inside submit
  std::mutex mu_;
  std::uint64_t next_ = 0;   // under mu_
  std::deque<Op> ops_;       // under mu_: not completed, in order (the posted ones first, then the queued)
  std::size_t nqueued_ = 0;  // under mu_: the calls at the end of ops_ not posted yet
  std::atomic<int> npending_{0};
  Status failed_;  // under mu_
  // The member (and call) the head call waited for at the last look; -1: none.
  std::atomic<int> blocker_{-1};
  std::atomic<std::uint64_t> blocker_k_{0};
  std::atomic<std::uint64_t> last_check_ns_{0};  // last look for dead members
  mutable std::atomic<bool> cma_noted_{false};   // direct mode: the CMA fallback was logged
  std::atomic<std::uint32_t> spin_us_{0};        // waiter spin budget asked by the last direct call
  std::atomic<int> ndirect_{0};                  // direct calls pending

  [[nodiscard]] bool check_due() const noexcept;
};

/// The engine's fast channels, polled from Transport::progress().
class FastHub {
 public:
  void add(const std::shared_ptr<FastChannel>& ch);
  /// Polls every channel with pending calls; cheap when none has any.
  std::size_t poll();
  /// Marks that some channel may have pending calls (called by submit);
  /// @p pending: the call did not complete inside submit (then a blocked
  /// progress server that did not see it is woken: see park()).
  void touch(bool pending) {
    active_.store(true, std::memory_order_release);
    if (!pending) return;
    std::atomic_thread_fence(std::memory_order_seq_cst);  // Dekker with park(true): npending_, then parked_
    if (parked_.load(std::memory_order_seq_cst) > 0 && waker_) waker_();
  }
  /// A progress server is about to block (true) or runs again (false): its
  /// channels with pending calls count it as a sleeper meanwhile, so that
  /// peers nudge this rank (regression: a call consumed only through then()
  /// completed when the server's block timed out, up to 50 ms late).
  void park(bool parking);
  /// Wakes the progress servers (set once by the engine before any call).
  void set_waker(std::function<void()> w) { waker_ = std::move(w); }
  std::vector<std::shared_ptr<FastChannel>> channels();

 private:
  std::atomic<bool> active_{false};
  std::atomic<int> parked_{0};  // progress servers blocked (park)
  std::function<void()> waker_;
  std::mutex mu_;
  std::vector<std::weak_ptr<FastChannel>> chans_;
};

}  // namespace strata::detail
