#include "strata/transport/progress.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

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

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

ProgressOptions ProgressOptions::from_environment() {
  ProgressOptions o;
  auto get = [](const char* n) -> const char* {
    const char* v = std::getenv(n);
    return (v == nullptr || *v == '\0') ? nullptr : v;
  };
  if (const char* v = get("STRATA_PROGRESS_THREADS")) {
    o.threads = static_cast<int>(parse_int("STRATA_PROGRESS_THREADS", v, 0, 256));
  }
  if (const char* v = get("STRATA_PROGRESS_CPUS")) o.cpus = parse_cpus("STRATA_PROGRESS_CPUS", v);
  if (const char* v = get("STRATA_PROGRESS_SPIN")) {
    o.spin_polls = static_cast<int>(parse_int("STRATA_PROGRESS_SPIN", v, 0, 1 << 24));
  }
  return o;
}

ProgressServer::ProgressServer(Transport& transport, ProgressOptions opts) : t_(transport), opts_(std::move(opts)) {
  if (opts_.threads < 0) {
    throw Error(Errc::invalid_argument, "ProgressServer: threads=" + std::to_string(opts_.threads) +
                                            " is negative (rank " + std::to_string(t_.rank()) + ")");
  }
  if (opts_.max_block.count() <= 0) opts_.max_block = std::chrono::microseconds(50000);
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

void ProgressServer::notify_waiters() {
  if (waiters_.load() > 0) {
    std::lock_guard<std::mutex> g(mu_);
    cv_.notify_all();
  }
}

void ProgressServer::serve(int /*index*/) {
  const int spin = opts_.spin_polls;
  const int yield_end = opts_.spin_polls + opts_.yield_polls;
  int idle = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    const std::size_t n = t_.progress();
    polls_.fetch_add(1, std::memory_order_relaxed);
    if (n > 0) {
      events_.fetch_add(n, std::memory_order_relaxed);
      notify_waiters();
      idle = 0;
      continue;
    }
    ++idle;
    if (idle < spin) {
      cpu_relax();
    } else if (idle < yield_end) {
      std::this_thread::yield();
    } else {
      blocks_.fetch_add(1, std::memory_order_relaxed);
      t_.wait_for_event(opts_.max_block);
      idle = 0;
    }
  }
  running_.fetch_sub(1);
}

ProgressServer::Stats ProgressServer::stats() const noexcept {
  return {polls_.load(std::memory_order_relaxed), events_.load(std::memory_order_relaxed),
          blocks_.load(std::memory_order_relaxed)};
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
        cpu_relax();
      } else if (idle < yield_end) {
        std::this_thread::yield();
      } else {
        const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now);
        t_.wait_for_event(std::min(left, opts_.max_block));
        idle = 0;
      }
    }
  }
  waiters_.fetch_add(1);
  bool ok = done();
  while (!ok) {
    const auto now = Clock::now();
    if (now >= deadline) break;
    if (t_.progress() > 0) notify_waiters();
    if ((ok = done())) break;
    std::unique_lock<std::mutex> lk(mu_);
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now);
    ok = cv_.wait_for(lk, std::min(left, opts_.max_block), done);
  }
  waiters_.fetch_sub(1);
  return ok || done();
}

}  // namespace strata::transport
