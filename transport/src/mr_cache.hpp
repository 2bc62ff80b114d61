// Registration cache: remembers which address ranges are registered with a
// backend (fi_mr_reg for libfabric, nothing for shm), so registering the same
// buffer twice is free and a sub-range of a registered range reuses it.
//
// Generic over the backend through two callbacks. Example (the libfabric
// backend, transport/src/fabric/fabric_memory.cpp, does this):
// @code
//   MrCache cache(opts.mr_cache_entries,
//       [&](void* addr, std::size_t len, std::uint64_t* handle) -> Status {
//         fid_mr* mr = nullptr;
//         int rc = fi_mr_reg(domain, addr, len, access, 0, next_key++, 0, &mr, nullptr);
//         if (rc != 0) return {Errc::transport_error, fi_strerror(-rc)};
//         *handle = reinterpret_cast<std::uintptr_t>(mr);
//         return {};
//       },
//       [](std::uint64_t handle, void*, std::size_t) { fi_close(&reinterpret_cast<fid_mr*>(handle)->fid); });
//   const MrCache::Entry* e = nullptr;
//   Status s = cache.acquire(buf, len, &e);   // hit or register; pins e (a local descriptor in use)
//   ... use e->handle, e->base, e->len ...
//   cache.release(e);                          // unpinned entries stay cached (LRU)
//   cache.hold(win, wlen, &e);                 // a registration whose key peers hold: kept until
//   cache.invalidate(win, wlen);               //   invalidated (before freeing the memory)
// @endcode
//
// Two kinds of reference keep an entry registered and out of the LRU's reach:
// pins (acquire/release, counted, e.g. an operation in flight uses the range
// as a local descriptor) and holds (hold(), dropped only by invalidate():
// registrations published to peers). invalidate() removes the entry from the
// cache at once; a pinned one is deregistered at its last release().
//
// Thread-safe (one internal mutex; callbacks run under it, so they must not
// call back into the cache).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "strata/error.hpp"

namespace strata::transport::detail {

/// @brief LRU-bounded cache of memory registrations with pinning.
class MrCache {
 public:
  /// Registers [addr, addr+len) with the backend; stores a backend handle.
  using RegisterFn = std::function<Status(void* addr, std::size_t len, std::uint64_t* handle)>;
  /// Undoes one successful RegisterFn call.
  using DeregisterFn = std::function<void(std::uint64_t handle, void* addr, std::size_t len)>;

  /// One registered range. Fields are immutable while the entry is pinned.
  struct Entry {
    std::uintptr_t base = 0;   ///< first byte of the registered range
    std::size_t len = 0;       ///< registered length
    std::uint64_t handle = 0;  ///< what RegisterFn stored
    // internal bookkeeping
    int pins = 0;
    int holds = 0;       ///< hold() calls since the entry was registered (cleared by invalidate)
    bool cached = true;  ///< false once invalidated/evicted (zombie until unpinned)
    std::list<Entry*>::iterator lru;
  };

  /// Hit/miss counters (for tests and strata-info).
  struct Stats {
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
    std::uint64_t evictions = 0;
    std::uint64_t deregistrations = 0;
    std::size_t entries = 0;  ///< cached entries now
  };

  /// @param max_entries bound on cached registrations (>= 1). When full, the
  /// least recently used unpinned entry is deregistered. If every entry is
  /// pinned the bound is exceeded temporarily rather than failing.
  MrCache(std::size_t max_entries, RegisterFn reg, DeregisterFn dereg);
  /// Deregisters every remaining entry (pinned or not).
  ~MrCache();
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  /// Finds a cached registration containing [addr, addr+len) or registers
  /// the range, pins it and returns it in @p out. len 0 is treated as 1 byte.
  /// Errors: invalid_argument (null addr/out, or the range wraps the address
  /// space), whatever RegisterFn returns.
  Status acquire(void* addr, std::size_t len, const Entry** out);
  /// Like acquire(), but takes a *hold* instead of a pin: the entry is never
  /// evicted and stays registered until invalidate() drops it (no release()).
  /// For registrations whose keys were handed to peers. Same errors.
  Status hold(void* addr, std::size_t len, const Entry** out);
  /// Unpins an entry returned by acquire(). Deregisters it now if it was
  /// invalidated or evicted while pinned.
  void release(const Entry* e);
  /// Drops every registration overlapping [addr, addr+len) (call before
  /// freeing the memory), held ones included. Pinned ones are deregistered at
  /// their last release. Returns the number of entries dropped.
  std::size_t invalidate(void* addr, std::size_t len);

  [[nodiscard]] Stats stats() const;

 private:
  Status lookup_or_register(void* addr, std::size_t len, bool hold, const Entry** out);
  void drop_locked(Entry* e);  // remove from index and LRU; deregister if unpinned
  void evict_locked();

  std::size_t max_entries_;
  RegisterFn reg_;
  DeregisterFn dereg_;
  mutable std::mutex mu_;
  std::multimap<std::uintptr_t, std::unique_ptr<Entry>> by_base_;  // cached entries
  std::vector<std::unique_ptr<Entry>> zombies_;                    // dropped while pinned
  std::list<Entry*> lru_;                                          // front = most recent
  std::size_t max_len_ = 0;                                        // longest cached entry (bounds the lookup scan)
  Stats stats_;
};

}  // namespace strata::transport::detail
