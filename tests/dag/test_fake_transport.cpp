// The deterministic fake transport: data movement, ordering, failures.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "strata/transport/fake.hpp"

using strata::Errc;
using strata::Status;
using namespace strata::transport;

namespace {
struct Recorder {
  std::vector<std::pair<void*, Errc>> completions;
  std::vector<std::pair<int, std::uint64_t>> signals;
  std::vector<int> failures;
  void attach(Transport& t) {
    t.set_completion_handler([this](void* c, const Status& s) { completions.emplace_back(c, s.code()); });
    t.set_signal_handler([this](int src, std::uint64_t p) { signals.emplace_back(src, p); });
    t.set_peer_failure_handler([this](int p, const Status&) { failures.push_back(p); });
  }
};
}  // namespace

TEST(FakeTransport, PutMovesDataOnlyWhenReleased) {
  FakeWorld w(2);
  Recorder r0, r1;
  r0.attach(w.endpoint(0));
  r1.attach(w.endpoint(1));
  char dst[8] = {};
  RemoteKey key;
  ASSERT_TRUE(w.endpoint(1).register_memory(dst, sizeof dst, &key).is_ok());
  const char src[8] = "abcdefg";
  int ctx = 0;
  ASSERT_TRUE(w.endpoint(0).put(1, src, 8, key, 0, &ctx).is_ok());
  EXPECT_EQ(w.pending_count(), 1u);
  w.progress_all();
  EXPECT_EQ(dst[0], 0) << "data moved before release";
  EXPECT_TRUE(w.release_next());
  EXPECT_STREQ(dst, "abcdefg");
  EXPECT_TRUE(r0.completions.empty()) << "completion delivered before progress";
  w.progress_all();
  ASSERT_EQ(r0.completions.size(), 1u);
  EXPECT_EQ(r0.completions[0].first, &ctx);
  EXPECT_EQ(r0.completions[0].second, Errc::ok);
}

TEST(FakeTransport, RejectsBadPostsWithoutCompletion) {
  FakeWorld w(2);
  Recorder r0;
  r0.attach(w.endpoint(0));
  char buf[16] = {};
  RemoteKey key;
  ASSERT_TRUE(w.endpoint(1).register_memory(buf, sizeof buf, &key).is_ok());
  EXPECT_EQ(w.endpoint(0).put(5, buf, 4, key, 0, nullptr).code(), Errc::unknown_peer);
  EXPECT_EQ(w.endpoint(0).put(1, buf, 8, key, 12, nullptr).code(), Errc::out_of_range);
  EXPECT_EQ(w.endpoint(0).put(0, buf, 8, key, 0, nullptr).code(), Errc::invalid_argument);  // key of rank 1
  ASSERT_TRUE(w.endpoint(1).deregister_memory(buf, sizeof buf).is_ok());
  EXPECT_EQ(w.endpoint(0).put(1, buf, 8, key, 0, nullptr).code(), Errc::not_registered);
  EXPECT_EQ(w.pending_count(), 0u);
  w.drain();
  EXPECT_TRUE(r0.completions.empty());
  EXPECT_THROW(FakeWorld(0), strata::Error);
}

TEST(FakeTransport, SignalsKeepPerPairOrderUnderRandomRelease) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    FakeWorld w(3, FakeMode::manual, seed);
    Recorder r2;
    r2.attach(w.endpoint(2));
    for (std::uint64_t i = 0; i < 10; ++i) {
      ASSERT_TRUE(w.endpoint(0).signal(2, i, nullptr).is_ok());
      ASSERT_TRUE(w.endpoint(1).signal(2, 100 + i, nullptr).is_ok());
    }
    while (w.release_random()) w.progress_all();
    w.progress_all();
    ASSERT_EQ(r2.signals.size(), 20u);
    std::uint64_t next0 = 0, next1 = 100;
    for (auto [src, p] : r2.signals) {
      if (src == 0) {
        EXPECT_EQ(p, next0++);
      }
      if (src == 1) {
        EXPECT_EQ(p, next1++);
      }
    }
  }
}

TEST(FakeTransport, PutWithSignalDataVisibleBeforeSignal) {
  FakeWorld w(2);
  char dst[4] = {};
  RemoteKey key;
  ASSERT_TRUE(w.endpoint(1).register_memory(dst, sizeof dst, &key).is_ok());
  bool seen = false;
  w.endpoint(1).set_signal_handler([&](int src, std::uint64_t p) {
    EXPECT_EQ(src, 0);
    EXPECT_EQ(p, 77u);
    EXPECT_EQ(std::memcmp(dst, "xyz", 4), 0);
    seen = true;
  });
  w.endpoint(0).set_completion_handler([](void*, const Status&) {});
  ASSERT_TRUE(w.endpoint(0).put_with_signal(1, "xyz", 4, key, 0, 77, nullptr).is_ok());
  w.drain();
  EXPECT_TRUE(seen);
}

TEST(FakeTransport, GetAndFetchAdd) {
  FakeWorld w(2, FakeMode::auto_complete);
  Recorder r0;
  r0.attach(w.endpoint(0));
  alignas(8) std::uint64_t word = 40;
  char remote[4] = "abc";
  RemoteKey kw, kr;
  ASSERT_TRUE(w.endpoint(1).register_memory(&word, 8, &kw).is_ok());
  ASSERT_TRUE(w.endpoint(1).register_memory(remote, 4, &kr).is_ok());
  std::uint64_t fetched = 0;
  char local[4] = {};
  ASSERT_TRUE(w.endpoint(0).fetch_add(1, kw, 0, 2, &fetched, nullptr).is_ok());
  ASSERT_TRUE(w.endpoint(0).get(1, local, 4, kr, 0, nullptr).is_ok());
  EXPECT_GE(w.endpoint(0).progress(), 2u);  // auto mode: progress releases and delivers
  EXPECT_EQ(fetched, 40u);
  EXPECT_EQ(word, 42u);
  EXPECT_STREQ(local, "abc");
  EXPECT_EQ(r0.completions.size(), 2u);
}

TEST(FakeTransport, FailInjectionAndKill) {
  FakeWorld w(3);
  Recorder r0, r2;
  r0.attach(w.endpoint(0));
  r2.attach(w.endpoint(2));
  int a = 0, b = 0, c = 0;
  ASSERT_TRUE(w.endpoint(0).signal(1, 1, &a).is_ok());
  ASSERT_TRUE(w.endpoint(0).signal(2, 2, &b).is_ok());
  ASSERT_TRUE(w.endpoint(0).signal(2, 3, &c).is_ok());
  auto ops = w.pending();
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_TRUE(w.fail(ops[1].id, Status(Errc::transport_error, "injected")));
  w.kill(1);
  EXPECT_EQ(w.endpoint(0).peer_status(1).code(), Errc::peer_dead);
  w.drain();
  ASSERT_EQ(r0.completions.size(), 3u);
  EXPECT_EQ(r0.completions[0].second, Errc::transport_error);  // failed first
  EXPECT_EQ(r0.completions[1].second, Errc::peer_dead);        // towards the killed rank
  EXPECT_EQ(r0.completions[2].second, Errc::ok);
  EXPECT_EQ(r0.failures, std::vector<int>{1});
  // The failed signal left a hole in the pair's order; the later one still arrives.
  ASSERT_EQ(r2.signals.size(), 1u);
  EXPECT_EQ(r2.signals[0].second, 3u);
  int d = 0;
  ASSERT_TRUE(w.endpoint(0).signal(1, 9, &d).is_ok());
  w.drain();
  EXPECT_EQ(r0.completions.back().second, Errc::peer_dead);
  w.fail_next([](const FakeOpInfo& op) { return op.target == 2; }, Status(Errc::timeout, "slow"));
  ASSERT_TRUE(w.endpoint(0).signal(2, 4, &d).is_ok());
  w.drain();
  EXPECT_EQ(r0.completions.back().second, Errc::timeout);
}
