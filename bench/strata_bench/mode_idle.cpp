// --idle SECONDS: an idle engine must use next to no CPU (on 2 shared cores a
// spinning progress thread costs everyone else milliseconds per operation).
// Each rank starts the transport and its progress servers, then for SECONDS
// each:
//   sleep  the main thread sleeps (nobody but the servers runs);
//   wait   the main thread waits in ProgressServer::wait_until for an event
//          that never comes (a rank blocked on a collective; in inline mode
//          this is where progress is driven).
// Then the wake-up latency after a long idle period (2+ ranks): five times,
// rank 1 stays silent for a fifth of SECONDS (at most 1 s), then signals
// rank 0, which waits for it; reported: arrival (rank 0's signal handler)
// minus send time, both on the steady clock, which every process of one
// machine shares (virtual hosts included).
// Reported: process CPU time (getrusage RUSAGE_SELF, user + sys, all threads)
// over wall time, per rank, as min / median / max over ranks. In the records
// the *_us fields hold CPU microseconds per second of wall time (1e6 = one
// full core), bytes is 0 and iters the whole seconds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "strata_bench/world.hpp"

namespace strata::bench {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

// Over ~80 lines: a straight benchmark script, not library code.
int run_idle(const Options& o, std::vector<Record>& out) {
  if (o.idle_seconds <= 0) {
    std::fprintf(stderr, "strata-bench: --idle needs a positive number of seconds\n");
    return kUnavailable;
  }
  World w(o);
  const auto span = std::chrono::duration<double>(o.idle_seconds);
  const bool root = w.rank() == 0;
  if (root) {
    std::fprintf(stderr, "# strata-bench --idle %.1f: %d ranks, %s, transport %s, %d progress threads\n",
                 o.idle_seconds, w.size(), w.label().c_str(), w.t().name().c_str(), w.servers().threads());
  }
  for (const char* phase : {"sleep", "wait"}) {
    w.barrier();
    const auto before = w.servers().stats();
    const double cpu0 = process_cpu_seconds();
    const auto t0 = Clock::now();
    if (std::string(phase) == "sleep") {
      std::this_thread::sleep_for(span);
    } else {
      (void)w.servers().wait_until([] { return false; }, std::chrono::duration_cast<std::chrono::milliseconds>(span));
    }
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    const double cpu = process_cpu_seconds() - cpu0;
    const auto after = w.servers().stats();
    const double per_s = wall > 0 ? cpu / wall * 1e6 : 0.0;  // CPU us per wall second
    const auto all = w.gather(per_s);
    Record r;
    r.library = "strata";
    r.collective = "idle-cpu";
    r.variant = w.label() + "/" + phase;
    r.ranks = w.size();
    r.iters = static_cast<int>(o.idle_seconds);
    r.min_us = *std::min_element(all.begin(), all.end());
    r.max_us = *std::max_element(all.begin(), all.end());
    r.median_us = median(all);
    if (root) out.push_back(r);
    if (root) {
      std::printf(
          "idle %-22s %5.1f s: CPU/wall per rank min %.4f%% median %.4f%% max %.4f%% (rank 0: %llu polls, "
          "%llu blocks)\n",
          r.variant.c_str(), wall, r.min_us / 1e4, r.median_us / 1e4, r.max_us / 1e4,
          static_cast<unsigned long long>(after.polls - before.polls),
          static_cast<unsigned long long>(after.blocks - before.blocks));
      std::fflush(stdout);
    }
  }
  if (w.size() >= 2) {
    const auto quiet = std::chrono::duration<double>(std::min(1.0, o.idle_seconds / 5));
    std::vector<double> lat_us;
    for (int i = 0; i < 5; ++i) {
      w.barrier();
      const std::uint64_t seen = w.pings.load(std::memory_order_acquire);
      double sent_ns = 0;
      if (w.rank() == 1) {
        std::this_thread::sleep_for(quiet);
        const std::uint64_t done = w.completions.load(std::memory_order_acquire);
        sent_ns = static_cast<double>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
        if (Status s = w.t().signal(0, kSigPing, nullptr); !s) w.fail("wake-up signal", s);
        w.wait_completions(done + 1, "the wake-up signal's completion");
      } else if (w.rank() == 0) {
        w.wait([&] { return w.pings.load(std::memory_order_acquire) > seen; }, "the wake-up signal");
      }
      const auto sent = w.gather(sent_ns);
      if (root) lat_us.push_back((static_cast<double>(w.last_ping_ns.load()) - sent[1]) / 1e3);
    }
    if (root) {
      Record r;
      r.library = "strata";
      r.collective = "idle-wakeup";
      r.variant = w.label();
      r.ranks = w.size();
      r.iters = static_cast<int>(lat_us.size());
      r.min_us = *std::min_element(lat_us.begin(), lat_us.end());
      r.max_us = *std::max_element(lat_us.begin(), lat_us.end());
      r.median_us = median(lat_us);
      out.push_back(r);
      std::printf("wake-up %-19s after %.2f s idle: signal latency min %.1f us median %.1f us max %.1f us (%zu)\n",
                  w.label().c_str(), quiet.count(), r.min_us, r.median_us, r.max_us, lat_us.size());
      std::fflush(stdout);
    }
  }
  w.barrier();
  return 0;
}

}  // namespace strata::bench
