// Fragmentation of a message for pipelining (Mallón et al., Ma et al.).
//
//  - none:   one fragment [0, len).
//  - fixed:  fragments of `size` bytes, the last one shorter (Mallón et al.: 32 KiB;
//            Ma et al.: 16 KiB for medium, 512 KiB for large messages).
//  - halves: Mallón et al.'s "dynamic" mode: a message longer than `threshold`
//            bytes (default 8 KiB) is split into two halves, otherwise sent
//            whole. It is not recursive: the paper splits "in two halves,
//            instead of message_size/chunk_size messages". Seed 000 offers it
//            for broadcast and scatter, not for gather (a parent cannot forward
//            a first half before it has its own second half).
//
// Boundaries are multiples of `align` (the element size, so that reductions
// never split an element); only the end of the message may be unaligned.
// A zero-length message has zero fragments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::patterns {

/// @brief Fragmentation mode.
enum class FragMode : std::uint8_t { none, fixed, halves };

/// @brief Fragmentation policy.
struct FragPolicy {
  FragMode mode = FragMode::none;
  std::size_t size = 32 * 1024;      ///< fragment size for FragMode::fixed (rounded down to align, at least align)
  std::size_t threshold = 8 * 1024;  ///< FragMode::halves splits messages longer than this
  std::size_t align = 1;             ///< boundaries are multiples of this (element size); 0 is taken as 1

  [[nodiscard]] static constexpr FragPolicy none() noexcept { return {FragMode::none, 0, 0, 1}; }
  [[nodiscard]] static constexpr FragPolicy fixed(std::size_t bytes, std::size_t align = 1) noexcept {
    return {FragMode::fixed, bytes, 0, align};
  }
  [[nodiscard]] static constexpr FragPolicy halves(std::size_t threshold = 8 * 1024, std::size_t align = 1) noexcept {
    return {FragMode::halves, 0, threshold, align};
  }
};

/// @brief Bytes [offset, offset + length) of a message.
struct Fragment {
  std::size_t offset = 0;
  std::size_t length = 0;
  friend constexpr bool operator==(Fragment a, Fragment b) { return a.offset == b.offset && a.length == b.length; }
};

/// @brief Number of fragments of a @p len byte message under @p policy. O(1).
[[nodiscard]] std::size_t fragment_count(std::size_t len, const FragPolicy& policy) noexcept;

/// @brief Fragment @p index (< fragment_count) of a @p len byte message. O(1), no allocation.
[[nodiscard]] Fragment fragment_at(std::size_t len, const FragPolicy& policy, std::size_t index) noexcept;

/// @brief All fragments, in order, replacing the contents of @p out.
void fragments(std::size_t len, const FragPolicy& policy, std::vector<Fragment>& out);

}  // namespace strata::patterns
