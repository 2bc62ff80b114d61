// strata::Window with ranks as threads (in-process bootstrap): the whole
// stack in one process, so the sanitizers see every rank at once.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "../common/inprocess_ranks.hpp"
#include "strata/strata.hpp"
#include "strata/transport/bootstrap.hpp"
#include "window_scenarios.hpp"

namespace {

using inprocess_ranks::run_ranks;

TEST(WindowThreads, EveryScenarioOnThreeRanks) {
  run_ranks(3, 1, [](strata::Engine& e) { win_test::all(e.world(), /*quick=*/true); });
}

TEST(WindowThreads, EveryScenarioOnFourRanksOverTwoVirtualHosts) {
  run_ranks(4, 2, [](strata::Engine& e) { win_test::all(e.world(), /*quick=*/true); });
}

TEST(WindowThreads, SingleRankPutsToItself) {
  run_ranks(1, 1, [](strata::Engine& e) { win_test::all(e.world(), /*quick=*/true); });
}

// Window signals and collectives at once: a collective in flight on the same
// communicator is not disturbed by window signals (separate encodings).
TEST(WindowThreads, CollectivesAndWindowSignalsInterleave) {
  run_ranks(3, 1, [](strata::Engine& e) {
    strata::Communicator& w = e.world();
    const int n = w.size(), me = w.rank();
    std::vector<std::int64_t> slot(n, -1);
    strata::Window win = w.create_window(slot.data(), slot.size() * sizeof(std::int64_t));
    for (int it = 0; it < 20; ++it) {
      std::vector<std::int64_t> x(1000, me + it), y(1000, 0);
      auto coll = w.allreduce(x.data(), y.data(), x.size(), strata::Datatype::int64, strata::Op::sum);
      const std::int64_t v = 100 * it + me;
      std::vector<strata::Future<void>> fs;
      for (int t = 0; t < n; ++t) fs.push_back(win.put_signal(t, static_cast<std::size_t>(me) * 8, &v, 8, 3));
      win.wait(3, static_cast<std::uint64_t>(n)).get();
      for (int s = 0; s < n; ++s) ASSERT_EQ(slot[static_cast<std::size_t>(s)], 100 * it + s);
      coll.get();
      ASSERT_EQ(y[999], n * it + n * (n - 1) / 2);
      for (auto& f : fs) f.get();
      w.barrier().get();  // nobody overwrites slot before everyone checked it
    }
    win.free();
  });
}

// Engine shutdown with a window still open and a wait pending: the wait
// fails with Errc::shutdown, later calls throw, dropping the handle is quiet.
TEST(WindowThreads, EngineShutdownFailsPendingWaitsAndLaterCalls) {
  auto boots = strata::make_inprocess_bootstraps(2, 1);
  std::vector<std::thread> ts;
  std::vector<std::string> errors(2);
  for (int r = 0; r < 2; ++r) {
    ts.emplace_back([&, r] {
      std::string& err = errors[static_cast<std::size_t>(r)];
      std::vector<char> mem(64);
      strata::Window win;
      strata::Future<void> pending;
      {
        strata::EngineOptions o;
        o.worker_threads = 1;
        strata::Engine e(std::move(boots[static_cast<std::size_t>(r)]), o);
        win = e.world().create_window(mem.data(), mem.size());
        pending = win.wait(/*tag=*/42, 1);  // never sent
      }
      if (!pending.wait_for(std::chrono::seconds(20))) {
        err = "pending wait still pending after the engine shut down";
        return;
      }
      if (pending.status().code() != strata::Errc::shutdown) err = "pending wait: " + pending.status().message();
      try {
        (void)win.signal(0, 1);
        err = "signal after shutdown did not throw";
      } catch (const strata::Error& ex) {
        if (ex.errc() != strata::Errc::shutdown) err = std::string("signal after shutdown: ") + ex.what();
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

// Window signals use the reserved communicator id 0xFFFF.
TEST(WindowThreads, WindowSignalEncodingDoesNotCollideWithCommunicators) {
  run_ranks(2, 1, [](strata::Engine& e) {
    strata::Communicator c = e.world().dup();
    ASSERT_NE(c.id(), 0xFFFF);
    std::vector<char> mem(8);
    strata::Window a = c.create_window(mem.data(), mem.size());
    strata::Window b = e.world().create_window(nullptr, 0);
    ASSERT_NE(a.id(), b.id());
    // Same tag on two windows: counted separately.
    const int other = 1 - c.rank();
    b.signal(other, 1).get();
    b.signal(other, 1).get();
    a.signal(other, 1).get();
    a.wait(1, 1).get();
    b.wait(1, 2).get();
    ASSERT_EQ(a.arrived(1), 1u);
    ASSERT_EQ(b.arrived(1), 2u);
    b.free();
    a.free();
  });
}

}  // namespace
