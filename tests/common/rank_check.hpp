// Result checks of the multi-process rank programs: EXPECT(cond, fmt, ...)
// counts a failure and prints it with the rank; the program returns non-zero
// when rank_check::failures != 0.
#pragma once

#include <cstdio>
#include <string>

#include "strata/error.hpp"

namespace rank_check {
inline int failures = 0;
inline int me = 0;  ///< this rank, for the messages
}  // namespace rank_check

#define EXPECT(cond, ...)                                                  \
  do {                                                                     \
    if (!(cond)) {                                                         \
      ++rank_check::failures;                                              \
      std::fprintf(stderr, "rank %d: FAILED %s: ", rank_check::me, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                   \
      std::fprintf(stderr, "\n");                                          \
    }                                                                      \
  } while (0)

namespace rank_check {
/// Runs @p call, which must throw strata::Error with Errc::peer_dead: true and
/// its message in @p msg; false (after printing why, with the rank) otherwise.
template <class F>
bool fails_peer_dead(F&& call, std::string* msg) {
  try {
    call();
    std::printf("rank %d: FAILED: the call succeeded\n", me);
    return false;
  } catch (const strata::Error& e) {
    if (e.errc() != strata::Errc::peer_dead) {
      std::printf("rank %d: FAILED: wrong error: %s\n", me, e.what());
      return false;
    }
    *msg = e.what();
  }
  return true;
}
}  // namespace rank_check
