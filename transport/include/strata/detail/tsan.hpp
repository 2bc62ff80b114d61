#pragma once

/// \file
/// ThreadSanitizer annotations for orderings that pass through another
/// process. TSan sees the threads of one process only: a read of window
/// memory by one thread, then a flag raised in shared memory (a memory-flag
/// node, strata/dag/plan.hpp), then a peer's write into that memory that the
/// peer made because it saw the flag and that another thread of this process
/// receives, look unordered to it. Under TSan every flag raised for the peers
/// releases, and every record received from a peer acquires, one process-wide
/// tag, which carries that order. Outside TSan both compile to nothing.
///
/// Also the one copy of the task hand-off annotation (tsan_release /
/// tsan_acquire on an address, Handoff / handoff) that the executor
/// (dag/src) and the futures (strata/future.hpp) use for oneTBB's queues.

#include <utility>

namespace strata::detail {

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
/// The tag (one per process: an inline function's static).
inline void* cross_process_tag() noexcept {
  static char tag;
  return &tag;
}
/// This thread published something the peers may act on (a flag they read).
inline void tsan_release_to_peers() noexcept { __tsan_release(cross_process_tag()); }
/// This thread received what a peer sent after acting on a published flag.
inline void tsan_acquire_from_peers() noexcept { __tsan_acquire(cross_process_tag()); }
#else
inline void tsan_release_to_peers() noexcept {}
inline void tsan_acquire_from_peers() noexcept {}
#endif

// oneTBB from Debian is not built with ThreadSanitizer, so a hand-off through
// its queues (enqueue, spawn, resume) is invisible to TSan. Under TSan these
// annotate the hand-off; otherwise they compile to nothing.
#if defined(__SANITIZE_THREAD__)
inline void tsan_release(const void* p) noexcept { __tsan_release(const_cast<void*>(p)); }
inline void tsan_acquire(const void* p) noexcept { __tsan_acquire(const_cast<void*>(p)); }
// A task's callable is copied into oneTBB's task object inside enqueue/run
// and read by the worker: each copy publishes itself once its members are
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
    tsan_acquire(this);
    f();
  }
};
template <class F>
Handoff<F> handoff(F f) {
  return Handoff<F>(std::move(f));
}
#else
inline void tsan_release(const void*) noexcept {}
inline void tsan_acquire(const void*) noexcept {}
template <class F>
F handoff(F f) {
  return f;
}
#endif

}  // namespace strata::detail
