// strata::Future / Promise: then, when_all, wait_for, dropping, waits inside tasks.
#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>

#include "strata/dag/executor.hpp"
#include "strata/future.hpp"
#include "strata/transport/fake.hpp"

using strata::Errc;
using strata::Future;
using strata::Promise;
using strata::Status;
using strata::detail::tsan_acquire;
using strata::detail::tsan_release;

TEST(Future, ThenChainsValuesAndRunsInTheArena) {
  tbb::task_arena arena(2, 0);
  auto ctx = std::make_shared<strata::FutureContext>();
  ctx->arena = &arena;
  Promise<int> p(ctx);
  std::atomic<bool> in_task{false};
  Future<int> f = p.get_future().then([&](int v) {
    in_task = tbb::task::current_context() != nullptr;
    return v + 1;
  });
  Future<void> g = std::move(f).then([](int v) { EXPECT_EQ(v, 42); });
  EXPECT_FALSE(g.ready());
  p.set_value(41);
  g.get();
  EXPECT_TRUE(in_task.load());
  EXPECT_FALSE(g.valid());
  EXPECT_THROW(g.wait(), strata::Error);
}

TEST(Future, ErrorsPropagateThroughThenAndGetThrowsTypedError) {
  Promise<int> p;
  bool called = false;
  Future<int> f = p.get_future().then([&](int v) {
    called = true;
    return v;
  });
  p.set_error(Status(Errc::peer_dead, "rank 3 died"));
  try {
    (void)f.get();
    FAIL() << "get() did not throw";
  } catch (const strata::Error& e) {
    EXPECT_EQ(e.errc(), Errc::peer_dead);
    EXPECT_NE(std::string(e.what()).find("rank 3 died"), std::string::npos);
  }
  EXPECT_FALSE(called);
  Future<int> t = strata::make_ready_future(1).then([](int) -> int { throw strata::Error(Errc::unsupported, "no"); });
  EXPECT_THROW((void)t.get(), strata::Error);
}

TEST(Future, WhenAllOverVectorAndPack) {
  std::vector<Promise<int>> ps(5);
  std::vector<Future<int>> fs;
  for (auto& p : ps) fs.push_back(p.get_future());
  Future<std::vector<int>> all = strata::when_all(std::move(fs));
  for (int i = 4; i >= 0; --i) {
    EXPECT_FALSE(all.ready());
    ps[static_cast<std::size_t>(i)].set_value(i * 10);
  }
  EXPECT_EQ(all.get(), (std::vector<int>{0, 10, 20, 30, 40}));

  Promise<void> pv;
  Promise<double> pd;
  auto both = strata::when_all(pv.get_future(), pd.get_future());
  pd.set_value(2.5);
  EXPECT_FALSE(both.ready());
  pv.set_value();
  auto tup = both.get();
  EXPECT_DOUBLE_EQ(std::get<1>(tup), 2.5);

  std::vector<Promise<void>> vs(3);
  std::vector<Future<void>> vf;
  for (auto& p : vs) vf.push_back(p.get_future());
  Future<void> allv = strata::when_all(std::move(vf));
  vs[1].set_error(Status(Errc::timeout, "slow"));
  EXPECT_TRUE(allv.ready());  // first error completes it
  EXPECT_EQ(allv.status().code(), Errc::timeout);
  EXPECT_TRUE(strata::when_all(std::vector<Future<int>>{}).ready());
}

TEST(Future, WaitForTimesOutThenSucceeds) {
  Promise<void> p;
  Future<void> f = p.get_future();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(f.wait_for(std::chrono::milliseconds(20)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(20));
  std::thread setter([&] { p.set_value(); });
  EXPECT_TRUE(f.wait_for(std::chrono::seconds(30)));
  setter.join();
}

TEST(Future, DroppingAnUnwaitedFutureNeitherBlocksNorLeaks) {
  std::weak_ptr<strata::detail::State<int>> weak;
  Promise<int> p;
  {
    Future<int> f = p.get_future();
    weak = f.state();
  }                              // dropped: must return at once
  EXPECT_FALSE(weak.expired());  // the producer still holds the state
  EXPECT_TRUE(p.set_value(1));
  p = Promise<int>();
  EXPECT_TRUE(weak.expired());  // both sides gone: freed
  // A promise dropped unfulfilled fails its future instead of hanging it.
  Future<int> orphan;
  {
    Promise<int> q;
    orphan = q.get_future();
  }
  EXPECT_EQ(orphan.status().code(), Errc::internal);
}

TEST(Future, WaitInsideATaskOfAOneThreadArenaDoesNotDeadlock) {
  // The waiting task and the task that fulfils the future share the arena's
  // only worker: the wait must suspend instead of blocking it.
  tbb::task_arena arena(1, 0);
  auto ctx = std::make_shared<strata::FutureContext>();
  ctx->arena = &arena;
  Promise<int> p(ctx);
  Future<int> f = p.get_future();
  Promise<int> outer;
  Future<int> result = outer.get_future();
  tsan_release(&arena);
  arena.enqueue([&] {
    tsan_acquire(&arena);
    tsan_release(&p);
    arena.enqueue([&p] {
      tsan_acquire(&p);
      p.set_value(7);
    });                     // queued behind us
    const int v = f.get();  // suspends; worker runs the setter
    outer.set_value(v * 6);
  });
  EXPECT_TRUE(result.wait_for(std::chrono::seconds(30)));
  EXPECT_EQ(result.get(), 42);
}

// The park hook (Executor::park: flag waits ask for nudges while a thread of
// the rank sleeps) stays balanced for waits inside tasks, also when the state
// becomes ready while the task suspends: an unpark without its park left the
// count at -1 for good. A second thread completes each promise at a varying
// moment around the wait; the count never goes below 0 and ends at 0.
TEST(Future, ParkStaysBalancedForWaitsInsideTasks) {
  tbb::task_arena arena(1, 0);
  auto ctx = std::make_shared<strata::FutureContext>();
  ctx->arena = &arena;
  std::atomic<int> parked{0};
  std::atomic<int> lowest{0};
  std::atomic<int> parks{0};
  ctx->park = [&](bool on) {
    const int v = parked.fetch_add(on ? 1 : -1) + (on ? 1 : -1);
    if (on) parks.fetch_add(1);
    int lo = lowest.load();
    while (v < lo && !lowest.compare_exchange_weak(lo, v)) {
    }
  };
  constexpr int kRounds = 3000;
  for (int i = 0; i < kRounds; ++i) {
    Promise<int> p(ctx);
    Future<int> f = p.get_future();
    Promise<int> outer;
    Future<int> result = outer.get_future();
    std::thread setter([&p, i] {
      for (int k = 0; k < (i * 7) % 64; ++k) std::this_thread::yield();
      p.set_value(i);
    });
    tsan_release(&arena);
    arena.enqueue([&] {
      tsan_acquire(&arena);
      outer.set_value(f.get());
    });
    ASSERT_TRUE(result.wait_for(std::chrono::seconds(30)));
    EXPECT_EQ(result.get(), i);
    setter.join();
  }
  EXPECT_EQ(parked.load(), 0);
  EXPECT_GE(lowest.load(), 0);
  std::printf("waits that parked: %d of %d\n", parks.load(), kRounds);
}

TEST(Future, WaitForInsideATaskTimesOutWithoutParkingTheWorker) {
  tbb::task_arena arena(1, 0);
  auto ctx = std::make_shared<strata::FutureContext>();
  ctx->arena = &arena;
  Promise<void> never(ctx);
  Future<void> f = never.get_future();
  Promise<bool> outer;
  Future<bool> result = outer.get_future();
  std::atomic<bool> other_ran{false};
  tsan_release(&arena);
  arena.enqueue([&] {
    tsan_acquire(&arena);
    arena.enqueue([&] { other_ran = true; });
    const bool ready = f.wait_for(std::chrono::milliseconds(30));
    outer.set_value(ready);
  });
  EXPECT_FALSE(result.get());
  EXPECT_TRUE(other_ran.load());
}

TEST(Future, ProgressHookDrivesInlineModeWaits) {
  // Inline progress mode: no thread polls the transport; the waiter's hook does.
  strata::transport::FakeWorld world(1);
  strata::dag::Executor ex(world.endpoint(0));
  auto ctx = std::make_shared<strata::FutureContext>();
  ctx->arena = &ex.arena();
  std::atomic<int> hook_calls{0};
  ctx->progress = [&] {
    hook_calls.fetch_add(1);
    const bool moved = world.release_all() > 0;
    return world.progress_all() > 0 || moved;
  };
  strata::dag::PlanBuilder b("self", 0, 1);
  b.wait(0, 1, {b.signal(0, 0)});
  auto plan = b.build();
  for (int inside = 0; inside < 2; ++inside) {
    Promise<void> p(ctx);
    Future<void> f = p.get_future();
    ASSERT_TRUE(
        ex.start(plan, {}, 0, static_cast<std::uint32_t>(inside), [p](const Status& s) mutable { p.set(s); }).is_ok());
    if (inside == 0) {
      f.get();  // external thread: spins the hook
    } else {
      Promise<void> done;
      Future<void> d = done.get_future();
      tsan_release(&f);
      ex.arena().enqueue([&] {
        tsan_acquire(&f);
        f.get();  // inside a task: suspends, a polling task drives the hook
        done.set_value();
      });
      EXPECT_TRUE(d.wait_for(std::chrono::seconds(30)));
    }
  }
  EXPECT_GT(hook_calls.load(), 0);
}

// on_complete: a plain callback, exactly once, in the completing thread (no task).
TEST(Future, OnCompleteRunsOnceInTheCompletingThreadForValuesAndErrors) {
  tbb::task_arena arena(2, 0);
  auto ctx = std::make_shared<strata::FutureContext>();
  ctx->arena = &arena;
  // Pending, then fulfilled by another thread: the callback runs there, with the value.
  Promise<int> p(ctx);
  std::atomic<int> calls{0};
  std::atomic<int> seen{0};
  std::thread::id cb_thread;
  std::atomic<bool> in_task{true};
  p.get_future().on_complete([&](Future<int> f) {
    ++calls;
    cb_thread = std::this_thread::get_id();
    in_task = tbb::task::current_context() != nullptr;
    EXPECT_TRUE(f.ready());
    seen = f.get();
  });
  std::thread::id setter;
  std::thread t([&] {
    setter = std::this_thread::get_id();
    p.set_value(7);
    p.set_value(8);  // ignored: already completed
  });
  t.join();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(seen.load(), 7);
  EXPECT_EQ(cb_thread, setter);
  EXPECT_FALSE(in_task.load());

  // A failure: the callback gets the cause.
  Promise<void> q(ctx);
  std::atomic<int> qcalls{0};
  Status got;
  q.get_future().on_complete([&](const Status& st) {
    ++qcalls;
    got = st;
  });
  EXPECT_EQ(qcalls.load(), 0);
  q.set_error(Status(Errc::peer_dead, "rank 3 died"));
  q.set_value();
  EXPECT_EQ(qcalls.load(), 1);
  EXPECT_EQ(got.code(), Errc::peer_dead);

  // Already complete: runs in the calling thread before on_complete returns.
  std::atomic<int> rcalls{0};
  std::thread::id ready_thread;
  strata::make_ready_future(5).on_complete([&](Future<int> f) {
    ready_thread = std::this_thread::get_id();
    rcalls += f.get();
  });
  EXPECT_EQ(rcalls.load(), 5);
  EXPECT_EQ(ready_thread, std::this_thread::get_id());
  Status err;
  strata::make_error_future<int>(Status(Errc::timeout, "late")).on_complete([&](const Status& st) { err = st; });
  EXPECT_EQ(err.code(), Errc::timeout);

  // A dropped promise completes the future with an error: the callback still runs once.
  std::atomic<int> bcalls{0};
  {
    Promise<double> b;
    b.get_future().on_complete([&](const Status& st) {
      ++bcalls;
      EXPECT_EQ(st.code(), Errc::internal);
    });
  }
  EXPECT_EQ(bcalls.load(), 1);

  // The future is consumed.
  Promise<void> c;
  Future<void> cf = c.get_future();
  std::move(cf).on_complete([](const Status&) {});
  EXPECT_FALSE(cf.valid());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_THROW(std::move(cf).on_complete([](const Status&) {}), strata::Error);
}

// FutureContext::block: the waiter sleeps in the hook (here: on its eventfd
// alone, for up to 20 s per call); the completion, from another thread, must
// write that eventfd, or the wait lasts 20 s.
TEST(Future, BlockHookWaiterIsWokenByACompletionFromAnotherThread) {
  auto ctx = std::make_shared<strata::FutureContext>();
  std::atomic<int> calls{0};
  ctx->block = [&](int fd, std::chrono::microseconds timeout) -> long {
    calls.fetch_add(1);
    pollfd p{fd, POLLIN, 0};
    const auto ms =
        std::min<std::int64_t>(20000, std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count());
    (void)::poll(&p, 1, static_cast<int>(ms));
    return 0;
  };
  for (int i = 0; i < 3; ++i) {
    Promise<int> p(ctx);
    Future<int> f = p.get_future();
    std::thread t([p = std::move(p)]() mutable {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the waiter block first
      p.set_value(7);
    });
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(f.get(), 7);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 10.0) << "the completion did not wake the waiter blocked in the hook";
    t.join();
  }
  EXPECT_GE(calls.load(), 1);
}

// A hook that declines (negative result) leaves the waiter on the condition
// variable, where the completion still wakes it.
TEST(Future, BlockHookThatDeclinesFallsBackToTheConditionVariable) {
  auto ctx = std::make_shared<strata::FutureContext>();
  std::atomic<int> calls{0};
  ctx->block = [&](int, std::chrono::microseconds) -> long {
    calls.fetch_add(1);
    return -1;
  };
  Promise<int> p(ctx);
  Future<int> f = p.get_future();
  std::thread t([p = std::move(p)]() mutable {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    p.set_value(9);
  });
  EXPECT_EQ(f.get(), 9);
  t.join();
  EXPECT_LE(calls.load(), 1);
}
