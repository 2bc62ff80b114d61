// The engine's destructor and threads that still wait on futures of its
// context (in-process, one rank): the context's hooks are never rewritten at
// shutdown (regression: the destructor reset FutureContext::progress / spin /
// arena while waiters called them: a data race, reported by TSan, and a call
// through a half-reset std::function). Run under -DSTRATA_SANITIZE=thread too.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <optional>
#include <thread>

#include "strata/strata.hpp"

namespace {

void waiters_across_shutdown(int progress_threads) {
  std::optional<strata::Promise<void>> p;
  std::optional<strata::Future<void>> f;
  std::atomic<bool> started{false}, returned{false};
  std::thread waiter;
  {
    strata::EngineOptions o;
    o.progress_threads = progress_threads;
    strata::Engine engine(o);
    p.emplace(engine.future_context());
    f.emplace(p->get_future());
    waiter = std::thread([&] {
      started.store(true);
      f->get();  // drives the context's hooks (progress / spin / park) while the engine goes away
      returned.store(true);
    });
    while (!started.load()) std::this_thread::yield();
    // The engine is destroyed with the waiter inside get().
  }
  p->set_value();
  waiter.join();
  EXPECT_TRUE(returned.load());
}

TEST(EngineShutdown, WaitersOfItsContextAcrossTheDestructorInlineMode) { waiters_across_shutdown(0); }
TEST(EngineShutdown, WaitersOfItsContextAcrossTheDestructorWithServers) { waiters_across_shutdown(1); }

}  // namespace
