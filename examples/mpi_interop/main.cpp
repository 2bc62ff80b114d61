// strata inside an existing MPI program: the Engine bootstraps over
// MPI_COMM_WORLD (strata::mpi), then MPI and strata calls mix freely.
//   mpirun -n 2 ./mpi_interop   ->  "mpi_interop: 2 ranks, strata allreduce == MPI_Allreduce: OK"
// (Open MPI as root: mpirun --allow-run-as-root --oversubscribe -n 2 ./mpi_interop)
#include <cstdio>
#include <vector>

#include <strata/mpi.hpp>
#include <strata/strata.hpp>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  {
    // Collective over MPI_COMM_WORLD; strata rank r == MPI rank r.
    strata::Engine engine(strata::mpi::make_bootstrap(MPI_COMM_WORLD), strata::EngineOptions::from_environment());
    strata::Communicator& world = engine.world();

    std::vector<double> x(1 << 16, world.rank() + 1.0), by_strata(x.size()), by_mpi(x.size());
    strata::Future<void> f = world.allreduce(x.data(), by_strata.data(), x.size(), strata::Datatype::float64,
                                             strata::Op::sum);  // like MPI_Iallreduce
    MPI_Allreduce(x.data(), by_mpi.data(), static_cast<int>(x.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    f.get();
    int bad = by_strata != by_mpi, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any != 0) {
      std::fprintf(stderr, "rank %d: strata and MPI results differ\n", world.rank());
      rc = 1;
    } else if (world.rank() == 0) {
      std::printf("mpi_interop: %d ranks, strata allreduce == MPI_Allreduce: OK\n", world.size());
    }
  }  // the engine goes before MPI_Finalize (its destructor uses MPI_Barrier)
  MPI_Finalize();
  return rc;
}
