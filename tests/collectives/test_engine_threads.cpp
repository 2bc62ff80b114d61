// Engines with ranks as threads (in-process bootstrap): the whole stack in one
// process, so ThreadSanitizer and AddressSanitizer see every rank at once.
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "../common/inprocess_ranks.hpp"
#include "strata/strata.hpp"
#include "strata/transport/bootstrap.hpp"

namespace {

using inprocess_ranks::run_ranks;

TEST(EngineThreads, AllreduceBroadcastAndBarrierAreCorrectWithRanksAsThreads) {
  run_ranks(3, 1, [](strata::Engine& e) {
    strata::Communicator& w = e.world();
    const int n = w.size();
    for (std::size_t count : {std::size_t{1}, std::size_t{1000}, std::size_t{100000}}) {
      std::vector<std::int64_t> x(count, w.rank() + 1), y(count, 0);
      w.allreduce(x.data(), y.data(), count, strata::Datatype::int64, strata::Op::sum).get();
      for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(y[i], n * (n + 1) / 2);
      std::vector<std::int32_t> b(count, w.rank() == 1 ? 42 : 0);
      w.broadcast(b.data(), count, strata::Datatype::int32, 1).get();
      for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(b[i], 42);
      w.barrier().get();
    }
  });
}

TEST(EngineThreads, LooseCollectivesInFlightTogetherAcrossTwoVirtualHosts) {
  run_ranks(4, 2, [](strata::Engine& e) {
    strata::Communicator& w = e.world();
    const int k = 16;
    std::vector<std::vector<std::int32_t>> in(k, std::vector<std::int32_t>(300)),
        out(k, std::vector<std::int32_t>(300));
    std::vector<strata::Future<void>> fs;
    for (int j = 0; j < k; ++j) {
      for (auto& v : in[static_cast<std::size_t>(j)]) v = j + w.rank();
      fs.push_back(w.allreduce(in[static_cast<std::size_t>(j)].data(), out[static_cast<std::size_t>(j)].data(), 300,
                               strata::Datatype::int32, strata::Op::sum));
    }
    strata::when_all(std::move(fs)).get();
    for (int j = 0; j < k; ++j) ASSERT_EQ(out[static_cast<std::size_t>(j)][299], 4 * j + 6);
  });
}

}  // namespace

namespace {

// Regression (review finding): destroying the Engine while loose collectives
// were still queued behind a busy window slot crashed (a queued start ran
// during the executor's drain, through a null executor). Now every future
// ends, OK or with an error, and nothing crashes or hangs.
TEST(EngineThreads, DestroyingTheEngineWithQueuedCollectivesEndsEveryFuture) {
  constexpr int kCalls = 48;
  std::vector<std::vector<std::vector<std::int64_t>>> bufs(3);
  std::vector<std::vector<strata::Future<void>>> futs(3);
  auto boots = strata::make_inprocess_bootstraps(3, 1);
  std::vector<std::thread> ts;
  for (int r = 0; r < 3; ++r) {
    ts.emplace_back([&, r] {
      strata::EngineOptions o;
      o.worker_threads = 1;
      o.credits = 1;
      auto& mine = bufs[static_cast<std::size_t>(r)];
      mine.assign(2 * kCalls, std::vector<std::int64_t>(8192, 1));
      {
        strata::Engine e(std::move(boots[static_cast<std::size_t>(r)]), o);
        for (int k = 0; k < kCalls; ++k)
          futs[static_cast<std::size_t>(r)].push_back(e.world().allreduce(
              mine[static_cast<std::size_t>(2 * k)].data(), mine[static_cast<std::size_t>(2 * k + 1)].data(), 8192,
              strata::Datatype::int64, strata::Op::sum));
      }  // engine destroyed with most calls still queued
    });
  }
  for (auto& t : ts) t.join();
  for (auto& per_rank : futs)
    for (auto& f : per_rank) {
      ASSERT_TRUE(f.ready());
      try {
        f.get();
      } catch (const strata::Error& e) {
        EXPECT_TRUE(e.errc() == strata::Errc::shutdown || e.errc() == strata::Errc::cancelled ||
                    e.errc() == strata::Errc::peer_dead)
            << e.what();
      }
    }
}

}  // namespace
