#pragma once

/// \file
/// A test-and-test-and-set spin lock for the short critical sections of hot
/// paths (the shm backend's rings, the executor's instance shards and drain
/// watermarks). An uncontended lock + unlock is one atomic exchange and one
/// store, against ~45 instructions and two atomic operations for a
/// std::mutex (callgrind of a cached collective's start, docs/algorithms.md
/// "Session 17 cuts"). After 64 failed looks it yields its core, so a holder
/// preempted on the same core (a progress server beside the caller on one
/// bound core) gets to run. Never hold it across a blocking call, an
/// allocation-heavy loop or a callback. Meets Lockable (std::lock_guard,
/// std::unique_lock, try_lock).

#include <atomic>
#include <thread>

#include "strata/detail/cpu.hpp"

namespace strata::detail {

class SpinLock {
 public:
  void lock() noexcept {
    for (int spins = 0;; ++spins) {
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins > 64)
          std::this_thread::yield();
        else
          cpu_relax();
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

}  // namespace strata::detail
