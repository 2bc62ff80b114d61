// coll_rank: one rank of the collectives integration tests (run under strata-run).
//   coll_rank [--quick] [--algo tree|single] [--tree SPEC] [--fragment SPEC] [--direction SPEC] [--strict]
// --direction (push | pull | host:pull,numa:push,core:pull | single:pull)
// applies to the broadcasts; reduce / allreduce push only (checked to refuse pull).
// Checks broadcast, reduce, allreduce (built-in and user ops, including a
// non-commutative 2x2 matrix product), barrier, split and dup against a
// sequential reference computed on every rank. Prints "coll_rank: OK" on success.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/rank_check.hpp"
#include "strata/strata.hpp"

namespace {

using rank_check::failures;

using rank_check::me;

std::int32_t val(int rank, std::size_t i) {
  return static_cast<std::int32_t>((rank + 1) * 7 + static_cast<int>(i % 1013));
}

// 2x2 integer matrices (mod 2^32 arithmetic): non-commutative.
struct M2 {
  std::uint32_t a, b, c, d;
};
M2 mul(const M2& x, const M2& y) {
  return {x.a * y.a + x.b * y.c, x.a * y.b + x.b * y.d, x.c * y.a + x.d * y.c, x.c * y.b + x.d * y.d};
}
bool same(const std::vector<M2>& x, const std::vector<M2>& y) {
  return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(M2)) == 0);
}
M2 mat(int rank, std::size_t i) {
  const auto r = static_cast<std::uint32_t>(rank + 2);
  const auto k = static_cast<std::uint32_t>(i % 5);
  return {r, 1u + k, r * 3u + 1u, 1u};
}

}  // namespace

int main(int argc, char** argv) {
  strata::CollOptions opts;
  strata::CollOptions bopts;  // broadcasts: opts plus --direction
  bool quick = false;
  bool check_mismatch = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick")
      quick = true;
    else if (a == "--algo" && i + 1 < argc)
      opts.algorithm = argv[++i];
    else if (a == "--tree" && i + 1 < argc)
      opts.tree = argv[++i];
    else if (a == "--fragment" && i + 1 < argc)
      opts.fragment = argv[++i];
    else if (a == "--direction" && i + 1 < argc)
      bopts.direction = argv[++i];
    else if (a == "--strict")
      opts.sync = strata::Sync::strict();
    else if (a == "--check-mismatch")
      check_mismatch = true;
    else {
      std::fprintf(stderr, "coll_rank: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  {
    const std::string dir = bopts.direction;
    bopts = opts;
    bopts.direction = dir;
  }
  try {
    strata::Engine engine;
    strata::Communicator& world = engine.world();
    me = world.rank();
    const int n = world.size();
    std::vector<std::size_t> sizes = {0, 1, 7, 1000, (1u << 16) + 3};
    if (!quick) sizes.push_back((1u << 20) + 13);

    for (int round = 0; round < 2; ++round) world.barrier(opts).get();

    for (std::size_t count : sizes) {
      // broadcast from every root
      for (int root = 0; root < n; ++root) {
        std::vector<std::int32_t> buf(count);
        for (std::size_t i = 0; i < count; ++i) buf[i] = me == root ? val(root, i) : -1;
        world.broadcast(buf.data(), count, strata::Datatype::int32, root, bopts).get();
        bool ok = true;
        for (std::size_t i = 0; i < count && ok; ++i) ok = buf[i] == val(root, i);
        EXPECT(ok, "broadcast count %zu root %d", count, root);
      }
      // reduce (sum int32) to every root
      for (int root = 0; root < n; ++root) {
        std::vector<std::int32_t> send(count), recv(count, -1);
        for (std::size_t i = 0; i < count; ++i) send[i] = val(me, i);
        world.reduce(send.data(), recv.data(), count, strata::Datatype::int32, strata::Op::sum, root, opts).get();
        if (me == root) {
          bool ok = true;
          for (std::size_t i = 0; i < count && ok; ++i) {
            std::int32_t want = 0;
            for (int r = 0; r < n; ++r) want += val(r, i);
            ok = recv[i] == want;
          }
          EXPECT(ok, "reduce sum count %zu root %d", count, root);
        }
      }
      // allreduce: sum f64, max int64 in place
      {
        std::vector<double> s(count), r(count, -1);
        for (std::size_t i = 0; i < count; ++i) s[i] = val(me, i) * 0.5;
        world.allreduce(s.data(), r.data(), count, strata::Datatype::float64, strata::Op::sum, opts).get();
        bool ok = true;
        for (std::size_t i = 0; i < count && ok; ++i) {
          double want = 0;
          for (int k = 0; k < n; ++k) want += val(k, i) * 0.5;
          ok = r[i] == want;
        }
        EXPECT(ok, "allreduce sum f64 count %zu", count);
        std::vector<std::int64_t> x(count);
        for (std::size_t i = 0; i < count; ++i) x[i] = val(me, i) * (me % 2 ? 1 : -1);
        world.allreduce(strata::in_place, x.data(), count, strata::Datatype::int64, strata::Op::max, opts).get();
        ok = true;
        for (std::size_t i = 0; i < count && ok; ++i) {
          std::int64_t want = INT64_MIN;
          for (int k = 0; k < n; ++k) want = std::max<std::int64_t>(want, val(k, i) * (k % 2 ? 1 : -1));
          ok = x[i] == want;
        }
        EXPECT(ok, "allreduce max int64 in place count %zu", count);
      }
      // non-commutative user op: rank-ordered matrix product, reduce to every root and allreduce
      if (count <= 4096) {
        strata::UserOp op;
        op.elem_size = sizeof(M2);
        op.commutative = false;
        op.name = "matmul";
        op.fn = [](const void* a, const void* b, void* dst, std::size_t cnt) {
          const M2* x = static_cast<const M2*>(a);
          const M2* y = static_cast<const M2*>(b);
          M2* z = static_cast<M2*>(dst);
          for (std::size_t i = 0; i < cnt; ++i) z[i] = mul(x[i], y[i]);
        };
        std::vector<M2> s(count), want(count);
        for (std::size_t i = 0; i < count; ++i) {
          s[i] = mat(me, i);
          want[i] = mat(0, i);
          for (int k = 1; k < n; ++k) want[i] = mul(want[i], mat(k, i));
        }
        for (int root = 0; root < n; ++root) {
          std::vector<M2> r(count, M2{0, 0, 0, 0});
          world.reduce(s.data(), r.data(), count, op, root, opts).get();
          if (me == root) EXPECT(same(r, want), "matmul reduce count %zu root %d", count, root);
        }
        std::vector<M2> r(count, M2{0, 0, 0, 0});
        world.allreduce(s.data(), r.data(), count, op, opts).get();
        EXPECT(same(r, want), "matmul allreduce count %zu", count);
      }
    }

    // Persistent plans: compiled, registered and exchanged once, started many times.
    for (std::size_t count : {std::size_t{0}, std::size_t{5}, std::size_t{70000}}) {
      std::vector<std::int32_t> bbuf(count);
      std::vector<double> x(count), y(count);
      const int root = n - 1;
      strata::Plan pb = world.plan_broadcast(bbuf.data(), count, strata::Datatype::int32, root, bopts);
      strata::Plan pa =
          world.plan_allreduce(x.data(), y.data(), count, strata::Datatype::float64, strata::Op::sum, opts);
      strata::Plan pr =
          world.plan_reduce(x.data(), y.data(), count, strata::Datatype::float64, strata::Op::max, 0, opts);
      strata::Plan pz = world.plan_barrier(opts);
      for (int it = 0; it < 3; ++it) {
        for (std::size_t i = 0; i < count; ++i) bbuf[i] = me == root ? val(root, i) + it : -1;
        pb.start().get();
        bool ok = true;
        for (std::size_t i = 0; i < count && ok; ++i) ok = bbuf[i] == val(root, i) + it;
        EXPECT(ok, "plan_broadcast count %zu iteration %d", count, it);
        for (std::size_t i = 0; i < count; ++i) x[i] = val(me, i) + it;
        std::fill(y.begin(), y.end(), -1.0);
        pa.start().get();
        ok = true;
        for (std::size_t i = 0; i < count && ok; ++i) {
          double want = 0;
          for (int k = 0; k < n; ++k) want += val(k, i) + it;
          ok = y[i] == want;
        }
        EXPECT(ok, "plan_allreduce count %zu iteration %d", count, it);
        pr.start().get();
        if (me == 0) {
          ok = true;
          for (std::size_t i = 0; i < count && ok; ++i) {
            double want = -1e300;
            for (int k = 0; k < n; ++k) want = std::max<double>(want, val(k, i) + it);
            ok = y[i] == want;
          }
          EXPECT(ok, "plan_reduce count %zu iteration %d", count, it);
        }
        pz.start().get();
      }
    }

    // Application work in the graph: on_block runs per source block of an
    // alltoall as soon as it landed; it sees the block's final contents.
    for (std::size_t count : {std::size_t{1}, std::size_t{3000}}) {
      std::vector<std::int32_t> s(count * static_cast<std::size_t>(n)), r(s.size(), -1);
      for (std::size_t i = 0; i < s.size(); ++i) s[i] = val(me, i);
      std::vector<std::atomic<int>> seen(static_cast<std::size_t>(n));
      std::atomic<int> wrong{0};
      strata::CollOptions o = opts;
      o.tree.clear();  // alltoall runs a step schedule: a tree shape is an error there
      o.on_block = [&](int src, void* block, std::size_t bytes) {
        seen[static_cast<std::size_t>(src)].fetch_add(1);
        const auto* b = static_cast<const std::int32_t*>(block);
        if (bytes != count * sizeof(std::int32_t) || b != r.data() + static_cast<std::size_t>(src) * count)
          wrong.fetch_add(1);
        for (std::size_t i = 0; i < count; ++i)
          if (b[i] != val(src, static_cast<std::size_t>(me) * count + i)) wrong.fetch_add(1);
      };
      world.alltoall(s.data(), r.data(), count, strata::Datatype::int32, o).get();
      bool once = true;
      for (auto& k : seen) once = once && k.load() == 1;
      EXPECT(once && wrong.load() == 0, "alltoall on_block count %zu: wrong %d", count, wrong.load());
    }

    // Application work in any collective's graph (CollOptions::compute): it
    // runs exactly once per call, the call ends only after it, the results are
    // those of the plain call, and its exception fails the call with its text.
    {
      const std::size_t count = 1000;
      std::vector<std::int32_t> s(count * static_cast<std::size_t>(n)), r(s.size(), -1), a(count), b(count, -1);
      for (std::size_t i = 0; i < s.size(); ++i) s[i] = val(me, i);
      for (std::size_t i = 0; i < count; ++i) a[i] = val(me, i);
      std::atomic<int> runs{0};
      std::atomic<bool> finished{false};
      strata::CollOptions o = opts;
      o.tree.clear();
      o.compute = [&] {
        finished.store(false);
        runs.fetch_add(1);
        volatile double x = 0;  // some work, so that a call ending early would be seen
        for (int i = 0; i < 200000; ++i) x = x + 1.0 / (i + 1);
        finished.store(true);
      };
      world.alltoall(s.data(), r.data(), count, strata::Datatype::int32, o).get();
      EXPECT(runs.load() == 1 && finished.load(), "alltoall compute ran %d time(s), finished %d", runs.load(),
             static_cast<int>(finished.load()));
      bool ok = true;
      for (int src = 0; src < n && ok; ++src)
        for (std::size_t i = 0; i < count && ok; ++i)
          ok = r[static_cast<std::size_t>(src) * count + i] == val(src, static_cast<std::size_t>(me) * count + i);
      EXPECT(ok, "alltoall with compute: wrong result");
      world.allreduce(a.data(), b.data(), count, strata::Datatype::int32, strata::Op::sum, o).get();
      EXPECT(runs.load() == 2 && finished.load(), "allreduce compute ran %d time(s) in all", runs.load());
      ok = true;
      for (std::size_t i = 0; i < count && ok; ++i) {
        std::int32_t want = 0;
        for (int k = 0; k < n; ++k) want += val(k, i);
        ok = b[i] == want;
      }
      EXPECT(ok, "allreduce with compute: wrong result");
      world.barrier(o).get();
      EXPECT(runs.load() == 3 && finished.load(), "barrier compute ran %d time(s) in all", runs.load());
      strata::CollOptions bad = o;
      // Rank 0's node throws: its call fails with the text; another member's
      // call fails naming rank 0 unless it had completed before the notice
      // came (the failure protocol, docs/reliability.md).
      bad.compute = [] {
        if (me == 0) throw std::runtime_error("smoother diverged");
      };
      bool ok_error = me != 0;
      try {
        world.barrier(bad).get();
      } catch (const strata::Error& e) {
        const std::string w = e.what();
        ok_error = w.find(me == 0 ? "smoother diverged" : "failed on rank 0") != std::string::npos;
        if (!ok_error) std::fprintf(stderr, "rank %d: compute error: %s\n", me, e.what());
      }
      EXPECT(ok_error, "a throwing compute node did not fail the call with its message");
      world.barrier().get();  // the communicator still works
    }

    // Many in flight at once on one communicator (loose pipelining beyond the credits).
    {
      const int k = 32;
      std::vector<std::vector<std::int32_t>> in(k), out(k);
      std::vector<strata::Future<void>> fs;
      for (int j = 0; j < k; ++j) {
        in[static_cast<std::size_t>(j)].assign(257, me + j);
        out[static_cast<std::size_t>(j)].assign(257, 0);
        fs.push_back(world.allreduce(in[static_cast<std::size_t>(j)].data(), out[static_cast<std::size_t>(j)].data(),
                                     257, strata::Datatype::int32, strata::Op::sum, opts));
      }
      strata::when_all(std::move(fs)).get();
      for (int j = 0; j < k; ++j) {
        const std::int32_t want = n * (n - 1) / 2 + n * j;
        EXPECT(out[static_cast<std::size_t>(j)][256] == want, "pipelined allreduce %d: got %d want %d", j,
               out[static_cast<std::size_t>(j)][256], want);
      }
    }

    // split into even / odd, reversed order by key; then dup
    {
      strata::Communicator sub = world.split(me % 2, -me);
      EXPECT(sub.valid(), "split valid");
      int members = 0;
      for (int r = 0; r < n; ++r) members += (r % 2 == me % 2);
      EXPECT(sub.size() == members, "split size %d want %d", sub.size(), members);
      std::int64_t x = me, y = 0;
      sub.allreduce(&x, &y, 1, strata::Datatype::int64, strata::Op::sum, opts).get();
      std::int64_t want = 0;
      for (int r = 0; r < n; ++r)
        if (r % 2 == me % 2) want += r;
      EXPECT(y == want, "split allreduce got %lld want %lld", static_cast<long long>(y), static_cast<long long>(want));
      // highest world rank has key -max -> sub rank 0: broadcast from sub root 0
      std::int32_t v = sub.rank() == 0 ? 1000 + me : -1;
      sub.broadcast(&v, 1, strata::Datatype::int32, 0, bopts).get();
      int top = -1;
      for (int r = 0; r < n; ++r)
        if (r % 2 == me % 2) top = r;
      EXPECT(v == 1000 + top, "split broadcast got %d want %d", v, 1000 + top);
      strata::Communicator d = world.dup();
      EXPECT(d.size() == n && d.rank() == me && d.id() != world.id(), "dup");
      std::int32_t one = 1, total = 0;
      d.allreduce(&one, &total, 1, strata::Datatype::int32, strata::Op::sum, opts).get();
      EXPECT(total == n, "dup allreduce %d", total);
      strata::Communicator none = world.split(me == 0 ? -1 : 0, 0);
      EXPECT((me == 0) != none.valid(), "negative color");
    }

    // Bad input: clear errors, nothing moves.
    {
      bool threw = false;
      try {
        (void)world.broadcast(nullptr, 4, strata::Datatype::int32, 0);
      } catch (const strata::Error& e) {
        threw = e.errc() == strata::Errc::invalid_argument && std::string(e.what()).find("'buf'") != std::string::npos;
      }
      EXPECT(threw, "null buffer error");
      threw = false;
      std::int32_t z = 0;
      try {
        (void)world.broadcast(&z, 1, strata::Datatype::int32, n);
      } catch (const strata::Error& e) {
        threw = std::string(e.what()).find("'root'") != std::string::npos;
      }
      EXPECT(threw, "root out of range error");
      threw = false;
      float f = 0, g = 0;
      try {
        (void)world.allreduce(&f, &g, 1, strata::Datatype::float32, strata::Op::bxor);
      } catch (const strata::Error& e) {
        threw = e.errc() == strata::Errc::unsupported;
      }
      EXPECT(threw, "bxor on float error");
      // Direction: reduce / allreduce push only; a bad spec names 'direction'; both name the rank.
      auto dir_error = [&](const char* what, const std::function<void()>& call) {
        bool ok = false;
        try {
          call();
        } catch (const strata::Error& e) {
          const std::string m = e.what();
          ok = e.errc() == strata::Errc::invalid_argument && m.find("'direction'") != std::string::npos &&
               m.find("rank " + std::to_string(me)) != std::string::npos;
          if (!ok) std::fprintf(stderr, "rank %d: %s: message '%s'\n", me, what, m.c_str());
        }
        EXPECT(ok, "%s error", what);
      };
      strata::CollOptions pull;
      pull.direction = "pull";
      std::int32_t a1 = 1, a2 = 0;
      dir_error("reduce with pull",
                [&] { (void)world.reduce(&a1, &a2, 1, strata::Datatype::int32, strata::Op::sum, 0, pull); });
      pull.direction = "host:push,core:pull";
      dir_error("allreduce with core:pull",
                [&] { (void)world.allreduce(&a1, &a2, 1, strata::Datatype::int32, strata::Op::sum, pull); });
      pull.direction = "diagonal";
      dir_error("broadcast with a bad direction",
                [&] { (void)world.broadcast(&a1, 1, strata::Datatype::int32, 0, pull); });
    }
    // STRATA_CHECK=1: ranks that disagree on the root get an error on every rank.
    if (check_mismatch && n > 1) {
      std::int32_t z = 0;
      bool threw = false;
      try {
        world.broadcast(&z, 1, strata::Datatype::int32, me == 0 ? 1 : 0).get();
      } catch (const strata::Error& e) {
        threw = std::string(e.what()).find("disagree") != std::string::npos;
      }
      EXPECT(threw, "STRATA_CHECK mismatch detected");
    }
    world.barrier().get();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: exception: %s\n", me, e.what());
    return 1;
  }
  if (failures == 0 && me == 0) std::printf("coll_rank: OK\n");
  return failures == 0 ? 0 : 1;
}
