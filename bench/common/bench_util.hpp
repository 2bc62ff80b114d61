// Shared by strata-bench and the MPI baselines: command-line parsing of sizes,
// statistics, result records and JSON output. Header-only, no strata or MPI
// dependency, so both sides measure and report the same way.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace strata::bench {

/// CPU time of this process (all threads, user + system), in seconds.
inline double process_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

/// Parses "8", "64K", "16M", "1G" into bytes. Throws std::invalid_argument naming @p what.
inline std::size_t parse_bytes(const std::string& s, const char* what) {
  if (s.empty()) throw std::invalid_argument(std::string(what) + ": empty size");
  std::size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(s, &pos);
  } catch (const std::exception&) {
    throw std::invalid_argument(std::string(what) + ": not a size: '" + s + "'");
  }
  std::string suffix = s.substr(pos);
  unsigned long long mult = 1;
  if (suffix == "" || suffix == "B")
    mult = 1;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB")
    mult = 1ull << 10;
  else if (suffix == "M" || suffix == "MiB")
    mult = 1ull << 20;
  else if (suffix == "G" || suffix == "GiB")
    mult = 1ull << 30;
  else
    throw std::invalid_argument(std::string(what) + ": unknown size suffix in '" + s + "'");
  return static_cast<std::size_t>(v * mult);
}

/// "8:16M" -> 8, 16, 32, ..., 16M (powers of two); "4096" -> {4096}; "1K,3,5M" -> list.
inline std::vector<std::size_t> parse_sizes(const std::string& spec) {
  std::vector<std::size_t> out;
  if (spec.find(',') != std::string::npos) {
    std::size_t start = 0;
    while (start <= spec.size()) {
      const std::size_t comma = spec.find(',', start);
      const std::string item = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      out.push_back(parse_bytes(item, "--sizes"));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return out;
  }
  const std::size_t colon = spec.find(':');
  if (colon == std::string::npos) return {parse_bytes(spec, "--sizes")};
  std::size_t lo = parse_bytes(spec.substr(0, colon), "--sizes");
  const std::size_t hi = parse_bytes(spec.substr(colon + 1), "--sizes");
  if (lo == 0 || hi < lo) throw std::invalid_argument("--sizes: need 0 < LO <= HI in LO:HI, got '" + spec + "'");
  for (std::size_t s = lo; s <= hi; s *= 2) out.push_back(s);
  return out;
}

/// Iterations sized to the message: many for small, fewer for large (OSU-like).
inline int iterations_for(std::size_t bytes, int requested) {
  if (requested > 0) return requested;
  if (bytes <= 8192) return 1000;
  if (bytes <= (1u << 20)) return 200;
  if (bytes <= (8u << 20)) return 40;
  return 20;
}

/// The input of element @p i of rank @p rank's send buffer (both benches).
inline float pattern(int rank, std::size_t i) { return static_cast<float>((rank + 1) * 3 + static_cast<int>(i % 97)); }

/// Checks one collective's result on rank @p rank of @p size against the
/// sequential reference (float32 sums; size conventions of docs/performance.md):
/// @p n elements per block, @p block elements per rank for reduce_scatter.
/// bcast is checked in @p send (the broadcast buffer), the others in @p recv.
/// @p Floats: anything indexable with float elements (std::vector, a span).
template <class Floats>
bool verify_result(const std::string& coll, int rank, int size, std::size_t n, std::size_t block, const Floats& send,
                   const Floats& recv) {
  auto near = [](float got, float want) { return std::fabs(got - want) <= 1e-3f * std::fabs(want) + 1e-3f; };
  const auto un = static_cast<std::size_t>(rank);
  if (coll == "bcast") {
    for (std::size_t i = 0; i < n; ++i)
      if (send[i] != pattern(0, i)) return false;
  } else if (coll == "allreduce" || (coll == "reduce" && rank == 0)) {
    for (std::size_t i = 0; i < n; ++i) {
      float want = 0;
      for (int r = 0; r < size; ++r) want += pattern(r, i);
      if (!near(recv[i], want)) return false;
    }
  } else if (coll == "allgather" || (coll == "gather" && rank == 0)) {
    for (int r = 0; r < size; ++r)
      for (std::size_t i = 0; i < n; ++i)
        if (recv[static_cast<std::size_t>(r) * n + i] != pattern(r, i)) return false;
  } else if (coll == "alltoall") {
    for (int r = 0; r < size; ++r)
      for (std::size_t i = 0; i < n; ++i)
        if (recv[static_cast<std::size_t>(r) * n + i] != pattern(r, un * n + i)) return false;
  } else if (coll == "scatter") {
    for (std::size_t i = 0; i < n; ++i)
      if (recv[i] != pattern(0, un * n + i)) return false;
  } else if (coll == "reduce_scatter") {
    for (std::size_t i = 0; i < block; ++i) {
      float want = 0;
      for (int r = 0; r < size; ++r) want += pattern(r, un * block + i);
      if (!near(recv[i], want)) return false;
    }
  }
  return true;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Busy work the compiler cannot drop: @p loops steps of a dependent
/// floating-point chain (no memory traffic, no syscalls). A fixed amount of
/// work, unlike a wall-clock-bounded loop: a compute phase that loses its core
/// to a progress thread takes longer instead of silently doing less.
inline double busy_loops(std::uint64_t loops) {
  double x = 1.0;
  for (std::uint64_t i = 0; i < loops; ++i) x = x * 1.0000001 + 1e-9;
  volatile double sink = x;
  return sink;
}

/// Steps of busy_loops() per microsecond on the calling core (the best of a
/// few 2 ms samples, so a preempted sample does not lower it).
inline double busy_loops_per_us() {
  double best = 0;
  for (int k = 0; k < 5; ++k) {
    const std::uint64_t n = 1u << 16;
    std::uint64_t done = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double us = 0;
    while (us < 2000.0) {
      busy_loops(n);
      done += n;
      us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    }
    best = std::max(best, static_cast<double>(done) / us);
  }
  return best;
}

/// One measured point. Times in microseconds; per-rank medians reduced over ranks.
struct Record {
  std::string library;     ///< "strata", "openmpi", "mpich", "memcpy"
  std::string collective;  ///< "allreduce", ...
  std::string variant;     ///< "blocking", "nonblocking", "persistent", algorithm name, ...
  std::size_t bytes = 0;   ///< message size as documented in docs/benchmarks.md
  int ranks = 0;
  int iters = 0;
  double min_us = 0, median_us = 0, max_us = 0;  ///< over ranks of each rank's median per-op time
  double bandwidth_MBps = 0;                     ///< bytes / max_us
  bool checked = false;
  bool check_ok = true;
};

inline std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o.push_back('\\');
    o.push_back(c);
  }
  return o;
}

inline void write_json(std::FILE* f, const std::vector<Record>& recs) {
  std::fprintf(f, "[\n");
  for (std::size_t i = 0; i < recs.size(); ++i) {
    const Record& r = recs[i];
    std::fprintf(f,
                 "  {\"library\":\"%s\",\"collective\":\"%s\",\"variant\":\"%s\",\"bytes\":%zu,\"ranks\":%d,"
                 "\"iters\":%d,\"min_us\":%.4f,\"median_us\":%.4f,\"max_us\":%.4f,\"bandwidth_MBps\":%.2f,"
                 "\"checked\":%s,\"check_ok\":%s}%s\n",
                 json_escape(r.library).c_str(), json_escape(r.collective).c_str(), json_escape(r.variant).c_str(),
                 r.bytes, r.ranks, r.iters, r.min_us, r.median_us, r.max_us, r.bandwidth_MBps,
                 r.checked ? "true" : "false", r.check_ok ? "true" : "false", i + 1 < recs.size() ? "," : "");
  }
  std::fprintf(f, "]\n");
}

inline void print_header(std::FILE* f) {
  std::fprintf(f, "%-10s %-15s %-12s %10s %12s %12s %12s %12s %s\n", "library", "collective", "variant", "bytes",
               "min_us", "median_us", "max_us", "MB/s", "check");
}

inline void print_record(std::FILE* f, const Record& r) {
  std::fprintf(f, "%-10s %-15s %-12s %10zu %12.3f %12.3f %12.3f %12.1f %s\n", r.library.c_str(), r.collective.c_str(),
               r.variant.c_str(), r.bytes, r.min_us, r.median_us, r.max_us, r.bandwidth_MBps,
               r.checked ? (r.check_ok ? "ok" : "FAILED") : "-");
}

}  // namespace strata::bench
