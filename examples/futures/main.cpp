// Futures and the application's own tasks on one oneTBB arena.
//
// The engine's executor runs in the application's arena (EngineOptions::arena),
// so collective fragments, then() continuations and the application's
// task_group share the same worker threads. Four allreduces are in flight at
// once; each has a then() continuation that reduces its result to a checksum;
// when_all joins them while a task graph of the application computes on the side.
//   strata-run -n 2 -- ./futures   ->  "futures: 4 allreduces, 4 continuations, app tasks on one arena: OK"
#include <cstdio>
#include <functional>
#include <numeric>
#include <vector>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_reduce.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <strata/strata.hpp>

int main() {
  tbb::task_arena arena;  // the application's arena (declared first: it must outlive the engine)
  strata::EngineOptions opts = strata::EngineOptions::from_environment();
  opts.arena = &arena;
  strata::Engine engine(opts);
  strata::Communicator& world = engine.world();
  const int n = world.size();
  const double ranks_sum = n * (n + 1) / 2.0;  // sum over ranks of (rank + 1)

  constexpr int kCalls = 4;
  constexpr std::size_t kLen = 1 << 15;
  std::vector<std::vector<double>> in(kCalls), out(kCalls, std::vector<double>(kLen));
  std::vector<strata::Future<double>> checksums;
  for (int k = 0; k < kCalls; ++k) {
    in[k].assign(kLen, (world.rank() + 1.0) * (k + 1));
    // The continuation runs as a task in `arena` once this allreduce is done.
    checksums.push_back(
        world.allreduce(in[k].data(), out[k].data(), kLen, strata::Datatype::float64, strata::Op::sum).then([&out, k] {
          return std::accumulate(out[k].begin(), out[k].end(), 0.0);
        }));
  }

  // Meanwhile: the application's own task graph, on the same arena.
  double app = 0;
  arena.execute([&] {
    tbb::task_group g;
    double a = 0, b = 0;
    g.run([&] {
      a = tbb::parallel_reduce(
          tbb::blocked_range<int>(1, 1001), 0.0,
          [](const tbb::blocked_range<int>& r, double s) {
            for (int i = r.begin(); i < r.end(); ++i) s += i;
            return s;
          },
          std::plus<double>());
    });
    g.run([&] { b = 1.0; });
    g.wait();
    app = a + b;
  });

  const std::vector<double> got = strata::when_all(std::move(checksums)).get();
  bool ok = app == 500501.0;
  for (int k = 0; k < kCalls; ++k) ok = ok && got[k] == kLen * (k + 1) * ranks_sum;
  if (!ok) {
    std::fprintf(stderr, "rank %d: wrong result (app %g, first checksum %g)\n", world.rank(), app, got[0]);
    return 1;
  }
  world.barrier().get();
  if (world.rank() == 0)
    std::printf("futures: %d allreduces, %d continuations, app tasks on one arena: OK\n", kCalls, kCalls);
  return 0;
}
