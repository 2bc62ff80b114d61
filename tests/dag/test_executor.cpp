// The executor over the deterministic fake transport.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include <unistd.h>

#include "strata/dag/executor.hpp"
#include "strata/transport/fake.hpp"

using namespace strata::dag;
using strata::Errc;
using strata::Status;
using strata::transport::FakeMode;
using strata::transport::FakeOpInfo;
using strata::transport::FakeOrder;
using strata::transport::FakeWorld;
using strata::transport::RemoteKey;

namespace {

// N executors over one FakeWorld, sharing one 2-thread arena.
struct Cluster {
  tbb::task_arena arena{2, 0};
  FakeWorld world;
  std::vector<std::unique_ptr<Executor>> ex;
  Cluster(int n, FakeMode mode = FakeMode::manual, std::uint64_t seed = 1) : world(n, mode, seed) {
    for (int r = 0; r < n; ++r) {
      ExecutorOptions o;
      o.arena = &arena;
      ex.push_back(std::make_unique<Executor>(world.endpoint(r), o));
    }
  }
  // Releases operations (in random order when asked) and delivers events until
  // done() holds; a generous wall-clock bound turns a hang into a failure.
  bool pump(const std::function<bool()>& done, bool random = false) {
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!done()) {
      if (std::chrono::steady_clock::now() > limit) return false;
      const bool moved = random ? world.release_random() : world.release_all() > 0;
      if (world.progress_all() == 0 && !moved) std::this_thread::yield();
    }
    return true;
  }
};

struct Done {
  std::atomic<int> calls{0};
  std::mutex mu;
  Status status;
  DoneFn fn() {
    return [this](const Status& s) {
      std::lock_guard<std::mutex> g(mu);
      status = s;
      calls.fetch_add(1);
    };
  }
  bool done() const { return calls.load() > 0; }
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

}  // namespace

TEST(Executor, ChainRunsNodesInDependencyOrder) {
  Cluster c(1);
  std::vector<int> order;
  PlanBuilder b("chain", 0, 1);
  NodeId prev = kNoNode;
  for (int i = 0; i < 100; ++i) {
    ComputeFn f = [&order, i](const ComputeArgs&) { order.push_back(i); };
    prev = b.compute(f, Region{}, prev == kNoNode ? std::vector<NodeId>{} : std::vector<NodeId>{prev});
  }
  auto plan = b.build();
  Done d;
  ASSERT_TRUE(c.ex[0]->start(plan, {}, 0, 0, d.fn()).is_ok());
  ASSERT_TRUE(c.pump([&] { return d.done(); }));
  EXPECT_TRUE(d.status.is_ok()) << d.status.message();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
  EXPECT_EQ(c.ex[0]->in_flight(), 0u);
}

TEST(Executor, FanOutFanInJoinsAfterAllBranches) {
  Cluster c(1);
  std::atomic<int> branches{0};
  int seen_at_join = -1;
  PlanBuilder b("fan", 0, 1);
  NodeId root = b.nop();
  std::vector<NodeId> mid;
  for (int i = 0; i < 64; ++i)
    mid.push_back(b.compute([&](const ComputeArgs&) { branches.fetch_add(1); }, Region{}, {root}));
  b.compute([&](const ComputeArgs&) { seen_at_join = branches.load(); }, Region{}, mid);
  auto plan = b.build();
  Done d;
  ASSERT_TRUE(c.ex[0]->start(plan, {}, 0, 0, d.fn()).is_ok());
  ASSERT_TRUE(c.pump([&] { return d.done(); }));
  EXPECT_EQ(seen_at_join, 64);
}

// Copies above inline_bytes released outside the arena become tasks when the
// arena has threads to run them in parallel; in a one-thread arena (a rank
// bound to one core) a task could only take the releasing thread's core, so
// they run inline (Executor::serial). Compute nodes stay tasks in both.
TEST(Executor, LargeCopiesRunInlineInASerialArenaAndAsTasksOtherwise) {
  constexpr std::size_t kLen = 64 * 1024, kCopies = 4;
  for (const int threads : {1, 2}) {
    SCOPED_TRACE("arena of " + std::to_string(threads) + " thread(s)");
    tbb::task_arena arena(threads, 0);
    FakeWorld world(1, FakeMode::manual, 1);
    ExecutorOptions o;
    o.arena = &arena;
    o.inline_bytes = 4096;
    Executor ex(world.endpoint(0), o);
    EXPECT_EQ(ex.serial(), threads == 1);
    PlanBuilder b("fan-of-copies", 0, 1);
    b.input(0, kLen * kCopies).output(0, kLen * kCopies);
    const NodeId root = b.nop();
    std::vector<NodeId> copies;
    for (std::size_t i = 0; i < kCopies; ++i)
      copies.push_back(b.copy(in(0, i * kLen, kLen), out(0, i * kLen, kLen), {root}));
    std::atomic<int> computed{0};
    b.compute([&](const ComputeArgs&) { computed.fetch_add(1); }, Region{}, copies);
    auto plan = b.build();
    std::vector<unsigned char> src(kLen * kCopies), dst(kLen * kCopies, 0);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
    Done d;
    ASSERT_TRUE(ex.start(plan, {{src.data()}, {dst.data()}, {}}, 0, 0, d.fn()).is_ok());
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!d.done() && std::chrono::steady_clock::now() < limit) {
      if (world.progress_all() == 0) std::this_thread::yield();
    }
    ASSERT_TRUE(d.done());
    EXPECT_TRUE(d.status.is_ok()) << d.status.message();
    EXPECT_EQ(dst, src);
    EXPECT_EQ(computed.load(), 1);
    // Serial: the copies and the compute node (released here, in the start,
    // ExecutorOptions::inline_compute) ran in this thread: no task. Parallel:
    // every copy was a task (the compute node then runs in the last of them
    // or in a task of its own).
    if (threads == 1) {
      EXPECT_EQ(ex.tasks_spawned(), 0u);
    } else {
      EXPECT_GE(ex.tasks_spawned(), kCopies);
    }
  }
}

// Streaming copies (non-temporal stores) give the same bytes as memcpy for any
// length and alignment, and the flag sticks to copy nodes only.
TEST(Executor, StreamingCopiesMatchPlainCopies) {
  Cluster c(1);
  const std::size_t big = (std::size_t{1} << 20) + 37;
  std::vector<unsigned char> src(big + 64), dst(2 * big + 130000, 0xAB), want(dst);
  std::mt19937 rng(7);
  for (auto& v : src) v = static_cast<unsigned char>(rng());
  PlanBuilder b("stream", 0, 1);
  b.input(0, src.size()).output(0, dst.size()).require_output_coverage(false);
  struct Piece {
    std::uint64_t from, to, len;
  };
  const Piece pieces[] = {{0, 0, 1},
                          {3, 8, 4095},
                          {5, 4200, 4096},
                          {1, 8400, 4097},
                          {7, 12600, 100000},
                          {0, 120000, big},
                          {63, 120000 + big + 29, big - 5}};
  std::vector<NodeId> copies;
  for (const Piece& pc : pieces) {
    copies.push_back(b.copy(in(0, pc.from, pc.len), out(0, pc.to, pc.len)));
    b.streaming(copies.back());
    std::memcpy(want.data() + pc.to, src.data() + pc.from, pc.len);
  }
  const NodeId join = b.nop(copies);
  b.streaming(join);  // not a copy: ignored
  auto plan = b.build();
  for (NodeId id : copies) EXPECT_TRUE(plan->node(id).streaming);
  EXPECT_FALSE(plan->node(join).streaming);
  Done d;
  ASSERT_TRUE(c.ex[0]->start(plan, {{src.data()}, {dst.data()}, {}}, 0, 0, d.fn()).is_ok());
  ASSERT_TRUE(c.pump([&] { return d.done(); }));
  EXPECT_TRUE(d.status.is_ok()) << d.status.message();
  EXPECT_TRUE(dst == want);
}

TEST(Executor, FragmentsArriveAndOnFragmentComputesRunPerFragment) {
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    Cluster c(2, FakeMode::manual, seed);
    constexpr std::size_t kFrag = 16, kN = 4;
    std::vector<unsigned char> src(kFrag * kN), dst(kFrag * kN, 0);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i);
    RemoteKey key;
    ASSERT_TRUE(c.world.endpoint(1).register_memory(dst.data(), dst.size(), &key).is_ok());
    PlanBuilder b0("bcast", 0, 2), b1("bcast", 1, 2);
    b0.input(0, src.size()).peer_buffer(1, 0, dst.size());
    b1.output(0, dst.size());
    std::atomic<int> transformed{0};
    for (std::uint32_t f = 0; f < kN; ++f) {
      b0.put_with_signal(1, in(0, f * kFrag, kFrag), peer(1, 0, f * kFrag, kFrag), f);
      Region g = out(0, f * kFrag, kFrag);
      b1.wait(f, 1, {}, &g);
      b1.on_fragment(g, [&transformed](const ComputeArgs& a) {
        auto* p = static_cast<unsigned char*>(a.data);
        for (std::size_t i = 0; i < a.len; ++i) p[i] = static_cast<unsigned char>(p[i] + 1);
        transformed.fetch_add(1);
      });
    }
    auto p0 = b0.build(), p1 = b1.build();
    ASSERT_TRUE(validate(std::vector<const Plan*>{p0.get(), p1.get()}).is_ok());
    Done d0, d1;
    ASSERT_TRUE(c.ex[1]->start(p1, {{}, {dst.data()}, {}}, 0, 0, d1.fn()).is_ok());
    ASSERT_TRUE(c.ex[0]->start(p0, {{src.data()}, {}, {{1, 0, key}}}, 0, 0, d0.fn()).is_ok());
    ASSERT_TRUE(c.pump([&] { return d0.done() && d1.done(); }, true));
    EXPECT_TRUE(d0.status.is_ok() && d1.status.is_ok());
    EXPECT_EQ(transformed.load(), 4);
    for (std::size_t i = 0; i < dst.size(); ++i) ASSERT_EQ(dst[i], static_cast<unsigned char>(i + 1)) << i;
  }
}

TEST(Executor, EarlySignalsAreKeptUntilTheInstanceStarts) {
  Cluster c(2);
  PlanBuilder b0("early", 0, 2), b1("early", 1, 2);
  b0.signal(1, 0);
  b0.signal(1, 1);
  b1.wait(1, 1, {b1.wait(0, 1)});
  auto p0 = b0.build(), p1 = b1.build();
  Done d0, d1;
  ASSERT_TRUE(c.ex[0]->start(p0, {}, 5, 9, d0.fn()).is_ok());
  ASSERT_TRUE(c.pump([&] { return d0.done(); }));
  EXPECT_EQ(c.world.undelivered(), 0u);  // both signals were handed to rank 1's executor
  EXPECT_FALSE(d1.done());
  ASSERT_TRUE(c.ex[1]->start(p1, {}, 5, 9, d1.fn()).is_ok());
  ASSERT_TRUE(c.pump([&] { return d1.done(); }));
  EXPECT_TRUE(d1.status.is_ok()) << d1.status.message();
}

TEST(Executor, FailedOperationFailsOnlyItsInstanceAndNamesNodeAndPeer) {
  Cluster c(2);
  PlanBuilder b0("ping", 0, 2);
  b0.label(b0.signal(1, 0), "hello");
  auto p0 = b0.build();
  PlanBuilder b1("ping", 1, 2);
  b1.wait(0, 1);
  auto p1 = b1.build();
  c.world.fail_next([](const FakeOpInfo& op) { return decode_signal(op.payload).seq == 0; },
                    Status(Errc::transport_error, "injected"));
  Done a0, a1, b0d, b1d;
  ASSERT_TRUE(c.ex[0]->start(p0, {}, 0, 0, a0.fn()).is_ok());
  ASSERT_TRUE(c.ex[0]->start(p0, {}, 0, 1, b0d.fn()).is_ok());
  ASSERT_TRUE(c.ex[1]->start(p1, {}, 0, 0, a1.fn()).is_ok());
  ASSERT_TRUE(c.ex[1]->start(p1, {}, 0, 1, b1d.fn()).is_ok());
  ASSERT_TRUE(c.pump([&] { return a0.done() && b0d.done() && b1d.done(); }));
  EXPECT_EQ(a0.status.code(), Errc::transport_error);
  EXPECT_NE(a0.status.message().find("node 0 (signal 'hello' peer 1)"), std::string::npos) << a0.status.message();
  EXPECT_TRUE(b0d.status.is_ok());
  EXPECT_TRUE(b1d.status.is_ok());
  // Rank 1's seq 0 never gets its signal: cancellation finishes it.
  EXPECT_FALSE(a1.done());
  EXPECT_TRUE(c.ex[1]->cancel(0, 0));
  ASSERT_TRUE(c.pump([&] { return a1.done(); }));
  EXPECT_EQ(a1.status.code(), Errc::cancelled);
  EXPECT_FALSE(c.ex[1]->cancel(0, 0));
  EXPECT_EQ(a1.calls.load(), 1);
}

TEST(Executor, ComputeExceptionFailsInstanceAndSkipsSuccessors) {
  Cluster c(1);
  bool after = false;
  PlanBuilder b("throwing", 0, 1);
  NodeId t = b.compute([](const ComputeArgs&) { throw std::runtime_error("boom"); }, Region{});
  b.compute([&](const ComputeArgs&) { after = true; }, Region{}, {t});
  auto plan = b.build();
  Done d;
  ASSERT_TRUE(c.ex[0]->start(plan, {}, 0, 0, d.fn()).is_ok());
  ASSERT_TRUE(c.pump([&] { return d.done(); }));
  EXPECT_EQ(d.status.code(), Errc::internal);
  EXPECT_NE(d.status.message().find("boom"), std::string::npos);
  EXPECT_FALSE(after);
}

// Bound compute nodes (PlanBuilder::compute_bound): one plan, a different
// callable per start, called with the node's index; a start that binds none
// fails the instance with a message naming Bindings::compute.
TEST(Executor, BoundComputeNodesTakeTheCallableOfEachStart) {
  // Declared before the cluster: a worker may still be returning from a done
  // callback when the test moves on, so they must outlive the executor.
  std::array<Done, 4> done;
  std::array<std::vector<std::uint32_t>, 3> seen;
  Cluster c(1);
  PlanBuilder b("bound", 0, 1);
  const NodeId first = b.compute_bound(7, Region{});
  b.compute_bound(3, Region{}, {first});
  auto plan = b.build();
  for (std::uint32_t round = 0; round < 3; ++round) {
    std::vector<std::uint32_t>& got = seen[round];
    const BoundComputeFn fn = [&got, round](std::uint32_t k, const ComputeArgs&) { got.push_back(k + 100 * round); };
    Bindings bind;
    bind.compute = &fn;
    Done& d = done[round];
    ASSERT_TRUE(c.ex[0]->start(plan, bind, 0, round, d.fn()).is_ok());
    ASSERT_TRUE(c.pump([&] { return d.done(); }));
    EXPECT_TRUE(d.status.is_ok()) << d.status.message();
    EXPECT_EQ(got, (std::vector<std::uint32_t>{7 + 100 * round, 3 + 100 * round}));
  }
  Done& d = done[3];
  ASSERT_TRUE(c.ex[0]->start(plan, {}, 0, 3, d.fn()).is_ok());
  ASSERT_TRUE(c.pump([&] { return d.done(); }));
  EXPECT_EQ(d.status.code(), Errc::invalid_argument);
  EXPECT_NE(d.status.message().find("Bindings::compute"), std::string::npos) << d.status.message();
}

// Executor::start's ended_inline: a straight plan that completes inside the
// start reports it there and never calls its DoneFn (the caller ends the call
// itself); without the pointer the DoneFn runs as always; a plan that cannot
// complete inside the start (a compute node goes to the arena) leaves
// *ended_inline false and calls the DoneFn once.
TEST(Executor, AStartThatCompletesInsideReportsItInsteadOfCallingDone) {
  std::array<Done, 3> done;
  Cluster c(1);
  PlanBuilder b("copy", 0, 1);
  b.input(0, 8).output(0, 8);
  b.copy(in(0, 0, 8), out(0, 0, 8));
  auto plan = b.build();
  char src[8] = "abcdefg", dst[8] = {};
  Bindings bind{{src}, {dst}, {}};
  bool ended = false;
  ASSERT_TRUE(c.ex[0]->start(plan, bind, 0, 0, done[0].fn(), &ended).is_ok());
  EXPECT_TRUE(ended);
  EXPECT_EQ(done[0].calls.load(), 0);
  EXPECT_EQ(std::string(dst, 7), "abcdefg");

  char dst2[8] = {};
  Bindings bind2{{src}, {dst2}, {}};
  ASSERT_TRUE(c.ex[0]->start(plan, bind2, 0, 1, done[1].fn()).is_ok());
  ASSERT_TRUE(c.pump([&] { return done[1].done(); }));
  EXPECT_EQ(done[1].calls.load(), 1);
  EXPECT_EQ(std::string(dst2, 7), "abcdefg");

  PlanBuilder cb("compute", 0, 1);
  cb.compute_bound(0, Region{});
  auto cplan = cb.build();
  const BoundComputeFn fn = [](std::uint32_t, const ComputeArgs&) {};
  Bindings cbind;
  cbind.compute = &fn;
  ended = true;
  ASSERT_TRUE(c.ex[0]->start(cplan, cbind, 0, 2, done[2].fn(), &ended).is_ok());
  ASSERT_TRUE(c.pump([&] { return done[2].done(); }));
  EXPECT_FALSE(ended);
  EXPECT_EQ(done[2].calls.load(), 1);
  EXPECT_TRUE(done[2].status.is_ok()) << done[2].status.message();
}

// One executor per rank of @p world on the one-thread @p arena (Executor::serial).
std::vector<std::unique_ptr<Executor>> serial_executors(FakeWorld& world, tbb::task_arena& arena, bool inline_compute) {
  std::vector<std::unique_ptr<Executor>> ex;
  for (int r = 0; r < world.size(); ++r) {
    ExecutorOptions o;
    o.arena = &arena;
    o.inline_compute = inline_compute;
    ex.push_back(std::make_unique<Executor>(world.endpoint(r), o));
  }
  return ex;
}

// ExecutorOptions::inline_compute in a serial arena (one thread): a root
// compute node runs in the starting thread at the end of its start, after
// the start posted its transfers (the signal is pending in the fake world
// when the compute runs), instead of on the arena's worker; with the option
// off it runs on another thread.
TEST(Executor, SerialArenaRunsRootComputeInTheStartingThreadAfterItsPosts) {
  for (const bool inline_compute : {true, false}) {
    tbb::task_arena arena{1, 0};
    FakeWorld world(2, FakeMode::manual, 1);
    const auto ex = serial_executors(world, arena, inline_compute);
    ASSERT_TRUE(ex[0]->serial());
    PlanBuilder b0("post-then-compute", 0, 2);
    b0.compute_bound(0, Region{});  // id 0: before the signal in id order
    b0.signal(1, 0);
    PlanBuilder b1("wait", 1, 2);
    b1.wait(0, 1);
    std::atomic<std::size_t> pending_then{99};
    std::thread::id ran_on;
    const BoundComputeFn fn = [&](std::uint32_t, const ComputeArgs&) {
      ran_on = std::this_thread::get_id();
      pending_then = world.pending_count();
    };
    Bindings bind;
    bind.compute = &fn;
    Done d0, d1;
    ASSERT_TRUE(ex[1]->start(b1.build(), {}, 0, 0, d1.fn()).is_ok());
    ASSERT_TRUE(ex[0]->start(b0.build(), bind, 0, 0, d0.fn()).is_ok());
    if (inline_compute) {
      EXPECT_EQ(ran_on, std::this_thread::get_id());  // before start returned
      EXPECT_EQ(pending_then.load(), 1u);             // the signal was posted first
    }
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!(d0.done() && d1.done()) && std::chrono::steady_clock::now() < limit) {
      world.release_all();
      if (world.progress_all() == 0) std::this_thread::yield();
    }
    ASSERT_TRUE(d0.done() && d1.done());
    EXPECT_TRUE(d0.status.is_ok()) << d0.status.message();
    if (!inline_compute) {
      EXPECT_NE(ran_on, std::this_thread::get_id());
    }
  }
}

// WaiterScope: in a serial arena, a compute node released while the scope's
// thread drives the transport (its wait node's signal lands in this thread's
// progress) is kept, not run inside the poll and not handed to the worker;
// run() executes it in this thread. Without a scope it runs on the worker.
TEST(Executor, WaiterScopeKeepsComputeReleasedInItsPollsForRun) {
  for (const bool scoped : {true, false}) {
    tbb::task_arena arena{1, 0};
    FakeWorld world(2, FakeMode::manual, 1);
    const auto ex = serial_executors(world, arena, true);
    PlanBuilder b0("signal", 0, 2);
    b0.signal(1, 0);
    PlanBuilder b1("wait-then-compute", 1, 2);
    const NodeId w = b1.wait(0, 1);
    b1.compute_bound(0, Region{}, {w});
    std::atomic<int> runs{0};
    std::thread::id ran_on;
    const BoundComputeFn fn = [&](std::uint32_t, const ComputeArgs&) {
      ran_on = std::this_thread::get_id();
      runs.fetch_add(1);
    };
    Bindings bind;
    bind.compute = &fn;
    Done d0, d1;
    ASSERT_TRUE(ex[1]->start(b1.build(), bind, 0, 0, d1.fn()).is_ok());
    ASSERT_TRUE(ex[0]->start(b0.build(), {}, 0, 0, d0.fn()).is_ok());
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    if (scoped) {
      WaiterScope scope(ex[1].get());
      while (!scope.pending() && std::chrono::steady_clock::now() < limit) {
        world.release_all();
        if (world.progress_all() == 0) std::this_thread::yield();
      }
      ASSERT_TRUE(scope.pending());
      EXPECT_EQ(runs.load(), 0);  // kept, not run inside the poll
      EXPECT_EQ(scope.run(), 1u);
      EXPECT_EQ(runs.load(), 1);
      EXPECT_EQ(ran_on, std::this_thread::get_id());
    }
    while (!(d0.done() && d1.done()) && std::chrono::steady_clock::now() < limit) {
      world.release_all();
      if (world.progress_all() == 0) std::this_thread::yield();
    }
    ASSERT_TRUE(d0.done() && d1.done());
    EXPECT_EQ(runs.load(), 1);
    EXPECT_TRUE(d1.status.is_ok()) << d1.status.message();
    if (!scoped) {
      EXPECT_NE(ran_on, std::this_thread::get_id());
    }
  }
}

// cores_busy (a waiter's cue to sleep instead of polling): true while
// compute nodes run (or wait to run) on every CPU of the arena, false once the
// node ended; with two threads, one running node leaves a CPU free.
TEST(Executor, CoresBusyWhileComputeNodesHoldTheArena) {
  for (const int threads : {1, 2}) {
    tbb::task_arena arena{threads, 0};
    FakeWorld world(1, FakeMode::manual, 1);
    ExecutorOptions o;
    o.arena = &arena;
    o.inline_compute = false;  // the nodes must hold the arena's thread, not this one
    Executor ex(world.endpoint(0), o);
    EXPECT_FALSE(ex.cores_busy()) << threads;
    std::atomic<bool> release{false};
    std::atomic<int> inside{0};
    PlanBuilder b("busy", 0, 1);
    b.compute(
        [&](const ComputeArgs&) {
          inside.fetch_add(1);
          while (!release.load()) std::this_thread::yield();  // held until the test looked
        },
        Region{});
    auto plan = b.build();
    Done d;
    ASSERT_TRUE(ex.start(plan, {}, 0, 0, d.fn()).is_ok());
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (inside.load() == 0 && std::chrono::steady_clock::now() < limit) std::this_thread::yield();
    ASSERT_EQ(inside.load(), 1) << threads;
    EXPECT_EQ(ex.cores_busy(), threads == 1) << threads;
    release.store(true);
    while (!d.done() && std::chrono::steady_clock::now() < limit) {
      world.progress_all();
      std::this_thread::yield();
    }
    ASSERT_TRUE(d.done()) << threads;
    EXPECT_TRUE(d.status.is_ok()) << d.status.message();
    const auto settle = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (ex.cores_busy() && std::chrono::steady_clock::now() < settle) std::this_thread::yield();
    EXPECT_FALSE(ex.cores_busy()) << threads;
  }
}

TEST(Executor, BadBindingsAndDuplicatesAreRejectedWithoutCallback) {
  Cluster c(2);
  PlanBuilder b("bind", 0, 2);
  b.input(0, 8).peer_buffer(1, 0, 8);
  b.put(1, in(0, 0, 8), peer(1, 0, 0, 8));
  auto plan = b.build();
  Done d;
  char buf[8] = {};
  Status st = c.ex[0]->start(plan, {{buf}, {}, {}}, 0, 0, d.fn());
  EXPECT_EQ(st.code(), Errc::invalid_argument);
  EXPECT_NE(st.message().find("peer buffer 0 of rank 1"), std::string::npos) << st.message();
  EXPECT_EQ(c.ex[0]->start(plan, {}, 0, 0, d.fn()).code(), Errc::invalid_argument);
  EXPECT_EQ(c.ex[0]->start(nullptr, {}, 0, 0, d.fn()).code(), Errc::invalid_argument);
  EXPECT_EQ(c.ex[1]->start(plan, {}, 0, 0, d.fn()).code(), Errc::invalid_argument);  // rank mismatch
  PlanBuilder w("dup", 0, 2);
  w.wait(0, 1);
  auto wp = w.build();
  ASSERT_TRUE(c.ex[0]->start(wp, {}, 1, 1, d.fn()).is_ok());
  EXPECT_EQ(c.ex[0]->start(wp, {}, 1, 1, d.fn()).code(), Errc::invalid_argument);
  EXPECT_TRUE(c.ex[0]->cancel(1, 1));
  ASSERT_TRUE(c.pump([&] { return d.done(); }));
  EXPECT_EQ(d.calls.load(), 1);
}

TEST(Executor, PeerDeathFailsOnlyInstancesThatUseThePeer) {
  Cluster c(3);
  PlanBuilder a0("a", 0, 3), a1("a", 1, 3), x0("x", 0, 3);
  a0.signal(1, 0);
  a1.wait(0, 1);
  x0.wait(0, 1);
  x0.expect_signals_from(2);
  auto pa0 = a0.build(), pa1 = a1.build(), px0 = x0.build();
  Done da0, da1, dx0;
  ASSERT_TRUE(c.ex[0]->start(px0, {}, 1, 0, dx0.fn()).is_ok());
  ASSERT_TRUE(c.ex[0]->start(pa0, {}, 0, 0, da0.fn()).is_ok());
  ASSERT_TRUE(c.ex[1]->start(pa1, {}, 0, 0, da1.fn()).is_ok());
  c.world.kill(2);
  ASSERT_TRUE(c.pump([&] { return da0.done() && da1.done() && dx0.done(); }));
  EXPECT_TRUE(da0.status.is_ok());
  EXPECT_TRUE(da1.status.is_ok());
  EXPECT_EQ(dx0.status.code(), Errc::peer_dead);
  EXPECT_NE(dx0.status.message().find("peer 2 died"), std::string::npos) << dx0.status.message();
  EXPECT_EQ(c.ex[0]->start(px0, {}, 1, 1, dx0.fn()).code(), Errc::peer_dead);
}

TEST(Executor, ManyInstancesFromSeveralThreads) {
  Cluster c(2, FakeMode::auto_complete);
  PlanBuilder b0("pp", 0, 2), b1("pp", 1, 2);
  b0.wait(1, 1, {b0.signal(1, 0)});
  b1.signal(0, 1, {b1.wait(0, 1)});
  auto p0 = b0.build(), p1 = b1.build();
  constexpr int kThreads = 4, kPer = 100;
  std::atomic<int> ok{0}, bad{0};
  auto cb = [&](const Status& s) { (s.is_ok() ? ok : bad).fetch_add(1); };
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kPer; ++i) {
        const auto seq = static_cast<std::uint32_t>(t * kPer + i);
        EXPECT_TRUE(c.ex[static_cast<std::size_t>(seq % 2)]->start(seq % 2 ? p1 : p0, {}, 3, seq, cb).is_ok());
        EXPECT_TRUE(c.ex[static_cast<std::size_t>(1 - seq % 2)]->start(seq % 2 ? p0 : p1, {}, 3, seq, cb).is_ok());
      }
    });
  for (auto& t : ts) t.join();
  ASSERT_TRUE(c.pump([&] { return ok.load() + bad.load() == 2 * kThreads * kPer; }));
  EXPECT_EQ(ok.load(), 2 * kThreads * kPer);
}

// Random multi-rank DAGs: every node computes a value from its predecessors'
// values (local ones and ones received from other ranks through
// put_with_signal + wait); the result is checked against a sequential simulation.
TEST(Executor, RandomDagStressMatchesSequentialSimulation) {
  constexpr int kRanks = 3;
  Cluster c(kRanks, FakeMode::manual, 7);
  std::mt19937_64 rng(12345);
  auto mix = [](std::uint64_t a, std::uint64_t b) { return (a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2))); };
  const int kDags = 1500;
  for (int dag = 0; dag < kDags; ++dag) {
    // Global node order g; node g lives on rank owner[g] at local index loc[g].
    const int total = 1 + static_cast<int>(rng() % 24);
    std::vector<int> owner(static_cast<std::size_t>(total)), nloc(kRanks, 0), loc(static_cast<std::size_t>(total));
    for (int g = 0; g < total; ++g) {
      owner[static_cast<std::size_t>(g)] = static_cast<int>(rng() % kRanks);
      loc[static_cast<std::size_t>(g)] = nloc[static_cast<std::size_t>(owner[static_cast<std::size_t>(g)])]++;
    }
    std::vector<std::vector<int>> preds(static_cast<std::size_t>(total));
    for (int g = 1; g < total; ++g)
      for (int k = 0, m = static_cast<int>(rng() % 3); k < m; ++k)
        preds[static_cast<std::size_t>(g)].push_back(static_cast<int>(rng() % static_cast<std::uint64_t>(g)));
    // Cells: rank r's output = [local cells][incoming cells], 8 bytes each.
    std::vector<int> nin(kRanks, 0);
    struct Edge {
      int from, to, cell;
    };
    std::vector<Edge> remote;
    for (int g = 0; g < total; ++g)
      for (int p : preds[static_cast<std::size_t>(g)])
        if (owner[static_cast<std::size_t>(p)] != owner[static_cast<std::size_t>(g)])
          remote.push_back({p, g, nin[static_cast<std::size_t>(owner[static_cast<std::size_t>(g)])]++});
    std::vector<std::vector<std::uint64_t>> mem(kRanks);
    std::vector<RemoteKey> keys(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      mem[static_cast<std::size_t>(r)].assign(
          static_cast<std::size_t>(nloc[static_cast<std::size_t>(r)] + nin[static_cast<std::size_t>(r)]) + 1, 0);
      ASSERT_TRUE(c.world.endpoint(r)
                      .register_memory(mem[static_cast<std::size_t>(r)].data(),
                                       mem[static_cast<std::size_t>(r)].size() * 8, &keys[static_cast<std::size_t>(r)])
                      .is_ok());
    }
    // Expected values.
    std::vector<std::uint64_t> expect(static_cast<std::size_t>(total));
    for (int g = 0; g < total; ++g) {
      std::uint64_t v = mix(static_cast<std::uint64_t>(g), static_cast<std::uint64_t>(dag));
      for (int p : preds[static_cast<std::size_t>(g)]) v = mix(v, expect[static_cast<std::size_t>(p)]);
      expect[static_cast<std::size_t>(g)] = v;
    }
    // Builders.
    std::vector<PlanBuilder> bs;
    for (int r = 0; r < kRanks; ++r) {
      bs.emplace_back("rnd", r, kRanks);
      bs.back().output(0, mem[static_cast<std::size_t>(r)].size() * 8).require_output_coverage(false);
      for (int q = 0; q < kRanks; ++q) bs.back().peer_buffer(q, 0, mem[static_cast<std::size_t>(q)].size() * 8);
    }
    std::vector<NodeId> node_of(static_cast<std::size_t>(total));
    std::uint32_t slot = 0;
    std::vector<std::vector<NodeId>> extra_deps(static_cast<std::size_t>(total));
    for (int g = 0; g < total; ++g) {
      const int r = owner[static_cast<std::size_t>(g)];
      PlanBuilder& b = bs[static_cast<std::size_t>(r)];
      // Incoming remote values: a wait per edge, created before the node.
      std::vector<std::pair<int, std::size_t>> srcs;  // (pred g, cell index in my output)
      std::vector<NodeId> deps;
      for (int p : preds[static_cast<std::size_t>(g)]) {
        if (owner[static_cast<std::size_t>(p)] == r) {
          deps.push_back(node_of[static_cast<std::size_t>(p)]);
          srcs.emplace_back(p, static_cast<std::size_t>(loc[static_cast<std::size_t>(p)]));
        } else {
          const Edge* e = nullptr;
          for (const Edge& x : remote)
            if (x.from == p && x.to == g) e = &x;
          const std::size_t cell = static_cast<std::size_t>(nloc[static_cast<std::size_t>(r)] + e->cell);
          const std::uint32_t s = slot++;
          Region guard = out(0, cell * 8, 8);
          deps.push_back(b.wait(s, 1, {}, &guard));
          // Sender side: a put_with_signal after the predecessor.
          const int pr = owner[static_cast<std::size_t>(p)];
          bs[static_cast<std::size_t>(pr)].put_with_signal(
              r, out(0, static_cast<std::uint64_t>(loc[static_cast<std::size_t>(p)]) * 8, 8), peer(r, 0, cell * 8, 8),
              s, {node_of[static_cast<std::size_t>(p)]});
          srcs.emplace_back(p, cell);
        }
      }
      const std::size_t mine = static_cast<std::size_t>(loc[static_cast<std::size_t>(g)]);
      const std::uint64_t seed = mix(static_cast<std::uint64_t>(g), static_cast<std::uint64_t>(dag));
      node_of[static_cast<std::size_t>(g)] = b.compute(
          [srcs, mine, seed, mix](const ComputeArgs& a) {
            auto* cells = static_cast<std::uint64_t*>(a.data);
            std::uint64_t v = seed;
            for (const auto& s : srcs) v = mix(v, cells[s.second]);
            cells[mine] = v;
          },
          out(0, 0, mem[static_cast<std::size_t>(r)].size() * 8), deps);
    }
    std::vector<std::shared_ptr<const Plan>> plans;
    std::vector<const Plan*> raw;
    for (auto& b : bs) {
      plans.push_back(b.build());
      raw.push_back(plans.back().get());
    }
    ASSERT_TRUE(validate(raw).is_ok()) << validate(raw).message();
    std::atomic<int> finished{0}, failed{0};
    const auto seq = static_cast<std::uint32_t>(dag);
    for (int r = kRanks - 1; r >= 0; --r) {  // reverse start order: early signals happen
      Bindings bind;
      bind.outputs = {mem[static_cast<std::size_t>(r)].data()};
      for (int q = 0; q < kRanks; ++q) bind.peers.push_back({q, 0, keys[static_cast<std::size_t>(q)]});
      ASSERT_TRUE(c.ex[static_cast<std::size_t>(r)]
                      ->start(plans[static_cast<std::size_t>(r)], bind, 0, seq,
                              [&](const Status& s) {
                                if (!s.is_ok()) failed.fetch_add(1);
                                finished.fetch_add(1);
                              })
                      .is_ok());
      if (r == 1) c.world.release_random();
    }
    ASSERT_TRUE(c.pump([&] { return finished.load() == kRanks; }, true)) << "dag " << dag;
    ASSERT_EQ(failed.load(), 0);
    for (int g = 0; g < total; ++g)
      ASSERT_EQ(mem[static_cast<std::size_t>(owner[static_cast<std::size_t>(g)])]
                   [static_cast<std::size_t>(loc[static_cast<std::size_t>(g)])],
                expect[static_cast<std::size_t>(g)])
          << "dag " << dag << " node " << g;
    for (int r = 0; r < kRanks; ++r)
      c.world.endpoint(r).deregister_memory(mem[static_cast<std::size_t>(r)].data(),
                                            mem[static_cast<std::size_t>(r)].size() * 8);
  }
}

TEST(Executor, TraceWritesOneEventPerNodeAndMergeToolCombinesRanks) {
  const std::string prefix = ::testing::TempDir() + "strata_dag_trace_" + std::to_string(::getpid());
  for (int r = 0; r < 2; ++r) std::remove((prefix + "." + std::to_string(r) + ".json").c_str());
  {
    FakeWorld world(2, FakeMode::auto_complete);
    std::vector<std::unique_ptr<Executor>> ex;
    for (int r = 0; r < 2; ++r) {
      ExecutorOptions o;
      o.trace_path = prefix;
      ex.push_back(std::make_unique<Executor>(world.endpoint(r), o));
    }
    PlanBuilder b0("allreduce", 0, 2), b1("allreduce", 1, 2);
    b0.nop({b0.signal(1, 0)});
    b1.wait(0, 1);
    auto p0 = b0.build(), p1 = b1.build();
    Done d0, d1;
    ASSERT_TRUE(ex[0]->start(p0, {}, 0, 4, d0.fn()).is_ok());
    ASSERT_TRUE(ex[1]->start(p1, {}, 0, 4, d1.fn()).is_ok());
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!(d0.done() && d1.done()) && std::chrono::steady_clock::now() < limit) world.progress_all();
    ASSERT_TRUE(d0.done() && d1.done());
  }  // executors flush their traces
  const std::string all = slurp(prefix + ".0.json");
  EXPECT_NE(all.find("\"name\":\"allreduce#4 signal\""), std::string::npos) << all;
  EXPECT_NE(all.find("\"pid\":0"), std::string::npos);
  // The tool sits next to this test binary (build/bin) unless STRATA_BIN says otherwise.
  std::string bin = std::getenv("STRATA_BIN") != nullptr ? std::getenv("STRATA_BIN") : "";
  if (bin.empty()) {
    char self[4096] = {};
    const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
    ASSERT_GT(len, 0);
    bin = std::string(self, static_cast<std::size_t>(len));
    bin = bin.substr(0, bin.rfind('/'));
  }
  const std::string merged = prefix + ".merged.json";
  const std::string cmd = bin + "/strata-trace-merge -o " + merged + " --prefix " + prefix + " >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string m = slurp(merged);
  EXPECT_EQ(m.rfind("{\"displayTimeUnit\"", 0), 0u);
  EXPECT_NE(m.find("\"args\":{\"name\":\"rank 1\"}"), std::string::npos);
  EXPECT_NE(m.find("allreduce#4 wait"), std::string::npos);
}

// A new run truncates its trace file; names are JSON-escaped; a signal's
// arrival is a transport event with a flow arrow (ph s -> f, same id) to the
// wait node it released; completions are transport events.
TEST(Executor, TraceTruncatesEscapesAndDrawsSignalFlows) {
  const std::string prefix = ::testing::TempDir() + "strata_dag_trace2_" + std::to_string(::getpid());
  for (int r = 0; r < 2; ++r) {
    std::ofstream stale(prefix + "." + std::to_string(r) + ".json");
    stale << "STALE EVENTS FROM AN EARLIER RUN\n";
  }
  const std::string odd = "all\"re\\duce\n";  // a quote, a backslash and a newline
  {
    FakeWorld world(2, FakeMode::auto_complete);
    std::vector<std::unique_ptr<Executor>> ex;
    for (int r = 0; r < 2; ++r) {
      ExecutorOptions o;
      o.trace_path = prefix;
      ex.push_back(std::make_unique<Executor>(world.endpoint(r), o));
      EXPECT_TRUE(ex.back()->tracing());
    }
    PlanBuilder b0(odd, 0, 2), b1(odd, 1, 2);
    b0.nop({b0.signal(1, 0)});
    b1.wait(0, 1);
    auto p0 = b0.build(), p1 = b1.build();
    Done d0, d1;
    ASSERT_TRUE(ex[0]->start(p0, {}, 0, 9, d0.fn()).is_ok());
    ASSERT_TRUE(ex[1]->start(p1, {}, 0, 9, d1.fn()).is_ok());
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!(d0.done() && d1.done()) && std::chrono::steady_clock::now() < limit) world.progress_all();
    ASSERT_TRUE(d0.done() && d1.done());
    ex[0]->trace_event("app \"phase\"", "step\t1", Executor::trace_now_ns(), Executor::trace_now_ns() + 1000, 3, 1);
  }
  const std::string r0 = slurp(prefix + ".0.json"), r1 = slurp(prefix + ".1.json");
  EXPECT_EQ(r0.find("STALE"), std::string::npos) << r0;
  EXPECT_EQ(r1.find("STALE"), std::string::npos) << r1;
  // Every line is one event object: the newline in the name did not split it.
  for (const std::string* t : {&r0, &r1}) {
    std::istringstream in(*t);
    std::string line;
    int lines = 0;
    while (std::getline(in, line)) {
      ++lines;
      EXPECT_EQ(line.front(), '{') << line;
      EXPECT_EQ(line.back(), '}') << line;
    }
    EXPECT_GT(lines, 0);
  }
  EXPECT_NE(r0.find("\"name\":\"all\\\"re\\\\duce\\u000a#9 signal\""), std::string::npos) << r0;
  EXPECT_NE(r0.find("\"name\":\"step\\u00091\",\"cat\":\"app \\\"phase\\\"\""), std::string::npos) << r0;
  EXPECT_NE(r0.find("\"name\":\"completion\",\"cat\":\"transport\""), std::string::npos) << r0;
  // Rank 1: the signal's arrival, and a flow from it to the wait node.
  EXPECT_NE(r1.find("\"name\":\"signal arrived\",\"cat\":\"transport\""), std::string::npos) << r1;
  const std::size_t s = r1.find("\"ph\":\"s\",\"id\":");
  ASSERT_NE(s, std::string::npos) << r1;
  const std::string id = r1.substr(s + 14, r1.find('}', s) - s - 14);
  ASSERT_FALSE(id.empty()) << r1;
  EXPECT_NE(r1.find("\"ph\":\"f\",\"bp\":\"e\",\"id\":" + id + "}"), std::string::npos) << r1;
  EXPECT_NE(r1.find("#9 wait\""), std::string::npos) << r1;
  for (int r = 0; r < 2; ++r) std::remove((prefix + "." + std::to_string(r) + ".json").c_str());
}

// ---------------------------------------------------------------- window flags
namespace {
// Two ranks' flag blocks as one process sees them (Bindings::flags).
struct FlagBlocks {
  static constexpr std::uint32_t kWake = 16;  // Bindings::flag_wake
  std::atomic<std::uint32_t> blk[2][32]{};
  std::atomic<std::uint32_t>* table[2] = {blk[0], blk[1]};
  Bindings bind(const void* in, void* out) {
    Bindings b;
    if (in != nullptr) b.inputs = {in};
    if (out != nullptr) b.outputs = {out};
    b.flags = table;
    b.nflags = 2;
    b.flag_wake = kWake;
    return b;
  }
};
constexpr std::uint64_t kNudge = 0xFFFEull << 48;

// Starts @p plan (a flag_wait on rank 1 that cannot complete) on rank 0 as
// instance 3, kills rank 1 and expects the parked wait to fail the instance
// with peer_dead.
void expect_parked_wait_fails_when_peer_dies(Cluster& c, const std::shared_ptr<const Plan>& plan, const Bindings& b) {
  Done d;
  ASSERT_TRUE(c.ex[0]->start(plan, b, 0, 3, d.fn()).is_ok());
  EXPECT_FALSE(d.done());
  c.world.kill(1);
  ASSERT_TRUE(c.pump([&] {
    c.ex[0]->poll();
    return d.done();
  }));
  EXPECT_EQ(d.status.code(), Errc::peer_dead);
}
}  // namespace

TEST(Executor, FlagWaitOnATimelyPeerCompletesAtStartWithoutAnyMessage) {
  Cluster c(2);
  FlagBlocks fb;
  PlanBuilder b("fw", 0, 2);
  b.input(0, 8).output(0, 8);
  const NodeId w = b.flag_wait(1, 0, 2);
  b.copy(in(0, 0, 8), out(0, 0, 8), {w});
  auto plan = b.build();
  EXPECT_EQ(plan->flag_words(), 1u);
  char src[8] = "abcdefg", dst[8] = {};
  // seq 0 and 1 have no previous user of the slot (lag 2): ready at once.
  Done d0;
  ASSERT_TRUE(c.ex[0]->start(plan, fb.bind(src, dst), 0, 1, d0.fn()).is_ok());
  EXPECT_TRUE(d0.done());
  EXPECT_TRUE(d0.status.is_ok()) << d0.status.message();
  EXPECT_STREQ(dst, "abcdefg");
  EXPECT_EQ(c.world.pending_count(), 0u);  // no signal, no put
  // seq 7 needs the peer's instance 5: flag >= 6.
  fb.blk[1][0].store(6);
  Done d1;
  ASSERT_TRUE(c.ex[0]->start(plan, fb.bind(src, dst), 0, 7, d1.fn()).is_ok());
  EXPECT_TRUE(d1.done());
  EXPECT_EQ(fb.blk[1][FlagBlocks::kWake].load(), 0u);  // never asked for a nudge
}

// Rebuilds @p c's executors with nudges (the Cluster's have none).
static void with_nudges(Cluster& c) {
  for (int r = 0; r < 2; ++r) {
    ExecutorOptions o;
    o.arena = &c.arena;
    o.nudge_payload = kNudge;
    c.ex[static_cast<std::size_t>(r)].reset();
    c.ex[static_cast<std::size_t>(r)] = std::make_unique<Executor>(c.world.endpoint(r), o);
  }
}

TEST(Executor, ParkedFlagWaitIsNudgedByTheFlagSetAndCompletesInPoll) {
  Cluster c(2);
  with_nudges(c);
  FlagBlocks fb;
  PlanBuilder b0("fw", 0, 2);
  b0.input(0, 8).output(0, 8);
  b0.copy(in(0, 0, 8), out(0, 0, 8), {b0.flag_wait(1, 3, 4)});
  auto p0 = b0.build();
  PlanBuilder b1("fs", 1, 2);
  b1.flag_set(3, {b1.nop()});
  b1.require_output_coverage(false);
  auto p1 = b1.build();
  char src[8] = "0123456", dst[8] = {};
  Done d0, d1;
  // Rank 0's instance 9 needs rank 1's instance 5 (lag 4) finished: flag >= 6.
  fb.blk[1][3].store(5);
  ASSERT_TRUE(c.ex[0]->start(p0, fb.bind(src, dst), 0, 9, d0.fn()).is_ok());
  EXPECT_FALSE(d0.done());
  EXPECT_EQ(c.ex[0]->poll(), 0u);
  EXPECT_FALSE(d0.done());
  // Nothing of rank 0 blocks yet: its pollers see the flag themselves, no nudge is asked for.
  EXPECT_EQ(fb.blk[1][FlagBlocks::kWake].load(), 0u);
  EXPECT_EQ(fb.blk[1][FlagBlocks::kWake + 1 + 0].load(), 0u);
  c.ex[0]->park(true);  // a thread of rank 0 is about to block
  EXPECT_EQ(fb.blk[1][FlagBlocks::kWake].load(), 1u);
  EXPECT_EQ(fb.blk[1][FlagBlocks::kWake + 1 + 0].load(), 1u);  // rank 0 asked rank 1 for a nudge
  // Rank 1 finishes its instance 5: flag = 6, and it nudges rank 0.
  ASSERT_TRUE(c.ex[1]->start(p1, fb.bind(nullptr, nullptr), 0, 5, d1.fn()).is_ok());
  EXPECT_TRUE(d1.done());
  EXPECT_EQ(fb.blk[1][3].load(), 6u);
  EXPECT_EQ(fb.blk[1][FlagBlocks::kWake].load(), 0u);
  const auto ops = c.world.pending();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].source, 1);
  EXPECT_EQ(ops[0].target, 0);
  EXPECT_EQ(ops[0].payload, kNudge);
  EXPECT_EQ(c.ex[0]->poll(), 1u);
  EXPECT_TRUE(d0.done());
  EXPECT_TRUE(d0.status.is_ok()) << d0.status.message();
  EXPECT_STREQ(dst, "0123456");
  c.ex[0]->park(false);
}

// Words that only some plans raise (mapped record, publication words) are
// read "at or after" with a half-range comparison modulo 2^28: a word never
// written reads as raised once seq + 1 passes 2^27. Every instance's final
// flag_set lists them as refresh words and brings a stale one up to seq + 1
// (a recent one is left alone: one load, no store).
TEST(Executor, FlagSetRefreshesStaleWordsThatAHalfRangeWaitWouldMistakeForRaised) {
  Cluster c(2);
  FlagBlocks fb;
  constexpr std::uint32_t kSeq = (1u << 27) + 5;
  PlanBuilder b0("fw", 0, 2);
  b0.flag_wait(1, 3, 0);  // waits for rank 1's word 3 to show instance kSeq
  b0.require_output_coverage(false);
  auto p0 = b0.build();
  // The hazard: word 3 was never written (0) and already reads as raised.
  {
    Done d;
    ASSERT_TRUE(c.ex[0]->start(p0, fb.bind(nullptr, nullptr), 0, kSeq, d.fn()).is_ok());
    EXPECT_TRUE(d.done());
  }
  // Rank 1 finishes an instance whose end flag_set refreshes words 3 and 4.
  PlanBuilder b1("fs", 1, 2);
  b1.flag_set(0, {b1.nop()}, {}, {3, 4});
  b1.require_output_coverage(false);
  auto p1 = b1.build();
  EXPECT_EQ(p1->flag_words(), 5u);
  const std::uint32_t recent = kSeq - 100;  // word 4 was raised 90 instances ago: left alone
  fb.blk[1][4].store(recent);
  Done d1;
  ASSERT_TRUE(c.ex[1]->start(p1, fb.bind(nullptr, nullptr), 0, kSeq - 10, d1.fn()).is_ok());
  EXPECT_TRUE(d1.done());
  EXPECT_EQ(fb.blk[1][0].load(), kSeq - 9);
  EXPECT_EQ(fb.blk[1][3].load(), kSeq - 9);  // refreshed: now behind kSeq + 1, no longer "raised"
  EXPECT_EQ(fb.blk[1][4].load(), recent);
  // The same wait now waits until rank 1 really raises the word.
  Done d;
  ASSERT_TRUE(c.ex[0]->start(p0, fb.bind(nullptr, nullptr), 0, kSeq + 8, d.fn()).is_ok());
  EXPECT_FALSE(d.done());
  fb.blk[1][3].store(kSeq + 9);
  EXPECT_EQ(c.ex[0]->poll(), 1u);
  EXPECT_TRUE(d.done());
  EXPECT_TRUE(d.status.is_ok()) << d.status.message();
}

// A flag wait parked while a thread of its rank already blocks asks for the
// nudge at once; one parked while nothing blocks is released by a poll
// without any message (the owner's flag_set sends nothing).
TEST(Executor, FlagWaitAsksForANudgeOnlyWhileItsRankBlocks) {
  Cluster c(2);
  with_nudges(c);
  FlagBlocks fb;
  PlanBuilder b0("fw", 0, 2);
  b0.input(0, 8).output(0, 8);
  b0.copy(in(0, 0, 8), out(0, 0, 8), {b0.flag_wait(1, 3, 0)});
  auto p0 = b0.build();
  PlanBuilder b1("fs", 1, 2);
  b1.flag_set(3, {b1.nop()});
  b1.require_output_coverage(false);
  auto p1 = b1.build();
  char src[8] = "abcdefg", dst[8] = {};
  // Nothing blocks: no nudge, the poll completes it.
  Done d0, d1;
  ASSERT_TRUE(c.ex[0]->start(p0, fb.bind(src, dst), 0, 1, d0.fn()).is_ok());
  EXPECT_EQ(fb.blk[1][FlagBlocks::kWake].load(), 0u);
  ASSERT_TRUE(c.ex[1]->start(p1, fb.bind(nullptr, nullptr), 0, 1, d1.fn()).is_ok());
  EXPECT_TRUE(c.world.pending().empty());
  EXPECT_EQ(c.ex[0]->poll(), 1u);
  EXPECT_TRUE(d0.done());
  // A thread of rank 0 blocks first: the wait asks as it parks, the flag_set nudges.
  c.ex[0]->park(true);
  Done e0, e1;
  ASSERT_TRUE(c.ex[0]->start(p0, fb.bind(src, dst), 0, 2, e0.fn()).is_ok());
  EXPECT_EQ(fb.blk[1][FlagBlocks::kWake + 1 + 0].load(), 1u);
  ASSERT_TRUE(c.ex[1]->start(p1, fb.bind(nullptr, nullptr), 0, 2, e1.fn()).is_ok());
  const auto ops = c.world.pending();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].payload, kNudge);
  EXPECT_EQ(c.ex[0]->poll(), 1u);
  EXPECT_TRUE(e0.done());
  c.ex[0]->park(false);
}

// Bindings::flag_shadows: a credit check first looks at this rank's recent
// copy of the peer's word; a real read copies the whole line's words into it;
// an observation 2^20 or more instances old is not trusted; words past
// shadow_words are always read from the owner.
TEST(Executor, FlagShadowsAnswerCreditChecksAndOnlyRecentOnes) {
  Cluster c(2);
  FlagBlocks fb;
  std::atomic<std::uint64_t> sh[2][16]{};
  std::atomic<std::uint64_t>* shadows[2] = {nullptr, sh[1]};
  auto bind = [&](const void* src, void* dst) {
    Bindings b = fb.bind(src, dst);
    b.flag_shadows = shadows;
    b.shadow_words = 4;
    return b;
  };
  auto wait_plan = [](std::uint32_t word) {
    PlanBuilder b("fw", 0, 2);
    b.input(0, 8).output(0, 8);
    b.copy(in(0, 0, 8), out(0, 0, 8), {b.flag_wait(1, word, 2)});
    return b.build();
  };
  const auto plan = wait_plan(2);
  char src[8] = "abcdefg", dst[8] = {};
  // A real read (seq 7 needs the peer's instance 5: flag >= 6) refreshes words 0-3.
  fb.blk[1][2].store(6);
  fb.blk[1][3].store(9);
  Done d0;
  ASSERT_TRUE(c.ex[0]->start(plan, bind(src, dst), 0, 7, d0.fn()).is_ok());
  EXPECT_TRUE(d0.done());
  EXPECT_EQ(sh[1][2].load(), std::uint64_t{7} << 32 | 6);
  EXPECT_EQ(sh[1][3].load(), std::uint64_t{7} << 32 | 9);
  EXPECT_EQ(sh[1][4].load(), 0u);  // past shadow_words
  // The copy answers the next check without the owner's word (zeroed here
  // to tell the two apart: a real flag never goes back).
  fb.blk[1][2].store(0);
  Done d1;
  ASSERT_TRUE(c.ex[0]->start(plan, bind(src, dst), 1, 7, d1.fn()).is_ok());
  EXPECT_TRUE(d1.done());
  // An observation 2^21 instances away is not trusted: the wait reads the owner and parks.
  sh[1][2].store((std::uint64_t{(7u + (1u << 21)) & strata::dag::kSeqMask} << 32) | 6);
  Done d2;
  ASSERT_TRUE(c.ex[0]->start(plan, bind(src, dst), 2, 7, d2.fn()).is_ok());
  EXPECT_FALSE(d2.done());
  EXPECT_EQ(c.ex[0]->poll(), 0u);
  fb.blk[1][2].store(6);
  EXPECT_EQ(c.ex[0]->poll(), 1u);
  EXPECT_TRUE(d2.done());
  // A word past shadow_words reads the owner every time.
  const auto far = wait_plan(5);
  fb.blk[1][5].store(6);
  sh[1][5].store(0);
  Done d3;
  ASSERT_TRUE(c.ex[0]->start(far, bind(src, dst), 3, 7, d3.fn()).is_ok());
  EXPECT_TRUE(d3.done());
  EXPECT_EQ(sh[1][5].load(), 0u);
}

// Straight plans (Plan::straight_preds): memory nodes only, each after its
// predecessors. The start runs them in the starting thread; only when a flag
// is late does it publish an instance, whose counters then count only the
// predecessors not done yet.
TEST(Executor, StraightPlansAreRecognisedAtBuild) {
  PlanBuilder b("s", 0, 2);
  b.input(0, 8).output(0, 8);
  const NodeId w = b.flag_wait(1, 0, 1);
  const NodeId c = b.copy(in(0, 0, 8), out(0, 0, 8), {w});
  b.flag_set(1, {c});
  auto plan = b.build();
  ASSERT_EQ(plan->straight_preds().size(), 3u);
  EXPECT_EQ(plan->straight_preds()[0], 0u);
  EXPECT_EQ(plan->straight_preds()[1], 1u);
  EXPECT_EQ(plan->straight_preds()[2], 2u);
  EXPECT_EQ(plan->straight_bytes(), 8u);
  // A remote node, or an edge to a later node, makes a plan not straight.
  PlanBuilder r("r", 0, 2);
  r.input(0, 8).peer_buffer(1, 0, 8);
  r.put(1, in(0, 0, 8), peer(1, 0, 0, 8));
  r.require_output_coverage(false);
  EXPECT_TRUE(r.build()->straight_preds().empty());
  PlanBuilder o("o", 0, 1);
  o.input(0, 8).output(0, 8);
  const NodeId first = o.copy(in(0, 0, 8), out(0, 0, 8));
  const NodeId later = o.nop();
  o.depend(first, later);
  EXPECT_TRUE(o.build()->straight_preds().empty());
}

TEST(Executor, StraightStartRunsWhatItCanAndPublishesOnlyForALateFlag) {
  Cluster c(2);
  FlagBlocks fb;
  // copy a (no predecessor) | flag_wait on rank 1 -> copy b -> flag_set 2 after both copies.
  PlanBuilder b("s", 0, 2);
  b.input(0, 16).output(0, 16);
  const NodeId a = b.copy(in(0, 0, 8), out(0, 0, 8));
  const NodeId w = b.flag_wait(1, 0, 1);
  const NodeId cb = b.copy(in(0, 8, 8), out(0, 8, 8), {w});
  b.flag_set(2, {a, cb});
  auto plan = b.build();
  ASSERT_FALSE(plan->straight_preds().empty());
  char src[16] = "abcdefgABCDEFGH", dst[16] = {};
  // On time (seq 3 needs the peer's flag at 3): everything inside start, nothing published.
  fb.blk[1][0].store(3);
  Done d0;
  ASSERT_TRUE(c.ex[0]->start(plan, fb.bind(src, dst), 0, 3, d0.fn()).is_ok());
  EXPECT_TRUE(d0.done());
  EXPECT_TRUE(d0.status.is_ok()) << d0.status.message();
  EXPECT_EQ(std::memcmp(dst, src, 16), 0);
  EXPECT_EQ(fb.blk[0][2].load(), 4u);
  EXPECT_EQ(c.ex[0]->in_flight(), 0u);
  // Late (seq 4 needs 4): copy a ran, copy b and the flag_set wait.
  std::memset(dst, 0, sizeof dst);
  Done d1;
  ASSERT_TRUE(c.ex[0]->start(plan, fb.bind(src, dst), 0, 4, d1.fn()).is_ok());
  EXPECT_FALSE(d1.done());
  EXPECT_EQ(c.ex[0]->in_flight(), 1u);
  EXPECT_EQ(std::memcmp(dst, src, 8), 0);  // the node that needs no flag already ran
  EXPECT_EQ(dst[8], 0);
  EXPECT_EQ(fb.blk[0][2].load(), 4u);  // not raised yet
  // The same (comm, seq) while it waits: refused before any node runs.
  Done again;
  const Status st = c.ex[0]->start(plan, fb.bind(src, dst), 0, 4, again.fn());
  EXPECT_EQ(st.code(), Errc::invalid_argument);
  EXPECT_NE(st.message().find("already in flight"), std::string::npos) << st.message();
  fb.blk[1][0].store(4);
  ASSERT_TRUE(c.pump([&] {
    c.ex[0]->poll();
    return d1.done();
  }));
  EXPECT_TRUE(d1.status.is_ok()) << d1.status.message();
  EXPECT_EQ(std::memcmp(dst, src, 16), 0);
  EXPECT_EQ(fb.blk[0][2].load(), 5u);
  EXPECT_EQ(c.ex[0]->in_flight(), 0u);
  EXPECT_FALSE(again.done());
}

// A user reduction that throws inside a straight start fails the call with
// the error, and the nodes after it still count as done (the start returns).
TEST(Executor, StraightStartReportsAThrowingUserReduction) {
  Cluster c(1);
  PlanBuilder b("s", 0, 1);
  b.input(0, 8).output(0, 8);
  UserReduce boom;
  boom.fn = [](const void*, const void*, void*, std::size_t) { throw std::runtime_error("no"); };
  boom.elem_size = 8;
  boom.name = "boom";
  const std::int32_t op = b.add_user_op(boom);
  const NodeId r = b.reduce(in(0, 0, 8), in(0, 0, 8), out(0, 0, 8), op);
  b.copy(in(0, 0, 8), out(0, 0, 8), {r});
  auto plan = b.build();
  ASSERT_FALSE(plan->straight_preds().empty());
  double x = 1, y = 0;
  Bindings bd;
  bd.inputs = {&x};
  bd.outputs = {&y};
  Done d;
  ASSERT_TRUE(c.ex[0]->start(plan, bd, 0, 1, d.fn()).is_ok());
  ASSERT_TRUE(d.done());
  EXPECT_EQ(d.status.code(), Errc::invalid_argument);
  EXPECT_NE(d.status.message().find("user reduction 'boom' threw: no"), std::string::npos) << d.status.message();
  EXPECT_EQ(c.ex[0]->in_flight(), 0u);
}

// Instances without wait nodes are kept in a list, not the signal map: a
// second start of the same (comm, seq) is still refused, cancel finds them.
// Rank 0 of 2: a lone flag_wait on rank 1's word 0 (lag 1), nothing else.
std::shared_ptr<const Plan> lone_flag_wait() {
  PlanBuilder b("fw", 0, 2);
  b.flag_wait(1, 0, 1);
  b.require_output_coverage(false);
  return b.build();
}

TEST(Executor, InstancesWithoutWaitNodesAreRefusedTwiceAndCancellable) {
  Cluster c(2);
  FlagBlocks fb;
  auto plan = lone_flag_wait();
  ASSERT_TRUE(plan->wait_nodes().empty());
  Done d, again;
  ASSERT_TRUE(c.ex[0]->start(plan, fb.bind(nullptr, nullptr), 4, 9, d.fn()).is_ok());
  EXPECT_FALSE(d.done());
  const Status st = c.ex[0]->start(plan, fb.bind(nullptr, nullptr), 4, 9, again.fn());
  EXPECT_EQ(st.code(), Errc::invalid_argument);
  EXPECT_NE(st.message().find("already in flight"), std::string::npos) << st.message();
  EXPECT_FALSE(c.ex[0]->cancel(4, 10));
  EXPECT_TRUE(c.ex[0]->cancel(4, 9));
  ASSERT_TRUE(c.pump([&] {
    c.ex[0]->poll();
    return d.done();
  }));
  EXPECT_EQ(d.status.code(), Errc::cancelled);
  EXPECT_FALSE(again.done());
  EXPECT_EQ(c.ex[0]->in_flight(), 0u);
}

TEST(Executor, FlagWaitNeedsThePeersFlagsAndADeadPeerFailsAParkedWait) {
  Cluster c(2);
  FlagBlocks fb;
  auto plan = lone_flag_wait();
  Done d;
  const Status st = c.ex[0]->start(plan, {}, 0, 3, d.fn());
  EXPECT_EQ(st.code(), Errc::invalid_argument);
  EXPECT_NE(st.message().find("flag words of rank 1 are not mapped"), std::string::npos) << st.message();
  EXPECT_FALSE(d.done());
  expect_parked_wait_fails_when_peer_dies(c, plan, fb.bind(nullptr, nullptr));
  // Validation: a flag_wait on its own flag is refused (lag 0, the peer's
  // same instance, is the single-copy protocol's and allowed).
  PlanBuilder bad("bad", 0, 2);
  bad.flag_wait(0, 0, 1);
  EXPECT_THROW(bad.build(), strata::Error);
}

// ---------------------------------------------------------------- single copy
// publish / read_peer: rank 1 publishes its buffer's address; rank 0 waits for
// the publication (flag_wait lag 0), reads the bytes straight out of rank 1's
// buffer (Transport::read_peer: a memcpy on the fake transport, CMA on shm)
// and says so on its reads-done word, which rank 1's instance waits for.
TEST(Executor, PublishAndReadPeerCopyOnceAndTheOwnerWaitsForTheReader) {
  Cluster c(2);
  FlagBlocks fb;  // words 0..7: rank 1's publication record at word 0 (reads-done at 1)
  PlanBuilder b1("owner", 1, 2);
  b1.input(0, 16);
  b1.require_output_coverage(false);
  const NodeId pub = b1.publish(0, in(0, 0, 16), Region{});
  b1.flag_wait(0, 1, 0, {pub});  // rank 0's reads-done for this instance
  auto p1 = b1.build();
  EXPECT_EQ(p1->flag_words(), kPublishWords);
  PlanBuilder b0("reader", 0, 2);
  b0.output(0, 16);
  const NodeId fw = b0.flag_wait(1, 0, 0);
  const NodeId rd = b0.read_peer(1, 0, 0, 4, out(0, 0, 12), {fw});
  b0.copy(out(0, 0, 4), out(0, 12, 4), {rd});  // and something after it
  b0.flag_set(1, {rd});
  auto p0 = b0.build();
  char src[16] = "ABCDEFGHIJKLMNO";
  char dst[16] = {};
  Done d0, d1;
  // The reader first: nothing published yet, it parks.
  ASSERT_TRUE(c.ex[0]->start(p0, fb.bind(nullptr, dst), 0, 4, d0.fn()).is_ok());
  EXPECT_FALSE(d0.done());
  EXPECT_EQ(dst[0], 0);
  // The owner publishes (seq 4 + 1) and waits for the reader.
  ASSERT_TRUE(c.ex[1]->start(p1, fb.bind(src, nullptr), 0, 4, d1.fn()).is_ok());
  EXPECT_EQ(fb.blk[1][0].load(), 5u);
  const auto at = std::uint64_t{fb.blk[1][2].load()} | std::uint64_t{fb.blk[1][3].load()} << 32;
  EXPECT_EQ(at, reinterpret_cast<std::uintptr_t>(src));
  ASSERT_TRUE(c.pump([&] {
    c.ex[0]->poll();
    c.ex[1]->poll();
    return d0.done() && d1.done();
  }));
  EXPECT_TRUE(d0.status.is_ok()) << d0.status.message();
  EXPECT_TRUE(d1.status.is_ok()) << d1.status.message();
  EXPECT_EQ(dst[11], '\0');
  EXPECT_EQ(std::string(dst, 11), std::string("EFGHIJKLMNO"));
  EXPECT_EQ(std::string(dst + 12, 4), std::string("EFGH"));
  EXPECT_EQ(fb.blk[0][1].load(), 5u);  // reads-done
  // The owner's next instance in the slot (seq 5) waits for the reader's seq 5.
  Done d2;
  ASSERT_TRUE(c.ex[1]->start(p1, fb.bind(src, nullptr), 0, 5, d2.fn()).is_ok());
  EXPECT_FALSE(d2.done());
  EXPECT_EQ(c.ex[1]->poll(), 0u);
  EXPECT_FALSE(d2.done());
  fb.blk[0][1].store(6);
  c.ex[1]->poll();
  EXPECT_TRUE(d2.done());
}

TEST(Executor, ReadPeerIsValidatedAndFailsCleanlyWithoutFlags) {
  // No flag_wait on the publication: refused.
  PlanBuilder nowait("r", 0, 2);
  nowait.output(0, 8);
  nowait.read_peer(1, 0, 0, 0, out(0, 0, 8));
  EXPECT_THROW(nowait.build(), strata::Error);
  // A third region, or its own memory: refused.
  PlanBuilder which("r", 0, 2);
  which.output(0, 8);
  which.read_peer(1, 0, 2, 0, out(0, 0, 8), {which.flag_wait(1, 0, 0)});
  EXPECT_THROW(which.build(), strata::Error);
  PlanBuilder self("r", 0, 2);
  self.output(0, 8);
  self.read_peer(0, 0, 0, 0, out(0, 0, 8), {self.flag_wait(1, 0, 0)});
  EXPECT_THROW(self.build(), strata::Error);
  // Writing into an input: refused.
  PlanBuilder into("r", 0, 2);
  into.input(0, 8);
  into.read_peer(1, 0, 0, 0, in(0, 0, 8), {into.flag_wait(1, 0, 0)});
  EXPECT_THROW(into.build(), strata::Error);
  // Valid, but started without flag words: an error naming the rank, no crash.
  Cluster c(2);
  PlanBuilder ok("r", 0, 2);
  ok.output(0, 8);
  ok.read_peer(1, 0, 0, 0, out(0, 0, 8), {ok.flag_wait(1, 0, 0)});
  auto plan = ok.build();
  char dst[8];
  Bindings b;
  b.outputs = {dst};
  Done d;
  const Status st = c.ex[0]->start(plan, b, 0, 1, d.fn());
  EXPECT_EQ(st.code(), Errc::invalid_argument);
  EXPECT_NE(st.message().find("flag words of rank 1 are not mapped"), std::string::npos) << st.message();
}

// write_peer, the mirror: rank 1 publishes its output buffer; rank 0 waits for
// the publication, writes its input's bytes straight into rank 1's buffer at
// an offset (Transport::write_peer: a memcpy on the fake transport, CMA on
// shm), then raises a "written" word that rank 1's instance waits for.
TEST(Executor, WritePeerCopiesOnceIntoThePublishedBufferAndTheOwnerWaitsForIt) {
  Cluster c(2);
  FlagBlocks fb;  // rank 1's publication record at word 0; rank 0's "written" at its word 1
  PlanBuilder b1("owner", 1, 2);
  b1.output(0, 16);
  b1.require_output_coverage(false);
  const NodeId pub = b1.publish(0, out(0, 0, 16), Region{});
  b1.flag_wait(0, 1, 0, {pub});
  auto p1 = b1.build();
  PlanBuilder b0("writer", 0, 2);
  b0.input(0, 16);
  const NodeId fw = b0.flag_wait(1, 0, 0);
  const NodeId wr = b0.write_peer(1, 0, 0, 6, in(0, 2, 10), {fw});
  b0.flag_set(1, {wr});
  auto p0 = b0.build();
  EXPECT_EQ(p0->flag_words(), kPublishWords);
  EXPECT_EQ(p0->flag_peers(), std::vector<int>{1});
  char src[16] = "abcdefghijklmno";
  char dst[16] = "...............";
  Done d0, d1;
  // The writer first: nothing published yet, nothing written.
  ASSERT_TRUE(c.ex[0]->start(p0, fb.bind(src, nullptr), 0, 2, d0.fn()).is_ok());
  EXPECT_FALSE(d0.done());
  EXPECT_EQ(std::string(dst, 15), std::string(15, '.'));
  ASSERT_TRUE(c.ex[1]->start(p1, fb.bind(nullptr, dst), 0, 2, d1.fn()).is_ok());
  ASSERT_TRUE(c.pump([&] {
    c.ex[0]->poll();
    c.ex[1]->poll();
    return d0.done() && d1.done();
  }));
  EXPECT_TRUE(d0.status.is_ok()) << d0.status.message();
  EXPECT_TRUE(d1.status.is_ok()) << d1.status.message();
  EXPECT_EQ(std::string(dst, 6), std::string("......"));
  EXPECT_EQ(std::string(dst + 6, 10), std::string("cdefghijkl"));
  EXPECT_EQ(fb.blk[0][1].load(), 3u);  // written
}

TEST(Executor, WritePeerIsValidated) {
  // No flag_wait on the publication, a third region, its own memory, a
  // source that is not local: refused.
  PlanBuilder nowait("w", 0, 2);
  nowait.input(0, 8);
  nowait.write_peer(1, 0, 0, 0, in(0, 0, 8));
  EXPECT_THROW(nowait.build(), strata::Error);
  PlanBuilder which("w", 0, 2);
  which.input(0, 8);
  which.write_peer(1, 0, 2, 0, in(0, 0, 8), {which.flag_wait(1, 0, 0)});
  EXPECT_THROW(which.build(), strata::Error);
  PlanBuilder self("w", 0, 2);
  self.input(0, 8);
  self.write_peer(0, 0, 0, 0, in(0, 0, 8), {self.flag_wait(1, 0, 0)});
  EXPECT_THROW(self.build(), strata::Error);
  PlanBuilder remote("w", 0, 2);
  remote.write_peer(1, 0, 0, 0, strata::dag::peer(1, 0, 0, 8), {remote.flag_wait(1, 0, 0)});
  EXPECT_THROW(remote.build(), strata::Error);
  PlanBuilder big("w", 0, 2);
  big.input(0, 8);
  big.write_peer(1, 0, 0, 0, in(0, 4, 8), {big.flag_wait(1, 0, 0)});
  EXPECT_THROW(big.build(), strata::Error);
  PlanBuilder ok("w", 0, 2);
  ok.input(0, 8);
  ok.write_peer(1, 0, 1, 16, in(0, 0, 8), {ok.flag_wait(1, 0, 0)});
  EXPECT_NO_THROW(ok.build());
}

// ---------------------------------------------------------------- grants
// Ranks on different hosts: each keeps a copy of the other's flag word
// (Executor::bind_flags), which the owner's flag_set grants and which a late
// reader requests.
namespace {
struct GrantTables {
  std::atomic<std::uint32_t> own[2][16]{};
  std::atomic<std::uint32_t> copy[2][16]{};  // copy[r]: rank r's copy of the other's flags
  std::atomic<std::uint32_t>* table[2][2] = {{own[0], copy[0]}, {copy[1], own[1]}};
  Bindings bind(int r, const void* in, void* out) {
    Bindings b;
    if (in != nullptr) b.inputs = {in};
    if (out != nullptr) b.outputs = {out};
    b.flags = table[r];
    b.nflags = 2;
    b.flag_wake = 8;
    return b;
  }
};
}  // namespace

TEST(Executor, GrantedFlagWaitUsesGrantsAheadAndRequestsOnlyWhenLate) {
  Cluster c(2);
  GrantTables gt;
  for (int r = 0; r < 2; ++r) c.ex[static_cast<std::size_t>(r)]->bind_flags(0, gt.table[r], 2);
  // Rank 0 waits on its copy of rank 1's flag word 3 (lag 4) before a copy.
  PlanBuilder b0("gw", 0, 2);
  b0.input(0, 8).output(0, 8);
  b0.copy(in(0, 0, 8), out(0, 0, 8), {b0.flag_wait(1, 3, 4, {}, /*granted=*/true)});
  auto p0 = b0.build();
  // Rank 1 sets flag 3, granting it to rank 0 (p1) or to nobody (p1q).
  PlanBuilder b1("gs", 1, 2);
  b1.flag_set(3, {b1.nop()}, {0});
  b1.require_output_coverage(false);
  auto p1 = b1.build();
  PlanBuilder b1q("gsq", 1, 2);
  b1q.flag_set(3, {b1q.nop()});
  b1q.require_output_coverage(false);
  auto p1q = b1q.build();
  char src[8] = "granted", dst[8] = {};

  // 1. Rank 1 finishes instance 5: its flag is 6 and one grant goes to rank 0.
  Done s5;
  ASSERT_TRUE(c.ex[1]->start(p1, gt.bind(1, nullptr, nullptr), 0, 5, s5.fn()).is_ok());
  EXPECT_TRUE(s5.done());
  EXPECT_EQ(gt.own[1][3].load(), 6u);
  auto ops = c.world.pending();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].target, 0);
  EXPECT_EQ(ops[0].payload, encode_grant(kGrantComm, 0, 3, 6));
  ASSERT_TRUE(c.pump([&] { return gt.copy[0][3].load() == 6u; }));
  // 2. Rank 0's instance 9 needs rank 1's instance 5 (flag >= 6): the grant came
  // ahead, so the wait completes at start with no message at all.
  Done w9;
  ASSERT_TRUE(c.ex[0]->start(p0, gt.bind(0, src, dst), 0, 9, w9.fn()).is_ok());
  EXPECT_TRUE(w9.done());
  EXPECT_TRUE(w9.status.is_ok()) << w9.status.message();
  EXPECT_STREQ(dst, "granted");
  EXPECT_EQ(c.world.pending_count(), 0u);
  // 3. Instance 13 needs flag >= 10, the copy says 6: rank 0 asks rank 1,
  // which records the request (its flag is still 6) ...
  std::memset(dst, 0, sizeof dst);
  Done w13;
  ASSERT_TRUE(c.ex[0]->start(p0, gt.bind(0, src, dst), 0, 13, w13.fn()).is_ok());
  EXPECT_FALSE(w13.done());
  ops = c.world.pending();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].target, 1);
  EXPECT_EQ(ops[0].payload, encode_grant(kGrantRequestComm, 0, 3, 10));
  c.world.release_all();
  c.world.progress_all();
  c.world.release_all();  // the request's own completion; no answer yet
  c.world.progress_all();
  EXPECT_EQ(c.world.pending_count(), 0u);
  EXPECT_FALSE(w13.done());
  // ... and answers it when its instance 9 (a plan that grants nobody) sets 10.
  Done s9;
  ASSERT_TRUE(c.ex[1]->start(p1q, gt.bind(1, nullptr, nullptr), 0, 9, s9.fn()).is_ok());
  EXPECT_TRUE(s9.done());
  ASSERT_TRUE(c.pump([&] { return w13.done(); }));
  EXPECT_TRUE(w13.status.is_ok()) << w13.status.message();
  EXPECT_STREQ(dst, "granted");
  EXPECT_EQ(gt.copy[0][3].load(), 10u);
  // 4. A request that the owner's flag already meets is answered at once.
  gt.own[1][3].store(14);
  Done w17;
  ASSERT_TRUE(c.ex[0]->start(p0, gt.bind(0, src, dst), 0, 17, w17.fn()).is_ok());
  ASSERT_TRUE(c.pump([&] { return w17.done(); }));
  EXPECT_TRUE(w17.status.is_ok()) << w17.status.message();
  EXPECT_EQ(gt.copy[0][3].load(), 14u);
  // 5. A stale grant never lowers the copy; an unbound communicator's grant is dropped.
  c.ex[0]->handle_signal(1, encode_grant(kGrantComm, 0, 3, 7));
  EXPECT_EQ(gt.copy[0][3].load(), 14u);
  c.ex[0]->handle_signal(1, encode_grant(kGrantComm, 5, 3, 99));
  EXPECT_EQ(gt.copy[0][3].load(), 14u);
  for (int r = 0; r < 2; ++r) c.ex[static_cast<std::size_t>(r)]->bind_flags(0, nullptr, 0);
  c.ex[0]->handle_signal(1, encode_grant(kGrantComm, 0, 3, 30));
  EXPECT_EQ(gt.copy[0][3].load(), 14u);
}

// Drain watermarks (bind_flags with copies): a signal sent when every earlier
// instance of the communicator had finished carries kDrainedBit; the receiver
// raises its copy of the sender's flag words to that seq, which meets a
// granted flag_wait without a grant; an instance that completes with nothing
// of the communicator left running skips its grant to the peers it signalled
// (and a peer that needs it earlier asks, answered from the flag words).
namespace {
struct DrainTables {
  // Flag words, then (own blocks) the wake words at kMaxGrantSlots.
  std::atomic<std::uint32_t> own[2][kMaxGrantSlots + 4]{};
  std::atomic<std::uint32_t> copy[2][kMaxGrantSlots + 4]{};  // copy[r]: rank r's copy of the other's flags
  std::atomic<std::uint32_t>* table[2][2] = {{own[0], copy[0]}, {copy[1], own[1]}};
  Cluster& c;
  DrainTables(Cluster& cl, std::uint32_t credits, std::uint32_t vouch = 0) : c(cl) {
    c.ex[0]->bind_flags(0, table[0], 2, {0, 1}, credits, /*next_seq=*/0, vouch);
    c.ex[1]->bind_flags(0, table[1], 2, {1, 0}, credits, /*next_seq=*/0, vouch);
  }
  // Delivers what is still in flight, then unbinds (before the tables go).
  ~DrainTables() {
    c.world.release_all();
    c.world.progress_all();
    for (auto& ex : c.ex) ex->bind_flags(0, nullptr, 0);
  }
  DrainTables(const DrainTables&) = delete;
  DrainTables& operator=(const DrainTables&) = delete;
  Bindings bind(int r) {
    Bindings b;
    b.flags = table[r];
    b.nflags = 2;
    b.flag_wake = kMaxGrantSlots;
    return b;
  }
};
// Rank 1's slice: one node made by @p first, then flag word @p word set and granted to rank 0.
template <class F>
std::shared_ptr<const Plan> granting(std::uint32_t word, F first) {
  PlanBuilder b("dg", 1, 2);
  b.flag_set(word, {first(b)}, {0});
  b.require_output_coverage(false);
  return b.build();
}
NodeId signal_rank0(PlanBuilder& b) { return b.signal(0, 7); }  // rank 1 signals rank 0, slot 7
std::shared_ptr<const Plan> granted_wait(std::uint32_t word, std::uint32_t lag) {
  PlanBuilder w("dw", 0, 2);
  w.flag_wait(1, word, lag, {}, /*granted=*/true);
  w.require_output_coverage(false);
  return w.build();
}
}  // namespace

TEST(Executor, SignalsCarryTheDrainWatermarkInsteadOfGrantsInLockStep) {
  Cluster c(2);
  DrainTables t(c, /*credits=*/2);
  // Rank 1: signals rank 0 (slot 7), then sets its flag word (seq % 2) granting rank 0.
  const auto s0 = granting(0, signal_rank0), s1 = granting(1, signal_rank0);
  // 1. Instances 0, 1 and 2, one after the other: each signal carries the bit, no grant is sent.
  for (std::uint32_t seq = 0; seq < 3; ++seq) {
    Done d;
    ASSERT_TRUE(c.ex[1]->start(seq % 2 == 0 ? s0 : s1, t.bind(1), 0, seq, d.fn()).is_ok());
    auto ops = c.world.pending();
    ASSERT_EQ(ops.size(), 1u);
    EXPECT_EQ(ops[0].target, 0);
    EXPECT_EQ(ops[0].payload, encode_signal(0, seq, 7) | kDrainedBit);
    ASSERT_TRUE(c.pump([&] { return d.done(); }));
    EXPECT_TRUE(d.status.is_ok()) << d.status.message();
    EXPECT_EQ(c.world.pending_count(), 0u) << "a grant was sent although the next signal carries it";
  }
  // Rank 0 got the signals (kept early: no instance of rank 0 runs): instance
  // 2's says rank 1 finished 0 and 1, so both copied words read 2.
  EXPECT_EQ(t.copy[0][0].load(), 2u);
  EXPECT_EQ(t.copy[0][1].load(), 2u);
  EXPECT_EQ(t.own[1][0].load(), 3u);  // rank 1's own word 0: instance 2 finished
  // 2. Rank 0's instance 3 needs rank 1's instance 1 (word 1 >= 2, lag 2): met
  // at start, without a request.
  Done w3;
  ASSERT_TRUE(c.ex[0]->start(granted_wait(1, 2), t.bind(0), 0, 3, w3.fn()).is_ok());
  EXPECT_TRUE(w3.done());
  EXPECT_TRUE(w3.status.is_ok()) << w3.status.message();
  EXPECT_EQ(c.world.pending_count(), 0u);
  // 3. Instance 4 needs rank 1's instance 2 (word 0 >= 3): its grant was
  // skipped, so rank 0 asks and rank 1 answers from its flag word.
  Done w4;
  ASSERT_TRUE(c.ex[0]->start(granted_wait(0, 2), t.bind(0), 0, 4, w4.fn()).is_ok());
  EXPECT_FALSE(w4.done());
  auto ops = c.world.pending();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].payload, encode_grant(kGrantRequestComm, 0, 0, 3));
  ASSERT_TRUE(c.pump([&] { return w4.done(); }));
  EXPECT_TRUE(w4.status.is_ok()) << w4.status.message();
  EXPECT_EQ(t.copy[0][0].load(), 3u);
  // 4. Rank 1 runs instance 4 that stays open (it waits for a signal), then
  // instance 3: its signal carries the bit (0..2 had finished), but instance
  // 4 still runs when 3 completes, so 3's grant goes out as before.
  const auto po = granting(0, [](PlanBuilder& b) { return b.wait(9, 1); });
  Done o4, d3;
  ASSERT_TRUE(c.ex[1]->start(po, t.bind(1), 0, 4, o4.fn()).is_ok());
  ASSERT_TRUE(c.ex[1]->start(s1, t.bind(1), 0, 3, d3.fn()).is_ok());
  ops = c.world.pending();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].payload, encode_signal(0, 3, 7) | kDrainedBit);
  ASSERT_TRUE(c.pump([&] { return d3.done() && t.copy[0][1].load() == 4u; }));  // the grant of instance 3
  // 5. Instance 4 finishes (a signal from rank 0 releases it) with nothing
  // else running: it signals nobody, so it owes a watermark grant (every
  // instance with 2 credits), which goes out when a thread of rank 1 is
  // about to block: everything before 5 finished.
  c.ex[1]->handle_signal(0, encode_signal(0, 4, 9));
  ASSERT_TRUE(c.pump([&] { return o4.done(); }));
  EXPECT_EQ(c.world.pending_count(), 0u) << "the watermark went out at completion";
  c.ex[1]->park(true);
  c.ex[1]->park(false);
  ops = c.world.pending();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].payload, encode_grant(kWatermarkComm, 0, 0, 5));
  ASSERT_TRUE(c.pump([&] { return t.copy[0][0].load() == 5u && t.copy[0][1].load() == 5u; }));
  // 6. A stale watermark never lowers a word; a bit from a rank whose entry is not a copy is ignored.
  c.ex[0]->handle_signal(1, encode_signal(0, 1, 7) | kDrainedBit);
  EXPECT_EQ(t.copy[0][0].load(), 5u);
  c.ex[0]->handle_signal(0, encode_signal(0, 20, 7) | kDrainedBit);  // rank 0's own entry
  EXPECT_EQ(t.own[0][0].load(), 0u);
  EXPECT_EQ(t.own[0][1].load(), 0u);
}

// Vouching (bind_flags' vouch = V, credits 4): pipelined instances (no drain
// bit) still let the receiver raise its copy, one word per signal: instance
// u's signal proves that the sender's instance u - V finished (its start was
// queued behind it), i.e. the word of window slot (u - V) % 4 reads at least
// u - V + 1; and no instance grants the peer its plan signals. Without
// vouching the same run raises nothing and sends one grant per instance.
TEST(Executor, VouchingSignalsStandInForGrantsOfPipelinedInstances) {
  for (const std::uint32_t vouch : {2u, 0u}) {
    SCOPED_TRACE(vouch);
    Cluster c(2);
    DrainTables t(c, /*credits=*/4, vouch);
    // Rank 1: instances 0..5 started back to back (each signals rank 0, slot
    // 7, then sets its flag word seq % 4 granting rank 0); none has finished
    // when the next starts, so only instance 0's signal carries the drain bit.
    std::vector<Done> d(6);
    for (std::uint32_t seq = 0; seq < 6; ++seq)
      ASSERT_TRUE(c.ex[1]->start(granting(seq % 4, signal_rank0), t.bind(1), 0, seq, d[seq].fn()).is_ok());
    auto ops = c.world.pending();
    ASSERT_EQ(ops.size(), 6u);
    EXPECT_EQ(ops[0].payload, encode_signal(0, 0, 7) | kDrainedBit);
    for (std::uint32_t seq = 1; seq < 6; ++seq) EXPECT_EQ(ops[seq].payload, encode_signal(0, seq, 7));
    // Deliver the signals only (rank 0 keeps them early: none of its instances runs).
    std::size_t grants = 0;
    ASSERT_TRUE(c.pump([&] {
      for (const auto& o : c.world.pending())
        if ((o.payload >> 48) == kGrantComm) ++grants;
      return std::all_of(d.begin(), d.end(), [](const Done& x) { return x.done(); });
    }));
    for (const Done& x : d) EXPECT_TRUE(x.status.is_ok()) << x.status.message();
    c.world.release_all();
    c.world.progress_all();
    if (vouch != 0) {
      // Signals 2..5 vouch for instances 0..3: words 0..3 read 1..4.
      for (std::uint32_t w = 0; w < 4; ++w) EXPECT_EQ(t.copy[0][w].load(), w + 1) << "word " << w;
      EXPECT_EQ(grants, 0u) << "a grant was sent to a peer the plan signals";
      // Rank 0's instance 6 needs rank 1's instance 2 (word 2 >= 3, lag 4): met at start, nothing asked.
      Done w6;
      ASSERT_TRUE(c.ex[0]->start(granted_wait(2, 4), t.bind(0), 0, 6, w6.fn()).is_ok());
      EXPECT_TRUE(w6.done());
      EXPECT_EQ(c.world.pending_count(), 0u);
    } else {
      EXPECT_GT(grants, 0u);
    }
  }
}

// Pipelined instances (not drained) grant per instance; a request the owner
// answered already said the same, so the instance's own grant is not sent a
// second time (one message instead of two per late copy).
TEST(Executor, AnAnsweredRequestIsNotFollowedByTheSameGrant) {
  Cluster c(2);
  DrainTables t(c, /*credits=*/2);
  auto waiting = [](std::uint32_t word, std::uint32_t slot) {
    return granting(word, [slot](PlanBuilder& b) { return b.wait(slot, 1); });
  };
  Done o1, o0;
  ASSERT_TRUE(c.ex[1]->start(waiting(1, 9), t.bind(1), 0, 1, o1.fn()).is_ok());  // stays open: not drained
  ASSERT_TRUE(c.ex[1]->start(waiting(0, 8), t.bind(1), 0, 0, o0.fn()).is_ok());
  // Rank 0's instance 2 needs rank 1's instance 0: it asks; rank 1 parks the request.
  Done w2;
  ASSERT_TRUE(c.ex[0]->start(granted_wait(0, 2), t.bind(0), 0, 2, w2.fn()).is_ok());
  ASSERT_EQ(c.world.pending_count(), 1u);
  c.world.release_all();
  c.world.progress_all();
  c.world.release_all();
  c.world.progress_all();
  EXPECT_EQ(c.world.pending_count(), 0u);
  // Instance 0 finishes: the answer goes out from its flag_set, its own grant does not follow.
  c.ex[1]->handle_signal(0, encode_signal(0, 0, 8));
  ASSERT_TRUE(o0.done());
  const auto ops = c.world.pending();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].payload, encode_grant(kGrantComm, 0, 0, 1));
  ASSERT_TRUE(c.pump([&] { return w2.done(); }));
  EXPECT_TRUE(w2.status.is_ok()) << w2.status.message();
  c.ex[1]->handle_signal(0, encode_signal(0, 1, 9));
  ASSERT_TRUE(c.pump([&] { return o1.done(); }));
}

// A failed start leaves a sequence number that never finishes: the watermark
// stops for good (no bit on later signals, every grant sent).
TEST(Executor, AFailedStartRetiresTheDrainWatermark) {
  Cluster c(2);
  DrainTables t(c, /*credits=*/2);
  const auto plan = granting(0, signal_rank0);
  Done d0;
  ASSERT_TRUE(c.ex[1]->start(plan, t.bind(1), 0, 0, d0.fn()).is_ok());
  ASSERT_TRUE(c.pump([&] { return d0.done(); }));
  // Instance 1 cannot start (seq out of range stands for any refused start).
  Done bad;
  EXPECT_FALSE(c.ex[1]->start(plan, t.bind(1), 0, kSeqMask + 1, bad.fn()).is_ok());
  Done d2;
  ASSERT_TRUE(c.ex[1]->start(plan, t.bind(1), 0, 2, d2.fn()).is_ok());
  auto ops = c.world.pending();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].payload, encode_signal(0, 2, 7));                            // no bit
  ASSERT_TRUE(c.pump([&] { return d2.done() && t.copy[0][0].load() == 3u; }));  // the grant went out
}

// A peer the plan never signals (a broadcast leaf granting its root): in
// lock-step one watermark grant every credits / 2 instances replaces the
// per-instance grants; it goes out when the next instance that does not
// signal the peer starts (or a thread blocks), not on the completing
// caller's way back; it meets the peer's granted flag_waits, and a peer
// that needs a skipped one asks for it.
TEST(Executor, LockStepGrantsToUnsignalledPeersAreBatchedWatermarks) {
  Cluster c(2);
  DrainTables t(c, /*credits=*/4);
  std::vector<std::shared_ptr<const Plan>> leaf;
  for (std::uint32_t word = 0; word < 4; ++word) leaf.push_back(granting(word, [](PlanBuilder& b) { return b.nop(); }));
  for (std::uint32_t seq = 0; seq < 6; ++seq) {
    Done d;
    ASSERT_TRUE(c.ex[1]->start(leaf[seq % 4], t.bind(1), 0, seq, d.fn()).is_ok());
    ASSERT_TRUE(d.done());
    const auto ops = c.world.pending();
    if (seq > 0 && seq % 2 == 0) {  // instance seq - 1 owed the watermark seq (even: due); this start sent it
      ASSERT_EQ(ops.size(), 1u) << "seq " << seq;
      EXPECT_EQ(ops[0].payload, encode_grant(kWatermarkComm, 0, 0, seq));
      ASSERT_TRUE(c.pump([&] { return t.copy[0][3].load() == seq; }));
    } else {
      EXPECT_EQ(ops.size(), 0u) << "seq " << seq;
    }
    c.world.release_all();
    c.world.progress_all();
  }
  // Instance 5 owes the watermark 6: rank 1 is about to block, so it goes out.
  c.ex[1]->park(true);
  c.ex[1]->park(false);
  ASSERT_EQ(c.world.pending_count(), 1u);
  ASSERT_TRUE(c.pump([&] { return t.copy[0][3].load() == 6u; }));
  for (std::uint32_t w = 0; w < 4; ++w) EXPECT_EQ(t.copy[0][w].load(), 6u) << "word " << w;
  // Rank 0 (the root) at instance 9 needs rank 1's instance 5 (lag 4): met.
  Done r9;
  ASSERT_TRUE(c.ex[0]->start(granted_wait(1, 4), t.bind(0), 0, 9, r9.fn()).is_ok());
  EXPECT_TRUE(r9.done());
  EXPECT_TRUE(r9.status.is_ok()) << r9.status.message();
  EXPECT_EQ(c.world.pending_count(), 0u);
  // Instance 10 needs rank 1's instance 6 (word 2 >= 7): rank 0 asks; rank 1's
  // instance 6 is not due (watermark 7), so only the answer to the request brings it.
  Done r10;
  ASSERT_TRUE(c.ex[0]->start(granted_wait(2, 4), t.bind(0), 0, 10, r10.fn()).is_ok());
  EXPECT_FALSE(r10.done());
  Done d6;
  ASSERT_TRUE(c.ex[1]->start(leaf[2], t.bind(1), 0, 6, d6.fn()).is_ok());
  ASSERT_TRUE(c.pump([&] { return r10.done(); }));
  EXPECT_TRUE(r10.status.is_ok()) << r10.status.message();
  EXPECT_EQ(t.copy[0][2].load(), 7u);
}

// A broadcast leaf alternating with a call that signals the root (a
// barrier): the watermark the leaf owes after the broadcast rides on the
// next call's drained signal, and no grant message is sent at all (it was
// one message per iteration on the leaf's way back to its caller).
TEST(Executor, OwedWatermarkRidesOnTheNextDrainedSignal) {
  Cluster c(2);
  DrainTables t(c, /*credits=*/4);
  const auto leaf1 = granting(1, [](PlanBuilder& b) { return b.nop(); });
  const auto sig2 = granting(2, signal_rank0);
  Done d1;
  ASSERT_TRUE(c.ex[1]->start(leaf1, t.bind(1), 0, 0, d1.fn()).is_ok());  // wm 1: not due
  ASSERT_TRUE(d1.done());
  Done d2;
  ASSERT_TRUE(c.ex[1]->start(leaf1, t.bind(1), 0, 1, d2.fn()).is_ok());  // wm 2: due, owed
  ASSERT_TRUE(d2.done());
  EXPECT_EQ(c.world.pending_count(), 0u) << "the watermark went out at completion";
  Done d3;
  ASSERT_TRUE(c.ex[1]->start(sig2, t.bind(1), 0, 2, d3.fn()).is_ok());
  auto ops = c.world.pending();
  ASSERT_EQ(ops.size(), 1u) << "a watermark went out beside the drained signal";
  EXPECT_EQ(ops[0].payload, encode_signal(0, 2, 7) | kDrainedBit);
  ASSERT_TRUE(c.pump([&] { return d3.done(); }));
  c.ex[1]->park(true);  // nothing owed any more: nothing to send
  c.ex[1]->park(false);
  EXPECT_EQ(c.world.pending_count(), 0u);
  EXPECT_EQ(t.copy[0][1].load(), 2u);  // the drained signal of instance 2 told rank 0 that 0 and 1 finished
}

TEST(Executor, GrantedFlagWaitOfADeadPeerFails) {
  Cluster c(2);
  GrantTables gt;
  c.ex[0]->bind_flags(0, gt.table[0], 2);
  PlanBuilder b("gw", 0, 2);
  b.flag_wait(1, 0, 1, {}, /*granted=*/true);
  b.require_output_coverage(false);
  auto plan = b.build();
  expect_parked_wait_fails_when_peer_dies(c, plan, gt.bind(0, nullptr, nullptr));
  c.ex[0]->bind_flags(0, nullptr, 0);
  // A flag_set may not grant to itself or to a rank outside the plan.
  PlanBuilder bad("bad", 0, 2);
  bad.flag_set(0, {}, {0});
  EXPECT_THROW(bad.build(), strata::Error);
  PlanBuilder bad2("bad2", 0, 2);
  bad2.flag_set(0, {}, {2});
  EXPECT_THROW(bad2.build(), strata::Error);
}
