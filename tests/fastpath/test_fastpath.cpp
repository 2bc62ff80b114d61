// Small calls over real processes: fast_rank under strata-run (hard timeout)
// for several rank counts. They run as plans of DAG nodes (mapped plans on one
// host; the small-message fast path that ran them beside the executor is
// retired): waiters that sleep at once (so late members must nudge them),
// inline progress, mapped plans switched off (window plans), two virtual
// hosts, the log and the trace that show which plans ran, and a member that
// dies. Then shared buffers (single-copy plans through the mappings).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "../common/launch.hpp"

namespace {

int run(const std::string& env, const std::string& launcher_args, const std::string& rank_args, std::string* out) {
  return launch::run("fast_rank", 120, env, launcher_args, rank_args, out);
}

using launch::count;

struct Case {
  const char* name;
  const char* env;
  const char* launcher;
};

class FastPath : public ::testing::TestWithParam<Case> {};

TEST_P(FastPath, MatchesSequentialReference) {
  std::string out;
  const int rc = run(GetParam().env, GetParam().launcher, "", &out);
  EXPECT_EQ(rc, 0) << out;
  const int n = GetParam().launcher[3] - '0';
  EXPECT_EQ(count(out, "fast_rank: OK"), n) << out;
}

INSTANTIATE_TEST_SUITE_P(Matrix, FastPath,
                         ::testing::Values(Case{"n1", "", "-n 1"}, Case{"n2", "", "-n 2"}, Case{"n3", "", "-n 3"},
                                           Case{"n5", "", "-n 5"},
                                           Case{"n2_sleeping_waiters", "STRATA_PROGRESS_WAIT_SPIN=0", "-n 2"},
                                           // Mapped plans whose waiters sleep at once: flag waits must ask for nudges
                                           // as the waiters park (Executor::park), or calls stall until a timeout.
                                           Case{"n3_sleeping_waiters", "STRATA_PROGRESS_WAIT_SPIN=0", "-n 3"},
                                           Case{"n2_inline", "STRATA_PROGRESS_THREADS=0", "-n 2"},
                                           Case{"n3_inline", "STRATA_PROGRESS_THREADS=0", "-n 3"},
                                           Case{"n3_unmapped", "STRATA_MAPPED=off", "-n 3"},
                                           Case{"n4_hosts2", "", "-n 4 --hosts 2"}),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// The small one-host calls run as mapped plans (DAG nodes run by the executor:
// collectives/src/compile_mapped.cpp), every kind; none do with
// STRATA_MAPPED=off (window plans) or across two hosts (libfabric).
TEST(MappedPlansLog, SmallOneHostCallsRunAsMappedPlans) {
  std::string mapped, unmapped, hosts;
  EXPECT_EQ(run("STRATA_LOG_LEVEL=info", "-n 3", "", &mapped), 0) << mapped;
  EXPECT_GT(count(mapped, "algorithm mapped"), 10) << mapped;
  EXPECT_EQ(count(mapped, "fast path"), 0) << mapped;
  for (const char* kind : {"barrier", "broadcast", "reduce", "allreduce", "gather", "scatter", "allgather", "alltoall",
                           "reduce_scatter_block"}) {
    bool seen = false;
    std::istringstream lines(mapped);
    for (std::string line; std::getline(lines, line) && !seen;)
      seen = line.find(std::string("plan: ") + kind + " of ") != std::string::npos &&
             line.find("algorithm mapped") != std::string::npos;
    EXPECT_TRUE(seen) << kind;
  }
  EXPECT_EQ(run("STRATA_LOG_LEVEL=info STRATA_MAPPED=off", "-n 3", "", &unmapped), 0) << unmapped;
  EXPECT_EQ(count(unmapped, "algorithm mapped"), 0) << unmapped;
  EXPECT_EQ(run("STRATA_LOG_LEVEL=info", "-n 2 --hosts 2", "", &hosts), 0) << hosts;
  EXPECT_EQ(count(hosts, "on comm 0 (2 ranks): algorithm mapped"), 0) << hosts;
}

// A call that cannot be compiled after it took its sequence number (algorithm
// "mapped" on blocks no mapped slot holds; "single-copy" across hosts) throws
// on every member, and the
// calls after it, one of which reuses its window slot, complete (regression:
// they hung). fast_rank --compile-error bounds every wait (exit 4 on a stall).
TEST(MappedPlansCompileError, TheNextCallsOnTheFailedCallsSlotComplete) {
  struct Run {
    const char* ranks;
    const char* args;
    int n;
  };
  for (const Run& r : {Run{"-n 2", "--compile-error mapped", 2}, Run{"-n 3", "--compile-error mapped", 3},
                       // Across two hosts (libfabric): single copy is unavailable there.
                       Run{"-n 2 --hosts 2", "--compile-error single-copy", 2}}) {
    std::string out;
    EXPECT_EQ(run("", r.ranks, r.args, &out), 0) << r.ranks << "\n" << out;
    EXPECT_EQ(count(out, "fast_rank: compile error survived"), r.n) << out;
  }
}

// STRATA_TRACE shows the small calls as DAG nodes (regression: the retired
// fast path's calls bypassed the executor and showed as one "fast path" span
// each): the mapped plans' flag nodes in both ranks' files, no fast-path event.
TEST(MappedPlansTrace, SmallCallsAreDagNodesInTheTrace) {
  const std::string prefix = ::testing::TempDir() + "strata_small_trace_" + std::to_string(::getpid());
  std::string out;
  ASSERT_EQ(run("STRATA_TRACE=" + prefix, "-n 2", "", &out), 0) << out;
  for (int r = 0; r < 2; ++r) {
    const std::string file = prefix + "." + std::to_string(r) + ".json";
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string t = ss.str();
    EXPECT_GT(count(t, "flag_wait"), 100) << file;
    EXPECT_GT(count(t, "flag_set"), 100) << file;
    EXPECT_EQ(count(t, "fast path"), 0) << file;
    std::remove(file.c_str());
  }
}

class FastPathPeerDeath : public ::testing::TestWithParam<Case> {};

// The last rank exits with status 3 after a working round: every survivor's
// pending fast allreduce fails with peer_dead, and so does its next call.
TEST_P(FastPathPeerDeath, PendingCallsFailOnEverySurvivor) {
  std::string out;
  const launch::DeathGate gate;
  ASSERT_TRUE(gate.ok());
  const int rc = run(gate.env() + "STRATA_TIMEOUT=5000 " + GetParam().env,
                     std::string(GetParam().launcher) + " --on-failure continue", "--death", &out);
  EXPECT_EQ(rc, 3) << out;  // the victim's status
  const int n = GetParam().launcher[3] - '0';
  EXPECT_EQ(count(out, "SURVIVOR rank"), n - 1) << out;
  EXPECT_EQ(count(out, "FAILED"), 0) << out;
}

INSTANTIATE_TEST_SUITE_P(Matrix, FastPathPeerDeath,
                         ::testing::Values(Case{"n2", "", "-n 2"}, Case{"n3", "", "-n 3"},
                                           Case{"n3_sleeping_waiters", "STRATA_PROGRESS_WAIT_SPIN=0", "-n 3"}),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// Shared buffers (Engine::allocate + CollOptions::shared_buffers): the
// single-copy plans for large calls, with private buffers on one rank (CMA),
// every rank count, sleeping waiters, inline progress, mapped plans or single
// copy off and two virtual hosts (plans: the flag is then ignored).
int run_shared(const std::string& env, const std::string& launcher_args, const std::string& rank_args,
               std::string* out) {
  return launch::run("shared_rank", 150, env, launcher_args, rank_args, out);
}

class SharedBuffers : public ::testing::TestWithParam<Case> {};

TEST_P(SharedBuffers, MatchesSequentialReference) {
  std::string out;
  const std::string launcher = GetParam().launcher;
  const bool one_host = launcher.find("--hosts") == std::string::npos;
  const int rc = run_shared(GetParam().env, launcher, one_host ? "--one-host" : "", &out);
  EXPECT_EQ(rc, 0) << out;
  const int n = launcher[3] - '0';
  EXPECT_EQ(count(out, "shared_rank: OK"), n) << out;
}

INSTANTIATE_TEST_SUITE_P(Matrix, SharedBuffers,
                         ::testing::Values(Case{"n1", "", "-n 1"}, Case{"n2", "", "-n 2"}, Case{"n3", "", "-n 3"},
                                           Case{"n5", "", "-n 5"},
                                           Case{"n2_sleeping_waiters", "STRATA_PROGRESS_WAIT_SPIN=0", "-n 2"},
                                           Case{"n3_inline", "STRATA_PROGRESS_THREADS=0", "-n 3"},
                                           Case{"n2_unmapped", "STRATA_MAPPED=off", "-n 2"},
                                           Case{"n2_no_single_copy", "STRATA_SINGLE_COPY=off", "-n 2"},
                                           Case{"n4_hosts2", "", "-n 4 --hosts 2"}),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// The log names the single-copy plans on one host (publish / read_peer nodes
// reading through the mappings, docs/algorithms.md "Single copy"), never
// across hosts.
TEST(SharedBuffersLog, ShowsWhichPathRan) {
  std::string on, hosts;
  EXPECT_EQ(run_shared("STRATA_LOG_LEVEL=debug", "-n 2", "--one-host", &on), 0) << on;
  EXPECT_EQ(count(on, "fast path"), 0) << on;
  for (const char* kind : {"broadcast", "scatter", "gather", "allgather", "alltoall", "reduce_scatter_block"})
    EXPECT_GT(
        count(on, std::string("plan: ") + kind + " of 300007 elements on comm 0 (2 ranks): algorithm single-copy"), 0)
        << kind << "\n"
        << on;
  EXPECT_EQ(run_shared("STRATA_LOG_LEVEL=debug", "-n 2 --hosts 2", "", &hosts), 0) << hosts;
  EXPECT_EQ(count(hosts, "shared buffers"), 0) << hosts;
}

class SharedBuffersPeerDeath : public ::testing::TestWithParam<Case> {};

// The last rank exits after a working round: rank 0's broadcast (its reader
// is gone) and every survivor's allgather fail with peer_dead.
TEST_P(SharedBuffersPeerDeath, PendingCallsFailOnEverySurvivor) {
  std::string out;
  const launch::DeathGate gate;
  ASSERT_TRUE(gate.ok());
  const int rc = run_shared(gate.env() + "STRATA_TIMEOUT=5000 " + GetParam().env,
                            std::string(GetParam().launcher) + " --on-failure continue", "--death", &out);
  EXPECT_EQ(rc, 3) << out;
  const int n = GetParam().launcher[3] - '0';
  EXPECT_EQ(count(out, "SURVIVOR rank"), n - 1) << out;
  EXPECT_EQ(count(out, "FAILED"), 0) << out;
}

INSTANTIATE_TEST_SUITE_P(Matrix, SharedBuffersPeerDeath,
                         ::testing::Values(Case{"n2", "", "-n 2"}, Case{"n3", "", "-n 3"},
                                           Case{"n3_sleeping_waiters", "STRATA_PROGRESS_WAIT_SPIN=0", "-n 3"}),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
