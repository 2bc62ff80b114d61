// strata::mpi::Bootstrap: the engine's start-up exchanges over an MPI communicator.
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>

#include "strata/detail/env.hpp"
#include "strata/detail/rendezvous.hpp"
#include "strata/mpi.hpp"

namespace strata::mpi {
namespace {

std::string mpi_error(int rc) {
  char buf[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(buf, static_cast<std::size_t>(len));
}

}  // namespace

Bootstrap::Bootstrap(MPI_Comm comm) {
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (inited == 0 || finalized != 0)
    throw Error(Errc::invalid_argument, std::string("strata::mpi::Bootstrap: argument 'comm': MPI is ") +
                                            (finalized != 0 ? "already finalized" : "not initialized") +
                                            " (create the Engine between MPI_Init and MPI_Finalize)");
  if (comm == MPI_COMM_NULL)
    throw Error(Errc::invalid_argument, "strata::mpi::Bootstrap: argument 'comm' is MPI_COMM_NULL");
  int rank = -1;
  MPI_Comm_rank(comm, &rank);
  job_.rank = rank;
  const int rc = MPI_Comm_dup(comm, &comm_);
  if (rc != MPI_SUCCESS)
    throw Error(Errc::bootstrap_error, "strata::mpi::Bootstrap on rank " + std::to_string(rank) +
                                           ": MPI_Comm_dup of argument 'comm' failed: " + mpi_error(rc));
  // Errors come back as return codes (thrown as strata::Error), not as MPI's default abort.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  try {
    int size = 0;
    check(MPI_Comm_size(comm_, &size), "MPI_Comm_size", "start-up");
    job_.size = size;
    job_.launcher = "mpi";
    job_.bind = "external";
    if (const char* t = strata::detail::env::get(detail::rdv::env::kTopology)) job_.topology = t;

    // One exchange: every rank's host name, plus rank 0's secret and job id.
    char host[MPI_MAX_PROCESSOR_NAME] = {};
    int hlen = 0;
    check(MPI_Get_processor_name(host, &hlen), "MPI_Get_processor_name", "start-up");
    constexpr std::size_t kHead = detail::rdv::kSecretSize + 8;
    std::vector<std::byte> mine(kHead);
    if (rank == 0) {
      std::random_device rd;
      for (auto& b : mine) b = static_cast<std::byte>(rd() & 0xFFu);
    }
    mine.insert(mine.end(), reinterpret_cast<const std::byte*>(host), reinterpret_cast<const std::byte*>(host) + hlen);
    const auto all = allgather(mine.data(), mine.size());
    if (all[0].size() < kHead)
      throw Error(Errc::bootstrap_error, "strata::mpi::Bootstrap on rank " + std::to_string(rank) +
                                             ": rank 0 sent a malformed start-up record");
    std::memcpy(job_.secret.data(), all[0].data(), detail::rdv::kSecretSize);
    detail::rdv::Secret id{};
    std::memcpy(id.data(), all[0].data() + detail::rdv::kSecretSize, 8);
    job_.job_id = "mpi-" + detail::rdv::secret_to_hex(id).substr(0, 16);
    std::map<std::string, int> host_ids;
    std::vector<int> host_of(all.size());
    for (std::size_t r = 0; r < all.size(); ++r) {
      const auto& b = all[r];
      const std::string name(reinterpret_cast<const char*>(b.data()) + kHead, b.size() - kHead);
      host_of[r] = host_ids.emplace(name, static_cast<int>(host_ids.size())).first->second;
    }
    job_.nhosts = static_cast<int>(host_ids.size());
    job_.host = host_of[static_cast<std::size_t>(rank)];
    job_.local_rank = 0;
    job_.local_size = 0;
    for (std::size_t r = 0; r < all.size(); ++r) {
      if (host_of[r] != job_.host) continue;
      if (static_cast<int>(r) < rank) ++job_.local_rank;
      ++job_.local_size;
    }
  } catch (...) {
    MPI_Comm_free(&comm_);
    throw;
  }
}

Bootstrap::~Bootstrap() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized == 0 && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void Bootstrap::check(int rc, const char* call, const char* what) const {
  if (rc != MPI_SUCCESS)
    throw Error(Errc::bootstrap_error, std::string("strata::mpi::Bootstrap ") + what + " on rank " +
                                           std::to_string(job_.rank) + ": " + call + " failed: " + mpi_error(rc));
}

std::vector<std::vector<std::byte>> Bootstrap::allgather(const void* data, std::size_t len) {
  if (data == nullptr && len > 0)
    throw Error(Errc::invalid_argument, "strata::mpi::Bootstrap allgather on rank " + std::to_string(job_.rank) +
                                            ": argument 'data' is null but 'len' is " + std::to_string(len));
  const std::size_t n = static_cast<std::size_t>(job_.size);
  const std::uint64_t mine = len;
  std::vector<std::uint64_t> lens(n);
  check(MPI_Allgather(&mine, 1, MPI_UINT64_T, lens.data(), 1, MPI_UINT64_T, comm_), "MPI_Allgather", "allgather");
  std::vector<int> counts(n), displs(n);
  std::uint64_t total = 0;
  for (std::size_t r = 0; r < n; ++r) {
    if (lens[r] > static_cast<std::uint64_t>(INT_MAX) || total + lens[r] > static_cast<std::uint64_t>(INT_MAX))
      throw Error(Errc::bootstrap_error, "strata::mpi::Bootstrap allgather on rank " + std::to_string(job_.rank) +
                                             ": the blobs exceed 2 GiB in total (rank " + std::to_string(r) + ")");
    counts[r] = static_cast<int>(lens[r]);
    displs[r] = static_cast<int>(total);
    total += lens[r];
  }
  std::vector<std::byte> flat(total);
  std::byte dummy{};
  check(MPI_Allgatherv(len > 0 ? data : &dummy, static_cast<int>(len), MPI_BYTE, total > 0 ? flat.data() : &dummy,
                       counts.data(), displs.data(), MPI_BYTE, comm_),
        "MPI_Allgatherv", "allgather");
  std::vector<std::vector<std::byte>> out(n);
  for (std::size_t r = 0; r < n; ++r) out[r].assign(flat.begin() + displs[r], flat.begin() + displs[r] + counts[r]);
  return out;
}

void Bootstrap::barrier() { check(MPI_Barrier(comm_), "MPI_Barrier", "barrier"); }

std::unique_ptr<strata::Bootstrap> make_bootstrap(MPI_Comm comm) { return std::make_unique<Bootstrap>(comm); }

}  // namespace strata::mpi
