// Per-thread wake-up descriptors for futures whose waiters sleep on the
// transport (FutureContext::block): the future's completion writes the
// waiting thread's eventfd, which the transport's poll also watches.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

#include "strata/future.hpp"

namespace strata::detail {
namespace {
struct ThreadWakeFd {
  int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ThreadWakeFd() = default;
  ThreadWakeFd(const ThreadWakeFd&) = delete;
  ThreadWakeFd& operator=(const ThreadWakeFd&) = delete;
  ~ThreadWakeFd() {
    if (fd >= 0) ::close(fd);
  }
};
}  // namespace

int thread_wake_fd() noexcept {
  thread_local ThreadWakeFd f;
  return f.fd;
}

void wake_fd_signal(int fd) noexcept {
  const std::uint64_t one = 1;
  (void)!::write(fd, &one, sizeof(one));
}

void wake_fd_drain(int fd) noexcept {
  std::uint64_t v = 0;
  (void)!::read(fd, &v, sizeof(v));
}

}  // namespace strata::detail
