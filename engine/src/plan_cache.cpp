// The engine-wide plan cache (plan_cache.hpp): a list in recency order and a
// hash index into it, under one mutex. Taken only when a call's window slot
// does not remember its plan (CommImpl::submit, memos) and when a plan is
// compiled: not on the repeated-call path.
#include "plan_cache.hpp"

#include <utility>

#include "strata/dag/executor.hpp"

namespace strata::detail {

std::size_t PlanCache::charge(const dag::Plan& plan) noexcept {
  return plan.footprint_bytes() + dag::Executor::instance_bytes(plan);
}

std::string PlanCache::full_key(std::uint64_t owner, std::string_view key) {
  std::string k;
  k.reserve(sizeof owner + key.size());
  k.append(reinterpret_cast<const char*>(&owner), sizeof owner);
  k.append(key);
  return k;
}

void PlanCache::set_budget(std::size_t bytes) {
  Gone gone;
  std::lock_guard<std::mutex> lk(mu_);
  budget_ = bytes;
  fit(0, gone);
}

std::shared_ptr<const dag::Plan> PlanCache::find(std::uint64_t owner, std::string_view key) {
  const std::string k = full_key(owner, key);
  std::lock_guard<std::mutex> lk(mu_);
  auto it = index_.find(k);
  if (it == index_.end()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->plan;
}

std::shared_ptr<const dag::Plan> PlanCache::insert(std::uint64_t owner, std::string_view key,
                                                   std::shared_ptr<const dag::Plan> plan) {
  if (!plan) return plan;
  const std::size_t bytes = charge(*plan);
  std::string k = full_key(owner, key);
  Gone gone;  // destroyed after the lock below
  std::lock_guard<std::mutex> lk(mu_);
  if (auto it = index_.find(k); it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->plan;
  }
  if (bytes > budget_) return plan;
  fit(bytes, gone);
  lru_.push_front(Entry{std::move(k), owner, plan, bytes});
  index_.emplace(std::string_view(lru_.front().key), lru_.begin());
  bytes_ += bytes;
  if (bytes_ > peak_bytes_) peak_bytes_ = bytes_;
  return plan;
}

void PlanCache::erase(std::list<Entry>::iterator it, Gone& gone) {
  index_.erase(std::string_view(it->key));
  bytes_ -= it->bytes;
  // Only the cache's reference goes: running instances, window-slot memos
  // and persistent plans keep theirs.
  gone.push_back(std::move(it->plan));
  lru_.erase(it);
}

void PlanCache::fit(std::size_t extra, Gone& gone) {
  while (!lru_.empty() && bytes_ + extra > budget_) {
    erase(std::prev(lru_.end()), gone);
    ++evictions_;
  }
}

void PlanCache::drop(std::uint64_t owner) {
  Gone gone;
  std::lock_guard<std::mutex> lk(mu_);
  for (auto it = lru_.begin(); it != lru_.end();) {
    auto next = std::next(it);
    if (it->owner == owner) erase(it, gone);
    it = next;
  }
}

Engine::PlanCacheStats PlanCache::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  Engine::PlanCacheStats s;
  s.hits = hits_;
  s.misses = misses_;
  s.evictions = evictions_;
  s.entries = lru_.size();
  s.bytes = bytes_;
  s.peak_bytes = peak_bytes_;
  s.budget = budget_;
  return s;
}

}  // namespace strata::detail
