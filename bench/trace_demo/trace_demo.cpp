// strata-trace-demo: shows fragments of concurrent collectives and application
// work sharing one executor. Per round, without waiting in between:
//   - a loose 512 KiB allreduce on the world communicator (a fragment pipeline);
//   - a loose alltoall of 64 KiB blocks on a second communicator, whose
//     CollOptions::on_block runs application work (a compute node) on every
//     block as soon as it landed;
//   - an application continuation (Future::then) on the allreduce's result;
// then waits for all of them and checks the results. Run it with STRATA_TRACE
// set and render the merged trace (bench/scripts/trace_png.py).
//
//   STRATA_TRACE=/tmp/il strata-run -n 2 -- strata-trace-demo [--rounds R]
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "strata/strata.hpp"
#include "strata_cli.hpp"

namespace {
// Application work on a block: a few passes of arithmetic over it (its result is checked).
double work(const float* p, std::size_t n) {
  double s = 0;
  for (int pass = 0; pass < 8; ++pass)
    for (std::size_t i = 0; i < n; ++i) s += std::sqrt(static_cast<double>(p[i]) + pass);
  return s;
}
}  // namespace

int main(int argc, char** argv) {
  int rounds = 4;
  CLI::App app{
      "Loose collectives on two communicators and application work sharing one executor "
      "(STRATA_TRACE=PREFIX strata-run -n N -- strata-trace-demo)",
      "strata-trace-demo"};
  app.add_option("--rounds", rounds, "rounds of allreduce + alltoall + continuation (default 4)")
      ->check(strata::cli::integer(1, 1000));
  strata::cli::parse(app, argc, argv);
  try {
    strata::Engine engine;
    strata::Communicator& world = engine.world();
    strata::Communicator other = world.dup();
    const int n = world.size();
    const int me = world.rank();
    const std::size_t ar = 128 * 1024;  // floats: 512 KiB
    const std::size_t blk = 16 * 1024;  // floats per alltoall block: 64 KiB
    std::vector<float> x(ar, 1.0f + static_cast<float>(me)), y(ar);
    std::vector<float> s(blk * static_cast<std::size_t>(n)), r(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<float>(me * 1000 + static_cast<int>(i / blk));
    bool ok = true;
    for (int it = 0; it < rounds; ++it) {
      std::atomic<int> blocks{0};
      std::atomic<bool> bad{false};
      strata::CollOptions o;
      o.on_block = [&](int src, void* b, std::size_t bytes) {
        const auto* f = static_cast<const float*>(b);
        if (f[0] != static_cast<float>(src * 1000 + me) || work(f, bytes / sizeof(float)) <= 0) bad = true;
        blocks.fetch_add(1);
      };
      auto fa = world.allreduce(x.data(), y.data(), ar, strata::Datatype::float32, strata::Op::sum);
      auto fb = other.alltoall(s.data(), r.data(), blk, strata::Datatype::float32, o);
      std::atomic<double> checked{0};
      auto fc = std::move(fa).then([&] { checked = work(y.data(), ar / 4); });
      fb.get();
      fc.get();
      const float want = static_cast<float>(n * (n + 1)) / 2.0f;
      ok = ok && !bad && blocks.load() == n && y[0] == want && y[ar - 1] == want && checked.load() > 0;
    }
    std::printf("rank %d: %s (%d rounds)\n", me, ok ? "OK" : "FAILED", rounds);
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-trace-demo: %s\n", e.what());
    return 1;
  }
}
