// The routed transport: each peer goes to the shared-memory backend (same
// virtual host, unless STRATA_INTRA=fabric) or to the libfabric backend.
// Both backends are constructed on every rank, shm first, fabric second
// (both are collective over the bootstrap), even if one serves no peer.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend.hpp"
#include "shm/sync.hpp"

namespace strata::transport {
namespace {

using detail::Backend;

class Router final : public Transport, public detail::WakeArm {
 public:
  Router(Bootstrap& boot, const Hierarchy& hier, const TransportOptions& opts) : boot_(boot) {
    rank_ = boot.rank();
    size_ = boot.size();
    const std::string who = "make_transport (rank " + std::to_string(rank_) + ")";
    if (opts.intra != "shm" && opts.intra != "fabric") {
      throw Error(Errc::invalid_argument, who + ": intra='" + opts.intra + "', expected 'shm' or 'fabric'");
    }
    if (hier.size() != size_) {
      throw Error(Errc::invalid_argument, who + ": hierarchy has " + std::to_string(hier.size()) +
                                              " ranks, bootstrap has " + std::to_string(size_));
    }
    std::vector<bool> serve_shm(static_cast<std::size_t>(size_)), serve_fab(static_cast<std::size_t>(size_));
    for (int p = 0; p < size_; ++p) {
      // The rank itself always goes through shm (a loopback ring); with
      // STRATA_INTRA=fabric every other peer uses libfabric.
      const bool local = p == rank_ || (opts.intra == "shm" && hier.same_host(rank_, p));
      serve_shm[static_cast<std::size_t>(p)] = local;
      serve_fab[static_cast<std::size_t>(p)] = !local;
    }
    shm_uses_ = std::count(serve_shm.begin(), serve_shm.end(), true) > 0;
    fab_uses_ = std::count(serve_fab.begin(), serve_fab.end(), true) > 0;
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) throw Error(Errc::transport_error, who + ": eventfd: " + std::strerror(errno));
    try {
      shm_ = detail::make_shm_backend(boot, hier, serve_shm, opts);
      fab_ = detail::make_fabric_backend(boot, hier, serve_fab, opts);
    } catch (...) {
      ::close(wake_fd_);
      throw;
    }
    fab_hint_ = dynamic_cast<detail::PollHint*>(fab_.get());
    route_.resize(static_cast<std::size_t>(size_));
    for (int p = 0; p < size_; ++p) {
      route_[static_cast<std::size_t>(p)] = serve_shm[static_cast<std::size_t>(p)] ? shm_.get() : fab_.get();
    }
  }

  ~Router() override {
    shutdown();
    fab_.reset();
    shm_.reset();
    if (wake_fd_ >= 0) ::close(wake_fd_);
  }
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  [[nodiscard]] int rank() const noexcept override { return rank_; }
  [[nodiscard]] int size() const noexcept override { return size_; }
  [[nodiscard]] std::string name() const override {
    std::string n = "router(";
    if (shm_uses_) n += shm_->name();
    if (shm_uses_ && fab_uses_) n += "+";
    if (fab_uses_) n += fab_->name();
    return n + ")";
  }

  // Handlers go straight to both backends: each keeps what arrives before its
  // handler is installed.
  void set_completion_handler(CompletionHandler h) override {
    shm_->set_completion_handler(h);
    fab_->set_completion_handler(std::move(h));
  }
  void set_signal_handler(SignalHandler h) override {
    shm_->set_signal_handler(h);
    fab_->set_signal_handler(std::move(h));
  }
  void set_peer_failure_handler(PeerFailureHandler h) override {
    shm_->set_peer_failure_handler(h);
    fab_->set_peer_failure_handler(std::move(h));
  }

  Status register_memory(void* addr, std::size_t len, RemoteKey* key) override {
    if (key == nullptr) {
      return {Errc::invalid_argument, "register_memory: key is null (rank " + std::to_string(rank_) + ")"};
    }
    RemoteKey merged{};
    if (shm_uses_) {
      Status s = shm_->register_memory(addr, len, &merged);
      if (!s) return s;
    }
    if (fab_uses_) {
      RemoteKey f{};
      Status s = fab_->register_memory(addr, len, &f);
      if (!s) {
        if (shm_uses_) (void)shm_->deregister_memory(addr, len);
        return s;
      }
      merged.owner = f.owner;
      merged.addr = f.addr;
      merged.len = f.len;
      merged.flags |= f.flags;
      merged.fi_key = f.fi_key;
      merged.fi_base = f.fi_base;  // 'reserved' stays the shm section's (mapped region base)
    }
    *key = merged;
    return {};
  }
  std::unique_ptr<SharedRegion> allocate_shared(std::size_t len, const std::vector<int>& peers) override {
    return shm_uses_ ? shm_->allocate_shared(len, peers) : nullptr;
  }
  Status deregister_memory(void* addr, std::size_t len) override {
    Status a = shm_uses_ ? shm_->deregister_memory(addr, len) : Status();
    Status b = fab_uses_ ? fab_->deregister_memory(addr, len) : Status();
    return a ? b : a;
  }

  bool shared_key(const void* addr, std::size_t len, RemoteKey* key) override {
    return shm_uses_ && shm_->shared_key(addr, len, key);
  }
  void unmap_peer(int peer, const RemoteKey& key) override {
    if (peer < 0 || peer >= size()) return;
    Backend* b = route("unmap_peer", peer);
    if (b != nullptr && b == shm_.get()) b->unmap_peer(peer, key);
  }
  void* map_peer(int peer, const RemoteKey& key, std::uint64_t off, std::size_t len) override {
    Backend* b = route("map_peer", peer);
    return b != nullptr && b == shm_.get() ? b->map_peer(peer, key, off, len) : nullptr;
  }
  bool can_read_peer(int peer) const override {
    if (peer < 0 || peer >= size() || !shm_uses_) return false;
    const Backend* b = route("can_read_peer", peer);
    return b != nullptr && b == shm_.get() && b->can_read_peer(peer);
  }
  const void* mapped_peer(int peer, std::uint64_t handle, std::size_t len) override {
    if (!shm_uses_ || peer < 0 || peer >= size()) return nullptr;
    const Backend* b = route("mapped_peer", peer);
    return b == shm_.get() ? shm_->mapped_peer(peer, handle, len) : nullptr;
  }
  Status read_peer(int peer, void* dst, std::uint64_t addr, std::size_t len) override {
    Backend* b = route("read_peer", peer);
    if (b == nullptr) return bad_peer("read_peer", peer);
    return b->read_peer(peer, dst, addr, len);
  }
  Status write_peer(int peer, const void* src, std::uint64_t addr, std::size_t len) override {
    Backend* b = route("write_peer", peer);
    if (b == nullptr) return bad_peer("write_peer", peer);
    return b->write_peer(peer, src, addr, len);
  }
  void set_progress_hook(std::function<std::size_t()> hook) override { hook_ = std::move(hook); }

  Status put(int peer, const void* src, std::size_t len, const RemoteKey& dst, std::uint64_t off, void* ctx) override {
    Backend* b = route("put", peer);
    return b != nullptr ? b->put(peer, src, len, dst, off, ctx) : bad_peer("put", peer);
  }
  Status get(int peer, void* dst, std::size_t len, const RemoteKey& src, std::uint64_t off, void* ctx) override {
    Backend* b = route("get", peer);
    return b != nullptr ? b->get(peer, dst, len, src, off, ctx) : bad_peer("get", peer);
  }
  Status put_with_signal(int peer, const void* src, std::size_t len, const RemoteKey& dst, std::uint64_t off,
                         std::uint64_t sig, void* ctx) override {
    Backend* b = route("put_with_signal", peer);
    return b != nullptr ? b->put_with_signal(peer, src, len, dst, off, sig, ctx) : bad_peer("put_with_signal", peer);
  }
  Status signal(int peer, std::uint64_t payload, void* ctx) override {
    Backend* b = route("signal", peer);
    return b != nullptr ? b->signal(peer, payload, ctx) : bad_peer("signal", peer);
  }
  Status fetch_add(int peer, const RemoteKey& dst, std::uint64_t off, std::uint64_t addend, std::uint64_t* fetched,
                   void* ctx) override {
    Backend* b = route("fetch_add", peer);
    return b != nullptr ? b->fetch_add(peer, dst, off, addend, fetched, ctx) : bad_peer("fetch_add", peer);
  }

  void declare_dead(int peer, const Status& why) override {
    if (peer < 0 || peer >= size_ || peer == rank_) return;
    if (Backend* b = route_[static_cast<std::size_t>(peer)]) b->fail_peer(peer, why);
  }

  std::size_t progress() override {
    std::size_t n = 0;
    if (shm_uses_) n += shm_->progress();
    if (fab_uses_) n += fab_->progress();
    n += poll_launcher();
    if (hook_) n += hook_();
    return n;
  }

  void wait_for_event(std::chrono::microseconds timeout) override { wait_impl(timeout, false); }
  bool wait_for_event_or(int fd, std::chrono::microseconds timeout) override {
    wait_impl(timeout, false, fd);
    return true;
  }

  // ------------------------------------------------------------ WakeArm
  bool arm_wakeup() override {
    if (shm_uses_ && !shm_->prepare_wait()) return false;
    // A polled backend (no fd) cannot be armed: while it is busy, bring a
    // server blocked in wait_aside() back to its short polling interval.
    if (fab_uses_ && fab_->polled() && poll_interval() < kIdlePoll) wake();
    return true;
  }
  void wait_aside(std::chrono::microseconds timeout) override { wait_impl(timeout, true); }

  void wake() override {
    const std::uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }

  [[nodiscard]] Status peer_status(int peer) const override {
    if (peer < 0 || peer >= size_) return bad_peer("peer_status", peer);
    return route_[static_cast<std::size_t>(peer)]->peer_status(peer);
  }

  void shutdown() override {
    if (shm_) shm_->shutdown();
    if (fab_) fab_->shutdown();
  }

 private:
  Backend* route(const char* /*op*/, int peer) const noexcept {
    return (peer < 0 || peer >= size_) ? nullptr : route_[static_cast<std::size_t>(peer)];
  }
  Status bad_peer(const char* op, int peer) const {
    return {Errc::unknown_peer, std::string(op) + ": peer " + std::to_string(peer) + " outside [0, " +
                                    std::to_string(size_) + ") (rank " + std::to_string(rank_) + ")"};
  }

  /// A polled backend is polled at its own interval: short while it is busy,
  /// kIdlePoll when idle, longer when it has doorbells (docs/fabric.md).
  static constexpr std::chrono::microseconds kIdlePoll{1000};
  [[nodiscard]] std::chrono::microseconds poll_interval() const {
    return fab_hint_ != nullptr ? fab_hint_->poll_interval() : kIdlePoll;
  }

  void wait_impl(std::chrono::microseconds timeout, bool aside, int extra_fd = -1) {
    if (shm_uses_ && !shm_->prepare_wait()) return;
    if (fab_uses_ && !fab_->prepare_wait()) return;
    pollfd fds[5];
    nfds_t n = 0;
    bool poll_only = false;
    nfds_t shm_index = 16;  // absent
    nfds_t fab_index = 16;
    for (Backend* b : {shm_uses_ ? shm_.get() : nullptr, fab_uses_ ? fab_.get() : nullptr}) {
      if (b == nullptr) continue;
      if (b->polled()) poll_only = true;
      const int fd = b->wait_fd();
      if (fd >= 0) {
        (b == shm_.get() ? shm_index : fab_index) = n;
        fds[n++] = {fd, POLLIN, 0};
      }
    }
    const nfds_t wake_index = n;
    fds[n++] = {wake_fd_, POLLIN, 0};
    const int boot_fd = boot_.event_fd();
    const nfds_t boot_index = n;
    if (boot_fd >= 0) fds[n++] = {boot_fd, POLLIN, 0};
    if (extra_fd >= 0) fds[n++] = {extra_fd, POLLIN, 0};  // the caller reads it
    std::chrono::microseconds limit = timeout;
    if (poll_only) limit = std::min(limit, aside ? kIdlePoll : poll_interval());
    if (limit.count() < 0) limit = std::chrono::microseconds(0);
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(std::min<std::int64_t>(limit.count() / 1000000, 1 << 30));
    ts.tv_nsec = static_cast<long>((limit.count() % 1000000) * 1000);
    const int rc = ::ppoll(fds, n, &ts, nullptr);
    if (rc <= 0) return;
    if (shm_index < n && (fds[shm_index].revents & POLLIN) != 0) {
      // Wake-up datagrams are drained here, not in progress(): a poller that
      // clears the sleeping flag then pays no system call.
      char buf[64];
      while (::recv(fds[shm_index].fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
      }
    }
    if (fab_index < n && (fds[fab_index].revents & POLLIN) != 0) fab_->wait_fd_ready();
    if ((fds[wake_index].revents & POLLIN) != 0) {
      std::uint64_t v = 0;
      (void)!::read(wake_fd_, &v, sizeof(v));
    }
    if (boot_fd >= 0 && fds[boot_index].revents != 0) launcher_event_.store(true, std::memory_order_release);
  }

  /// Forwards the launcher's death reports to the backend serving each rank.
  /// Checked when the launcher's fd fired, else at most every 2 ms.
  std::size_t poll_launcher() {
    const bool fired = launcher_event_.load(std::memory_order_acquire);
    // Reading the clock on every progress() call cost ~10% of a small
    // collective's time (perf, barrier on 2 ranks): look at it every 64th call.
    thread_local unsigned calls = 0;
    if (!fired && (++calls & 63U) != 0) return 0;
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    if (!fired && now - last_launcher_poll_.load(std::memory_order_relaxed) < 2'000'000) return 0;
    std::unique_lock<detail::SpinLock> g(launcher_mu_, std::try_to_lock);
    if (!g.owns_lock()) return 0;
    launcher_event_.store(false, std::memory_order_relaxed);
    last_launcher_poll_.store(now, std::memory_order_relaxed);
    std::vector<int> dead;
    try {
      dead = boot_.poll_dead_ranks();
    } catch (...) {
      return 0;  // the launcher connection is gone; timeouts still bound every wait
    }
    g.unlock();
    for (int r : dead) {
      if (r < 0 || r >= size_ || r == rank_) continue;
      route_[static_cast<std::size_t>(r)]->fail_peer(
          r, {Errc::peer_dead, "peer rank " + std::to_string(r) + " died (reported by the launcher to rank " +
                                   std::to_string(rank_) + ")"});
    }
    return dead.size();
  }

  Bootstrap& boot_;
  int rank_ = 0;
  int size_ = 0;
  bool shm_uses_ = false;
  std::function<std::size_t()> hook_;  // set_progress_hook (the engine's fast path)
  bool fab_uses_ = false;
  std::unique_ptr<Backend> shm_;
  std::unique_ptr<Backend> fab_;
  std::vector<Backend*> route_;
  detail::PollHint* fab_hint_ = nullptr;
  int wake_fd_ = -1;
  detail::SpinLock launcher_mu_;
  std::atomic<bool> launcher_event_{false};
  std::atomic<std::int64_t> last_launcher_poll_{0};
};

}  // namespace

std::unique_ptr<Transport> make_transport(Bootstrap& boot, const Hierarchy& hier, const TransportOptions& opts) {
  return std::make_unique<Router>(boot, hier, opts);
}

}  // namespace strata::transport
