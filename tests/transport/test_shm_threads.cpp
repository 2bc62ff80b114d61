// The shm backend with ranks as threads of one process (in-process
// bootstrap): fast, and visible to ThreadSanitizer, unlike the
// multi-process tests. Each rank runs a ProgressServer.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "strata/transport/bootstrap.hpp"
#include "strata/transport/progress.hpp"
#include "strata/transport/topology.hpp"

namespace {

using strata::Errc;
using strata::Status;
using strata::transport::RemoteKey;

struct Rank {
  std::unique_ptr<strata::transport::detail::Backend> t;
  std::unique_ptr<strata::transport::ProgressServer> servers;
  std::mutex mu;
  std::vector<std::vector<std::uint64_t>> got;
  std::atomic<std::uint64_t> signals{0}, completions{0}, errors{0};
};

strata::Hierarchy one_host(int n) {
  std::vector<strata::RankPlace> places(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) places[static_cast<std::size_t>(r)] = {r, 0, 0, 0, r, -1};
  return strata::Hierarchy(places);
}

/// Runs body(rank, boot, state) on n threads, each with its own backend.
template <class Body>
void run_ranks(int n, int progress_threads, Body body) {
  auto boots = strata::make_inprocess_bootstraps(n);
  const strata::Hierarchy hier = one_host(n);
  std::vector<Rank> ranks(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  std::mutex fail_mu;
  std::vector<std::string> failures;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        Rank& me = ranks[static_cast<std::size_t>(r)];
        strata::transport::TransportOptions opts;
        opts.timeout = std::chrono::milliseconds(20000);
        me.t = strata::transport::detail::make_shm_backend(*boots[static_cast<std::size_t>(r)], hier,
                                                           std::vector<bool>(static_cast<std::size_t>(n), true), opts);
        me.got.resize(static_cast<std::size_t>(n));
        me.t->set_completion_handler([&me](void*, const Status& s) { (s ? me.completions : me.errors).fetch_add(1); });
        me.t->set_signal_handler([&me](int src, std::uint64_t v) {
          {
            std::lock_guard<std::mutex> g(me.mu);
            me.got[static_cast<std::size_t>(src)].push_back(v);
          }
          me.signals.fetch_add(1);
        });
        strata::transport::ProgressOptions po;
        po.threads = progress_threads;
        po.spin_polls = 16;
        me.servers = std::make_unique<strata::transport::ProgressServer>(*me.t, po);
        body(r, *boots[static_cast<std::size_t>(r)], me);
        boots[static_cast<std::size_t>(r)]->barrier();
        me.servers->stop();
        me.t->shutdown();
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> g(fail_mu);
        failures.push_back("rank " + std::to_string(r) + ": " + e.what());
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& f : failures) ADD_FAILURE() << f;
}

std::vector<RemoteKey> exchange(strata::Bootstrap& boot, const RemoteKey& k) {
  auto blobs = boot.allgather(&k, sizeof(k));
  std::vector<RemoteKey> keys(blobs.size());
  for (std::size_t i = 0; i < blobs.size(); ++i) std::memcpy(&keys[i], blobs[i].data(), sizeof(RemoteKey));
  return keys;
}

TEST(ShmThreads, SignalsFromAllRanksArriveInOrderWithServers) {
  constexpr int kN = 3, kK = 2000;
  run_ranks(kN, 1, [](int r, strata::Bootstrap&, Rank& me) {
    for (int i = 0; i < kK; ++i) {
      for (int p = 0; p < kN; ++p) {
        const Status s =
            me.t->signal(p, (static_cast<std::uint64_t>(r) << 32) | static_cast<std::uint64_t>(i), nullptr);
        if (!s) throw strata::Error(s);
      }
    }
    const bool ok = me.servers->wait_until(
        [&] { return me.signals.load() == kN * kK && me.completions.load() == kN * kK; }, std::chrono::seconds(60));
    if (!ok) throw strata::Error(Errc::timeout, "signals did not all arrive");
    std::lock_guard<std::mutex> g(me.mu);
    for (int s = 0; s < kN; ++s) {
      const auto& v = me.got[static_cast<std::size_t>(s)];
      if (v.size() != static_cast<std::size_t>(kK)) throw strata::Error(Errc::internal, "lost signals");
      for (int i = 0; i < kK; ++i) {
        if (v[static_cast<std::size_t>(i)] != ((static_cast<std::uint64_t>(s) << 32) | static_cast<std::uint64_t>(i))) {
          throw strata::Error(Errc::internal, "reordered signals");
        }
      }
    }
  });
}

TEST(ShmThreads, PutGetAndFetchAddInInlineMode) {
  constexpr int kN = 2;
  run_ranks(kN, 0, [](int r, strata::Bootstrap& boot, Rank& me) {
    std::vector<std::uint8_t> src(100000), dst(100000, 0), back(100000, 0);
    for (std::size_t i = 0; i < src.size(); ++i)
      src[i] = static_cast<std::uint8_t>(i * 7 + static_cast<std::size_t>(r));
    alignas(8) std::uint64_t word = 0;
    RemoteKey kd{}, ks{}, kw{};
    strata::throw_if_error(me.t->register_memory(dst.data(), dst.size(), &kd));
    strata::throw_if_error(me.t->register_memory(src.data(), src.size(), &ks));
    strata::throw_if_error(me.t->register_memory(&word, sizeof(word), &kw));
    const auto dkeys = exchange(boot, kd), skeys = exchange(boot, ks), wkeys = exchange(boot, kw);
    const int peer = 1 - r;
    std::uint64_t fetched = 0;
    // Segment path (small) and single-copy path (large), both directions.
    strata::throw_if_error(me.t->put(peer, src.data(), 1000, dkeys[static_cast<std::size_t>(peer)], 0, nullptr));
    strata::throw_if_error(
        me.t->put(peer, src.data() + 1000, 99000, dkeys[static_cast<std::size_t>(peer)], 1000, nullptr));
    strata::throw_if_error(me.t->fetch_add(0, wkeys[0], 0, 5, &fetched, nullptr));
    if (!me.servers->wait_until([&] { return me.completions.load() == 3; }, std::chrono::seconds(30))) {
      throw strata::Error(Errc::timeout, "puts did not complete");
    }
    boot.barrier();  // both sides' puts are complete, hence visible
    for (std::size_t i = 0; i < dst.size(); ++i) {
      if (dst[i] != static_cast<std::uint8_t>(i * 7 + static_cast<std::size_t>(peer))) {
        throw strata::Error(Errc::internal, "put data wrong at byte " + std::to_string(i));
      }
    }
    strata::throw_if_error(me.t->get(peer, back.data(), 500, skeys[static_cast<std::size_t>(peer)], 0, nullptr));
    strata::throw_if_error(
        me.t->get(peer, back.data() + 500, 99500, skeys[static_cast<std::size_t>(peer)], 500, nullptr));
    // Keep serving the peer's requests until both sides are done.
    if (!me.servers->wait_until([&] { return me.completions.load() == 5; }, std::chrono::seconds(30))) {
      throw strata::Error(Errc::timeout, "gets did not complete");
    }
    for (std::size_t i = 0; i < back.size(); ++i) {
      if (back[i] != static_cast<std::uint8_t>(i * 7 + static_cast<std::size_t>(peer))) {
        throw strata::Error(Errc::internal, "get data wrong at byte " + std::to_string(i));
      }
    }
    if (fetched != 0 && fetched != 5) throw strata::Error(Errc::internal, "fetched " + std::to_string(fetched));
    // Rank 0 serves fetch_adds until it has seen both; then check the word.
    if (r == 0) {
      me.servers->wait_until([&] { return __atomic_load_n(&word, __ATOMIC_ACQUIRE) == 10; }, std::chrono::seconds(30));
      if (__atomic_load_n(&word, __ATOMIC_ACQUIRE) != 10) throw strata::Error(Errc::internal, "word != 10");
    }
    // Drive progress while the other thread may still need us.
    std::atomic<bool> stop{false};
    std::thread helper([&] {
      while (!stop.load()) me.servers->wait_until([&] { return stop.load(); }, std::chrono::milliseconds(5));
    });
    boot.barrier();
    stop = true;
    helper.join();
  });
}

TEST(ShmThreads, ProgressServerStopsPromptlyWhenIdle) {
  run_ranks(1, 2, [](int, strata::Bootstrap&, Rank& me) {
    // Idle servers end up blocked; stop() must still return quickly.
    std::this_thread::yield();
    const auto t0 = std::chrono::steady_clock::now();
    me.servers->stop();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  });
}

}  // namespace
