// bootstrap_from_environment() and the single-rank fallback.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "strata/detail/env.hpp"
#include "strata/detail/log.hpp"
#include "strata/detail/rendezvous.hpp"
#include "strata/transport/bootstrap.hpp"

namespace strata {
namespace detail {
// Defined in bootstrap_rendezvous.cpp / bootstrap_pmix.cpp.
std::unique_ptr<Bootstrap> make_rendezvous_bootstrap();
#if STRATA_HAVE_PMIX
std::unique_ptr<Bootstrap> make_pmix_bootstrap();
#endif
}  // namespace detail

namespace {

class SingletonBootstrap final : public Bootstrap {
 public:
  SingletonBootstrap() {
    job_.launcher = "singleton";
    job_.bind = "none";
    detail::rdv::random_bytes(job_.secret.data(), job_.secret.size());
    job_.job_id = "single-" + detail::rdv::random_hex(8);
    if (const char* t = strata::detail::env::get(detail::rdv::env::kTopology)) job_.topology = t;
  }
  const JobInfo& job() const noexcept override { return job_; }
  std::vector<std::vector<std::byte>> allgather(const void* data, std::size_t len) override {
    if (data == nullptr && len > 0)
      throw Error(Errc::invalid_argument,
                  "bootstrap allgather on rank 0: data is null but len is " + std::to_string(len));
    const auto* p = static_cast<const std::byte*>(data);
    return {std::vector<std::byte>(p, p + len)};
  }
  void barrier() override {}

 private:
  JobInfo job_;
};

bool env_set(const char* name) {
  if (std::strncmp(name, "STRATA_", 7) == 0) return strata::detail::env::get(name) != nullptr;
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

}  // namespace

std::unique_ptr<Bootstrap> bootstrap_from_environment() {
  if (env_set(detail::rdv::env::kRdv)) return detail::make_rendezvous_bootstrap();
  if (env_set("PMIX_RANK")) {
#if STRATA_HAVE_PMIX
    return detail::make_pmix_bootstrap();
#else
    throw Error(Errc::bootstrap_error,
                "this process was started by a PMIx launcher (PMIX_RANK is set) but strata was built without PMIx; "
                "install libpmix-dev and rebuild, or start it with strata-run -n N -- PROGRAM");
#endif
  }
  // A PMI-1/PMI-2 launch (MPICH's Hydra mpiexec, srun --mpi=pmi2) of several processes without PMIx: each
  // process would otherwise run as its own single-rank job, N singletons computing wrong results.
  if (const char* pmi_size = std::getenv("PMI_SIZE"); pmi_size != nullptr && std::atol(pmi_size) > 1)
    throw Error(Errc::bootstrap_error,
                std::string("this process was started by a PMI launcher with ") + pmi_size +
                    " processes (PMI_SIZE is set, PMIX_RANK is not), which strata cannot bootstrap from: start it "
                    "with `strata-run -n N [--hosts H] -- PROGRAM ARGS...` or under a PMIx launcher (Open MPI's "
                    "mpirun, prterun, srun --mpi=pmix)");
  const char* req = strata::detail::env::get(detail::rdv::env::kRequireLauncher);
  if (req != nullptr && std::strcmp(req, "1") == 0)
    throw Error(Errc::bootstrap_error,
                "no launcher found (STRATA_RDV and PMIX_RANK are unset) and STRATA_REQUIRE_LAUNCHER=1: start the "
                "program with `strata-run -n N [--hosts H] -- PROGRAM ARGS...` or under a PMIx launcher (mpirun, "
                "prterun, srun --mpi=pmix)");
  strata::detail::logger().warn(
      "no launcher found (STRATA_RDV and PMIX_RANK unset); running as a single rank. Use `strata-run -n N -- "
      "PROGRAM` for N ranks (STRATA_REQUIRE_LAUNCHER=1 makes this an error).");
  return std::make_unique<SingletonBootstrap>();
}

}  // namespace strata
