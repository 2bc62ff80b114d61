// The coarse monotonic clock in milliseconds (CLOCK_MONOTONIC_COARSE: a few
// nanoseconds through the vDSO, resolution of a scheduler tick), for
// timeouts and ages that need no precision: hang reports, heartbeats.
#pragma once

#include <time.h>

#include <cstdint>

namespace strata::detail {

inline std::int64_t coarse_ms() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace strata::detail
