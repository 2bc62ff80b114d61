// The rank side of strata-run's rendezvous (protocol in strata/detail/rendezvous.hpp).
//
// A reader thread owns the receive side of the socket: replies to the caller's
// collective go to a slot guarded by a mutex/condition variable, pushed
// "rank died" events to a queue signalled through an eventfd (event_fd()), so
// a progress thread can poll for deaths while no collective is running.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "strata/detail/env.hpp"
#include "strata/detail/rendezvous.hpp"
#include "strata/transport/bootstrap.hpp"

namespace strata::detail {
namespace {

using Clock = std::chrono::steady_clock;
namespace env = rdv::env;

[[noreturn]] void fail_env(const char* name, const std::string& why) {
  throw Error(Errc::bootstrap_error, std::string(name) + " " + why +
                                         " (strata-run sets it; start the program with strata-run -n N -- PROGRAM)");
}

std::string get_env(const char* name, bool required) {
  const char* v = strata::detail::env::get(name);
  if (v == nullptr) {
    if (required) fail_env(name, "is not set");
    return {};
  }
  return v;
}

int get_int(const char* name, long lo, long hi) {
  const std::string s = get_env(name, true);
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || errno != 0 || end == nullptr || *end != '\0' || v < lo || v > hi)
    fail_env(name, "='" + s + "' is not an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<int>(v);
}

class RendezvousBootstrap final : public Bootstrap {
 public:
  RendezvousBootstrap() {
    job_.launcher = "strata-run";
    job_.size = get_int(env::kSize, 1, 1 << 24);
    job_.rank = get_int(env::kRank, 0, job_.size - 1);
    job_.nhosts = get_int(env::kNHosts, 1, job_.size);
    job_.host = get_int(env::kHost, 0, job_.nhosts - 1);
    job_.local_size = get_int(env::kLocalSize, 1, job_.size);
    job_.local_rank = get_int(env::kLocalRank, 0, job_.local_size - 1);
    job_.job_id = get_env(env::kJobId, true);
    job_.topology = get_env(env::kTopology, false);
    job_.bind = get_env(env::kBind, false);
    if (!rdv::secret_from_hex(get_env(env::kSecret, true), secret_)) fail_env(env::kSecret, "is not 64 hex digits");
    std::copy(secret_.begin(), secret_.end(), job_.secret.begin());
    const std::string path = get_env(env::kRdv, true);
    const std::string t = get_env(env::kBootstrapTimeout, false);
    if (!t.empty()) {
      char* end = nullptr;
      timeout_s_ = std::strtod(t.c_str(), &end);
      if (end == nullptr || *end != '\0' || !(timeout_s_ >= 0))
        fail_env(env::kBootstrapTimeout, "='" + t + "' is not a number of seconds >= 0");
    }
    connect_and_authenticate(path);
    efd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd_ < 0) {
      const int e = errno;
      ::close(fd_);
      throw Error(Errc::bootstrap_error, "rank " + std::to_string(job_.rank) + ": eventfd failed: " + std::strerror(e));
    }
    reader_ = std::thread([this] { read_loop(); });
  }

  ~RendezvousBootstrap() override {
    ::shutdown(fd_, SHUT_RDWR);  // wakes the reader with EOF
    if (reader_.joinable()) reader_.join();
    ::close(fd_);
    ::close(efd_);
  }

  RendezvousBootstrap(const RendezvousBootstrap&) = delete;
  RendezvousBootstrap& operator=(const RendezvousBootstrap&) = delete;

  const JobInfo& job() const noexcept override { return job_; }

  std::vector<std::vector<std::byte>> allgather(const void* data, std::size_t len) override {
    if (data == nullptr && len > 0)
      throw Error(Errc::invalid_argument, "bootstrap allgather on rank " + std::to_string(job_.rank) +
                                              ": data is null but len is " + std::to_string(len));
    if (len > rdv::kMaxPayload / static_cast<std::size_t>(job_.size))
      throw Error(Errc::invalid_argument, "bootstrap allgather on rank " + std::to_string(job_.rank) + ": len " +
                                              std::to_string(len) + " is too large for the rendezvous");
    rdv::Message m = call(rdv::Type::allgather, data, len, "allgather");
    std::vector<std::vector<std::byte>> out;
    if (!rdv::unpack_blobs(m.body.data(), m.body.size(), static_cast<std::size_t>(job_.size), out))
      throw Error(Errc::bootstrap_error,
                  "bootstrap allgather on rank " + std::to_string(job_.rank) + ": malformed reply from strata-run");
    return out;
  }

  void barrier() override { call(rdv::Type::barrier, nullptr, 0, "barrier"); }

  int event_fd() const noexcept override { return efd_; }

  std::vector<int> poll_dead_ranks() override {
    std::uint64_t v = 0;
    while (::read(efd_, &v, sizeof v) < 0 && errno == EINTR) {
    }
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<int> out;
    out.swap(dead_);
    return out;
  }

 private:
  std::string who(const char* what) const {
    return std::string("bootstrap ") + what + " on rank " + std::to_string(job_.rank);
  }

  // One connection attempt: connect, send the hello, wait for the welcome.
  enum class Attempt { welcomed, refused, failed };

  // strata-run closes a connection that has sent nothing yet when a burst of
  // unauthenticated connections fills its pending table (it drops the oldest
  // silent one), and a real rank can be that connection in the instant
  // between its connect and its hello. Such a rank sees its connection closed
  // without a byte of reply; it reconnects, a bounded number of times with a
  // short backoff, before reporting the refusal (a wrong secret or a taken
  // rank is refused on every attempt, so the error comes after ~0.15 s).
  void connect_and_authenticate(const std::string& path) {
    const std::string me = "rank " + std::to_string(job_.rank);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) fail_env(env::kRdv, "='" + path + "' is too long for a Unix socket");
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    // The welcome comes at once from a live launcher; STRATA_BOOTSTRAP_TIMEOUT
    // shortens the wait.
    const double wait_s = timeout_s_ > 0 ? std::min(timeout_s_, 30.0) : 30.0;
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait_s));
    constexpr int kAttempts = 5;
    std::string why;
    for (int attempt = 0;; ++attempt) {
      const Attempt a = attempt_once(addr, path, wait_s, deadline, why);
      if (a == Attempt::welcomed) return;
      ::close(fd_);
      fd_ = -1;
      parser_ = rdv::Parser{};
      if (a == Attempt::failed || attempt + 1 >= kAttempts || Clock::now() >= deadline)
        throw Error(Errc::bootstrap_error, me + ": " + why);
      std::this_thread::sleep_for(std::chrono::milliseconds(10 << attempt));  // 10, 20, 40, 80 ms
    }
  }

  Attempt attempt_once(const sockaddr_un& addr, const std::string& path, double wait_s, Clock::time_point deadline,
                       std::string& why) {
    const std::string me = "rank " + std::to_string(job_.rank);
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw Error(Errc::bootstrap_error, me + ": socket failed: " + std::strerror(errno));
    int rc = 0;
    do {
      rc = ::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0) {
      why = "cannot connect to the strata-run rendezvous at STRATA_RDV=" + path + ": " + std::strerror(errno) +
            " (has the launcher exited?)";
      return Attempt::failed;
    }
    const auto hello =
        rdv::frame(rdv::Type::hello, static_cast<std::uint32_t>(job_.rank), secret_.data(), secret_.size());
    const std::string refused =
        "the strata-run rendezvous refused this rank (wrong STRATA_JOB_SECRET, rank already connected, or the "
        "rank's process already ended)";
    if (!rdv::write_all(fd_, hello.data(), hello.size(), deadline)) {
      const int e = errno;
      why = std::string("cannot send the hello: ") + std::strerror(e);
      if (e == EPIPE || e == ECONNRESET) {
        why = refused + " (" + why + ")";
        return Attempt::refused;
      }
      return Attempt::failed;
    }
    rdv::Message m;
    for (;;) {
      const int got = parser_.next(m);
      if (got < 0) {
        why = "malformed reply from strata-run (" + parser_.error() + ")";
        return Attempt::failed;
      }
      if (got > 0) {
        if (m.header.type == rdv::Type::welcome && m.header.arg == static_cast<std::uint32_t>(job_.rank))
          return Attempt::welcomed;
        why = "unexpected reply to the hello from strata-run ('" + rdv::type_name(m.header.type) + "' for rank " +
              std::to_string(m.header.arg) + ")";
        return Attempt::failed;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      pollfd p{fd_, POLLIN, 0};
      if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) == 0) {
        why = "no welcome from strata-run within " + std::to_string(wait_s) + " s";
        return Attempt::failed;
      }
      std::byte buf[256];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        why = refused;
        return parser_.buffered() == 0 ? Attempt::refused : Attempt::failed;
      }
      parser_.feed(buf, static_cast<std::size_t>(n));
    }
  }

  void read_loop() {
    std::byte buf[65536];
    std::string why = "strata-run closed the rendezvous connection (the launcher exited or was killed)";
    for (;;) {
      rdv::Message m;
      int got = 0;
      while ((got = parser_.next(m)) > 0) dispatch(m);
      if (got < 0) {
        why = "malformed message from strata-run (" + parser_.error() + ")";
        break;
      }
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n < 0) why = std::string("rendezvous connection failed: ") + std::strerror(errno);
        break;
      }
      parser_.feed(buf, static_cast<std::size_t>(n));
    }
    std::lock_guard<std::mutex> lock(mu_);
    gone_ = true;
    gone_why_ = why;
    cv_.notify_all();
  }

  void dispatch(rdv::Message& m) {
    std::lock_guard<std::mutex> lock(mu_);
    if (m.header.type == rdv::Type::rank_dead) {
      // A rank outside the job (or this one) is not a peer: ignore it.
      if (m.header.arg >= static_cast<std::uint32_t>(job_.size) ||
          m.header.arg == static_cast<std::uint32_t>(job_.rank))
        return;
      dead_.push_back(static_cast<int>(m.header.arg));
      const std::uint64_t one = 1;
      [[maybe_unused]] const ssize_t w = ::write(efd_, &one, sizeof one);
      return;
    }
    reply_ = std::move(m);
    have_reply_ = true;
    cv_.notify_all();
  }

  rdv::Message call(rdv::Type type, const void* data, std::size_t len, const char* what) {
    const std::uint32_t round = round_++;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (gone_) throw Error(Errc::bootstrap_error, who(what) + ": " + gone_why_);
    }
    const auto f = rdv::frame(type, round, data, len);
    const bool bounded = timeout_s_ > 0;
    const auto deadline =
        bounded ? Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_))
                : Clock::now() + std::chrono::hours(24 * 365);
    if (!rdv::write_all(fd_, f.data(), f.size(), deadline))
      throw Error(Errc::bootstrap_error, who(what) + ": cannot send to strata-run: " + std::strerror(errno));
    std::unique_lock<std::mutex> lock(mu_);
    const auto ready = [&] { return have_reply_ || gone_; };
    if (!cv_.wait_until(lock, deadline, ready))
      throw Error(Errc::timeout, who(what) + ": no reply within STRATA_BOOTSTRAP_TIMEOUT=" +
                                     std::to_string(timeout_s_) + " s (are all ranks calling it?)");
    if (!have_reply_) throw Error(Errc::bootstrap_error, who(what) + ": " + gone_why_);
    rdv::Message m = std::move(reply_);
    have_reply_ = false;
    if (m.header.arg != round)
      throw Error(Errc::bootstrap_error, who(what) + ": reply for round " + std::to_string(m.header.arg) +
                                             " while waiting for round " + std::to_string(round));
    if (m.header.type == rdv::Type::failed)
      throw Error(Errc::peer_dead,
                  who(what) + " failed: " + std::string(reinterpret_cast<const char*>(m.body.data()), m.body.size()));
    if (m.header.type != rdv::Type::result)
      throw Error(Errc::bootstrap_error, who(what) + ": unexpected message from strata-run");
    return m;
  }

  JobInfo job_;
  rdv::Secret secret_{};
  double timeout_s_ = 0;
  int fd_ = -1;
  int efd_ = -1;
  rdv::Parser parser_;  // used by the constructor, then only by the reader thread
  std::thread reader_;
  std::uint32_t round_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  bool have_reply_ = false;
  rdv::Message reply_;
  bool gone_ = false;
  std::string gone_why_;
  std::vector<int> dead_;
};

}  // namespace

std::unique_ptr<Bootstrap> make_rendezvous_bootstrap() { return std::make_unique<RendezvousBootstrap>(); }

}  // namespace strata::detail
