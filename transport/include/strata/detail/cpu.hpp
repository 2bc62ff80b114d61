#pragma once

/// \file
/// CPU hints shared by the spin loops of the transport's progress engine, the
/// engine's waiters and the fast path.

namespace strata::detail {

/// A spin-wait hint to the CPU (`pause` on x86, `yield` on AArch64, nothing
/// elsewhere): lets a sibling hyper-thread run and saves power while a loop
/// polls memory or a completion queue.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace strata::detail
