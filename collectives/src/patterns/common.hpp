// Shared vocabulary of the pure collective maths (strata::patterns).
//
// Everything in patterns/ is deterministic arithmetic over ranks 0..n-1 of a
// group: no I/O, no global state, no transport. Results are stored in flat
// arrays (CSR layout) so that building them costs a handful of allocations and
// reading them costs none.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace strata::patterns {

/// @brief Read-only view of a contiguous run of T (a minimal C++17 span).
///
/// Views point into the storage of the object that returned them and are
/// invalidated when that object is modified or destroyed.
template <class T>
class View {
 public:
  constexpr View() = default;
  constexpr View(const T* first, const T* last) : first_(first), last_(last) {}
  [[nodiscard]] constexpr const T* begin() const noexcept { return first_; }
  [[nodiscard]] constexpr const T* end() const noexcept { return last_; }
  [[nodiscard]] constexpr std::size_t size() const noexcept { return static_cast<std::size_t>(last_ - first_); }
  [[nodiscard]] constexpr bool empty() const noexcept { return first_ == last_; }
  [[nodiscard]] constexpr const T& operator[](std::size_t i) const noexcept { return first_[i]; }

 private:
  const T* first_ = nullptr;
  const T* last_ = nullptr;
};

/// @brief Blocks [first, first + count) of a block index space.
struct BlockRange {
  int first = 0;
  int count = 0;
  friend constexpr bool operator==(BlockRange a, BlockRange b) { return a.first == b.first && a.count == b.count; }
};

/// @brief (a mod n) in [0, n) for any sign of a; n > 0.
[[nodiscard]] constexpr int mod(int a, int n) noexcept {
  const int r = a % n;
  return r < 0 ? r + n : r;
}

/// @brief Virtual rank of @p rank in a group of @p n rooted at @p root: (rank - root) mod n.
[[nodiscard]] constexpr int to_virtual(int rank, int root, int n) noexcept { return mod(rank - root, n); }

/// @brief Real rank of virtual rank @p vrank: (vrank + root) mod n.
[[nodiscard]] constexpr int to_real(int vrank, int root, int n) noexcept { return mod(vrank + root, n); }

/// @brief ceil(log2(n)) for n >= 1 (0 for n == 1).
[[nodiscard]] constexpr int ceil_log2(int n) noexcept {
  int l = 0;
  while ((1LL << l) < static_cast<long long>(n)) ++l;
  return l;
}

/// @brief Largest power of two <= n, for n >= 1.
[[nodiscard]] constexpr int floor_pow2(int n) noexcept {
  int p = 1;
  while (static_cast<long long>(p) * 2 <= static_cast<long long>(n)) p *= 2;
  return p;
}

namespace detail {
/// Throws std::invalid_argument naming @p what (patterns are called with
/// validated input; this guards programming errors in the compiler).
[[noreturn]] void bad_argument(const char* function, const char* what, long long value);
}  // namespace detail

}  // namespace strata::patterns
