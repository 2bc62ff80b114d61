// strata inside an MPI job: the Engine bootstraps over MPI_COMM_WORLD
// (strata::mpi::Bootstrap), then strata and MPI collectives are interleaved in
// one program and checked against each other. Started by the MPI's own
// launcher (mpirun / mpiexec), never by strata-run. Prints
// "mpi_interop: N ranks, strata and MPI agree: OK" on rank 0.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "strata/mpi.hpp"
#include "strata/strata.hpp"

namespace {

int fail(int rank, const std::string& what) {
  std::fprintf(stderr, "mpi_interop rank %d: %s\n", rank, what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Before MPI_Init: a clear error naming the argument, not a crash.
  try {
    strata::mpi::Bootstrap early(MPI_COMM_WORLD);
    return fail(-1, "a bootstrap before MPI_Init did not throw");
  } catch (const strata::Error& e) {
    if (e.errc() != strata::Errc::invalid_argument || std::strstr(e.what(), "'comm'") == nullptr ||
        std::strstr(e.what(), "not initialized") == nullptr)
      return fail(-1, std::string("unexpected error before MPI_Init: ") + e.what());
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rc = 0;
  try {
    try {
      (void)strata::mpi::make_bootstrap(MPI_COMM_NULL);
      rc = fail(rank, "MPI_COMM_NULL did not throw");
    } catch (const strata::Error& e) {
      if (std::strstr(e.what(), "'comm' is MPI_COMM_NULL") == nullptr)
        rc = fail(rank, std::string("unexpected error for MPI_COMM_NULL: ") + e.what());
    }
    strata::Engine engine(strata::mpi::make_bootstrap(MPI_COMM_WORLD), strata::EngineOptions::from_environment());
    strata::Communicator& world = engine.world();
    if (world.rank() != rank || world.size() != size) return fail(rank, "strata and MPI ranks differ");

    for (int round = 0; round < 3 && rc == 0; ++round) {
      // Small (mapped plans) and large (window plans) sizes; strata and MPI in turn, MPI between strata's call and its
      // wait.
      for (std::size_t count : {std::size_t{7}, std::size_t{100000}}) {
        std::vector<std::int64_t> x(count), ys(count), ym(count);
        for (std::size_t i = 0; i < count; ++i) x[i] = (rank + 1) * 1000 + static_cast<std::int64_t>(i) + round;
        strata::Future<void> f = world.allreduce(x.data(), ys.data(), count, strata::Datatype::int64, strata::Op::sum);
        MPI_Allreduce(x.data(), ym.data(), static_cast<int>(count), MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        f.get();
        if (ys != ym) rc = fail(rank, "allreduce of " + std::to_string(count) + " differs between strata and MPI");
      }
      // Broadcast from a rotating root, then MPI_Bcast of the strata result back.
      const int root = round % size;
      std::vector<double> b(333, rank == root ? 2.5 + round : -1.0);
      world.broadcast(b.data(), b.size(), strata::Datatype::float64, root).get();
      std::vector<double> m(333, rank == root ? 2.5 + round : -1.0);
      MPI_Bcast(m.data(), static_cast<int>(m.size()), MPI_DOUBLE, root, MPI_COMM_WORLD);
      if (b != m) rc = fail(rank, "broadcast differs between strata and MPI");
    }
    // The same split on both sides: the same members in the same order.
    const int color = rank % 2, key = size - rank;
    strata::Communicator sub = world.split(color, key);
    MPI_Comm msub = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, color, key, &msub);
    int mrank = -1, msize = 0;
    MPI_Comm_rank(msub, &mrank);
    MPI_Comm_size(msub, &msize);
    if (sub.rank() != mrank || sub.size() != msize) rc = fail(rank, "split ranks differ between strata and MPI");
    std::vector<int> mine{rank}, sg(static_cast<std::size_t>(msize)), mg(static_cast<std::size_t>(msize));
    sub.allgather(mine.data(), 1, sg.data(), strata::Datatype::int32).get();
    MPI_Allgather(mine.data(), 1, MPI_INT, mg.data(), 1, MPI_INT, msub);
    if (sg != mg) rc = fail(rank, "allgather over the split differs between strata and MPI");
    MPI_Comm_free(&msub);
    int all = 0;
    MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (all == 0 && rank == 0) std::printf("mpi_interop: %d ranks, strata and MPI agree: OK\n", size);
    if (all != 0) rc = 1;
  } catch (const std::exception& e) {
    rc = fail(rank, std::string("exception: ") + e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return rc;
}
