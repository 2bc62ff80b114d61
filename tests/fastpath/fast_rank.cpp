// fast_rank: one rank of the small-call tests (run under strata-run; named
// after the retired small-message fast path, whose calls now run as plans).
//   fast_rank [--death | --compile-error ALGO]
// Default: every collective of the small-call plans (barrier, broadcast, reduce,
// allreduce, gather, scatter, allgather, alltoall, reduce_scatter_block) with
// counts 0, 1, 7 and around 4 KiB (mapped_max_bytes: the last one runs a
// window plan), in place, every root, sum / max / a non-commutative user op,
// checked against a sequential reference; then a burst of 40 loose
// allreduces (beyond the credits) with a plan-based 256 KiB allreduce every 5th,
// waited for at the end; then 20 barriers whose futures are dropped followed by
// a waited allreduce. Prints "fast_rank: OK".
// --compile-error: see compile_error() below.
// --death: after a working round the last rank exits (status 3); every other
// rank's pending small allreduce must fail with peer_dead, and so must the next
// call. Prints "SURVIVOR rank R".
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../common/rank_check.hpp"
#include "strata/strata.hpp"

namespace {

using rank_check::failures;
using rank_check::me;

std::int32_t val(int r, std::size_t i, int salt) {
  return static_cast<std::int32_t>(r * 131 + static_cast<int>(i % 97) * 7 + salt);
}

// 2x2 integer matrices (mod 2^32): a non-commutative operator.
struct M2 {
  std::uint32_t a, b, c, d;
};
M2 mul(const M2& x, const M2& y) {
  return {x.a * y.a + x.b * y.c, x.a * y.b + x.b * y.d, x.c * y.a + x.d * y.c, x.c * y.b + x.d * y.d};
}
M2 mval(int r, std::size_t i) {
  const auto u = static_cast<std::uint32_t>(r + 2), v = static_cast<std::uint32_t>(i + 1);
  return {u, v, 1, u * v + 1};
}
strata::UserOp matmul() {
  strata::UserOp op;
  op.fn = [](const void* a, const void* b, void* dst, std::size_t count) {
    const auto* x = static_cast<const M2*>(a);
    const auto* y = static_cast<const M2*>(b);
    auto* z = static_cast<M2*>(dst);
    for (std::size_t i = 0; i < count; ++i) z[i] = mul(x[i], y[i]);
  };
  op.elem_size = sizeof(M2);
  op.commutative = false;
  op.name = "matmul";
  return op;
}

void check_all(strata::Communicator& w, std::size_t limit) {
  const int mine = w.rank();  // rank in this communicator (the world or a split)
  const int n = w.size();
  const auto un = static_cast<std::size_t>(n);
  // int32 counts: empty, tiny, odd, the largest that fits, one more (plan).
  const std::size_t fit = limit / sizeof(std::int32_t);
  for (std::size_t cnt : {std::size_t{0}, std::size_t{1}, std::size_t{7}, fit, fit + 1}) {
    const int salt = static_cast<int>(cnt % 13);
    // allreduce sum, not in place and in place
    for (bool inplace : {false, true}) {
      std::vector<std::int32_t> s(cnt), r(cnt, -1);
      for (std::size_t i = 0; i < cnt; ++i) s[i] = val(mine, i, salt);
      if (inplace) r = s;
      w.allreduce(inplace ? strata::in_place : s.data(), r.data(), cnt, strata::Datatype::int32, strata::Op::sum).get();
      for (std::size_t i = 0; i < cnt; ++i) {
        std::int32_t want = 0;
        for (int q = 0; q < n; ++q) want += val(q, i, salt);
        if (r[i] != want) {
          EXPECT(r[i] == want, "allreduce count %zu inplace %d [%zu] = %d, want %d", cnt, inplace, i, r[i], want);
          break;
        }
      }
    }
    // allreduce max float64
    {
      const std::size_t c8 = cnt / 2;
      std::vector<double> s(c8), r(c8, -1);
      for (std::size_t i = 0; i < c8; ++i) s[i] = static_cast<double>(val(mine, i, salt) % 11) + 0.5 * mine;
      w.allreduce(s.data(), r.data(), c8, strata::Datatype::float64, strata::Op::max).get();
      for (std::size_t i = 0; i < c8; ++i) {
        double want = -1e300;
        for (int q = 0; q < n; ++q) want = std::max(want, static_cast<double>(val(q, i, salt) % 11) + 0.5 * q);
        EXPECT(r[i] == want, "allreduce max count %zu [%zu]", c8, i);
      }
    }
    // allreduce with a non-commutative user op (rank order)
    {
      const std::size_t cm = cnt / 4;
      std::vector<M2> s(cm), r(cm);
      for (std::size_t i = 0; i < cm; ++i) s[i] = mval(mine, i);
      w.allreduce(s.data(), r.data(), cm, matmul()).get();
      for (std::size_t i = 0; i < cm; ++i) {
        M2 want = mval(0, i);
        for (int q = 1; q < n; ++q) want = mul(want, mval(q, i));
        EXPECT(std::memcmp(&r[i], &want, sizeof want) == 0, "allreduce matmul count %zu [%zu]", cm, i);
      }
    }
    for (int root = 0; root < n; ++root) {
      // broadcast
      {
        std::vector<std::int32_t> b(cnt);
        for (std::size_t i = 0; i < cnt; ++i) b[i] = mine == root ? val(root, i, salt) : -7;
        w.broadcast(b.data(), cnt, strata::Datatype::int32, root).get();
        for (std::size_t i = 0; i < cnt; ++i)
          if (b[i] != val(root, i, salt)) {
            EXPECT(b[i] == val(root, i, salt), "broadcast root %d count %zu [%zu]", root, cnt, i);
            break;
          }
      }
      // reduce (in place at the root on odd counts)
      {
        const bool inplace = mine == root && cnt % 2 == 1;
        std::vector<std::int32_t> s(cnt), r(cnt, -1);
        for (std::size_t i = 0; i < cnt; ++i) s[i] = val(mine, i, salt);
        if (inplace) r = s;
        w.reduce(inplace ? strata::in_place : s.data(), r.data(), cnt, strata::Datatype::int32, strata::Op::sum, root)
            .get();
        if (mine == root)
          for (std::size_t i = 0; i < cnt; ++i) {
            std::int32_t want = 0;
            for (int q = 0; q < n; ++q) want += val(q, i, salt);
            if (r[i] != want) {
              EXPECT(r[i] == want, "reduce root %d count %zu [%zu]", root, cnt, i);
              break;
            }
          }
      }
      // gather / scatter with blocks of cnt / n (in place at the root on odd counts)
      const std::size_t blk = cnt / un;
      {
        const bool inplace = mine == root && cnt % 2 == 1;
        std::vector<std::int32_t> s(blk), r(blk * un, -1);
        for (std::size_t i = 0; i < blk; ++i) s[i] = val(mine, i, salt);
        if (inplace)
          std::copy(s.begin(), s.end(), r.begin() + static_cast<std::ptrdiff_t>(blk * static_cast<std::size_t>(mine)));
        w.gather(inplace ? strata::in_place : s.data(), blk, r.data(), strata::Datatype::int32, root).get();
        if (mine == root)
          for (int q = 0; q < n; ++q)
            for (std::size_t i = 0; i < blk; ++i)
              EXPECT(r[static_cast<std::size_t>(q) * blk + i] == val(q, i, salt), "gather root %d blk %zu", root, blk);
      }
      {
        const bool inplace = mine == root && cnt % 2 == 1;
        std::vector<std::int32_t> s(blk * un), r(blk, -1);
        for (std::size_t i = 0; i < blk * un; ++i) s[i] = val(root, i, salt);
        w.scatter(s.data(), inplace ? const_cast<void*>(strata::in_place) : r.data(), blk, strata::Datatype::int32,
                  root)
            .get();
        if (!inplace)
          for (std::size_t i = 0; i < blk; ++i)
            EXPECT(r[i] == val(root, static_cast<std::size_t>(mine) * blk + i, salt), "scatter root %d blk %zu", root,
                   blk);
      }
    }
    // allgather / alltoall / reduce_scatter_block with blocks of cnt / n
    const std::size_t blk = cnt / un;
    for (bool inplace : {false, true}) {
      std::vector<std::int32_t> s(blk), r(blk * un, -1);
      for (std::size_t i = 0; i < blk; ++i) s[i] = val(mine, i, salt);
      if (inplace)
        std::copy(s.begin(), s.end(), r.begin() + static_cast<std::ptrdiff_t>(blk * static_cast<std::size_t>(mine)));
      w.allgather(inplace ? strata::in_place : s.data(), blk, r.data(), strata::Datatype::int32).get();
      for (int q = 0; q < n; ++q)
        for (std::size_t i = 0; i < blk; ++i)
          EXPECT(r[static_cast<std::size_t>(q) * blk + i] == val(q, i, salt), "allgather inplace %d blk %zu", inplace,
                 blk);
    }
    for (bool inplace : {false, true}) {
      std::vector<std::int32_t> s(blk * un), r(blk * un, -1);
      for (std::size_t i = 0; i < blk * un; ++i) s[i] = val(mine, i, salt);
      if (inplace) r = s;
      w.alltoall(inplace ? strata::in_place : s.data(), r.data(), blk, strata::Datatype::int32).get();
      for (int q = 0; q < n; ++q)
        for (std::size_t i = 0; i < blk; ++i)
          EXPECT(r[static_cast<std::size_t>(q) * blk + i] == val(q, static_cast<std::size_t>(mine) * blk + i, salt),
                 "alltoall inplace %d blk %zu from %d", inplace, blk, q);
    }
    for (bool inplace : {false, true}) {
      std::vector<std::int32_t> s(blk * un), r(inplace ? blk * un : blk, -1);
      for (std::size_t i = 0; i < blk * un; ++i) s[i] = val(mine, i, salt);
      if (inplace) r = s;
      w.reduce_scatter_block(inplace ? strata::in_place : s.data(), r.data(), blk, strata::Datatype::int32,
                             strata::Op::sum)
          .get();
      for (std::size_t i = 0; i < blk; ++i) {
        std::int32_t want = 0;
        for (int q = 0; q < n; ++q) want += val(q, static_cast<std::size_t>(mine) * blk + i, salt);
        EXPECT(r[i] == want, "reduce_scatter_block inplace %d blk %zu [%zu]", inplace, blk, i);
      }
    }
    w.barrier().get();
  }
}

// 40 loose allreduces in flight (5x the ring), a 256 KiB plan-based one every 5th.
void check_burst(strata::Communicator& w) {
  const int n = w.size();
  constexpr int kCalls = 40;
  std::vector<std::vector<std::int32_t>> s(kCalls), r(kCalls);
  std::vector<strata::Future<void>> fs;
  for (int c = 0; c < kCalls; ++c) {
    const std::size_t cnt = c % 5 == 4 ? 65536 : 8 + static_cast<std::size_t>(c);
    s[static_cast<std::size_t>(c)].resize(cnt);
    r[static_cast<std::size_t>(c)].assign(cnt, -1);
    for (std::size_t i = 0; i < cnt; ++i) s[static_cast<std::size_t>(c)][i] = val(me, i, c);
    fs.push_back(w.allreduce(s[static_cast<std::size_t>(c)].data(), r[static_cast<std::size_t>(c)].data(), cnt,
                             strata::Datatype::int32, strata::Op::sum));
  }
  for (auto& f : fs) f.get();
  for (int c = 0; c < kCalls; ++c)
    for (std::size_t i = 0; i < r[static_cast<std::size_t>(c)].size(); ++i) {
      std::int32_t want = 0;
      for (int q = 0; q < n; ++q) want += val(q, i, c);
      if (r[static_cast<std::size_t>(c)][i] != want) {
        EXPECT(false, "burst call %d [%zu] = %d, want %d", c, i, r[static_cast<std::size_t>(c)][i], want);
        break;
      }
    }
  // Dropped futures: nobody waits for these barriers; the next call still completes.
  for (int c = 0; c < 20; ++c) (void)w.barrier();
  std::int32_t one = 1, sum = 0;
  w.allreduce(&one, &sum, 1, strata::Datatype::int32, strata::Op::sum).get();
  EXPECT(sum == n, "allreduce after dropped barriers = %d", sum);
}

int death(strata::Communicator& w) {
  const int n = w.size();
  std::int32_t one = 1, sum = 0;
  w.allreduce(&one, &sum, 1, strata::Datatype::int32, strata::Op::sum).get();  // a working round
  if (sum != n) {
    std::printf("rank %d: FAILED: first allreduce %d\n", me, sum);
    return 1;
  }
  if (me == n - 1) {
    rank_check::death_gate_wait(n - 1);  // after every survivor's working round
    std::fflush(stdout);
    _exit(3);
  }
  rank_check::death_gate_pass();
  const auto t0 = std::chrono::steady_clock::now();
  std::string msg;
  if (!rank_check::fails_peer_dead([&] { w.allreduce(&one, &sum, 1, strata::Datatype::int32, strata::Op::sum).get(); },
                                   &msg))
    return 1;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bool later_fails = false;
  try {
    w.barrier().get();
  } catch (const strata::Error& e) {
    later_fails = e.errc() == strata::Errc::peer_dead;
  }
  if (!later_fails) {
    std::printf("rank %d: FAILED: a later call did not fail with peer_dead\n", me);
    return 1;
  }
  std::printf("SURVIVOR rank %d: allreduce failed after %.2f s: %s\n", me, secs, msg.c_str());
  std::fflush(stdout);
  _exit(0);  // the engine's shutdown barrier cannot succeed with a dead member
}

// --compile-error ALGO: a call that takes its sequence number and window slot
// but cannot be compiled (allgather with algorithm ALGO: "mapped" on blocks
// larger than a mapped slot on one host, "single-copy" across hosts) throws
// unsupported, naming the collective and the rank, on every member; the
// automatic calls after it, which reuse its window slot, complete with
// correct data (regression: the slot's next user waited forever for the
// failed call's end-of-instance flag, on one host and across hosts). Every
// wait is bounded (wait_for).
int compile_error(strata::Communicator& w, const std::string& algo) {
  const int n = w.size();
  const int mine = w.rank();
  strata::CollOptions bad;
  bad.algorithm = algo;
  const strata::CollOptions automatic;
  auto bounded = [&](strata::Future<void> f, const char* what, int k) {
    if (!f.wait_for(std::chrono::seconds(20))) {
      std::printf("rank %d: FAILED: %s #%d did not complete in 20 s\n", mine, what, k);
      std::fflush(stdout);
      _exit(4);
    }
    f.get();
  };
  auto round = [&](int k, int salt) {
    const std::size_t cnt = 64;  // 256 B per block: a mapped plan on one host
    std::vector<std::int32_t> s(cnt), r(cnt * static_cast<std::size_t>(n), -1);
    for (std::size_t i = 0; i < cnt; ++i) s[i] = val(mine, i, salt + k);
    bounded(w.allgather(s.data(), cnt, r.data(), strata::Datatype::int32, automatic), "allgather", k);
    for (int q = 0; q < n; ++q)
      for (std::size_t i = 0; i < cnt; ++i)
        if (r[static_cast<std::size_t>(q) * cnt + i] != val(q, i, salt + k)) {
          EXPECT(false, "allgather #%d block %d [%zu]", k, q, i);
          return;
        }
  };
  for (int k = 0; k < 6; ++k) round(k, 1);
  bool threw = false;
  {
    const std::size_t big = std::size_t{1} << 20;  // 4 MiB per block: no mapped slot holds it
    std::vector<std::int32_t> s(big, mine), r(big * static_cast<std::size_t>(n));
    try {
      w.allgather(s.data(), big, r.data(), strata::Datatype::int32, bad).get();
    } catch (const strata::Error& e) {
      threw = e.errc() == strata::Errc::unsupported &&
              std::string(e.what()).find("allgather on rank " + std::to_string(mine)) != std::string::npos;
      if (!threw) std::printf("rank %d: FAILED: unexpected error: %s\n", mine, e.what());
    }
  }
  EXPECT(threw, "the allgather with algorithm '%s' did not throw unsupported naming the rank", algo.c_str());
  // More calls than window slots (credits, 4 by default): one of them reuses the failed call's slot.
  for (int k = 0; k < 12; ++k) round(k, 2);
  for (int k = 0; k < 3; ++k) bounded(w.barrier(), "barrier", k);
  if (failures != 0) return 1;
  std::printf("fast_rank: compile error survived (rank %d)\n", mine);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool die = false;
  std::string bad_compile;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--death") die = true;
    if (std::string(argv[i]) == "--compile-error" && i + 1 < argc) bad_compile = argv[++i];
  }
  try {
    strata::Engine engine;
    me = engine.rank();
    rank_check::me = me;
    strata::Communicator& w = engine.world();
    if (die) return death(w);
    if (!bad_compile.empty()) return compile_error(w, bad_compile);
    const std::size_t limit = 4096;  // the mapped plans' default limit (mapped_max_bytes)
    check_all(w, limit);
    check_burst(w);
    // A split communicator (every other rank) has its own window and flags.
    strata::Communicator half = w.split(me % 2, me);
    check_all(half, limit);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: FAILED: exception: %s\n", me, e.what());
    return 1;
  }
  if (failures != 0) return 1;
  std::printf("fast_rank: OK (rank %d)\n", me);
  return 0;
}
