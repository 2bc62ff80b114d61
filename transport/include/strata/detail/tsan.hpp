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

}  // namespace strata::detail
