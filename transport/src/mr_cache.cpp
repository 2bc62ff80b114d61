#include "mr_cache.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace strata::transport::detail {

MrCache::MrCache(std::size_t max_entries, RegisterFn reg, DeregisterFn dereg)
    : max_entries_(std::max<std::size_t>(max_entries, 1)), reg_(std::move(reg)), dereg_(std::move(dereg)) {}

MrCache::~MrCache() {
  std::lock_guard<std::mutex> g(mu_);
  for (auto& kv : by_base_) {
    Entry* e = kv.second.get();
    if (dereg_) dereg_(e->handle, reinterpret_cast<void*>(e->base), e->len);
  }
  for (auto& z : zombies_) {
    if (dereg_) dereg_(z->handle, reinterpret_cast<void*>(z->base), z->len);
  }
}

Status MrCache::acquire(void* addr, std::size_t len, const Entry** out) {
  return lookup_or_register(addr, len, false, out);
}

Status MrCache::hold(void* addr, std::size_t len, const Entry** out) {
  return lookup_or_register(addr, len, true, out);
}

Status MrCache::lookup_or_register(void* addr, std::size_t len, bool hold, const Entry** out) {
  const char* what = hold ? "MrCache::hold" : "MrCache::acquire";
  if (out == nullptr) return {Errc::invalid_argument, std::string(what) + ": out is null"};
  if (addr == nullptr) return {Errc::invalid_argument, std::string(what) + ": addr is null"};
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(addr);
  const std::size_t n = std::max<std::size_t>(len, 1);
  if (a + n < a) {
    return {Errc::invalid_argument, std::string(what) + ": range of " + std::to_string(len) + " bytes wraps around"};
  }
  std::lock_guard<std::mutex> g(mu_);
  // Candidates contain a: base <= a and base + len >= a + n. Entries are
  // sorted by base; none with base < a - max_len_ can reach a.
  auto it = by_base_.upper_bound(a);
  while (it != by_base_.begin()) {
    --it;
    Entry* e = it->second.get();
    if (a - e->base > max_len_) break;
    if (e->base + e->len >= a + n) {
      ++(hold ? e->holds : e->pins);
      lru_.splice(lru_.begin(), lru_, e->lru);
      ++stats_.hits;
      *out = e;
      return {};
    }
  }
  std::uint64_t handle = 0;
  if (reg_) {
    Status s = reg_(addr, n, &handle);
    if (!s) return s;
  }
  ++stats_.misses;
  auto owned = std::make_unique<Entry>();
  Entry* e = owned.get();
  e->base = a;
  e->len = n;
  e->handle = handle;
  (hold ? e->holds : e->pins) = 1;
  lru_.push_front(e);
  e->lru = lru_.begin();
  by_base_.emplace(a, std::move(owned));
  max_len_ = std::max(max_len_, n);
  evict_locked();
  *out = e;
  return {};
}

void MrCache::release(const Entry* ce) {
  if (ce == nullptr) return;
  std::lock_guard<std::mutex> g(mu_);
  Entry* e = const_cast<Entry*>(ce);
  if (e->pins > 0) --e->pins;
  if (e->pins > 0) return;
  if (!e->cached) {
    auto it = std::find_if(zombies_.begin(), zombies_.end(), [e](const auto& z) { return z.get() == e; });
    if (it != zombies_.end()) {
      if (dereg_) dereg_(e->handle, reinterpret_cast<void*>(e->base), e->len);
      ++stats_.deregistrations;
      zombies_.erase(it);
    }
    return;
  }
  evict_locked();
}

void MrCache::drop_locked(Entry* e) {
  lru_.erase(e->lru);
  e->cached = false;
  e->holds = 0;
  auto range = by_base_.equal_range(e->base);
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second.get() != e) continue;
    std::unique_ptr<Entry> owned = std::move(it->second);
    by_base_.erase(it);
    if (e->pins > 0) {
      zombies_.push_back(std::move(owned));
    } else {
      if (dereg_) dereg_(e->handle, reinterpret_cast<void*>(e->base), e->len);
      ++stats_.deregistrations;
    }
    break;
  }
  if (by_base_.empty()) max_len_ = 0;
}

void MrCache::evict_locked() {
  // Walk from the least recently used end, skipping pinned and held entries.
  auto it = lru_.end();
  while (by_base_.size() > max_entries_ && it != lru_.begin()) {
    --it;
    Entry* e = *it;
    if (e->pins > 0 || e->holds > 0) continue;
    it = std::next(it);  // drop_locked erases e; keep a valid iterator past it
    drop_locked(e);
    ++stats_.evictions;
  }
}

std::size_t MrCache::invalidate(void* addr, std::size_t len) {
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(addr);
  const std::uintptr_t end = a + std::max<std::size_t>(len, 1) < a ? UINTPTR_MAX : a + std::max<std::size_t>(len, 1);
  std::lock_guard<std::mutex> g(mu_);
  std::vector<Entry*> victims;
  for (auto& kv : by_base_) {
    Entry* e = kv.second.get();
    if (e->base >= end) break;
    if (e->base + e->len > a) victims.push_back(e);
  }
  for (Entry* e : victims) drop_locked(e);
  return victims.size();
}

MrCache::Stats MrCache::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  Stats s = stats_;
  s.entries = by_base_.size();
  return s;
}

}  // namespace strata::transport::detail
