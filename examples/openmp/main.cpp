// strata collectives as detached OpenMP tasks (strata/openmp.hpp): per block,
// a task fills it, a detached task allreduces it, a task checks the sum; the
// blocks' tasks overlap. Everything runs inside strata::openmp::taskgroup(),
// the form GCC 12's libgomp needs (docs/embedding.md, "OpenMP").
//   strata-run -n 2 -- ./openmp
#include <omp.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "strata/openmp.hpp"
#include "strata/strata.hpp"

namespace {
constexpr int kBlocks = 8;
constexpr std::size_t kCount = 4096;  // elements per block
}  // namespace

int main() {
  strata::Engine engine;
  const int me = engine.rank();
  const int n = engine.size();
  strata::openmp::Queue queue(engine.world());  // one per communicator

  std::vector<std::int64_t> data(kBlocks * kCount);
  std::vector<strata::Status> status(kBlocks);  // each collective's outcome
  std::atomic<int> bad{0};
  std::atomic<int>* wrong = &bad;  // tasks copy what they use (firstprivate): hand them pointers
  std::int64_t* v = data.data();

#pragma omp parallel num_threads(2)
#pragma omp single
  strata::openmp::taskgroup([&] {  // returns when every task below completed
    for (int b = 0; b < kBlocks; ++b) {
      std::int64_t* blk = v + static_cast<std::size_t>(b) * kCount;
#pragma omp task depend(out : blk[0]) firstprivate(blk, b)
      for (std::size_t k = 0; k < kCount; ++k) blk[k] = me + b + static_cast<std::int64_t>(k);

      // Take the ticket when creating the task (program order, the same on every rank);
      // start() posts the collectives in ticket order, whatever order the tasks run in.
      const strata::openmp::Queue::Ticket t = queue.ticket();
      strata::Status* st = &status[static_cast<std::size_t>(b)];
      omp_event_handle_t ev;
#pragma omp task depend(inout : blk[0]) detach(ev) firstprivate(blk, t, st)
      queue.start(
          t, ev,
          [blk](strata::Communicator& c) {  // capture by value: it may run after the task body returned
            return c.allreduce(strata::in_place, blk, kCount, strata::Datatype::int64, strata::Op::sum);
          },
          st);

#pragma omp task depend(in : blk[0]) firstprivate(blk, b, st, wrong)
      {
        for (std::size_t k = 0; k < kCount; ++k)
          if (blk[k] != static_cast<std::int64_t>(n) * (b + static_cast<std::int64_t>(k)) + n * (n - 1) / 2) ++*wrong;
        if (!st->is_ok()) ++*wrong;
      }
    }
  });
  if (bad != 0) {
    std::printf("openmp: rank %d: %d wrong results\n", me, bad.load());
    return 1;
  }
  std::printf("openmp: %d ranks, %d allreduces as detached tasks, sums verified: OK\n", n, kBlocks);
  return 0;
}
