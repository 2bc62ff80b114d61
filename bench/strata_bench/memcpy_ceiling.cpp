// The memcpy ceiling: what one process on one core gets from a plain memcpy of
// each size, hot (the same two buffers again and again, cache resident up to
// the cache sizes) and off-cache (every copy uses the next pair of slots of
// a region eight times the last-level cache, so sources and destinations come
// from memory). Large transfers of strata are reported as a fraction of it.
//
// Small copies take a few nanoseconds, below the clock's resolution, so each
// repetition times a batch of copies sized to last at least kMinBatch; the
// per-copy time is the batch time over its length.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "strata_bench/bench.hpp"

namespace strata::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kMinBatchUs = 20.0;
constexpr std::size_t kOffCacheRegion = std::size_t{256} << 20;  // 8x the 32 MiB L3 here
constexpr std::size_t kPage = 4096;

/// Keeps the compiler from dropping a copy whose result is never read.
inline void escape(void* p) { __asm__ volatile("" : : "g"(p) : "memory"); }

struct Region {
  std::unique_ptr<unsigned char[]> bytes;
  std::size_t len = 0;
  explicit Region(std::size_t n) : bytes(new unsigned char[n]), len(n) {
    std::memset(bytes.get(), 1, n);  // fault every page in before timing
  }
  unsigned char* data() const { return bytes.get(); }
};

std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

/// Times @p reps batches of @p batch copies; returns per-copy microseconds.
template <typename Copy>
std::vector<double> time_batches(int reps, std::size_t batch, Copy&& copy) {
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(reps));
  std::size_t k = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < batch; ++i) copy(k++);
    const auto t1 = Clock::now();
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / static_cast<double>(batch));
  }
  return us;
}

/// Smallest power-of-two batch whose copies take at least kMinBatchUs.
template <typename Copy>
std::size_t calibrate(Copy&& copy) {
  std::size_t batch = 1;
  for (;;) {
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < batch; ++i) copy(i);
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (us >= kMinBatchUs || batch >= (std::size_t{1} << 20)) return batch;
    batch *= 2;
  }
}

Record make_record(const char* variant, std::size_t bytes, int iters, const std::vector<double>& us) {
  Record r;
  r.library = "memcpy";
  r.collective = "memcpy";
  r.variant = variant;
  r.bytes = bytes;
  r.ranks = 1;
  r.iters = iters;
  // One process: min and max are over repetitions, the median is the median repetition.
  r.min_us = *std::min_element(us.begin(), us.end());
  r.max_us = *std::max_element(us.begin(), us.end());
  r.median_us = median(us);
  r.bandwidth_MBps = r.median_us > 0 ? static_cast<double>(bytes) / r.median_us : 0.0;
  return r;
}

}  // namespace

std::vector<Record> memcpy_ceiling(const std::vector<std::size_t>& sizes, int iters, bool quiet) {
  std::vector<Record> out;
  if (sizes.empty()) return out;
  const std::size_t max_size = *std::max_element(sizes.begin(), sizes.end());
  Region hot_src(std::max<std::size_t>(max_size, 1)), hot_dst(std::max<std::size_t>(max_size, 1));
  const std::size_t region = std::max(kOffCacheRegion, round_up(max_size, kPage) * 4);
  Region cold_src(region), cold_dst(region);
  for (std::size_t n : sizes) {
    const int reps = iterations_for(n, iters);
    auto hot = [&](std::size_t) {
      std::memcpy(hot_dst.data(), hot_src.data(), n);
      escape(hot_dst.data());
    };
    // Off-cache slots: page-aligned, one page apart at least, cycling over the region.
    const std::size_t stride = round_up(n, kPage) + kPage;
    const std::size_t slots = std::max<std::size_t>(1, region / stride);
    auto cold = [&](std::size_t k) {
      const std::size_t off = (k % slots) * stride;
      std::memcpy(cold_dst.data() + off, cold_src.data() + off, n);
      escape(cold_dst.data() + off);
    };
    const std::size_t hot_batch = calibrate(hot);
    const std::size_t cold_batch = calibrate(cold);
    const auto hot_us = time_batches(reps, hot_batch, hot);
    const auto cold_us = time_batches(reps, cold_batch, cold);
    out.push_back(make_record("hot", n, reps, hot_us));
    out.push_back(make_record("off-cache", n, reps, cold_us));
    if (!quiet) {
      std::fprintf(stderr, "# memcpy %10zu B: hot %9.3f us (%8.1f MB/s), off-cache %9.3f us (%8.1f MB/s)\n", n,
                   out[out.size() - 2].median_us, out[out.size() - 2].bandwidth_MBps, out.back().median_us,
                   out.back().bandwidth_MBps);
    }
  }
  return out;
}

int run_memcpy(const Options& o, std::vector<Record>& out) {
  const auto sizes = o.sizes.empty() ? default_transport_sizes() : o.sizes;
  auto recs = memcpy_ceiling(sizes, o.iters, o.quiet);
  print_header(stdout);
  for (const Record& r : recs) print_record(stdout, r);
  out.insert(out.end(), recs.begin(), recs.end());
  return 0;
}

}  // namespace strata::bench
