// Fragmentation: none, fixed size, halves.
#include "patterns/fragment.hpp"

#include <algorithm>

namespace strata::patterns {

namespace {

std::size_t align_of(const FragPolicy& p) noexcept { return p.align == 0 ? 1 : p.align; }

// Fixed fragment size: size rounded down to align, at least align.
std::size_t fixed_size(const FragPolicy& p) noexcept {
  const std::size_t a = align_of(p);
  return std::max(a, p.size / a * a);
}

// Offset of the second half: the middle, rounded up to align (never past len).
std::size_t half_split(std::size_t len, const FragPolicy& p) noexcept {
  const std::size_t a = align_of(p);
  const std::size_t mid = len - len / 2;  // first half gets the extra byte
  return std::min(len, (mid + a - 1) / a * a);
}

}  // namespace

std::size_t fragment_count(std::size_t len, const FragPolicy& policy) noexcept {
  if (len == 0) return 0;
  switch (policy.mode) {
    case FragMode::none:
      return 1;
    case FragMode::fixed: {
      const std::size_t f = fixed_size(policy);
      return len / f + (len % f != 0 ? 1 : 0);
    }
    case FragMode::halves:
      return len > policy.threshold && half_split(len, policy) < len ? 2 : 1;
  }
  return 1;
}

Fragment fragment_at(std::size_t len, const FragPolicy& policy, std::size_t index) noexcept {
  switch (policy.mode) {
    case FragMode::none:
      return {0, len};
    case FragMode::fixed: {
      const std::size_t f = fixed_size(policy);
      const std::size_t off = index * f;
      return {off, std::min(f, len - off)};
    }
    case FragMode::halves: {
      if (fragment_count(len, policy) < 2) return {0, len};
      const std::size_t split = half_split(len, policy);
      return index == 0 ? Fragment{0, split} : Fragment{split, len - split};
    }
  }
  return {0, len};
}

void fragments(std::size_t len, const FragPolicy& policy, std::vector<Fragment>& out) {
  out.clear();
  const std::size_t n = fragment_count(len, policy);
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) out.push_back(fragment_at(len, policy, i));
}

}  // namespace strata::patterns
