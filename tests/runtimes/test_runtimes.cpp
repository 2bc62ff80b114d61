// The runtime adapters over real processes: starpu_rank (strata/starpu.hpp)
// and openmp_rank (strata/openmp.hpp) under strata-run, with 2 and 3 ranks on
// one host and 4 ranks across 2 virtual hosts. Each rank verifies every
// collective's result; strata-run --timeout bounds a hang (e.g. libgomp's, in
// a form the adapter's documentation forbids).
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <ostream>
#include <string>

#include "../common/launch.hpp"

namespace {

// An adapter that was not built: a failure when its dependency is present
// here (the configure step missed it: re-run cmake), else a skip naming it.
void require_adapter(bool built, bool dependency_present, const std::string& what, const std::string& how) {
  if (built) return;
  if (dependency_present) FAIL() << what << " is installed but its strata adapter was not built: re-run cmake";
  GTEST_SKIP() << what << " is not installed (" << how << ")";
}

bool starpu_installed() { return std::system("pkg-config --exists starpu-1.3 >/dev/null 2>&1") == 0; }

// Under ASan (the CI's sanitizer stage): leaks that StarPU's hwloc plugin keeps are reported from a
// frame without a frame pointer ("<unknown module>") unless LeakSanitizer unwinds slowly; with
// fast_unwind_on_malloc=0 they are attributed to libhwloc and suppressed by name, and leaks of the
// adapters' own code still fail the run.
std::string sanitizer_env() {
  const char* a = std::getenv("ASAN_OPTIONS");
  return a != nullptr && *a != 0 ? std::string(" ASAN_OPTIONS=") + a + ":fast_unwind_on_malloc=0" : std::string();
}

struct Case {
  const char* launcher;
  const char* args;
};
void PrintTo(const Case& c, std::ostream* os) { *os << "strata-run " << c.launcher << " -- " << c.args; }

std::string name_of(const ::testing::TestParamInfo<Case>& pi) {
  std::string name = std::to_string(pi.index) + "_" + pi.param.launcher + "_" + pi.param.args;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

class StarpuAdapter : public ::testing::TestWithParam<Case> {};

TEST_P(StarpuAdapter, CollectivesAsTasksVerified) {
  require_adapter(STRATA_HAVE_STARPU_ADAPTER, starpu_installed(), "StarPU 1.3 (pkg-config starpu-1.3)",
                  "scripts/setup.sh installs libstarpu-dev");
  if (HasFatalFailure() || IsSkipped()) return;
  std::string out;
  const int rc = launch::run("starpu_rank", 240, "STARPU_SILENT=1 STARPU_WORKERS_NOBIND=1" + sanitizer_env(),
                             GetParam().launcher, GetParam().args, &out);
  EXPECT_EQ(rc, 0) << out;
  const int ranks = std::atoi(std::string(GetParam().launcher).substr(3).c_str());
  EXPECT_EQ(launch::count(out, "starpu_rank: OK"), ranks) << out;
}

INSTANTIATE_TEST_SUITE_P(Ranks, StarpuAdapter,
                         ::testing::Values(Case{"-n 2", "--rounds 20"}, Case{"-n 3", "--rounds 10"},
                                           Case{"-n 4 --hosts 2", "--rounds 10"}),
                         name_of);

class OpenmpAdapter : public ::testing::TestWithParam<Case> {};

TEST_P(OpenmpAdapter, DetachedTasksVerified) {
  require_adapter(STRATA_HAVE_OPENMP_ADAPTER, STRATA_OPENMP_EXPECTED, "OpenMP (GCC's libgomp)",
                  "the C++ compiler has no OpenMP");
  if (HasFatalFailure() || IsSkipped()) return;
  std::string out;
  const int rc = launch::run("openmp_rank", 240, "OMP_WAIT_POLICY=passive", GetParam().launcher, GetParam().args, &out);
  EXPECT_EQ(rc, 0) << out;
  const int ranks = std::atoi(std::string(GetParam().launcher).substr(3).c_str());
  EXPECT_EQ(launch::count(out, "openmp_rank: OK"), ranks) << out;
}

INSTANTIATE_TEST_SUITE_P(Forms, OpenmpAdapter,
                         ::testing::Values(Case{"-n 2", "--form taskgroup"}, Case{"-n 2", "--form taskwait"},
                                           Case{"-n 2", "--form depend"}, Case{"-n 3", "--form taskgroup --rounds 15"},
                                           Case{"-n 4 --hosts 2", "--form taskgroup --rounds 10"},
                                           Case{"-n 4 --hosts 2", "--form depend --rounds 10"}),
                         name_of);

}  // namespace
