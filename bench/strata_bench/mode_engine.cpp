// --engine: what the engine costs beyond the work it schedules.
//
// 1. Executor overhead in ns per node for a long chain, a wide fan-out/fan-in
//    and a layered random DAG (width 64, two random predecessors per node),
//    beside a bare tbb::task_group running the same dependency structure with
//    atomic counters (the logic of tests/dag/dag_overhead_main.cpp). Each node's
//    work is one relaxed atomic increment. Executor on the fake transport, the
//    main thread sleeps on a condition variable while the arena runs the graph.
//    Best of --iters repetitions (default 20); --threads arena threads (default:
//    the CPUs this process may run on). Rank 0 only.
// 2. One tiny collective-shaped instance end to end, call to future ready, the
//    plan cached (after warm-up): a 1-rank allreduce of 8 B (a split
//    communicator of one rank), and with >= 2 ranks an 8 B allreduce and a
//    barrier over all ranks. Every rank's median, reduced over ranks.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include "strata/dag/executor.hpp"
#include "strata/detail/env.hpp"
#include "strata/strata.hpp"
#include "strata/transport/fake.hpp"
#include "strata_bench/bench.hpp"

namespace strata::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<std::uint64_t> g_work{0};
void work() { g_work.fetch_add(1, std::memory_order_relaxed); }

using Graph = std::vector<std::vector<std::uint32_t>>;  // predecessors per node

Graph chain(std::uint32_t n) {
  Graph g(n);
  for (std::uint32_t i = 1; i < n; ++i) g[i] = {i - 1};
  return g;
}
Graph fan(std::uint32_t n) {
  Graph g(n);
  for (std::uint32_t i = 1; i + 1 < n; ++i) g[i] = {0};
  for (std::uint32_t i = 1; i + 1 < n; ++i) g[n - 1].push_back(i);
  return g;
}
Graph layered(std::uint32_t n, std::uint32_t width) {
  std::mt19937 rng(42);
  Graph g(n);
  for (std::uint32_t i = width; i < n; ++i) {
    const std::uint32_t layer = i / width;
    for (int k = 0; k < 2; ++k) g[i].push_back((layer - 1) * width + rng() % width);
  }
  return g;
}

/// Per-repetition ns per node of the executor running @p g.
std::vector<double> run_strata(dag::Executor& ex, const Graph& g, int reps) {
  dag::PlanBuilder b("bench", 0, 1);
  for (const auto& preds : g) b.compute([](const dag::ComputeArgs&) { work(); }, dag::Region{}, preds);
  auto plan = b.build();
  std::vector<double> out;
  for (int r = 0; r < reps; ++r) {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    const auto t0 = Clock::now();
    auto st = ex.start(plan, {}, 0, ex.next_seq(0), [&](const Status&) {
      std::lock_guard<std::mutex> lk(mu);
      done = true;
      cv.notify_one();
    });
    throw_if_error(st);
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return done; });
    }
    out.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(g.size()));
  }
  return out;
}

/// Per-repetition ns per node of a bare task_group running @p g.
std::vector<double> run_tbb(tbb::task_arena& arena, const Graph& g, int reps) {
  const std::size_t n = g.size();
  std::vector<std::vector<std::uint32_t>> succ(n);
  std::vector<std::uint32_t> roots;
  for (std::uint32_t i = 0; i < n; ++i) {
    for (auto p : g[i]) succ[p].push_back(i);
    if (g[i].empty()) roots.push_back(i);
  }
  std::vector<double> out;
  for (int r = 0; r < reps; ++r) {
    std::unique_ptr<std::atomic<int>[]> deps(new std::atomic<int>[n]);
    for (std::size_t i = 0; i < n; ++i) deps[i].store(static_cast<int>(g[i].size()));
    const auto t0 = Clock::now();
    arena.execute([&] {
      tbb::task_group tg;
      std::function<void(std::uint32_t)> run = [&](std::uint32_t v) {
        work();
        for (auto s : succ[v])
          if (deps[s].fetch_sub(1) == 1) tg.run([&run, s] { run(s); });
      };
      for (auto v : roots) tg.run([&run, v] { run(v); });
      tg.wait();
    });
    out.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(n));
  }
  return out;
}

/// ns per node as a record: times in microseconds per node, bytes = nodes.
Record node_record(const char* library, const std::string& shape, std::uint32_t nodes, int threads,
                   const std::vector<double>& ns) {
  Record r;
  r.library = library;
  r.collective = "engine-" + shape;
  r.variant = "threads=" + std::to_string(threads);
  r.bytes = nodes;
  r.ranks = 1;
  r.iters = static_cast<int>(ns.size());
  r.min_us = *std::min_element(ns.begin(), ns.end()) / 1000.0;
  r.median_us = median(ns) / 1000.0;
  r.max_us = *std::max_element(ns.begin(), ns.end()) / 1000.0;
  return r;
}

int cpus_allowed() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

void executor_overhead(const Options& o, std::vector<Record>& out) {
  const std::uint32_t n = 10000;
  const int reps = o.iters > 0 ? o.iters : 20;
  const int threads = o.threads > 0 ? o.threads : cpus_allowed();
  // Let the arena have `threads` workers (oneTBB defaults to cores - 1).
  tbb::global_control gc(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads) + 1);
  tbb::task_arena arena(threads, 0);
  transport::FakeWorld fake(1);
  dag::ExecutorOptions eo;
  eo.arena = &arena;
  dag::Executor ex(fake.endpoint(0), eo);
  struct Case {
    const char* name;
    Graph g;
  } cases[] = {{"chain", chain(n)}, {"fanout-fanin", fan(n)}, {"layered-random", layered(n, 64)}};
  std::printf("# executor overhead: ns per node, %u nodes, %d repetitions (best and median), %d arena threads\n", n,
              reps, threads);
  std::printf("%-16s %12s %12s %12s %12s %9s %9s\n", "shape", "strata best", "tbb best", "strata med", "tbb med",
              "ratio", "ratio med");
  for (auto& c : cases) {
    const auto s = run_strata(ex, c.g, reps);
    const auto t = run_tbb(arena, c.g, reps);
    const double sb = *std::min_element(s.begin(), s.end()), tb = *std::min_element(t.begin(), t.end());
    const double sm = median(s), tm = median(t);
    std::printf("%-16s %12.1f %12.1f %12.1f %12.1f %9.2f %9.2f\n", c.name, sb, tb, sm, tm, sb / tb, sm / tm);
    std::fflush(stdout);
    out.push_back(node_record("strata", c.name, n, threads, s));
    out.push_back(node_record("tbb", c.name, n, threads, t));
  }
}

/// Median and spread of call -> future ready of @p call over every rank.
void tiny(Communicator& world, const std::string& name, int ranks_in_op, int iters,
          const std::function<Future<void>()>& call, std::vector<Record>& out) {
  const int warm = std::max(100, iters / 10);
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(iters));
  for (int i = -warm; i < iters; ++i) {
    const auto t0 = Clock::now();
    call().get();
    if (i >= 0) us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  const double mine = median(us);
  std::vector<double> all(static_cast<std::size_t>(world.size()));
  world.allgather(&mine, 1, all.data(), Datatype::float64).get();
  Record r;
  r.library = "strata";
  r.collective = name;
  r.variant = "call-to-ready";
  r.bytes = name.find("barrier") == std::string::npos ? 8 : 0;
  r.ranks = ranks_in_op;
  r.iters = iters;
  r.min_us = *std::min_element(all.begin(), all.end());
  r.max_us = *std::max_element(all.begin(), all.end());
  r.median_us = median(all);
  if (world.rank() == 0) {
    std::printf("%-28s %5d %10.2f %10.2f %10.2f %10.2f\n", name.c_str(), ranks_in_op, r.min_us, r.median_us, r.max_us,
                *std::min_element(us.begin(), us.end()));
    std::fflush(stdout);
  }
  out.push_back(r);
}

void tiny_collectives(const Options& o, std::vector<Record>& out) {
  EngineOptions eo = EngineOptions::from_environment();
  if (o.progress_threads >= 0) eo.progress_threads = o.progress_threads;
  Engine engine(eo);
  Communicator& world = engine.world();
  const int iters = o.iters > 0 ? std::max(o.iters, 100) : 20000;
  Communicator self = world.split(world.rank(), 0);
  if (world.rank() == 0) {
    std::printf(
        "# tiny collective-shaped instances, call to future ready (plan cached), microseconds;\n"
        "# %d ranks, progress threads %d, %d calls after warm-up; min/median/max over ranks of each rank's "
        "median, then rank 0's fastest call\n",
        world.size(), eo.progress_threads, iters);
    std::printf("%-28s %5s %10s %10s %10s %10s\n", "instance", "ranks", "min_us", "median_us", "max_us", "best_us");
  }
  double x = 1.0, y = 0.0;
  tiny(
      world, "engine-allreduce-1rank", 1, iters, [&] { return self.allreduce(&x, &y, 1, Datatype::float64, Op::sum); },
      out);
  tiny(
      world, "engine-barrier-1rank", 1, iters, [&] { return self.barrier(); }, out);
  if (world.size() >= 2) {
    world.barrier().get();
    tiny(
        world, "engine-allreduce-" + std::to_string(world.size()) + "rank", world.size(), iters,
        [&] { return world.allreduce(&x, &y, 1, Datatype::float64, Op::sum); }, out);
    tiny(
        world, "engine-barrier-" + std::to_string(world.size()) + "rank", world.size(), iters,
        [&] { return world.barrier(); }, out);
  }
}

bool is_rank0() {
  const char* r = strata::detail::env::get("STRATA_RANK");
  return r == nullptr || std::string(r) == "0";
}

}  // namespace

int run_engine(const Options& o, std::vector<Record>& out) {
  // The collectives first (every rank), then the executor alone on rank 0 so
  // the other ranks are not left waiting in the bootstrap meanwhile.
  tiny_collectives(o, out);
  if (!is_rank0()) {
    out.clear();  // rank 0 writes the JSON
    return 0;
  }
  executor_overhead(o, out);
  return 0;
}

}  // namespace strata::bench
