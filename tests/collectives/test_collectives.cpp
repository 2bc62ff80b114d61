// Collectives over real processes: runs coll_rank under strata-run for several
// rank counts, host counts, synthetic topologies, algorithms and sync modes.
#include <gtest/gtest.h>

#include "../common/launch.hpp"

#include <sys/wait.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "strata/collectives/tuning.hpp"

namespace {

using launch::bin;

int run(const std::string& env, const std::string& launcher_args, const std::string& rank_args, std::string* out) {
  return launch::run("coll_rank", 240, env, launcher_args, rank_args, out);
}

struct Case {
  const char* launcher;
  const char* args;
  const char* env = "";  ///< extra environment, e.g. "STRATA_CHECK=1"
};

class CollectivesOverProcesses : public ::testing::TestWithParam<Case> {};

TEST_P(CollectivesOverProcesses, MatchSequentialReference) {
  std::string out;
  const int rc = run(GetParam().env, GetParam().launcher, GetParam().args, &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("coll_rank: OK"), std::string::npos) << out;
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, CollectivesOverProcesses,
    ::testing::Values(Case{"-n 1", "--quick"}, Case{"-n 2", ""}, Case{"-n 3", "--quick"},
                      Case{"-n 4 --hosts 2", "--quick"}, Case{"-n 5 --hosts 2", "--quick --algo single"},
                      Case{"-n 8 --topology 'package:2 numa:2 core:2 pu:1'", "--quick"},
                      Case{"-n 3", "--quick --tree single:chain --fragment fixed:4096"},
                      Case{"-n 4", "--quick --tree host:flat,numa:binary,core:3 --fragment halves:8192"},
                      Case{"-n 3 --hosts 2", "--quick --strict"}, Case{"-n 11 --hosts 3", "--quick"},
                      Case{"-n 3 --hosts 2", "--quick --check-mismatch", "STRATA_CHECK=1"},
                      // Pull (receiver-reading) broadcasts: one host, two hosts (gets over libfabric),
                      // the three-level tree with mixed directions, the single-level tree.
                      Case{"-n 11", "--quick --direction pull"}, Case{"-n 4 --hosts 2", "--quick --direction pull"},
                      Case{"-n 8 --topology 'package:2 numa:2 core:2 pu:1'",
                           "--quick --direction host:pull,numa:push,core:pull --fragment fixed:4096"},
                      Case{"-n 5 --hosts 2", "--quick --algo single --direction single:pull --fragment halves:8192"},
                      Case{"-n 3", "--quick", "STRATA_DIRECTION=pull STRATA_DIRECTION_REDUCE=push"},
                      // Single copy (publish / read_peer nodes, CMA) for every automatic broadcast,
                      // allgather(v) and alltoall of any size, on one host; and beside a second host
                      // (no single copy there: the agreement falls back to the window protocol).
                      Case{"-n 3", "", "STRATA_SINGLE_COPY=always"},
                      Case{"-n 2", "--quick", "STRATA_SINGLE_COPY=always"},
                      Case{"-n 4 --hosts 2", "--quick", "STRATA_SINGLE_COPY=always"},
                      // Two packages per host (the package level of the multilevel tree): its own
                      // shape, and package edges pulling while the NUMA edges push; on two hosts.
                      Case{"-n 8 --topology 'package:2 numa:2 core:2 pu:1'",
                           "--quick --tree host:binomial,package:flat,numa:chain,core:2"},
                      Case{"-n 12 --hosts 2 --topology 'package:2 numa:2 core:2 pu:1'",
                           "--quick --tree package:chain --direction host:push,package:pull,numa:push,core:pull "
                           "--fragment fixed:4096"}),
    [](const ::testing::TestParamInfo<Case>& pi) {
      std::string name = std::to_string(pi.index) + "_" + pi.param.launcher + "_" + pi.param.args;
      for (char& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

// Persistent plans in direct mode (puts straight into the receivers'
// registered buffers): off by default (persistent_direct_min_bytes 0, the
// window path won at every size measured), on from 1 byte with a tuning table
// for this machine; the whole matrix on one host and across two hosts, and
// the engine's plan log says which mode ran (so neither case passes by
// falling back to the other).
TEST(PersistentDirect, MatchSequentialReferenceInBothModes) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "strata-direct.XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::string path = tmpl + "/tuning.json";
  strata::coll::TuningFile f;
  f.machine = strata::coll::Fingerprint::here();
  f.created = "2026-11-26T00:00:00Z";
  f.tool = "test_collectives";
  f.table.persistent_direct_min_bytes = 1;
  strata::coll::write_tuning_file(path, f);
  for (const char* launcher : {"-n 3", "-n 4 --hosts 2"}) {
    for (const bool direct : {true, false}) {
      std::string out;
      const std::string env = std::string("STRATA_LOG_LEVEL=debug ") + (direct ? "STRATA_TUNING=" + path : "");
      EXPECT_EQ(run(env, launcher, "--quick", &out), 0) << launcher << "\n" << out;
      EXPECT_NE(out.find("coll_rank: OK"), std::string::npos) << out;
      // Broadcast and allreduce plans of 0, 5 and 70,000 elements on every
      // rank (0 bytes stay on the window path in both modes).
      EXPECT_EQ(launch::count(out, "bytes on comm 0: direct mode") > 0, direct) << launcher << "\n" << out;
      if (!direct) {
        EXPECT_GT(launch::count(out, "bytes on comm 0: window path"), 0) << launcher << "\n" << out;
      }
    }
  }
  std::filesystem::remove_all(tmpl);
}

// One line of strata-trace-merge --bytes: "bytes rank R KIND peer P|- B B nodes N"
// (peer -1 for "-").
struct Moved {
  int rank = -1;
  std::string kind;
  int peer = -1;
  std::uint64_t bytes = 0;
  std::string line;
};

// Traces @p program_args (a strata-bench run) on 4 ranks over 2 virtual hosts
// with @p env into @p prefix.<rank>.json and returns the bytes each rank's nodes moved (the run's output in @p out).
std::vector<Moved> traced_bytes(const std::string& prefix, const std::string& env, const std::string& program_args,
                                std::string* out) {
  const std::string cmd = "env STRATA_TRACE=" + prefix + " " + env + " " + bin() +
                          "/strata-run -n 4 --hosts 2 --timeout 120 -- " + bin() + "/strata-bench " + program_args;
  const launch::ProcessResult r = launch::run_command(cmd);
  *out = cmd + "\n" + r.out;
  EXPECT_EQ(r.status, 0) << *out;
  const launch::ProcessResult m = launch::run_command(bin() + "/strata-trace-merge --bytes --prefix " + prefix);
  EXPECT_EQ(m.status, 0) << m.out;
  std::vector<Moved> v;
  std::istringstream lines(m.out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream w(line);
    std::string tag, rank_w, peer_w, peer, unit;
    Moved e;
    if (!(w >> tag >> rank_w >> e.rank >> e.kind >> peer_w >> peer >> e.bytes >> unit) || tag != "bytes") continue;
    e.peer = peer == "-" ? -1 : std::stoi(peer);
    e.line = line;
    if (e.rank >= 0 && e.rank < 4) v.push_back(e);
  }
  EXPECT_FALSE(v.empty()) << m.out;
  return v;
}

// Per rank of the 4 (2 per host): bytes read_peer, copied, put into a
// same-host and into the other host's windows. A read_peer from anyone but
// the same-host partner fails the calling test.
struct Tally {
  std::uint64_t read[4] = {0, 0, 0, 0}, copied[4] = {0, 0, 0, 0}, put_same[4] = {0, 0, 0, 0},
                put_other[4] = {0, 0, 0, 0};
};
Tally tally(const std::vector<Moved>& moved) {
  Tally t;
  for (const Moved& e : moved) {
    const bool same_host = e.peer >= 0 && e.peer / 2 == e.rank / 2;
    if (e.kind == "read_peer") {
      EXPECT_EQ(e.peer, e.rank ^ 1) << "read_peer only from the same-host partner: " << e.line;
      t.read[e.rank] += e.bytes;
    }
    if (e.kind == "copy") t.copied[e.rank] += e.bytes;
    if (e.kind == "put_with_signal") (same_host ? t.put_same : t.put_other)[e.rank] += e.bytes;
  }
  return t;
}

// A fresh directory under the system's temp directory, removed with its files at scope exit.
struct TempDir {
  std::string path = (std::filesystem::temp_directory_path() / "strata-hsc.XXXXXX").string();
  TempDir() { EXPECT_NE(mkdtemp(path.data()), nullptr) << path; }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// Single copy inside a multi-host communicator (docs/algorithms.md, "Single
// copy across hosts"): 4 ranks on 2 virtual hosts (ranks 0, 1 and 2, 3), a
// 1 MiB broadcast from rank 0 traced (STRATA_TRACE) and the bytes each rank's
// nodes moved added up by strata-trace-merge --bytes. With single copy, ranks
// 1 and 3 read the 1 MiB once out of their host parent's buffer (read_peer)
// and copy nothing out of a window; with STRATA_SINGLE_COPY=off the parent
// puts it into the child's window and the child copies it out (two copies).
TEST(HostSingleCopy, SameHostRanksOfAMultiHostBroadcastCopyItOnce) {
  const TempDir tmp;
  constexpr std::uint64_t kMiB = 1 << 20;
  for (const bool on : {true, false}) {
    std::string out;
    const Tally t = tally(traced_bytes(tmp.path + (on ? "/on" : "/off"), on ? "" : "STRATA_SINGLE_COPY=off",
                                       "--coll bcast --sizes 1M --iters 1 --warmup 0 --no-memcpy --quiet", &out));
    const auto& read = t.read;
    const auto& copied = t.copied;
    const auto& put_same_host = t.put_same;
    const std::string what = std::string(on ? "single copy" : "STRATA_SINGLE_COPY=off") + "\n" + out;
    for (int r : {1, 3}) {
      if (on) {
        EXPECT_EQ(read[r], kMiB) << "rank " << r << ", " << what;
        EXPECT_LT(copied[r], kMiB / 16) << "rank " << r << ", " << what;
      } else {
        EXPECT_EQ(read[r], 0u) << "rank " << r << ", " << what;
        EXPECT_GE(copied[r], kMiB) << "rank " << r << ", " << what;
      }
    }
    // The host parents (0: the root, 2: host 1's leader) put the 1 MiB into
    // their same-host child's window only without single copy.
    for (int r : {0, 2}) {
      if (on)
        EXPECT_LT(put_same_host[r], kMiB / 16) << "rank " << r << ", " << what;
      else
        EXPECT_GE(put_same_host[r], kMiB) << "rank " << r << ", " << what;
    }
  }
}

// The allreduce across hosts with single copy inside each host
// ("hier-single-copy"), same placement: each rank reads and folds the other
// same-host member's half of the 1 MiB vector out of its send buffer
// (read_peer), writes its finished half into that member's output
// (write_peer), and moves nothing by CMA to or from the other host; the
// bench's --check verifies the sums.
TEST(HostSingleCopy, AllreduceAcrossHostsFoldsAndWritesSameHostHalvesOnce) {
  const TempDir tmp;
  constexpr std::uint64_t kHalf = 1 << 19;
  std::string out;
  const std::vector<Moved> moved = traced_bytes(
      tmp.path + "/ar", "", "--coll allreduce --sizes 1M --iters 1 --warmup 0 --no-memcpy --check --quiet", &out);
  EXPECT_NE(out.find(" ok "), std::string::npos) << out;
  std::uint64_t read[4] = {0, 0, 0, 0}, written[4] = {0, 0, 0, 0};
  for (const Moved& e : moved) {
    if (e.kind != "read_peer" && e.kind != "write_peer") continue;
    EXPECT_EQ(e.peer, e.rank ^ 1) << "CMA only with the same-host member: " << e.line;
    (e.kind == "read_peer" ? read : written)[e.rank] += e.bytes;
  }
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(read[r], kHalf) << "rank " << r << "\n" << out;
    EXPECT_EQ(written[r], kHalf) << "rank " << r << "\n" << out;
  }
}

// The allgather across hosts with single copy inside each host
// ("hier-single-copy", named: its automatic window ends at 128 KiB blocks),
// same placement, 1 MiB blocks: ranks 0 and 2 (and 1 and 3) exchange their
// blocks across hosts (one 1 MiB put each, copied once out of the window
// straight into recv), and each rank reads the two blocks its same-host
// partner holds (the partner's own, out of its send buffer, and the one the
// partner received, out of its recv) once by read_peer: 2 MiB, and no
// same-host put. With STRATA_SINGLE_COPY=off the automatic ring puts whole
// blocks into the same-host partner's window and every rank copies its three
// foreign blocks out of its window. The bench's --check verifies the results.
TEST(HostSingleCopy, AllgatherAcrossHostsReadsSameHostBlocksOnce) {
  const TempDir tmp;
  constexpr std::uint64_t kMiB = 1 << 20;
  for (const bool on : {true, false}) {
    std::string out;
    const Tally t =
        tally(traced_bytes(tmp.path + (on ? "/on" : "/off"), on ? "" : "STRATA_SINGLE_COPY=off",
                           std::string("--coll allgather --sizes 1M --iters 1 --warmup 0 --no-memcpy --check --quiet") +
                               (on ? " --algo hier-single-copy" : ""),
                           &out));
    const std::string what = std::string(on ? "hier-single-copy" : "STRATA_SINGLE_COPY=off") + "\n" + out;
    EXPECT_NE(out.find(" ok "), std::string::npos) << what;
    const auto& read = t.read;
    const auto& copied = t.copied;
    const auto& put_same = t.put_same;
    const auto& put_other = t.put_other;
    // (The bench's own small collectives add a few bytes of copies and puts.)
    for (int r = 0; r < 4; ++r) {
      const std::string who = "rank " + std::to_string(r) + ", " + what;
      if (on) {
        EXPECT_EQ(read[r], 2 * kMiB) << who;
        EXPECT_LT(put_same[r], kMiB / 16) << who;
        EXPECT_GE(put_other[r], kMiB) << who;
        EXPECT_LT(put_other[r], kMiB + kMiB / 16) << who;
        // Its own block and the one from the other host; none of its partner's.
        EXPECT_GE(copied[r], 2 * kMiB) << who;
        EXPECT_LT(copied[r], 2 * kMiB + kMiB / 16) << who;
      } else {
        EXPECT_EQ(read[r], 0u) << who;
        EXPECT_GE(copied[r], 4 * kMiB) << who;
      }
    }
    if (!on) {
      EXPECT_GE(put_same[0] + put_same[2], 2 * kMiB) << "the ring 0 -> 1 -> 2 -> 3 -> 0, " << what;
    }
  }
}

}  // namespace

namespace {

int run_stream(const std::string& launcher_args, const std::string& rank_args, std::string* out) {
  const std::string cmd =
      bin() + "/strata-run " + launcher_args + " --timeout 250 -- " + bin() + "/stream_rank " + rank_args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) out->append(buf);
  const int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

TEST(CollectiveStreams, TenThousandMixedLooseCollectivesFromTwoThreadsOnTwoCommunicatorsAreAllCorrect) {
  std::string out;
  EXPECT_EQ(run_stream("-n 2", "--calls 10000", &out), 0) << out;
  EXPECT_NE(out.find("stream_rank: OK (10000"), std::string::npos) << out;
}

TEST(CollectiveStreams, MixedStreamAcrossTwoVirtualHostsIsCorrect) {
  std::string out;
  EXPECT_EQ(run_stream("-n 3 --hosts 2", "--calls 1000", &out), 0) << out;
  EXPECT_NE(out.find("stream_rank: OK"), std::string::npos) << out;
}

}  // namespace
