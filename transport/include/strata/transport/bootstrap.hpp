// Bootstrap: how ranks of one job find each other before any transport exists.
//
// A tiny interface (allgather of byte blobs, barrier) with three
// implementations: the strata-run launcher's rendezvous, PMIx (when started by
// mpirun/prterun/srun --mpi=pmix) and in-process (ranks as threads, tests).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/error.hpp"

namespace strata {

/// @brief What a rank knows about its job before any communication.
struct JobInfo {
  int rank = 0;                           ///< this rank, in [0, size)
  int size = 1;                           ///< number of ranks
  int host = 0;                           ///< (virtual) host id of this rank, in [0, nhosts)
  int nhosts = 1;                         ///< number of (virtual) hosts
  int local_rank = 0;                     ///< index of this rank among ranks of its host
  int local_size = 1;                     ///< number of ranks on this host
  std::string job_id;                     ///< unique per job; names shared-memory objects
  std::array<std::uint8_t, 32> secret{};  ///< per-job secret (authenticates rendezvous, names segments)
  std::string launcher;                   ///< "strata-run", "pmix" or "inprocess"
  std::string topology;                   ///< STRATA_TOPOLOGY / --topology (synthetic spec or XML path), may be empty
  std::string bind;                       ///< binding policy the launcher applied: core|numa|none
};

/// @brief Out-of-band collective operations among the ranks of one job.
///
/// Every rank must call allgather()/barrier() in the same order. Calls are
/// blocking and not thread-safe (one caller at a time per rank).
class Bootstrap {
 public:
  virtual ~Bootstrap() = default;

  /// Job facts (rank, size, host identity, secret).
  [[nodiscard]] virtual const JobInfo& job() const noexcept = 0;
  [[nodiscard]] int rank() const noexcept { return job().rank; }
  [[nodiscard]] int size() const noexcept { return job().size; }

  /// Every rank contributes @p len bytes (lengths may differ); returns the
  /// blobs of all ranks indexed by rank. Throws strata::Error on failure
  /// (launcher gone, peer died, timeout).
  virtual std::vector<std::vector<std::byte>> allgather(const void* data, std::size_t len) = 0;

  /// Returns once every rank has entered. Throws strata::Error on failure.
  virtual void barrier() = 0;

  /// A file descriptor that becomes readable when the launcher pushes an
  /// event (a rank died); -1 when the implementation has none.
  [[nodiscard]] virtual int event_fd() const noexcept { return -1; }

  /// Drains pushed events; returns ranks the launcher reported dead since the
  /// last call (non-blocking). Safe to call from a progress thread.
  virtual std::vector<int> poll_dead_ranks() { return {}; }

  /// Whether the launcher that serves this rank is gone (the PMIx server
  /// that started it died: the rank was reparented). Cheap; the engine's
  /// watchdog asks every 200 ms and then ends the process (exit status 70)
  /// instead of leaving it to wait forever. strata-run's ranks die with it
  /// (PR_SET_PDEATHSIG), so its bootstrap says false.
  [[nodiscard]] virtual bool launcher_gone() const { return false; }
};

/// @brief Picks the bootstrap this process was started with:
/// strata-run's rendezvous (STRATA_RDV set), else PMIx (PMIX_RANK set and
/// built with PMIx), else a single-rank job (size 1, like an MPI singleton;
/// a one-line notice goes to the log). With STRATA_REQUIRE_LAUNCHER=1 the last
/// case throws strata::Error explaining how to launch instead.
std::unique_ptr<Bootstrap> bootstrap_from_environment();

/// @brief Creates @p n connected in-process bootstraps (ranks as threads).
/// @p hosts virtual hosts, block placement.
std::vector<std::unique_ptr<Bootstrap>> make_inprocess_bootstraps(int n, int hosts = 1);

}  // namespace strata
