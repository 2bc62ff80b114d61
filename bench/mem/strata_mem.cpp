// strata-mem [COMMS [CALLS [SEED]]]: peak memory per rank (VmHWM) of an engine
// with COMMS communicators (default 100: dups and splits of the world) after
// CALLS collectives (default 2000) drawn at random (fixed SEED, default 1) from
// allreduce, broadcast, reduce, allgather, alltoall, reduce_scatter_block,
// gather, scatter and barrier, loose or strict, over 8 counts from 1 to 65536
// elements, on a random communicator each. Every rank draws the same
// sequence, so each communicator's members post its calls in the same order.
//
//   strata-run -n 8 -- strata-mem 100 2000 1
//   STRATA_PLAN_CACHE_BYTES=1099511627776 strata-run -n 8 -- strata-mem   (unbounded cache)
//
// Printed by rank 0, for every rank: VmHWM and VmRSS (kB) after the engine's
// start, after the communicators' creation and at the end, the plan
// cache's counters (Engine::plan_cache_stats), the end's RssAnon and
// RssShmem (kB): shared memory is the windows (own and mapped peers'), and the
// bytes of this rank's own windows (Engine::window_stats, against
// STRATA_WINDOW_BUDGET). Results are checked (an
// allreduce sum per call kind); a wrong one exits 1. A memory measurement:
// no timing.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "strata/strata.hpp"

namespace {

// A /proc/self/status field in kB (VmHWM, VmRSS), 0 when absent.
std::uint64_t status_kb(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.compare(0, field.size() + 1, field + ":") == 0)
      return std::strtoull(line.c_str() + field.size() + 1, nullptr, 10);
  return 0;
}

enum Kind : int { kAllreduce, kBroadcast, kReduce, kAllgather, kAlltoall, kReduceScatter, kGather, kScatter, kBarrier };
constexpr int kKinds = 9;
constexpr std::size_t kCounts[] = {1, 7, 64, 500, 1024, 4096, 20000, 65536};

// One call of @p kind with @p count elements per rank on @p c; false when a checked result is wrong.
bool run_call(strata::Communicator& c, int kind, std::size_t count, int root, bool strict) {
  const auto n = static_cast<std::size_t>(c.size());
  const int me = c.rank();
  strata::CollOptions o;
  if (strict) o.sync = strata::Sync::strict();
  std::vector<std::int32_t> a(count * n, me + 1), b(count * n, 0);
  const auto t = strata::Datatype::int32;
  const auto sum = static_cast<std::int32_t>(n * (n + 1) / 2);
  switch (kind) {
    case kAllreduce:
      c.allreduce(a.data(), b.data(), count, t, strata::Op::sum, o).get();
      return b[0] == sum && b[count - 1] == sum;
    case kBroadcast:
      c.broadcast(a.data(), count, t, root, o).get();
      return a[0] == root + 1 && a[count - 1] == root + 1;
    case kReduce:
      c.reduce(a.data(), b.data(), count, t, strata::Op::sum, root, o).get();
      return me != root || (b[0] == sum && b[count - 1] == sum);
    case kAllgather:
      c.allgather(a.data(), count, b.data(), t, o).get();
      return b[0] == 1 && b[count * n - 1] == static_cast<std::int32_t>(n);
    case kAlltoall:
      c.alltoall(a.data(), b.data(), count, t, o).get();
      return b[0] == 1 && b[count * n - 1] == static_cast<std::int32_t>(n);
    case kReduceScatter:
      c.reduce_scatter_block(a.data(), b.data(), count, t, strata::Op::sum, o).get();
      return b[0] == sum && b[count - 1] == sum;
    case kGather:
      c.gather(a.data(), count, b.data(), t, root, o).get();
      return me != root || (b[0] == 1 && b[count * n - 1] == static_cast<std::int32_t>(n));
    case kScatter:
      c.scatter(a.data(), b.data(), count, t, root, o).get();
      return b[0] == root + 1 && b[count - 1] == root + 1;
    default:
      c.barrier(o).get();
      return true;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int comms = argc > 1 ? std::atoi(argv[1]) : 100;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 2000;
  const unsigned seed = argc > 3 ? static_cast<unsigned>(std::atoi(argv[3])) : 1u;
  if (comms < 0 || calls < 0) {
    std::fprintf(stderr, "usage: strata-mem [COMMS [CALLS [SEED]]]\n");
    return 2;
  }
  strata::Engine engine;
  strata::Communicator& world = engine.world();
  const int size = world.size();
  const std::uint64_t hwm_start = status_kb("VmHWM"), rss_start = status_kb("VmRSS");

  // Dups, halves, quarters and pairs of the world, in turn.
  std::vector<strata::Communicator> cs;
  cs.reserve(static_cast<std::size_t>(comms));
  for (int i = 0; i < comms; ++i) {
    const int r = world.rank();
    switch (i % 4) {
      case 0:
        cs.push_back(world.dup());
        break;
      case 1:
        cs.push_back(world.split(r % 2, r));
        break;
      case 2:
        cs.push_back(world.split(r / 4, size - r));
        break;
      default:
        cs.push_back(world.split(r / 2, r));
        break;
    }
  }
  const std::uint64_t hwm_comms = status_kb("VmHWM"), rss_comms = status_kb("VmRSS");
  const strata::Engine::WindowStats ws = engine.window_stats();  // with every communicator alive

  std::mt19937 rng(seed);
  bool ok = true;
  for (int k = 0; k < calls && !cs.empty(); ++k) {
    auto& c = cs[rng() % cs.size()];
    const int kind = static_cast<int>(rng() % kKinds);
    const std::size_t count = kCounts[rng() % (sizeof kCounts / sizeof kCounts[0])];
    const int root = static_cast<int>(rng() % static_cast<unsigned>(c.size()));
    const bool strict = rng() % 4 == 0;
    if (!run_call(c, kind, count, root, strict)) {
      std::fprintf(stderr, "strata-mem: rank %d: wrong result of call %d (kind %d, count %zu)\n", world.rank(), k, kind,
                   count);
      ok = false;
    }
  }
  world.barrier().get();
  const strata::Engine::PlanCacheStats st = engine.plan_cache_stats();
  const std::uint64_t mine[] = {hwm_start,
                                rss_start,
                                hwm_comms,
                                rss_comms,
                                status_kb("VmHWM"),
                                status_kb("VmRSS"),
                                st.hits,
                                st.misses,
                                st.evictions,
                                st.entries,
                                st.bytes,
                                st.peak_bytes,
                                status_kb("RssAnon"),
                                status_kb("RssShmem"),
                                ok ? 0u : 1u,
                                ws.bytes};
  constexpr std::size_t kW = sizeof mine / sizeof mine[0];
  std::vector<std::uint64_t> all(kW * static_cast<std::size_t>(size));
  world.allgather(mine, kW, all.data(), strata::Datatype::uint64).get();
  bool all_ok = true;
  if (world.rank() == 0) {
    std::printf(
        "strata-mem: %d ranks, %d communicators, %d calls, seed %u, plan cache budget %zu bytes, window budget %zu "
        "bytes\n",
        size, comms, calls, seed, st.budget, ws.budget);
    std::printf("%4s %10s %10s %10s %10s %10s %10s %8s %8s %8s %8s %10s %10s %10s %10s %10s\n", "rank", "hwm0_kB",
                "rss0_kB", "hwm1_kB", "rss1_kB", "hwm_kB", "rss_kB", "hits", "misses", "evicted", "entries", "cache_kB",
                "peak_kB", "anon_kB", "shmem_kB", "windows_kB");
    std::uint64_t max_hwm = 0, max_windows = 0;
    for (int r = 0; r < size; ++r) {
      const std::uint64_t* v = all.data() + kW * static_cast<std::size_t>(r);
      std::printf(
          "%4d %10llu %10llu %10llu %10llu %10llu %10llu %8llu %8llu %8llu %8llu %10llu %10llu %10llu %10llu %10llu\n",
          r, static_cast<unsigned long long>(v[0]), static_cast<unsigned long long>(v[1]),
          static_cast<unsigned long long>(v[2]), static_cast<unsigned long long>(v[3]),
          static_cast<unsigned long long>(v[4]), static_cast<unsigned long long>(v[5]),
          static_cast<unsigned long long>(v[6]), static_cast<unsigned long long>(v[7]),
          static_cast<unsigned long long>(v[8]), static_cast<unsigned long long>(v[9]),
          static_cast<unsigned long long>(v[10] / 1024), static_cast<unsigned long long>(v[11] / 1024),
          static_cast<unsigned long long>(v[12]), static_cast<unsigned long long>(v[13]),
          static_cast<unsigned long long>(v[15] / 1024));
      max_hwm = std::max(max_hwm, v[4]);
      max_windows = std::max(max_windows, v[15]);
      all_ok = all_ok && v[14] == 0;
    }
    std::printf("strata-mem: peak memory per rank (max VmHWM) %llu kB%s\n", static_cast<unsigned long long>(max_hwm),
                all_ok ? "" : "; WRONG RESULTS");
    std::printf("strata-mem: windows per rank (max, every communicator alive) %llu kB%s\n",
                static_cast<unsigned long long>(max_windows / 1024),
                ws.budget > 0 && max_windows > ws.budget ? " (above the window budget: the 64 KiB slot floor)" : "");
  }
  return ok ? 0 : 1;
}
