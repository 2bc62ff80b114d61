// The window budget (EngineOptions::window_budget, STRATA_WINDOW_BUDGET;
// docs/algorithms.md, "Window memory"): a communicator created when a member
// has used its budget gets smaller window slots, agreed by every member (the
// smallest proposal wins, so members with room left follow), never below
// 64 KiB; its collectives stay correct (more fragments per message);
// Engine::window_stats counts the live windows and drops a freed one. Real
// engines, ranks as threads (in-process bootstrap, one host).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "../common/inprocess_ranks.hpp"
#include "strata/strata.hpp"

namespace {

constexpr int kRanks = 2;

void run(const std::array<std::size_t, kRanks>& budget, const std::function<void(strata::Engine&)>& body) {
  inprocess_ranks::run_ranks(
      kRanks, 1, body, [&](int r, strata::EngineOptions& o) { o.window_budget = budget[static_cast<std::size_t>(r)]; });
}

// A 1 MiB allreduce and broadcast on @p c, checked.
void check_calls(strata::Communicator& c) {
  constexpr std::size_t n = std::size_t{1} << 18;  // int32: 1 MiB
  std::vector<std::int32_t> x(n), y(n, -1);
  for (std::size_t i = 0; i < n; ++i) x[i] = c.rank() + 1 + static_cast<std::int32_t>(i % 1000);
  c.allreduce(x.data(), y.data(), n, strata::Datatype::int32, strata::Op::sum).get();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(y[i], 3 + 2 * static_cast<std::int32_t>(i % 1000)) << i;
  if (c.rank() == 1)
    for (std::size_t i = 0; i < n; ++i) y[i] = static_cast<std::int32_t>(7 * i);
  c.broadcast(y.data(), n, strata::Datatype::int32, 1).get();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(y[i], static_cast<std::int32_t>(7 * i)) << i;
}

TEST(WindowBudget, AMemberOverItsBudgetGivesNewCommunicatorsSmallSlotsAndTheirCallsStayCorrect) {
  // Rank 1's budget is below what the world's window already takes; rank 0 has no budget.
  run({0, std::size_t{1} << 20}, [](strata::Engine& e) {
    strata::Communicator& w = e.world();
    const strata::Engine::WindowStats w0 = e.window_stats();
    EXPECT_GE(w0.bytes, std::size_t{4} << 20) << "the world's window: 4 credits x 1 MiB";
    EXPECT_EQ(w0.budget, w.rank() == 0 ? 0u : std::size_t{1} << 20);
    {
      strata::Communicator d = w.dup();
      const std::size_t grew = e.window_stats().bytes - w0.bytes;
      // Both members took 64 KiB slots (rank 0 follows rank 1's proposal):
      // 4 x 64 KiB plus the flag words and the mapped area, far below 4 MiB.
      EXPECT_GE(grew, std::size_t{4} << 16) << "rank " << w.rank();
      EXPECT_LT(grew, std::size_t{4} << 20) << "rank " << w.rank();
      check_calls(d);
    }
    EXPECT_EQ(e.window_stats().bytes, w0.bytes) << "a freed communicator's window is no longer counted";
  });
}

TEST(WindowBudget, WithoutABudgetNewCommunicatorsTakeTheParentsSlots) {
  run({0, 0}, [](strata::Engine& e) {
    strata::Communicator& w = e.world();
    const std::size_t before = e.window_stats().bytes;
    strata::Communicator d = w.dup();
    EXPECT_GE(e.window_stats().bytes - before, std::size_t{4} << 20) << "rank " << w.rank();
    check_calls(d);
  });
}

}  // namespace
