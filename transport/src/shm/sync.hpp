// Small synchronisation helpers shared by the transport internals (the shm
// backend and the router; the fabric backend may use them too).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace strata::transport::detail {

/// @brief Test-and-test-and-set spin lock for short critical sections on hot
/// paths (a handful of stores); yields after a few failed rounds. Meets the
/// Lockable requirements, so std::lock_guard / std::unique_lock work.
class SpinLock {
 public:
  void lock() noexcept {
    for (int spins = 0;; ++spins) {
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins > 64) std::this_thread::yield();
      }
    }
  }
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
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
