// The small-message calls over real processes: fast_rank under strata-run
// (hard timeout) for several rank counts. By default they run as plans (mapped
// plans on one host: STRATA_FASTPATH_BYTES defaults to 0); the fast path's ring
// entries are opt-in (STRATA_FASTPATH_BYTES > 0, or a tuning table) and tested
// here with every variant: a smaller size bound, waiters that sleep at once
// (so late members must nudge them), inline progress, the path switched off,
// two virtual hosts (no fast path: plans), the debug log that shows which path
// ran, and a member that dies.
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

INSTANTIATE_TEST_SUITE_P(
    Matrix, FastPath,
    ::testing::Values(
        Case{"n1", "", "-n 1"}, Case{"n2", "", "-n 2"}, Case{"n3", "", "-n 3"}, Case{"n5", "", "-n 5"},
        Case{"n3_bytes256", "STRATA_FASTPATH_BYTES=256", "-n 3"},
        Case{"n2_sleeping_waiters", "STRATA_PROGRESS_WAIT_SPIN=0", "-n 2"},
        Case{"n3_inline", "STRATA_PROGRESS_THREADS=0", "-n 3"}, Case{"n2_off", "STRATA_FASTPATH=off", "-n 2"},
        Case{"n3_off", "STRATA_FASTPATH=off", "-n 3"},
        Case{"n3_off_unmapped", "STRATA_FASTPATH=off STRATA_MAPPED=off", "-n 3"},
        // Mapped plans whose waiters sleep at once: flag waits must ask for nudges
        // as the waiters park (Executor::park), or calls stall until a timeout.
        Case{"n3_off_sleeping_waiters", "STRATA_FASTPATH=off STRATA_PROGRESS_WAIT_SPIN=0", "-n 3"},
        Case{"n2_off_inline", "STRATA_FASTPATH=off STRATA_PROGRESS_THREADS=0", "-n 2"},
        Case{"n4_hosts2", "", "-n 4 --hosts 2"},
        // The ring entries (opt-in).
        Case{"n1_ring", "STRATA_FASTPATH_BYTES=4096", "-n 1"}, Case{"n2_ring", "STRATA_FASTPATH_BYTES=4096", "-n 2"},
        Case{"n3_ring", "STRATA_FASTPATH_BYTES=4096", "-n 3"}, Case{"n5_ring", "STRATA_FASTPATH_BYTES=4096", "-n 5"},
        Case{"n2_ring_sleeping_waiters", "STRATA_FASTPATH_BYTES=4096 STRATA_PROGRESS_WAIT_SPIN=0", "-n 2"},
        Case{"n3_ring_inline", "STRATA_FASTPATH_BYTES=4096 STRATA_PROGRESS_THREADS=0", "-n 3"},
        Case{"n4_hosts2_ring", "STRATA_FASTPATH_BYTES=4096", "-n 4 --hosts 2"}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// The debug log names the path: by default no call takes the fast path (every
// small call runs a plan, "algorithm mapped"); with ring entries on, small
// calls on one host take it, none do when it is off, and the world's calls do
// not when its members are on two hosts.
TEST(FastPathLog, ShowsWhichPathRan) {
  std::string dflt, on, off, hosts;
  EXPECT_EQ(run("STRATA_LOG_LEVEL=debug", "-n 2", "", &dflt), 0) << dflt;
  EXPECT_EQ(count(dflt, "fast path"), 0) << dflt;
  EXPECT_GT(count(dflt, "algorithm mapped"), 100) << dflt;
  EXPECT_EQ(run("STRATA_LOG_LEVEL=debug STRATA_FASTPATH_BYTES=4096", "-n 2", "", &on), 0) << on;
  EXPECT_GT(count(on, "on comm 0: fast path"), 100) << on;
  EXPECT_EQ(run("STRATA_LOG_LEVEL=debug STRATA_FASTPATH=off", "-n 2", "", &off), 0) << off;
  EXPECT_EQ(count(off, "fast path"), 0) << off;
  EXPECT_EQ(run("STRATA_LOG_LEVEL=debug STRATA_FASTPATH_BYTES=4096", "-n 2 --hosts 2", "", &hosts), 0) << hosts;
  EXPECT_EQ(count(hosts, "on comm 0: fast path"), 0) << hosts;  // the split's one-member halves may use it
}

// With the fast path off, the small one-host calls run as mapped plans (the
// same collectives, DAG nodes run by the executor: collectives/src/
// compile_mapped.cpp), and none do with STRATA_MAPPED=off (window plans).
TEST(MappedPlansLog, SmallOneHostCallsRunAsMappedPlans) {
  std::string mapped, unmapped;
  EXPECT_EQ(run("STRATA_LOG_LEVEL=info STRATA_FASTPATH=off", "-n 3", "", &mapped), 0) << mapped;
  EXPECT_GT(count(mapped, "algorithm mapped"), 10) << mapped;
  // Every kind the fast path takes has a mapped plan ("plan: <kind> of ... algorithm mapped").
  for (const char* kind : {"barrier", "broadcast", "reduce", "allreduce", "gather", "scatter", "allgather", "alltoall",
                           "reduce_scatter_block"}) {
    bool seen = false;
    std::istringstream lines(mapped);
    for (std::string line; std::getline(lines, line) && !seen;)
      seen = line.find(std::string("plan: ") + kind + " of ") != std::string::npos &&
             line.find("algorithm mapped") != std::string::npos;
    EXPECT_TRUE(seen) << kind;
  }
  EXPECT_EQ(run("STRATA_LOG_LEVEL=info STRATA_FASTPATH=off STRATA_MAPPED=off", "-n 3", "", &unmapped), 0) << unmapped;
  EXPECT_EQ(count(unmapped, "algorithm mapped"), 0) << unmapped;
}

// STRATA_TRACE shows every fast-path call (they bypass the executor's DAG):
// one "<kind> fast path" event of category "fast" per call the debug log
// reports on the fast path, over both ranks' files.
TEST(FastPathTrace, EveryFastCallIsATraceEvent) {
  const std::string prefix = ::testing::TempDir() + "strata_fast_trace_" + std::to_string(::getpid());
  std::string out;
  ASSERT_EQ(run("STRATA_LOG_LEVEL=debug STRATA_FASTPATH_BYTES=4096 STRATA_TRACE=" + prefix, "-n 2", "", &out), 0)
      << out;
  const int logged = count(out, ": fast path") - count(out, ": fast path off");
  EXPECT_GT(logged, 100) << out;
  int traced = 0;
  for (int r = 0; r < 2; ++r) {
    const std::string file = prefix + "." + std::to_string(r) + ".json";
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string t = ss.str();
    EXPECT_GT(count(t, "\"name\":\"allreduce fast path\""), 0) << file;
    traced += count(t, " fast path\",\"cat\":\"fast\"");
    std::remove(file.c_str());
  }
  EXPECT_EQ(traced, logged);
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
                                           Case{"n3_sleeping_waiters", "STRATA_PROGRESS_WAIT_SPIN=0", "-n 3"},
                                           Case{"n2_ring", "STRATA_FASTPATH_BYTES=4096", "-n 2"},
                                           Case{"n3_ring_sleeping_waiters",
                                                "STRATA_FASTPATH_BYTES=4096 STRATA_PROGRESS_WAIT_SPIN=0", "-n 3"}),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// Shared buffers (Engine::allocate + CollOptions::shared_buffers): the
// single-copy fast path for large calls, with private buffers on one rank
// (CMA), every rank count, sleeping waiters, inline progress, the fast path
// off and two virtual hosts (plans: the flag is then ignored).
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
                                           Case{"n2_fastpath_off", "STRATA_FASTPATH=off", "-n 2"},
                                           Case{"n2_ring", "STRATA_FASTPATH_BYTES=4096", "-n 2"},
                                           Case{"n3_ring", "STRATA_FASTPATH_BYTES=4096", "-n 3"},
                                           Case{"n4_hosts2", "", "-n 4 --hosts 2"}),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// The debug log names the single-copy path on one host, never across hosts:
// by default single-copy plans (publish / read_peer nodes reading through the
// mappings) for every kind, no fast path; with ring entries asked for, the
// fast path's direct mode (docs/algorithms.md, "Single copy").
TEST(SharedBuffersLog, ShowsWhichPathRan) {
  std::string on, ring, hosts;
  EXPECT_EQ(run_shared("STRATA_LOG_LEVEL=debug", "-n 2", "--one-host", &on), 0) << on;
  EXPECT_EQ(count(on, "fast path"), 0) << on;
  for (const char* kind : {"broadcast", "scatter", "gather", "allgather", "alltoall", "reduce_scatter_block"})
    EXPECT_GT(
        count(on, std::string("plan: ") + kind + " of 300007 elements on comm 0 (2 ranks): algorithm single-copy"), 0)
        << kind << "\n"
        << on;
  EXPECT_EQ(run_shared("STRATA_LOG_LEVEL=debug STRATA_FASTPATH_BYTES=4096", "-n 2", "--one-host", &ring), 0) << ring;
  EXPECT_GT(count(ring, "fast path, shared buffers"), 50) << ring;
  // Rank 0's private buffers are read through CMA, and the log says so once.
  EXPECT_GE(count(ring, "reading it through CMA"), 1) << ring;
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
                                           Case{"n3_sleeping_waiters", "STRATA_PROGRESS_WAIT_SPIN=0", "-n 3"},
                                           Case{"n2_ring", "STRATA_FASTPATH_BYTES=4096", "-n 2"},
                                           Case{"n3_ring_sleeping_waiters",
                                                "STRATA_FASTPATH_BYTES=4096 STRATA_PROGRESS_WAIT_SPIN=0", "-n 3"}),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
