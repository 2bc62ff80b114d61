// Same-host backend: progress: consuming the incoming rings, completing operations,
// delivering completions, peer liveness, sleeping on the wake socket.
#include "shm/shm_backend.hpp"

namespace strata::transport::detail::shmem {

namespace {

/// The stall clock of busy peers: CLOCK_MONOTONIC_COARSE (the steady clock's
/// base, a few ms resolution) is enough for timeouts of 200 ms and up and costs
/// a memory read instead of the TSC arithmetic of steady_clock::now(), which
/// was ~6% of a small collective's time (perf, barrier on 2 ranks).
Clock::time_point coarse_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(ts.tv_sec) +
                                                                       std::chrono::nanoseconds(ts.tv_nsec)));
}

/// Names of shared objects: unguessable without the job secret.

// State letter of process @p pid from /proc/PID/stat (R, S, D, T, t, Z, ...);
// 0 when the process does not exist.
char proc_state(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ESRCH ? 0 : 'R';  // unreadable: assume alive
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* close_paren = std::strrchr(buf, ')');  // the command name may hold spaces and parentheses
  return close_paren != nullptr && close_paren[1] == ' ' && close_paren[2] != '\0' ? close_paren[2] : 'R';
}

}  // namespace

void ShmBackend::complete_request(Peer& p, std::uint64_t id, std::vector<Completion>& done, bool* corrupt) {
  std::lock_guard<SpinLock> g(p.prod_mu);
  if (p.requests.empty() || p.requests.front().id != id) {
    if (!p.dead.load(std::memory_order_relaxed)) *corrupt = true;  // after fail_peer the list was drained
    return;
  }
  done.push_back({p.requests.front().context, {}});
  p.requests.pop_front();
}

std::size_t ShmBackend::consume(Peer& p, std::vector<Completion>& done) {
  std::unique_lock<SpinLock> g(p.cons_mu, std::try_to_lock);
  if (!g.owns_lock()) return 0;
  std::size_t n = 0;
  bool corrupt = false;
  while (n < static_cast<std::size_t>(kBatch)) {
    const RecHdr* r = p.in.peek(&corrupt);
    if (r == nullptr) break;
    STRATA_TSAN_ACQUIRE(&p);
    strata::detail::tsan_acquire_from_peers();  // the peer may have acted on a memory flag of ours
    const SignalHandler* sh = nullptr;
    if (r->type == RecType::signal || (r->flags & RecHdr::kSignal) != 0) {
      sh = signal_.get();
      if (sh == nullptr) break;  // keep it until a handler is installed
    }
    switch (r->type) {
      case RecType::put:
      case RecType::get_data:
        if (r->len > 0) std::memcpy(reinterpret_cast<void*>(r->addr), r->payload(), r->len);
        if (r->type == RecType::get_data && (r->flags & RecHdr::kLast) != 0) complete_request(p, r->b, done, &corrupt);
        if (sh != nullptr) (*sh)(p.rank, r->a);
        break;
      case RecType::signal:
        (*sh)(p.rank, r->a);
        break;
      case RecType::get_req: {
        OutOp o;
        o.type = RecType::get_data;
        o.user = false;
        o.src = reinterpret_cast<const std::byte*>(r->addr);
        o.len = r->c;
        o.addr = r->a;
        o.b = r->b;
        (void)post(p, o);  // dropped only when the requester is dead
        break;
      }
      case RecType::fadd_req: {
        OutOp o;
        o.type = RecType::fadd_reply;
        o.user = false;
        o.a = __atomic_fetch_add(reinterpret_cast<std::uint64_t*>(r->addr), r->a, __ATOMIC_SEQ_CST);
        o.addr = r->c;
        o.b = r->b;
        (void)post(p, o);
        break;
      }
      case RecType::fadd_reply:
        if (r->addr != 0) std::memcpy(reinterpret_cast<void*>(r->addr), &r->a, sizeof(r->a));
        complete_request(p, r->b, done, &corrupt);
        break;
      case RecType::region_map:
        on_region_map(p, r->a, r->addr);
        break;
      case RecType::region_ack:
        regions_->answered(p.rank, r->a);
        break;
      case RecType::region_unmap:
        drop_mapping(p, r->a, 0);
        break;
      default:
        corrupt = true;
        break;
    }
    if (corrupt) break;
    p.in.pop(r);
    ++n;
  }
  g.unlock();
  if (n > 0) {
    p.activity.fetch_add(n, std::memory_order_relaxed);
    notify(p, false);  // the producer may be sleeping on completions or ring space
  }
  if (corrupt) {
    fail_peer(p.rank, {Errc::transport_error, "malformed record in the ring from peer rank " + std::to_string(p.rank) +
                                                  " (seen by rank " + std::to_string(rank_) + ")"});
  }
  return n;
}

std::size_t ShmBackend::service_outgoing(Peer& p, std::vector<Completion>& done, Clock::time_point& now,
                                         bool& have_now) {
  std::unique_lock<SpinLock> g(p.prod_mu, std::try_to_lock);
  if (!g.owns_lock()) return 0;
  std::size_t events = 0;
  const std::uint64_t head = p.out.consumed();
  while (!p.inflight.empty() && p.inflight.front().end <= head) {
    done.push_back({p.inflight.front().context, {}});
    p.inflight.pop_front();
    ++events;
  }
  const std::uint64_t before = p.out.tail();
  while (!p.pending.empty() && !p.dead.load(std::memory_order_relaxed) && inject(p, p.pending.front())) {
    p.pending.pop_front();
  }
  const bool wrote = p.out.tail() != before;
  const bool busy = !p.inflight.empty() || !p.pending.empty() || !p.requests.empty();
  bool stalled = false;
  if (busy) {
    if (!have_now) {
      now = coarse_now();
      have_now = true;
    }
    const std::uint64_t act = p.activity.load(std::memory_order_relaxed);
    if (!p.was_busy || wrote || head != p.seen_head || act != p.seen_activity) {
      p.stall_since = now;
      p.seen_head = head;
      p.seen_activity = act;
    } else if (now - p.stall_since > timeout_) {
      stalled = true;
    } else if (now - p.stall_since > kDeathCheck && now - p.last_death_check > kDeathCheck) {
      // A peer that stopped draining may simply be gone (the launcher reaps
      // it): find out well before the timeout.
      p.last_death_check = now;
      stalled = ::kill(p.pid, 0) != 0 && errno == ESRCH;
    }
  }
  p.was_busy = busy;
  p.busy.store(busy, std::memory_order_relaxed);
  g.unlock();
  if (wrote) notify(p, true);
  if (stalled) {
    if (::kill(p.pid, 0) != 0 && errno == ESRCH) {
      fail_peer(p.rank, {Errc::peer_dead, "peer rank " + std::to_string(p.rank) + " (pid " + std::to_string(p.pid) +
                                              ") exited (seen by rank " + std::to_string(rank_) + ")"});
    } else {
      fail_peer(p.rank, {Errc::timeout, "peer rank " + std::to_string(p.rank) + " made no progress for " +
                                            std::to_string(timeout_.count()) + " ms (STRATA_TIMEOUT; seen by rank " +
                                            std::to_string(rank_) + ")"});
    }
  }
  return events;
}

void ShmBackend::deliver(std::vector<Completion>& done) {
  if (done.empty()) return;
  const CompletionHandler* h = completion_.get();
  if (h == nullptr) {  // keep them until a handler is installed
    std::lock_guard<std::mutex> g(cq_mu_);
    for (auto& c : done) cq_.push_back(std::move(c));
    cq_size_.store(cq_.size(), std::memory_order_release);
    return;
  }
  for (auto& c : done) (*h)(c.context, c.status);
}

// Liveness of the same-host peers, without the launcher and without traffic:
// a peer whose process is gone (or a zombie) is dead; a peer stopped by a
// signal (state T, SIGSTOP or a debugger) for longer than STRATA_TIMEOUT is
// declared dead too (it answers nobody, and a survivor that only waits to
// receive from it has nothing in flight that could time out). A peer that is
// merely busy or descheduled (R, S, D) is alive, however long it computes.
// Runs at most every 100 ms from whichever thread drives progress (the
// progress server wakes at least every STRATA_PROGRESS_MAX_BLOCK).
void ShmBackend::check_liveness() {
  const Clock::time_point now = coarse_now();
  const std::int64_t t = now.time_since_epoch().count();
  if (t < next_live_check_.load(std::memory_order_relaxed)) return;
  if (live_busy_.test_and_set(std::memory_order_acquire)) return;
  next_live_check_.store(t + std::chrono::duration_cast<Clock::duration>(std::chrono::milliseconds(100)).count(),
                         std::memory_order_relaxed);
  std::vector<std::pair<int, Status>> fails;
  for (int r : served_) {
    Peer& p = *peers_[static_cast<std::size_t>(r)];
    if (p.pid <= 0 || p.pid == ::getpid() || p.dead.load(std::memory_order_acquire)) continue;
    const char st = proc_state(p.pid);
    const std::string who = "peer rank " + std::to_string(r) + " (pid " + std::to_string(p.pid) + ")";
    if (st == 0 || st == 'Z' || st == 'X') {
      fails.emplace_back(r, Status(Errc::peer_dead, who + " exited (seen by rank " + std::to_string(rank_) + ")"));
    } else if (st == 'T' || st == 't') {
      if (!p.stopped) {
        p.stopped = true;
        p.stopped_since = now;
      } else if (now - p.stopped_since > timeout_) {
        fails.emplace_back(
            r, Status(Errc::timeout, who +
                                         " has been stopped (by a signal or a debugger) for more than "
                                         "STRATA_TIMEOUT=" +
                                         std::to_string(timeout_.count()) + " ms; declared dead (seen by rank " +
                                         std::to_string(rank_) + ")"));
      }
    } else {
      p.stopped = false;
    }
  }
  live_busy_.clear(std::memory_order_release);
  for (auto& f : fails) fail_peer(f.first, f.second);
}

std::size_t ShmBackend::progress() {
  if (served_.empty()) return 0;
  if ((live_calls_.fetch_add(1, std::memory_order_relaxed) & 63U) == 0) check_liveness();
  // Whoever polls disarms the wake-up (peers stop sending datagrams). The
  // datagrams already queued are drained by the sleeper after its poll (here
  // in wait_for_event(), or by the router), so polling needs no system call.
  if (hdr_->sleeping.load(std::memory_order_relaxed) != 0) hdr_->sleeping.store(0, std::memory_order_relaxed);
  std::vector<Completion> done;
  std::size_t events = 0;
  const std::size_t n = served_.size();
  const std::size_t start = rr_.fetch_add(1, std::memory_order_relaxed) % n;
  Clock::time_point now{};
  bool have_now = false;
  for (std::size_t i = 0; i < n; ++i) {
    Peer& p = *peers_[static_cast<std::size_t>(served_[(start + i) % n])];
    events += consume(p, done);
    if (p.busy.load(std::memory_order_relaxed)) events += service_outgoing(p, done, now, have_now);
  }
  if (cq_size_.load(std::memory_order_acquire) != 0 && completion_.get() != nullptr) {
    std::vector<Completion> local;
    {
      std::lock_guard<std::mutex> g(cq_mu_);
      local.swap(cq_);
      cq_size_.store(0, std::memory_order_release);
    }
    for (auto& c : local) done.push_back(std::move(c));
  }
  events += done.size();
  deliver(done);
  return events;
}

bool ShmBackend::prepare_wait() {
  if (served_.empty()) return true;
  check_liveness();  // about to sleep: a peer that stopped must still be noticed
  hdr_->sleeping.store(1, std::memory_order_seq_cst);
  bool work = cq_size_.load(std::memory_order_seq_cst) != 0;
  for (std::size_t i = 0; i < served_.size() && !work; ++i) {
    Peer& p = *peers_[static_cast<std::size_t>(served_[i])];
    if (p.in.has_data()) work = true;
    if (p.busy.load(std::memory_order_relaxed)) {
      std::unique_lock<SpinLock> g(p.prod_mu, std::try_to_lock);
      if (!g.owns_lock()) {
        work = true;  // someone is working on it; do not sleep on a stale view
      } else {
        const std::uint64_t head = p.out.consumed();
        if (!p.inflight.empty() && p.inflight.front().end <= head) work = true;
        if (!p.pending.empty() && head != p.seen_head) work = true;
      }
    }
  }
  if (work) hdr_->sleeping.store(0, std::memory_order_relaxed);
  return !work;
}

void ShmBackend::wait_for_event(std::chrono::microseconds timeout) {
  if (served_.empty() || !prepare_wait()) return;
  pollfd pfd{sock_, POLLIN, 0};
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout + std::chrono::microseconds(999));
  if (::poll(&pfd, 1, static_cast<int>(std::min<std::int64_t>(ms.count(), 1 << 30))) > 0) {
    char buf[64];
    while (::recv(sock_, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
    }
  }
}

}  // namespace strata::transport::detail::shmem
