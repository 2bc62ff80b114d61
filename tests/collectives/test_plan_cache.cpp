// The engine's plan cache (EngineOptions::plan_cache_bytes,
// STRATA_PLAN_CACHE_BYTES; docs/algorithms.md, "Plan cache"): one byte budget
// across the communicators, least recently used plans evicted first, results
// correct after eviction and recompilation, persistent plans valid after
// their cache entry went, counters (Engine::plan_cache_stats). Real engines,
// ranks as threads (in-process bootstrap, one host).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../common/inprocess_ranks.hpp"
#include "strata/dag/plan.hpp"
#include "strata/strata.hpp"
#include "strata/transport/bootstrap.hpp"

namespace {

constexpr int kRanks = 2;
constexpr std::size_t kCount = 64;

// Runs @p body on kRanks ranks as threads, rank r's engine with one credit
// (one window slot: the slot remembers only the last call's plan, so a call
// that differs from the one before looks its plan up in the cache) and a
// plan-cache budget of budget[r].
void run(const std::array<std::size_t, kRanks>& budget, const std::function<void(strata::Engine&)>& body) {
  inprocess_ranks::run_ranks(kRanks, 1, body, [&](int r, strata::EngineOptions& o) {
    o.credits = 1;
    o.plan_cache_bytes = budget[static_cast<std::size_t>(r)];
  });
}

// Three calls of one shape and three plans (the operator is in the plan's
// key); each checks its result. Rank r contributes r + 1 + i at element i.
const strata::Op kOps[3] = {strata::Op::sum, strata::Op::max, strata::Op::min};
void call(strata::Communicator& w, int which) {
  std::vector<std::int32_t> x(kCount), y(kCount, -1);
  for (std::size_t i = 0; i < kCount; ++i) x[i] = w.rank() + 1 + static_cast<std::int32_t>(i);
  w.allreduce(x.data(), y.data(), kCount, strata::Datatype::int32, kOps[which]).get();
  for (std::size_t i = 0; i < kCount; ++i) {
    const auto b = static_cast<std::int32_t>(i);
    const std::int32_t want = which == 0 ? (1 + b) + (2 + b) : which == 1 ? 2 + b : 1 + b;
    ASSERT_EQ(y[i], want) << "call " << which << " element " << i << " on rank " << w.rank();
  }
}

// What each of the three plans costs rank r's cache, measured with the
// default budget (which holds them all: nothing is evicted).
std::array<std::array<std::size_t, 3>, kRanks> measure() {
  std::array<std::array<std::size_t, 3>, kRanks> size{};
  run({std::size_t{64} << 20, std::size_t{64} << 20}, [&](strata::Engine& e) {
    strata::Communicator& w = e.world();
    for (int k = 0; k < 3; ++k) {
      const strata::Engine::PlanCacheStats s0 = e.plan_cache_stats();
      call(w, k);
      const strata::Engine::PlanCacheStats s1 = e.plan_cache_stats();
      ASSERT_EQ(s1.misses, s0.misses + 1);
      ASSERT_EQ(s1.evictions, s0.evictions);
      ASSERT_EQ(s1.entries, s0.entries + 1);
      size[static_cast<std::size_t>(w.rank())][static_cast<std::size_t>(k)] = s1.bytes - s0.bytes;
    }
  });
  return size;
}

TEST(PlanCache, FootprintCountsNodesAndStaysSmallForHighSlots) {
  using namespace strata::dag;
  PlanBuilder a("small", 0, 2);
  a.input(0, 8).output(0, 8);
  a.copy(in(0, 0, 8), out(0, 0, 8));
  const auto pa = a.build();
  PlanBuilder b("larger", 0, 2);
  b.input(0, 8).output(0, 8);
  NodeId prev = b.copy(in(0, 0, 8), out(0, 0, 8));
  for (int i = 0; i < 100; ++i) prev = b.nop({prev});
  // A wait on the highest slot (barrier / token slots sit near 2^19): the
  // slot table stays sparse, a dense one up to it would be 2 MB.
  b.expect_signals_from(1);
  b.wait(kMaxSlot, 1, {prev});
  const auto pb = b.build();
  EXPECT_GE(pa->footprint_bytes(), sizeof(Plan) + sizeof(Node));
  EXPECT_GE(pb->footprint_bytes(), pa->footprint_bytes() + 100 * sizeof(Node));
  EXPECT_LT(pb->footprint_bytes(), std::size_t{64} << 10);
}

TEST(PlanCache, EnvironmentSetsTheBudget) {
  ::setenv("STRATA_PLAN_CACHE_BYTES", "12345", 1);
  EXPECT_EQ(strata::EngineOptions::from_environment().plan_cache_bytes, 12345u);
  ::setenv("STRATA_PLAN_CACHE_BYTES", "-1", 1);
  EXPECT_THROW((void)strata::EngineOptions::from_environment(), strata::Error);
  ::unsetenv("STRATA_PLAN_CACHE_BYTES");
  EXPECT_EQ(strata::EngineOptions::from_environment().plan_cache_bytes, std::size_t{64} << 20);
}

// A budget that holds any two of the three plans but not all three: the
// plan used last survives, the least recently used one goes, and a call
// whose plan went is compiled again and still correct.
TEST(PlanCache, EvictsTheLeastRecentlyUsedPlan) {
  const auto size = measure();
  std::array<std::size_t, kRanks> budget{};
  for (int r = 0; r < kRanks; ++r) {
    auto s = size[static_cast<std::size_t>(r)];
    std::sort(s.begin(), s.end());
    ASSERT_GT(s[0], 0u);
    budget[static_cast<std::size_t>(r)] = s[1] + s[2];  // < s[0] + s[1] + s[2]
  }
  run(budget, [&](strata::Engine& e) {
    strata::Communicator& w = e.world();
    const strata::Engine::PlanCacheStats s0 = e.plan_cache_stats();
    EXPECT_EQ(s0.budget, budget[static_cast<std::size_t>(w.rank())]);
    call(w, 0);  // miss: A
    call(w, 1);  // miss: B
    call(w, 0);  // hit: A, now more recent than B
    const strata::Engine::PlanCacheStats s1 = e.plan_cache_stats();
    EXPECT_EQ(s1.misses - s0.misses, 2u);
    EXPECT_EQ(s1.hits - s0.hits, 1u);
    call(w, 2);  // miss: C evicts B (least recently used), not A
    const strata::Engine::PlanCacheStats s2 = e.plan_cache_stats();
    EXPECT_EQ(s2.misses - s1.misses, 1u);
    EXPECT_GE(s2.evictions - s1.evictions, 1u);
    EXPECT_EQ(s2.entries, 2u);
    call(w, 0);  // hit: A survived
    const strata::Engine::PlanCacheStats s3 = e.plan_cache_stats();
    EXPECT_EQ(s3.hits - s2.hits, 1u) << "the recently used plan was evicted";
    EXPECT_EQ(s3.misses, s2.misses);
    call(w, 1);  // miss: B went, compiled again (evicts C)
    const strata::Engine::PlanCacheStats s4 = e.plan_cache_stats();
    EXPECT_EQ(s4.misses - s3.misses, 1u);
    EXPECT_EQ(s4.evictions - s3.evictions, 1u);
    call(w, 0);  // hit: A (used after C)
    const strata::Engine::PlanCacheStats s5 = e.plan_cache_stats();
    EXPECT_EQ(s5.hits - s4.hits, 1u);
    EXPECT_LE(s5.bytes, s5.budget);
    EXPECT_LE(s5.peak_bytes, s5.budget);
    EXPECT_EQ(s5.entries, 2u);
  });
}

// The budget is the engine's, not a communicator's: plans of two
// communicators compete for it, and a freed communicator's plans leave it.
TEST(PlanCache, OneBudgetAcrossCommunicators) {
  const auto size = measure();
  std::array<std::size_t, kRanks> budget{};
  for (int r = 0; r < kRanks; ++r) {
    const auto& s = size[static_cast<std::size_t>(r)];
    budget[static_cast<std::size_t>(r)] = s[0] + s[1];  // A and B of one communicator
  }
  run(budget, [&](strata::Engine& e) {
    strata::Communicator& w = e.world();
    strata::Communicator d = w.dup();
    call(w, 0);
    call(w, 1);
    const strata::Engine::PlanCacheStats s0 = e.plan_cache_stats();
    call(d, 0);  // the other communicator's A evicts the world's A
    call(w, 1);  // memo: no lookup
    call(w, 0);  // compiled again
    const strata::Engine::PlanCacheStats s1 = e.plan_cache_stats();
    EXPECT_EQ(s1.misses - s0.misses, 2u);
    EXPECT_GE(s1.evictions - s0.evictions, 2u);
    EXPECT_LE(s1.bytes, s1.budget);
    d = strata::Communicator();  // its plans leave the cache
    const strata::Engine::PlanCacheStats s2 = e.plan_cache_stats();
    EXPECT_LT(s2.entries, s1.entries);
    EXPECT_EQ(s2.evictions, s1.evictions);
  });
}

// Budget 0 caches nothing; every call still runs correctly (compiled each
// time its window slot does not remember it).
TEST(PlanCache, ZeroBudgetCachesNothing) {
  run({0, 0}, [&](strata::Engine& e) {
    strata::Communicator& w = e.world();
    const strata::Engine::PlanCacheStats s0 = e.plan_cache_stats();
    for (int round = 0; round < 3; ++round)
      for (int k = 0; k < 3; ++k) call(w, k);
    const strata::Engine::PlanCacheStats s1 = e.plan_cache_stats();
    EXPECT_EQ(s1.misses - s0.misses, 9u);
    EXPECT_EQ(s1.hits, s0.hits);
    EXPECT_EQ(s1.entries, 0u);
    EXPECT_EQ(s1.bytes, 0u);
  });
}

// A persistent plan keeps its compiled plan when the cache evicts it: its
// later starts neither look it up nor compile it, and stay correct.
TEST(PlanCache, PersistentPlanOutlivesItsEviction) {
  const auto size = measure();
  std::array<std::size_t, kRanks> budget{};
  for (int r = 0; r < kRanks; ++r) {
    const auto& s = size[static_cast<std::size_t>(r)];
    budget[static_cast<std::size_t>(r)] = std::max({s[0], s[1], s[2]});  // one plan at a time
  }
  run(budget, [&](strata::Engine& e) {
    strata::Communicator& w = e.world();
    std::vector<std::int32_t> x(kCount), y(kCount, -1);
    for (std::size_t i = 0; i < kCount; ++i) x[i] = w.rank() + 1 + static_cast<std::int32_t>(i);
    strata::Plan p = w.plan_allreduce(x.data(), y.data(), kCount, strata::Datatype::int32, strata::Op::sum);
    p.start().get();  // compiled and cached
    call(w, 1);       // evicts it
    call(w, 2);
    const strata::Engine::PlanCacheStats s0 = e.plan_cache_stats();
    EXPECT_GE(s0.evictions, 2u);
    EXPECT_EQ(s0.entries, 1u);
    for (int round = 0; round < 3; ++round) {
      std::fill(y.begin(), y.end(), -1);
      p.start().get();
      for (std::size_t i = 0; i < kCount; ++i) ASSERT_EQ(y[i], 3 + 2 * static_cast<std::int32_t>(i));
      call(w, 1);  // between the starts: the window slot's memo is not the plan's
    }
    const strata::Engine::PlanCacheStats s1 = e.plan_cache_stats();
    // call(w, 1) the first time: a miss (C was the cached one); then B is the
    // cached plan and the memo alternates, so its lookups hit.
    EXPECT_EQ(s1.misses - s0.misses, 1u) << "the persistent plan was compiled again";
  });
}

}  // namespace
