// The smallest strata program: every rank adds its contribution, every rank gets the sum.
//   strata-run -n 2 -- ./allreduce     ->  "allreduce: 2 ranks, sum 3 on every rank: OK"
#include <cstdio>
#include <vector>

#include <strata/strata.hpp>

int main() {
  strata::Engine engine;  // bootstraps from strata-run (or PMIx, or runs as one rank)
  strata::Communicator& world = engine.world();
  const int n = world.size();

  std::vector<double> x(1000, world.rank() + 1.0), y(x.size());
  strata::Future<void> f = world.allreduce(x.data(), y.data(), x.size(), strata::Datatype::float64, strata::Op::sum);
  f.get();  // nonblocking call, wait here; throws strata::Error on failure

  const double expect = n * (n + 1) / 2.0;
  for (double v : y)
    if (v != expect) {
      std::fprintf(stderr, "rank %d: got %g, expected %g\n", world.rank(), v, expect);
      return 1;
    }
  if (world.rank() == 0) std::printf("allreduce: %d ranks, sum %g on every rank: OK\n", n, expect);
  return 0;
}
