// Engine-internal: the shutdown guard of the future-context hooks and the
// nudge signal that wakes a rank whose memory-flag wait parked.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

namespace strata::detail {

/// Communicator id of nudge signals (never given to a communicator; 0xFFFF is
/// the windows'): a rank whose executor flag wait parked while its threads
/// block asks the flag's owner for one (dag::ExecutorOptions::nudge_payload).
inline constexpr std::uint16_t kNudgeComm = 0xFFFE;
/// Completion context of a nudge signal (executor contexts are aligned, window ones have bit 0 set).
inline void* nudge_context() noexcept { return reinterpret_cast<void*>(std::uintptr_t{2}); }

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

}  // namespace strata::detail
