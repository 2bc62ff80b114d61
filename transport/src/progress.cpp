#include "strata/transport/progress.hpp"
#include "strata/detail/cpu.hpp"
#include "strata/detail/env.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "shm/sync.hpp"

namespace strata::transport {
namespace {

long parse_int(const char* var, const std::string& s, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || errno != 0 || end != s.c_str() + s.size() || v < lo || v > hi) {
    throw Error(Errc::invalid_argument, std::string(var) + "='" + s + "': expected an integer in [" +
                                            std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return v;
}

std::vector<int> parse_cpus(const char* var, const std::string& s) {
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const std::size_t comma = std::min(s.find(',', pos), s.size());
    const std::string item = s.substr(pos, comma - pos);
    const std::size_t dash = item.find('-');
    const long lo = parse_int(var, item.substr(0, dash), 0, CPU_SETSIZE - 1);
    const long hi = dash == std::string::npos ? lo : parse_int(var, item.substr(dash + 1), lo, CPU_SETSIZE - 1);
    for (long c = lo; c <= hi; ++c) out.push_back(static_cast<int>(c));
    pos = comma + 1;
  }
  return out;
}

}  // namespace

ProgressOptions ProgressOptions::from_environment() {
  ProgressOptions o;
  auto get = [](const char* n) -> const char* { return strata::detail::env::get(n); };
  if (const char* v = get("STRATA_PROGRESS_THREADS")) {
    o.threads = static_cast<int>(parse_int("STRATA_PROGRESS_THREADS", v, 0, 64));  // as the registry and the engine
  }
  if (const char* v = get("STRATA_PROGRESS_CPUS")) o.cpus = parse_cpus("STRATA_PROGRESS_CPUS", v);
  if (const char* v = get("STRATA_PROGRESS_SPIN")) {
    o.spin_polls = static_cast<int>(parse_int("STRATA_PROGRESS_SPIN", v, 0, 1 << 24));
  }
  if (const char* v = get("STRATA_PROGRESS_MAX_BLOCK")) {
    o.max_block = std::chrono::microseconds(parse_int("STRATA_PROGRESS_MAX_BLOCK", v, 100, 600000000));
  }
  if (const char* v = get("STRATA_PROGRESS_WAIT_SPIN")) {
    o.wait_spin = std::chrono::microseconds(parse_int("STRATA_PROGRESS_WAIT_SPIN", v, 0, 1000000));
  }
  return o;
}

ProgressServer::ProgressServer(Transport& transport, ProgressOptions opts) : t_(transport), opts_(std::move(opts)) {
  if (opts_.threads < 0) {
    throw Error(Errc::invalid_argument, "ProgressServer: threads=" + std::to_string(opts_.threads) +
                                            " is negative (rank " + std::to_string(t_.rank()) + ")");
  }
  if (opts_.max_block.count() <= 0) opts_.max_block = std::chrono::microseconds(50000);
  if (opts_.wait_spin.count() < 0) opts_.wait_spin = std::chrono::microseconds(0);
  // Servers step aside for polling waiters only when the transport can re-arm
  // their wake-up cheaply (the routed transport); otherwise they keep polling.
  arm_ = dynamic_cast<detail::WakeArm*>(&t_);
  running_.store(opts_.threads);
  threads_.reserve(static_cast<std::size_t>(opts_.threads));
  for (int i = 0; i < opts_.threads; ++i) {
    threads_.emplace_back([this, i] { serve(i); });
    if (!opts_.cpus.empty()) {
      const int cpu = opts_.cpus[static_cast<std::size_t>(i) % opts_.cpus.size()];
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      const int rc = pthread_setaffinity_np(threads_.back().native_handle(), sizeof(set), &set);
      if (rc != 0) {
        stop();
        throw Error(Errc::invalid_argument, "STRATA_PROGRESS_CPUS: cannot bind progress server " + std::to_string(i) +
                                                " to CPU " + std::to_string(cpu) + ": " + std::strerror(rc) +
                                                " (rank " + std::to_string(t_.rank()) + ")");
      }
    }
  }
}

ProgressServer::~ProgressServer() { stop(); }

void ProgressServer::stop() {
  stop_.store(true);
  // Each wake() interrupts blocked servers; repeat until all saw stop_ (a
  // server may consume a wake-up meant for another).
  while (running_.load() > 0) {
    t_.wake();
    std::this_thread::yield();
  }
  for (auto& th : threads_) {
    if (th.joinable()) th.join();
  }
  threads_.clear();
}

bool ProgressServer::notify_waiters() {
  if (waiters_.load(std::memory_order_seq_cst) == 0) return false;
  {
    std::lock_guard<std::mutex> g(mu_);
    ++gen_;
  }
  cv_.notify_all();
  return true;
}

void ProgressServer::serve(int /*index*/) {
  // Short naps (a polled libfabric backend asks for ~20 us while busy) should
  // not be stretched by the default 50 us timer slack.
  (void)::prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  const int spin = opts_.spin_polls;
  const int yield_end = opts_.spin_polls + opts_.yield_polls;
  int idle = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    if (arm_ != nullptr && pollers_.load(std::memory_order_seq_cst) > 0) {
      // A waiter polls the transport itself: do not compete with it for the
      // core (with --bind core both share one). Block; the last waiter to
      // stop polling re-arms the wake-up (leave_polling()).
      blocked_.fetch_add(1, std::memory_order_seq_cst);
      if (pollers_.load(std::memory_order_seq_cst) == 0) {
        // The last waiter left between our check and our increment: it saw
        // blocked_ == 0 and did not re-arm us (leave_polling()), so a sleep
        // here would miss the nudges a blocking server asks for (a then()
        // continuation waited for max_block). Look again instead.
        blocked_.fetch_sub(1, std::memory_order_seq_cst);
        continue;
      }
      blocks_.fetch_add(1, std::memory_order_relaxed);
      t_.wait_for_event(opts_.max_block);
      blocked_.fetch_sub(1, std::memory_order_seq_cst);
      // wait_for_event() returns at once while work is pending: let the
      // polling waiter take it rather than spin against it.
      if (pollers_.load(std::memory_order_relaxed) > 0) std::this_thread::yield();
      idle = 0;
      continue;
    }
    const std::size_t n = t_.progress();
    polls_.fetch_add(1, std::memory_order_relaxed);
    if (n > 0) {
      events_.fetch_add(n, std::memory_order_relaxed);
      // A woken waiter often shares this core (strata-run --bind core pins
      // the rank, server and application threads alike): give it the core
      // now rather than at the end of our time slice, or every hand-off
      // costs up to a scheduler tick (measured across hosts: 8 B allreduce
      // 70-2300 us instead of ~33 us). With a free core, yield returns at once.
      if (notify_waiters()) std::this_thread::yield();
      idle = 0;
      continue;
    }
    ++idle;
    if (idle < spin) {
      strata::detail::cpu_relax();
    } else if (idle < yield_end) {
      std::this_thread::yield();
    } else {
      blocks_.fetch_add(1, std::memory_order_relaxed);
      blocked_.fetch_add(1, std::memory_order_seq_cst);
      if (opts_.on_block) opts_.on_block(true);
      t_.wait_for_event(opts_.max_block);
      if (opts_.on_block) opts_.on_block(false);
      blocked_.fetch_sub(1, std::memory_order_seq_cst);
      // Woken without work (a polled backend's interval, max_block): one look,
      // then block again; only events restart the spin (a polled libfabric
      // backend cost 25-40% of a core per idle rank when every wake-up spun
      // and yielded 320 times).
      idle = yield_end - 1;
    }
  }
  running_.fetch_sub(1);
}

ProgressServer::Stats ProgressServer::stats() const noexcept {
  return {polls_.load(std::memory_order_relaxed), events_.load(std::memory_order_relaxed),
          blocks_.load(std::memory_order_relaxed), hits_.load(std::memory_order_relaxed),
          sleeps_.load(std::memory_order_relaxed)};
}

void ProgressServer::leave_polling() {
  if (pollers_.fetch_sub(1, std::memory_order_seq_cst) != 1) return;  // another waiter still polls
  if (arm_ == nullptr || blocked_.load(std::memory_order_seq_cst) == 0) return;
  // A server that stepped aside while we polled sleeps without having run
  // on_block (serve()): what is still pending (a flag wait of a call whose
  // continuation nobody waits for) would then wait for its max_block, as no
  // owner knows to nudge this rank. Ask for those nudges now, as a blocking
  // server would (park and unpark: the requests stay until used).
  if (opts_.on_block) {
    opts_.on_block(true);
    opts_.on_block(false);
  }
  // A server sleeps with its wake-up disarmed by our polls: re-arm it. When
  // work is pending, take it ourselves and retry; hand over if it persists.
  for (int i = 0; i < 4; ++i) {
    if (arm_->arm_wakeup()) return;
    if (t_.progress() > 0) notify_waiters();
  }
  t_.wake();
}

bool ProgressServer::spin_phase(const std::function<bool()>& done, std::chrono::steady_clock::time_point end,
                                std::chrono::microseconds idle_budget, std::chrono::steady_clock::time_point hard_end) {
  pollers_.fetch_add(1, std::memory_order_seq_cst);
  bool ok = false;
  bool extend = false;
  for (unsigned i = 1;; ++i) {
    if (t_.progress() > 0) {
      notify_waiters();  // events may concern waiters asleep on cv_
      if ((ok = done())) break;
      extend = idle_budget.count() > 0;
      continue;
    }
    if (extend) {
      // Events mean the operation is moving: keep polling until it has been
      // quiet for idle_budget (handing a transfer in flight over to a server
      // that shares the core cost a 4 MiB cross-host allreduce 8 ms instead
      // of 1.4 ms); a silent peer still sends us to sleep after idle_budget.
      end = std::min(hard_end, std::chrono::steady_clock::now() + idle_budget);
      extend = false;
    }
    if ((ok = done())) break;
    strata::detail::cpu_relax();
    if ((i & 15U) == 0 && std::chrono::steady_clock::now() >= end) break;
  }
  leave_polling();
  return ok;
}

long ProgressServer::block_waiter(int fd, std::chrono::microseconds timeout) {
  if (stop_.load(std::memory_order_relaxed) || inline_mode()) return -1;
  // Counted as a waiter: a server that handles events then yields its core
  // (serve()), which the woken waiter may be queued behind.
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  const bool ok = t_.wait_for_event_or(fd, std::max(std::chrono::microseconds(0), std::min(timeout, opts_.max_block)));
  waiters_.fetch_sub(1, std::memory_order_seq_cst);
  if (!ok) return -1;
  // One look ourselves: the message that woke us is handled here, in parallel
  // with a server that woke too (it steps aside while we poll).
  return static_cast<long>(poll_once());
}

std::size_t ProgressServer::poll_once() {
  if (inline_mode()) return t_.progress();
  pollers_.fetch_add(1, std::memory_order_seq_cst);
  const std::size_t n = t_.progress();
  leave_polling();
  if (n > 0) notify_waiters();
  return n;
}

bool ProgressServer::spin_until(const std::function<bool()>& done, std::chrono::microseconds budget) {
  if (done()) return true;
  if (budget.count() <= 0 || stop_.load(std::memory_order_relaxed)) return false;
  if (inline_mode()) {
    const auto end = std::chrono::steady_clock::now() + budget;
    for (unsigned i = 1;; ++i) {
      if (t_.progress() == 0) strata::detail::cpu_relax();
      if (done()) return true;
      if ((i & 15U) == 0 && std::chrono::steady_clock::now() >= end) return false;
    }
  }
  const auto end = std::chrono::steady_clock::now() + budget;
  return spin_phase(done, end, std::chrono::microseconds(0), end);
}

bool ProgressServer::wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  if (inline_mode()) {
    int idle = 0;
    const int yield_end = opts_.spin_polls + opts_.yield_polls;
    for (;;) {
      if (done()) return true;
      if (t_.progress() > 0) {
        idle = 0;
        continue;
      }
      const auto now = Clock::now();
      if (now >= deadline) return done();
      if (++idle < opts_.spin_polls) {
        strata::detail::cpu_relax();
      } else if (idle < yield_end) {
        std::this_thread::yield();
      } else {
        const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now);
        t_.wait_for_event(std::min(left, opts_.max_block));
        idle = 0;
      }
    }
  }
  // Servers running. Poll the transport ourselves for up to wait_spin: an
  // imminent answer then costs no cross-thread wake-up (the servers step
  // aside meanwhile, see serve()). Then sleep until a server reports events,
  // and poll again: events mean activity, and a stream of them (a peer's gets,
  // a window of puts) is then handled here instead of costing a wake-up each.
  // A sleep that ended at max_block without events is followed by one look,
  // not another wait_spin of polling (a waiter on a silent peer spun 2 ms of
  // every 50: 4% of a core, strata-bench --idle).
  bool spin = true;
  for (bool first = true;; first = false) {
    if (done()) {
      if (!first) sleeps_.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    const auto now = Clock::now();
    if (now >= deadline) return done();
    if (spin && opts_.wait_spin.count() > 0 && !stop_.load(std::memory_order_relaxed)) {
      if (spin_phase(done, std::min(deadline, now + opts_.wait_spin), opts_.wait_spin, deadline)) {
        (first ? hits_ : sleeps_).fetch_add(1, std::memory_order_relaxed);
        return true;
      }
    } else {
      (void)poll_once();
      if (done()) return true;
    }
    // Sleep until a server (or another waiter) reports events, or max_block.
    std::unique_lock<std::mutex> lk(mu_);
    const std::uint64_t gen = gen_;
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
    cv_.wait_for(lk, std::min(std::max(left, std::chrono::microseconds(0)), opts_.max_block),
                 [&] { return gen_ != gen || done(); });
    spin = gen_ != gen;
    waiters_.fetch_sub(1, std::memory_order_seq_cst);
  }
}

}  // namespace strata::transport
