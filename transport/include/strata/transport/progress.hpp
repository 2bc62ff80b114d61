// Progress servers: the engine, not the user, drives communication progress.
//
// A ProgressServer owns N communication-server threads (paper 002) that call
// Transport::progress() in a loop. The transport hands work out round-robin
// over peers with a batch size per call, so several servers spread over
// peers instead of contending. When idle a server backs off: it spins
// briefly, then yields, then blocks in Transport::wait_for_event() until work
// arrives (an idle engine uses next to no CPU). With 0 threads (inline mode)
// no thread is started and whoever waits drives progress (wait_until()).
//
// Waiting with servers running: wait_until() first polls Transport::progress()
// itself for a bounded time (ProgressOptions::wait_spin), so an answer that
// is imminent costs no cross-thread wake-up; meanwhile the servers step aside
// (they block instead of competing for the core, and the transport's wake-up
// path stays disarmed so peers send no wake-ups either). Only a waiter whose
// answer takes longer than wait_spin falls back to sleeping until a server
// reports events.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "strata/transport/transport.hpp"

namespace strata::transport {

namespace detail {
class WakeArm;  // internal: implemented by the routed transport
}  // namespace detail

/// @brief Knobs of the progress servers.
struct ProgressOptions {
  /// STRATA_PROGRESS_THREADS: number of server threads; 0 = inline mode.
  int threads = 1;
  /// STRATA_PROGRESS_CPUS: CPUs to bind servers to, e.g. "1" or "0,2-3"
  /// (server i gets cpus[i % size]); empty = not bound.
  std::vector<int> cpus;
  /// STRATA_PROGRESS_SPIN: empty polls before a server starts yielding.
  int spin_polls = 256;
  /// Empty polls with sched_yield() before a server blocks.
  int yield_polls = 64;
  /// STRATA_PROGRESS_WAIT_SPIN (microseconds): with servers running, how long
  /// wait_until() polls the transport itself before sleeping (0 = never);
  /// events extend it (it counts quiet time). 2 ms: across hosts a waiter
  /// that went to sleep after 50 us handed every collective of 64 KiB-1 MiB
  /// to a server thread on the same core, at 0.9-4 ms per call instead of
  /// 0.07-0.57 ms (docs/performance.md, "Across hosts"); on one host nothing
  /// changed measurably. A waiter has nothing else to do on its thread.
  std::chrono::microseconds wait_spin{2000};
  /// The engine's default wait_spin when a machine runs more ranks than it
  /// has CPUs (a polling waiter would take another rank's core).
  static constexpr std::chrono::microseconds kOversubscribedWaitSpin{50};
  /// STRATA_PROGRESS_MAX_BLOCK (microseconds): longest single block in
  /// wait_for_event(); bounds how late a silent peer's timeout
  /// (STRATA_TIMEOUT) is noticed and how late stop() is seen.
  std::chrono::microseconds max_block{50000};
  /// Called by an idle server with true right before it blocks in
  /// wait_for_event() and with false once it runs again (the engine's fast
  /// path then counts it as a sleeper, so that peers nudge it); may poll.
  std::function<void(bool)> on_block;

  /// Reads STRATA_PROGRESS_THREADS / _CPUS / _SPIN / _WAIT_SPIN / _MAX_BLOCK over the defaults; throws
  /// strata::Error naming the variable on a malformed value.
  static ProgressOptions from_environment();
};

/// @brief N communication-server threads driving one Transport.
///
/// The transport must outlive the server (destroy or stop() the server first).
/// @code
///   auto t = strata::transport::make_transport(*boot, hier);
///   strata::transport::ProgressServer servers(*t);  // STRATA_PROGRESS_THREADS, default 1
///   std::atomic<bool> done{false};
///   t->set_completion_handler([&](void*, const strata::Status&) { done = true; });
///   t->put(peer, buf, len, key, 0, nullptr);
///   servers.wait_until([&] { return done.load(); }, std::chrono::seconds(10));
/// @endcode
class ProgressServer {
 public:
  /// Counters (monotonic, approximate under concurrency).
  struct Stats {
    std::uint64_t polls = 0;          ///< progress() calls by servers
    std::uint64_t events = 0;         ///< events those calls handled
    std::uint64_t blocks = 0;         ///< times a server blocked in wait_for_event()
    std::uint64_t waiter_hits = 0;    ///< wait_until() calls done within their first polling spell
    std::uint64_t waiter_sleeps = 0;  ///< wait_until() calls that slept at least once
  };

  /// Starts opts.threads servers (none in inline mode). Throws strata::Error
  /// (invalid_argument) for a negative thread count or an unusable CPU list.
  explicit ProgressServer(Transport& transport, ProgressOptions opts = ProgressOptions::from_environment());
  /// Stops and joins the servers.
  ~ProgressServer();
  ProgressServer(const ProgressServer&) = delete;
  ProgressServer& operator=(const ProgressServer&) = delete;

  /// Stops and joins every server (idempotent; wakes blocked ones).
  void stop();
  /// True when no server thread runs (threads == 0).
  [[nodiscard]] bool inline_mode() const noexcept { return opts_.threads == 0; }
  [[nodiscard]] int threads() const noexcept { return opts_.threads; }
  [[nodiscard]] Stats stats() const noexcept;

  /// Waits until @p done returns true or @p timeout passes; returns done().
  /// In inline mode the caller drives progress itself (with the same back-off);
  /// with servers it polls the transport itself for up to opts.wait_spin (the
  /// servers step aside meanwhile), then sleeps until a server reports events.
  /// @p done is evaluated on the calling thread.
  bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout);

  /// Polls the transport on the calling thread until @p done returns true or
  /// @p budget passes (servers step aside meanwhile, as in wait_until());
  /// returns done(). Never sleeps: for waits that block elsewhere afterwards
  /// (e.g. a future's condition variable) but want an imminent answer cheaply.
  bool spin_until(const std::function<bool()>& done, std::chrono::microseconds budget);

  /// Blocks the calling waiter in the transport's own wait (the descriptors a
  /// server sleeps on) plus @p fd, for at most min(@p timeout, max_block):
  /// an arriving message then wakes the waiter itself, in parallel with the
  /// servers, instead of waking a server that then wakes the waiter (two
  /// wake-ups of halted cores in a row). Then polls the transport once and
  /// returns the events handled; -1 when the transport cannot (then sleep
  /// elsewhere) or the servers are stopping.
  long block_waiter(int fd, std::chrono::microseconds timeout);
  [[nodiscard]] const ProgressOptions& options() const noexcept { return opts_; }

  /// One Transport::progress() call on the calling thread, as a waiter's
  /// poll: a server that sleeps meanwhile is re-armed afterwards (a bare
  /// progress() call disarms the backends' wake-ups, so later arrivals would
  /// not wake it). For threads that are neither servers nor waiters (the
  /// engine's heartbeat thread). Returns the events handled.
  std::size_t poll_once();

 private:
  void serve(int index);
  bool notify_waiters();  ///< true if waiters were told
  /// A waiter stops polling: when it was the last one and servers are blocked,
  /// re-arms the transport's wake-up path (no system call unless work is pending).
  void leave_polling();
  /// Polls as a waiter (pollers_ counted) until done() or @p end; with a
  /// nonzero @p idle_budget every event moves @p end to idle_budget after the
  /// last event (never past @p hard_end).
  bool spin_phase(const std::function<bool()>& done, std::chrono::steady_clock::time_point end,
                  std::chrono::microseconds idle_budget, std::chrono::steady_clock::time_point hard_end);

  Transport& t_;
  ProgressOptions opts_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<int> running_{0};
  std::atomic<int> waiters_{0};     ///< waiters sleeping on cv_
  std::atomic<int> pollers_{0};     ///< waiters polling the transport themselves
  std::atomic<int> blocked_{0};     ///< servers inside wait_for_event()
  detail::WakeArm* arm_ = nullptr;  ///< the transport's re-arm hook (null: servers never step aside)
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t gen_ = 0;  ///< guarded by mu_: bumped by notify_waiters()
  std::atomic<std::uint64_t> polls_{0}, events_{0}, blocks_{0}, hits_{0}, sleeps_{0};
};

}  // namespace strata::transport
