// Copy routines shared by the transport and the executor.
#pragma once

#include <cstddef>

namespace strata::transport {

/// @brief Copies @p n bytes with non-temporal (streaming) stores where the
/// CPU has AVX2 and @p n >= 4096: the destination lines are written to memory
/// without a read for ownership and without evicting the caches' working set,
/// and without first invalidating copies other cores hold line by line.
/// Ends with a store fence (the bytes are visible to a later release store).
/// Overlapping ranges, shorter copies, sanitizer builds and CPUs without AVX2
/// take memmove / memcpy. Cost: about the memory system's write bandwidth;
/// the next reader of @p dst reads from memory, not from a cache.
void stream_copy(void* dst, const void* src, std::size_t n) noexcept;

}  // namespace strata::transport
