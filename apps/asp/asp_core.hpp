// asp: Floyd-Warshall all-pairs shortest paths with one row broadcast per step
// (Ma et al.'s ASP application). The algorithm is written once against a small
// communication backend (strata or MPI, see asp_strata.cpp / asp_mpi.cpp):
//
//   struct Backend {
//     using Request = ...;
//     int rank() const; int size() const;
//     Request ibcast(std::int32_t* buf, std::size_t count, int root);  // nonblocking
//     void wait(Request& r);
//     double max(double v);            // blocking allreduce (max)
//     double sum(double v);            // blocking allreduce (sum)
//     std::int64_t sum(std::int64_t);  // blocking allreduce (sum)
//     void barrier();
//   };
//
// Rows are distributed by blocks: rank r owns rows [r*L, (r+1)*L), L = n/size.
// At step k the owner of row k broadcasts it and every rank relaxes its rows
// through k. Two schedules:
//  - blocking:  broadcast row k, wait, update;
//  - pipelined: the owner of row k+1 first updates that row with row k, then
//    starts its broadcast; the others post the receive of row k+1 before they
//    update with row k, so the broadcast of row k+1 overlaps step k's update.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../common/app_options.hpp"

namespace asp {

constexpr std::int32_t kInf = 1 << 29;  // "no path"; kInf + kInf still fits int32

struct Options {
  int n = 512;
  std::uint64_t seed = 1;
  double density = 0.05;
  std::string mode = "both";  // blocking | pipelined | both
  bool check = false;
  std::string trace;
  std::string backend;
};

/// Parses the command line; returns an error message or "" (fills @p help on -h).
inline std::string parse(int argc, char** argv, Options& o, std::string& help) {
  CLI::App app{
      "Floyd-Warshall on a random directed graph of N vertices (edge probability P, weights 1..100); "
      "the rank count must divide N.",
      "asp"};
  apps::add_common_options(app, o);
  app.add_option("--n", o.n, "vertices (default 512)")->check(strata::cli::positive_integer());
  app.add_option("--seed", o.seed, "random graph seed (default 1)");
  app.add_option("--density", o.density, "edge probability in [0, 1] (default 0.05)")->check(CLI::Range(0.0, 1.0));
  app.add_option("--mode", o.mode, "blocking, pipelined or both (default)")
      ->check(strata::cli::one_of({"blocking", "pipelined", "both"}));
  return apps::parse_app(app, argc, argv, help);
}

/// Deterministic edge weight of (i, j): independent of the rank count.
inline std::int32_t edge(std::uint64_t seed, int n, int i, int j, double density) {
  if (i == j) return 0;
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(i) * static_cast<std::uint64_t>(n) +
                    static_cast<std::uint64_t>(j) + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const double u = static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
  if (u >= density) return kInf;
  return 1 + static_cast<std::int32_t>((z & 0xffff) % 100);
}

/// Rows [first, first + count) of the adjacency matrix.
inline std::vector<std::int32_t> make_rows(const Options& o, int first, int count) {
  std::vector<std::int32_t> d(static_cast<std::size_t>(count) * static_cast<std::size_t>(o.n));
  for (int i = 0; i < count; ++i)
    for (int j = 0; j < o.n; ++j)
      d[static_cast<std::size_t>(i) * static_cast<std::size_t>(o.n) + static_cast<std::size_t>(j)] =
          edge(o.seed, o.n, first + i, j, o.density);
  return d;
}

/// Relaxes one row through vertex k: row[j] = min(row[j], row[k] + rowk[j]).
inline void relax(std::int32_t* row, const std::int32_t* rowk, int k, int n) {
  const std::int32_t dik = row[k];
  if (dik >= kInf) return;
  for (int j = 0; j < n; ++j) row[j] = std::min(row[j], dik + rowk[j]);
}

/// The sequential reference (n x n matrix in place).
inline void floyd_warshall(std::vector<std::int32_t>& d, int n) {
  for (int k = 0; k < n; ++k) {
    const std::int32_t* rowk = &d[static_cast<std::size_t>(k) * static_cast<std::size_t>(n)];
    for (int i = 0; i < n; ++i)
      if (i != k) relax(&d[static_cast<std::size_t>(i) * static_cast<std::size_t>(n)], rowk, k, n);
  }
}

struct Times {
  double total = 0, compute = 0, comm = 0;  // seconds; comm = time blocked in broadcast waits
};

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

/// Distributed Floyd-Warshall over the local rows @p d (L x n).
template <class B>
Times run(B& b, std::vector<std::int32_t>& d, int n, bool pipelined) {
  const int p = b.size(), me = b.rank();
  const int L = n / p, first = me * L;
  const auto un = static_cast<std::size_t>(n);
  auto row = [&](int global) { return &d[static_cast<std::size_t>(global - first) * un]; };
  std::vector<std::int32_t> buf[2] = {std::vector<std::int32_t>(un), std::vector<std::int32_t>(un)};
  Times t;
  b.barrier();
  const auto t0 = Clock::now();
  auto update_all = [&](const std::int32_t* rowk, int k, int skip) {
    const auto tc = Clock::now();
    for (int i = first; i < first + L; ++i)
      if (i != k && i != skip) relax(row(i), rowk, k, n);
    t.compute += since(tc);
  };
  if (!pipelined) {
    for (int k = 0; k < n; ++k) {
      const int root = k / L;
      if (root == me) std::memcpy(buf[0].data(), row(k), un * sizeof(std::int32_t));
      const auto tw = Clock::now();
      auto r = b.ibcast(buf[0].data(), un, root);
      b.wait(r);
      t.comm += since(tw);
      update_all(buf[0].data(), k, -1);
    }
  } else {
    typename B::Request req[2];
    if (me == 0) std::memcpy(buf[0].data(), row(0), un * sizeof(std::int32_t));
    req[0] = b.ibcast(buf[0].data(), un, 0);
    for (int k = 0; k < n; ++k) {
      const int cur = k % 2, nxt = 1 - cur;
      const auto tw = Clock::now();
      b.wait(req[cur]);
      t.comm += since(tw);
      int skip = -1;
      if (k + 1 < n) {
        const int nroot = (k + 1) / L;
        if (nroot == me) {  // row k+1 first, so its broadcast overlaps the rest of step k
          const auto tc = Clock::now();
          relax(row(k + 1), buf[cur].data(), k, n);
          std::memcpy(buf[nxt].data(), row(k + 1), un * sizeof(std::int32_t));
          t.compute += since(tc);
          skip = k + 1;
        }
        req[nxt] = b.ibcast(buf[nxt].data(), un, nroot);
      }
      update_all(buf[cur].data(), k, skip);
    }
  }
  t.total = since(t0);
  return t;
}

/// The whole program on backend @p b: returns the exit status.
template <class B>
int main_with(B& b, const Options& o, const char* backend_name, const std::string& hosts) {
  const int me = b.rank(), p = b.size();
  if (o.n % p != 0) {
    if (me == 0)
      std::fprintf(stderr,
                   "asp: error: the number of ranks (%d) does not divide N (%d): run with a rank count that "
                   "divides N, or change --n\n",
                   p, o.n);
    return 2;
  }
  const int L = o.n / p, first = me * L;
  const auto un = static_cast<std::size_t>(o.n);
  if (me == 0) {
    std::printf("asp: n=%d ranks=%d hosts=%s rows/rank=%d seed=%llu density=%.3f backend=%s\n", o.n, p, hosts.c_str(),
                L, static_cast<unsigned long long>(o.seed), o.density, backend_name);
    std::printf("asp: %-10s %10s %11s %13s %9s   (total: slowest rank; parts: mean over ranks)\n", "mode", "total_ms",
                "compute_ms", "comm_wait_ms", "other_ms");
    std::fflush(stdout);
  }
  std::vector<int> modes;
  if (o.mode != "pipelined") modes.push_back(0);
  if (o.mode != "blocking") modes.push_back(1);

  std::vector<std::int32_t> ref;
  if (o.check) {  // every rank computes the sequential reference and checks its own rows
    ref = make_rows(o, 0, o.n);
    floyd_warshall(ref, o.n);
  }
  std::int64_t bad_total = 0;
  double blocking_comm = -1;
  std::vector<std::int32_t> result;
  for (int mode : modes) {
    std::vector<std::int32_t> d = make_rows(o, first, L);
    const Times t = run(b, d, o.n, mode == 1);
    // total: slowest rank; the parts: mean over ranks (they add up to the mean total)
    const double total = b.max(t.total), compute = b.sum(t.compute) / p, comm = b.sum(t.comm) / p;
    const double other = b.sum(t.total) / p - compute - comm;
    if (me == 0) {
      std::printf("asp: %-10s %10.2f %11.2f %13.2f %9.2f", mode ? "pipelined" : "blocking", total * 1e3, compute * 1e3,
                  comm * 1e3, other * 1e3);
      if (mode == 1 && blocking_comm >= 0)
        std::printf("   overlap: %.2f ms of %.2f ms broadcast wait hidden", std::max(0.0, blocking_comm - comm) * 1e3,
                    blocking_comm * 1e3);
      std::printf("\n");
      std::fflush(stdout);
    }
    if (mode == 0) blocking_comm = comm;
    if (o.check) {
      std::int64_t bad = 0;
      for (std::size_t x = 0; x < d.size(); ++x)
        if (d[x] != ref[static_cast<std::size_t>(first) * un + x]) ++bad;
      bad_total += b.sum(bad);
    }
    const std::int64_t differs = !result.empty() && result != d ? 1 : 0;  // both schedules must agree
    bad_total += b.sum(differs);
    result = std::move(d);
  }
  // Checksum: sum of finite distances and number of reachable pairs.
  std::int64_t sum = 0, reach = 0;
  for (std::int32_t v : result)
    if (v < kInf) sum += v, ++reach;
  sum = b.sum(sum);
  reach = b.sum(reach);
  if (me == 0) {
    std::printf("asp: checksum: %lld reachable pairs, distance sum %lld\n", static_cast<long long>(reach),
                static_cast<long long>(sum));
    if (o.check)
      std::printf("asp: check: %lld mismatches against the sequential Floyd-Warshall (%zu modes x %lld entries): %s\n",
                  static_cast<long long>(bad_total), modes.size(),
                  static_cast<long long>(o.n) * static_cast<long long>(o.n), bad_total == 0 ? "OK" : "FAILED");
    std::fflush(stdout);
  }
  return bad_total == 0 ? 0 : 1;
}

}  // namespace asp
