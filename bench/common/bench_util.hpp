// Shared by strata-bench and the MPI baselines: command-line parsing of sizes,
// statistics, result records and their output formats (table, JSON through
// nlohmann-json, the OSU micro-benchmarks layout, the nccl-tests layout with
// bus bandwidth). Header-only, no strata or MPI dependency, so both sides
// measure and report the same way.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace strata::bench {

/// The collective of a run (strata-bench, strata-mpi-bench), compared on every call (a string compare per
/// call cost ~200 instructions inside the timed region).
enum class Coll { bcast, reduce, allreduce, allgather, alltoall, gather, scatter, reduce_scatter, barrier };
inline Coll coll_kind(const std::string& s) {
  if (s == "bcast") return Coll::bcast;
  if (s == "reduce") return Coll::reduce;
  if (s == "allreduce") return Coll::allreduce;
  if (s == "allgather") return Coll::allgather;
  if (s == "alltoall") return Coll::alltoall;
  if (s == "gather") return Coll::gather;
  if (s == "scatter") return Coll::scatter;
  if (s == "reduce_scatter") return Coll::reduce_scatter;
  return Coll::barrier;
}

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
  std::size_t bytes = 0;   ///< message size as documented in bench/README.md
  int ranks = 0;
  int iters = 0;
  double min_us = 0, median_us = 0, max_us = 0;  ///< over ranks of each rank's median per-op time
  double bandwidth_MBps = 0;                     ///< bytes / max_us
  bool checked = false;
  bool check_ok = true;
};

/// @brief Bytes moved by one call as nccl-tests counts them: the whole
/// vector for bcast, reduce, allreduce, reduce_scatter (as Record::bytes), the
/// whole receive (allgather, gather) or send (alltoall, scatter) buffer, that
/// is Record::bytes (one rank's block) x ranks, for the others.
inline double nccl_bytes(const Record& r) {
  const std::string& c = r.collective;
  const bool per_block = c == "allgather" || c == "alltoall" || c == "gather" || c == "scatter";
  return static_cast<double>(r.bytes) * (per_block ? r.ranks : 1);
}

/// @brief Bus bandwidth factor of nccl-tests: allreduce 2(n-1)/n; allgather,
/// reduce_scatter, alltoall, gather, scatter (n-1)/n; bcast, reduce and any
/// non-collective record (memcpy, transport) 1; barrier 0.
inline double bus_factor(const std::string& coll, int n) {
  const double dn = n > 0 ? static_cast<double>(n) : 1.0;
  if (coll == "allreduce") return 2.0 * (dn - 1) / dn;
  if (coll == "allgather" || coll == "reduce_scatter" || coll == "alltoall" || coll == "gather" || coll == "scatter")
    return (dn - 1) / dn;
  if (coll == "barrier") return 0.0;
  return 1.0;
}

/// Algorithm bandwidth in GB/s (1e9 B/s): nccl_bytes() / median time.
inline double algbw_GBps(const Record& r) { return r.median_us > 0 ? nccl_bytes(r) / (r.median_us * 1e3) : 0.0; }

/// Bus bandwidth in GB/s: algbw_GBps() x bus_factor().
inline double busbw_GBps(const Record& r) { return algbw_GBps(r) * bus_factor(r.collective, r.ranks); }

/// The records as a JSON array (one object per record, bandwidths included).
inline nlohmann::ordered_json to_json(const std::vector<Record>& recs) {
  auto arr = nlohmann::ordered_json::array();
  for (const Record& r : recs) {
    arr.push_back({{"library", r.library},
                   {"collective", r.collective},
                   {"variant", r.variant},
                   {"bytes", r.bytes},
                   {"ranks", r.ranks},
                   {"iters", r.iters},
                   {"min_us", r.min_us},
                   {"median_us", r.median_us},
                   {"max_us", r.max_us},
                   {"bandwidth_MBps", r.bandwidth_MBps},
                   {"algbw_GBps", algbw_GBps(r)},
                   {"busbw_GBps", busbw_GBps(r)},
                   {"checked", r.checked},
                   {"check_ok", r.check_ok}});
  }
  return arr;
}

/// Writes the records as a JSON array, one record per line.
inline void write_json(std::FILE* f, const std::vector<Record>& recs) {
  const auto arr = to_json(recs);
  std::fprintf(f, "[\n");
  for (std::size_t i = 0; i < arr.size(); ++i)
    std::fprintf(f, "  %s%s\n", arr[i].dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str(),
                 i + 1 < arr.size() ? "," : "");
  std::fprintf(f, "]\n");
}

inline void print_header(std::FILE* f) {
  std::fprintf(f, "%-10s %-15s %-12s %10s %12s %12s %12s %12s %-6s %10s %10s\n", "library", "collective", "variant",
               "bytes", "min_us", "median_us", "max_us", "MB/s", "check", "algbw_GB/s", "busbw_GB/s");
}

inline void print_record(std::FILE* f, const Record& r) {
  std::fprintf(f, "%-10s %-15s %-12s %10zu %12.3f %12.3f %12.3f %12.1f %-6s %10.3f %10.3f\n", r.library.c_str(),
               r.collective.c_str(), r.variant.c_str(), r.bytes, r.min_us, r.median_us, r.max_us, r.bandwidth_MBps,
               r.checked ? (r.check_ok ? "ok" : "FAILED") : "-", algbw_GBps(r), busbw_GBps(r));
}

/// @brief The records in the OSU micro-benchmarks layout (osu_allreduce and
/// friends): per collective and variant a "# <library> <Collective> Latency
/// Test" header, then "# Size  Avg Latency(us)" and, with @p full (OSU's -f),
/// Min Latency(us), Max Latency(us) and Iterations. Avg Latency is
/// Record::median_us (median over ranks of each rank's median), Min / Max are
/// Record::min_us / max_us. Non-collective records (memcpy) are skipped.
inline void print_osu(std::FILE* f, const std::vector<Record>& recs, bool full) {
  std::string block;
  for (const Record& r : recs) {
    if (r.library == "memcpy") continue;
    const std::string key = r.library + "/" + r.collective + "/" + r.variant;
    if (key != block) {
      block = key;
      std::string name = r.collective;
      bool up = true;
      for (char& c : name) {
        if (c == '_') {
          c = ' ';
          up = true;
        } else if (up) {
          c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
          up = false;
        }
      }
      std::fprintf(f, "%s# %s %s Latency Test (%s, OSU micro-benchmarks layout)\n", &r == &recs.front() ? "" : "\n",
                   r.library.c_str(), name.c_str(), r.variant.c_str());
      std::fprintf(f, "# Datatype: float32. Ranks: %d.\n", r.ranks);
      std::fprintf(f, "%-10s%18s", "# Size", "Avg Latency(us)");
      if (full) std::fprintf(f, "%18s%18s%12s", "Min Latency(us)", "Max Latency(us)", "Iterations");
      std::fprintf(f, "\n");
    }
    std::fprintf(f, "%-10zu%18.2f", r.bytes, r.median_us);
    if (full) std::fprintf(f, "%18.2f%18.2f%12d", r.min_us, r.max_us, r.iters);
    std::fprintf(f, "\n");
  }
  std::fflush(f);
}

/// @brief The records in the nccl-tests layout: size (nccl_bytes()), count
/// (float32 elements), type, redop, root, time (Record::median_us), algbw,
/// busbw (GB/s) and #wrong (0 or 1 with --check, N/A without). Non-collective
/// records (memcpy) are skipped.
inline void print_nccl(std::FILE* f, const std::vector<Record>& recs) {
  std::string block;
  for (const Record& r : recs) {
    if (r.library == "memcpy") continue;
    const std::string key = r.library + "/" + r.collective + "/" + r.variant;
    if (key != block) {
      block = key;
      std::fprintf(f, "%s# %s %s (%s), %d ranks, nccl-tests layout\n", &r == &recs.front() ? "" : "#\n",
                   r.library.c_str(), r.collective.c_str(), r.variant.c_str(), r.ranks);
      std::fprintf(f, "#%12s %13s %9s %7s %7s %9s %8s %8s %7s\n", "size", "count", "type", "redop", "root", "time",
                   "algbw", "busbw", "#wrong");
      std::fprintf(f, "#%12s %13s %9s %7s %7s %9s %8s %8s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
                   "(GB/s)");
    }
    const std::string& c = r.collective;
    const bool reduces = c == "allreduce" || c == "reduce" || c == "reduce_scatter";
    const bool rooted = c == "bcast" || c == "reduce" || c == "gather" || c == "scatter";
    const double bytes = nccl_bytes(r);
    std::fprintf(f, " %12.0f %13.0f %9s %7s %7d %9.2f %8.3f %8.3f %7s\n", bytes, bytes / 4, "float",
                 reduces ? "sum" : "none", rooted ? 0 : -1, r.median_us, algbw_GBps(r), busbw_GBps(r),
                 r.checked ? (r.check_ok ? "0" : "1") : "N/A");
  }
  std::fflush(f);
}

}  // namespace strata::bench
