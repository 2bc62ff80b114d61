// Small synchronisation helpers shared by the transport internals (the shm
// backend and the router; the fabric backend may use them too).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "strata/detail/spinlock.hpp"

namespace strata::transport::detail {

/// @brief The shared spin lock (strata/detail/spinlock.hpp).
using SpinLock = strata::detail::SpinLock;

/// @brief Implemented by the routed transport for the progress servers
/// (transport/src/progress.cpp): re-arms the wake-up path of a thread blocked
/// in Transport::wait_for_event() without a system call.
///
/// A thread that polls Transport::progress() disarms the backends' "sleeping"
/// flags (peers then send no wake-ups); when it stops polling while a server
/// is blocked, the server must be re-armed, or later arrivals would not wake it.
class WakeArm {
 public:
  /// Arms every backend's wake-up (the same check as before sleeping).
  /// Returns false, arming nothing, when work is already pending: the caller
  /// must then progress (or wake() a server) itself.
  virtual bool arm_wakeup() = 0;
  /// Transport::wait_for_event() for a server that steps aside while a waiter
  /// polls: backends that can only be polled are revisited at their idle
  /// interval, not their busy one (the waiter polls them meanwhile).
  virtual void wait_aside(std::chrono::microseconds timeout) = 0;

 protected:
  WakeArm() = default;
  WakeArm(const WakeArm&) = default;
  WakeArm& operator=(const WakeArm&) = default;
  ~WakeArm() = default;
};

/// @brief Implemented by a backend without a wait object (libfabric providers
/// whose CQ has no usable fd): how soon a sleeping progress thread must poll
/// it again. Short while operations are in flight or events came recently,
/// long when idle.
class PollHint {
 public:
  [[nodiscard]] virtual std::chrono::microseconds poll_interval() const = 0;

 protected:
  PollHint() = default;
  PollHint(const PollHint&) = default;
  PollHint& operator=(const PollHint&) = default;
  ~PollHint() = default;
};

/// @brief A handler that may be replaced while other threads call it.
///
/// Readers pay one acquire load. Replaced handlers are retired, not freed,
/// until the slot is destroyed, so a reader never sees a dangling function.
template <class F>
class HandlerSlot {
 public:
  HandlerSlot() = default;
  HandlerSlot(const HandlerSlot&) = delete;
  HandlerSlot& operator=(const HandlerSlot&) = delete;
  ~HandlerSlot() { delete current_.load(std::memory_order_acquire); }

  /// Installs @p f (an empty function uninstalls).
  void set(F f) {
    F* fresh = f ? new F(std::move(f)) : nullptr;
    std::lock_guard<std::mutex> g(mu_);
    F* old = current_.exchange(fresh, std::memory_order_acq_rel);
    if (old != nullptr) retired_.emplace_back(old);
  }
  /// The installed handler or nullptr.
  [[nodiscard]] const F* get() const noexcept { return current_.load(std::memory_order_acquire); }

 private:
  std::atomic<F*> current_{nullptr};
  std::mutex mu_;
  std::vector<std::unique_ptr<F>> retired_;
};

}  // namespace strata::transport::detail
