// One rank of a libfabric-backend test scenario.
//
//   fabric_rank <rendezvous-socket> <rank> <size> <scenario> [provider] [timeout-ms]
//
// Scenarios: integrity, signals, pws_order, atomics, invalid, kill, pingpong, idle. Exit status 0
// on success; on failure a message naming the rank goes to stderr and the
// status is 1. The test binary (fabric_backend_test) starts the ranks.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend.hpp"
#include "strata/transport/topology.hpp"
#include "test_bootstrap.hpp"

namespace {

using strata::Errc;
using strata::Status;
using strata::transport::RemoteKey;
using strata::transport::detail::Backend;
using Clock = std::chrono::steady_clock;

int g_rank = -1;

[[noreturn]] void die(const std::string& what) {
  std::fflush(stdout);
  std::fprintf(stderr, "fabric_rank %d: FAILED: %s\n", g_rank, what.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

#define CHECK(cond, msg)                                                                              \
  do {                                                                                                \
    if (!(cond)) die(std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " #cond ": " + (msg)); \
  } while (0)

void check_ok(const Status& s, const std::string& what) {
  if (!s.is_ok()) die(what + ": " + s.message());
}

// Tags in the top byte of signal payloads.
constexpr std::uint64_t kTagShift = 56;
enum Tag : std::uint64_t { kData = 1, kBye = 2, kStep = 3, kSeq = 4, kPws = 5, kDone = 6 };
std::uint64_t tagged(Tag t, std::uint64_t v) { return (static_cast<std::uint64_t>(t) << kTagShift) | v; }
Tag tag_of(std::uint64_t p) { return static_cast<Tag>(p >> kTagShift); }
std::uint64_t val_of(std::uint64_t p) { return p & ((std::uint64_t{1} << kTagShift) - 1); }

/// Per-rank harness: a backend, handlers that record events, helpers to wait.
struct Rank {
  strata::fabric_test::SocketBootstrap boot;
  std::unique_ptr<Backend> be;
  int me;
  int n;
  std::chrono::milliseconds timeout;
  std::mutex mu;
  struct Completion {
    void* ctx;
    Status st;
  };
  std::vector<Completion> completions;
  std::vector<std::vector<std::uint64_t>> signals;  // per source, in delivery order
  std::vector<Status> failed;                       // per peer
  std::function<void(int, std::uint64_t)> on_signal_hook;

  Rank(const std::string& path, int rank, int size, const std::string& provider, std::chrono::milliseconds t)
      : boot(path, rank, size), me(rank), n(size), timeout(t) {
    strata::transport::TransportOptions o;
    o.provider = provider;
    o.timeout = t;
    std::vector<bool> serve(static_cast<std::size_t>(size), true);
    serve[static_cast<std::size_t>(rank)] = false;
    strata::Hierarchy hier;  // not needed by the backend
    be = strata::transport::detail::make_fabric_backend(boot, hier, serve, o);
    signals.resize(static_cast<std::size_t>(size));
    failed.resize(static_cast<std::size_t>(size));
    be->set_completion_handler([this](void* ctx, const Status& st) {
      std::lock_guard<std::mutex> lk(mu);
      completions.push_back({ctx, st});
    });
    be->set_signal_handler([this](int src, std::uint64_t payload) {
      if (on_signal_hook) on_signal_hook(src, payload);
      std::lock_guard<std::mutex> lk(mu);
      CHECK(src >= 0 && src < n, "signal from unknown source " + std::to_string(src));
      signals[static_cast<std::size_t>(src)].push_back(payload);
    });
    be->set_peer_failure_handler([this](int peer, const Status& why) {
      std::lock_guard<std::mutex> lk(mu);
      failed[static_cast<std::size_t>(peer)] = why;
    });
  }

  /// Progresses until pred() holds; dies after `limit`.
  void wait_until(const std::function<bool()>& pred, const std::string& what,
                  std::chrono::milliseconds limit = std::chrono::milliseconds(0)) {
    if (limit.count() == 0) limit = timeout + std::chrono::milliseconds(30000);
    auto deadline = Clock::now() + limit;
    for (;;) {
      be->progress();
      {
        std::lock_guard<std::mutex> lk(mu);
        if (pred()) return;
      }
      if (Clock::now() > deadline) die("timed out waiting for " + what);
      be->wait_for_event(std::chrono::microseconds(2000));
    }
  }

  /// Waits for the completion of ctx; returns its status.
  Status wait_completion(void* ctx, const std::string& what) {
    Status out;
    wait_until(
        [&] {
          for (std::size_t i = 0; i < completions.size(); ++i) {
            if (completions[i].ctx == ctx) {
              out = completions[i].st;
              completions.erase(completions.begin() + static_cast<std::ptrdiff_t>(i));
              return true;
            }
          }
          return false;
        },
        what);
    return out;
  }

  /// Waits for the next signal from src carrying tag t; returns its value.
  std::uint64_t wait_signal(int src, Tag t, const std::string& what) {
    std::uint64_t v = 0;
    wait_until(
        [&] {
          auto& q = signals[static_cast<std::size_t>(src)];
          for (std::size_t i = 0; i < q.size(); ++i) {
            if (tag_of(q[i]) == t) {
              v = val_of(q[i]);
              q.erase(q.begin() + static_cast<std::ptrdiff_t>(i));
              return true;
            }
          }
          return false;
        },
        what);
    return v;
  }

  /// Quiesce: every rank signals bye to all live peers and waits for theirs
  /// (so nobody stops progressing while a peer still needs it), then a barrier.
  void finish(const std::vector<bool>& skip = {}) {
    static int ctx_bye;
    std::vector<int> peers;
    for (int p = 0; p < n; ++p)
      if (p != me && (skip.empty() || !skip[static_cast<std::size_t>(p)])) peers.push_back(p);
    for (int p : peers) check_ok(be->signal(p, tagged(kBye, 0), &ctx_bye), "bye to " + std::to_string(p));
    for (int p : peers) wait_signal(p, kBye, "bye from rank " + std::to_string(p));
    for (std::size_t i = 0; i < peers.size(); ++i) {
      Status st = wait_completion(&ctx_bye, "bye completion");
      check_ok(st, "bye completion");
    }
    if (skip.empty()) boot.barrier();
  }

  std::vector<RemoteKey> exchange_key(const RemoteKey& k) {
    auto all = boot.allgather(&k, sizeof(k));
    std::vector<RemoteKey> out(all.size());
    for (std::size_t i = 0; i < all.size(); ++i) {
      CHECK(all[i].size() == sizeof(RemoteKey), "bad key blob");
      std::memcpy(&out[i], all[i].data(), sizeof(RemoteKey));
    }
    return out;
  }
};

std::uint8_t pattern(int rank, std::size_t size, std::size_t i, int salt) {
  return static_cast<std::uint8_t>(
      (i * 131u + size * 7u + static_cast<std::size_t>(rank) * 31u + static_cast<std::size_t>(salt) * 17u + (i >> 12)) &
      0xffu);
}

// ---------------------------------------------------------------- integrity
// Ring: rank r writes into (r+1)'s buffer and reads from (r-1)'s buffer.
int scenario_integrity(Rank& R) {
  // 960 / 961: the largest put_with_signal sent inline on the message path, and one more.
  const std::vector<std::size_t> sizes = {0, 1, 7, 960, 961, 4096, (std::size_t{1} << 20) + 13, std::size_t{64} << 20};
  const std::size_t maxsz = sizes.back();
  const std::size_t guard = 64;
  const std::size_t off = 3;  // unaligned offset into the remote buffer
  std::vector<std::uint8_t> src(maxsz);
  std::vector<std::uint8_t> dst(maxsz + off + guard);
  std::vector<std::uint8_t> got(maxsz + guard);
  RemoteKey dkey;
  RemoteKey skey;
  check_ok(R.be->register_memory(dst.data(), dst.size(), &dkey), "register dst");
  check_ok(R.be->register_memory(src.data(), src.size(), &skey), "register src");
  CHECK((dkey.flags & RemoteKey::kFabric) != 0, "dst key lacks the fabric section");
  auto dkeys = R.exchange_key(dkey);
  auto skeys = R.exchange_key(skey);
  const int right = (R.me + 1) % R.n;
  const int left = (R.me + R.n - 1) % R.n;
  int ctx = 0;
  for (int salt = 0; salt < 2; ++salt) {  // salt 0: put, salt 1: put_with_signal
    for (std::size_t sz : sizes) {
      for (std::size_t i = 0; i < sz; ++i) src[i] = pattern(R.me, sz, i, salt);
      std::memset(dst.data(), 0xEE, dst.size());
      R.boot.barrier();  // everyone's dst is reset before anybody writes
      std::uint64_t sigval = (static_cast<std::uint64_t>(salt) << 40) | sz;
      if (salt == 0) {
        check_ok(R.be->put(right, src.data(), sz, dkeys[static_cast<std::size_t>(right)], off, &ctx), "put");
        check_ok(R.wait_completion(&ctx, "put completion"), "put size " + std::to_string(sz));
        check_ok(R.be->signal(right, tagged(kData, sigval), &ctx), "signal");
        check_ok(R.wait_completion(&ctx, "signal completion"), "signal");
      } else {
        check_ok(R.be->put_with_signal(right, src.data(), sz, dkeys[static_cast<std::size_t>(right)], off,
                                       tagged(kData, sigval), &ctx),
                 "put_with_signal");
        check_ok(R.wait_completion(&ctx, "pws completion"), "put_with_signal size " + std::to_string(sz));
      }
      std::uint64_t v = R.wait_signal(left, kData, "data signal size " + std::to_string(sz));
      CHECK(v == sigval, "signal payload " + std::to_string(v) + " expected " + std::to_string(sigval));
      for (std::size_t i = 0; i < off; ++i) CHECK(dst[i] == 0xEE, "guard before the written range modified");
      for (std::size_t i = 0; i < sz; ++i)
        if (dst[off + i] != pattern(left, sz, i, salt))
          die("size " + std::to_string(sz) + " salt " + std::to_string(salt) + ": byte " + std::to_string(i) +
              " differs");
      for (std::size_t i = 0; i < guard; ++i) CHECK(dst[off + sz + i] == 0xEE, "guard after the range modified");
    }
  }
  // get: read left's src (pattern salt 2) into got.
  for (std::size_t sz : sizes) {
    for (std::size_t i = 0; i < sz; ++i) src[i] = pattern(R.me, sz, i, 2);
    std::memset(got.data(), 0xEE, got.size());
    R.boot.barrier();
    check_ok(R.be->get(left, got.data(), sz, skeys[static_cast<std::size_t>(left)], 0, &ctx), "get");
    check_ok(R.wait_completion(&ctx, "get completion"), "get size " + std::to_string(sz));
    for (std::size_t i = 0; i < sz; ++i)
      if (got[i] != pattern(left, sz, i, 2)) die("get size " + std::to_string(sz) + ": byte " + std::to_string(i));
    for (std::size_t i = 0; i < guard; ++i) CHECK(got[sz + i] == 0xEE, "get wrote past the length");
    // the peer must not overwrite our src before we read it: finish the round
    check_ok(R.be->signal(right, tagged(kStep, sz), &ctx), "step");
    check_ok(R.wait_completion(&ctx, "step completion"), "step");
    R.wait_signal(left, kStep, "step");
  }
  R.finish();
  check_ok(R.be->deregister_memory(dst.data(), dst.size()), "deregister");
  check_ok(R.be->deregister_memory(src.data(), src.size()), "deregister");
  return 0;
}

// ---------------------------------------------------------------- signals
// Every rank sends K tagged sequence numbers to every peer (every 7th one as
// a put_with_signal of 8 bytes); receivers check no loss and per-pair order.
// FABRIC_TEST_MAILBOXES=1|0: the backend must (not) use mailboxes.
void check_mailboxes(const Rank& R) {
  const char* want = std::getenv("FABRIC_TEST_MAILBOXES");
  if (want == nullptr) return;
  const bool has = R.be->name().find("+mailboxes") != std::string::npos;
  CHECK(has == (std::string(want) == "1"), "backend " + R.be->name() + ": mailboxes expected " + want);
}

int scenario_signals(Rank& R) {
  check_mailboxes(R);
  const std::uint64_t K =
      std::getenv("FABRIC_TEST_K") ? std::strtoull(std::getenv("FABRIC_TEST_K"), nullptr, 10) : 5000;
  std::vector<std::uint64_t> landing(static_cast<std::size_t>(R.n), 0);
  RemoteKey k;
  check_ok(R.be->register_memory(landing.data(), landing.size() * 8, &k), "register");
  auto keys = R.exchange_key(k);
  std::atomic<std::uint64_t> done{0};
  std::atomic<std::uint64_t> errors{0};
  Status first_error;
  R.be->set_completion_handler([&](void*, const Status& st) {
    if (!st.is_ok() && errors++ == 0) first_error = st;
    done++;
  });
  std::uint64_t posted = 0;
  std::uint64_t word = 0;
  for (std::uint64_t i = 0; i < K; ++i) {
    for (int p = 0; p < R.n; ++p) {
      if (p == R.me) continue;
      Status s;
      if (i % 7 == 3) {
        word = i;
        s = R.be->put_with_signal(p, &word, 8, keys[static_cast<std::size_t>(p)], static_cast<std::uint64_t>(R.me) * 8,
                                  tagged(kSeq, i), nullptr);
      } else {
        s = R.be->signal(p, tagged(kSeq, i), nullptr);
      }
      check_ok(s, "signal post");
      ++posted;
    }
    if (i % 64 == 0) R.be->progress();
  }
  R.wait_until([&] { return done.load() == posted; }, "signal completions");
  CHECK(errors.load() == 0,
        std::to_string(errors.load()) + " signal completions failed, first: " + first_error.message());
  R.wait_until(
      [&] {
        for (int p = 0; p < R.n; ++p)
          if (p != R.me && R.signals[static_cast<std::size_t>(p)].size() < K) return false;
        return true;
      },
      "all signals");
  {
    std::lock_guard<std::mutex> lk(R.mu);
    for (int p = 0; p < R.n; ++p) {
      if (p == R.me) continue;
      auto& q = R.signals[static_cast<std::size_t>(p)];
      CHECK(q.size() >= K, "from rank " + std::to_string(p) + ": " + std::to_string(q.size()) + " signals");
      for (std::uint64_t i = 0; i < K; ++i)
        CHECK(q[i] == tagged(kSeq, i), "from rank " + std::to_string(p) + ": position " + std::to_string(i) +
                                           " holds " + std::to_string(val_of(q[i])));
      for (std::size_t i = K; i < q.size(); ++i) CHECK(tag_of(q[i]) == kBye, "more sequence signals than sent");
      q.erase(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(K));
    }
  }
  R.be->set_completion_handler([&R](void* ctx, const Status& st) {
    std::lock_guard<std::mutex> lk(R.mu);
    R.completions.push_back({ctx, st});
  });
  std::printf("rank %d: %llu signals per peer in order over %s\n", R.me, static_cast<unsigned long long>(K),
              R.be->name().c_str());
  R.finish();
  return 0;
}

// ---------------------------------------------------------------- pws_order
// Every rank streams K put_with_signal to every peer, sizes cycling through
// the inline limit (960 B: the data rides in the signal message on the
// message path) and past it (write + message), each into its own range of
// the target's buffer. The target's signal handler checks, for each signal,
// that it is the next one from that source and that its data is already
// there: data before signal, in order, on both paths, with several peers.
int scenario_pws_order(Rank& R) {
  check_mailboxes(R);
  const std::uint64_t K = std::getenv("FABRIC_TEST_K") ? std::strtoull(std::getenv("FABRIC_TEST_K"), nullptr, 10) : 300;
  const std::vector<std::size_t> sizes = {1, 8, 0, 64, 500, 959, 960, 961, 1100, 4096};
  const std::size_t stride = 4096;
  const std::size_t per_src = K * stride;
  std::vector<std::uint8_t> inbox(per_src * static_cast<std::size_t>(R.n), 0);
  std::vector<std::uint8_t> src(per_src);
  auto size_of = [&](std::uint64_t i) { return sizes[i % sizes.size()]; };
  auto byte_of = [](int from, std::uint64_t i, std::size_t j) {
    return static_cast<std::uint8_t>((static_cast<std::size_t>(from) * 29u + i * 13u + j * 7u + 1u) & 0xffu);
  };
  for (std::uint64_t i = 0; i < K; ++i)
    for (std::size_t j = 0; j < size_of(i); ++j) src[i * stride + j] = byte_of(R.me, i, j);
  RemoteKey k;
  check_ok(R.be->register_memory(inbox.data(), inbox.size(), &k), "register inbox");
  RemoteKey sk;
  check_ok(R.be->register_memory(src.data(), src.size(), &sk), "register source");
  auto keys = R.exchange_key(k);
  std::vector<std::uint64_t> next(static_cast<std::size_t>(R.n), 0);  // per source: the next expected sequence
  std::atomic<std::uint64_t> checked{0};
  R.on_signal_hook = [&](int from, std::uint64_t p) {
    if (tag_of(p) != kSeq) return;
    CHECK(from >= 0 && from < R.n && from != R.me, "signal from rank " + std::to_string(from));
    const std::uint64_t i = val_of(p);
    CHECK(i == next[static_cast<std::size_t>(from)], "from rank " + std::to_string(from) + ": signal " +
                                                         std::to_string(i) + " arrived, expected " +
                                                         std::to_string(next[static_cast<std::size_t>(from)]));
    ++next[static_cast<std::size_t>(from)];
    const std::uint8_t* d = inbox.data() + static_cast<std::size_t>(from) * per_src + i * stride;
    for (std::size_t j = 0; j < size_of(i); ++j)
      CHECK(d[j] == byte_of(from, i, j), "from rank " + std::to_string(from) + ": signal " + std::to_string(i) + " (" +
                                             std::to_string(size_of(i)) + " B) ran before byte " + std::to_string(j) +
                                             " of its data was visible");
    checked++;
  };
  std::atomic<std::uint64_t> done{0};
  std::atomic<std::uint64_t> errors{0};
  R.be->set_completion_handler([&](void*, const Status& st) {
    if (!st.is_ok()) errors++;
    done++;
  });
  R.boot.barrier();  // every handler is installed before the first signal
  std::uint64_t posted = 0;
  for (std::uint64_t i = 0; i < K; ++i) {
    for (int p = 0; p < R.n; ++p) {
      if (p == R.me) continue;
      check_ok(R.be->put_with_signal(p, src.data() + i * stride, size_of(i), keys[static_cast<std::size_t>(p)],
                                     static_cast<std::uint64_t>(R.me) * per_src + i * stride, tagged(kSeq, i), nullptr),
               "put_with_signal " + std::to_string(i) + " to rank " + std::to_string(p));
      ++posted;
    }
    if (i % 16 == 0) R.be->progress();
  }
  const std::uint64_t expect = K * static_cast<std::uint64_t>(R.n - 1);
  R.wait_until([&] { return done.load() == posted && checked.load() == expect; }, "put_with_signal stream");
  CHECK(errors.load() == 0, std::to_string(errors.load()) + " completions failed");
  R.be->set_completion_handler([&R](void* ctx, const Status& st) {
    std::lock_guard<std::mutex> lk(R.mu);
    R.completions.push_back({ctx, st});
  });
  {
    std::lock_guard<std::mutex> lk(R.mu);
    for (auto& q : R.signals)  // keep a fast peer's bye
      q.erase(std::remove_if(q.begin(), q.end(), [](std::uint64_t p) { return tag_of(p) == kSeq; }), q.end());
  }
  std::printf("rank %d: %llu put_with_signal per peer, data before signal and in order over %s\n", R.me,
              static_cast<unsigned long long>(K), R.be->name().c_str());
  R.finish();
  R.on_signal_hook = nullptr;
  return 0;
}

// ---------------------------------------------------------------- atomics
int scenario_atomics(Rank& R) {
  const int M = 300;
  alignas(8) std::uint64_t counter[2] = {0, 0};
  RemoteKey k;
  check_ok(R.be->register_memory(counter, sizeof(counter), &k), "register");
  auto keys = R.exchange_key(k);
  std::vector<std::uint64_t> fetched(static_cast<std::size_t>(M), ~std::uint64_t{0});
  if (R.me != 0) {
    std::vector<int> ctx(static_cast<std::size_t>(M));
    for (int i = 0; i < M; ++i)
      check_ok(
          R.be->fetch_add(0, keys[0], 8, 1, &fetched[static_cast<std::size_t>(i)], &ctx[static_cast<std::size_t>(i)]),
          "fetch_add");
    for (int i = 0; i < M; ++i)
      check_ok(R.wait_completion(&ctx[static_cast<std::size_t>(i)], "fetch_add completion"), "fetch_add");
    int c = 0;
    check_ok(R.be->signal(0, tagged(kDone, 0), &c), "done");
    check_ok(R.wait_completion(&c, "done"), "done");
  } else {
    for (int p = 1; p < R.n; ++p) R.wait_signal(p, kDone, "atomics done");
    CHECK(counter[1] == static_cast<std::uint64_t>(M) * static_cast<std::uint64_t>(R.n - 1),
          "counter " + std::to_string(counter[1]));
    CHECK(counter[0] == 0, "neighbouring word modified");
  }
  auto all = R.boot.allgather(fetched.data(), fetched.size() * 8);
  if (R.me == 0) {
    std::vector<int> seen(static_cast<std::size_t>(M * (R.n - 1)), 0);
    for (int p = 1; p < R.n; ++p) {
      const auto* v = reinterpret_cast<const std::uint64_t*>(all[static_cast<std::size_t>(p)].data());
      for (int i = 0; i < M; ++i) {
        CHECK(v[i] < seen.size(), "fetched value out of range: " + std::to_string(v[i]));
        CHECK(seen[v[i]]++ == 0, "fetched value seen twice: " + std::to_string(v[i]));
      }
    }
    std::printf("rank 0: %d fetch_adds from %d ranks are atomic\n", M, R.n - 1);
  }
  R.finish();
  return 0;
}

// ---------------------------------------------------------------- invalid use
void expect_err(const Status& s, Errc code, const std::string& what, const std::string& must_contain) {
  if (s.is_ok()) die(what + ": accepted");
  if (s.code() != code)
    die(what + ": code " + std::to_string(static_cast<int>(s.code())) + " expected " +
        std::to_string(static_cast<int>(code)) + " (" + s.message() + ")");
  if (s.message().find(must_contain) == std::string::npos)
    die(what + ": message '" + s.message() + "' lacks '" + must_contain + "'");
}

int scenario_invalid(Rank& R) {
  std::vector<std::uint8_t> buf(4096, 0x5A);
  RemoteKey k;
  check_ok(R.be->register_memory(buf.data(), buf.size(), &k), "register");
  auto keys = R.exchange_key(k);
  const int peer = (R.me + 1) % R.n;
  const RemoteKey& pk = keys[static_cast<std::size_t>(peer)];
  std::uint64_t word = 0;
  const std::string me = "rank " + std::to_string(R.me);
  expect_err(R.be->put(-1, buf.data(), 8, pk, 0, nullptr), Errc::unknown_peer, "put to -1", "peer -1");
  expect_err(R.be->put(R.n, buf.data(), 8, pk, 0, nullptr), Errc::unknown_peer, "put to n", me);
  expect_err(R.be->put(R.me, buf.data(), 8, k, 0, nullptr), Errc::unknown_peer, "put to self", "not served");
  expect_err(R.be->put(peer, buf.data(), 4097, pk, 0, nullptr), Errc::out_of_range, "put too long", "4096 bytes");
  expect_err(R.be->put(peer, buf.data(), 8, pk, 4090, nullptr), Errc::out_of_range, "put past end", "offset 4090");
  expect_err(R.be->put(peer, buf.data(), 1, pk, ~std::uint64_t{0}, nullptr), Errc::out_of_range, "offset overflow",
             "offset");
  expect_err(R.be->get(peer, buf.data(), 8, pk, 4089, nullptr), Errc::out_of_range, "get past end", "exceeds");
  expect_err(R.be->put_with_signal(peer, buf.data(), 8, pk, 4092, 1, nullptr), Errc::out_of_range, "pws past end",
             "exceeds");
  expect_err(R.be->put(peer, nullptr, 8, pk, 0, nullptr), Errc::invalid_argument, "null src", "src is null");
  expect_err(R.be->put(peer, buf.data(), 8, k, 0, nullptr), Errc::invalid_argument, "foreign key", "belongs to rank");
  RemoteKey empty;
  expect_err(R.be->put(peer, buf.data(), 8, empty, 0, nullptr), Errc::invalid_argument, "empty key", "no libfabric");
  expect_err(R.be->fetch_add(peer, pk, 4, 1, &word, nullptr), Errc::invalid_argument, "misaligned fetch_add",
             "misaligned");
  expect_err(R.be->fetch_add(peer, pk, 4096, 1, &word, nullptr), Errc::out_of_range, "fetch_add past end", "exceeds");
  expect_err(R.be->fetch_add(peer, pk, 0, 1, nullptr, nullptr), Errc::invalid_argument, "null fetched", "fetched");
  expect_err(R.be->register_memory(nullptr, 8, &k), Errc::invalid_argument, "register null", "register_memory");
  expect_err(R.be->peer_status(99), Errc::unknown_peer, "peer_status(99)", "99");
  CHECK(R.be->peer_status(peer).is_ok(), "peer reported dead");
  // nothing above may have produced a completion
  R.be->progress();
  {
    std::lock_guard<std::mutex> lk(R.mu);
    CHECK(R.completions.empty(), "a rejected operation produced a completion");
  }
  for (auto b : buf) CHECK(b == 0x5A, "a rejected operation touched memory");
  R.finish();
  R.be->shutdown();
  expect_err(R.be->put(peer, buf.data(), 8, pk, 0, nullptr), Errc::shutdown, "put after shutdown", "shutdown");
  expect_err(R.be->signal(peer, 1, nullptr), Errc::shutdown, "signal after shutdown", me);
  std::printf("rank %d: invalid use rejected with clear errors\n", R.me);
  return 0;
}

// ---------------------------------------------------------------- kill
// The last rank dies (SIGKILL) after receiving 20 data signals; the others
// stream put_with_signal to it and must get an error naming it within
// STRATA_TIMEOUT (+ slack); survivors then still talk to each other.
int scenario_kill(Rank& R) {
  const int victim = R.n - 1;
  std::vector<std::uint8_t> buf(1 << 16, 1);
  RemoteKey k;
  check_ok(R.be->register_memory(buf.data(), buf.size(), &k), "register");
  auto keys = R.exchange_key(k);
  if (R.me == victim) {
    std::size_t got = 0;
    R.wait_until(
        [&] {
          got = 0;
          for (int p = 0; p < R.n; ++p) got += R.signals[static_cast<std::size_t>(p)].size();
          return got >= 20;
        },
        "data before dying");
    std::printf("rank %d: dying now (SIGKILL)\n", R.me);
    std::fflush(stdout);
    ::kill(::getpid(), SIGKILL);
    return 1;
  }
  auto start = Clock::now();
  std::vector<int> ctxs(4);
  int inflight = 0;
  Status failure;
  std::uint64_t sent = 0;
  // keep up to 4 operations in flight to the victim until one fails
  while (failure.is_ok()) {
    while (inflight < 4 && failure.is_ok()) {
      Status s = R.be->put_with_signal(victim, buf.data(), 4096, keys[static_cast<std::size_t>(victim)],
                                       static_cast<std::uint64_t>(R.me) * 4096, tagged(kData, sent),
                                       &ctxs[static_cast<std::size_t>(inflight)]);
      if (!s.is_ok()) {
        failure = s;
        break;
      }
      ++inflight;
      ++sent;
    }
    if (!failure.is_ok()) break;
    R.wait_until([&] { return !R.completions.empty(); }, "a completion from the victim");
    std::lock_guard<std::mutex> lk(R.mu);
    for (auto& c : R.completions) {
      --inflight;
      if (!c.st.is_ok() && failure.is_ok()) failure = c.st;
    }
    R.completions.clear();
  }
  auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  std::printf("rank %d: error after %lld ms and %llu sends: %s\n", R.me, static_cast<long long>(elapsed.count()),
              static_cast<unsigned long long>(sent), failure.message().c_str());
  std::fflush(stdout);
  CHECK(failure.code() == Errc::peer_dead || failure.code() == Errc::timeout || failure.code() == Errc::transport_error,
        "unexpected code " + std::to_string(static_cast<int>(failure.code())));
  CHECK(failure.message().find("rank " + std::to_string(victim)) != std::string::npos,
        "error does not name the victim: " + failure.message());
  CHECK(elapsed < R.timeout + std::chrono::milliseconds(5000), "error came too late");
  CHECK(!R.be->peer_status(victim).is_ok(), "victim still reported alive");
  // remaining in-flight ops must all complete (with errors), nothing hangs
  R.wait_until([&] { return static_cast<int>(R.completions.size()) >= inflight; }, "remaining completions");
  std::vector<bool> skip(static_cast<std::size_t>(R.n), false);
  skip[static_cast<std::size_t>(victim)] = true;
  R.finish(skip);  // survivors still work together
  return 0;
}

// ---------------------------------------------------------------- pingpong
// put_with_signal ping-pong of 8 bytes between ranks 0 and 1, first busy
// polling, then blocking in wait_for_event (which must wake promptly: a lost
// wake-up would cost the full 1 s wait per round trip), then put bandwidth.
int scenario_pingpong(Rank& R) {
  const int iters = 2000;
  const std::size_t bw_size = std::size_t{4} << 20;
  std::vector<std::uint8_t> buf(bw_size, 7);
  RemoteKey k;
  check_ok(R.be->register_memory(buf.data(), buf.size(), &k), "register");
  auto keys = R.exchange_key(k);
  const int peer = 1 - R.me;
  std::uint64_t expected = 0;
  std::atomic<std::uint64_t> last{0};
  R.on_signal_hook = [&](int, std::uint64_t p) {
    if (tag_of(p) == kSeq) last = val_of(p);
  };
  R.be->set_completion_handler([](void*, const Status& st) { check_ok(st, "pingpong completion"); });
  for (int blocking = 0; blocking < 2; ++blocking) {
    const int n = blocking ? 200 : iters;
    auto t0 = Clock::now();
    for (int i = 0; i < n + 10; ++i) {
      if (i == 10) t0 = Clock::now();
      if (R.me == 0) {
        check_ok(R.be->put_with_signal(peer, buf.data(), 8, keys[static_cast<std::size_t>(peer)], 0,
                                       tagged(kSeq, ++expected), nullptr),
                 "ping");
        while (last.load() != expected) {
          R.be->progress();
          if (blocking && last.load() != expected) R.be->wait_for_event(std::chrono::microseconds(1000000));
        }
      } else {
        ++expected;
        while (last.load() != expected) {
          R.be->progress();
          if (blocking && last.load() != expected) R.be->wait_for_event(std::chrono::microseconds(1000000));
        }
        check_ok(R.be->put_with_signal(peer, buf.data(), 8, keys[static_cast<std::size_t>(peer)], 0,
                                       tagged(kSeq, expected), nullptr),
                 "pong");
      }
    }
    double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n / 2;
    if (R.me == 0)
      std::printf("backend %s put_with_signal 8 B one-way latency (%s): %.2f us\n", R.be->name().c_str(),
                  blocking ? "blocking waits" : "polling", us);
    std::fflush(stdout);
    CHECK(!blocking || us < 50000, "wait_for_event missed wake-ups");
  }
  // bandwidth: rank 0 puts bw_size bytes, window 8, 64 rounds; completions are delivery complete
  std::atomic<int> inflight{0};
  R.be->set_completion_handler([&](void*, const Status& st) {
    check_ok(st, "bandwidth completion");
    inflight--;
  });
  R.boot.barrier();
  if (R.me == 0) {
    const int rounds = 64;
    auto t0 = Clock::now();
    for (int i = 0; i < rounds; ++i) {
      while (inflight.load() >= 8) R.be->progress();
      inflight++;
      check_ok(R.be->put(peer, buf.data(), bw_size, keys[static_cast<std::size_t>(peer)], 0, nullptr), "bw put");
    }
    while (inflight.load() > 0) R.be->progress();
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("backend %s put bandwidth %zu B: %.1f MB/s\n", R.be->name().c_str(), bw_size,
                static_cast<double>(bw_size) * rounds / s / 1e6);
    std::fflush(stdout);
    check_ok(R.be->signal(peer, tagged(kDone, 0), nullptr), "done");
  } else {
    // the target keeps polling (manual progress) like the raw benchmark's target
    std::atomic<bool> stop{false};
    R.on_signal_hook = [&](int, std::uint64_t p) {
      if (tag_of(p) == kDone) stop = true;
    };
    while (!stop.load()) R.be->progress();
  }
  while (inflight.load() > 0) R.be->progress();
  R.be->set_completion_handler([&R](void* ctx, const Status& st) {
    std::lock_guard<std::mutex> lk(R.mu);
    R.completions.push_back({ctx, st});
  });
  R.finish();
  return 0;
}

// ---------------------------------------------------------------- idle
// A rank that serves nobody still takes part in construction.
int scenario_idle(const std::string& path, int rank, int size, const std::string& provider) {
  strata::fabric_test::SocketBootstrap boot(path, rank, size);
  strata::transport::TransportOptions o;
  o.provider = provider;
  // ranks 0 and 1 serve each other; the rest serve nobody
  std::vector<bool> serve(static_cast<std::size_t>(size), false);
  if (rank == 0) serve[1] = true;
  if (rank == 1) serve[0] = true;
  strata::Hierarchy hier;
  auto be = strata::transport::detail::make_fabric_backend(boot, hier, serve, o);
  if (rank > 1) {
    RemoteKey k;
    int x = 0;
    check_ok(be->register_memory(&x, sizeof(x), &k), "register without fabric");
    expect_err(be->signal(0, 1, nullptr), Errc::unknown_peer, "signal from an idle rank", "not served");
  }
  boot.barrier();
  std::printf("rank %d: constructed (%s)\n", rank, be->name().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s <socket> <rank> <size> <scenario> [provider] [timeout-ms]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const int rank = std::atoi(argv[2]);
  const int size = std::atoi(argv[3]);
  const std::string scenario = argv[4];
  const std::string provider = argc > 5 ? argv[5] : "";
  const auto timeout = std::chrono::milliseconds(argc > 6 ? std::atoi(argv[6]) : 10000);
  g_rank = rank;
  try {
    if (scenario == "idle") return scenario_idle(path, rank, size, provider);
    Rank R(path, rank, size, provider, timeout);
    if (scenario == "integrity") return scenario_integrity(R);
    if (scenario == "signals") return scenario_signals(R);
    if (scenario == "pws_order") return scenario_pws_order(R);
    if (scenario == "atomics") return scenario_atomics(R);
    if (scenario == "invalid") return scenario_invalid(R);
    if (scenario == "kill") return scenario_kill(R);
    if (scenario == "pingpong") return scenario_pingpong(R);
    die("unknown scenario " + scenario);
  } catch (const std::exception& e) {
    die(std::string("exception: ") + e.what());
  }
}
