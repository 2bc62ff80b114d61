// The doorbell of a fabric rank (docs/fabric.md "Idle ranks"): a UDP socket at
// the IP address of the rank's libfabric endpoint. A peer sends one byte to
// it before its first post after a pause, so an idle rank can sleep on the
// socket until work arrives instead of polling. Private to the backend.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <string>

namespace strata::transport::detail::fabric {

class Doorbell {
 public:
  Doorbell() = default;
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;
  ~Doorbell() { close(); }

  /// Opens the socket at the IP address of endpoint name @p ep_name (a
  /// sockaddr_in or sockaddr_in6; any port). Stays closed for other address
  /// formats, on any failure, or when the bound address is longer than
  /// @p max_len bytes (what the start-up blob carries).
  void open(const std::string& ep_name, std::size_t max_len);
  /// Closes the socket (a no-op when closed).
  void close();
  [[nodiscard]] bool is_open() const noexcept { return fd_ >= 0; }
  /// The socket, -1 when closed.
  [[nodiscard]] int fd() const noexcept { return fd_; }
  /// This bell's address (address_len() bytes; 0 when closed): peers ring it.
  [[nodiscard]] const sockaddr_storage& address() const noexcept { return self_; }
  [[nodiscard]] socklen_t address_len() const noexcept { return len_; }
  /// Rings the bell at @p to (best effort, never blocks).
  void ring(const sockaddr_storage& to, socklen_t len) const;
  /// Reads every byte that arrived (after a wake-up on fd()).
  void drain() const;

 private:
  int fd_ = -1;
  sockaddr_storage self_{};
  socklen_t len_ = 0;
};

}  // namespace strata::transport::detail::fabric
