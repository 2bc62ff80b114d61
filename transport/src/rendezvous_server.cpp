// The launcher side of the rendezvous (see strata/detail/rendezvous.hpp and
// docs/launcher.md). Single-threaded and non-blocking: a slow or malicious
// client can never stall the launcher's poll loop.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>

#include "strata/detail/rendezvous.hpp"

namespace strata::detail::rdv {

namespace {
using Clock = std::chrono::steady_clock;
/// Unauthenticated connections must send their hello within this time.
constexpr auto kAuthWindow = std::chrono::seconds(5);
/// At most this many connections may wait for authentication at once.
constexpr std::size_t kMaxPending = 64;
}  // namespace

struct Server::Impl {
  struct Conn {
    int fd = -1;
    int rank = -1;  // -1 until authenticated
    Clock::time_point auth_deadline;
    Parser parser;
    std::vector<std::byte> out;
    std::size_t out_pos = 0;
  };

  int listen_fd = -1;
  int size = 0;
  Secret secret{};
  std::vector<std::unique_ptr<Conn>> conns;
  mutable std::vector<Conn*> polled;
  std::vector<Conn*> by_rank;
  std::vector<char> exited;
  std::vector<std::string> exit_why;
  std::vector<std::uint64_t> exit_seq;  // order in which ranks ended
  std::uint64_t exits = 0;
  std::vector<std::pair<int, std::string>> deaths;  // failed ranks, replayed to late joiners
  int rejected = 0;
  std::vector<std::string> violations;  // not yet taken by the launcher

  // The open collective round (at most one: clients block until it completes).
  bool open = false;
  Type kind = Type::allgather;
  int count = 0;
  std::vector<char> joined;
  std::vector<std::uint32_t> round_of;
  std::vector<std::vector<std::byte>> blobs;

  void send(Conn& c, Type t, std::uint32_t arg, const void* data, std::size_t len) {
    if (c.fd < 0) return;
    auto f = frame(t, arg, data, len);
    c.out.insert(c.out.end(), f.begin(), f.end());
    flush(c);
  }

  void flush(Conn& c) {
    while (c.fd >= 0 && c.out_pos < c.out.size()) {
      const ssize_t n = ::send(c.fd, c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c.out_pos += static_cast<std::size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else {
        drop(c);
        return;
      }
    }
    c.out.clear();
    c.out_pos = 0;
  }

  void drop(Conn& c) {
    if (c.fd < 0) return;
    if (c.rank >= 0 && by_rank[static_cast<std::size_t>(c.rank)] == &c)
      by_rank[static_cast<std::size_t>(c.rank)] = nullptr;
    ::close(c.fd);
    c.fd = -1;
  }

  void reject(Conn& c) {
    ++rejected;
    drop(c);
  }

  /// An authenticated rank broke the protocol: disconnect it and treat it as
  /// gone (the open round and later ones fail naming it; no reconnection).
  void violate(Conn& c, const std::string& why) {
    if (c.rank < 0) {
      reject(c);
      return;
    }
    const int r = c.rank;
    const auto i = static_cast<std::size_t>(r);
    violations.push_back("rank " + std::to_string(r) + " broke the rendezvous protocol: " + why);
    drop(c);
    if (!exited[i]) {
      exited[i] = 1;
      exit_why[i] = "was disconnected by strata-run for breaking the rendezvous protocol (" + why + ")";
      exit_seq[i] = ++exits;
    }
    check_round();
  }

  /// Checks the header of the next message of an authenticated rank as soon
  /// as it is buffered: a length that will be refused is refused before its
  /// payload is buffered. False when @p c was disconnected.
  bool screen_header(Conn& c) {
    Header h;
    const int got = c.parser.peek(h);
    if (got == 0) return true;
    if (got < 0) {
      violate(c, "malformed header: " + c.parser.error());
      return false;
    }
    const std::uint64_t limit = kMaxPayload / static_cast<std::uint64_t>(size);
    if (h.type == Type::allgather && h.len > limit) {
      violate(c, "allgather blob of " + std::to_string(h.len) + " bytes is over the per-rank limit of " +
                     std::to_string(limit));
      return false;
    }
    if (h.type == Type::barrier && h.len != 0) {
      violate(c, "barrier with a payload of " + std::to_string(h.len) + " bytes");
      return false;
    }
    if (h.type == Type::hello) {
      violate(c, "second hello");
      return false;
    }
    if (h.type != Type::allgather && h.type != Type::barrier) {
      violate(c, "sent a '" + type_name(h.type) + "' message, which only strata-run sends");
      return false;
    }
    return true;
  }

  void reset_round() {
    open = false;
    count = 0;
    std::fill(joined.begin(), joined.end(), 0);
    for (auto& b : blobs) b.clear();
  }

  void fail_round(const std::string& msg) {
    for (int r = 0; r < size; ++r) {
      const auto i = static_cast<std::size_t>(r);
      if (joined[i] && by_rank[i]) send(*by_rank[i], Type::failed, round_of[i], msg.data(), msg.size());
    }
    reset_round();
  }

  static const char* name(Type t) { return t == Type::barrier ? "barrier" : "allgather"; }

  /// The rank that ended first among those that have not joined the open
  /// round (the root cause, in a cascade of failures), or -1.
  int missing_exited() const {
    int best = -1;
    for (int r = 0; r < size; ++r) {
      const auto i = static_cast<std::size_t>(r);
      if (exited[i] && !joined[i] && (best < 0 || exit_seq[i] < exit_seq[static_cast<std::size_t>(best)])) best = r;
    }
    return best;
  }

  void contribute(Conn& c, Type t, std::uint32_t round, std::vector<std::byte> body) {
    const auto i = static_cast<std::size_t>(c.rank);
    if (open && joined[i]) {
      violate(c, std::string("sent a second contribution (") + name(t) + " round " + std::to_string(round) +
                     ") before the open " + name(kind) + " round " + std::to_string(round_of[i]) + " completed");
      return;
    }
    if (open && kind != t) {
      joined[i] = 1;
      round_of[i] = round;
      fail_round("rank " + std::to_string(c.rank) + " called " + name(t) + " while other ranks called " + name(kind) +
                 " (bootstrap calls must be made in the same order on every rank)");
      return;
    }
    open = true;
    kind = t;
    joined[i] = 1;
    round_of[i] = round;
    blobs[i] = std::move(body);
    ++count;
    check_round();
  }

  void check_round() {
    if (!open) return;
    const int gone = missing_exited();
    if (gone >= 0) {
      fail_round("rank " + std::to_string(gone) + " " + exit_why[static_cast<std::size_t>(gone)] +
                 " before joining the " + name(kind) + " (bootstrap " + name(kind) + " cannot complete)");
      return;
    }
    if (count < size) return;
    std::vector<std::byte> packed;
    if (kind == Type::allgather) packed = pack_blobs(blobs);
    for (int r = 0; r < size; ++r) {
      const auto i = static_cast<std::size_t>(r);
      if (by_rank[i]) send(*by_rank[i], Type::result, round_of[i], packed.data(), packed.size());
    }
    reset_round();
  }

  void on_message(Conn& c, Message& m) {
    if (c.rank < 0) {
      Secret got{};
      const auto r = m.header.arg;
      if (m.header.type != Type::hello || m.body.size() != kSecretSize || r >= static_cast<std::uint32_t>(size)) {
        reject(c);
        return;
      }
      std::copy(m.body.begin(), m.body.end(), reinterpret_cast<std::byte*>(got.data()));
      if (!secrets_equal(got, secret) || by_rank[r] != nullptr || exited[r]) {
        reject(c);
        return;
      }
      c.rank = static_cast<int>(r);
      by_rank[r] = &c;
      send(c, Type::welcome, r, nullptr, 0);
      for (const auto& d : deaths) {
        if (d.first != c.rank)
          send(c, Type::rank_dead, static_cast<std::uint32_t>(d.first), d.second.data(), d.second.size());
      }
      return;
    }
    switch (m.header.type) {
      case Type::allgather:
      case Type::barrier:
        contribute(c, m.header.type, m.header.arg, std::move(m.body));
        break;
      default:  // screened by screen_header(); kept for safety
        violate(c, "sent a '" + type_name(m.header.type) + "' message");
        break;
    }
  }

  void on_readable(Conn& c) {
    std::byte buf[65536];
    for (;;) {
      const ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        c.parser.feed(buf, static_cast<std::size_t>(n));
        // Before authentication only a hello (header + secret) is acceptable.
        if (c.rank < 0 && c.parser.buffered() > kHeaderSize + kSecretSize) {
          reject(c);
          return;
        }
        if (c.rank < 0) {
          // Refuse a first header that cannot be a hello at once, not after
          // the authentication window.
          Header h;
          const int got = c.parser.peek(h);
          if (got < 0 || (got > 0 && (h.type != Type::hello || h.len != kSecretSize))) {
            reject(c);
            return;
          }
        }
        if (c.rank >= 0 && !screen_header(c)) return;
        if (static_cast<std::size_t>(n) < sizeof buf) break;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      // EOF or error. Between messages an authenticated rank may come back (a
      // second bootstrap in the same process); inside a message it cannot.
      if (c.rank >= 0 && c.parser.buffered() > 0) {
        Message m;
        while (c.parser.next(m) > 0) {
          on_message(c, m);
          if (c.fd < 0) return;
        }
        if (c.parser.buffered() > 0) {
          violate(c, "closed the connection inside a message (" + std::to_string(c.parser.buffered()) +
                         " bytes of it received)");
          return;
        }
      }
      drop(c);
      return;
    }
    Message m;
    for (;;) {
      const int got = c.parser.next(m);
      if (got == 0) break;
      if (got < 0) {
        violate(c, "malformed header: " + c.parser.error());  // reject() before authentication
        return;
      }
      on_message(c, m);
      if (c.fd < 0) return;
      if (c.rank >= 0 && !screen_header(c)) return;
    }
  }

  void accept_all() {
    for (;;) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR) continue;
        return;  // EAGAIN or a transient error; poll will tell us again
      }
      auto pending = std::count_if(conns.begin(), conns.end(), [](const auto& c) { return c->fd >= 0 && c->rank < 0; });
      if (static_cast<std::size_t>(pending) >= kMaxPending) {
        // Full. Drop the waiting connections whose clients already left, then
        // the oldest silent one (nothing to read: a real rank sends its hello
        // as soon as it connects), so that silent connections cannot lock
        // the ranks out for the authentication window. With none silent, the
        // new connection is refused.
        Conn* oldest = nullptr;
        for (auto& c : conns) {
          if (c->fd < 0 || c->rank >= 0) continue;
          std::byte b{};
          const ssize_t n = ::recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            drop(*c);
          } else if (n < 0 && c->parser.buffered() == 0 &&
                     (oldest == nullptr || c->auth_deadline < oldest->auth_deadline)) {
            oldest = c.get();
          }
        }
        pending = std::count_if(conns.begin(), conns.end(), [](const auto& c) { return c->fd >= 0 && c->rank < 0; });
        if (static_cast<std::size_t>(pending) >= kMaxPending && oldest != nullptr) {
          reject(*oldest);
          --pending;
        }
      }
      if (static_cast<std::size_t>(pending) >= kMaxPending) {
        ++rejected;
        ::close(fd);
        continue;
      }
      auto c = std::make_unique<Conn>();
      c->fd = fd;
      c->auth_deadline = Clock::now() + kAuthWindow;
      conns.push_back(std::move(c));
    }
  }
};

Server::Server(int listen_fd, int size, const Secret& secret) : impl_(std::make_unique<Impl>()) {
  impl_->listen_fd = listen_fd;
  impl_->size = size;
  impl_->secret = secret;
  const auto n = static_cast<std::size_t>(size);
  impl_->by_rank.assign(n, nullptr);
  impl_->exited.assign(n, 0);
  impl_->exit_why.assign(n, {});
  impl_->exit_seq.assign(n, 0);
  impl_->joined.assign(n, 0);
  impl_->round_of.assign(n, 0);
  impl_->blobs.assign(n, {});
}

Server::~Server() {
  for (auto& c : impl_->conns) impl_->drop(*c);
  if (impl_->listen_fd >= 0) ::close(impl_->listen_fd);
}

void Server::fill_pollfds(std::vector<pollfd>& out) const {
  out.push_back(pollfd{impl_->listen_fd, POLLIN, 0});
  impl_->polled.clear();
  for (const auto& c : impl_->conns) {
    if (c->fd < 0) continue;
    const short ev = static_cast<short>(POLLIN | (c->out_pos < c->out.size() ? POLLOUT : 0));
    out.push_back(pollfd{c->fd, ev, 0});
    impl_->polled.push_back(c.get());
  }
}

void Server::handle(const std::vector<pollfd>& fds, std::size_t first) {
  auto& im = *impl_;
  const auto polled = im.polled;  // accept_all() may grow conns; pointers stay valid
  for (std::size_t k = 0; k < polled.size() && first + 1 + k < fds.size(); ++k) {
    Impl::Conn& c = *polled[k];
    const short re = fds[first + 1 + k].revents;
    if (c.fd < 0 || re == 0) continue;
    if (re & POLLOUT) im.flush(c);
    if (c.fd >= 0 && (re & (POLLIN | POLLHUP | POLLERR))) im.on_readable(c);
  }
  if (first < fds.size() && (fds[first].revents & POLLIN)) im.accept_all();
  const auto now = Clock::now();
  for (auto& c : im.conns) {
    if (c->fd >= 0 && c->rank < 0 && now >= c->auth_deadline) im.reject(*c);
  }
  im.conns.erase(std::remove_if(im.conns.begin(), im.conns.end(), [](const auto& c) { return c->fd < 0; }),
                 im.conns.end());
  im.polled.clear();
}

int Server::timeout_ms() const {
  long best = -1;
  const auto now = Clock::now();
  for (const auto& c : impl_->conns) {
    if (c->fd < 0 || c->rank >= 0) continue;
    const long ms =
        std::max<long>(0, std::chrono::duration_cast<std::chrono::milliseconds>(c->auth_deadline - now).count() + 1);
    if (best < 0 || ms < best) best = ms;
  }
  return static_cast<int>(best);
}

void Server::rank_exited(int rank, bool failed, const std::string& why) {
  auto& im = *impl_;
  if (rank < 0 || rank >= im.size) return;
  const auto i = static_cast<std::size_t>(rank);
  if (!im.exited[i]) {  // else disconnected for a protocol violation: that reason stays
    im.exited[i] = 1;
    im.exit_why[i] = why;
    im.exit_seq[i] = ++im.exits;
  }
  if (failed) {
    const std::string msg = "rank " + std::to_string(rank) + " " + why;
    im.deaths.emplace_back(rank, msg);
    for (int r = 0; r < im.size; ++r) {
      const auto j = static_cast<std::size_t>(r);
      if (r != rank && im.by_rank[j])
        im.send(*im.by_rank[j], Type::rank_dead, static_cast<std::uint32_t>(rank), msg.data(), msg.size());
    }
  }
  im.check_round();
}

int Server::rejected() const noexcept { return impl_->rejected; }

std::vector<std::string> Server::take_violations() {
  std::vector<std::string> out;
  out.swap(impl_->violations);
  return out;
}

}  // namespace strata::detail::rdv
