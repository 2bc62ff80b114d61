// rel_rank: one rank of the reliability tests (tests/reliability),
// run under strata-run. One mode per run:
//   --queue       rank 0 posts 12 nonblocking 32-byte allreduces on A, then
//                 waits on a barrier on B; rank 1 waits on B first, then posts
//                 the same 12 on A; both wait and check. Calls beyond the fast
//                 ring's 8 entries must queue, never block the caller (the
//                 program is legal under nonblocking rules). Prints
//                 "rel_rank: queue OK".
//   --throwing-op a user reduction op that throws, as a small call (mapped plan,
//                 count), the plan path (large count), in place and not: the
//                 future of every rank that ran the op fails with a
//                 strata::Error naming 'op', the collective and the rank; the
//                 other members' futures fail naming the rank whose op threw
//                 (never pending); nothing escapes into the caller or a
//                 progress thread. Prints one "CASE" line per case and rank
//                 and "rel_rank: throwing-op done".
//   --throw-then-go K N COUNT
//                 N allreduces of COUNT int32 on a dup of the world, rank 0's
//                 user op throwing in call K only: call K fails on every
//                 rank (rank 0 naming its op, the others naming rank 0), and
//                 every other call completes with the right sum, blocking
//                 calls and then batches of 8 nonblocking ones (window slots
//                 reused many times after the failed call). Prints
//                 "THROWGO rank R: ..." and "rel_rank: throw-then-go OK".
//   --revoke      on a dup of the world every rank but the last posts an
//                 allreduce the last never joins; the last revokes the
//                 communicator instead: the others' calls fail with
//                 Errc::revoked (not a timeout). Then every rank shrinks it
//                 (nobody died: all members stay) and a verified allreduce
//                 runs on the result, while a call on the revoked one fails.
//                 Prints "rel_rank: revoke OK".
//   --tags N      tagged collectives on one communicator (dup(8)): N calls
//                 in rounds of 8 (one per tag), each round's order shuffled
//                 differently on every rank, nonblocking, every result
//                 verified; then 8 threads, one per tag, each making its
//                 calls back to back (blocking), and persistent plans of
//                 tagged calls started in shuffled orders. REL_TAGS_OFF=1
//                 drops the tags (the test's control: it must then fail).
//                 Prints "rel_rank: tags OK".
//   --test-progress (run in inline progress mode) 50 allreduces completed
//                 without a wait: rank 0 loops on Future::test(), the others
//                 on Engine::progress() and Future::ready(). Only these calls
//                 drive progress. Prints "rel_rank: test-progress OK".
//   --plans       persistent plans (Communicator::plan) of allgather, alltoallv,
//                 gatherv, scatter and reduce_scatter over processes: each
//                 started 4 times with new buffer contents, compared byte for
//                 byte with the one-shot call on the same inputs; then 6
//                 plans (a user-operator allreduce, an alltoall with
//                 on_block, an allgather) started 5 times each without
//                 waiting, every result checked. Prints "rel_rank: plans OK".
//   --hang KIND   a deliberate hang for the hang reports: on a dup of the
//                 world every rank posts 3 verified allreduces, then the
//                 fourth; KIND "never": the last rank never posts it (it
//                 sleeps without a strata call); KIND "mismatch": the last
//                 rank posts a broadcast of the same size instead; KIND
//                 "tag": on a dup with 4 tags, the last rank never posts
//                 the second allreduce with tag 2. Prints
//                 "HANG rank R: posted" and sleeps (the launcher ends it).
//   --when-all    (run in inline progress mode) rank 0 posts a small
//                 allreduce on A and a barrier on B and waits on the variadic
//                 when_all of both; rank 1 joins B first, then A. Only rank
//                 0's wait drives its progress: the joined future must.
//                 Prints "rel_rank: when-all OK".
//   --then        rank 0 posts a small allreduce on A, attaches a then()
//                 continuation that sets a std::promise, joins a barrier on B
//                 and then waits on the std::future only (no strata call);
//                 rank 1 joins B, then A. The continuation must run (5 s
//                 bound; run with a long STRATA_PROGRESS_MAX_BLOCK so that a
//                 server that nobody nudges stays asleep). Prints the latency
//                 and "rel_rank: then OK".
//   --late-peer BYTES
//                 event-driven progress (Overlap issue): rank 0 posts a
//                 nonblocking allreduce of BYTES on A with a then()
//                 continuation, joins a barrier on B and then waits on a
//                 std::future only (no strata call); every other rank joins
//                 B, stays silent for 500 ms (a stalled peer, not a
//                 synchronization) and then posts. The continuation must run
//                 (10 s bound), and while rank 0's call was pending its
//                 progress servers must sleep: between the barrier and the
//                 continuation at most 10 + one per 20 ms of that wait
//                 wake-ups (REL_MAX_SLEEPS overrides; a server polling
//                 every millisecond has 20 times as many), and at
//                 most 400 loop iterations per wake-up or event (a server
//                 spins at most spin_polls + yield_polls = 320 times after
//                 each before it sleeps; one that never sleeps has
//                 thousands). Prints "LATE rank 0: loops L sleeps S events
//                 E" and "rel_rank: late-peer OK".
//   --ids N       creates and frees N communicators (dup) and N windows
//                 (0 bytes), each used once; ids are 16 bits, so N > 65,534
//                 needs their reuse. Prints "rel_rank: ids OK".
//   --soak N      creates and frees N communicators (dup, one allreduce each),
//                 N windows and N shared allocations (Engine::allocate, 64
//                 KiB), sampling RSS and the mapping count (/proc/self/maps
//                 lines) 10 times; fails when either grows beyond a bound
//                 after the first sample (peers must unmap what owners free).
//                 Prints the samples and "rel_rank: soak OK".
//   --dag-death   DAG collectives (64 KiB per rank: window plans)
//                 while the last rank SIGKILLs itself: every survivor's
//                 pending futures that need it fail with peer_dead or timeout
//                 naming it within STRATA_TIMEOUT + 1 s (a broadcast part that
//                 does not need it may succeed).
//                 Prints "SURVIVOR rank R: ... after S s".
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../common/rank_check.hpp"
#include "strata/strata.hpp"

namespace {

using rank_check::failures;
using rank_check::me;

int queue_mode(strata::Engine& engine) {
  strata::Communicator a = engine.world().dup();
  strata::Communicator b = engine.world().dup();
  const int n = a.size();
  constexpr int kCalls = 12;
  constexpr std::size_t kCount = 8;  // 32 bytes of int32
  std::vector<std::vector<std::int32_t>> send(kCalls, std::vector<std::int32_t>(kCount));
  std::vector<std::vector<std::int32_t>> recv(kCalls, std::vector<std::int32_t>(kCount, -1));
  for (int k = 0; k < kCalls; ++k)
    for (std::size_t i = 0; i < kCount; ++i) send[k][i] = me * 1000 + k * 10 + static_cast<int>(i);
  std::vector<strata::Future<void>> futs;
  auto post = [&] {
    for (int k = 0; k < kCalls; ++k)
      futs.push_back(a.allreduce(send[k].data(), recv[k].data(), kCount, strata::Datatype::int32, strata::Op::sum));
  };
  if (me == 0) {
    post();
    b.barrier().get();
  } else {
    b.barrier().get();
    post();
  }
  for (auto& f : futs) f.get();
  for (int k = 0; k < kCalls; ++k)
    for (std::size_t i = 0; i < kCount; ++i) {
      std::int32_t want = 0;
      for (int q = 0; q < n; ++q) want += q * 1000 + k * 10 + static_cast<int>(i);
      EXPECT(recv[k][i] == want, "call %d [%zu] = %d, want %d", k, i, recv[k][i], want);
    }
  if (failures == 0) std::printf("rel_rank: queue OK (rank %d)\n", me);
  return failures == 0 ? 0 : 1;
}

int when_all_mode(strata::Engine& engine) {
  strata::Communicator a = engine.world().dup();
  strata::Communicator b = engine.world().dup();
  std::int32_t x = me + 1, sum = 0;
  if (me == 0) {
    strata::Future<void> fa = a.allreduce(&x, &sum, 1, strata::Datatype::int32, strata::Op::sum);
    strata::Future<void> fb = b.barrier();
    strata::when_all(std::move(fa), std::move(fb)).get();
  } else {
    b.barrier().get();
    a.allreduce(&x, &sum, 1, strata::Datatype::int32, strata::Op::sum).get();
  }
  const int n = a.size();
  EXPECT(sum == n * (n + 1) / 2, "sum %d, want %d", sum, n * (n + 1) / 2);
  engine.world().barrier().get();
  if (failures == 0) std::printf("rel_rank: when-all OK (rank %d)\n", me);
  return failures == 0 ? 0 : 1;
}

int then_mode(strata::Engine& engine) {
  strata::Communicator a = engine.world().dup();
  strata::Communicator b = engine.world().dup();
  std::int32_t x = me + 1, sum = 0;
  const int n = a.size();
  if (me == 0) {
    std::promise<std::chrono::steady_clock::time_point> ran;
    std::future<std::chrono::steady_clock::time_point> ran_f = ran.get_future();
    strata::Future<void> fa = a.allreduce(&x, &sum, 1, strata::Datatype::int32, strata::Op::sum);
    strata::Future<void> cont = std::move(fa).then([&ran] { ran.set_value(std::chrono::steady_clock::now()); });
    b.barrier().get();  // rank 1 posts its allreduce after this
    const auto t0 = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);  // rank 1's idle period
    if (ran_f.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
      // Tell a lost wake-up (the server runs it at its 30 s max_block) from a
      // continuation that never runs (the arena): wait past max_block.
      const strata::Engine::ProgressStats s0 = engine.progress_stats();
      std::printf(
          "rank 0: FAILED: the then() continuation did not run within 5 s (servers: %llu loops, %llu sleeps)\n"
          "rank 0: in flight: %s\n",
          static_cast<unsigned long long>(s0.loops), static_cast<unsigned long long>(s0.sleeps),
          engine.pending_report().c_str());
      std::fflush(stdout);
      if (std::getenv("STRATA_TEST_GDB") != nullptr) {
        const std::string cmd =
            "gdb -p " + std::to_string(::getpid()) +
            " -batch -ex 'thread apply all bt 12' 2>/dev/null | grep -E '^#|^Thread' > /tmp/then_gdb." +
            std::to_string(::getpid());
        (void)std::system(cmd.c_str());
      }
      const bool late = ran_f.wait_for(std::chrono::seconds(40)) == std::future_status::ready;
      const strata::Engine::ProgressStats s1 = engine.progress_stats();
      std::printf("rank 0: %s (servers since: %llu loops, %llu sleeps)\n",
                  late ? "the continuation ran later (a lost wake-up)" : "the continuation never ran",
                  static_cast<unsigned long long>(s1.loops - s0.loops),
                  static_cast<unsigned long long>(s1.sleeps - s0.sleeps));
      std::fflush(stdout);
      _exit(1);
    }
    const double us = std::chrono::duration<double, std::micro>(ran_f.get() - t0).count();
    std::printf("rank 0: continuation ran %.0f us after rank 1 posted (about)\n", us);
    cont.get();
  } else {
    b.barrier().get();
    // An idle period (not synchronization): rank 0's progress server blocks meanwhile.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    // get() as before (its spin, then sleep); a watchdog prints what is in flight if it takes 5 s.
    std::promise<void> done;
    std::future<void> done_f = done.get_future();
    std::thread watch([&] {
      if (done_f.wait_for(std::chrono::seconds(5)) == std::future_status::ready) return;
      std::printf("rank %d: the allreduce is not done after 5 s; in flight: %s\n", me, engine.pending_report().c_str());
      std::fflush(stdout);
    });
    a.allreduce(&x, &sum, 1, strata::Datatype::int32, strata::Op::sum).get();
    done.set_value();
    watch.join();
  }
  EXPECT(sum == n * (n + 1) / 2, "sum %d, want %d", sum, n * (n + 1) / 2);
  engine.world().barrier().get();
  if (failures == 0) std::printf("rel_rank: then OK (rank %d)\n", me);
  return failures == 0 ? 0 : 1;
}

int late_peer_mode(strata::Engine& engine, long bytes) {
  strata::Communicator a = engine.world().dup();
  strata::Communicator b = engine.world().dup();
  const std::size_t count = static_cast<std::size_t>(std::max(1L, bytes / 4));
  std::vector<std::int32_t> x(count, me + 1), sum(count, 0);
  const int n = a.size();
  if (me == 0) {
    const char* cap = std::getenv("REL_MAX_SLEEPS");
    std::promise<void> ran;
    std::future<void> ran_f = ran.get_future();
    strata::Future<void> fa = a.allreduce(x.data(), sum.data(), count, strata::Datatype::int32, strata::Op::sum);
    strata::Future<void> cont = std::move(fa).then([&ran] { ran.set_value(); });
    b.barrier().get();  // the others stall from here on
    const strata::Engine::ProgressStats s0 = engine.progress_stats();
    const auto t0 = std::chrono::steady_clock::now();
    if (ran_f.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      std::printf("rank 0: FAILED: the call of a late peer did not complete within 10 s without a strata call\n");
      std::fflush(stdout);
      _exit(1);
    }
    const strata::Engine::ProgressStats s1 = engine.progress_stats();
    // A loaded machine stretches the peer's stall: the bound follows the wait.
    const auto waited_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    const std::uint64_t max_sleeps =
        cap != nullptr ? std::strtoull(cap, nullptr, 10) : 10 + static_cast<std::uint64_t>(waited_ms.count()) / 20;
    const std::uint64_t loops = s1.loops - s0.loops, sleeps = s1.sleeps - s0.sleeps, events = s1.events - s0.events;
    std::printf("LATE rank 0: waited %lld ms, loops %llu sleeps %llu events %llu (%s)\n",
                static_cast<long long>(waited_ms.count()), static_cast<unsigned long long>(loops),
                static_cast<unsigned long long>(sleeps), static_cast<unsigned long long>(events),
                engine.transport_name().c_str());
    std::fflush(stdout);
    EXPECT(sleeps <= max_sleeps, "progress servers woke %llu times while the call waited (at most %llu): polling",
           static_cast<unsigned long long>(sleeps), static_cast<unsigned long long>(max_sleeps));
    EXPECT(loops <= 400 * (sleeps + events + 1),
           "progress servers looped %llu times for %llu wake-ups and %llu events: "
           "spinning",
           static_cast<unsigned long long>(loops), static_cast<unsigned long long>(sleeps),
           static_cast<unsigned long long>(events));
    cont.get();
  } else {
    b.barrier().get();
    // A stalled peer (not synchronization): rank 0's call waits meanwhile.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    a.allreduce(x.data(), sum.data(), count, strata::Datatype::int32, strata::Op::sum).get();
  }
  for (std::size_t i = 0; i < count; ++i) {
    EXPECT(sum[i] == n * (n + 1) / 2, "element %zu: sum %d, want %d", i, sum[i], n * (n + 1) / 2);
    if (sum[i] != n * (n + 1) / 2) break;
  }
  engine.world().barrier().get();
  if (failures == 0) std::printf("rel_rank: late-peer OK (rank %d)\n", me);
  return failures == 0 ? 0 : 1;
}

int ids_mode(strata::Engine& engine, long n) {
  strata::Communicator& w = engine.world();
  std::int32_t one = 1, sum = 0;
  for (long i = 0; i < n; ++i) {
    {
      strata::Communicator c = w.dup();
      if (i % 1000 == 0) {
        c.allreduce(&one, &sum, 1, strata::Datatype::int32, strata::Op::sum).get();
        EXPECT(sum == c.size(), "dup %ld: sum %d", i, sum);
      }
    }
    strata::Window win = w.create_window(nullptr, 0);
    win.free();
  }
  std::printf("rank %d: %ld communicators and windows created and freed\n", me, n);
  if (failures == 0) std::printf("rel_rank: ids OK (rank %d)\n", me);
  return failures == 0 ? 0 : 1;
}

// Resident set (KiB) and mapping count of this process.
std::pair<long, long> rss_and_maps() {
  long rss = 0, maps = 0;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f))
      if (std::strncmp(line, "VmRSS:", 6) == 0) rss = std::atol(line + 6);
    std::fclose(f);
  }
  if (FILE* f = std::fopen("/proc/self/maps", "r")) {
    int ch = 0;
    while ((ch = std::fgetc(f)) != EOF)
      if (ch == '\n') ++maps;
    std::fclose(f);
  }
  return {rss, maps};
}

int soak_mode(strata::Engine& engine, long n) {
  strata::Communicator& w = engine.world();
  std::int32_t one = 1, sum = 0;
  long rss0 = 0, maps0 = 0, rss_max = 0, maps_max = 0;
  const long every = std::max(1L, n / 10);
  for (long i = 0; i < n; ++i) {
    {
      strata::Communicator c = w.dup();
      c.allreduce(&one, &sum, 1, strata::Datatype::int32, strata::Op::sum).get();
      EXPECT(sum == c.size(), "dup %ld: sum %d", i, sum);
    }
    {
      strata::Window win = w.create_window(nullptr, 0);
      win.free();
    }
    {
      strata::SharedMemory m = engine.allocate(64 * 1024);
      m.as<char>()[0] = 1;
    }
    if ((i + 1) % every == 0) {
      // Every rank samples after the peers' frees of this round reached it.
      w.barrier().get();
      const auto [rss, maps] = rss_and_maps();
      if (i + 1 == every) rss0 = rss, maps0 = maps;
      rss_max = std::max(rss_max, rss);
      maps_max = std::max(maps_max, maps);
      std::printf("rank %d: after %ld: rss %ld KiB, mappings %ld\n", me, i + 1, rss, maps);
      std::fflush(stdout);
    }
  }
  // Bounded growth after the first sample: a few mappings (allocator arenas,
  // a late unmap in flight) and a few MiB of resident memory.
  EXPECT(maps_max - maps0 <= 64, "mappings grew from %ld to %ld", maps0, maps_max);
  EXPECT(rss_max - rss0 <= 32 * 1024, "rss grew from %ld to %ld KiB", rss0, rss_max);
  std::printf("rank %d: soak of %ld: rss %ld -> max %ld KiB, mappings %ld -> max %ld\n", me, n, rss0, rss_max, maps0,
              maps_max);
  if (failures == 0) std::printf("rel_rank: soak OK (rank %d)\n", me);
  return failures == 0 ? 0 : 1;
}

int dag_death_mode(strata::Engine& engine) {
  strata::Communicator& w = engine.world();
  const int n = w.size();
  const int victim = n - 1;
  constexpr std::size_t kCount = 16 * 1024;  // 64 KiB of int32 per rank
  std::vector<std::int32_t> a(kCount, me + 1), b(kCount, 0), c(kCount * static_cast<std::size_t>(n), 0),
      d(kCount, me == 0 ? 7 : 0);
  w.allreduce(a.data(), b.data(), kCount, strata::Datatype::int32, strata::Op::sum).get();  // a working round
  EXPECT(b[0] == n * (n + 1) / 2, "first allreduce %d", b[0]);
  const char* tmo = std::getenv("STRATA_TIMEOUT");
  const double limit_s = (tmo ? std::atof(tmo) / 1000.0 : 30.0) + 1.0;
  if (me == victim) {
    // Dies while the others are inside the collectives below (they cannot
    // finish the allreduce, allgather or barrier without it), after each of
    // them finished the working round.
    rank_check::death_gate_wait(n - 1);
    std::fflush(stdout);
    ::raise(SIGKILL);
  }
  rank_check::death_gate_pass();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::pair<const char*, strata::Future<void>>> futs;
  futs.emplace_back("allreduce", w.allreduce(a.data(), b.data(), kCount, strata::Datatype::int32, strata::Op::sum));
  futs.emplace_back("broadcast", w.broadcast(d.data(), kCount, strata::Datatype::int32, 0));
  futs.emplace_back("allgather", w.allgather(a.data(), kCount, c.data(), strata::Datatype::int32));
  futs.emplace_back("barrier", w.barrier());
  const std::string named = "rank " + std::to_string(victim);
  int errors = 0;
  for (auto& [what, f] : futs) {
    try {
      f.get();
      // A broadcast part may not depend on the victim (a tree leaf); the others must.
      if (std::string(what) == "broadcast")
        ++errors;
      else
        std::printf("rank %d: FAILED: %s succeeded without rank %d\n", me, what, victim);
    } catch (const strata::Error& e) {
      const std::string m = e.what();
      const bool typed = e.errc() == strata::Errc::peer_dead || e.errc() == strata::Errc::timeout;
      if (!typed || m.find(named) == std::string::npos)
        std::printf("rank %d: FAILED: %s: wrong error: %s\n", me, what, m.c_str());
      else
        ++errors;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (secs > limit_s)
    std::printf("rank %d: FAILED: the last error came after %.2f s (limit %.2f s)\n", me, secs, limit_s);
  if (errors == static_cast<int>(futs.size()) && secs <= limit_s && failures == 0)
    std::printf("SURVIVOR rank %d: %d pending collectives failed naming rank %d after %.2f s\n", me, errors, victim,
                secs);
  std::fflush(stdout);
  rank_check::exit_gate();
  _exit(0);  // the engine's shutdown barrier cannot succeed with a dead member
}

strata::UserOp throwing_op() {
  strata::UserOp op;
  op.fn = [](const void*, const void*, void*, std::size_t) { throw std::runtime_error("boom from the user op"); };
  op.elem_size = sizeof(std::int32_t);
  op.commutative = true;
  op.name = "thrower";
  return op;
}

int throwing_op_mode(strata::Engine& engine) {
  struct Case {
    const char* name;
    std::size_t count;
    bool in_place;
  };
  // 8 KiB is beyond the mapped plans' default 4 KiB per rank: a window plan.
  const Case cases[] = {
      {"fast", 4, false}, {"fast_in_place", 4, true}, {"plan", 2048, false}, {"plan_in_place", 2048, true}};
  // One communicator per case (a plan-path failure may leave a peer waiting until its timeout).
  std::vector<strata::Communicator> comms;
  for (std::size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) comms.push_back(engine.world().dup());
  std::size_t i = 0;
  for (const Case& c : cases) {
    strata::Communicator& w = comms[i++];
    engine.world().barrier().get();  // every rank starts each case together
    std::vector<std::int32_t> s(c.count, 1), r(c.count, 0);
    std::string verdict;
    try {
      strata::Future<void> f = w.allreduce(c.in_place ? strata::in_place : s.data(), r.data(), c.count, throwing_op());
      // On the plan path only the ranks that reduce run the op; a peer waiting
      // for a failed rank's data is not told (docs/reliability.md): bounded wait.
      if (!f.wait_for(std::chrono::seconds(3))) {
        verdict = "pending (a peer's op failed)";
      } else {
        f.get();
        verdict = "success";
      }
    } catch (const strata::Error& e) {
      const std::string m = e.what();
      const bool named = m.find("allreduce") != std::string::npos &&
                         m.find("rank " + std::to_string(me)) != std::string::npos &&
                         m.find("boom from the user op") != std::string::npos;
      // A member whose op did not run (or ran later) is told by the rank whose op threw.
      const bool remote = m.find("allreduce") != std::string::npos && m.find("failed on rank ") != std::string::npos &&
                          m.find("on rank " + std::to_string(me)) != std::string::npos;
      if (e.errc() == strata::Errc::invalid_argument && named)
        verdict = "threw-ok: " + m;
      else if (e.errc() == strata::Errc::invalid_argument && remote)
        verdict = "told-ok: " + m;
      else if (e.errc() == strata::Errc::timeout || e.errc() == strata::Errc::peer_dead)
        verdict = "waited: " + m;
      else
        verdict = "other: " + m;
    } catch (const std::exception& e) {
      verdict = std::string("escaped: ") + e.what();
    }
    std::printf("CASE %s rank %d: %s\n", c.name, me, verdict.c_str());
    std::fflush(stdout);
  }
  std::printf("rel_rank: throwing-op done (rank %d)\n", me);
  std::fflush(stdout);
  return 0;  // every member's instance of each failed call settled: the shutdown barrier works
}

std::atomic<long> g_throw_call{-1};  // the call whose op throws on rank 0
std::atomic<long> g_current{-1};     // the call being reduced (blocking phase)

int plans_mode(strata::Engine& engine) {
  strata::Communicator w = engine.world().dup();
  const int n = w.size();
  const auto un = static_cast<std::size_t>(n);
  const std::size_t k = 1000;
  const auto t = strata::Datatype::int32;
  std::vector<std::size_t> counts, displs, sc, sd, rc, rd;
  std::size_t total = 0, st = 0, rt = 0;
  for (int q = 0; q < n; ++q) {
    counts.push_back(k + static_cast<std::size_t>(q) * 5);
    displs.push_back(total);
    total += counts.back() + 2;
    sc.push_back(static_cast<std::size_t>((me * 3 + q) % 7 + 1));
    sd.push_back(st);
    st += sc.back();
    rc.push_back(static_cast<std::size_t>((q * 3 + me) % 7 + 1));
    rd.push_back(rt);
    rt += rc.back();
  }
  const std::size_t mine = counts[static_cast<std::size_t>(me)];
  using Call = std::function<strata::Future<void>(strata::Communicator&, const std::int32_t*, std::int32_t*)>;
  struct Case {
    const char* name;
    std::size_t send, recv;
    Call call;
  };
  const std::vector<Case> cases = {
      {"allgather", k, k * un,
       [&](strata::Communicator& c, const std::int32_t* s, std::int32_t* r) { return c.allgather(s, k, r, t); }},
      {"alltoallv", st, rt,
       [&](strata::Communicator& c, const std::int32_t* s, std::int32_t* r) {
         return c.alltoallv(s, sc, sd, r, rc, rd, t);
       }},
      {"gatherv", mine, total,
       [&](strata::Communicator& c, const std::int32_t* s, std::int32_t* r) {
         return c.gatherv(s, mine, r, counts, displs, t, n - 1);
       }},
      {"scatter", k * un, k,
       [&](strata::Communicator& c, const std::int32_t* s, std::int32_t* r) { return c.scatter(s, r, k, t, 0); }},
      {"reduce_scatter", total - 2 * un, mine,
       [&](strata::Communicator& c, const std::int32_t* s, std::int32_t* r) {
         return c.reduce_scatter(s, r, counts, t, strata::Op::sum);
       }},
  };
  for (const Case& cs : cases) {
    std::vector<std::int32_t> send(cs.send + 1), recv(cs.recv + 1, -3), ref(cs.recv + 1, -3);
    strata::Plan p = w.plan([&](strata::Communicator& c) { return cs.call(c, send.data(), recv.data()); });
    for (int round = 0; round < 4; ++round) {
      for (std::size_t i = 0; i < send.size(); ++i)
        send[i] = static_cast<std::int32_t>(me * 10000 + round * 1000 + static_cast<int>(i % 101));
      p.start().get();
      cs.call(w, send.data(), ref.data()).get();
      if (recv != ref) {
        std::printf("PLANS rank %d: %s round %d differs from the one-shot call\n", me, cs.name, round);
        ++failures;
      }
      recv.assign(recv.size(), -3);
      ref.assign(ref.size(), -3);
    }
  }
  // Streams: 6 plans started 5 times each without waiting (30 starts in
  // flight over the window's slots, so every plan's start meets busy slots
  // and each remembered plan of every slot), each round's results checked.
  // Plans of code (a user operator: not in the plan cache; on_block) reuse
  // their compiled plan too: the operator and the callback run at every start.
  {
    constexpr int kPlans = 6, kRounds = 5;
    std::atomic<long> op_runs{0}, blocks{0};
    strata::UserOp add;
    add.elem_size = sizeof(std::int64_t);
    add.fn = [&op_runs](const void* a, const void* b, void* d, std::size_t cnt) {
      op_runs.fetch_add(1, std::memory_order_relaxed);
      for (std::size_t i = 0; i < cnt; ++i)
        static_cast<std::int64_t*>(d)[i] =
            static_cast<const std::int64_t*>(a)[i] + static_cast<const std::int64_t*>(b)[i];
    };
    strata::CollOptions ob;
    ob.on_block = [&blocks](int, void*, std::size_t) { blocks.fetch_add(1, std::memory_order_relaxed); };
    std::vector<std::vector<std::int64_t>> in(kPlans, std::vector<std::int64_t>(64 * un)),
        out(kPlans, std::vector<std::int64_t>(64 * un));
    std::vector<strata::Plan> ps;
    for (int q = 0; q < kPlans; ++q) {
      auto* s = in[static_cast<std::size_t>(q)].data();
      auto* r = out[static_cast<std::size_t>(q)].data();
      if (q % 3 == 0)
        ps.push_back(w.plan([&](strata::Communicator& c) { return c.allreduce(s, r, 64, add); }));
      else if (q % 3 == 1)
        ps.push_back(
            w.plan([&](strata::Communicator& c) { return c.alltoall(s, r, 64, strata::Datatype::int64, ob); }));
      else
        ps.push_back(w.plan([&](strata::Communicator& c) { return c.allgather(s, 64, r, strata::Datatype::int64); }));
    }
    const long op_before = op_runs.load();
    for (int round = 0; round < kRounds; ++round) {
      for (int q = 0; q < kPlans; ++q)
        for (std::size_t i = 0; i < 64 * un; ++i)
          in[static_cast<std::size_t>(q)][i] = me * 1000000L + round * 10000L + q * 1000L + static_cast<long>(i);
      blocks.store(0);
      std::vector<strata::Future<void>> fs;
      for (auto& p : ps) fs.push_back(p.start());
      for (auto& f : fs) f.get();
      for (int q = 0; q < kPlans; ++q) {
        const auto& o = out[static_cast<std::size_t>(q)];
        bool ok = true;
        for (std::size_t i = 0; i < 64 && ok; ++i) {
          const long base = round * 10000L + q * 1000L;
          if (q % 3 == 0) {  // sum over ranks of rank * 1e6 + base + i
            long want = 0;
            for (int r = 0; r < n; ++r) want += r * 1000000L + base + static_cast<long>(i);
            ok = o[i] == want;
          } else {
            // alltoall: block r from rank r's block `me`; allgather: block r = rank r's first 64.
            for (int r = 0; r < n && ok; ++r) {
              const std::size_t at = static_cast<std::size_t>(r) * 64 + i;
              const long from = q % 3 == 1 ? static_cast<long>(me) * 64 + static_cast<long>(i) : static_cast<long>(i);
              ok = o[at] == r * 1000000L + base + from;
            }
          }
        }
        if (!ok) {
          std::printf("PLANS rank %d: stream plan %d round %d has a wrong result\n", me, q, round);
          ++failures;
        }
      }
      // Every alltoall start delivered a block from each member (its own included).
      if (blocks.load() != 2L * n) {
        std::printf("PLANS rank %d: round %d ran on_block %ld times, expected %d\n", me, round, blocks.load(), 2 * n);
        ++failures;
      }
    }
    if (n > 1 && op_runs.load() == op_before) {
      std::printf("PLANS rank %d: the user operator never ran in the streamed plans\n", me);
      ++failures;
    }
  }
  w.barrier().get();
  if (failures == 0) std::printf("rel_rank: plans OK (rank %d)\n", me);
  std::fflush(stdout);
  return failures == 0 ? 0 : 1;
}

int hang_mode(strata::Engine& engine, const std::string& kind) {
  strata::Communicator w = engine.world().dup(kind == "tag" ? 4 : 0);
  const int last = w.size() - 1;
  std::vector<std::int64_t> s(1, me + 1), r(1, 0);
  for (int i = 0; i < 3; ++i) w.allreduce(s.data(), r.data(), 1, strata::Datatype::int64, strata::Op::sum).get();
  strata::Future<void> f;
  if (kind == "tag") {  // tag 2's second call: the last rank never posts it
    strata::CollOptions o;
    o.tag = 2;
    w.allreduce(s.data(), r.data(), 1, strata::Datatype::int64, strata::Op::sum, o).get();
    if (me != last) f = w.allreduce(s.data(), r.data(), 1, strata::Datatype::int64, strata::Op::sum, o);
    std::printf("HANG rank %d: posted\n", me);
    std::fflush(stdout);
    for (;;) ::pause();
  }
  if (me != last || kind != "never") {
    if (me == last && kind == "mismatch")
      f = w.broadcast(r.data(), 1, strata::Datatype::int64, 0);
    else
      f = w.allreduce(s.data(), r.data(), 1, strata::Datatype::int64, strata::Op::sum);
  }
  std::printf("HANG rank %d: posted\n", me);
  std::fflush(stdout);
  for (;;) ::pause();  // the launcher's timeout (or a signal) ends the job
}

int throw_then_go_mode(strata::Engine& engine, long k, long n, std::size_t count) {
  strata::Communicator w = engine.world().dup();
  const int size = w.size();
  strata::UserOp op;
  op.fn = [](const void* a, const void* b, void* d, std::size_t m) {
    if (me == 0 && g_current.load() == g_throw_call.load()) throw std::runtime_error("boom in the chosen call");
    const auto* x = static_cast<const std::int32_t*>(a);
    const auto* y = static_cast<const std::int32_t*>(b);
    auto* z = static_cast<std::int32_t*>(d);
    for (std::size_t i = 0; i < m; ++i) z[i] = x[i] + y[i];
  };
  op.elem_size = sizeof(std::int32_t);
  op.name = "sum-or-throw";
  g_throw_call.store(k);
  long bad = 0, failed_as_expected = 0;
  auto expect_sum = [&](long call, const std::vector<std::int32_t>& r) {
    for (std::size_t i = 0; i < count; ++i) {
      std::int32_t want = 0;
      for (int q = 0; q < size; ++q) want += static_cast<std::int32_t>(q * 100 + call % 50 + static_cast<long>(i % 7));
      if (r[i] != want) {
        std::printf("THROWGO rank %d: call %ld element %zu is %d, want %d\n", me, call, i, r[i], want);
        return false;
      }
    }
    return true;
  };
  auto fill = [&](long call) {
    std::vector<std::int32_t> v(count);
    for (std::size_t i = 0; i < count; ++i)
      v[i] = static_cast<std::int32_t>(me * 100 + call % 50 + static_cast<long>(i % 7));
    return v;
  };
  const bool verbose = std::getenv("THROWGO_VERBOSE") != nullptr;
  auto judge = [&](long call, strata::Future<void>& f, const std::vector<std::int32_t>& r) {
    try {
      if (verbose) std::printf("THROWGO rank %d: waiting for call %ld\n", me, call), std::fflush(stdout);
      f.get();
      if (call == k && me == 0) {
        std::printf("THROWGO rank %d: call %ld succeeded, but this rank's op threw in it\n", me, call);
        ++bad;
      } else if (call == k) {
        // Finished before rank 0 failed, with nothing of the failed part (a
        // mapped plan: every member folds for itself): the result must be right.
        if (expect_sum(call, r)) {
          std::printf("THROWGO rank %d: call %ld completed before rank 0's failure, with the right sum\n", me, call);
          ++failed_as_expected;
        } else {
          ++bad;
        }
      } else if (!expect_sum(call, r)) {
        ++bad;
      }
    } catch (const strata::Error& e) {
      const std::string m = e.what();
      const bool ok = call == k && e.errc() == strata::Errc::invalid_argument &&
                      (me == 0 ? m.find("boom in the chosen call") != std::string::npos
                               : m.find("failed on rank 0") != std::string::npos);
      std::printf("THROWGO rank %d: call %ld failed%s: %s\n", me, call, ok ? " as expected" : " UNEXPECTEDLY",
                  m.c_str());
      if (ok)
        ++failed_as_expected;
      else
        ++bad;
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  // Blocking calls: the failed one, then many more through the same window slots.
  for (long call = 0; call < n; ++call) {
    g_current.store(call);
    std::vector<std::int32_t> s = fill(call), r(count, -1);
    strata::Future<void> f = w.allreduce(s.data(), r.data(), count, op);
    judge(call, f, r);
  }
  const auto t1 = std::chrono::steady_clock::now();
  // Nonblocking batches of 8 (loose calls overlap the failed one's settling); no op throws here.
  g_current.store(-2);
  for (long b = 0; b < n / 8; ++b) {
    std::vector<std::vector<std::int32_t>> s, r;
    std::vector<strata::Future<void>> fs;
    for (long j = 0; j < 8; ++j) {
      const long call = n + b * 8 + j;
      s.push_back(fill(call));
      r.emplace_back(count, -1);
    }
    for (long j = 0; j < 8; ++j)
      fs.push_back(
          w.allreduce(s[static_cast<std::size_t>(j)].data(), r[static_cast<std::size_t>(j)].data(), count, op));
    for (long j = 0; j < 8; ++j) judge(n + b * 8 + j, fs[static_cast<std::size_t>(j)], r[static_cast<std::size_t>(j)]);
  }
  const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  std::printf(
      "THROWGO rank %d: %ld blocking calls (call %ld failed on every rank) in %.1f ms, then %ld nonblocking; "
      "%ld failed as expected, %ld wrong\n",
      me, n, k, ms, n / 8 * 8, failed_as_expected, bad);
  w.barrier().get();
  if (bad == 0 && failed_as_expected == 1) std::printf("rel_rank: throw-then-go OK (rank %d)\n", me);
  std::fflush(stdout);
  return bad == 0 && failed_as_expected == 1 ? 0 : 1;
}

// One tagged call: tag t's k-th call on rank r (allreduce sum for even tags,
// broadcast from root k % n for odd ones) over `count` int64 values.
struct TaggedCall {
  int tag = 0;
  int k = 0;
  std::vector<std::int64_t> send, recv;
};

std::int64_t tag_value(int rank, int tag, int k, std::size_t i) {
  return static_cast<std::int64_t>(rank) * 1000003 + tag * 7919 + k * 31 + static_cast<std::int64_t>(i);
}

strata::Future<void> post_tagged(strata::Communicator& c, TaggedCall& tc, std::size_t count, bool tags_on) {
  const int n = c.size();
  strata::CollOptions o;
  o.tag = tags_on ? tc.tag : -1;
  tc.send.resize(count);
  tc.recv.assign(count, -1);
  for (std::size_t i = 0; i < count; ++i) tc.send[i] = tag_value(c.rank(), tc.tag, tc.k, i);
  if (tc.tag % 2 == 0)
    return c.allreduce(tc.send.data(), tc.recv.data(), count, strata::Datatype::int64, strata::Op::sum, o);
  const int root = tc.k % n;
  if (c.rank() == root) tc.recv = tc.send;
  return c.broadcast(tc.recv.data(), count, strata::Datatype::int64, root, o);
}

bool check_tagged(const strata::Communicator& c, const TaggedCall& tc, std::size_t count) {
  const int n = c.size();
  for (std::size_t i = 0; i < count; ++i) {
    std::int64_t want = 0;
    if (tc.tag % 2 == 0) {
      for (int r = 0; r < n; ++r) want += tag_value(r, tc.tag, tc.k, i);
    } else {
      want = tag_value(tc.k % n, tc.tag, tc.k, i);
    }
    if (tc.recv[i] != want) {
      std::fprintf(stderr, "rank %d: FAILED: tag %d call %d element %zu: got %lld, expected %lld\n", me, tc.tag, tc.k,
                   i, static_cast<long long>(tc.recv[i]), static_cast<long long>(want));
      return false;
    }
  }
  return true;
}

int tags_mode(strata::Engine& engine, long calls) {
  constexpr int kTags = 8;
  const bool tags_on = std::getenv("REL_TAGS_OFF") == nullptr;
  strata::Communicator comm = engine.world().dup(kTags);
  if (comm.tags() != kTags) {
    std::fprintf(stderr, "rank %d: FAILED: tags() = %d\n", me, comm.tags());
    return 1;
  }
  std::mt19937 rng(static_cast<unsigned>(1234 + 77 * me));
  std::vector<int> k(kTags, 0);
  long done = 0;
  // 1. Rounds of 8 nonblocking calls, one per tag, in a shuffled order per rank.
  std::vector<int> order(kTags);
  for (int t = 0; t < kTags; ++t) order[static_cast<std::size_t>(t)] = t;
  while (done < calls) {
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<TaggedCall> round(kTags);
    std::vector<strata::Future<void>> fs;
    const std::size_t count = 1 + static_cast<std::size_t>(done % 5) * 300;  // 8 B .. 9.6 KB
    for (int t : order) {
      TaggedCall& tc = round[static_cast<std::size_t>(t)];
      tc.tag = t;
      tc.k = k[static_cast<std::size_t>(t)]++;
      fs.push_back(post_tagged(comm, tc, count, tags_on));
    }
    for (auto& f : fs) f.get();
    for (const auto& tc : round)
      if (!check_tagged(comm, tc, count)) return 1;
    done += kTags;
  }
  // 2. One thread per tag, calls back to back, blocking.
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kTags; ++t)
    threads.emplace_back([&, t] {
      for (int j = 0; j < 20; ++j) {
        TaggedCall tc;
        tc.tag = t;
        tc.k = 1000 + j;
        try {
          post_tagged(comm, tc, 64, tags_on).get();
          if (!check_tagged(comm, tc, 64)) ++bad;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "rank %d: FAILED: tag %d: %s\n", me, t, e.what());
          ++bad;
        }
      }
    });
  for (auto& th : threads) th.join();
  if (bad != 0) return 1;
  // 3. Persistent plans of tagged calls, started in shuffled orders.
  std::vector<TaggedCall> pcs(kTags);
  std::vector<strata::Plan> plans;
  for (int t = 0; t < kTags; ++t) {
    TaggedCall& tc = pcs[static_cast<std::size_t>(t)];
    tc.tag = t;
    tc.k = 5000;
    plans.push_back(comm.plan([&](strata::Communicator& c) { return post_tagged(c, tc, 100, tags_on); }));
  }
  for (int r = 0; r < 10; ++r) {
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<strata::Future<void>> fs;
    for (int t : order) {
      TaggedCall& tc = pcs[static_cast<std::size_t>(t)];
      if (!(tc.tag % 2 == 1 && comm.rank() == tc.k % comm.size())) std::fill(tc.recv.begin(), tc.recv.end(), -1);
      fs.push_back(plans[static_cast<std::size_t>(t)].start());
    }
    for (auto& f : fs) f.get();
    for (const auto& tc : pcs)
      if (!check_tagged(comm, tc, 100)) return 1;
  }
  // A tag out of range is an argument error naming 'tag' and the rank.
  try {
    strata::CollOptions o;
    o.tag = kTags;
    std::int64_t x = 0;
    comm.barrier(o).get();
    (void)x;
    std::fprintf(stderr, "rank %d: FAILED: tag %d accepted\n", me, kTags);
    return 1;
  } catch (const strata::Error& e) {
    if (e.errc() != strata::Errc::invalid_argument || std::string(e.what()).find("'tag'") == std::string::npos) {
      std::fprintf(stderr, "rank %d: FAILED: wrong error: %s\n", me, e.what());
      return 1;
    }
  }
  comm.barrier().get();
  std::printf("rel_rank: tags OK (rank %d, %ld calls)\n", me, done + kTags * 20 + kTags * 10);
  return 0;
}

int test_progress_mode(strata::Engine& engine) {
  strata::Communicator& w = engine.world();
  for (int i = 0; i < 50; ++i) {
    std::int64_t x = me + i, y = -1;
    auto f = w.allreduce(&x, &y, 1, strata::Datatype::int64, strata::Op::sum);
    long spins = 0;
    if (me == 0) {
      while (!f.test()) ++spins;
    } else {
      while (!f.ready()) {
        engine.progress();
        ++spins;
      }
    }
    f.get();
    const std::int64_t n = w.size();
    if (y != n * (n - 1) / 2 + n * i) {
      std::fprintf(stderr, "rank %d: FAILED: call %d sum %lld\n", me, i, static_cast<long long>(y));
      return 1;
    }
    (void)spins;
  }
  std::printf("rel_rank: test-progress OK (rank %d)\n", me);
  return 0;
}

int revoke_mode(strata::Engine& engine) {
  strata::Communicator comm = engine.world().dup();
  const int n = comm.size();
  std::int64_t x = comm.rank() + 1, y = 0;
  if (comm.rank() == n - 1) {
    comm.revoke();
  } else {
    try {
      comm.allreduce(&x, &y, 1, strata::Datatype::int64, strata::Op::sum).get();
      std::fprintf(stderr, "rank %d: FAILED: the allreduce on a revoked communicator completed\n", me);
      return 1;
    } catch (const strata::Error& e) {
      if (e.errc() != strata::Errc::revoked) {
        std::fprintf(stderr, "rank %d: FAILED: expected Errc::revoked, got: %s\n", me, e.what());
        return 1;
      }
    }
  }
  strata::Communicator small = comm.shrink();
  if (small.size() != n || !small.failed_members().empty()) {
    std::fprintf(stderr, "rank %d: FAILED: shrink without a death gave %d members\n", me, small.size());
    return 1;
  }
  small.allreduce(&x, &y, 1, strata::Datatype::int64, strata::Op::sum).get();
  if (y != std::int64_t{n} * (n + 1) / 2) {
    std::fprintf(stderr, "rank %d: FAILED: sum %lld\n", me, static_cast<long long>(y));
    return 1;
  }
  try {
    comm.barrier().get();
    std::fprintf(stderr, "rank %d: FAILED: a barrier on the revoked communicator completed\n", me);
    return 1;
  } catch (const strata::Error& e) {
    if (e.errc() != strata::Errc::revoked) {
      std::fprintf(stderr, "rank %d: FAILED: expected Errc::revoked, got: %s\n", me, e.what());
      return 1;
    }
  }
  small.barrier().get();
  std::printf("rel_rank: revoke OK (rank %d)\n", me);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    strata::Engine engine;
    me = engine.rank();
    if (mode == "--queue") return queue_mode(engine);
    if (mode == "--throwing-op") return throwing_op_mode(engine);
    if (mode == "--hang" && argc > 2) return hang_mode(engine, argv[2]);
    if (mode == "--plans") return plans_mode(engine);
    if (mode == "--revoke") return revoke_mode(engine);
    if (mode == "--test-progress") return test_progress_mode(engine);
    if (mode == "--tags" && argc > 2) return tags_mode(engine, std::atol(argv[2]));
    if (mode == "--throw-then-go" && argc > 4)
      return throw_then_go_mode(engine, std::atol(argv[2]), std::atol(argv[3]),
                                static_cast<std::size_t>(std::atol(argv[4])));
    if (mode == "--when-all") return when_all_mode(engine);
    if (mode == "--then") return then_mode(engine);
    if (mode == "--dag-death") return dag_death_mode(engine);
    if (mode == "--soak" && argc > 2) return soak_mode(engine, std::atol(argv[2]));
    if (mode == "--ids" && argc > 2) return ids_mode(engine, std::atol(argv[2]));
    if (mode == "--late-peer" && argc > 2) return late_peer_mode(engine, std::atol(argv[2]));
    std::fprintf(stderr, "rel_rank: unknown mode '%s'\n", mode.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: FAILED: exception: %s\n", me, e.what());
    return 1;
  }
}
