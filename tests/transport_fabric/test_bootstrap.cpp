#include "test_bootstrap.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "strata/error.hpp"

namespace strata::fabric_test {

bool write_all(int fd, const void* p, std::size_t n) {
  const auto* b = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::send(fd, b, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    b += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* p, std::size_t n, const std::atomic<bool>* stop) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    if (stop != nullptr) {
      pollfd pfd{fd, POLLIN, 0};
      int r = ::poll(&pfd, 1, 100);
      if (stop->load()) return false;
      if (r == 0) continue;
      if (r < 0 && errno == EINTR) continue;
    }
    ssize_t got = ::read(fd, b, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    b += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

namespace {
sockaddr_un make_addr(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof(a.sun_path)) throw Error(Errc::invalid_argument, "rendezvous path too long: " + path);
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}
}  // namespace

SocketBootstrap::SocketBootstrap(const std::string& path, int rank, int size) {
  job_.rank = rank;
  job_.size = size;
  job_.local_size = size;
  job_.local_rank = rank;
  job_.job_id = "fabric-test:" + path;  // unique per run: names the shm provider's regions
  job_.launcher = "fabric-test";
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a = make_addr(path);
  if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
    throw Error(Errc::bootstrap_error,
                "rank " + std::to_string(rank) + ": cannot connect to " + path + ": " + std::strerror(errno));
  std::int32_t r = rank;
  if (!write_all(fd_, &r, sizeof(r))) throw Error(Errc::bootstrap_error, "rendezvous: hello failed");
}

SocketBootstrap::~SocketBootstrap() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<std::vector<std::byte>> SocketBootstrap::allgather(const void* data, std::size_t len) {
  std::uint64_t l = len;
  if (!write_all(fd_, &l, sizeof(l)) || (len > 0 && !write_all(fd_, data, len)))
    throw Error(Errc::bootstrap_error, "rank " + std::to_string(job_.rank) + ": rendezvous send failed");
  std::vector<std::vector<std::byte>> out(static_cast<std::size_t>(job_.size));
  for (auto& blob : out) {
    if (!read_all(fd_, &l, sizeof(l)))
      throw Error(Errc::bootstrap_error, "rank " + std::to_string(job_.rank) + ": rendezvous closed (a rank died?)");
    blob.resize(l);
    if (l > 0 && !read_all(fd_, blob.data(), l))
      throw Error(Errc::bootstrap_error, "rank " + std::to_string(job_.rank) + ": rendezvous closed");
  }
  return out;
}

RendezvousServer::RendezvousServer(std::string path, int size) : path_(std::move(path)), size_(size) {
  ::unlink(path_.c_str());
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a = make_addr(path_);
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::listen(listen_fd_, size_) != 0)
    throw Error(Errc::bootstrap_error, "rendezvous: cannot listen on " + path_ + ": " + std::strerror(errno));
  thread_ = std::thread([this] { run(); });
}

RendezvousServer::~RendezvousServer() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  ::unlink(path_.c_str());
}

void RendezvousServer::run() {
  std::vector<int> fds(static_cast<std::size_t>(size_), -1);
  auto close_all = [&] {
    for (int& f : fds) {
      if (f >= 0) ::close(f);
      f = -1;
    }
  };
  for (int accepted = 0; accepted < size_;) {
    pollfd pfd{listen_fd_, POLLIN, 0};
    if (::poll(&pfd, 1, 100) <= 0) {
      if (stop_) return close_all();
      continue;
    }
    int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    std::int32_t r = -1;
    if (!read_all(c, &r, sizeof(r), &stop_) || r < 0 || r >= size_ || fds[static_cast<std::size_t>(r)] >= 0) {
      ::close(c);
      continue;
    }
    fds[static_cast<std::size_t>(r)] = c;
    ++accepted;
  }
  // Rounds: one blob from every rank (in rank order), then all blobs to all.
  for (;;) {
    std::vector<std::vector<std::byte>> blobs(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      int f = fds[static_cast<std::size_t>(r)];
      std::uint64_t l = 0;
      if (!read_all(f, &l, sizeof(l), &stop_) || l > (std::uint64_t{1} << 30)) return close_all();
      blobs[static_cast<std::size_t>(r)].resize(l);
      if (l > 0 && !read_all(f, blobs[static_cast<std::size_t>(r)].data(), l, &stop_)) return close_all();
    }
    for (int f : fds) {
      for (const auto& b : blobs) {
        std::uint64_t l = b.size();
        if (!write_all(f, &l, sizeof(l)) || (l > 0 && !write_all(f, b.data(), l))) return close_all();
      }
    }
  }
}

}  // namespace strata::fabric_test
