// The emulated cluster over real processes (docs/cluster.md): strata-run --net
// and strata-net. Each rank sees its own virtual host (host name, network
// namespace, address on the bridge); every namespace, link and bridge goes
// away on every exit path (normal, failing rank, timeout, SIGKILL of a rank,
// SIGINT of the launcher, SIGKILL of the launcher); the collective matrix and
// fft3d --check run across 2 hosts x 2 ranks over shaped links.
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../common/launch.hpp"

namespace {

using launch::bin;
using launch::count;

/// "" when the emulated cluster can be built here, else strata-run's reason.
std::string unavailable() {
  static const std::string why = [] {
    std::string out;
    FILE* p = popen((bin() + "/strata-run --net-check 2>&1").c_str(), "r");
    if (p == nullptr) return std::string("cannot run strata-run --net-check");
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    return pclose(p) == 0 ? std::string() : out;
  }();
  return why;
}

#define SKIP_WITHOUT_NET()                                     \
  do {                                                         \
    if (!unavailable().empty()) GTEST_SKIP() << unavailable(); \
  } while (0)

std::string net_inode(pid_t pid) {
  char buf[128];
  const ssize_t n = ::readlink(("/proc/" + std::to_string(pid) + "/ns/net").c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

/// Pids of the processes that are inside any of the network namespaces @p ns.
std::vector<pid_t> processes_in(const std::set<std::string>& ns) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const pid_t pid = static_cast<pid_t>(std::atol(e->d_name));
    if (ns.count(net_inode(pid)) != 0) out.push_back(pid);
  }
  ::closedir(d);
  return out;
}

/// Children of @p parent (the launcher's namespace holders are forks of it).
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream f(std::string("/proc/") + e->d_name + "/stat");
    std::string line;
    if (!std::getline(f, line)) continue;
    std::istringstream rest(line.substr(line.rfind(')') + 1));
    char state = 0;
    long ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) out.push_back(static_cast<pid_t>(std::atol(e->d_name)));
  }
  ::closedir(d);
  return out;
}

/// A launcher run whose output is read line by line while it runs.
struct Job {
  pid_t pid = -1;
  FILE* out = nullptr;
  std::string text;

  explicit Job(const std::string& args) {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    pid = ::fork();
    if (pid == 0) {
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
      ::close(fds[0]);
      ::close(fds[1]);
      const std::string cmd = bin() + "/strata-run " + args;
      ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    ::close(fds[1]);
    out = ::fdopen(fds[0], "r");
  }
  /// Reads until @p n lines containing @p tag were seen (or EOF).
  void read_until(const std::string& tag, int n) {
    char buf[1024];
    while (count(text, tag) < n && std::fgets(buf, sizeof buf, out) != nullptr) text += buf;
  }
  int finish() {
    char buf[1024];
    while (std::fgets(buf, sizeof buf, out) != nullptr) text += buf;
    std::fclose(out);
    int st = 0;
    ::waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
};

/// The namespaces the ranks reported ("NS=net:[...]" lines).
std::set<std::string> reported_namespaces(const std::string& text) {
  std::set<std::string> ns;
  for (std::size_t at = text.find("NS="); at != std::string::npos; at = text.find("NS=", at + 1))
    ns.insert(text.substr(at + 3, text.find_first_of(" \n", at + 3) - at - 3));
  return ns;
}

/// Waits (bounded) until no process is left in @p ns and none of @p pids lives.
void expect_all_gone(const std::set<std::string>& ns, const std::vector<pid_t>& pids, const std::string& ctx) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::vector<pid_t> left;
  for (;;) {
    left = processes_in(ns);
    for (pid_t p : pids)
      if (::kill(p, 0) == 0) left.push_back(p);
    if (left.empty() || std::chrono::steady_clock::now() > deadline) break;
    ::usleep(20000);  // polling a condition with a deadline
  }
  EXPECT_TRUE(left.empty()) << ctx << ": " << left.size() << " process(es) still hold the emulated cluster";
}

const char* const kReport =
    "sh -c 'echo R=$STRATA_RANK H=$(hostname) NS=$(readlink /proc/self/ns/net) BPS=$STRATA_NET_RATE_BPS; ";

TEST(NetCluster, EachVirtualHostHasItsOwnNamespaceNameAndShapedLink) {
  SKIP_WITHOUT_NET();
  Job j(std::string("-n 4 --hosts 2 --net 10gbit --net-stats --timeout 30 -- ") + kReport +
        "cat /proc/net/dev | grep -c eth0: | sed s/^/ETH=/'");
  ASSERT_EQ(j.finish(), 0) << j.text;
  EXPECT_EQ(count(j.text, "R=0 H=strata-h0 "), 1) << j.text;
  EXPECT_EQ(count(j.text, "R=1 H=strata-h0 "), 1) << j.text;
  EXPECT_EQ(count(j.text, "R=2 H=strata-h1 "), 1) << j.text;
  EXPECT_EQ(count(j.text, "R=3 H=strata-h1 "), 1) << j.text;
  EXPECT_EQ(count(j.text, "BPS=10000000000"), 4) << j.text;
  EXPECT_EQ(count(j.text, "ETH=1"), 4) << j.text;
  const auto ns = reported_namespaces(j.text);
  EXPECT_EQ(ns.size(), 2u) << j.text;
  EXPECT_EQ(ns.count(net_inode(::getpid())), 0u) << "ranks ran in the test's own namespace\n" << j.text;
  EXPECT_EQ(count(j.text, "link: received"), 2) << j.text;    // --net-stats, one line per host
  EXPECT_EQ(count(j.text, "link: received -"), 0) << j.text;  // read while the hosts still exist
  expect_all_gone(ns, {}, "normal exit");
}

// Every virtual host runs cubic unless told otherwise, whatever this machine's
// default (bbr here, which stalled bursts 50-110 ms: docs/cluster.md);
// --net-cc host keeps the machine's; an unknown name fails naming the choices.
TEST(NetCluster, CongestionControlIsCubicUnlessToldOtherwise) {
  SKIP_WITHOUT_NET();
  const std::string show = "sh -c 'echo CC=$(cat /proc/sys/net/ipv4/tcp_congestion_control)'";
  Job def(std::string("-n 2 --hosts 2 --net none --timeout 30 -- ") + show);
  ASSERT_EQ(def.finish(), 0) << def.text;
  EXPECT_EQ(count(def.text, "CC=cubic"), 2) << def.text;
  std::string machine;
  if (std::FILE* f = std::fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r")) {
    char buf[64] = {};
    if (std::fgets(buf, sizeof buf, f) != nullptr) machine = buf;
    std::fclose(f);
  }
  while (!machine.empty() && machine.back() == '\n') machine.pop_back();
  ASSERT_FALSE(machine.empty());
  Job host(std::string("-n 2 --hosts 2 --net none --net-cc host --timeout 30 -- ") + show);
  ASSERT_EQ(host.finish(), 0) << host.text;
  EXPECT_EQ(count(host.text, "CC=" + machine + "\n"), 2) << host.text;
  Job reno(std::string("-n 2 --hosts 2 --net none --net-cc reno --timeout 30 -- ") + show);
  ASSERT_EQ(reno.finish(), 0) << reno.text;
  EXPECT_EQ(count(reno.text, "CC=reno"), 2) << reno.text;
  Job bad(std::string("-n 2 --hosts 2 --net none --net-cc no-such-cc --timeout 30 -- ") + show);
  EXPECT_NE(bad.finish(), 0) << bad.text;
  EXPECT_NE(bad.text.find("'no-such-cc' cannot be set"), std::string::npos) << bad.text;
  EXPECT_NE(bad.text.find("available here:"), std::string::npos) << bad.text;
  EXPECT_EQ(count(bad.text, "CC="), 0) << bad.text;
}

TEST(NetCluster, BadRateIsAUsageError) {
  std::string out;
  const int rc = launch::run("coll_rank", 30, "", "-n 2 --hosts 2 --net 10parsecs", "", &out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--net expects a rate"), std::string::npos) << out;
  EXPECT_NE(out.find("10parsecs"), std::string::npos) << out;
}

// Every exit path: the ranks report their namespaces (and pids), then the job
// ends the way the case says; afterwards no process (rank, holder, child of a
// rank) is left in any of the namespaces, so the kernel has removed them with
// their links and the bridge.
enum class End { normal, failing_rank, timeout, sigkill_rank, sigint_launcher, sigkill_launcher };
struct ExitCase {
  const char* name;
  End end;
  int want_rc;  // -1: any nonzero
};

class NetCleanup : public ::testing::TestWithParam<ExitCase> {};
TEST_P(NetCleanup, NoNamespaceOrLinkSurvives) {
  SKIP_WITHOUT_NET();
  const ExitCase& c = GetParam();
  char dir_tmpl[] = "/tmp/strata-net-test.XXXXXX";
  ASSERT_NE(::mkdtemp(dir_tmpl), nullptr);
  const std::string go = std::string(dir_tmpl) + "/go";
  // Rank 1 fails once every rank reported (the test creates the file); the
  // others wait in a child process (sleep) that must die with the job too.
  std::string tail = "echo PID$STRATA_RANK=$$; ";
  switch (c.end) {
    case End::normal:
      tail += "true";
      break;
    case End::failing_rank:
      tail += "if [ $STRATA_RANK = 1 ]; then while [ ! -e " + go + " ]; do sleep 0.05; done; exit 3; fi; sleep 30";
      break;
    default:
      tail += "sleep 30";
  }
  const std::string timeout = c.end == End::timeout ? "2" : "30";
  Job j("-n 3 --hosts 3 --net 1gbit --timeout " + timeout + " -- " + kReport + tail + "'");
  j.read_until("PID", 3);
  const auto ns = reported_namespaces(j.text);
  const std::vector<pid_t> holders = children_of(j.pid);  // 3 ranks + 4 namespace holders while running
  switch (c.end) {
    case End::failing_rank:
      std::fclose(std::fopen(go.c_str(), "w"));
      break;
    case End::sigkill_rank: {
      const auto at = j.text.find("PID2=");
      ASSERT_NE(at, std::string::npos) << j.text;
      ::kill(static_cast<pid_t>(std::atol(j.text.c_str() + at + 5)), SIGKILL);
      break;
    }
    case End::sigint_launcher:
      ::kill(j.pid, SIGINT);
      break;
    case End::sigkill_launcher:
      ::kill(j.pid, SIGKILL);
      break;
    default:
      break;
  }
  const int rc = j.finish();
  ::unlink(go.c_str());
  ::rmdir(dir_tmpl);
  if (c.want_rc >= 0)
    EXPECT_EQ(rc, c.want_rc) << j.text;
  else
    EXPECT_NE(rc, 0) << j.text;
  EXPECT_EQ(ns.size(), 3u) << j.text;
  if (c.end != End::normal) {
    EXPECT_GE(holders.size(), 7u) << j.text;
  }
  expect_all_gone(ns, holders, c.name);
}
INSTANTIATE_TEST_SUITE_P(ExitPaths, NetCleanup,
                         ::testing::Values(ExitCase{"normal", End::normal, 0},
                                           ExitCase{"failing_rank", End::failing_rank, 3},
                                           ExitCase{"timeout", End::timeout, 124},
                                           ExitCase{"sigkill_of_a_rank", End::sigkill_rank, 137},
                                           ExitCase{"sigint_of_the_launcher", End::sigint_launcher, -1},
                                           ExitCase{"sigkill_of_the_launcher", End::sigkill_launcher, 137}),
                         [](const ::testing::TestParamInfo<ExitCase>& i) { return std::string(i.param.name); });

// strata-net (MPI baselines): the command runs in host 0, the agent enters host 1.
TEST(StrataNet, AgentEntersTheOtherHostAndEverythingIsRemoved) {
  SKIP_WITHOUT_NET();
  std::string out;
  FILE* p =
      popen((bin() + "/strata-net --hosts 2 --rate 1gbit --timeout 30 -- sh -c "
                     "'echo H0=$(hostname) NS=$(readlink /proc/self/ns/net); "
                     "$STRATA_NET_RSH -x 10.213.0.2 echo H1=\\$\\(hostname\\) NS=\\$\\(readlink /proc/self/ns/net\\); "
                     "cat $STRATA_NET_HOSTFILE' 2>&1")
                .c_str(),
            "r");
  ASSERT_NE(p, nullptr);
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int st = pclose(p);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << out;
  EXPECT_EQ(count(out, "H0=strata-h0"), 1) << out;
  EXPECT_EQ(count(out, "H1=strata-h1"), 1) << out;
  EXPECT_EQ(count(out, "10.213.0.1 slots=1"), 1) << out;
  EXPECT_EQ(count(out, "10.213.0.2 slots=1"), 1) << out;
  EXPECT_EQ(count(out, "link: received"), 2) << out;
  const auto ns = reported_namespaces(out);
  EXPECT_EQ(ns.size(), 2u) << out;
  expect_all_gone(ns, {}, "strata-net");
}

// The collective matrix across the emulated cluster: every kind (coll_rank:
// broadcast, reduce, allreduce, barrier, split...; sym_rank: allgather(v),
// alltoall(v), reduce_scatter(_block), allreduce algorithms; rooted_rank:
// gather(v), scatter(v)), odd counts, 2 hosts x 2 ranks over 10 Gbit/s links.
struct MatrixCase {
  const char* name;
  const char* program;
  const char* args;
};
class NetMatrix : public ::testing::TestWithParam<MatrixCase> {};
TEST_P(NetMatrix, MatchesTheSequentialReference) {
  SKIP_WITHOUT_NET();
  std::string out;
  const int rc =
      launch::run(GetParam().program, 300, "", "-n 4 --hosts 2 --net 10gbit --net-stats", GetParam().args, &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(count(out, ": OK"), count(out, ": OK") > 0 ? count(out, ": OK") : 1) << out;
  EXPECT_NE(out.find(std::string(GetParam().program) + ": OK"), std::string::npos) << out;
  // The data crossed the links: host 0 sent and received something.
  EXPECT_EQ(count(out, "link: received 0.0 MB"), 0) << out;
  EXPECT_EQ(count(out, "link: received -"), 0) << out;  // an unreadable counter (-1) is no proof
}
INSTANTIATE_TEST_SUITE_P(Hosts2x2, NetMatrix,
                         ::testing::Values(MatrixCase{"coll", "coll_rank", "--quick"},
                                           MatrixCase{"symmetric", "sym_rank", "--quick"},
                                           MatrixCase{"rooted", "rooted_rank", "--quick --algo all"}),
                         [](const ::testing::TestParamInfo<MatrixCase>& i) { return std::string(i.param.name); });

/// What scripts/slurm-emulated.sh leaves behind if it fails to clean up: its
/// daemons (command lines naming its /tmp/strata-slurm.* directory, step
/// daemons) and that directory.
std::vector<std::string> slurm_leftovers() {
  std::vector<std::string> out;
  DIR* d = ::opendir("/proc");
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream f(std::string("/proc/") + e->d_name + "/cmdline");
    std::string cmd;  // arguments separated by NULs: the whole of it (no newline in it)
    std::getline(f, cmd, '\n');
    std::ifstream c(std::string("/proc/") + e->d_name + "/comm");
    std::string comm;
    std::getline(c, comm);
    if (cmd.find("/tmp/strata-slurm.") != std::string::npos || comm == "slurmstepd")
      out.push_back(std::string("pid ") + e->d_name + " " + comm);
  }
  ::closedir(d);
  d = ::opendir("/tmp");
  while (dirent* e = ::readdir(d))
    if (std::string(e->d_name).rfind("strata-slurm.", 0) == 0) out.push_back(std::string("/tmp/") + e->d_name);
  ::closedir(d);
  return out;
}

// Slurm on the emulated cluster (scripts/slurm-emulated.sh): slurmctld in
// host 0, one slurmd per virtual host, and `srun --mpi=pmix` starts the
// collective matrix on 2 hosts x 2 ranks; every rank bootstraps from Slurm's
// PMIx server (no strata-run). Skips with the script's reason where Slurm
// is not installed (scripts/setup.sh --slurm) or namespaces cannot be made.
TEST(NetSlurm, SrunWithPmixRunsTheCollectiveMatrixAcrossTwoHosts) {
  SKIP_WITHOUT_NET();
  const launch::ProcessResult r =
      launch::run_command("STRATA_LOG_LEVEL=info bash " STRATA_SOURCE_DIR "/scripts/slurm-emulated.sh --build " +
                          bin() + "/.. --hosts 2 --ntasks 4 --timeout 240 -- " + bin() + "/coll_rank --quick");
  if (r.status == 77) GTEST_SKIP() << r.out;
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("coll_rank: OK"), std::string::npos) << r.out;
  EXPECT_EQ(count(r.out, "bootstrap: pmix, rank"), 4) << r.out;  // every rank from Slurm's PMIx server
  EXPECT_NE(r.out.find("on 2 host(s)"), std::string::npos) << r.out;
  EXPECT_EQ(count(r.out, "link: received 0.0 MB"), 0) << r.out;  // the data crossed the links
  EXPECT_EQ(count(r.out, "link: received -"), 0) << r.out;       // an unreadable counter (-1) is no proof
  // Nothing of the cluster is left: no daemon, no scratch directory (bounded wait: killed daemons exit
  // asynchronously).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::vector<std::string> left;
  for (;;) {
    left = slurm_leftovers();
    if (left.empty() || std::chrono::steady_clock::now() > deadline) break;
    ::usleep(20000);  // polling a condition with a deadline
  }
  EXPECT_TRUE(left.empty()) << left.size() << " left, first: " << (left.empty() ? "" : left.front());
}

// Heartbeats between hosts (Failures issue, point 3): 2 ranks on 2 virtual
// hosts under mpirun (strata-net; no strata-run, and /proc cannot see the
// other host), one SIGSTOPped: the other's calls fail naming it ("sent no
// heartbeat") within STRATA_TIMEOUT of its last sign of life.
TEST(NetMpirun, HeartbeatsDetectAStoppedRankOnAnotherHost) {
  SKIP_WITHOUT_NET();
  ASSERT_EQ(::access("/usr/bin/mpirun.openmpi", X_OK), 0) << "openmpi-bin is missing (scripts/setup.sh installs it)";
  const launch::ProcessResult r = launch::run_command("timeout 150 bash " STRATA_SOURCE_DIR
                                                      "/scripts/mpirun-failures.sh " STRATA_BINARY_DIR " hosts");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(count(r.out, "mpirun-failures: hosts: OK"), 1) << r.out;
  std::printf("%s", r.out.c_str());
}

#ifdef STRATA_HAVE_FFT3D
TEST(NetApps, Fft3dChecksAcrossTwoHostsOfTwoRanks) {
  SKIP_WITHOUT_NET();
  std::string out;
  const int rc = launch::run("fft3d", 200, "", "-n 4 --hosts 2 --net 10gbit --net-stats",
                             "--grid 16x8x12 --check --iters 1", &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("fft3d: check OK"), std::string::npos) << out;
  EXPECT_EQ(count(out, "link: received 0.0 MB"), 0) << out;
  EXPECT_EQ(count(out, "link: received -"), 0) << out;  // an unreadable counter (-1) is no proof
}
#endif

}  // namespace
