// TransportOptions::from_environment: STRATA_INTRA, STRATA_PROVIDER,
// STRATA_TIMEOUT, STRATA_CMA_THRESHOLD, STRATA_MR_CACHE.
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <string>

#include "strata/detail/env.hpp"
#include "strata/transport/transport.hpp"

namespace strata::transport {
namespace {

const char* env(const char* name) { return strata::detail::env::get(name); }

/// Parses a non-negative decimal integer with an optional K/M/G (binary) suffix.
std::uint64_t parse_size(const char* name, const char* text, bool allow_suffix, std::uint64_t min, std::uint64_t max) {
  const std::string s(text);
  std::size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  std::uint64_t mult = 1;
  bool ok = digits > 0;
  if (ok && digits < s.size()) {
    const std::string suffix = s.substr(digits);
    if (allow_suffix && (suffix == "K" || suffix == "k" || suffix == "KiB")) {
      mult = 1ULL << 10;
    } else if (allow_suffix && (suffix == "M" || suffix == "m" || suffix == "MiB")) {
      mult = 1ULL << 20;
    } else if (allow_suffix && (suffix == "G" || suffix == "g" || suffix == "GiB")) {
      mult = 1ULL << 30;
    } else {
      ok = false;
    }
  }
  std::uint64_t v = 0;
  if (ok) {
    errno = 0;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(s.substr(0, digits).c_str(), &end, 10);
    ok = errno == 0 && n <= std::numeric_limits<std::uint64_t>::max() / mult;
    v = static_cast<std::uint64_t>(n) * mult;
  }
  if (!ok || v < min || v > max) {
    throw Error(Errc::invalid_argument, std::string(name) + "='" + s + "': expected an integer in [" +
                                            std::to_string(min) + ", " + std::to_string(max) + "]" +
                                            (allow_suffix ? " (optional suffix K, M or G)" : ""));
  }
  return v;
}

}  // namespace

TransportOptions TransportOptions::from_environment() {
  TransportOptions o;
  if (const char* v = env("STRATA_INTRA")) {
    const std::string s(v);
    if (s != "shm" && s != "fabric") {
      throw Error(Errc::invalid_argument, "STRATA_INTRA='" + s + "': expected 'shm' or 'fabric'");
    }
    o.intra = s;
  }
  if (const char* v = env("STRATA_PROVIDER")) o.provider = v;
  if (const char* v = env("STRATA_TIMEOUT")) {
    o.timeout = std::chrono::milliseconds(
        static_cast<std::int64_t>(parse_size("STRATA_TIMEOUT", v, false, 1, 24ULL * 3600 * 1000)));
  }
  if (const char* v = env("STRATA_CMA_THRESHOLD")) {
    o.cma_threshold = static_cast<std::size_t>(parse_size("STRATA_CMA_THRESHOLD", v, true, 0, 1ULL << 40));
  }
  if (const char* v = env("STRATA_MR_CACHE")) {
    o.mr_cache_entries = static_cast<std::size_t>(parse_size("STRATA_MR_CACHE", v, false, 1, 1ULL << 24));
  }
  return o;
}

}  // namespace strata::transport
