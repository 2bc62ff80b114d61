// strata-idle SECONDS [ROUNDS]: an idle Engine (world communicator, progress
// servers, executor, flag waits) must cost next to no CPU, yet answer the first
// collective after a long pause quickly.
//
//   strata-run -n 2 [--hosts 2] -- strata-idle 5
//
// Phase 1: every rank sleeps SECONDS after a warm-up allreduce; printed: the
// process CPU time (all threads, getrusage) over wall time, per rank.
// Then, with calls pending on a stalled peer: rank 0 posts an allreduce and
// sleeps (no strata call) or blocks in get() while the others stay silent
// SECONDS; printed: rank 0's process CPU over wall time meanwhile.
// Phase 2, ROUNDS times (default 5): rank 0 enters an allreduce at once and
// blocks in get(); every other rank stays silent for SECONDS / ROUNDS (at
// most 1 s), then reads the steady clock and enters too. The allreduce takes
// the maximum of those entry times, so rank 0 learns when the last rank
// entered; printed: rank 0's completion minus that time (the wake-up of an
// idle rank plus one small allreduce). The steady clock is shared by every
// process of one machine, virtual hosts included.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../common/bench_util.hpp"
#include "strata/strata.hpp"
#include "strata_cli.hpp"

namespace {

using Clock = std::chrono::steady_clock;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

/// The machine's floor for the wake-up phase: a thread blocked on a condition
/// variable (a futex), woken by another thread that was itself idle for
/// @p quiet; median over @p rounds, microseconds. On a VM whose idle vCPUs halt
/// (no guest halt-polling) this alone costs ~150 us; a rank that sleeps while
/// idle cannot answer faster than this.
double wake_floor_us(std::chrono::duration<double> quiet, int rounds) {
  std::vector<double> lat;
  for (int i = 0; i < rounds; ++i) {
    std::mutex mu;
    std::condition_variable cv;
    bool ready = false;
    std::int64_t sent = 0;
    std::thread waker([&] {
      std::this_thread::sleep_for(quiet);
      std::lock_guard<std::mutex> g(mu);
      sent = now_ns();
      ready = true;
      cv.notify_one();
    });
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return ready; });
    lat.push_back(static_cast<double>(now_ns() - sent) / 1e3);
    lk.unlock();
    waker.join();
  }
  std::sort(lat.begin(), lat.end());
  return lat[lat.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0;
  int rounds = 5;
  CLI::App app{
      "An idle Engine's CPU use over SECONDS and its wake-up latency after a pause "
      "(strata-run -n N [--hosts H] -- strata-idle SECONDS [ROUNDS])",
      "strata-idle"};
  app.add_option("seconds", seconds, "idle time of phase 1, seconds")
      ->required()
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            char* end = nullptr;
            const double x = std::strtod(v.c_str(), &end);
            return end != v.c_str() && *end == '\0' && x >= 0.1 && x <= 3600
                       ? ""
                       : "expects a number in [0.1, 3600], got '" + v + "'";
          },
          "SECONDS in [0.1, 3600]"));
  app.add_option("rounds", rounds, "wake-up rounds of phase 2 (default 5)")->check(strata::cli::integer(1, 1000));
  strata::cli::parse(app, argc, argv);
  try {
    strata::Engine engine;
    strata::Communicator& w = engine.world();
    const int rank = w.rank();
    std::int64_t x = 1;
    std::int64_t y = 0;
    w.allreduce(&x, &y, 1, strata::Datatype::int64, strata::Op::sum).get();

    const double cpu0 = strata::bench::process_cpu_seconds();
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    double pct = (strata::bench::process_cpu_seconds() - cpu0) / wall * 100.0;
    std::vector<double> all(static_cast<std::size_t>(w.size()), 0.0);
    all[static_cast<std::size_t>(rank)] = pct;
    w.allreduce(strata::in_place, all.data(), all.size(), strata::Datatype::float64, strata::Op::sum).get();
    if (rank == 0) {
      std::sort(all.begin(), all.end());
      std::printf("idle engine: %d ranks, %.1f s asleep: CPU/wall per rank min %.3f%% median %.3f%% max %.3f%%\n",
                  w.size(), wall, all.front(), all[all.size() / 2], all.back());
    }

    // Calls pending on a stalled peer: rank 0 posts an allreduce, then
    // either sleeps without calling strata or blocks in get(); the other
    // ranks stay silent for SECONDS before they post. Printed: rank 0's
    // process CPU over the stall (target: at most 1% of a core).
    if (w.size() >= 2) {
      for (const bool in_get : {false, true}) {
        w.barrier().get();
        std::int64_t one = 1, sum = 0;
        double stall_pct = 0;
        if (rank == 0) {
          const double c0 = strata::bench::process_cpu_seconds();
          const auto s0 = Clock::now();
          strata::Future<void> f = w.allreduce(&one, &sum, 1, strata::Datatype::int64, strata::Op::sum);
          if (!in_get) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
          f.get();
          const double sw = std::chrono::duration<double>(Clock::now() - s0).count();
          stall_pct = (strata::bench::process_cpu_seconds() - c0) / sw * 100.0;
          const strata::Engine::ProgressStats ps = engine.progress_stats();
          std::printf(
              "pending on a stalled peer (%s): %.1f s, rank 0 CPU/wall %.3f%% (servers so far: %llu loops, "
              "%llu sleeps)\n",
              in_get ? "caller blocked in get()" : "caller asleep, no strata call", sw, stall_pct,
              static_cast<unsigned long long>(ps.loops), static_cast<unsigned long long>(ps.sleeps));
        } else {
          std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
          w.allreduce(&one, &sum, 1, strata::Datatype::int64, strata::Op::sum).get();
        }
        if (sum != w.size()) {
          std::fprintf(stderr, "strata-idle: rank %d: allreduce gave %lld, want %d\n", rank,
                       static_cast<long long>(sum), w.size());
          return 1;
        }
      }
    }

    if (w.size() >= 2) {
      const auto quiet = std::chrono::duration<double>(std::min(1.0, seconds / rounds));
      std::vector<double> lat_us;
      for (int i = 0; i < rounds; ++i) {
        w.barrier().get();
        std::int64_t entered = 0;
        if (rank != 0) {
          std::this_thread::sleep_for(quiet);
          entered = now_ns();
        }
        std::int64_t last = 0;
        w.allreduce(&entered, &last, 1, strata::Datatype::int64, strata::Op::max).get();
        const std::int64_t done = now_ns();
        if (rank == 0) lat_us.push_back(static_cast<double>(done - last) / 1e3);
      }
      if (rank == 0) {
        std::sort(lat_us.begin(), lat_us.end());
        std::printf(
            "wake-up: allreduce entered after %.2f s idle, done on rank 0 after min %.1f us median %.1f us "
            "max %.1f us (%d rounds)\n",
            quiet.count(), lat_us.front(), lat_us[lat_us.size() / 2], lat_us.back(), rounds);
        // Same idle time, no strata: how long this machine takes to wake a
        // sleeping thread at all (the other ranks have finished meanwhile).
        const double floor_us = wake_floor_us(quiet, rounds);
        std::printf(
            "wake-up floor: a condition-variable wake after %.2f s idle, median %.1f us; "
            "strata / floor %.2f\n",
            quiet.count(), floor_us, lat_us[lat_us.size() / 2] / floor_us);
      }
    }
    std::fflush(stdout);
    return 0;
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "strata-idle: %s\n", e.what());
    return 1;
  }
}
