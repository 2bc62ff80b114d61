// Unit tests of the transport internals: registration cache, SPSC ring,
// handler slot, options parsing (no processes, no I/O).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "mr_cache.hpp"
#include "shm/ring.hpp"
#include "shm/sync.hpp"
#include "strata/transport/progress.hpp"
#include "strata/transport/transport.hpp"

namespace {

using strata::Errc;
using strata::Status;
using strata::transport::detail::MrCache;
namespace shm = strata::transport::detail::shm;

// ------------------------------------------------------------ registration cache

struct FakeRegistrar {
  int registrations = 0;
  std::map<std::uint64_t, std::pair<std::uintptr_t, std::size_t>> live;  // handle -> range
  std::uint64_t next = 100;
  MrCache::RegisterFn reg() {
    return [this](void* a, std::size_t n, std::uint64_t* h) {
      ++registrations;
      *h = next++;
      live[*h] = {reinterpret_cast<std::uintptr_t>(a), n};
      return Status{};
    };
  }
  MrCache::DeregisterFn dereg() {
    return [this](std::uint64_t h, void*, std::size_t) { live.erase(h); };
  }
};

TEST(MrCache, RegisteringTheSameBufferTwiceIsAHit) {
  FakeRegistrar f;
  MrCache c(8, f.reg(), f.dereg());
  std::vector<char> buf(4096);
  const MrCache::Entry* a = nullptr;
  const MrCache::Entry* b = nullptr;
  ASSERT_TRUE(c.acquire(buf.data(), buf.size(), &a));
  ASSERT_TRUE(c.acquire(buf.data(), buf.size(), &b));
  EXPECT_EQ(a, b);
  EXPECT_EQ(f.registrations, 1);
  EXPECT_EQ(c.stats().hits, 1u);
  EXPECT_EQ(c.stats().misses, 1u);
  c.release(a);
  c.release(b);
}

TEST(MrCache, SubRangeReusesTheContainingRegistration) {
  FakeRegistrar f;
  MrCache c(8, f.reg(), f.dereg());
  std::vector<char> buf(1 << 16);
  const MrCache::Entry* whole = nullptr;
  ASSERT_TRUE(c.acquire(buf.data(), buf.size(), &whole));
  c.release(whole);
  const MrCache::Entry* sub = nullptr;
  ASSERT_TRUE(c.acquire(buf.data() + 1000, 5000, &sub));
  EXPECT_EQ(sub, whole);
  EXPECT_EQ(f.registrations, 1);
  c.release(sub);
  // A range that sticks out of the registration needs a new one.
  const MrCache::Entry* out = nullptr;
  ASSERT_TRUE(c.acquire(buf.data() + buf.size() - 10, 20, &out));
  EXPECT_NE(out, whole);
  EXPECT_EQ(f.registrations, 2);
  c.release(out);
}

TEST(MrCache, EvictsLeastRecentlyUsedAtTheBound) {
  FakeRegistrar f;
  MrCache c(3, f.reg(), f.dereg());
  std::vector<std::vector<char>> bufs(5, std::vector<char>(64));
  std::vector<const MrCache::Entry*> e(5);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.acquire(bufs[i].data(), 64, &e[i]));
    c.release(e[i]);
  }
  // Touch 0 so that 1 becomes the least recently used.
  const MrCache::Entry* t = nullptr;
  ASSERT_TRUE(c.acquire(bufs[0].data(), 64, &t));
  c.release(t);
  ASSERT_TRUE(c.acquire(bufs[3].data(), 64, &e[3]));
  c.release(e[3]);
  EXPECT_EQ(c.stats().entries, 3u);
  EXPECT_EQ(c.stats().evictions, 1u);
  EXPECT_EQ(f.live.size(), 3u);
  // 1 was evicted: acquiring it again registers anew; 0 is still a hit.
  const int before = f.registrations;
  ASSERT_TRUE(c.acquire(bufs[0].data(), 64, &t));
  c.release(t);
  EXPECT_EQ(f.registrations, before);
  ASSERT_TRUE(c.acquire(bufs[1].data(), 64, &t));
  c.release(t);
  EXPECT_EQ(f.registrations, before + 1);
}

TEST(MrCache, PinnedEntriesAreNotEvicted) {
  FakeRegistrar f;
  MrCache c(1, f.reg(), f.dereg());
  std::vector<char> a(64), b(64);
  const MrCache::Entry* ea = nullptr;
  const MrCache::Entry* eb = nullptr;
  ASSERT_TRUE(c.acquire(a.data(), 64, &ea));
  ASSERT_TRUE(c.acquire(b.data(), 64, &eb));  // over the bound, but a is pinned
  EXPECT_EQ(f.live.size(), 2u);
  EXPECT_EQ(ea->base, reinterpret_cast<std::uintptr_t>(a.data()));
  c.release(ea);  // now a can go
  c.release(eb);
  EXPECT_EQ(f.live.size(), 1u);
}

TEST(MrCache, InvalidateDeregistersOverlappingRanges) {
  FakeRegistrar f;
  MrCache c(8, f.reg(), f.dereg());
  std::vector<char> buf(4096);
  const MrCache::Entry* e1 = nullptr;
  const MrCache::Entry* e2 = nullptr;
  ASSERT_TRUE(c.acquire(buf.data(), 1024, &e1));
  c.release(e1);
  ASSERT_TRUE(c.acquire(buf.data() + 2048, 1024, &e2));
  EXPECT_EQ(c.invalidate(buf.data() + 512, 1024), 1u);  // overlaps only the first
  EXPECT_EQ(f.live.size(), 1u);                         // the pinned second one stays
  EXPECT_EQ(c.invalidate(buf.data(), buf.size()), 1u);  // the second, pinned: deferred
  EXPECT_EQ(f.live.size(), 1u);
  c.release(e2);
  EXPECT_EQ(f.live.size(), 0u);
  EXPECT_EQ(c.stats().entries, 0u);
}

TEST(MrCache, HeldEntriesStayUntilInvalidatedAndSurvivePinsAndEviction) {
  FakeRegistrar f;
  MrCache c(1, f.reg(), f.dereg());
  std::vector<char> win(4096), other(64), third(64);
  const MrCache::Entry* h = nullptr;
  ASSERT_TRUE(c.hold(win.data(), win.size(), &h));
  const MrCache::Entry* sub = nullptr;
  ASSERT_TRUE(c.acquire(win.data() + 100, 200, &sub));  // a local descriptor inside the held range
  EXPECT_EQ(sub, h);
  c.release(sub);
  const MrCache::Entry* o = nullptr;
  ASSERT_TRUE(c.acquire(other.data(), other.size(), &o));
  c.release(o);
  ASSERT_TRUE(c.acquire(third.data(), third.size(), &o));  // bound 1: the unpinned ones go, never the held one
  c.release(o);
  EXPECT_EQ(f.registrations, 3);
  EXPECT_EQ(f.live.count(h->handle), 1u);
  EXPECT_EQ(f.live.size(), 1u);
  ASSERT_TRUE(c.acquire(win.data(), 8, &sub));  // pinned while invalidated: deregistered at release
  EXPECT_EQ(c.invalidate(win.data() + 10, 1), 1u);
  EXPECT_EQ(f.live.size(), 1u);
  c.release(sub);
  EXPECT_EQ(f.live.size(), 0u);
  const MrCache::Entry* again = nullptr;  // a new registration, not the dropped one
  const int before = f.registrations;
  ASSERT_TRUE(c.hold(win.data(), win.size(), &again));
  EXPECT_EQ(f.registrations, before + 1);
  EXPECT_EQ(c.invalidate(win.data(), win.size()), 1u);
  EXPECT_EQ(f.live.size(), 0u);
  EXPECT_EQ(c.hold(nullptr, 8, &again).code(), Errc::invalid_argument);
}

TEST(MrCache, BadInputIsAnErrorAndFailedRegistrationIsNotCached) {
  int calls = 0;
  MrCache c(
      4,
      [&calls](void*, std::size_t, std::uint64_t*) {
        ++calls;
        return Status(Errc::transport_error, "provider says no");
      },
      nullptr);
  const MrCache::Entry* e = nullptr;
  EXPECT_EQ(c.acquire(nullptr, 8, &e).code(), Errc::invalid_argument);
  char x = 0;
  EXPECT_EQ(c.acquire(&x, 1, nullptr).code(), Errc::invalid_argument);
  EXPECT_EQ(c.acquire(&x, 1, &e).code(), Errc::transport_error);
  EXPECT_EQ(c.acquire(&x, 1, &e).code(), Errc::transport_error);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(c.stats().entries, 0u);
}

// ------------------------------------------------------------ ring

struct RingFixture {
  explicit RingFixture(std::uint64_t cap) : storage(cap + sizeof(shm::RingCtl) + 64) {
    auto base = reinterpret_cast<std::uintptr_t>(storage.data());
    auto* p = reinterpret_cast<std::byte*>((base + 63) & ~std::uintptr_t{63});
    ctl = new (p) shm::RingCtl{};
    producer = shm::Ring(ctl, p + sizeof(shm::RingCtl), cap);
    consumer = shm::Ring(ctl, p + sizeof(shm::RingCtl), cap);
  }
  std::vector<std::byte> storage;
  shm::RingCtl* ctl;
  shm::Ring producer, consumer;
};

bool push(shm::Ring& r, std::uint64_t value, std::uint32_t payload) {
  shm::RecHdr* h = r.try_reserve(payload);
  if (h == nullptr) return false;
  h->type = shm::RecType::put;
  h->a = value;
  for (std::uint32_t i = 0; i < payload; ++i) h->payload()[i] = static_cast<std::byte>((value + i) & 0xff);
  r.publish();
  return true;
}

TEST(Ring, DeliversRecordsInOrderAcrossManyWraparounds) {
  RingFixture f(4096);
  std::uint64_t sent = 0, received = 0;
  bool corrupt = false;
  // Payload sizes vary so records straddle the end and PAD records appear.
  while (received < 5000) {
    while (sent < 5000 && push(f.producer, sent, static_cast<std::uint32_t>((sent * 37) % 700))) ++sent;
    const shm::RecHdr* h = f.consumer.peek(&corrupt);
    ASSERT_FALSE(corrupt);
    ASSERT_NE(h, nullptr);
    ASSERT_EQ(h->a, received);
    ASSERT_EQ(h->len, (received * 37) % 700);
    for (std::uint32_t i = 0; i < h->len; ++i)
      ASSERT_EQ(h->payload()[i], static_cast<std::byte>((received + i) & 0xff));
    f.consumer.pop(h);
    ++received;
  }
  EXPECT_EQ(f.consumer.peek(&corrupt), nullptr);
  EXPECT_GT(f.producer.tail(), 10 * 4096u);  // it really wrapped
}

TEST(Ring, FullRingRefusesInsteadOfOverwriting) {
  RingFixture f(4096);
  int n = 0;
  while (push(f.producer, static_cast<std::uint64_t>(n), 100)) ++n;
  EXPECT_EQ(n, 4096 / 192);  // record_bytes(100) == 192
  bool corrupt = false;
  const shm::RecHdr* h = f.consumer.peek(&corrupt);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->a, 0u);
  EXPECT_FALSE(push(f.producer, 999, 100));  // not popped yet: still full
  f.consumer.pop(h);
  EXPECT_TRUE(push(f.producer, 999, 100));  // room again
  for (int i = 1; i <= n; ++i) {
    h = f.consumer.peek(&corrupt);
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(h->a, i == n ? 999u : static_cast<std::uint64_t>(i));
    f.consumer.pop(h);
  }
}

TEST(Ring, MalformedHeaderIsReportedNotFollowed) {
  RingFixture f(4096);
  ASSERT_TRUE(push(f.producer, 1, 10));
  auto* h = reinterpret_cast<shm::RecHdr*>(f.storage.data() + (reinterpret_cast<std::byte*>(f.ctl) - f.storage.data()) +
                                           sizeof(shm::RingCtl));
  h->size = 1u << 30;  // points far outside the ring
  bool corrupt = false;
  EXPECT_EQ(f.consumer.peek(&corrupt), nullptr);
  EXPECT_TRUE(corrupt);
}

TEST(Ring, TwoThreadsStreamWithoutLossOrReordering) {
  RingFixture f(8192);
  constexpr std::uint64_t kCount = 200000;
  std::thread prod([&] {
    for (std::uint64_t i = 0; i < kCount;) {
      if (push(f.producer, i, static_cast<std::uint32_t>(i % 97))) {
        ++i;
      } else {
        std::this_thread::yield();
      }
    }
  });
  std::uint64_t next = 0;
  bool corrupt = false;
  while (next < kCount) {
    const shm::RecHdr* h = f.consumer.peek(&corrupt);
    ASSERT_FALSE(corrupt);
    if (h == nullptr) {
      std::this_thread::yield();
      continue;
    }
    ASSERT_EQ(h->a, next);
    ASSERT_EQ(h->len, next % 97);
    f.consumer.pop(h);
    ++next;
  }
  prod.join();
}

// ------------------------------------------------------------ handler slot

TEST(HandlerSlot, ReplacingWhileCallingIsSafe) {
  strata::transport::detail::HandlerSlot<std::function<int()>> slot;
  EXPECT_EQ(slot.get(), nullptr);
  slot.set([] { return 1; });
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop.load()) {
      const auto* f = slot.get();
      ASSERT_NE(f, nullptr);
      const int v = (*f)();
      ASSERT_TRUE(v == 1 || v == 2);
    }
  });
  for (int i = 0; i < 1000; ++i) slot.set([] { return 2; });
  stop = true;
  reader.join();
  EXPECT_EQ((*slot.get())(), 2);
}

// ------------------------------------------------------------ options

class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value, 1);
  }
  ~EnvGuard() {
    if (had_) {
      ::setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

using strata::transport::TransportOptions;

TEST(TransportOptions, ReadsEveryVariable) {
  EnvGuard a("STRATA_INTRA", "fabric"), b("STRATA_PROVIDER", "tcp;ofi_rxm"), c("STRATA_TIMEOUT", "1500"),
      d("STRATA_CMA_THRESHOLD", "32K"), e("STRATA_MR_CACHE", "77");
  const TransportOptions o = TransportOptions::from_environment();
  EXPECT_EQ(o.intra, "fabric");
  EXPECT_EQ(o.provider, "tcp;ofi_rxm");
  EXPECT_EQ(o.timeout.count(), 1500);
  EXPECT_EQ(o.cma_threshold, 32u * 1024);
  EXPECT_EQ(o.mr_cache_entries, 77u);
}

void expect_rejected(const char* var, const char* value) {
  EnvGuard g(var, value);
  try {
    (void)TransportOptions::from_environment();
    ADD_FAILURE() << var << "=" << value << " was accepted";
  } catch (const strata::Error& e) {
    EXPECT_EQ(e.errc(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find(var), std::string::npos) << e.what();
  }
}

TEST(TransportOptions, InvalidValuesThrowNamingTheVariable) {
  expect_rejected("STRATA_INTRA", "tcp");
  expect_rejected("STRATA_TIMEOUT", "0");
  expect_rejected("STRATA_TIMEOUT", "10s");
  expect_rejected("STRATA_TIMEOUT", "-5");
  expect_rejected("STRATA_CMA_THRESHOLD", "lots");
  expect_rejected("STRATA_CMA_THRESHOLD", "99999999999999999999");
  expect_rejected("STRATA_MR_CACHE", "0");
}

TEST(ProgressOptions, ParsesThreadsAndCpuLists) {
  EnvGuard a("STRATA_PROGRESS_THREADS", "3"), b("STRATA_PROGRESS_CPUS", "0,2-3");
  const auto o = strata::transport::ProgressOptions::from_environment();
  EXPECT_EQ(o.threads, 3);
  EXPECT_EQ(o.cpus, (std::vector<int>{0, 2, 3}));
  EnvGuard c("STRATA_PROGRESS_THREADS", "-1");
  EXPECT_THROW((void)strata::transport::ProgressOptions::from_environment(), strata::Error);
}

}  // namespace
