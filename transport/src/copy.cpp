// Streaming copies (copy.hpp): non-temporal 32-byte stores.
#include "strata/transport/copy.hpp"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace strata::transport {

namespace {

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
__attribute__((target("avx2"))) void stream_copy_avx2(unsigned char* d, const unsigned char* s, std::size_t n) {
  const std::size_t head = (32 - (reinterpret_cast<std::uintptr_t>(d) & 31)) & 31;
  std::memcpy(d, s, head);
  std::size_t i = head;
  for (; i + 128 <= n; i += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 96), e);
  }
  _mm_sfence();  // the stores are weakly ordered: visible before the node completes
  std::memcpy(d + i, s + i, n - i);
}
#endif

}  // namespace

void stream_copy(void* dst, const void* src, std::size_t n) noexcept {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  const bool overlap = d < s + n && s < d + n;
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  static const bool avx2 = __builtin_cpu_supports("avx2") != 0;
  if (avx2 && !overlap && n >= 4096) {
    stream_copy_avx2(d, s, n);
    return;
  }
#endif
  if (overlap)
    std::memmove(d, s, n);
  else
    std::memcpy(d, s, n);
}

}  // namespace strata::transport
