// Executor overhead microbenchmark (not a test): ns per node for a long chain,
// a wide fan-out/fan-in and a layered random DAG, beside a bare
// tbb::task_group running the same dependency structure with atomic counters.
// Usage: dag-overhead [nodes=10000] [reps=20] [threads=2]
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include "strata/dag/executor.hpp"
#include "strata/transport/fake.hpp"

using namespace strata::dag;

namespace {

std::atomic<std::uint64_t> g_work{0};
void work() { g_work.fetch_add(1, std::memory_order_relaxed); }

using Graph = std::vector<std::vector<std::uint32_t>>;  // preds per node

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

double run_strata(Executor& ex, const Graph& g, int reps) {
  PlanBuilder b("bench", 0, 1);
  for (const auto& preds : g) b.compute([](const ComputeArgs&) { work(); }, Region{}, preds);
  auto plan = b.build();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    // The main thread sleeps (no spinning) so the arena's workers own the cores.
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    const auto t0 = std::chrono::steady_clock::now();
    auto st = ex.start(plan, {}, 0, ex.next_seq(0), [&](const strata::Status&) {
      std::lock_guard<std::mutex> lk(mu);
      done = true;
      cv.notify_one();
    });
    if (!st) {
      std::fprintf(stderr, "start failed: %s\n", st.message().c_str());
      std::exit(1);
    }
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return done; });
    }
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, ns / static_cast<double>(g.size()));
  }
  return best;
}

// Bare oneTBB: the same structure with per-node atomic counters and task_group.
double run_tbb(tbb::task_arena& arena, const Graph& g, int reps) {
  const std::size_t n = g.size();
  std::vector<std::vector<std::uint32_t>> succ(n);
  std::vector<std::uint32_t> roots;
  for (std::uint32_t i = 0; i < n; ++i) {
    for (auto p : g[i]) succ[p].push_back(i);
    if (g[i].empty()) roots.push_back(i);
  }
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    std::unique_ptr<std::atomic<int>[]> deps(new std::atomic<int>[n]);
    for (std::size_t i = 0; i < n; ++i) deps[i].store(static_cast<int>(g[i].size()));
    const auto t0 = std::chrono::steady_clock::now();
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
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, ns / static_cast<double>(n));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const auto n = static_cast<std::uint32_t>(argc > 1 ? std::atoi(argv[1]) : 10000);
  const int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 2;
  // Let the arena have `threads` workers (oneTBB defaults to cores - 1).
  tbb::global_control gc(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads) + 1);
  tbb::task_arena arena(threads, 0);
  strata::transport::FakeWorld world(1);
  ExecutorOptions o;
  o.arena = &arena;
  Executor ex(world.endpoint(0), o);
  struct Case {
    const char* name;
    Graph g;
  } cases[] = {{"chain", chain(n)}, {"fan-out/fan-in", fan(n)}, {"layered random (width 64)", layered(n, 64)}};
  std::printf("%-28s %10s %10s %7s   (nodes=%u, best of %d, %d threads)\n", "shape", "strata ns", "tbb ns", "ratio", n,
              reps, threads);
  for (auto& c : cases) {
    const double s = run_strata(ex, c.g, reps);
    const double t = run_tbb(arena, c.g, reps);
    std::printf("%-28s %10.1f %10.1f %7.2f\n", c.name, s, t, s / t);
  }
  return 0;
}
