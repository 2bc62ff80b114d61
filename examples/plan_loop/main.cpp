// A persistent collective: compiled and registered once, started every iteration
// (like MPI_Allreduce_init + MPI_Start).
//   strata-run -n 2 -- ./plan_loop   ->  "plan_loop: 100 starts of one persistent allreduce: OK"
#include <cstdint>
#include <cstdio>
#include <vector>

#include <strata/strata.hpp>

int main() {
  strata::Engine engine;
  strata::Communicator& world = engine.world();
  const std::int64_t n = world.size(), r = world.rank();
  constexpr int kIters = 100;
  std::vector<std::int64_t> x(4096), y(x.size());

  // Collective: every rank creates the same plan, in the same order.
  strata::Plan plan = world.plan_allreduce(x.data(), y.data(), x.size(), strata::Datatype::int64, strata::Op::sum);
  for (int it = 0; it < kIters; ++it) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = r + it + static_cast<std::int64_t>(i);
    plan.start().get();  // the same buffers every time; refill x only after the start completed
    const std::int64_t base = n * (n - 1) / 2 + n * it;
    for (std::size_t i = 0; i < y.size(); ++i)
      if (y[i] != base + n * static_cast<std::int64_t>(i)) {
        std::fprintf(stderr, "rank %lld, iteration %d: y[%zu] = %lld\n", static_cast<long long>(r), it, i,
                     static_cast<long long>(y[i]));
        return 1;
      }
  }
  if (r == 0) std::printf("plan_loop: %d starts of one persistent allreduce: OK\n", kIters);
  return 0;
}
