// Bootstrap implementations: in-process (ranks as threads), the rendezvous
// wire protocol, the rendezvous client against a fake launcher, the
// singleton fallback, and PMIx under Debian's Open MPI mpirun.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "strata/detail/rendezvous.hpp"
#include "strata/transport/bootstrap.hpp"

namespace {

// glibc 2.36 declares pidfd_open without C linkage for C++; use the syscall.
int pidfd_open(pid_t pid, unsigned flags) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, flags)); }

namespace rdv = strata::detail::rdv;
using Clock = std::chrono::steady_clock;

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> v(s.size());
  std::memcpy(v.data(), s.data(), s.size());
  return v;
}

std::string blob_text(int rank, int round) {
  return std::string(static_cast<std::size_t>((rank + round) % 5), 'a') + std::to_string(rank * 100 + round);
}

/// build/bin: STRATA_BIN (set by CTest), else the directory of this test binary.
std::string bin_dir() {
  if (const char* b = std::getenv("STRATA_BIN")) return b;
  char buf[4096] = {};
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  const std::string self = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("bin/x");
  return self.substr(0, self.rfind('/'));
}

// ------------------------------------------------------------------ in-process

void run_threads(std::vector<std::unique_ptr<strata::Bootstrap>>& boots,
                 const std::function<void(strata::Bootstrap&)>& f) {
  std::vector<std::thread> threads;
  for (auto& b : boots) threads.emplace_back([&f, &b] { f(*b); });
  for (auto& t : threads) t.join();
}

class InprocessSizes : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(InprocessSizes, AllgatherAndBarrierAreCorrect) {
  const int n = GetParam().first;
  const int hosts = GetParam().second;
  auto boots = strata::make_inprocess_bootstraps(n, hosts);
  ASSERT_EQ(boots.size(), static_cast<std::size_t>(n));
  std::atomic<int> errors{0};
  std::atomic<int> in_barrier{0};
  run_threads(boots, [&](strata::Bootstrap& b) {
    for (int round = 0; round < 20; ++round) {
      const auto mine = bytes_of(blob_text(b.rank(), round));
      const auto all = b.allgather(mine.data(), mine.size());
      if (all.size() != static_cast<std::size_t>(n)) ++errors;
      for (int r = 0; r < n && all.size() == static_cast<std::size_t>(n); ++r) {
        if (all[static_cast<std::size_t>(r)] != bytes_of(blob_text(r, round))) ++errors;
      }
      // Nobody leaves a barrier before everybody entered it.
      in_barrier.fetch_add(1);
      b.barrier();
      if (in_barrier.load() < n * (round + 1)) ++errors;
      b.barrier();  // keeps the next round's increments out of this check
    }
  });
  EXPECT_EQ(errors.load(), 0);
}

TEST_P(InprocessSizes, JobInfoIsBlockPlacedAndShared) {
  const int n = GetParam().first;
  const int hosts = GetParam().second;
  auto boots = strata::make_inprocess_bootstraps(n, hosts);
  std::vector<int> per_host(static_cast<std::size_t>(hosts), 0);
  int prev_host = 0;
  for (int r = 0; r < n; ++r) {
    const auto& j = boots[static_cast<std::size_t>(r)]->job();
    EXPECT_EQ(j.rank, r);
    EXPECT_EQ(j.size, n);
    EXPECT_EQ(j.nhosts, hosts);
    EXPECT_EQ(j.launcher, "inprocess");
    ASSERT_GE(j.host, prev_host) << "hosts must be contiguous blocks";
    ASSERT_LT(j.host, hosts);
    prev_host = j.host;
    EXPECT_EQ(j.local_rank, per_host[static_cast<std::size_t>(j.host)]++);
    EXPECT_EQ(j.secret, boots[0]->job().secret);
    EXPECT_EQ(j.job_id, boots[0]->job().job_id);
  }
  for (int h = 0; h < hosts; ++h) {
    const int want = n / hosts + (h < n % hosts ? 1 : 0);
    EXPECT_EQ(per_host[static_cast<std::size_t>(h)], want) << "host " << h;
  }
  for (const auto& b : boots) EXPECT_EQ(b->job().local_size, per_host[static_cast<std::size_t>(b->job().host)]);
  // Two jobs never share a secret.
  auto other = strata::make_inprocess_bootstraps(1);
  EXPECT_NE(other[0]->job().secret, boots[0]->job().secret);
}

INSTANTIATE_TEST_SUITE_P(Bootstrap, InprocessSizes,
                         ::testing::Values(std::make_pair(1, 1), std::make_pair(2, 1), std::make_pair(3, 1),
                                           std::make_pair(8, 1), std::make_pair(8, 2), std::make_pair(5, 2),
                                           std::make_pair(11, 3), std::make_pair(4, 4)));

TEST(Bootstrap, InprocessRejectsBadArguments) {
  for (const auto& args : std::vector<std::pair<int, int>>{{0, 1}, {-2, 1}, {3, 0}, {3, 4}}) {
    try {
      strata::make_inprocess_bootstraps(args.first, args.second);
      ADD_FAILURE() << "n=" << args.first << " hosts=" << args.second << " accepted";
    } catch (const strata::Error& e) {
      EXPECT_EQ(e.errc(), strata::Errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find(args.first < 1 ? "n=" : "hosts="), std::string::npos) << e.what();
    }
  }
}

TEST(Bootstrap, InprocessCollectiveFailsWhenAPeerDestroysItsBootstrap) {
  auto boots = strata::make_inprocess_bootstraps(3);
  std::atomic<int> failed{0};
  std::thread t0([&] {
    try {
      int x = 0;
      boots[0]->allgather(&x, sizeof x);
    } catch (const strata::Error& e) {
      if (e.errc() == strata::Errc::peer_dead) ++failed;
    }
  });
  // Rank 2 leaves without joining; rank 0 (maybe already waiting) must not hang.
  boots[2].reset();
  t0.join();
  EXPECT_EQ(failed.load(), 1);
  EXPECT_THROW(boots[1]->barrier(), strata::Error);
}

// ------------------------------------------------------------------ wire protocol

TEST(Rendezvous, HeaderRoundTripAndRejection) {
  const rdv::Header h{rdv::Type::allgather, 77, 12345};
  const auto enc = rdv::encode_header(h);
  rdv::Header d;
  ASSERT_TRUE(rdv::decode_header(enc.data(), d));
  EXPECT_EQ(d.type, rdv::Type::allgather);
  EXPECT_EQ(d.arg, 77u);
  EXPECT_EQ(d.len, 12345u);
  auto bad = enc;
  bad[0] = std::byte{0};
  EXPECT_FALSE(rdv::decode_header(bad.data(), d)) << "bad magic accepted";
  const auto huge = rdv::encode_header(rdv::Header{rdv::Type::result, 0, rdv::kMaxPayload + 1});
  EXPECT_FALSE(rdv::decode_header(huge.data(), d)) << "oversized payload accepted";
  auto badtype = enc;
  badtype[4] = std::byte{99};
  EXPECT_FALSE(rdv::decode_header(badtype.data(), d));
}

TEST(Rendezvous, ParserReassemblesByteByByte) {
  std::vector<std::byte> stream;
  for (int i = 0; i < 5; ++i) {
    const std::string body(static_cast<std::size_t>(i * 3), static_cast<char>('a' + i));
    const auto f = rdv::frame(rdv::Type::barrier, static_cast<std::uint32_t>(i), body.data(), body.size());
    stream.insert(stream.end(), f.begin(), f.end());
  }
  rdv::Parser p;
  rdv::Message m;
  int got = 0;
  for (std::byte b : stream) {
    p.feed(&b, 1);
    while (p.next(m) == 1) {
      EXPECT_EQ(m.header.arg, static_cast<std::uint32_t>(got));
      EXPECT_EQ(m.body.size(), static_cast<std::size_t>(got * 3));
      ++got;
    }
  }
  EXPECT_EQ(got, 5);
  EXPECT_EQ(p.buffered(), 0u);
}

TEST(Rendezvous, PackUnpackBlobs) {
  std::vector<std::vector<std::byte>> blobs = {{}, bytes_of("x"), bytes_of(std::string(1000, 'q')), {}};
  const auto packed = rdv::pack_blobs(blobs);
  std::vector<std::vector<std::byte>> out;
  ASSERT_TRUE(rdv::unpack_blobs(packed.data(), packed.size(), 4, out));
  EXPECT_EQ(out, blobs);
  EXPECT_FALSE(rdv::unpack_blobs(packed.data(), packed.size(), 3, out)) << "wrong count accepted";
  EXPECT_FALSE(rdv::unpack_blobs(packed.data(), packed.size() - 1, 4, out)) << "truncated input accepted";
}

TEST(Rendezvous, SecretHexAndComparison) {
  rdv::Secret a{};
  rdv::random_bytes(a.data(), a.size());
  const std::string hex = rdv::secret_to_hex(a);
  EXPECT_EQ(hex.size(), 64u);
  rdv::Secret b{};
  ASSERT_TRUE(rdv::secret_from_hex(hex, b));
  EXPECT_TRUE(rdv::secrets_equal(a, b));
  b[31] ^= 1;
  EXPECT_FALSE(rdv::secrets_equal(a, b));
  EXPECT_FALSE(rdv::secret_from_hex(hex.substr(1), b));
  EXPECT_FALSE(rdv::secret_from_hex(std::string(64, 'g'), b));
}

TEST(Rendezvous, BlockPlacementCoversEveryRankOnce) {
  for (int n = 1; n <= 40; ++n) {
    for (int hosts = 1; hosts <= n; ++hosts) {
      int prev_host = 0;
      int expect_local = 0;
      for (int r = 0; r < n; ++r) {
        const auto p = rdv::block_placement(r, n, hosts);
        if (p.host != prev_host) {
          ASSERT_EQ(p.host, prev_host + 1) << n << " " << hosts << " " << r;
          prev_host = p.host;
          expect_local = 0;
        }
        ASSERT_EQ(p.local_rank, expect_local++) << n << " " << hosts << " " << r;
        ASSERT_EQ(p.local_size, n / hosts + (p.host < n % hosts ? 1 : 0));
      }
      ASSERT_EQ(prev_host, hosts - 1) << n << " " << hosts;
    }
  }
}

// ------------------------------------------------------------------ client against a fake launcher

/// Runs @p body in a forked child with @p env set; returns its exit code
/// (-1 if it did not exit within @p timeout_s, in which case it is killed).
int in_child(const std::vector<std::pair<std::string, std::string>>& env, const std::function<int()>& body,
             double timeout_s, const std::function<void()>& parent_side = {}) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (const char* v : {"STRATA_RDV", "PMIX_RANK", "STRATA_REQUIRE_LAUNCHER"}) ::unsetenv(v);
    for (const auto& kv : env) ::setenv(kv.first.c_str(), kv.second.c_str(), 1);
    int code = 99;
    try {
      code = body();
    } catch (...) {
      code = 98;
    }
    std::fflush(stdout);
    _exit(code);
  }
  if (parent_side) parent_side();
  const int pfd = pidfd_open(pid, 0);
  pollfd p{pfd, POLLIN, 0};
  const int rc = ::poll(&p, 1, static_cast<int>(timeout_s * 1000));
  ::close(pfd);
  int st = 0;
  if (rc != 1) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &st, 0);
    return -1;
  }
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -2;
}

TEST(Bootstrap, ClientThrowsWhenTheLauncherGoesAway) {
  char dir[] = "/tmp/strata-boot-test.XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/rdv.sock";
  const int lfd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(lfd, 4), 0);
  rdv::Secret secret{};
  rdv::random_bytes(secret.data(), secret.size());
  const std::vector<std::pair<std::string, std::string>> env = {
      {"STRATA_RANK", "0"},       {"STRATA_SIZE", "2"},
      {"STRATA_HOST", "0"},       {"STRATA_NHOSTS", "1"},
      {"STRATA_LOCAL_RANK", "0"}, {"STRATA_LOCAL_SIZE", "2"},
      {"STRATA_JOB_ID", "fake"},  {"STRATA_JOB_SECRET", rdv::secret_to_hex(secret)},
      {"STRATA_RDV", path}};
  // The fake launcher welcomes the rank, reads its allgather, then vanishes.
  auto fake_launcher = [&] {
    pollfd p{lfd, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) return;
    const int c = ::accept(lfd, nullptr, nullptr);
    rdv::Parser parser;
    rdv::Message m;
    std::byte buf[256];
    bool welcomed = false;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline) {
      pollfd q{c, POLLIN, 0};
      if (::poll(&q, 1, 1000) != 1) continue;
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      parser.feed(buf, static_cast<std::size_t>(n));
      if (parser.next(m) != 1) continue;
      if (!welcomed) {
        const auto w = rdv::frame(rdv::Type::welcome, 0, nullptr, 0);
        rdv::write_all(c, w.data(), w.size(), deadline);
        welcomed = true;
      } else {
        break;  // got the allgather: disappear
      }
    }
    ::close(c);
  };
  const int code = in_child(
      env,
      [] {
        auto b = strata::bootstrap_from_environment();
        if (b->job().launcher != "strata-run" || b->size() != 2) return 3;
        try {
          int x = 1;
          b->allgather(&x, sizeof x);
        } catch (const strata::Error& e) {
          const bool clear = std::string(e.what()).find("launcher") != std::string::npos;
          return e.errc() == strata::Errc::bootstrap_error && clear ? 0 : 4;
        }
        return 5;
      },
      20, fake_launcher);
  ::close(lfd);
  ::unlink(path.c_str());
  ::rmdir(dir);
  EXPECT_EQ(code, 0);
}

TEST(Bootstrap, ClientReportsBadEnvironmentNamingTheVariable) {
  const int code = in_child(
      {{"STRATA_RDV", "/nonexistent/x.sock"}, {"STRATA_SIZE", "2"}, {"STRATA_RANK", "7"}},
      [] {
        try {
          strata::bootstrap_from_environment();
        } catch (const strata::Error& e) {
          return std::string(e.what()).find("STRATA_RANK") != std::string::npos ? 0 : 4;
        }
        return 5;
      },
      20);
  EXPECT_EQ(code, 0);
}

TEST(Bootstrap, WithoutLauncherRunsAsSingletonOrThrowsWhenRequired) {
  EXPECT_EQ(in_child(
                {},
                [] {
                  auto b = strata::bootstrap_from_environment();
                  const char x[3] = {'a', 'b', 'c'};
                  const auto all = b->allgather(x, sizeof x);
                  b->barrier();
                  return b->size() == 1 && b->rank() == 0 && all.size() == 1 && all[0].size() == 3 &&
                                 b->job().launcher == "singleton"
                             ? 0
                             : 4;
                },
                20),
            0);
  EXPECT_EQ(in_child(
                {{"STRATA_REQUIRE_LAUNCHER", "1"}},
                [] {
                  try {
                    strata::bootstrap_from_environment();
                  } catch (const strata::Error& e) {
                    return e.errc() == strata::Errc::bootstrap_error &&
                                   std::string(e.what()).find("strata-run -n N") != std::string::npos
                               ? 0
                               : 4;
                  }
                  return 5;
                },
                20),
            0);
}

// ------------------------------------------------------------------ PMIx under mpirun

TEST(Bootstrap, PmixUnderOpenMpiMpirun) {
#if !STRATA_HAVE_PMIX
  GTEST_SKIP() << "built without PMIx (install libpmix-dev)";
#else
  if (::access("/usr/bin/mpirun", X_OK) != 0) GTEST_SKIP() << "mpirun (openmpi-bin) is not installed";
  const std::string probe = bin_dir() + "/launcher-probe";
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    for (const char* v : {"STRATA_RDV", "STRATA_RANK", "STRATA_SIZE"}) ::unsetenv(v);
    ::execl("/usr/bin/mpirun", "mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "3", probe.c_str(),
            "allgather", "4", static_cast<char*>(nullptr));
    _exit(127);
  }
  ::close(out[1]);
  std::string text;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  bool eof = false;
  while (!eof && Clock::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (::poll(&p, 1, static_cast<int>(std::max<long long>(left, 1))) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) eof = true;
    if (n > 0) text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  int st = 0;
  if (!eof) ::kill(-pid, SIGKILL);
  const int pfd = pidfd_open(pid, 0);
  pollfd p{pfd, POLLIN, 0};
  if (::poll(&p, 1, 10000) != 1) ::kill(-pid, SIGKILL);
  ::close(pfd);
  ::waitpid(pid, &st, 0);
  ASSERT_TRUE(eof) << "mpirun did not finish within 60 s:\n" << text;
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << text;
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(text.find("rank=" + std::to_string(r) + " size=3 "), std::string::npos) << text;
  }
  std::size_t count = 0;
  for (std::size_t pos = 0; (pos = text.find("launcher=pmix", pos)) != std::string::npos; ++pos) ++count;
  EXPECT_EQ(count, 3u) << text;
  EXPECT_NE(text.find("placement= 0:0 0:1 0:2"), std::string::npos) << text;
#endif
}

}  // namespace
