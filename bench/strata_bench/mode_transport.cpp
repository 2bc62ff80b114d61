// --transport: the transport alone, between ranks 0 and 1 (other ranks only
// take part in the out-of-band barriers). Per message size:
//
//  put_with_signal latency  ping-pong: rank 0 puts into rank 1's registered
//                           inbox with a signal, rank 1 waits for the signal
//                           and answers the same way; half a round trip,
//                           timed on both ranks (rank 1 from its answer to
//                           the next ping).
//  get latency              one blocking get at a time from the peer's
//                           registered source; each rank in turn is the
//                           reader while the other only progresses.
//  put bandwidth            a window of --window puts, then wait for all their
//                           completions (delivery complete); bytes / time per
//                           put; each rank in turn is the writer.
//
// Every rank reduces its samples to a median; a Record holds the min, median
// and max of those per-rank medians (bench_util). The backend is whatever
// the router picks for the pair (STRATA_INTRA / --backend for same-host peers,
// libfabric across virtual hosts); the progress mode is ProgressServer threads
// (STRATA_PROGRESS_THREADS, default 1) or inline (0: the waiting thread drives
// Transport::progress()). Waiting always goes through ProgressServer::wait_until,
// as the engine does. Rank 0 then measures the memcpy ceiling of the same sizes
// in the same run (the other ranks wait in a barrier) and prints the ratios.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>

#include "strata_bench/world.hpp"

namespace strata::bench {
namespace {

using Clock = std::chrono::steady_clock;
using transport::RemoteKey;

constexpr std::size_t kPage = 4096;
constexpr std::size_t kOffCacheRegion = std::size_t{128} << 20;  // 4x the 32 MiB L3 here

double us_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

std::uint8_t pattern(int rank, std::size_t i) {
  return static_cast<std::uint8_t>((i * 131u + static_cast<std::size_t>(rank) * 71u + 7u) & 0xffu);
}

/// A registered buffer cut into slots; in off-cache mode consecutive
/// operations use consecutive slots of a region larger than the cache.
struct Slots {
  std::unique_ptr<std::uint8_t[]> mem;
  std::size_t len = 0;
  std::size_t stride = 0;
  std::size_t count = 1;

  void allocate(std::size_t bytes) {
    len = std::max<std::size_t>(bytes, 64);
    mem.reset(new std::uint8_t[len]);
  }
  void layout(std::size_t n, bool off_cache) {
    stride = (n + kPage - 1) / kPage * kPage;
    count = off_cache && stride > 0 ? std::max<std::size_t>(1, len / stride) : 1;
  }
  [[nodiscard]] std::size_t offset(std::uint64_t k) const { return count <= 1 ? 0 : (k % count) * stride; }
  [[nodiscard]] std::uint8_t* at(std::uint64_t k) const { return mem.get() + offset(k); }
};

class TransportBench {
 public:
  TransportBench(World& w, const Options& o) : w_(w), o_(o) {}

  int run(std::vector<Record>& out);

 private:
  [[nodiscard]] bool active() const { return w_.rank() < 2; }
  [[nodiscard]] int peer() const { return 1 - w_.rank(); }

  Record reduce(const char* coll, std::size_t n, int iters, const std::vector<double>& samples, bool checked, bool ok);
  bool verify_inbox(std::uint64_t k, std::size_t n);
  void poison_inbox(std::uint64_t k, std::size_t n);
  void post_ok(const Status& s, const char* what, std::size_t n);

  void pingpong(std::size_t n, int reps, int warm, std::vector<double>& samples, bool& ok);
  void get_latency(std::size_t n, int reps, int warm, std::vector<double>& samples, bool& ok);
  void put_bandwidth(std::size_t n, int reps, int warm, std::vector<double>& samples, bool& ok);

  World& w_;
  const Options& o_;
  Slots src_, inbox_;
  std::vector<RemoteKey> src_keys_, inbox_keys_;
  std::uint64_t posted_ = 0;  // operations posted by this rank (completions expected)
  std::uint64_t k_ = 0;       // slot counter, advances per operation
};

void TransportBench::post_ok(const Status& s, const char* what, std::size_t n) {
  if (!s.is_ok()) w_.fail(std::string(what) + " of " + std::to_string(n) + " B to rank " + std::to_string(peer()), s);
  ++posted_;
}

void TransportBench::poison_inbox(std::uint64_t k, std::size_t n) {
  if (o_.check && active()) std::memset(inbox_.at(k), 0xEE, n);
}

bool TransportBench::verify_inbox(std::uint64_t k, std::size_t n) {
  const std::uint8_t* p = inbox_.at(k);
  const std::size_t off = inbox_.offset(k);
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] != pattern(peer(), off + i)) {
      std::fprintf(stderr, "strata-bench: rank %d: CHECK FAILED at byte %zu of %zu: got %u, expected %u\n", w_.rank(),
                   i, n, static_cast<unsigned>(p[i]), static_cast<unsigned>(pattern(peer(), off + i)));
      return false;
    }
  }
  return true;
}

Record TransportBench::reduce(const char* coll, std::size_t n, int iters, const std::vector<double>& samples,
                              bool checked, bool ok) {
  const double mine = active() ? median(samples) : 0.0;
  const auto all = w_.gather(mine);
  const auto oks = w_.gather(ok ? 1.0 : 0.0);
  Record r;
  r.library = "strata";
  r.collective = coll;
  r.variant = w_.label();
  r.bytes = n;
  r.ranks = 2;
  r.iters = iters;
  r.checked = checked;
  r.check_ok = oks[0] > 0 && oks[1] > 0;
  const std::vector<double> pair{all[0], all[1]};
  r.min_us = std::min(all[0], all[1]);
  r.max_us = std::max(all[0], all[1]);
  r.median_us = median(pair);
  r.bandwidth_MBps = r.max_us > 0 ? static_cast<double>(n) / r.max_us : 0.0;
  return r;
}

// Half round trips of put_with_signal. Rank 0 times post -> answer; rank 1
// times its answer -> the next ping.
void TransportBench::pingpong(std::size_t n, int reps, int warm, std::vector<double>& samples, bool& ok) {
  const int total = reps + warm;
  const std::uint64_t k0 = k_;
  poison_inbox(k0 + static_cast<std::uint64_t>(total - 1), n);
  const std::uint64_t base = w_.pings.load();  // before the barrier: the first ping may come right after it
  w_.barrier();
  if (!active()) return;
  const RemoteKey& dst = inbox_keys_[static_cast<std::size_t>(peer())];
  if (w_.rank() == 0) {
    for (int i = 0; i < total; ++i) {
      const std::uint64_t k = k0 + static_cast<std::uint64_t>(i);
      const auto t0 = Clock::now();
      post_ok(w_.t().put_with_signal(peer(), src_.at(k), n, dst, src_.offset(k), kSigPing, nullptr), "put_with_signal",
              n);
      const std::uint64_t want = base + static_cast<std::uint64_t>(i) + 1;
      w_.wait([&] { return w_.pings.load(std::memory_order_acquire) >= want; }, "ping-pong answer");
      if (i >= warm) samples.push_back(us_between(t0, Clock::now()) / 2);
    }
  } else {
    Clock::time_point last_post;
    for (int i = 0; i < total; ++i) {
      const std::uint64_t k = k0 + static_cast<std::uint64_t>(i);
      const std::uint64_t want = base + static_cast<std::uint64_t>(i) + 1;
      w_.wait([&] { return w_.pings.load(std::memory_order_acquire) >= want; }, "ping");
      if (i > warm) samples.push_back(us_between(last_post, Clock::now()) / 2);
      last_post = Clock::now();
      post_ok(w_.t().put_with_signal(peer(), src_.at(k), n, dst, src_.offset(k), kSigPing, nullptr), "put_with_signal",
              n);
    }
  }
  w_.wait_completions(posted_, "put_with_signal completions");
  k_ += static_cast<std::uint64_t>(total);
  if (o_.check) ok = verify_inbox(k0 + static_cast<std::uint64_t>(total - 1), n) && ok;
}

// One get at a time; rank 0 reads first while rank 1 only progresses, then the reverse.
void TransportBench::get_latency(std::size_t n, int reps, int warm, std::vector<double>& samples, bool& ok) {
  const int total = reps + warm;
  for (int reader = 0; reader < 2; ++reader) {
    const std::uint64_t k0 = k_;
    if (w_.rank() == reader) poison_inbox(k0 + static_cast<std::uint64_t>(total - 1), n);
    const std::uint64_t done_base = w_.dones.load();
    w_.barrier();
    if (w_.rank() == reader) {
      const RemoteKey& src = src_keys_[static_cast<std::size_t>(peer())];
      for (int i = 0; i < total; ++i) {
        const std::uint64_t k = k0 + static_cast<std::uint64_t>(i);
        const auto t0 = Clock::now();
        post_ok(w_.t().get(peer(), inbox_.at(k), n, src, src_.offset(k), nullptr), "get", n);
        w_.wait_completions(posted_, "get completion");
        if (i >= warm) samples.push_back(us_between(t0, Clock::now()));
      }
      if (o_.check) ok = verify_inbox(k0 + static_cast<std::uint64_t>(total - 1), n) && ok;
      post_ok(w_.t().signal(peer(), kSigDone, nullptr), "signal", 0);
      w_.wait_completions(posted_, "done signal completion");
    } else if (active()) {
      w_.wait([&] { return w_.dones.load(std::memory_order_acquire) > done_base; }, "end of the peer's gets");
    }
    k_ += static_cast<std::uint64_t>(total);
  }
}

// Windows of puts; rank 0 writes first, then rank 1. Samples are time per put.
void TransportBench::put_bandwidth(std::size_t n, int reps, int warm, std::vector<double>& samples, bool& ok) {
  const auto window = static_cast<std::uint64_t>(std::max(1, o_.window));
  const int total = reps + warm;
  for (int writer = 0; writer < 2; ++writer) {
    const std::uint64_t k0 = k_;
    const std::uint64_t last = k0 + static_cast<std::uint64_t>(total) * window - 1;
    if (w_.rank() == 1 - writer) poison_inbox(last, n);
    const std::uint64_t done_base = w_.dones.load();
    w_.barrier();
    if (w_.rank() == writer) {
      const RemoteKey& dst = inbox_keys_[static_cast<std::size_t>(peer())];
      for (int i = 0; i < total; ++i) {
        const auto t0 = Clock::now();
        for (std::uint64_t j = 0; j < window; ++j) {
          const std::uint64_t k = k0 + static_cast<std::uint64_t>(i) * window + j;
          post_ok(w_.t().put(peer(), src_.at(k), n, dst, src_.offset(k), nullptr), "put", n);
        }
        w_.wait_completions(posted_, "put window completions");
        if (i >= warm) samples.push_back(us_between(t0, Clock::now()) / static_cast<double>(window));
      }
      post_ok(w_.t().signal(peer(), kSigDone, nullptr), "signal", 0);
      w_.wait_completions(posted_, "done signal completion");
    } else if (active()) {
      w_.wait([&] { return w_.dones.load(std::memory_order_acquire) > done_base; }, "end of the peer's puts");
      if (o_.check) ok = verify_inbox(last, n) && ok;
    }
    k_ = last + 1;
  }
}

// Over ~80 lines: a straight benchmark script, not library code.
int TransportBench::run(std::vector<Record>& out) {
  const auto sizes = o_.sizes.empty() ? default_transport_sizes() : o_.sizes;
  const std::size_t max_size = *std::max_element(sizes.begin(), sizes.end());
  const std::size_t region =
      active() ? (o_.off_cache ? std::max(kOffCacheRegion, (max_size + kPage - 1) / kPage * kPage * 2) : max_size) : 64;
  src_.allocate(region);
  inbox_.allocate(region);
  for (std::size_t i = 0; i < src_.len; ++i) src_.mem[i] = pattern(w_.rank(), i);
  std::memset(inbox_.mem.get(), 0, inbox_.len);
  RemoteKey ks{}, ki{};
  Status s = w_.t().register_memory(src_.mem.get(), src_.len, &ks);
  if (!s.is_ok()) w_.fail("register_memory(source)", s);
  s = w_.t().register_memory(inbox_.mem.get(), inbox_.len, &ki);
  if (!s.is_ok()) w_.fail("register_memory(inbox)", s);
  src_keys_ = w_.exchange(ks);
  inbox_keys_ = w_.exchange(ki);

  const bool root = w_.rank() == 0;
  if (root) {
    std::fprintf(stderr,
                 "# strata-bench --transport: %d ranks, pair 0<->1 %s, transport %s, progress %s (%d threads)%s\n",
                 w_.size(), w_.label().c_str(), w_.t().name().c_str(), w_.servers().inline_mode() ? "inline" : "server",
                 w_.servers().threads(), o_.off_cache ? ", off-cache" : "");
  }
  // Warm connections up (rxm connects lazily): one ping each way.
  {
    std::vector<double> ignore;
    bool ok = true;
    src_.layout(8, false);
    inbox_.layout(8, false);
    pingpong(8, 1, 1, ignore, ok);
  }

  bool all_ok = true;
  std::vector<Record> mine;
  for (std::size_t n : sizes) {
    const int reps = iterations_for(n, o_.iters);
    const int warm = o_.warmup >= 0 ? o_.warmup : std::max(2, reps / 10);
    src_.layout(n, o_.off_cache);
    inbox_.layout(n, o_.off_cache);

    std::vector<double> lat, get, bw;
    bool ok_lat = true, ok_get = true, ok_bw = true;
    pingpong(n, reps, warm, lat, ok_lat);
    get_latency(n, reps, warm, get, ok_get);
    const int window = std::max(1, o_.window);
    const int bw_reps = std::max(3, reps / window);
    const int bw_warm = o_.warmup >= 0 ? std::min(o_.warmup, bw_reps) : std::max(1, warm / window);
    put_bandwidth(n, bw_reps, bw_warm, bw, ok_bw);

    mine.push_back(reduce("put_with_signal", n, reps, lat, o_.check, ok_lat));
    mine.push_back(reduce("get", n, reps, get, o_.check, ok_get));
    mine.push_back(reduce("put", n, bw_reps * window, bw, o_.check, ok_bw));
    const Record* r = &mine[mine.size() - 3];
    for (int i = 0; i < 3; ++i) all_ok = all_ok && r[i].check_ok;
    if (root && !o_.quiet) {
      std::fprintf(stderr, "# %s %10zu B: put_with_signal %9.3f us, get %9.3f us, put %9.1f MB/s%s\n",
                   w_.label().c_str(), n, r[0].median_us, r[1].median_us, r[2].bandwidth_MBps,
                   o_.check ? (r[0].check_ok && r[1].check_ok && r[2].check_ok ? ", check ok" : ", CHECK FAILED") : "");
    }
  }
  w_.barrier();  // nobody touches a peer's buffers any more
  (void)w_.t().deregister_memory(src_.mem.get(), src_.len);
  (void)w_.t().deregister_memory(inbox_.mem.get(), inbox_.len);

  std::vector<Record> ceiling;
  if (o_.with_memcpy && root) ceiling = memcpy_ceiling(sizes, o_.iters, o_.quiet);
  w_.barrier();

  if (root) {
    print_header(stdout);
    for (const Record& r : mine) print_record(stdout, r);
    for (const Record& r : ceiling) print_record(stdout, r);
    if (!ceiling.empty()) {
      std::printf("\n# %s: put bandwidth as a fraction of memcpy in one process (same run)\n", w_.label().c_str());
      std::printf("%10s %12s %12s %12s %12s %12s %9s %9s\n", "bytes", "pws_us", "get_us", "put_MB/s", "hot_MB/s",
                  "cold_MB/s", "put/hot", "put/cold");
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        const Record& lat = mine[3 * i];
        const Record& get = mine[3 * i + 1];
        const Record& put = mine[3 * i + 2];
        const Record& hot = ceiling[2 * i];
        const Record& cold = ceiling[2 * i + 1];
        std::printf("%10zu %12.3f %12.3f %12.1f %12.1f %12.1f %9.3f %9.3f\n", sizes[i], lat.median_us, get.median_us,
                    put.bandwidth_MBps, hot.bandwidth_MBps, cold.bandwidth_MBps,
                    put.bandwidth_MBps / hot.bandwidth_MBps, put.bandwidth_MBps / cold.bandwidth_MBps);
      }
    }
    std::fflush(stdout);
  }
  if (root) {  // records are only meaningful (reduced) on rank 0
    out.insert(out.end(), mine.begin(), mine.end());
    out.insert(out.end(), ceiling.begin(), ceiling.end());
  }
  return all_ok ? 0 : 1;
}

}  // namespace

int run_transport(const Options& o, std::vector<Record>& out) {
  World w(o);
  if (w.size() < 2) {
    if (w.rank() == 0)
      std::fprintf(stderr,
                   "strata-bench: --transport needs at least 2 ranks: strata-run -n 2 --bind core -- strata-bench "
                   "--transport\n");
    return kUnavailable;
  }
  TransportBench b(w, o);
  const int rc = b.run(out);
  w.barrier();
  return rc;
}

}  // namespace strata::bench
