// Result checks of the multi-process rank programs: EXPECT(cond, fmt, ...)
// counts a failure and prints it with the rank; the program returns non-zero
// when rank_check::failures != 0.
#pragma once

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
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

/// Peer-death tests: a victim must not die before every survivor finished the
/// working round (a survivor whose last step still needed the victim's flag
/// would fail that round instead of the calls under test). The test makes a
/// FIFO (launch::DeathGate) and names it in TEST_DEATH_GATE; each survivor
/// writes one byte after its working round (death_gate_pass) and the victim
/// reads one per survivor before it dies (death_gate_wait). Both block in the
/// kernel: no polling, and the launcher's --timeout bounds a lost writer.
/// Without TEST_DEATH_GATE (a manual run) both return at once.
inline void death_gate_pass() {
  const char* path = std::getenv("TEST_DEATH_GATE");
  if (path == nullptr) return;
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);  // blocks until the victim opened it
  if (fd < 0) {
    std::printf("rank %d: FAILED: open %s: errno %d\n", me, path, errno);
    return;
  }
  const char b = 'x';
  while (::write(fd, &b, 1) < 0 && errno == EINTR) {
  }
  ::close(fd);
}
inline void death_gate_wait(int survivors) {
  const char* path = std::getenv("TEST_DEATH_GATE");
  if (path == nullptr) return;
  const int fd = ::open(path, O_RDWR | O_CLOEXEC);  // read-write: no EOF between the writers
  if (fd < 0) {
    std::printf("rank %d: FAILED: open %s: errno %d\n", me, path, errno);
    return;
  }
  char buf[64];
  for (int got = 0; got < survivors;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r > 0) got += static_cast<int>(r);
    if (r < 0 && errno != EINTR) break;
  }
  ::close(fd);
}

/// Survivors of a peer-death test meet here before they exit (TEST_EXIT_GATE,
/// launch::DeathGate(survivors)): a survivor that exits early is a second dead
/// peer, and a survivor still failing its calls could name it instead of the
/// victim. Blocks in the kernel; the launcher's --timeout bounds a lost survivor.
/// Without TEST_EXIT_GATE it returns at once.
inline void exit_gate() {
  const char* path = std::getenv("TEST_EXIT_GATE");
  if (path == nullptr) return;
  const int fd = ::open(path, O_RDWR | O_CLOEXEC);
  void* m = fd < 0 ? MAP_FAILED : ::mmap(nullptr, sizeof(pthread_barrier_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (fd >= 0) ::close(fd);
  if (m == MAP_FAILED) {
    std::printf("rank %d: FAILED: cannot map the exit gate %s: errno %d\n", me, path, errno);
    return;
  }
  pthread_barrier_wait(static_cast<pthread_barrier_t*>(m));
  ::munmap(m, sizeof(pthread_barrier_t));
}
}  // namespace rank_check
