// Communicator and window ids: 16 bits on the wire (signal payloads carry
// them), so they are reused after free. An id is agreed collectively: every
// member proposes its lowest free id from a candidate on, the maximum is
// reserved where free and taken if it was free on every member, else the
// reservations are released and the members retry above it
// (docs/reliability.md, "Resource limits"). Not installed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "strata/error.hpp"

namespace strata::detail {

/// The ids in use on this rank within [first, limit), handed out round-robin:
/// a freed id comes back only after the rest of the space was tried (a late
/// signal of a freed communicator or window would need to outlive ~65,000
/// creations to reach a new owner of its id).
class IdPool {
 public:
  IdPool(std::uint32_t first, std::uint32_t limit) : first_(first), next_(first), used_(limit, false) {}
  [[nodiscard]] std::uint32_t limit() const noexcept { return static_cast<std::uint32_t>(used_.size()); }
  /// The first free id at or after @p from, wrapping around (limit() when none is free).
  std::uint32_t lowest_free(std::uint32_t from) {
    std::lock_guard<std::mutex> lk(mu_);
    const auto n = static_cast<std::uint32_t>(used_.size());
    if (from < first_ || from >= n) from = first_;
    for (std::uint32_t i = from; i < n; ++i)
      if (!used_[i]) return i;
    for (std::uint32_t i = first_; i < from; ++i)
      if (!used_[i]) return i;
    return n;
  }
  bool is_free(std::uint32_t id) {
    std::lock_guard<std::mutex> lk(mu_);
    return id >= first_ && id < used_.size() && !used_[id];
  }
  /// Takes @p id when it is free (false otherwise).
  bool take(std::uint32_t id) {
    std::lock_guard<std::mutex> lk(mu_);
    if (id < first_ || id >= used_.size() || used_[id]) return false;
    used_[id] = true;
    ++live_;
    return true;
  }
  void release(std::uint32_t id) {
    std::lock_guard<std::mutex> lk(mu_);
    if (id >= first_ && id < used_.size() && used_[id]) used_[id] = false, --live_;
  }
  /// Ids in use.
  [[nodiscard]] std::size_t live() {
    std::lock_guard<std::mutex> lk(mu_);
    return live_;
  }

  /// Where this rank's next agreement starts looking (round-robin).
  std::uint32_t start() {
    std::lock_guard<std::mutex> lk(mu_);
    return next_;
  }
  /// The next candidate after a failed round on @p id: a little past it, by a
  /// per-thread random skip of 0-7, so that two creations that keep reserving
  /// the same id on different members (they run in different orders there)
  /// part ways instead of retrying in lockstep.
  std::uint32_t after(std::uint32_t id) {
    thread_local std::uint32_t x = 0x9e3779b9u ^ static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(&x));
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    const std::uint32_t n = limit();
    const std::uint32_t next = id + 1 + (x & 7u);
    return next < n ? next : first_;
  }
  /// One agreement round, second half: the members proposed @p id (the
  /// maximum of their lowest_free()); reserves it here when free. Every
  /// member answers whether it reserved; the id is agreed when all did
  /// (settle()). A reservation keeps a concurrent agreement on this rank
  /// (another parent, another tag) from taking the same id meanwhile.
  bool reserve(std::uint32_t id) { return take(id); }
  /// Ends a round: @p agreed when every member reserved @p id. An agreed id
  /// stays taken when @p keep (this rank is a member of the new object), and
  /// every member moves its round-robin start past it; a refused one is
  /// released when this rank had reserved it.
  void settle(std::uint32_t id, bool reserved, bool agreed, bool keep) {
    if (reserved && !(agreed && keep)) release(id);
    if (agreed) {
      std::lock_guard<std::mutex> lk(mu_);
      next_ = id + 1 < limit() ? id + 1 : first_;
    }
  }
  /// The error when no id is free on every member.
  [[nodiscard]] Status exhausted(const std::string& who, const char* what) const {
    const auto n = static_cast<std::uint32_t>(used_.size());
    return {Errc::unsupported, who + ": out of " + what + " ids: at most " + std::to_string(n - first_) + " " + what +
                                   "s may exist at once on a rank (16-bit ids; free some first)"};
  }

  /// Agrees on an id free on every member (takes it here when @p take_it):
  /// rounds of propose (max of lowest_free) and reserve (min), as
  /// Communicator::split_async runs them step by step (create.cpp).
  /// @p max_all / @p min_all: allreduce of one word over the members
  /// (collective: every member calls agree() in the same order). Throws
  /// strata::Error (Errc::unsupported) naming @p who and the limit when no id
  /// is free on every member.
  std::uint32_t agree(const std::function<std::uint64_t(std::uint64_t)>& max_all,
                      const std::function<std::uint64_t(std::uint64_t)>& min_all, bool take_it, const std::string& who,
                      const char* what) {
    std::uint32_t from = start();
    const std::uint32_t n = limit();
    for (std::uint32_t attempt = 0; attempt <= 2 * n; ++attempt) {
      const std::uint64_t id = max_all(lowest_free(from));
      if (id >= n) break;
      const auto i = static_cast<std::uint32_t>(id);
      const bool mine = reserve(i);
      const bool agreed = min_all(mine ? 1 : 0) == 1;
      settle(i, mine, agreed, take_it);
      if (agreed) return i;
      from = after(i);
    }
    throw Error(exhausted(who, what));
  }

 private:
  std::mutex mu_;
  std::uint32_t first_;
  std::uint32_t next_;
  std::vector<bool> used_;
  std::size_t live_ = 0;
};

}  // namespace strata::detail
