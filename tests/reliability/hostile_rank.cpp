// hostile_rank: a rank program for the hostile-input tests of the strata-run
// rendezvous (tests/reliability/test_hostile_input.cpp), run as
// `strata-run -n 2 -- hostile_rank MODE`.
//
// Rank 0 is a normal rank: bootstrap, allgather, barrier. It prints
// "NORMAL ok" or "NORMAL error <code>: <message>" (and exits 3).
//
// Rank 1 is hostile:
//   auth-*    it connects itself with the job secret (STRATA_JOB_SECRET), is
//             welcomed as rank 1, sends the malformed frame of MODE and waits
//             (5 s bound) for strata-run to close the connection: prints
//             "HOSTILE closed" or "HOSTILE not closed". Exits 0.
//   unauth-*  it attacks from a side connection without (or with a wrong)
//             authentication, expects the connection closed with no byte of
//             reply ("HOSTILE refused", else "HOSTILE answered" or
//             "HOSTILE open"), then behaves like rank 0 (prints NORMAL ...).
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "strata/detail/rendezvous.hpp"
#include "strata/transport/bootstrap.hpp"

namespace {

namespace rdv = strata::detail::rdv;
using Clock = std::chrono::steady_clock;
using Bytes = std::vector<std::byte>;

const char* errc_name(strata::Errc e) {
  switch (e) {
    case strata::Errc::peer_dead:
      return "peer_dead";
    case strata::Errc::timeout:
      return "timeout";
    case strata::Errc::bootstrap_error:
      return "bootstrap_error";
    default:
      return "other";
  }
}

int connect_rdv() {
  const char* path = std::getenv("STRATA_RDV");
  if (path == nullptr) return -1;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path, sizeof addr.sun_path - 1);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_bytes(int fd, const Bytes& b) {
  return b.empty() || rdv::write_all(fd, b.data(), b.size(), Clock::now() + std::chrono::seconds(5));
}

/// Reads until EOF or @p seconds pass; returns the bytes; @p closed tells which.
Bytes drain(int fd, double seconds, bool& closed) {
  closed = false;
  Bytes got;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) return got;
    std::byte buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      closed = true;
      return got;
    }
    got.insert(got.end(), buf, buf + n);
  }
}

/// A raw header (any magic, type and length).
Bytes header(std::uint32_t magic, std::uint32_t type, std::uint32_t arg, std::uint64_t len) {
  Bytes b(rdv::kHeaderSize);
  std::memcpy(b.data(), &magic, 4);
  std::memcpy(b.data() + 4, &type, 4);
  std::memcpy(b.data() + 8, &arg, 4);
  std::memset(b.data() + 12, 0, 4);
  std::memcpy(b.data() + 16, &len, 8);
  return b;
}
Bytes frame(rdv::Type t, std::uint32_t arg, std::size_t len) {
  const std::vector<char> body(len, 'x');
  return rdv::frame(t, arg, body.data(), len);
}
Bytes cat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

rdv::Secret secret() {
  rdv::Secret s{};
  const char* hex = std::getenv("STRATA_JOB_SECRET");
  if (hex == nullptr || !rdv::secret_from_hex(hex, s)) {
    std::printf("HOSTILE: no usable STRATA_JOB_SECRET\n");
    std::exit(4);
  }
  return s;
}

int normal(int rank) {
  try {
    auto b = strata::bootstrap_from_environment();
    const std::uint64_t x = 0x1000u + static_cast<unsigned>(rank);
    const auto blobs = b->allgather(&x, sizeof x);
    b->barrier();
    std::printf("NORMAL ok (rank %d, %zu blobs)\n", rank, blobs.size());
    return 0;
  } catch (const strata::Error& e) {
    std::printf("NORMAL error %s: %s\n", errc_name(e.errc()), e.what());
    return 3;
  }
}

/// The bytes an authenticated rank 1 sends after its welcome; empty = unknown mode.
Bytes auth_attack(const std::string& mode, bool& close_after) {
  close_after = false;
  const std::uint32_t al = static_cast<std::uint32_t>(rdv::Type::allgather);
  if (mode == "auth-bad-magic") return cat(header(0x58585858u, al, 0, 8), Bytes(8));
  if (mode == "auth-unknown-type") return header(rdv::kMagic, 99, 0, 0);
  if (mode == "auth-type-zero") return header(rdv::kMagic, 0, 0, 0);
  if (mode == "auth-over-1gib") return header(rdv::kMagic, al, 0, rdv::kMaxPayload + 1);
  if (mode == "auth-len-max") return header(rdv::kMagic, al, 0, ~std::uint64_t{0});
  if (mode == "auth-blob-over-rank-limit") return header(rdv::kMagic, al, 0, rdv::kMaxPayload / 2 + 1);
  if (mode == "auth-welcome") return frame(rdv::Type::welcome, 1, 0);
  if (mode == "auth-result") return frame(rdv::Type::result, 0, 64);
  if (mode == "auth-failed") return frame(rdv::Type::failed, 0, 16);
  if (mode == "auth-rank-dead") return frame(rdv::Type::rank_dead, 0, 16);
  if (mode == "auth-second-hello") {
    const rdv::Secret s = secret();
    return rdv::frame(rdv::Type::hello, 1, s.data(), s.size());
  }
  if (mode == "auth-barrier-payload") return frame(rdv::Type::barrier, 0, 16);
  if (mode == "auth-double-allgather") return cat(frame(rdv::Type::allgather, 0, 8), frame(rdv::Type::allgather, 1, 8));
  if (mode == "auth-garbage") {
    Bytes g(1000);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<std::byte>((i * 131u + 7u) & 0xFFu);
    return g;
  }
  if (mode == "auth-truncated-header") {
    close_after = true;
    Bytes h = header(rdv::kMagic, al, 0, 8);
    h.resize(10);
    return h;
  }
  if (mode == "auth-truncated-payload") {
    close_after = true;
    return cat(header(rdv::kMagic, al, 0, 100), Bytes(10));
  }
  return {};
}

int hostile_auth(const std::string& mode) {
  bool close_after = false;
  const Bytes attack = auth_attack(mode, close_after);
  if (attack.empty()) {
    std::printf("HOSTILE: unknown mode %s\n", mode.c_str());
    return 2;
  }
  const int fd = connect_rdv();
  if (fd < 0) return 5;
  const rdv::Secret s = secret();
  const Bytes hello = rdv::frame(rdv::Type::hello, 1, s.data(), s.size());
  send_bytes(fd, hello);
  // The welcome: 24 bytes.
  rdv::Parser p;
  rdv::Message m;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (p.next(m) == 0 && Clock::now() < deadline) {
    pollfd q{fd, POLLIN, 0};
    if (::poll(&q, 1, 1000) != 1) continue;
    std::byte buf[256];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    p.feed(buf, static_cast<std::size_t>(n));
  }
  if (m.header.type != rdv::Type::welcome) {
    std::printf("HOSTILE: not welcomed\n");
    return 6;
  }
  send_bytes(fd, attack);
  if (close_after) {
    ::close(fd);
    std::printf("HOSTILE closed (itself, mid-message)\n");
    return 0;
  }
  bool closed = false;
  drain(fd, 5, closed);
  ::close(fd);
  std::printf("HOSTILE %s\n", closed ? "closed" : "not closed");
  return 0;
}

/// One unauthenticated attack; true when strata-run closed it without a byte of reply.
bool refused(const Bytes& bytes, double wait_s, bool trickle = false) {
  const int fd = connect_rdv();
  if (fd < 0) return false;
  if (trickle) {
    // Slowloris: a byte at a time, far slower than the 5 s authentication window allows.
    for (const std::byte b : bytes) {
      if (::send(fd, &b, 1, MSG_NOSIGNAL) != 1) break;
      bool closed = false;
      const Bytes got = drain(fd, 0.5, closed);
      if (closed) {
        ::close(fd);
        return got.empty();
      }
    }
  } else if (!send_bytes(fd, bytes)) {
    ::close(fd);
    return true;  // closed while we sent: refused
  }
  bool closed = false;
  const Bytes got = drain(fd, wait_s, closed);
  ::close(fd);
  if (!got.empty()) std::printf("HOSTILE answered (%zu bytes)\n", got.size());
  return closed && got.empty();
}

int hostile_unauth(const std::string& mode, int rank) {
  rdv::Secret right = secret();
  rdv::Secret wrong = right;
  wrong[0] ^= 0x5a;
  bool ok = false;
  if (mode == "unauth-connect-close") {
    const int fd = connect_rdv();
    ok = fd >= 0;
    ::close(fd);
  } else if (mode == "unauth-wrong-secret") {
    ok = refused(rdv::frame(rdv::Type::hello, 1, wrong.data(), wrong.size()), 7);
  } else if (mode == "unauth-garbage") {
    ok = refused(Bytes(100, std::byte{0x41}), 7);
  } else if (mode == "unauth-short-secret") {
    ok = refused(rdv::frame(rdv::Type::hello, 1, right.data(), 16), 7);
  } else if (mode == "unauth-long-hello") {
    Bytes body(64);
    std::memcpy(body.data(), right.data(), right.size());
    ok = refused(rdv::frame(rdv::Type::hello, 1, body.data(), body.size()), 7);
  } else if (mode == "unauth-rank-out-of-range") {
    ok = refused(rdv::frame(rdv::Type::hello, 7, right.data(), right.size()), 7);
  } else if (mode == "unauth-allgather-first") {
    ok = refused(frame(rdv::Type::allgather, 0, 8), 7);
  } else if (mode == "unauth-huge-hello") {
    ok = refused(header(rdv::kMagic, static_cast<std::uint32_t>(rdv::Type::hello), 1, rdv::kMaxPayload), 2);
  } else if (mode == "unauth-bad-magic") {
    ok = refused(cat(header(0x11223344u, 1, 1, 32), Bytes(32)), 7);
  } else if (mode == "unauth-slowloris") {
    ok = refused(rdv::frame(rdv::Type::hello, 1, right.data(), right.size()), 8, true);
  } else if (mode == "unauth-silent") {
    ok = refused({}, 8);  // says nothing: dropped after the authentication window
  } else if (mode == "unauth-many-pending") {
    // 80 silent connections: at most 64 wait for authentication, the rest are
    // closed at once. Watched together until 16 closed or 3 s passed (well
    // inside the 5 s authentication window, after which every silent one is
    // closed anyway), so a loaded machine only delays the verdict.
    std::vector<int> fds;
    for (int i = 0; i < 80; ++i) fds.push_back(connect_rdv());
    int closed_now = 0;
    std::vector<bool> seen(fds.size(), false);
    const auto deadline = Clock::now() + std::chrono::seconds(3);
    while (closed_now < 16 && Clock::now() < deadline) {
      std::vector<pollfd> ps;
      std::vector<std::size_t> idx;
      for (std::size_t i = 0; i < fds.size(); ++i) {
        if (fds[i] < 0 || seen[i]) continue;
        ps.push_back({fds[i], POLLIN, 0});
        idx.push_back(i);
      }
      if (ps.empty() || ::poll(ps.data(), ps.size(), 100) <= 0) continue;
      for (std::size_t k = 0; k < ps.size(); ++k) {
        if (ps[k].revents == 0) continue;
        std::byte b[64];
        const ssize_t n = ::recv(ps[k].fd, b, sizeof b, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {  // EOF or reset: closed
          seen[idx[k]] = true;
          ++closed_now;
        }
      }
    }
    for (const int fd : fds)
      if (fd >= 0) ::close(fd);
    std::printf("HOSTILE %d of 80 closed at once\n", closed_now);
    ok = closed_now >= 16;
  } else if (mode != "unauth-rank-taken") {
    std::printf("HOSTILE: unknown mode %s\n", mode.c_str());
    return 2;
  }
  if (mode == "unauth-rank-taken") {
    // Join as rank 1 first, then claim rank 1 again with the right secret.
    try {
      auto b = strata::bootstrap_from_environment();
      ok = refused(rdv::frame(rdv::Type::hello, 1, right.data(), right.size()), 7);
      const std::uint64_t x = 0x1001u;
      b->allgather(&x, sizeof x);
      b->barrier();
      std::printf("HOSTILE %s\n", ok ? "refused" : "accepted");
      std::printf("NORMAL ok (rank %d)\n", rank);
      return 0;
    } catch (const strata::Error& e) {
      std::printf("NORMAL error %s: %s\n", errc_name(e.errc()), e.what());
      return 3;
    }
  }
  std::printf("HOSTILE %s\n", ok ? "refused" : "accepted");
  std::fflush(stdout);
  return normal(rank);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const char* r = std::getenv("STRATA_RANK");
  const int rank = r != nullptr ? std::atoi(r) : 0;
  int rc = 0;
  if (rank != 1)
    rc = normal(rank);
  else if (mode.rfind("auth-", 0) == 0)
    rc = hostile_auth(mode);
  else
    rc = hostile_unauth(mode, rank);
  std::fflush(stdout);
  return rc;
}
