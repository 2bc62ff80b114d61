// Private registration cache of the libfabric backend.
//
// The shared cache (transport/src/mr_cache.hpp) was not available when this
// backend was written; this one is small and only used under the backend's
// lock. Entries registered by the user (register_memory) are pinned: they are
// never evicted, because peers hold their keys. Entries created for local
// descriptors (FI_MR_LOCAL) are evictable once no operation uses them, least
// recently used first, when the cache holds more than its bound.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

namespace strata::transport::detail::fabric {

/// One fi_mr over [base, base+len).
struct MrEntry {
  std::uintptr_t base = 0;
  std::size_t len = 0;
  fid_mr* mr = nullptr;
  void* desc = nullptr;
  std::uint64_t key = 0;
  int pinned = 0;    ///< user registrations covering it (register_memory)
  int inflight = 0;  ///< operations using it as a local descriptor
  std::uint64_t last_use = 0;
  bool dead = false;  ///< deregistered while in use: closed when inflight drops to 0
};

class MrCache {
 public:
  /// @p reg performs the registration (fills mr/desc/key); returns 0 or -fi_errno.
  using RegisterFn = std::function<int(MrEntry&)>;

  explicit MrCache(std::size_t bound) : bound_(bound == 0 ? 1 : bound) {}
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;
  ~MrCache() { clear(); }

  /// Smallest live entry covering [addr, addr+len), or nullptr.
  MrEntry* find(std::uintptr_t addr, std::size_t len) {
    MrEntry* best = nullptr;
    for (auto& kv : entries_) {
      MrEntry& e = *kv.second;
      if (e.dead) continue;
      if (kv.first > addr) break;
      if (addr - e.base <= e.len && len <= e.len - (addr - e.base)) {
        if (best == nullptr || e.len < best->len) best = &e;
      }
    }
    if (best != nullptr) best->last_use = ++clock_;
    return best;
  }

  /// Entry whose key is @p key (live), or nullptr.
  MrEntry* find_key(std::uint64_t key) {
    auto it = by_key_.find(key);
    return it == by_key_.end() ? nullptr : it->second;
  }

  /// Finds or registers an entry covering [addr, addr+len). Returns nullptr and
  /// sets @p err (negative fi_errno) when registration fails.
  MrEntry* acquire(std::uintptr_t addr, std::size_t len, const RegisterFn& reg, int* err) {
    if (MrEntry* e = find(addr, len)) return e;
    auto e = std::make_unique<MrEntry>();
    e->base = addr;
    e->len = len;
    int rc = reg(*e);
    if (rc != 0) {
      *err = rc;
      return nullptr;
    }
    e->last_use = ++clock_;
    MrEntry* raw = e.get();
    by_key_[raw->key] = raw;
    entries_.emplace(addr, std::move(e));
    evict();
    return raw;
  }

  /// Marks every entry overlapping [addr, addr+len) dead and closes those not in use.
  /// Returns the number of entries dropped.
  std::size_t drop(std::uintptr_t addr, std::size_t len) {
    std::size_t n = 0;
    for (auto it = entries_.begin(); it != entries_.end();) {
      MrEntry& e = *it->second;
      bool overlap = e.base < addr + len && addr < e.base + e.len;
      if (overlap && !e.dead) {
        ++n;
        e.dead = true;
        e.pinned = 0;
        by_key_.erase(e.key);
      }
      if (e.dead && e.inflight == 0) {
        close_entry(e);
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
    return n;
  }

  /// Called when an operation stops using @p e as a local descriptor.
  void release(MrEntry* e) {
    if (e == nullptr) return;
    --e->inflight;
    if (e->dead && e->inflight == 0) {
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->second.get() == e) {
          close_entry(*e);
          entries_.erase(it);
          break;
        }
      }
    } else {
      evict();
    }
  }

  void clear() {
    for (auto& kv : entries_) close_entry(*kv.second);
    entries_.clear();
    by_key_.clear();
  }

  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }

 private:
  static void close_entry(MrEntry& e) {
    if (e.mr != nullptr) fi_close(&e.mr->fid);
    e.mr = nullptr;
  }

  void evict() {
    while (entries_.size() > bound_) {
      auto victim = entries_.end();
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        const MrEntry& e = *it->second;
        if (e.pinned == 0 && e.inflight == 0 && (victim == entries_.end() || e.last_use < victim->second->last_use))
          victim = it;
      }
      if (victim == entries_.end()) return;  // everything pinned or in use: exceed the bound
      by_key_.erase(victim->second->key);
      close_entry(*victim->second);
      entries_.erase(victim);
    }
  }

  std::size_t bound_;
  std::uint64_t clock_ = 0;
  std::multimap<std::uintptr_t, std::unique_ptr<MrEntry>> entries_;
  std::unordered_map<std::uint64_t, MrEntry*> by_key_;
};

}  // namespace strata::transport::detail::fabric
