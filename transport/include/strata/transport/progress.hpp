// Progress servers: the engine, not the user, drives communication progress.
//
// A ProgressServer owns N communication-server threads (paper 002) that call
// Transport::progress() in a loop. The transport hands work out round-robin
// over peers with a batch size per call, so several servers spread over
// peers instead of contending. When idle a server backs off: it spins
// briefly, then yields, then blocks in Transport::wait_for_event() until work
// arrives (an idle engine uses next to no CPU). With 0 threads (inline mode)
// no thread is started and whoever waits drives progress (wait_until()).
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
  /// Longest single block in wait_for_event(); bounds how late a silent peer's
  /// timeout (STRATA_TIMEOUT) is noticed and how late stop() is seen.
  std::chrono::microseconds max_block{50000};

  /// Reads STRATA_PROGRESS_THREADS / _CPUS / _SPIN over the defaults; throws
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
    std::uint64_t polls = 0;   ///< progress() calls by servers
    std::uint64_t events = 0;  ///< events those calls handled
    std::uint64_t blocks = 0;  ///< times a server blocked in wait_for_event()
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
  /// with servers it also polls once per round, then sleeps until a server
  /// reports events. @p done is evaluated on the calling thread.
  bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout);

 private:
  void serve(int index);
  void notify_waiters();

  Transport& t_;
  ProgressOptions opts_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<int> running_{0};
  std::atomic<int> waiters_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<std::uint64_t> polls_{0}, events_{0}, blocks_{0};
};

}  // namespace strata::transport
