// Communicator and window ids: 16 bits on the wire (signal payloads carry
// them), so they are reused after free. An id is agreed collectively: every
// member proposes its lowest free id from a candidate on, the maximum is
// taken if it is free on every member, else the members retry above it
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

  /// Agrees on an id free on every member (takes it here when @p take_it).
  /// @p max_all / @p min_all: allreduce of one word over the members
  /// (collective: every member calls agree() in the same order). Throws
  /// strata::Error (Errc::unsupported) naming @p who and the limit when no id
  /// is free on every member.
  std::uint32_t agree(const std::function<std::uint64_t(std::uint64_t)>& max_all,
                      const std::function<std::uint64_t(std::uint64_t)>& min_all, bool take_it, const std::string& who,
                      const char* what) {
    std::uint32_t from = 0;
    {
      std::lock_guard<std::mutex> lk(mu_);
      from = next_;
    }
    const std::uint32_t n = limit();
    for (std::uint32_t attempt = 0; attempt <= 2 * n; ++attempt) {
      const std::uint64_t id = max_all(lowest_free(from));
      if (id >= n) break;
      const auto i = static_cast<std::uint32_t>(id);
      if (min_all(is_free(i) ? 1 : 0) == 1) {
        std::lock_guard<std::mutex> lk(mu_);
        if (take_it && !used_[i]) used_[i] = true, ++live_;
        next_ = i + 1 < n ? i + 1 : first_;  // every member moves on (members of no color too)
        return i;
      }
      from = i + 1 < n ? i + 1 : first_;
    }
    throw Error(Errc::unsupported, who + ": out of " + what + " ids: at most " + std::to_string(n - first_) + " " +
                                       what + "s may exist at once on a rank (16-bit ids; free some first)");
  }

 private:
  std::mutex mu_;
  std::uint32_t first_;
  std::uint32_t next_;
  std::vector<bool> used_;
  std::size_t live_ = 0;
};

}  // namespace strata::detail
