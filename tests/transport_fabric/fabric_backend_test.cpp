// Multi-process tests of the libfabric backend.
//
// Each test starts N processes of fabric_rank (one rank each) that meet through
// a unix-socket rendezvous served by this process, waits for them with a
// deadline (killing stragglers) and checks every exit status. The scenario
// logic and its checks live in fabric_rank.cpp.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "strata/detail/rendezvous.hpp"
#include "test_bootstrap.hpp"

namespace {

using Clock = std::chrono::steady_clock;

std::string bin_dir() {
  if (const char* b = std::getenv("STRATA_BIN")) return b;
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  std::string self = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("./x");
  return self.substr(0, self.rfind('/'));
}

struct Spawn {
  int n = 2;
  std::string program = "fabric_rank";
  std::string scenario;
  std::string provider;
  int timeout_ms = 10000;
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<std::string> netns;  // per rank, empty: no namespace
  std::chrono::seconds deadline{150};
  bool all_fail = false;  // every rank is expected to fail: do not stop the others at the first failure
};

/// Runs the ranks; returns their wait statuses (-1 for killed at the deadline).
std::vector<int> run(const Spawn& s) {
  char tmpl[] = "/tmp/strata-fabric-test-XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  if (dir == nullptr) return {};
  const std::string sock = std::string(dir) + "/rdv.sock";
  std::vector<int> status(static_cast<std::size_t>(s.n), -1);
  {
    strata::fabric_test::RendezvousServer server(sock, s.n);
    const std::string prog = bin_dir() + "/" + s.program;
    std::vector<pid_t> pids;
    for (int r = 0; r < s.n; ++r) {
      std::vector<std::string> args;
      if (!s.netns.empty() && !s.netns[static_cast<std::size_t>(r)].empty())
        args = {"ip", "netns", "exec", s.netns[static_cast<std::size_t>(r)]};
      args.insert(args.end(), {prog, sock, std::to_string(r), std::to_string(s.n), s.scenario, s.provider,
                               std::to_string(s.timeout_ms)});
      pid_t pid = ::fork();
      if (pid == 0) {
        for (const auto& kv : s.env) ::setenv(kv.first.c_str(), kv.second.c_str(), 1);
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execvp(argv[0], argv.data());
        std::_Exit(127);
      }
      pids.push_back(pid);
    }
    const auto deadline = Clock::now() + s.deadline;
    std::size_t left = pids.size();
    bool failed_early = false;
    while (left > 0) {
      for (std::size_t i = 0; i < pids.size(); ++i) {
        if (pids[i] <= 0) continue;
        int st = 0;
        if (::waitpid(pids[i], &st, WNOHANG) == pids[i]) {
          status[i] = st;
          pids[i] = 0;
          --left;
          // a rank that failed (not the planned SIGKILL victim) dooms the run:
          // stop the others instead of waiting for their timeouts
          if (WIFEXITED(st) && WEXITSTATUS(st) != 0 && !s.all_fail) failed_early = true;
        }
      }
      if (left == 0) break;
      if (Clock::now() > deadline || failed_early) {
        for (pid_t p : pids)
          if (p > 0) ::kill(p, SIGKILL);
        for (std::size_t i = 0; i < pids.size(); ++i)
          if (pids[i] > 0) ::waitpid(pids[i], nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling child exit, not synchronisation
    }
  }
  ::rmdir(dir);
  // A rank killed on purpose (or at the deadline) leaves the shm provider's
  // region behind; its name carries this run's tag (SocketBootstrap's job id).
  const std::array<std::uint8_t, 32> zero{};  // SocketBootstrap leaves the secret zero
  const std::string tag = strata::detail::rdv::shm_job_tag("fabric-test:" + sock, zero.data(), zero.size());
  for (int r = 0; r < s.n; ++r) ::shm_unlink(("/strata-" + tag + "-fi" + std::to_string(r)).c_str());
  return status;
}

void expect_all_ok(const std::vector<int>& st, int killed_rank = -1) {
  ASSERT_FALSE(st.empty());
  for (std::size_t r = 0; r < st.size(); ++r) {
    if (static_cast<int>(r) == killed_rank) {
      EXPECT_TRUE(WIFSIGNALED(st[r]) && WTERMSIG(st[r]) == SIGKILL) << "rank " << r << " status " << st[r];
      continue;
    }
    EXPECT_TRUE(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0)
        << "rank " << r << " failed (status " << st[r] << ", see its stderr above)";
  }
}

class FabricProvider : public ::testing::TestWithParam<const char*> {
 protected:
  /// "1" where the backend must use mailboxes (socket providers), else "0".
  static const char* mailboxes_expected() { return std::string(GetParam()).rfind("tcp", 0) == 0 ? "1" : "0"; }
};

TEST_P(FabricProvider, DataIntegrityPutGetPutWithSignalTwoRanks) {
  Spawn s;
  s.n = 2;
  s.scenario = "integrity";
  s.provider = GetParam();
  expect_all_ok(run(s));
}

TEST_P(FabricProvider, DataIntegrityRingOfThreeRanks) {
  Spawn s;
  s.n = 3;
  s.scenario = "integrity";
  s.provider = GetParam();
  expect_all_ok(run(s));
}

TEST_P(FabricProvider, ThousandsOfSignalsArriveOnceAndInOrderPerPair) {
  Spawn s;
  s.n = 4;
  s.scenario = "signals";
  s.provider = GetParam();
  s.timeout_ms = 30000;
  expect_all_ok(run(s));
}

// Two ranks: each serves a single fabric peer, so signals travel as remote CQ
// data even over tcp;ofi_rxm (which reports no source for remote writes):
// the target attributes them to its only peer. (Mailboxes off: they would
// carry every bare signal.)
TEST_P(FabricProvider, TwoRanksSignalAsCqDataInOrderWithoutSourceAddresses) {
  Spawn s;
  s.n = 2;
  s.scenario = "signals";
  s.provider = GetParam();
  s.timeout_ms = 30000;
  s.env = {{"FABRIC_TEST_K", "20000"}, {"STRATA_FI_MAILBOX", "off"}, {"FABRIC_TEST_MAILBOXES", "0"}};
  expect_all_ok(run(s));
}

TEST_P(FabricProvider, SignalsAsMessagesKeepOrderToo) {
  Spawn s;
  s.n = 3;
  s.scenario = "signals";
  s.provider = GetParam();
  s.timeout_ms = 30000;
  s.env = {{"STRATA_FI_SIGNAL", "msg"}, {"FABRIC_TEST_K", "2000"}, {"STRATA_FI_MAILBOX", "off"}};
  expect_all_ok(run(s));
}

// Mailboxes (socket providers): bursts of 20,000 bare signals per pair fill
// each 64-entry ring many times over (posts wait for the receiver's credit
// reports); every signal arrives once and in order.
TEST_P(FabricProvider, MailboxSignalsArriveOnceAndInOrderThroughFullRings) {
  Spawn s;
  s.n = 3;
  s.scenario = "signals";
  s.provider = GetParam();
  s.timeout_ms = 60000;
  s.env = {{"FABRIC_TEST_K", "20000"}, {"FABRIC_TEST_MAILBOXES", mailboxes_expected()}};
  expect_all_ok(run(s));
}

// Two ranks: put_with_signal of <= 24 B rides in mailbox entries, larger ones
// are writes carrying the signal as CQ data; the target still sees every
// source's signals in posting order, each after its data.
TEST_P(FabricProvider, MailboxEntriesAndCqDataSignalsKeepOneOrder) {
  Spawn s;
  s.n = 2;
  s.scenario = "pws_order";
  s.provider = GetParam();
  s.timeout_ms = 30000;
  s.env = {{"FABRIC_TEST_K", "2000"}, {"FABRIC_TEST_MAILBOXES", mailboxes_expected()}};
  expect_all_ok(run(s));
}

// Four ranks, three fabric peers each: over tcp;ofi_rxm put_with_signal takes
// the message path, small payloads inside the signal message; forced onto the
// message path for shm too. The targets check order and data at each signal.
// With mailboxes (tcp) the small ones ride in mailbox entries, ordered with
// the messages by signal index.
TEST_P(FabricProvider, PutWithSignalDataBeforeSignalInOrderWithSeveralPeers) {
  Spawn s;
  s.n = 4;
  s.scenario = "pws_order";
  s.provider = GetParam();
  s.timeout_ms = 30000;
  s.env = {{"STRATA_FI_SIGNAL", "msg"}, {"FABRIC_TEST_MAILBOXES", mailboxes_expected()}};
  expect_all_ok(run(s));
}

TEST_P(FabricProvider, EightRanksExchangeSignals) {
  Spawn s;
  s.n = 8;
  s.scenario = "signals";
  s.provider = GetParam();
  s.timeout_ms = 60000;
  s.env = {{"FABRIC_TEST_K", "500"}};
  expect_all_ok(run(s));
}

TEST_P(FabricProvider, FetchAddFromAllRanksIsAtomic) {
  Spawn s;
  s.n = 4;
  s.scenario = "atomics";
  s.provider = GetParam();
  expect_all_ok(run(s));
}

TEST_P(FabricProvider, EmulatedFetchAddFromAllRanksIsAtomic) {
  Spawn s;
  s.n = 4;
  s.scenario = "atomics";
  s.provider = GetParam();
  s.env = {{"STRATA_FI_ATOMICS", "emulate"}};
  expect_all_ok(run(s));
}

TEST_P(FabricProvider, InvalidUseIsRejectedWithClearErrors) {
  Spawn s;
  s.n = 2;
  s.scenario = "invalid";
  s.provider = GetParam();
  expect_all_ok(run(s));
}

TEST_P(FabricProvider, FlushReadInsteadOfDeliveryComplete) {
  Spawn s;
  s.n = 2;
  s.scenario = "integrity";
  s.provider = GetParam();
  s.env = {{"STRATA_FI_DELIVERY", "flush"}};
  expect_all_ok(run(s));
}

TEST_P(FabricProvider, PeerKilledMidStreamFailsWithinTimeout) {
  Spawn s;
  s.n = 3;
  s.scenario = "kill";
  s.provider = GetParam();
  s.timeout_ms = 3000;  // STRATA_TIMEOUT of the survivors
  expect_all_ok(run(s), /*killed_rank=*/2);
}

TEST_P(FabricProvider, RanksServingNobodyStillTakePartInConstruction) {
  Spawn s;
  s.n = 4;
  s.scenario = "idle";
  s.provider = GetParam();
  expect_all_ok(run(s));
}

TEST_P(FabricProvider, PingPongAndRawProviderNumbers) {
  Spawn s;
  s.n = 2;
  s.scenario = "pingpong";
  s.provider = GetParam();
  s.timeout_ms = 30000;
  expect_all_ok(run(s));
  Spawn raw;
  raw.n = 2;
  raw.program = "fabric_raw_pingpong";
  raw.scenario = GetParam();  // fabric_raw_pingpong takes the provider in the scenario slot
  raw.provider = "4194304";
  expect_all_ok(run(raw));
}

INSTANTIATE_TEST_SUITE_P(Providers, FabricProvider, ::testing::Values("tcp;ofi_rxm", "shm"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param) == "shm" ? std::string("shm") : std::string("tcp_rxm");
                         });

TEST(FabricAuto, AutomaticProviderChoiceWorks) {
  Spawn s;
  s.n = 2;
  s.scenario = "invalid";
  s.provider = "";  // auto: tcp;ofi_rxm here
  expect_all_ok(run(s));
}

TEST(FabricAuto, UnknownProviderFailsOnEveryRankWithAMessage) {
  Spawn s;
  s.n = 2;
  s.scenario = "invalid";
  s.provider = "no-such-provider";
  s.all_fail = true;
  auto st = run(s);
  ASSERT_EQ(st.size(), 2u);
  for (int x : st) EXPECT_TRUE(WIFEXITED(x) && WEXITSTATUS(x) == 1) << "status " << x;
}

// Two ranks in two network namespaces joined by a veth pair, over tcp;ofi_rxm.
class NetnsPair {
 public:
  NetnsPair() {
    const std::string id = std::to_string(::getpid() % 100000);
    a_ = "strata-fa-" + id;
    b_ = "strata-fb-" + id;
    va_ = "sfa" + id;
    vb_ = "sfb" + id;
    ok_ = sh("ip netns add " + a_) && sh("ip netns add " + b_) &&
          sh("ip link add " + va_ + " type veth peer name " + vb_) && sh("ip link set " + va_ + " netns " + a_) &&
          sh("ip link set " + vb_ + " netns " + b_) && sh("ip -n " + a_ + " addr add 10.213.7.1/24 dev " + va_) &&
          sh("ip -n " + b_ + " addr add 10.213.7.2/24 dev " + vb_) && sh("ip -n " + a_ + " link set lo up") &&
          sh("ip -n " + b_ + " link set lo up") && sh("ip -n " + a_ + " link set " + va_ + " up") &&
          sh("ip -n " + b_ + " link set " + vb_ + " up");
  }
  ~NetnsPair() {
    sh("ip netns del " + a_ + " 2>/dev/null");
    sh("ip netns del " + b_ + " 2>/dev/null");
  }
  NetnsPair(const NetnsPair&) = delete;
  NetnsPair& operator=(const NetnsPair&) = delete;
  [[nodiscard]] bool ok() const { return ok_; }
  std::string a_, b_, va_, vb_;

  static bool sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }
  static bool exists(const std::string& ns) {
    struct stat st {};
    return ::stat(("/var/run/netns/" + ns).c_str(), &st) == 0;
  }

 private:
  bool ok_ = false;
};

TEST(FabricNetns, TwoNamespacesOverVethWithTcpRxm) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  if (!NetnsPair::sh("ip netns list")) GTEST_SKIP() << "ip netns is not available";
  std::string a;
  std::string b;
  {
    NetnsPair ns;
    a = ns.a_;
    b = ns.b_;
    if (!ns.ok()) GTEST_SKIP() << "could not create namespaces + veth (no CAP_NET_ADMIN?)";
    // each namespace sees only lo and its veth: the backend picks the veth
    ASSERT_TRUE(NetnsPair::sh("ip netns exec " + a + " ping -c 1 -W 2 10.213.7.2") ||
                NetnsPair::sh("ip netns exec " + a + " true"));
    Spawn s;
    s.n = 2;
    s.scenario = "integrity";
    s.provider = "tcp;ofi_rxm";
    s.netns = {a, b};
    expect_all_ok(run(s));
  }
  EXPECT_FALSE(NetnsPair::exists(a)) << "namespace " << a << " left behind";
  EXPECT_FALSE(NetnsPair::exists(b)) << "namespace " << b << " left behind";
}

}  // namespace
