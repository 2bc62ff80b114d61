// Short CI variants of the chaos test (scripts/chaos.sh) and of the reference
// soak (scripts/soak.sh): random collectives over real processes under
// strata-run; docs/reliability.md has the long runs' figures.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "../common/launch.hpp"

namespace {

using launch::count;

// Random collectives (every kind, datatype and op, a non-commutative user op,
// in place, roots, splits, 16 in flight, loose and strict) checked against a
// local reference on every rank: 0 mismatches; on one host and on two virtual
// hosts (libfabric).
TEST(Soak, ReferenceShort) {
  struct Run {
    const char* launcher;
    int calls;
    int ranks;
  };
  for (const Run& r : {Run{"-n 3", 1500, 3}, Run{"-n 2 --hosts 2", 800, 2}}) {
    std::string out;
    const int rc =
        launch::run("chaos_rank", 90, "", r.launcher, "--ref " + std::to_string(r.calls) + " --seed 5", &out);
    EXPECT_EQ(rc, 0) << r.launcher << "\n" << out;
    EXPECT_EQ(count(out, "chaos_rank: ref OK"), r.ranks) << r.launcher << "\n" << out;
    EXPECT_EQ(count(out, " 0 mismatches, 0 errors"), r.ranks) << r.launcher << "\n" << out;
    std::printf("%s", out.c_str());
  }
}

// The covering design (chaos_rank --cover): every pair of option values that
// some collective can use together (collective, communicator: world, dup and
// two splits, in place, op: integer, float or a non-commutative user op, root
// first / middle / last, tree, fragment, sync, size), plus every in place x op
// x root x tree combination of reduce and allreduce, checked against the
// local reference; on one host, on 2 and 3 virtual hosts and on 4 ranks over
// 2 hosts (the root then is the first rank of the last host, or the middle).
TEST(Soak, CoveringDesignOfEveryOptionPair) {
  struct Run {
    const char* launcher;
    int ranks;
  };
  for (const Run& r : {Run{"-n 3", 3}, Run{"-n 2 --hosts 2", 2}, Run{"-n 3 --hosts 3", 3}, Run{"-n 4 --hosts 2", 4}}) {
    std::string out;
    const int rc = launch::run("chaos_rank", 150, "", r.launcher, "--cover --seed 5", &out);
    EXPECT_EQ(rc, 0) << r.launcher << "\n" << out;
    EXPECT_EQ(count(out, "chaos_rank: cover OK"), r.ranks) << r.launcher << "\n" << out;
    EXPECT_EQ(count(out, " 0 mismatches, 0 errors"), r.ranks) << r.launcher << "\n" << out;
  }
}

// Floating-point allreduce gives the same bits on every rank, whatever the
// algorithm and the arrival order (a convergence test whose verdict differs
// between ranks diverges, then hangs); and the comparison can fail.
TEST(Soak, FloatAllreduceIsBitwiseIdenticalOnEveryRank) {
  for (const char* launcher : {"-n 3", "-n 3 --hosts 3"}) {
    std::string out;
    const int rc = launch::run("chaos_rank", 150, "", launcher, "--fp-identical 120 --seed 9", &out);
    EXPECT_EQ(rc, 0) << launcher << "\n" << out;
    EXPECT_EQ(count(out, "chaos_rank: fp-identical OK"), 3) << launcher << "\n" << out;
  }
  std::string out;
  const int rc = launch::run("chaos_rank", 60, "CHAOS_FP_PERTURB=2", "-n 2", "--fp-identical 5 --seed 9", &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_GE(count(out, "DIFFERENT BITS"), 1) << out;
}

// The reference check can fail: one result byte flipped on purpose is reported.
TEST(Soak, ReferenceCheckReportsACorruptedResult) {
  std::string out;
  const int rc = launch::run("chaos_rank", 60, "CHAOS_CORRUPT=7", "-n 2", "--ref 100 --seed 5", &out);
  EXPECT_NE(rc, 0) << out;
  // Call 7 is rooted on this seed or not: every rank that checks it reports it.
  EXPECT_GE(count(out, "MISMATCH call 7 "), 1) << out;
  EXPECT_EQ(count(out, "MISMATCH call 7 ") + count(out, "chaos_rank: ref OK"), 2) << out;
}

// A few chaos rounds: a rank SIGKILLed (by itself after a random number of
// calls, or by the driver at a random moment) while random collectives run,
// on one host and on 2 and 3 virtual hosts. Every survivor's pending futures
// fail naming it within STRATA_TIMEOUT + 1 s, strata-run names it, nothing is
// left behind (scripts/chaos.sh checks and counts).
TEST(Chaos, ShortRounds) {
  const std::string cmd =
      std::string("env STRATA_BUILD_DIR=") + STRATA_BINARY_DIR +
      " CHAOS_SEED=4242 CHAOS_METHODS='self kill' CHAOS_CONFIGS='-n 3;-n 2 --hosts 2;-n 3 --hosts 3' "
      "timeout 100 bash " STRATA_SOURCE_DIR "/scripts/chaos.sh 4";
  const launch::ProcessResult r = launch::run_command(cmd);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(count(r.out, "chaos: OK"), 1) << r.out;
  EXPECT_EQ(count(r.out, "hangs 0, leaks 0"), 1) << r.out;
  EXPECT_EQ(count(r.out, "naming it: OK"), 4) << r.out;
  std::printf("%s", r.out.c_str());
}

// A rank SIGSTOPped (alive, answering nobody): strata-run reports it dead to
// the others once it has been stopped for STRATA_TIMEOUT, so every survivor's
// futures fail naming it within STRATA_TIMEOUT + 1 s (before, they waited
// until the rank was killed: a survivor waiting to receive from it, or for its
// fast-path entry, has nothing in flight that could time out).
TEST(Chaos, StoppedRankIsReportedAfterStrataTimeout) {
  const std::string cmd = std::string("env STRATA_BUILD_DIR=") + STRATA_BINARY_DIR +
                          " CHAOS_SEED=5151 CHAOS_METHODS='stop' CHAOS_CONFIGS='-n 3;-n 2 --hosts 2' "
                          "timeout 100 bash " STRATA_SOURCE_DIR "/scripts/chaos.sh 2";
  const launch::ProcessResult r = launch::run_command(cmd);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(count(r.out, "chaos: OK"), 1) << r.out;
  EXPECT_EQ(count(r.out, "naming it: OK"), 2) << r.out;
  std::printf("%s", r.out.c_str());
}

}  // namespace
