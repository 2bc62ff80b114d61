// Hostile input: the strata-run rendezvous against authenticated ranks that
// send truncated, oversized and malformed frames and against clients without
// the secret (hostile_rank under the real strata-run); the rank side against a
// fake launcher that answers with malformed frames; the tuning file
// (STRATA_TUNING) and topology inputs (STRATA_TOPOLOGY) at their limits.
// Every case must end with an error that names what is wrong, within a bound:
// no crash, no hang. docs/reliability.md ("Hostile input") has the table.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "../common/launch.hpp"
#include "strata/collectives/tuning.hpp"
#include "strata/detail/rendezvous.hpp"
#include "strata/error.hpp"
#include "strata/transport/bootstrap.hpp"
#include "strata/transport/topology.hpp"

namespace {

namespace rdv = strata::detail::rdv;
using Bytes = std::vector<std::byte>;
using Clock = std::chrono::steady_clock;
using launch::count;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// ------------------------------------------------------------ rendezvous server (strata-run)

struct AuthCase {
  const char* mode;
  const char* reason;  // in the launcher's "rank 1 broke the rendezvous protocol: ..." line
};

// An authenticated rank 1 sends a bad frame: strata-run disconnects it, prints
// which rule it broke, and rank 0's bootstrap allgather fails with peer_dead
// naming rank 1 and the reason, at once (not at a timeout).
class RendezvousAuthenticated : public ::testing::TestWithParam<AuthCase> {};
TEST_P(RendezvousAuthenticated, LauncherDisconnectsTheRankAndTheOthersFailNamingIt) {
  std::string out;
  const auto t0 = Clock::now();
  const int rc = launch::run("hostile_rank", 30, "", "-n 2 --on-failure continue", GetParam().mode, &out);
  const double secs = seconds_since(t0);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(rc, 124) << "timed out\n" << out;
  EXPECT_EQ(count(out, std::string("strata-run: rank 1 broke the rendezvous protocol: ") + GetParam().reason), 1)
      << out;
  EXPECT_EQ(count(out, "NORMAL error peer_dead: "), 1) << out;
  EXPECT_EQ(count(out, "HOSTILE closed"), 1) << out;
  if (std::string(GetParam().mode).find("truncated") == std::string::npos) {
    // Rank 0's error carries the reason too.
    EXPECT_EQ(count(out, GetParam().reason), 2) << GetParam().reason << "\n" << out;
    EXPECT_EQ(count(out, "rank 1 was disconnected by strata-run for breaking the rendezvous protocol"), 1) << out;
  } else {
    // The hostile rank closed the connection and exited: whichever strata-run
    // saw first (the exit or the cut message) is rank 0's reason; it names rank 1.
    EXPECT_EQ(count(out, "on rank 0 failed: rank 1 "), 1) << out;
  }
  EXPECT_LT(secs, 10.0) << out;
}
INSTANTIATE_TEST_SUITE_P(
    Frames, RendezvousAuthenticated,
    ::testing::Values(AuthCase{"auth-bad-magic", "malformed header: bad magic 0x58585858"},
                      AuthCase{"auth-unknown-type", "malformed header: unknown message type 99"},
                      AuthCase{"auth-type-zero", "malformed header: unknown message type 0"},
                      AuthCase{"auth-over-1gib", "malformed header: payload of 1073741825 bytes is over the limit"},
                      AuthCase{"auth-len-max",
                               "malformed header: payload of 18446744073709551615 bytes is over the limit"},
                      AuthCase{"auth-blob-over-rank-limit", "allgather blob of 536870913 bytes is over the per-rank"},
                      AuthCase{"auth-welcome", "sent a 'welcome' message, which only strata-run sends"},
                      AuthCase{"auth-result", "sent a 'result' message, which only strata-run sends"},
                      AuthCase{"auth-failed", "sent a 'failed' message, which only strata-run sends"},
                      AuthCase{"auth-rank-dead", "sent a 'rank_dead' message, which only strata-run sends"},
                      AuthCase{"auth-second-hello", "second hello"},
                      AuthCase{"auth-barrier-payload", "barrier with a payload of 16 bytes"},
                      AuthCase{"auth-garbage", "malformed header: bad magic"},
                      AuthCase{"auth-truncated-header", "closed the connection inside a message (10 bytes"},
                      AuthCase{"auth-truncated-payload", "closed the connection inside a message (34 bytes"}),
    [](const ::testing::TestParamInfo<AuthCase>& i) {
      std::string n = i.param.mode + 5;
      for (char& c : n)
        if (c == '-') c = '_';
      return n;
    });

// Clients without the secret (or claiming a taken rank) are closed without a
// byte of reply and counted; the real job then completes normally.
class RendezvousUnauthenticated : public ::testing::TestWithParam<const char*> {};
TEST_P(RendezvousUnauthenticated, RefusedSilentlyAndTheJobCompletes) {
  const std::string mode = GetParam();
  std::string out;
  const auto t0 = Clock::now();
  const int rc = launch::run("hostile_rank", 40, "", "-n 2", mode, &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(count(out, "NORMAL ok"), 2) << out;
  EXPECT_EQ(count(out, "HOSTILE refused"), 1) << out;
  EXPECT_EQ(count(out, "HOSTILE answered"), 0) << out;
  if (mode != "unauth-connect-close") {
    EXPECT_EQ(count(out, "rendezvous connection(s) that failed authentication"), 1) << out;
  }
  EXPECT_LT(seconds_since(t0), 20.0) << out;
}
INSTANTIATE_TEST_SUITE_P(Clients, RendezvousUnauthenticated,
                         ::testing::Values("unauth-connect-close", "unauth-wrong-secret", "unauth-garbage",
                                           "unauth-short-secret", "unauth-long-hello", "unauth-rank-out-of-range",
                                           "unauth-allgather-first", "unauth-huge-hello", "unauth-bad-magic",
                                           "unauth-rank-taken", "unauth-slowloris", "unauth-silent",
                                           "unauth-many-pending"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string n = i.param + 7;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// ------------------------------------------------------------ rank side against a fake launcher

int pidfd_open(pid_t pid, unsigned flags) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, flags)); }

Bytes header(std::uint32_t magic, std::uint32_t type, std::uint32_t arg, std::uint64_t len) {
  Bytes b(rdv::kHeaderSize);
  std::memcpy(b.data(), &magic, 4);
  std::memcpy(b.data() + 4, &type, 4);
  std::memcpy(b.data() + 8, &arg, 4);
  std::memset(b.data() + 12, 0, 4);
  std::memcpy(b.data() + 16, &len, 8);
  return b;
}
Bytes frame(rdv::Type t, std::uint32_t arg, const Bytes& body = {}) {
  return rdv::frame(t, arg, body.data(), body.size());
}
Bytes cat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
Bytes two_blobs() { return rdv::pack_blobs({Bytes(4, std::byte{1}), Bytes(4, std::byte{2})}); }

/// What the fake launcher sends: after the hello, and after the rank's first
/// allgather (then it closes the connection when @p close_after).
struct Script {
  Bytes on_hello;
  Bytes on_request;
  bool close_after_request = false;
  bool silent_after_hello = false;
  std::string env_timeout;  // STRATA_BOOTSTRAP_TIMEOUT for the rank
  int refuse_first = 0;     // connections closed at accept, without a byte read or sent
};

struct ClientResult {
  int code = -1;  // 0: allgather succeeded; 10 + Errc: strata::Error; -1: hang (killed)
  std::string what;
  double seconds = 0;
};

/// Runs a rank (forked) whose rendezvous is a fake launcher following @p s;
/// the rank bootstraps and runs one allgather (10 s bound).
ClientResult run_client(const Script& s) {
  char dir[] = "/tmp/strata-hostile.XXXXXX";
  if (::mkdtemp(dir) == nullptr) return {};
  const std::string path = std::string(dir) + "/rdv.sock";
  const int lfd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  ::bind(lfd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  ::listen(lfd, 4);
  rdv::Secret secret{};
  rdv::random_bytes(secret.data(), secret.size());
  int msg[2];
  if (::pipe2(msg, O_CLOEXEC) != 0) return {};
  const auto t0 = Clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(msg[0]);
    for (const char* v : {"PMIX_RANK", "STRATA_REQUIRE_LAUNCHER", "STRATA_BOOTSTRAP_TIMEOUT"}) ::unsetenv(v);
    const std::vector<std::pair<const char*, std::string>> env = {
        {"STRATA_RANK", "0"},       {"STRATA_SIZE", "2"},
        {"STRATA_HOST", "0"},       {"STRATA_NHOSTS", "1"},
        {"STRATA_LOCAL_RANK", "0"}, {"STRATA_LOCAL_SIZE", "2"},
        {"STRATA_JOB_ID", "fake"},  {"STRATA_JOB_SECRET", rdv::secret_to_hex(secret)},
        {"STRATA_RDV", path}};
    for (const auto& kv : env) ::setenv(kv.first, kv.second.c_str(), 1);
    if (!s.env_timeout.empty()) ::setenv("STRATA_BOOTSTRAP_TIMEOUT", s.env_timeout.c_str(), 1);
    int code = 0;
    std::string what;
    try {
      auto b = strata::bootstrap_from_environment();
      int x = 7;
      const auto blobs = b->allgather(&x, sizeof x);
      what = "allgather returned " + std::to_string(blobs.size()) +
             " blobs; dead ranks reported: " + std::to_string(b->poll_dead_ranks().size());
    } catch (const strata::Error& e) {
      code = 10 + static_cast<int>(e.errc());
      what = e.what();
    } catch (const std::exception& e) {
      code = 97;
      what = e.what();
    }
    [[maybe_unused]] const ssize_t w = ::write(msg[1], what.data(), what.size());
    _exit(code);
  }
  ::close(msg[1]);
  // The fake launcher.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  pollfd lp{lfd, POLLIN, 0};
  int c = -1;
  const int child = pidfd_open(pid, 0);  // stop accepting once the rank has exited
  for (int refused = 0;; ++refused) {
    const int left = static_cast<int>(std::max(0.0, 10000 - 1000 * seconds_since(t0)));
    pollfd ps[2] = {lp, {child, POLLIN, 0}};
    if (::poll(ps, 2, left) < 1 || (ps[0].revents & POLLIN) == 0) break;
    c = ::accept(lfd, nullptr, nullptr);
    if (c < 0 || refused >= s.refuse_first) break;
    ::close(c);  // as strata-run closes a silent connection when its pending table is full
    c = -1;
  }
  ::close(child);
  if (c >= 0) {
    rdv::Parser parser;
    rdv::Message m;
    int stage = 0;  // 0: waiting for the hello, 1: for the request, 2: done
    while (stage < 2 && Clock::now() < deadline) {
      pollfd q{c, POLLIN, 0};
      if (::poll(&q, 1, 200) != 1) continue;
      std::byte buf[512];
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      parser.feed(buf, static_cast<std::size_t>(n));
      while (stage < 2 && parser.next(m) == 1) {
        const Bytes& reply = stage == 0 ? s.on_hello : s.on_request;
        rdv::write_all(c, reply.data(), reply.size(), deadline);
        if (stage == 0 && s.silent_after_hello) stage = 2;
        ++stage;
      }
    }
    if (s.close_after_request) {
      ::close(c);
      c = -1;
    }
  }
  // Wait for the rank (10 s bound), then read its message.
  ClientResult r;
  const int pfd = pidfd_open(pid, 0);
  pollfd p{pfd, POLLIN, 0};
  const int left = static_cast<int>(std::max(0.0, 12000 - 1000 * seconds_since(t0)));
  const bool exited = ::poll(&p, 1, left) == 1;
  ::close(pfd);
  int st = 0;
  if (!exited) ::kill(pid, SIGKILL);
  ::waitpid(pid, &st, 0);
  r.seconds = seconds_since(t0);
  if (exited && WIFEXITED(st)) r.code = WEXITSTATUS(st);
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::read(msg[0], buf, sizeof buf)) > 0) r.what.append(buf, static_cast<std::size_t>(n));
  ::close(msg[0]);
  if (c >= 0) ::close(c);
  ::close(lfd);
  ::unlink(path.c_str());
  ::rmdir(dir);
  return r;
}

int code_of(strata::Errc e) { return 10 + static_cast<int>(e); }

struct ClientCase {
  const char* name;
  std::function<Script()> script;
  strata::Errc errc;
  const char* message;
};

class RendezvousClient : public ::testing::TestWithParam<ClientCase> {};
TEST_P(RendezvousClient, RankFailsWithATypedErrorNamingTheProblem) {
  const ClientResult r = run_client(GetParam().script());
  EXPECT_EQ(r.code, code_of(GetParam().errc)) << r.what;
  EXPECT_NE(r.what.find(GetParam().message), std::string::npos) << r.what;
  EXPECT_NE(r.what.find("rank 0"), std::string::npos) << r.what;
  EXPECT_LT(r.seconds, 8.0) << r.what;
}

const Bytes kWelcome = frame(rdv::Type::welcome, 0);
INSTANTIATE_TEST_SUITE_P(
    FakeLauncher, RendezvousClient,
    ::testing::Values(
        ClientCase{"garbage_instead_of_welcome",
                   [] {
                     return Script{Bytes(64, std::byte{0x41}), {}, false, false, ""};
                   },
                   strata::Errc::bootstrap_error, "malformed reply from strata-run (bad magic"},
        ClientCase{"result_instead_of_welcome",
                   [] {
                     return Script{frame(rdv::Type::result, 0, two_blobs()), {}, false, false, ""};
                   },
                   strata::Errc::bootstrap_error, "unexpected reply to the hello from strata-run ('result'"},
        ClientCase{"welcome_for_another_rank",
                   [] {
                     return Script{frame(rdv::Type::welcome, 1), {}, false, false, ""};
                   },
                   strata::Errc::bootstrap_error, "('welcome' for rank 1)"},
        ClientCase{"silent_launcher",
                   [] {
                     return Script{{}, {}, false, true, "1"};
                   },
                   strata::Errc::bootstrap_error, "no welcome from strata-run within 1.0"},
        ClientCase{"bad_magic_reply",
                   [] {
                     return Script{kWelcome, header(0x41414141u, 5, 0, 0), false, false, ""};
                   },
                   strata::Errc::bootstrap_error, "malformed message from strata-run (bad magic 0x41414141"},
        ClientCase{"oversized_reply",
                   [] {
                     return Script{kWelcome, header(rdv::kMagic, 5, 0, rdv::kMaxPayload + 1), false, false, ""};
                   },
                   strata::Errc::bootstrap_error, "is over the limit"},
        ClientCase{"unknown_type_reply",
                   [] {
                     return Script{kWelcome, header(rdv::kMagic, 42, 0, 0), false, false, ""};
                   },
                   strata::Errc::bootstrap_error, "unknown message type 42"},
        ClientCase{"reply_for_another_round",
                   [] {
                     return Script{kWelcome, frame(rdv::Type::result, 5, two_blobs()), false, false, ""};
                   },
                   strata::Errc::bootstrap_error, "reply for round 5 while waiting for round 0"},
        ClientCase{"reply_with_three_blobs_for_two_ranks",
                   [] {
                     return Script{kWelcome,
                                   frame(rdv::Type::result, 0, rdv::pack_blobs({Bytes(1), Bytes(1), Bytes(1)})), false,
                                   false, ""};
                   },
                   strata::Errc::bootstrap_error, "malformed reply from strata-run"},
        ClientCase{"reply_with_a_blob_length_past_the_end",
                   [] {
                     Bytes b = two_blobs();
                     const std::uint64_t huge = ~std::uint64_t{0};
                     std::memcpy(b.data() + 4, &huge, 8);
                     return Script{kWelcome, frame(rdv::Type::result, 0, b), false, false, ""};
                   },
                   strata::Errc::bootstrap_error, "malformed reply from strata-run"},
        ClientCase{"truncated_reply_then_close",
                   [] {
                     Bytes f = frame(rdv::Type::result, 0, two_blobs());
                     f.resize(f.size() - 5);
                     return Script{kWelcome, f, true, false, ""};
                   },
                   strata::Errc::bootstrap_error, "strata-run closed the rendezvous connection"},
        ClientCase{"welcome_as_reply",
                   [] {
                     return Script{kWelcome, kWelcome, false, false, ""};
                   },
                   strata::Errc::bootstrap_error, "unexpected message from strata-run"},
        ClientCase{"failed_reply",
                   [] {
                     const std::string why = "rank 1 exited with status 9 before joining the allgather";
                     Bytes b(why.size());
                     std::memcpy(b.data(), why.data(), why.size());
                     return Script{kWelcome, frame(rdv::Type::failed, 0, b), false, false, ""};
                   },
                   strata::Errc::peer_dead, "failed: rank 1 exited with status 9"}),
    [](const ::testing::TestParamInfo<ClientCase>& i) { return std::string(i.param.name); });

// A rank_dead event for a rank outside the job (or the rank itself) is not a
// peer's death: ignored; the allgather that follows completes.
TEST(RendezvousClient, DeathReportOfARankOutsideTheJobIsIgnored) {
  const ClientResult r = run_client([] {
    const std::string d = "rank 77 killed";
    Bytes b(d.size());
    std::memcpy(b.data(), d.data(), d.size());
    return Script{kWelcome,
                  cat(cat(frame(rdv::Type::rank_dead, 77, b), frame(rdv::Type::rank_dead, 0, b)),
                      frame(rdv::Type::result, 0, two_blobs())),
                  false, false, ""};
  }());
  EXPECT_EQ(r.code, 0) << r.what;
  EXPECT_NE(r.what.find("allgather returned 2 blobs; dead ranks reported: 0"), std::string::npos) << r.what;
}

// strata-run may close a rank's connection before its hello arrived (a burst of
// silent unauthenticated connections filled its pending table and this one was
// the oldest silent): the rank reconnects and joins (regression: it failed with
// "cannot send the hello: Broken pipe"). A launcher that closes every attempt
// gets a bounded number of them, then the refusal is reported.
TEST(RendezvousClient, ReconnectsWhenClosedBeforeTheWelcome) {
  Script s{kWelcome, frame(rdv::Type::result, 0, two_blobs()), false, false, ""};
  s.refuse_first = 2;
  const ClientResult r = run_client(s);
  EXPECT_EQ(r.code, 0) << r.what;
  EXPECT_NE(r.what.find("allgather returned 2 blobs"), std::string::npos) << r.what;
}
TEST(RendezvousClient, RefusedOnEveryAttemptFailsNamingTheRefusal) {
  Script s{kWelcome, {}, false, false, ""};
  s.refuse_first = 1000;
  const ClientResult r = run_client(s);
  EXPECT_EQ(r.code, code_of(strata::Errc::bootstrap_error)) << r.what;
  EXPECT_NE(r.what.find("rank 0: the strata-run rendezvous refused this rank"), std::string::npos) << r.what;
  EXPECT_LT(r.seconds, 5.0) << r.what;
}

// ------------------------------------------------------------ tuning file (STRATA_TUNING)

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const strata::Error& e) {
    EXPECT_EQ(e.errc(), strata::Errc::invalid_argument) << e.what();
    return e.what();
  }
  return "(no error)";
}

std::string tuning_doc(const std::string& decisions, const std::string& version = "1") {
  strata::coll::TuningFile f;
  f.machine = strata::coll::Fingerprint::here();
  std::string machine = f.machine.to_json();
  machine.pop_back();
  return "{\"strata_tuning\": " + version + ", \"machine\": " + machine + ", \"decisions\": {" + decisions + "}}";
}

struct TuningCase {
  const char* name;
  std::function<std::string()> text;
  const char* message;
};
class TuningText : public ::testing::TestWithParam<TuningCase> {};
TEST_P(TuningText, IsAnErrorNamingTheFileAndTheProblem) {
  const std::string text = GetParam().text();
  const auto t0 = Clock::now();
  const std::string e = error_of([&] { (void)strata::coll::parse_tuning(text, "hostile.json"); });
  EXPECT_NE(e.find("tuning file hostile.json"), std::string::npos) << e;
  EXPECT_NE(e.find(GetParam().message), std::string::npos) << e;
  EXPECT_LT(seconds_since(t0), 5.0);
}
INSTANTIATE_TEST_SUITE_P(
    Files, TuningText,
    ::testing::Values(
        TuningCase{"empty", [] { return std::string(); }, "unexpected end of input"},
        TuningCase{"truncated_at_half",
                   [] {
                     const std::string d = tuning_doc("\"pipeline_fragment\": 65536");
                     return d.substr(0, d.size() / 2);
                   },
                   "malformed JSON"},
        TuningCase{"truncated_before_the_last_brace",
                   [] {
                     const std::string d = tuning_doc("");
                     return d.substr(0, d.size() - 1);
                   },
                   "malformed JSON"},
        TuningCase{"number_beyond_double", [] { return tuning_doc("\"pipeline_fragment\": 1e400"); },
                   "number out of range"},
        TuningCase{"integer_beyond_64_bits", [] { return tuning_doc("\"pipeline_fragment\": 18446744073709551616"); },
                   "field 'decisions.pipeline_fragment'"},
        TuningCase{"huge_in_range_type", [] { return tuning_doc("\"pipeline_fragment\": 18446744073709551615"); },
                   "out of range"},
        TuningCase{"negative_size", [] { return tuning_doc("\"mapped_max_bytes\": -4096"); },
                   "field 'decisions.mapped_max_bytes'"},
        TuningCase{"decision_as_array", [] { return tuning_doc("\"mapped_max_bytes\": [4096]"); },
                   "field 'decisions.mapped_max_bytes': expected an unsigned integer, got array"},
        TuningCase{"machine_missing", [] { return std::string("{\"strata_tuning\": 1, \"decisions\": \"fast\"}"); },
                   "field 'machine': missing"},
        TuningCase{"version_fraction", [] { return tuning_doc("", "1.5"); }, "field 'strata_tuning'"},
        TuningCase{"version_huge", [] { return tuning_doc("", "99999999999999999999"); }, "field 'strata_tuning'"},
        TuningCase{"nesting_100000_deep", [] { return std::string(100000, '[') + std::string(100000, ']'); },
                   "nesting deeper than 64"},
        TuningCase{"binary_garbage",
                   [] {
                     std::string g(4096, '\0');
                     for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<char>((i * 197u + 3u) & 0xFFu);
                     return g;
                   },
                   "malformed JSON"},
        TuningCase{"nul_inside_a_string", [] { return std::string("{\"strata_tuning\": 1, \"tool\": \"a\0b\"}", 35); },
                   "control character"}),
    [](const ::testing::TestParamInfo<TuningCase>& i) { return std::string(i.param.name); });

// STRATA_TUNING naming something that is not a regular file: a FIFO (its
// open would block), a device that never ends, a directory.
TEST(TuningPath, NotARegularFileIsAnErrorAtOnce) {
  char dir[] = "/tmp/strata-hostile-tuning.XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& p : {fifo, std::string("/dev/zero"), std::string(dir)}) {
    const auto t0 = Clock::now();
    const std::string e = error_of([&] { (void)strata::coll::read_tuning_file(p); });
    EXPECT_NE(e.find("tuning file " + p + ": not a regular file"), std::string::npos) << e;
    EXPECT_LT(seconds_since(t0), 2.0) << p;
  }
  ::unlink(fifo.c_str());
  ::rmdir(dir);
}

// ------------------------------------------------------------ topology (STRATA_TOPOLOGY)

struct TopoCase {
  const char* name;
  std::function<std::string(const std::string& dir)> spec;  // may write files into dir
  const char* message;
};
class Topology : public ::testing::TestWithParam<TopoCase> {};
TEST_P(Topology, BadSpecIsAnErrorNamingTheVariableAndTheSpec) {
  char dir[] = "/tmp/strata-hostile-topo.XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string spec = GetParam().spec(dir);
  const auto t0 = Clock::now();
  try {
    const strata::Machine m(spec);
    ADD_FAILURE() << "accepted STRATA_TOPOLOGY='" << spec.substr(0, 200) << "'";
  } catch (const strata::Error& e) {
    const std::string w = e.what();
    EXPECT_EQ(e.errc(), strata::Errc::invalid_argument) << w;
    EXPECT_NE(w.find("STRATA_TOPOLOGY='" + spec + "'"), std::string::npos) << w.substr(0, 400);
    EXPECT_NE(w.find(GetParam().message), std::string::npos) << w.substr(0, 400);
  }
  EXPECT_LT(seconds_since(t0), 5.0);
  std::filesystem::remove_all(dir);
}

std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path;
}
INSTANTIATE_TEST_SUITE_P(
    Specs, Topology,
    ::testing::Values(
        TopoCase{"ten_billion_pus", [](const std::string&) { return std::string("package:100000 core:100000 pu:1"); },
                 "more than 65536 processing units"},
        TopoCase{"bare_arities_too_many", [](const std::string&) { return std::string("70000 70000"); },
                 "more than 65536 processing units"},
        TopoCase{"arity_beyond_64_bits",
                 [](const std::string&) { return std::string("core:99999999999999999999999999"); },
                 "more than 65536 processing units"},
        TopoCase{"zero_packages", [](const std::string&) { return std::string("package:0"); },
                 "hwloc rejected the synthetic description"},
        TopoCase{"negative_arity", [](const std::string&) { return std::string("package:-1"); },
                 "hwloc rejected the synthetic description"},
        TopoCase{"pu_level_twice", [](const std::string&) { return std::string("package:2 core:2 pu:1 pu:1"); },
                 "hwloc rejected the synthetic description"},
        TopoCase{"control_characters", [](const std::string&) { return std::string("package:2\x01\x02 core:2"); },
                 "hwloc rejected the synthetic description"},
        TopoCase{"fifo_path",
                 [](const std::string& d) {
                   const std::string p = d + "/machine.xml";
                   ::mkfifo(p.c_str(), 0600);
                   return p;
                 },
                 "the path is not a regular file"},
        TopoCase{"device_path", [](const std::string&) { return std::string("/dev/zero"); },
                 "the path is not a regular file"},
        TopoCase{"directory_path", [](const std::string& d) { return d; }, "the path is not a regular file"},
        TopoCase{"empty_xml_file", [](const std::string& d) { return write_file(d + "/empty.xml", ""); }, "hwloc"},
        TopoCase{"truncated_xml",
                 [](const std::string& d) {
                   return write_file(d + "/cut.xml",
                                     "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM "
                                     "\"hwloc2.dtd\">\n<topology version=\"2.0\">\n  <object type=\"Machine\" "
                                     "os_index=\"0\" cpuset=\"0x000000ff\"");
                 },
                 "hwloc"},
        TopoCase{
            "xml_with_a_foreign_root",
            [](const std::string& d) { return write_file(d + "/svg.xml", "<?xml version=\"1.0\"?><svg></svg>\n"); },
            "hwloc"},
        TopoCase{"xml_over_64_mib",
                 [](const std::string& d) {
                   const std::string p = d + "/big.xml";
                   const int fd = ::open(p.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
                   if (fd >= 0) {
                     (void)::ftruncate(fd, (64LL << 20) + 1);  // sparse: no disk space used
                     ::close(fd);
                   }
                   return p;
                 },
                 "more than the limit of 67108864"}),
    [](const ::testing::TestParamInfo<TopoCase>& i) { return std::string(i.param.name); });

}  // namespace
