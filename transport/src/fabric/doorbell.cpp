// The doorbell of a fabric rank: transport/src/fabric/doorbell.hpp.
#include "fabric/doorbell.hpp"

#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>

namespace strata::transport::detail::fabric {

void Doorbell::open(const std::string& ep_name, std::size_t max_len) {
  if (ep_name.size() < sizeof(sockaddr_in)) return;
  sockaddr_storage a{};
  std::memcpy(&a, ep_name.data(), std::min(ep_name.size(), sizeof(a)));
  socklen_t len = 0;
  if (a.ss_family == AF_INET) {
    len = sizeof(sockaddr_in);
    reinterpret_cast<sockaddr_in*>(&a)->sin_port = 0;
  } else if (a.ss_family == AF_INET6 && ep_name.size() >= sizeof(sockaddr_in6)) {
    len = sizeof(sockaddr_in6);
    reinterpret_cast<sockaddr_in6*>(&a)->sin6_port = 0;
  } else {
    return;
  }
  const int fd = ::socket(a.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  socklen_t got = sizeof(self_);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&self_), &got) != 0 || got > max_len) {
    ::close(fd);
    return;
  }
  fd_ = fd;
  len_ = got;
}

void Doorbell::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  len_ = 0;
}

void Doorbell::ring(const sockaddr_storage& to, socklen_t len) const {
  const char one = 1;
  (void)::sendto(fd_, &one, 1, MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&to), len);
}

void Doorbell::drain() const {
  std::array<char, 64> buf{};
  while (::recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT) > 0) {
  }
}

}  // namespace strata::transport::detail::fabric
