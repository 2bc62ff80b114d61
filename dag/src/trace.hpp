// Private to the executor (dag/src): tracing as an observer of the
// scheduler, in the spirit of Taskflow's ObserverInterface. The core calls
// an ExecutorObserver at well-defined points (an instance starts or ends, a
// node ran or completed, a transport completion or signal arrived); the
// Chrome-trace writer (trace_chrome.cpp) is the one implementation.
//
// Cost when tracing is off: Executor::Impl::obs is null and every hook site
// is `if (obs != nullptr)`, the same load and branch as the former
// `if (tracing)`; no virtual call, no clock read.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "strata/dag/plan.hpp"

namespace strata {
namespace dag {
namespace exec {

struct Instance;

/// The trace clock: steady_clock in nanoseconds (Executor::trace_now_ns).
inline std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

/// What the executor reports while it runs. Called from any thread (the
/// arena's workers, the progress thread, the signal handler): thread-safe.
class ExecutorObserver {
 public:
  virtual ~ExecutorObserver() = default;
  ExecutorObserver() = default;
  ExecutorObserver(const ExecutorObserver&) = delete;
  ExecutorObserver& operator=(const ExecutorObserver&) = delete;

  /// @p in was set up and is about to run its first node (may tag it: Instance::trace_name).
  virtual void instance_start(Instance& in) = 0;
  /// @p in finished (its DoneFn not called yet; the instance is freed after).
  virtual void instance_end(const Instance& in) = 0;
  /// Node @p id of @p in ran from @p t0 until now (or, zero-length, completed at @p t0).
  virtual void node(const Instance& in, NodeId id, std::uint64_t t0) = 0;
  /// The transport completed node @p id's operation at @p t.
  virtual void transport_completion(const Instance& in, NodeId id, std::uint64_t t) = 0;
  /// A signal from @p source arrived at @p t and released wait node @p id.
  virtual void signal_arrived(const Instance& in, NodeId id, int source, std::uint64_t t) = 0;
  /// An event named by the caller (Executor::trace_event).
  virtual void event(const std::string& cat, const std::string& name, std::uint64_t t0, std::uint64_t t1,
                     std::uint32_t seq, std::int64_t peer) = 0;
  /// Writes what was recorded so far (Executor::flush_trace).
  virtual void flush() = 0;
};

/// The Chrome-trace writer: one JSON event per line appended to
/// @p path.<rank>.json (truncated here: a new run starts a new file).
std::unique_ptr<ExecutorObserver> make_chrome_trace(const std::string& path, int rank);

}  // namespace exec
}  // namespace dag
}  // namespace strata
