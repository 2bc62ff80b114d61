// Result checks of the multi-process rank programs: EXPECT(cond, fmt, ...)
// counts a failure and prints it with the rank; the program returns non-zero
// when rank_check::failures != 0.
#pragma once

#include <cstdio>

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
