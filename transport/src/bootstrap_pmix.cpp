// PMIx bootstrap: for processes started by mpirun / prterun / srun --mpi=pmix.
//
// allgather = PMIx_Put(key of the round) + Commit + Fence(collect data) + Get
// from every rank; barrier = Fence without data. Host identity comes from an
// allgather of host names at start-up (PMIX_NODEID is not provided by every
// server, e.g. Open MPI 4.1's), which also yields local_rank/local_size; the
// job secret is drawn by rank 0 and shared in the same exchange.
#if STRATA_HAVE_PMIX

#include <pmix.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "strata/detail/env.hpp"
#include "strata/detail/rendezvous.hpp"
#include "strata/transport/bootstrap.hpp"

namespace strata::detail {
namespace {

/// Keys must never repeat within a process (a later Get could return a value
/// cached from an earlier bootstrap), so rounds are numbered process-wide.
std::atomic<std::uint64_t> g_round{0};

class PmixBootstrap final : public Bootstrap {
 public:
  PmixBootstrap() {
    pmix_status_t rc = PMIx_Init(&me_, nullptr, 0);
    if (rc != PMIX_SUCCESS)
      throw Error(Errc::bootstrap_error, std::string("PMIx_Init failed: ") + PMIx_Error_string(rc) +
                                             " (PMIX_RANK is set, but the PMIx server is unreachable)");
    initialized_ = true;
    try {
      setup();
    } catch (...) {
      PMIx_Finalize(nullptr, 0);
      throw;
    }
  }

  ~PmixBootstrap() override {
    if (initialized_) PMIx_Finalize(nullptr, 0);
  }

  PmixBootstrap(const PmixBootstrap&) = delete;
  PmixBootstrap& operator=(const PmixBootstrap&) = delete;

  const JobInfo& job() const noexcept override { return job_; }

  /// The PMIx server of a rank is its parent (mpirun / prterun for the
  /// local ranks, slurmstepd under srun). When it dies the rank is reparented.
  bool launcher_gone() const override { return parent_ > 1 && ::getppid() != parent_; }

  std::vector<std::vector<std::byte>> allgather(const void* data, std::size_t len) override {
    if (data == nullptr && len > 0)
      throw Error(Errc::invalid_argument, "bootstrap allgather on rank " + std::to_string(job_.rank) +
                                              ": data is null but len is " + std::to_string(len));
    const std::string key = "strata.ag." + std::to_string(g_round.fetch_add(1));
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    // PMIx copies the value; the cast only satisfies its non-const field.
    v.data.bo.bytes = const_cast<char*>(static_cast<const char*>(data));
    v.data.bo.size = len;
    check(PMIx_Put(PMIX_GLOBAL, key.c_str(), &v), "PMIx_Put", "allgather");
    check(PMIx_Commit(), "PMIx_Commit", "allgather");
    fence(true, "allgather");
    std::vector<std::vector<std::byte>> out(static_cast<std::size_t>(job_.size));
    for (int r = 0; r < job_.size; ++r) {
      pmix_proc_t peer;
      PMIX_PROC_CONSTRUCT(&peer);
      PMIX_LOAD_PROCID(&peer, me_.nspace, static_cast<pmix_rank_t>(r));
      pmix_value_t* got = nullptr;
      check(PMIx_Get(&peer, key.c_str(), nullptr, 0, &got), "PMIx_Get", "allgather");
      if (got->type != PMIX_BYTE_OBJECT) {
        PMIX_VALUE_RELEASE(got);
        throw Error(Errc::bootstrap_error, "bootstrap allgather on rank " + std::to_string(job_.rank) + ": rank " +
                                               std::to_string(r) + "'s value has an unexpected PMIx type");
      }
      const auto* p = reinterpret_cast<const std::byte*>(got->data.bo.bytes);
      out[static_cast<std::size_t>(r)].assign(p, p + got->data.bo.size);
      PMIX_VALUE_RELEASE(got);
    }
    return out;
  }

  void barrier() override { fence(false, "barrier"); }

 private:
  void check(pmix_status_t rc, const char* call, const char* what) const {
    if (rc != PMIX_SUCCESS)
      throw Error(Errc::bootstrap_error, std::string("bootstrap ") + what + " on rank " + std::to_string(job_.rank) +
                                             ": " + call + " failed: " + PMIx_Error_string(rc));
  }

  void fence(bool collect, const char* what) {
    pmix_proc_t all;
    PMIX_PROC_CONSTRUCT(&all);
    PMIX_LOAD_PROCID(&all, me_.nspace, PMIX_RANK_WILDCARD);
    pmix_info_t info;
    PMIX_INFO_CONSTRUCT(&info);
    bool flag = true;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &flag, PMIX_BOOL);
    const pmix_status_t rc = PMIx_Fence(&all, 1, collect ? &info : nullptr, collect ? 1 : 0);
    PMIX_INFO_DESTRUCT(&info);
    check(rc, "PMIx_Fence", what);
  }

  void setup() {
    job_.launcher = "pmix";
    job_.rank = static_cast<int>(me_.rank);
    pmix_proc_t wild;
    PMIX_PROC_CONSTRUCT(&wild);
    PMIX_LOAD_PROCID(&wild, me_.nspace, PMIX_RANK_WILDCARD);
    pmix_value_t* val = nullptr;
    check(PMIx_Get(&wild, PMIX_JOB_SIZE, nullptr, 0, &val), "PMIx_Get(PMIX_JOB_SIZE)", "start-up");
    job_.size = static_cast<int>(val->data.uint32);
    PMIX_VALUE_RELEASE(val);
    if (const char* t = strata::detail::env::get(rdv::env::kTopology)) job_.topology = t;
    job_.bind = "external";

    // One exchange: host name of every rank, plus rank 0's secret and job id.
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    std::vector<std::byte> mine(rdv::kSecretSize + 8);
    if (job_.rank == 0) rdv::random_bytes(mine.data(), mine.size());
    const std::size_t hlen = std::strlen(host);
    mine.insert(mine.end(), reinterpret_cast<const std::byte*>(host), reinterpret_cast<const std::byte*>(host) + hlen);
    const auto all = allgather(mine.data(), mine.size());
    std::memcpy(job_.secret.data(), all[0].data(), rdv::kSecretSize);
    rdv::Secret id{};
    std::memcpy(id.data(), all[0].data() + rdv::kSecretSize, 8);
    job_.job_id = "pmix-" + rdv::secret_to_hex(id).substr(0, 16);
    std::map<std::string, int> host_ids;
    std::vector<int> host_of(all.size());
    for (std::size_t r = 0; r < all.size(); ++r) {
      const auto& b = all[r];
      const std::string name(reinterpret_cast<const char*>(b.data()) + rdv::kSecretSize + 8,
                             b.size() - rdv::kSecretSize - 8);
      const auto it = host_ids.emplace(name, static_cast<int>(host_ids.size())).first;
      host_of[r] = it->second;
    }
    job_.nhosts = static_cast<int>(host_ids.size());
    job_.host = host_of[static_cast<std::size_t>(job_.rank)];
    job_.local_rank = 0;
    job_.local_size = 0;
    for (std::size_t r = 0; r < all.size(); ++r) {
      if (host_of[r] != job_.host) continue;
      if (static_cast<int>(r) < job_.rank) ++job_.local_rank;
      ++job_.local_size;
    }
  }

  pmix_proc_t me_{};
  bool initialized_ = false;
  pid_t parent_ = ::getppid();  // the PMIx server that started this rank (see poll_dead_ranks)
  JobInfo job_;
};

}  // namespace

std::unique_ptr<Bootstrap> make_pmix_bootstrap() { return std::make_unique<PmixBootstrap>(); }

}  // namespace strata::detail

#endif  // STRATA_HAVE_PMIX
