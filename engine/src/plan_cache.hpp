// Engine internals (not installed): the engine-wide plan cache. Every
// communicator of an engine caches its compiled plans here, under one byte
// budget (EngineOptions::plan_cache_bytes, STRATA_PLAN_CACHE_BYTES) with
// least-recently-used eviction across all communicators (docs/algorithms.md,
// "Plan cache"). Bodies: plan_cache.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "strata/dag/plan.hpp"
#include "strata/engine.hpp"

namespace strata::detail {

class PlanCache {
 public:
  explicit PlanCache(std::size_t budget = 0) : budget_(budget) {}
  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;

  // What one plan costs the budget: its own heap bytes plus the instance
  // block it keeps once it has run (Plan::footprint_bytes,
  // Executor::instance_bytes).
  static std::size_t charge(const dag::Plan& plan) noexcept;

  void set_budget(std::size_t bytes);
  // The plan of communicator @p owner (its serial) under @p key, made the
  // most recently used; null on a miss. Counts a hit or a miss.
  std::shared_ptr<const dag::Plan> find(std::uint64_t owner, std::string_view key);
  // Keeps @p plan under (@p owner, @p key) as the most recently used entry,
  // evicting the least recently used ones until it fits the budget. A plan
  // larger than the whole budget is not kept. Returns the plan to use: the
  // one already cached under the key when another thread compiled it first.
  std::shared_ptr<const dag::Plan> insert(std::uint64_t owner, std::string_view key,
                                          std::shared_ptr<const dag::Plan> plan);
  // Drops every entry of @p owner (its communicator went, or its plans
  // changed protocol); not counted as evictions.
  void drop(std::uint64_t owner);
  [[nodiscard]] Engine::PlanCacheStats stats() const;

 private:
  struct Entry {
    std::string key;  // the owner's 8 bytes, then the call's key
    std::uint64_t owner = 0;
    std::shared_ptr<const dag::Plan> plan;
    std::size_t bytes = 0;
  };
  static std::string full_key(std::uint64_t owner, std::string_view key);
  // mu_ held. The erased plans go to @p gone, released by the caller after
  // it unlocked (a plan's destruction runs its callables' destructors).
  using Gone = std::vector<std::shared_ptr<const dag::Plan>>;
  void erase(std::list<Entry>::iterator it, Gone& gone);
  void fit(std::size_t extra, Gone& gone);  // evicts until @p extra more bytes fit

  mutable std::mutex mu_;
  std::size_t budget_;
  std::size_t bytes_ = 0;
  std::list<Entry> lru_;  // front: the most recently used
  // Views into the entries' keys (list nodes do not move).
  std::unordered_map<std::string_view, std::list<Entry>::iterator> index_;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
  std::uint64_t evictions_ = 0;
  std::size_t peak_bytes_ = 0;
};

}  // namespace strata::detail
