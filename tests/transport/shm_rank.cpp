// One rank of a same-host transport scenario, run under strata-run:
//
//   strata-run -n N -- shm_rank <scenario> [shm|router]
//
// scenarios: integrity, signals, fadd, kill, invalid, mapped, bench. "shm" (default)
// drives the shared-memory backend directly; "router" goes through
// make_transport(). Exit status 0 means every check passed; failures print
// "FAIL rank R: ..." on stderr. Every wait is bounded.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../common/shm_names.hpp"
#include "backend.hpp"
#include "strata/transport/bootstrap.hpp"
#include "strata/transport/progress.hpp"
#include "strata/transport/topology.hpp"
#include "strata/transport/transport.hpp"

namespace {

using strata::Errc;
using strata::Status;
using strata::transport::kRegionHandleBit;
using strata::transport::kRegionOffsetBits;
using strata::transport::region_handle;
using strata::transport::RemoteKey;
using strata::transport::Transport;
using Clock = std::chrono::steady_clock;

int g_rank = -1;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "FAIL rank %d: %s\n", g_rank, what.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

void check(bool cond, const std::string& what) {
  if (!cond) fail(what);
}

void check_ok(const Status& s, const std::string& what) {
  if (!s) fail(what + ": " + s.message());
}

/// One operation's completion slot (the context of a posted operation).
struct Op {
  std::atomic<int> done{0};
  Status status;  // written before done is released
};

struct World {
  std::unique_ptr<strata::Bootstrap> boot;
  strata::Hierarchy hier;
  std::unique_ptr<Transport> t;
  std::unique_ptr<strata::transport::ProgressServer> servers;
  int rank = 0, size = 0;

  std::mutex sig_mu;
  std::vector<std::vector<std::uint64_t>> signals;  // per source, in delivery order
  std::atomic<std::uint64_t> signal_count{0};
  std::atomic<std::uint64_t> completions{0};

  std::vector<std::vector<std::byte>> allgather(const void* d, std::size_t n) { return boot->allgather(d, n); }

  std::vector<RemoteKey> exchange_key(const RemoteKey& k) {
    auto blobs = allgather(&k, sizeof(k));
    std::vector<RemoteKey> keys(blobs.size());
    for (std::size_t i = 0; i < blobs.size(); ++i) std::memcpy(&keys[i], blobs[i].data(), sizeof(RemoteKey));
    return keys;
  }

  void wait(const std::function<bool()>& cond, const std::string& what, int seconds = 30) {
    if (!servers->wait_until(cond, std::chrono::seconds(seconds))) fail("timed out waiting for " + what);
  }
  void wait_op(Op& op, const std::string& what) {
    wait([&op] { return op.done.load(std::memory_order_acquire) != 0; }, what);
    check_ok(op.status, what);
  }
};

World* g_world = nullptr;

void setup(World& w, const std::string& mode, int progress_threads) {
  w.boot = strata::bootstrap_from_environment();
  w.rank = w.boot->rank();
  w.size = w.boot->size();
  g_rank = w.rank;
  w.hier = strata::discover_hierarchy(*w.boot);
  const auto opts = strata::transport::TransportOptions::from_environment();
  if (mode == "router") {
    w.t = strata::transport::make_transport(*w.boot, w.hier, opts);
  } else {
    std::vector<bool> serve(static_cast<std::size_t>(w.size));
    for (int p = 0; p < w.size; ++p) serve[static_cast<std::size_t>(p)] = w.hier.same_host(w.rank, p);
    w.t = strata::transport::detail::make_shm_backend(*w.boot, w.hier, serve, opts);
  }
  w.signals.resize(static_cast<std::size_t>(w.size));
  w.t->set_completion_handler([&w](void* ctx, const Status& s) {
    w.completions.fetch_add(1);
    if (ctx == nullptr) return;
    auto* op = static_cast<Op*>(ctx);
    op->status = s;
    op->done.store(1, std::memory_order_release);
  });
  w.t->set_signal_handler([&w](int src, std::uint64_t payload) {
    {
      std::lock_guard<std::mutex> g(w.sig_mu);
      w.signals.at(static_cast<std::size_t>(src)).push_back(payload);
    }
    w.signal_count.fetch_add(1);
  });
  auto po = strata::transport::ProgressOptions::from_environment();
  po.threads = progress_threads;
  w.servers = std::make_unique<strata::transport::ProgressServer>(*w.t, po);
  g_world = &w;
}

std::uint8_t pattern(std::uint64_t seed, std::size_t i) {
  return static_cast<std::uint8_t>((i * 131u + seed * 7u + (i >> 12) * 13u) & 0xffu);
}

void fill(std::vector<std::uint8_t>& b, std::uint64_t seed) {
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = pattern(seed, i);
}

void verify(const std::uint8_t* b, std::size_t n, std::uint64_t seed, const std::string& what) {
  for (std::size_t i = 0; i < n; ++i) {
    if (b[i] != pattern(seed, i)) {
      fail(what + ": byte " + std::to_string(i) + " of " + std::to_string(n) + " is " + std::to_string(b[i]) +
           ", expected " + std::to_string(pattern(seed, i)));
    }
  }
}

// ------------------------------------------------------------ integrity
// Rank r puts (then put_with_signal) into rank r+1 and gets from rank r+1,
// for every size; each byte is checked.
void integrity(World& w) {
  const int next = (w.rank + 1) % w.size;
  const int prev = (w.rank + w.size - 1) % w.size;
  std::vector<std::size_t> sizes = {0, 1, 7, 4096, (1u << 20) + 13, 64u << 20};
  if (std::getenv("SHM_RANK_SKIP_ZERO") != nullptr) sizes.erase(sizes.begin());
  if (const char* m = std::getenv("SHM_RANK_MAX_SIZE")) {
    const std::size_t lim = std::strtoull(m, nullptr, 10);
    sizes.erase(std::remove_if(sizes.begin(), sizes.end(), [lim](std::size_t s) { return s > lim; }), sizes.end());
  }
  for (std::size_t n : sizes) {
    const std::string tag = "size " + std::to_string(n);
    std::vector<std::uint8_t> src(n), inbox(n + 64, 0xEE), got(n + 64, 0xEE);
    fill(src, static_cast<std::uint64_t>(w.rank) * 1000 + n % 997);
    RemoteKey ksrc{}, kin{};
    check_ok(w.t->register_memory(src.data(), src.size(), &ksrc), "register src " + tag);
    check_ok(w.t->register_memory(inbox.data(), n, &kin), "register inbox " + tag);
    const auto src_keys = w.exchange_key(ksrc);
    const auto in_keys = w.exchange_key(kin);
    const std::uint64_t expect_seed = static_cast<std::uint64_t>(prev) * 1000 + n % 997;
    const std::uint64_t next_seed = static_cast<std::uint64_t>(next) * 1000 + n % 997;

    // put, then wait for its completion (data visible at the target).
    Op put_op;
    check_ok(w.t->put(next, src.data(), n, in_keys[static_cast<std::size_t>(next)], 0, &put_op), "put " + tag);
    w.wait_op(put_op, "put completion " + tag);
    w.boot->barrier();
    verify(inbox.data(), n, expect_seed, "put from rank " + std::to_string(prev) + " " + tag);
    for (std::size_t i = n; i < inbox.size(); ++i) check(inbox[i] == 0xEE, "put wrote past the end " + tag);

    // put_with_signal: the data must be there when the signal arrives.
    std::fill(inbox.begin(), inbox.end(), 0xEE);
    w.boot->barrier();
    Op pws_op;
    check_ok(
        w.t->put_with_signal(next, src.data(), n, in_keys[static_cast<std::size_t>(next)], 0, 0xC0DE0000 + n, &pws_op),
        "put_with_signal " + tag);
    // The handler runs after the data landed; the signal may even arrive
    // before this rank posts its own, so look for it by payload.
    w.wait(
        [&] {
          std::lock_guard<std::mutex> g(w.sig_mu);
          const auto& v = w.signals[static_cast<std::size_t>(prev)];
          return !v.empty() && v.back() == 0xC0DE0000 + n;
        },
        "signal of put_with_signal " + tag);
    verify(inbox.data(), n, expect_seed, "put_with_signal from rank " + std::to_string(prev) + " " + tag);
    w.wait_op(pws_op, "put_with_signal completion " + tag);

    // get from the next rank's source buffer.
    Op get_op;
    check_ok(w.t->get(next, got.data(), n, src_keys[static_cast<std::size_t>(next)], 0, &get_op), "get " + tag);
    w.wait_op(get_op, "get completion " + tag);
    verify(got.data(), n, next_seed, "get from rank " + std::to_string(next) + " " + tag);
    for (std::size_t i = n; i < got.size(); ++i) check(got[i] == 0xEE, "get wrote past the end " + tag);

    // offset get of an odd-sized middle part.
    if (n > 10) {
      Op mid;
      std::vector<std::uint8_t> part(n - 10);
      check_ok(w.t->get(next, part.data(), n - 10, src_keys[static_cast<std::size_t>(next)], 5, &mid), "get@5 " + tag);
      w.wait_op(mid, "get@5 completion " + tag);
      for (std::size_t i = 0; i < part.size(); ++i) {
        if (part[i] != pattern(next_seed, i + 5)) fail("get@5 " + tag + ": byte " + std::to_string(i));
      }
    }
    w.boot->barrier();  // nobody frees buffers a peer still reads
    check_ok(w.t->deregister_memory(src.data(), src.size()), "deregister " + tag);
    check_ok(w.t->deregister_memory(inbox.data(), n), "deregister " + tag);
  }
}

// ------------------------------------------------------------ signals
// Every rank sends K signals to every rank (itself included) from two
// threads' worth of interleaving; each receiver checks per-source order.
void signals(World& w) {
  const int k = std::getenv("SHM_RANK_SIGNALS") ? std::atoi(std::getenv("SHM_RANK_SIGNALS")) : 5000;
  w.boot->barrier();
  std::atomic<std::uint64_t> posted{0};
  for (int i = 0; i < k; ++i) {
    for (int d = 0; d < w.size; ++d) {
      const int peer = (w.rank + d) % w.size;
      const std::uint64_t payload = (static_cast<std::uint64_t>(w.rank) << 32) | static_cast<std::uint64_t>(i);
      check_ok(w.t->signal(peer, payload, nullptr), "signal " + std::to_string(i) + " to " + std::to_string(peer));
      posted.fetch_add(1);
    }
  }
  const std::uint64_t expect = static_cast<std::uint64_t>(k) * static_cast<std::uint64_t>(w.size);
  w.wait([&] { return w.signal_count.load() >= expect; }, "all signals", 60);
  w.wait([&] { return w.completions.load() >= expect; }, "all signal completions", 60);
  std::lock_guard<std::mutex> g(w.sig_mu);
  for (int s = 0; s < w.size; ++s) {
    const auto& v = w.signals[static_cast<std::size_t>(s)];
    check(v.size() == static_cast<std::size_t>(k), "from rank " + std::to_string(s) + ": " + std::to_string(v.size()) +
                                                       " signals, expected " + std::to_string(k));
    for (int i = 0; i < k; ++i) {
      const std::uint64_t want = (static_cast<std::uint64_t>(s) << 32) | static_cast<std::uint64_t>(i);
      if (v[static_cast<std::size_t>(i)] != want) {
        fail("signal " + std::to_string(i) + " from rank " + std::to_string(s) + " out of order or corrupted");
      }
    }
  }
  check(w.signal_count.load() == expect, "extra signals delivered");
}

// ------------------------------------------------------------ fetch_add
void fadd(World& w) {
  const int m = 1000;
  alignas(8) std::uint64_t word[2] = {0, 0};
  RemoteKey k{};
  check_ok(w.t->register_memory(word, sizeof(word), &k), "register word");
  const auto keys = w.exchange_key(k);
  std::vector<std::uint64_t> fetched(m);
  std::vector<Op> ops(m);
  for (int i = 0; i < m; ++i) {
    check_ok(w.t->fetch_add(0, keys[0], 8, 1, &fetched[static_cast<std::size_t>(i)], &ops[static_cast<std::size_t>(i)]),
             "fetch_add " + std::to_string(i));
  }
  for (auto& op : ops) w.wait_op(op, "fetch_add completion");
  std::uint64_t sum = 0;
  for (auto v : fetched) sum += v;
  const auto sums = w.allgather(&sum, sizeof(sum));
  std::uint64_t total = 0;
  for (const auto& b : sums) {
    std::uint64_t v = 0;
    std::memcpy(&v, b.data(), sizeof(v));
    total += v;
  }
  const std::uint64_t n = static_cast<std::uint64_t>(m) * static_cast<std::uint64_t>(w.size);
  check(total == n * (n - 1) / 2, "fetched values are not a permutation of 0..n-1 (sum " + std::to_string(total) + ")");
  if (w.rank == 0) {
    check(__atomic_load_n(&word[1], __ATOMIC_SEQ_CST) == n,
          "final value " + std::to_string(word[1]) + ", expected " + std::to_string(n));
    check(word[0] == 0, "neighbouring word touched");
  }
  w.boot->barrier();
}

// ------------------------------------------------------------ kill
// The last rank dies mid-stream; the others must see an error naming it.
void kill_scenario(World& w) {
  const int victim = w.size - 1;
  std::vector<std::uint8_t> buf(1 << 16, 1);
  RemoteKey k{};
  check_ok(w.t->register_memory(buf.data(), buf.size(), &k), "register");
  const auto keys = w.exchange_key(k);
  if (w.rank == victim) {
    // Consume a while, then die without any goodbye.
    w.wait([&] { return w.signal_count.load() >= 100; }, "first signals");
    ::kill(::getpid(), SIGKILL);
  }
  const auto start = Clock::now();
  std::atomic<int> errors{0};
  std::mutex mu;
  std::string first_error;
  w.t->set_completion_handler([&](void*, const Status& s) {
    if (s) return;
    std::lock_guard<std::mutex> g(mu);
    if (errors.fetch_add(1) == 0) first_error = s.message();
  });
  Status post_error;
  for (std::uint64_t i = 0; errors.load() == 0 && Clock::now() - start < std::chrono::seconds(30); ++i) {
    Status s = w.t->put_with_signal(victim, buf.data(), 4096, keys[static_cast<std::size_t>(victim)], 0, i, nullptr);
    if (!s) {
      post_error = s;
      break;
    }
    if (i % 64 == 63) w.servers->wait_until([&] { return errors.load() > 0; }, std::chrono::milliseconds(1));
  }
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  std::string msg;
  {
    std::lock_guard<std::mutex> g(mu);
    msg = post_error ? first_error : post_error.message();
  }
  check(!msg.empty(), "no error after " + std::to_string(secs) + " s");
  check(msg.find("rank " + std::to_string(victim)) != std::string::npos, "error does not name the victim: " + msg);
  check(secs < 20, "error took " + std::to_string(secs) + " s");
  // An operation error need not mark the peer failed at once (libfabric reports
  // connection errors per operation); the launcher's report or the timeout must.
  w.servers->wait_until([&] { return !w.t->peer_status(victim); }, std::chrono::seconds(10));
  const Status ps = w.t->peer_status(victim);
  check(!ps && (ps.code() == Errc::peer_dead || ps.code() == Errc::timeout), "peer_status not failed");
  // Posting to the dead peer now fails at once; other peers still work.
  check(!w.t->signal(victim, 1, nullptr), "post to a dead peer accepted");
  std::printf("SURVIVOR rank %d saw \"%s\" after %.2f s\n", w.rank, msg.c_str(), secs);
  std::fflush(stdout);
}

// ------------------------------------------------------------ mapped
// Buffers in SharedRegions (allocate_shared): puts, put_with_signals and gets
// at offsets inside the region, sizes around the direct threshold; every byte
// checked. The keys must carry kShmMapped (the single-copy path exists), and
// with STRATA_SHM_DIRECT=off the same traffic goes through the ring.
void mapped_regions_scenario(World& w) {
  const int next = (w.rank + 1) % w.size;
  const int prev = (w.rank + w.size - 1) % w.size;
  // 64 KiB + 5 then 1 MiB + 13: with STRATA_SHM_NT=auto the first put of
  // >= 8 KiB is a timed memcpy, the second may take the non-temporal stores.
  const std::vector<std::size_t> sizes = {1, 1023, 1024, 4096 + 3, 65536 + 5, (1u << 20) + 13};
  const std::size_t region_bytes = (2u << 20) + 8192;
  std::vector<int> everyone(static_cast<std::size_t>(w.size));
  for (int r = 0; r < w.size; ++r) everyone[static_cast<std::size_t>(r)] = r;
  auto src_region = w.t->allocate_shared(region_bytes, everyone);
  auto in_region = w.t->allocate_shared(region_bytes, everyone);
  const bool expect_shared = w.size > 1;
  check((src_region != nullptr) == expect_shared, "allocate_shared returned a region only with same-host peers");
  if (!src_region) return;
  check(in_region != nullptr && in_region->len == region_bytes, "second region");
  check(w.t->allocate_shared(4096, {w.rank}) == nullptr, "a region nobody else maps has no name");
  // The peers map both regions from their progress and answer; then the names go.
  w.wait([&] { return src_region->is_settled() && in_region->is_settled(); }, "peers mapping the regions");
  w.boot->barrier();  // every rank's regions are settled
  const std::string prefix = shm_names::job_prefix();
  check(!prefix.empty(), "no job tag in the environment");
  for (const std::string& n : shm_names::in_dev_shm(prefix))
    check(!shm_names::is_region(n, prefix), "/dev/shm/" + n + " is left while the regions are in use");
  const std::vector<std::string> mapped_names = shm_names::mapped_here(prefix);
  for (int r = 0; r < w.size; ++r) {
    if (r == w.rank || !w.hier.same_host(w.rank, r)) continue;  // other hosts: fabric, nothing to map
    const std::string peer = prefix + std::to_string(r) + "-m";
    const auto got = std::count_if(mapped_names.begin(), mapped_names.end(),
                                   [&peer](const std::string& n) { return n.rfind(peer, 0) == 0; });
    check(got == 2, "rank " + std::to_string(r) + ": " + std::to_string(got) + " of its 2 regions are mapped here");
  }
  auto* src_base = static_cast<std::uint8_t*>(src_region->addr);
  auto* in_base = static_cast<std::uint8_t*>(in_region->addr);
  for (std::size_t i = 0; i < region_bytes; ++i) check(in_base[i] == 0, "regions start zeroed");
  const std::size_t off = 4096 + 64;  // keys of a sub-range of the region
  const bool direct = std::getenv("STRATA_SHM_DIRECT") == nullptr;
  for (std::size_t n : sizes) {
    const std::string tag = "mapped size " + std::to_string(n);
    const std::uint64_t seed = static_cast<std::uint64_t>(w.rank) * 7919 + n;
    for (std::size_t i = 0; i < n; ++i) src_base[off + i] = pattern(seed, i);
    std::memset(in_base, 0xEE, region_bytes);
    RemoteKey ksrc{}, kin{};
    check_ok(w.t->register_memory(src_base + off, n, &ksrc), "register src " + tag);
    check_ok(w.t->register_memory(in_base + off, n, &kin), "register inbox " + tag);
    check((ksrc.flags & RemoteKey::kShmMapped) != 0, "key of a region buffer is not marked mapped " + tag);
    const auto src_keys = w.exchange_key(ksrc);
    const auto in_keys = w.exchange_key(kin);
    const std::uint64_t prev_seed = static_cast<std::uint64_t>(prev) * 7919 + n;
    const std::uint64_t next_seed = static_cast<std::uint64_t>(next) * 7919 + n;
    Op pws;
    check_ok(
        w.t->put_with_signal(next, src_base + off, n, in_keys[static_cast<std::size_t>(next)], 0, 0xA11C0000 + n, &pws),
        "put_with_signal " + tag);
    w.wait(
        [&] {
          std::lock_guard<std::mutex> g(w.sig_mu);
          const auto& v = w.signals[static_cast<std::size_t>(prev)];
          return !v.empty() && v.back() == 0xA11C0000 + n;
        },
        "signal " + tag);
    verify(in_base + off, n, prev_seed, "put_with_signal from rank " + std::to_string(prev) + " " + tag);
    check(in_base[off - 1] == 0xEE && in_base[off + n] == 0xEE, "put wrote outside its range " + tag);
    w.wait_op(pws, "put_with_signal completion " + tag);
    std::vector<std::uint8_t> got(n + 1, 0xEE);
    Op get_op;
    check_ok(w.t->get(next, got.data(), n, src_keys[static_cast<std::size_t>(next)], 0, &get_op), "get " + tag);
    w.wait_op(get_op, "get completion " + tag);
    verify(got.data(), n, next_seed, "get from rank " + std::to_string(next) + " " + tag);
    check(got[n] == 0xEE, "get wrote past the end " + tag);
    // read_peer by region handle (single-copy plans over Engine::allocate
    // memory): a memcpy out of this process's mapping of the owner's region.
    RemoteKey sk{};
    check(w.t->shared_key(src_base + off, n, &sk), "shared_key of a region buffer " + tag);
    RemoteKey hk{};
    hk.addr = region_handle(sk, reinterpret_cast<std::uintptr_t>(src_base + off));
    check(hk.addr != 0 && (hk.addr & kRegionHandleBit) != 0, "region handle " + tag);
    const auto handles = w.exchange_key(hk);
    if (w.hier.same_host(w.rank, next)) {
      const std::uint64_t h = handles[static_cast<std::size_t>(next)].addr;
      std::vector<std::uint8_t> viah(n + 1, 0xEE);
      check_ok(w.t->read_peer(next, viah.data(), h, n), "read_peer by handle " + tag);
      verify(viah.data(), n, next_seed, "read_peer by handle from rank " + std::to_string(next) + " " + tag);
      check(viah[n] == 0xEE, "read_peer by handle wrote past the end " + tag);
      // A region id the owner never had, and a range past the region's end: not mapped here.
      const std::uint64_t bogus = kRegionHandleBit | (std::uint64_t{(1u << 23) - 1} << kRegionOffsetBits);
      const Status nb = w.t->read_peer(next, viah.data(), bogus, n);
      check(nb.code() == Errc::unsupported, "read_peer of an unknown region: " + nb.message());
      const Status past = w.t->read_peer(next, viah.data(), h + region_bytes, n);
      check(past.code() == Errc::unsupported, "read_peer past the region: " + past.message());
    }
    w.boot->barrier();  // nobody reads a buffer the next size rewrites
  }
  std::printf("rank %d: region traffic checked, direct path %s\n", w.rank, direct ? "on" : "off");
}

// ------------------------------------------------------------ invalid use
void invalid(World& w) {
  std::vector<std::uint8_t> buf(256, 0x5A);
  RemoteKey k{};
  check_ok(w.t->register_memory(buf.data() + 64, 128, &k), "register");
  const auto keys = w.exchange_key(k);
  const int peer = (w.rank + 1) % w.size;
  const RemoteKey& pk = keys[static_cast<std::size_t>(peer)];
  std::uint8_t src[512] = {};
  auto expect = [&](const Status& s, Errc code, const std::string& needle, const std::string& what) {
    check(!s, what + " was accepted");
    check(s.code() == code, what + ": wrong code (" + s.message() + ")");
    check(s.message().find(needle) != std::string::npos, what + ": message lacks '" + needle + "': " + s.message());
    check(s.message().find("rank " + std::to_string(w.rank)) != std::string::npos,
          what + ": message lacks the rank: " + s.message());
  };
  expect(w.t->put(w.size, src, 8, pk, 0, nullptr), Errc::unknown_peer, std::to_string(w.size), "put to peer size");
  expect(w.t->put(-1, src, 8, pk, 0, nullptr), Errc::unknown_peer, "-1", "put to peer -1");
  expect(w.t->put(peer, src, 129, pk, 0, nullptr), Errc::out_of_range, "129", "put past the end");
  expect(w.t->put(peer, src, 8, pk, 121, nullptr), Errc::out_of_range, "121", "put at offset 121");
  expect(w.t->put(peer, src, 1, pk, ~std::uint64_t{0}, nullptr), Errc::out_of_range, "offset", "offset overflow");
  expect(w.t->get(peer, src, 200, pk, 0, nullptr), Errc::out_of_range, "200", "get past the end");
  expect(w.t->put(peer, nullptr, 8, pk, 0, nullptr), Errc::invalid_argument, "src", "null src");
  std::uint64_t fetched = 0;
  expect(w.t->fetch_add(peer, pk, 124, 1, &fetched, nullptr), Errc::out_of_range, "124", "fetch_add past the end");
  expect(w.t->fetch_add(peer, pk, 3, 1, &fetched, nullptr), Errc::invalid_argument, "align", "unaligned fetch_add");
  if (w.size > 2) {
    const int other = (w.rank + 2) % w.size;
    expect(w.t->put(other, src, 8, pk, 0, nullptr), Errc::invalid_argument, "rank " + std::to_string(peer),
           "key of another rank");
  }
  RemoteKey bogus{};
  expect(w.t->put(peer, src, 8, bogus, 0, nullptr), Errc::invalid_argument, "remote key", "invalid key");
  expect(w.t->register_memory(nullptr, 10, &bogus), Errc::invalid_argument, "addr", "register null");
  w.boot->barrier();
  // Nothing touched the buffer.
  for (std::size_t i = 0; i < buf.size(); ++i) check(buf[i] == 0x5A, "byte " + std::to_string(i) + " was touched");
  w.boot->barrier();
  w.servers->stop();
  w.t->shutdown();
  expect(w.t->put(peer, src, 8, pk, 0, nullptr), Errc::shutdown, "shut", "put after shutdown");
  expect(w.t->signal(peer, 1, nullptr), Errc::shutdown, "shut", "signal after shutdown");
}

// ------------------------------------------------------------ bench
// Rank 0 <-> rank 1 ping-pong of 8-byte put_with_signal (half round trip),
// and 1 MiB put bandwidth against memcpy. Progress inline and busy.
void bench(World& w) {
  if (w.size < 2) fail("bench needs 2 ranks");
  std::vector<std::uint8_t> buf(8 << 20, 1), src(8 << 20, 2);
  RemoteKey k{};
  check_ok(w.t->register_memory(buf.data(), buf.size(), &k), "register");
  const auto keys = w.exchange_key(k);
  w.boot->barrier();
  if (w.rank > 1) return;
  const int peer = 1 - w.rank;
  const RemoteKey& pk = keys[static_cast<std::size_t>(peer)];
  auto spin_until = [&](const std::function<bool()>& c) {
    const auto end = Clock::now() + std::chrono::seconds(30);
    while (!c()) {
      w.t->progress();
      if (Clock::now() > end) fail("bench wait timed out");
    }
  };
  const int iters = 20000;
  std::uint64_t seen = w.signal_count.load();
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) {
    if (w.rank == 0) {
      check_ok(w.t->put_with_signal(peer, src.data(), 8, pk, 0, 1, nullptr), "ping");
      spin_until([&] { return w.signal_count.load() > seen; });
      ++seen;
    } else {
      spin_until([&] { return w.signal_count.load() > seen; });
      ++seen;
      check_ok(w.t->put_with_signal(peer, src.data(), 8, pk, 0, 1, nullptr), "pong");
    }
  }
  const double lat = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters / 2;
  if (w.rank != 0) {
    // Serve rank 0's bandwidth runs until it says it is done.
    spin_until([&] { return w.signal_count.load() > static_cast<std::uint64_t>(iters); });
    return;
  }
  std::printf("put_with_signal 8 B latency (half round trip): %.3f us\n", lat);
  for (std::size_t n : {std::size_t{4096}, std::size_t{16384}, std::size_t{65536}, std::size_t{262144},
                        std::size_t{1} << 20, std::size_t{4} << 20}) {
    const int reps = static_cast<int>(std::max<std::size_t>(20, (256u << 20) / n));
    std::uint64_t c0 = w.completions.load();
    const auto b0 = Clock::now();
    for (int i = 0; i < reps; ++i) {
      check_ok(w.t->put(peer, src.data(), n, pk, 0, nullptr), "bw put");
      spin_until([&] { return w.completions.load() > c0; });
      ++c0;
    }
    const double put_gbs =
        static_cast<double>(n) * reps / std::chrono::duration<double>(Clock::now() - b0).count() / 1e9;
    const auto m0 = Clock::now();
    for (int i = 0; i < reps; ++i) {
      std::memcpy(buf.data(), src.data(), n);
      __asm__ __volatile__("" ::: "memory");
    }
    const double mc_gbs =
        static_cast<double>(n) * reps / std::chrono::duration<double>(Clock::now() - m0).count() / 1e9;
    std::printf("put %8zu B: %6.2f GB/s   memcpy: %6.2f GB/s   ratio %.2f\n", n, put_gbs, mc_gbs, put_gbs / mc_gbs);
  }
  Op bye;
  check_ok(w.t->signal(peer, 2, &bye), "bye");
  spin_until([&] { return bye.done.load() != 0; });
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: shm_rank integrity|signals|fadd|kill|invalid|mapped|bench [shm|router]\n");
    return 2;
  }
  const std::string scenario = argv[1];
  const std::string mode = argc > 2 ? argv[2] : "shm";
  try {
    World w;
    setup(w, mode, scenario == "bench" ? 0 : 1);
    if (scenario == "integrity") {
      integrity(w);
    } else if (scenario == "signals") {
      signals(w);
    } else if (scenario == "fadd") {
      fadd(w);
    } else if (scenario == "kill") {
      kill_scenario(w);
      w.servers->stop();
      std::fflush(stdout);
      std::_Exit(0);  // do not join a bootstrap whose peer is gone
    } else if (scenario == "mapped") {
      mapped_regions_scenario(w);
    } else if (scenario == "invalid") {
      invalid(w);
    } else if (scenario == "bench") {
      bench(w);
    } else {
      fail("unknown scenario " + scenario);
    }
    if (scenario != "bench" && scenario != "invalid") w.boot->barrier();
    w.servers->stop();
    w.t->shutdown();
    std::printf("OK rank %d %s %s\n", w.rank, scenario.c_str(), w.t->name().c_str());
  } catch (const std::exception& e) {
    fail(std::string("exception: ") + e.what());
  }
  return 0;
}
