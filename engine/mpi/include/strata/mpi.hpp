// strata::mpi: strata inside an existing MPI job (the optional strata::mpi
// component, built when CMake finds an MPI; link strata::mpi).
//
// An MPI program creates its Engine from an MPI communicator instead of a
// strata launcher: the engine's start-up exchanges (endpoint addresses,
// hierarchy, window keys) become MPI_Allgather(v) calls and its barriers
// MPI_Barrier, on a private duplicate of the communicator. After that, strata
// moves data with its own transports (shared memory, libfabric), not through
// MPI, so MPI and strata calls can be interleaved freely in one program.
//
// @code
//   MPI_Init(&argc, &argv);
//   {
//     strata::Engine engine(strata::mpi::make_bootstrap(MPI_COMM_WORLD), strata::EngineOptions::from_environment());
//     strata::Communicator& world = engine.world();       // rank r of world == rank r of MPI_COMM_WORLD
//     world.allreduce(x, y, n, strata::Datatype::float64, strata::Op::sum).get();
//     MPI_Allreduce(MPI_IN_PLACE, z, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
//   }                                                       // the engine goes before MPI_Finalize
//   MPI_Finalize();
// @endcode
//
// Rules: MPI must be initialized before make_bootstrap() and finalized only
// after the Engine is destroyed (its destructor calls MPI_Barrier). The
// bootstrap calls MPI only inside the Engine's constructor and destructor
// (split, dup, windows and collectives use strata's own transports), so
// MPI_THREAD_SINGLE or MPI_THREAD_FUNNELED suffices when the main thread
// creates and destroys the engine; strata's progress threads never call MPI.
// Launch with the MPI's own launcher (mpirun / mpiexec / srun); strata-run is
// not needed. docs/embedding.md maps MPI calls to strata's.

#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "strata/transport/bootstrap.hpp"

namespace strata::mpi {

/// @brief A strata Bootstrap over an MPI communicator: allgather() is
/// MPI_Allgather of the lengths plus MPI_Allgatherv of the blobs, barrier() is
/// MPI_Barrier, both on a duplicate of the communicator (so they never match
/// the application's messages). Strata rank r is rank r of the communicator;
/// host identity comes from an exchange of host names (MPI processor names).
///
/// Throws strata::Error (Errc::invalid_argument) naming 'comm' when MPI is not
/// initialized (or already finalized) or @p comm is MPI_COMM_NULL, and
/// Errc::bootstrap_error naming the MPI call and the rank when an MPI call fails.
class Bootstrap final : public strata::Bootstrap {
 public:
  /// @brief Collective over @p comm (duplicates it).
  explicit Bootstrap(MPI_Comm comm);
  /// @brief Frees the duplicate (unless MPI was finalized already).
  ~Bootstrap() override;
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  /// @brief Job facts: rank and size of the communicator, host of this process, launcher "mpi".
  [[nodiscard]] const JobInfo& job() const noexcept override { return job_; }
  /// @brief Every rank's blob, indexed by communicator rank (lengths may differ).
  std::vector<std::vector<std::byte>> allgather(const void* data, std::size_t len) override;
  /// @brief MPI_Barrier on the duplicate.
  void barrier() override;
  /// @brief The private duplicate the bootstrap communicates on.
  [[nodiscard]] MPI_Comm comm() const noexcept { return comm_; }

 private:
  void check(int rc, const char* call, const char* what) const;
  MPI_Comm comm_ = MPI_COMM_NULL;
  JobInfo job_;
};

/// @brief A Bootstrap for Engine(std::unique_ptr<strata::Bootstrap>, EngineOptions) over @p comm
/// (collective over @p comm).
std::unique_ptr<strata::Bootstrap> make_bootstrap(MPI_Comm comm);

}  // namespace strata::mpi
