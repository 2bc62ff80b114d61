// sym_rank: one rank of the allgather / alltoall / reduce-scatter / allreduce
// integration tests (run under strata-run).
//   sym_rank [--quick] [--strict] [--fragment SPEC] [--mismatch] [--large]
// Checks allreduce (tree, rd, rabenseifner, ring, hier; in place; sum, max and
// a non-commutative user op; up to 4 MiB without --quick), allgather(v) (ring,
// rd, bruck, hier, numa-ring, automatic; in place), alltoall(v) (pairwise,
// bruck, pull; in place), reduce_scatter_block / reduce_scatter (ring, rh,
// pairwise; in place; a non-commutative user op with pairwise), a burst of
// loose calls in flight, and bad-input errors, against a sequential reference
// computed on every rank. --mismatch (run with STRATA_CHECK=1) checks only that
// alltoallv / allgatherv counts that disagree across ranks fail on every rank.
// --large checks only allgather(v) (ring, automatic) and alltoall(v) (pairwise,
// pull, automatic), in place too, with blocks of 0, 1, 7, 16387 and 1048589
// int32 (4 MiB + 52 B: the split own-block copy and the streaming copies).
// Prints "sym_rank: OK" on success.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../common/rank_check.hpp"
#include "strata/strata.hpp"

namespace {

using rank_check::failures;
using rank_check::me;

std::int32_t val(int r, std::size_t i) { return static_cast<std::int32_t>(r * 1009 + static_cast<int>(i % 997) + 1); }

// Counts with zeros and different sizes per rank.
std::vector<std::size_t> vcounts(int n, std::size_t count, int salt) {
  std::vector<std::size_t> c;
  for (int r = 0; r < n; ++r)
    c.push_back((r + salt) % 3 == 1 ? 0 : count + static_cast<std::size_t>((r * 5 + salt) % 7));
  return c;
}

// Displacements in reverse rank order with gaps of 3 elements.
std::vector<std::size_t> rev_displs(const std::vector<std::size_t>& counts) {
  std::vector<std::size_t> d(counts.size());
  std::size_t at = 2;
  for (std::size_t i = counts.size(); i-- > 0;) {
    d[i] = at;
    at += counts[i] + 3;
  }
  return d;
}

std::size_t extent(const std::vector<std::size_t>& c, const std::vector<std::size_t>& d) {
  std::size_t e = 0;
  for (std::size_t i = 0; i < c.size(); ++i) e = std::max(e, c[i] + d[i]);
  return e;
}

// 2x2 integer matrices (mod 2^32): a non-commutative operator.
struct M2 {
  std::uint32_t a, b, c, d;
};
M2 mul(const M2& x, const M2& y) {
  return {x.a * y.a + x.b * y.c, x.a * y.b + x.b * y.d, x.c * y.a + x.d * y.c, x.c * y.b + x.d * y.d};
}
M2 mat(int rank, std::size_t i) {
  const auto r = static_cast<std::uint32_t>(rank + 2);
  const auto k = static_cast<std::uint32_t>(i % 5);
  return {r, 1u + k, r * 3u + 1u, 1u};
}

template <class F>
bool throws(F f, strata::Errc code, const char* needle) {
  try {
    (void)f();
  } catch (const strata::Error& e) {
    const bool ok = e.errc() == code && std::string(e.what()).find(needle) != std::string::npos;
    if (!ok) std::fprintf(stderr, "rank %d: unexpected error text: %s\n", me, e.what());
    return ok;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  strata::CollOptions base;
  bool quick = false;
  bool mismatch = false;
  bool large = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick")
      quick = true;
    else if (a == "--mismatch")
      mismatch = true;
    else if (a == "--large")
      large = true;
    else if (a == "--strict")
      base.sync = strata::Sync::strict();
    else if (a == "--fragment" && i + 1 < argc)
      base.fragment = argv[++i];
    else {
      std::fprintf(stderr, "sym_rank: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  try {
    strata::Engine engine;
    strata::Communicator& world = engine.world();
    me = world.rank();
    const int n = world.size();
    const auto nn = static_cast<std::size_t>(n);
    const auto mine = static_cast<std::size_t>(me);
    std::vector<std::size_t> sizes = {0, 1, 7, 1000, 65539};
    if (large) sizes = {0, 1, 7, 16387, (std::size_t{1} << 20) + 13};
    auto opts = [&](const char* algo) {
      strata::CollOptions o = base;
      o.algorithm = algo;
      return o;
    };
    strata::UserOp matop;
    matop.elem_size = sizeof(M2);
    matop.commutative = false;
    matop.name = "matmul";
    matop.fn = [](const void* a, const void* b, void* dst, std::size_t cnt) {
      const M2* x = static_cast<const M2*>(a);
      const M2* y = static_cast<const M2*>(b);
      M2* z = static_cast<M2*>(dst);
      for (std::size_t i = 0; i < cnt; ++i) z[i] = mul(x[i], y[i]);
    };

    if (mismatch) {
      // STRATA_CHECK=1: counts that disagree across ranks fail on every rank, before anything moves.
      if (n > 1) {
        std::vector<std::size_t> sc(nn, 3), rc(nn, 3), d(nn);
        for (std::size_t j = 0; j < nn; ++j) d[j] = 4 * j;
        if (me == 0) sc[1] = 4;  // rank 1 expects 3 from rank 0
        std::vector<std::int32_t> a(4 * nn, me), b(4 * nn, -1);
        EXPECT(throws([&] { return world.alltoallv(a.data(), sc, d, b.data(), rc, d, strata::Datatype::int32); },
                      strata::Errc::invalid_argument, "pairwise counts"),
               "alltoallv mismatched pairwise counts");
        std::vector<std::size_t> gc(nn, 2), gd(nn);
        for (std::size_t j = 0; j < nn; ++j) gd[j] = 4 * j;
        gc[0] = me == 1 ? 3 : 2;  // rank 1 disagrees on rank 0's count
        const std::size_t mine_cnt = gc[mine];
        EXPECT(throws([&] { return world.allgatherv(a.data(), mine_cnt, b.data(), gc, gd, strata::Datatype::int32); },
                      strata::Errc::invalid_argument, "STRATA_CHECK"),
               "allgatherv counts disagree");
        // Consistent counts still work after the errors.
        world.alltoallv(a.data(), rc, d, b.data(), rc, d, strata::Datatype::int32).get();
        EXPECT(b[4 * (nn - 1)] == static_cast<std::int32_t>(n - 1), "alltoallv after the mismatch");
      }
      world.barrier().get();
      if (failures == 0 && me == 0) std::printf("sym_rank: OK\n");
      return failures == 0 ? 0 : 1;
    }

    // ---- allreduce: every algorithm, sum int32 and max float64, in place, a non-commutative op
    if (!large) {
      std::vector<std::size_t> asizes = sizes;
      if (!quick) asizes.push_back((std::size_t{1} << 20) + 5);  // 4 MiB of int32
      for (std::size_t count : asizes) {
        for (const char* algo : {"", "tree", "rd", "rabenseifner", "ring", "hier", "hier:ring"}) {
          if (count > 1000 && quick && std::string(algo) != "rabenseifner" && std::string(algo) != "rd") continue;
          if (quick && (std::string(algo) == "tree" || std::string(algo) == "hier:ring")) continue;  // "" is tree
          if (count > 65539 && std::string(algo) == "tree") continue;
          for (int inplace = 0; inplace < 2; ++inplace) {
            std::vector<std::int32_t> send(count), recv(count, -1);
            for (std::size_t i = 0; i < count; ++i) send[i] = val(me, i);
            if (inplace) recv = send;
            world
                .allreduce(inplace ? strata::in_place : send.data(), recv.data(), count, strata::Datatype::int32,
                           strata::Op::sum, opts(algo))
                .get();
            bool ok = true;
            for (std::size_t i = 0; i < count && ok; ++i) {
              std::int32_t want = 0;
              for (int r = 0; r < n; ++r) want += val(r, i);
              ok = recv[i] == want;
            }
            EXPECT(ok, "allreduce sum '%s' count %zu in_place %d", algo, count, inplace);
          }
          if (count > 65539 || (quick && count != 1000)) continue;
          std::vector<double> ds(count), dr(count, -1.0);
          for (std::size_t i = 0; i < count; ++i) ds[i] = static_cast<double>(val(me, i) % 13) * 0.5 - me;
          world.allreduce(ds.data(), dr.data(), count, strata::Datatype::float64, strata::Op::max, opts(algo)).get();
          bool ok = true;
          for (std::size_t i = 0; i < count && ok; ++i) {
            double want = -1e300;
            for (int r = 0; r < n; ++r) want = std::max(want, static_cast<double>(val(r, i) % 13) * 0.5 - r);
            ok = dr[i] == want;
          }
          EXPECT(ok, "allreduce max float64 '%s' count %zu", algo, count);
        }
        // Non-commutative: rank order with tree, rd, hier (hier refuses if a host's ranks are not consecutive).
        if (count <= 1000) {
          std::vector<M2> ms(count), want(count), mr(count, M2{0, 0, 0, 0});
          for (std::size_t i = 0; i < count; ++i) {
            ms[i] = mat(me, i);
            want[i] = mat(0, i);
            for (int k = 1; k < n; ++k) want[i] = mul(want[i], mat(k, i));
          }
          for (const char* algo : {"", "rd", "hier"}) {
            try {
              world.allreduce(ms.data(), mr.data(), count, matop, opts(algo)).get();
              EXPECT(count == 0 || std::memcmp(mr.data(), want.data(), count * sizeof(M2)) == 0,
                     "matmul allreduce '%s' count %zu", algo, count);
            } catch (const strata::Error& e) {
              EXPECT(std::string(algo) == "hier" && e.errc() == strata::Errc::unsupported,
                     "matmul allreduce '%s' count %zu: %s", algo, count, e.what());
            }
          }
          for (const char* algo : {"rabenseifner", "ring"})
            EXPECT(throws([&] { return world.allreduce(ms.data(), mr.data(), count, matop, opts(algo)); },
                          strata::Errc::unsupported, "matmul"),
                   "matmul allreduce '%s' refused", algo);
        }
      }
    }

    for (std::size_t count : sizes) {
      const bool big = count > 1000;
      // ---- allgather, allgatherv (every algorithm; in place too)
      for (const char* algo : {"ring", "rd", "bruck", "hier", "numa-ring", ""}) {
        if (big && quick && std::string(algo) != "ring" && std::string(algo) != "hier") continue;
        if (large && std::string(algo) != "ring" && std::string(algo) != "") continue;
        for (int inplace = 0; inplace < 2; ++inplace) {
          std::vector<std::int32_t> send(count), recv(nn * count, -1);
          for (std::size_t i = 0; i < count; ++i) send[i] = val(me, i);
          if (inplace) std::copy(send.begin(), send.end(), recv.begin() + static_cast<std::ptrdiff_t>(mine * count));
          world
              .allgather(inplace ? strata::in_place : send.data(), count, recv.data(), strata::Datatype::int32,
                         opts(algo))
              .get();
          bool ok = true;
          for (std::size_t r = 0; r < nn && ok; ++r)
            for (std::size_t i = 0; i < count && ok; ++i) ok = recv[r * count + i] == val(static_cast<int>(r), i);
          EXPECT(ok, "allgather '%s' count %zu in_place %d", algo, count, inplace);

          const std::vector<std::size_t> cnt = vcounts(n, count, 0), dsp = rev_displs(cnt);
          std::vector<std::int32_t> vs(cnt[mine]), vr(extent(cnt, dsp), -1), want(extent(cnt, dsp), -1);
          for (std::size_t i = 0; i < cnt[mine]; ++i) vs[i] = val(me, i);
          for (std::size_t r = 0; r < nn; ++r)
            for (std::size_t i = 0; i < cnt[r]; ++i) want[dsp[r] + i] = val(static_cast<int>(r), i);
          if (inplace) std::copy(vs.begin(), vs.end(), vr.begin() + static_cast<std::ptrdiff_t>(dsp[mine]));
          world
              .allgatherv(inplace ? strata::in_place : vs.data(), cnt[mine], vr.data(), cnt, dsp,
                          strata::Datatype::int32, opts(algo))
              .get();
          EXPECT(vr == want, "allgatherv '%s' count %zu in_place %d", algo, count, inplace);
        }
      }
      // ---- alltoall (pairwise, bruck), alltoallv (pairwise)
      for (const char* algo : {"pairwise", "bruck", "pull", ""}) {
        if (big && quick && std::string(algo) != "pairwise" && std::string(algo) != "pull") continue;
        if (large && std::string(algo) == "bruck") continue;
        for (int inplace = 0; inplace < 2; ++inplace) {
          std::vector<std::int32_t> send(nn * count), recv(nn * count, -1);
          for (std::size_t j = 0; j < nn; ++j)
            for (std::size_t i = 0; i < count; ++i) send[j * count + i] = val(me * n + static_cast<int>(j), i);
          if (inplace) recv = send;
          world
              .alltoall(inplace ? strata::in_place : send.data(), recv.data(), count, strata::Datatype::int32,
                        opts(algo))
              .get();
          bool ok = true;
          for (std::size_t j = 0; j < nn && ok; ++j)
            for (std::size_t i = 0; i < count && ok; ++i)
              ok = recv[j * count + i] == val(static_cast<int>(j) * n + me, i);
          EXPECT(ok, "alltoall '%s' count %zu in_place %d", algo, count, inplace);
        }
      }
      {
        auto pair = [count](std::size_t a, std::size_t b) -> std::size_t {
          return (a + 2 * b) % 4 == 1 ? 0 : count + (a * 3 + b) % 5;
        };
        std::vector<std::size_t> sc, rc;
        for (std::size_t j = 0; j < nn; ++j) {
          sc.push_back(pair(mine, j));
          rc.push_back(pair(j, mine));
        }
        const std::vector<std::size_t> sd = rev_displs(sc), rd = rev_displs(rc);
        std::vector<std::int32_t> send(extent(sc, sd), -2), recv(extent(rc, rd), -1);
        std::vector<std::int32_t> want = recv;
        for (std::size_t j = 0; j < nn; ++j) {
          for (std::size_t i = 0; i < sc[j]; ++i) send[sd[j] + i] = val(me * n + static_cast<int>(j), i);
          for (std::size_t i = 0; i < rc[j]; ++i) want[rd[j] + i] = val(static_cast<int>(j) * n + me, i);
        }
        for (const char* algo : {"pairwise", "pull"}) {
          std::fill(recv.begin(), recv.end(), -1);
          world.alltoallv(send.data(), sc, sd, recv.data(), rc, rd, strata::Datatype::int32, opts(algo)).get();
          EXPECT(recv == want, "alltoallv '%s' count %zu", algo, count);
        }
        // In place: symmetric counts (the receive counts / displacements describe both sides).
        std::vector<std::size_t> ic;
        for (std::size_t j = 0; j < nn; ++j) ic.push_back((mine + j) % 4 == 1 ? 0 : count + (mine + j) % 5);
        const std::vector<std::size_t> id = rev_displs(ic);
        std::vector<std::int32_t> buf(extent(ic, id), -3), iwant = buf;
        for (std::size_t j = 0; j < nn; ++j)
          for (std::size_t i = 0; i < ic[j]; ++i) {
            buf[id[j] + i] = val(me * n + static_cast<int>(j), i);
            iwant[id[j] + i] = val(static_cast<int>(j) * n + me, i);
          }
        const std::vector<std::int32_t> orig = buf;
        for (const char* algo : {"pairwise", "pull"}) {
          buf = orig;
          world.alltoallv(strata::in_place, {}, {}, buf.data(), ic, id, strata::Datatype::int32, opts(algo)).get();
          EXPECT(buf == iwant, "alltoallv in place '%s' count %zu", algo, count);
        }
      }
      if (large) continue;
      // ---- reduce_scatter_block, reduce_scatter (sum int32; max int64)
      for (const char* algo : {"ring", "rh", "pairwise", ""}) {
        if (big && quick && std::string(algo) != "ring") continue;
        std::vector<std::int32_t> send(nn * count), recv(count, -1);
        for (std::size_t i = 0; i < nn * count; ++i) send[i] = val(me, i * 3);
        world
            .reduce_scatter_block(send.data(), recv.data(), count, strata::Datatype::int32, strata::Op::sum, opts(algo))
            .get();
        bool ok = true;
        for (std::size_t i = 0; i < count && ok; ++i) {
          std::int32_t want = 0;
          for (int r = 0; r < n; ++r) want += val(r, (mine * count + i) * 3);
          ok = recv[i] == want;
        }
        EXPECT(ok, "reduce_scatter_block '%s' count %zu", algo, count);
        {  // in place: recv holds the input, the result lands at its start
          std::vector<std::int32_t> io = send;
          world
              .reduce_scatter_block(strata::in_place, io.data(), count, strata::Datatype::int32, strata::Op::sum,
                                    opts(algo))
              .get();
          bool ok2 = true;
          for (std::size_t i = 0; i < count && ok2; ++i) ok2 = io[i] == recv[i];
          EXPECT(ok2, "reduce_scatter_block in place '%s' count %zu", algo, count);
        }

        const std::vector<std::size_t> cnt = vcounts(n, count, 1);
        std::size_t tot = 0, at = 0;
        for (std::size_t r = 0; r < nn; ++r) {
          if (r == mine) at = tot;
          tot += cnt[r];
        }
        std::vector<std::int64_t> vs(tot), vr(cnt[mine], -1);
        for (std::size_t i = 0; i < tot; ++i) vs[i] = static_cast<std::int64_t>(val(me, i)) * ((me + i) % 2 ? 1 : -1);
        world.reduce_scatter(vs.data(), vr.data(), cnt, strata::Datatype::int64, strata::Op::max, opts(algo)).get();
        ok = true;
        for (std::size_t i = 0; i < cnt[mine] && ok; ++i) {
          std::int64_t want = INT64_MIN;
          for (int r = 0; r < n; ++r)
            want = std::max<std::int64_t>(want, static_cast<std::int64_t>(val(r, at + i)) *
                                                    ((static_cast<std::size_t>(r) + at + i) % 2 ? 1 : -1));
          ok = vr[i] == want;
        }
        EXPECT(ok, "reduce_scatter max int64 '%s' count %zu", algo, count);
        {
          std::vector<std::int64_t> io = vs;
          world.reduce_scatter(strata::in_place, io.data(), cnt, strata::Datatype::int64, strata::Op::max, opts(algo))
              .get();
          EXPECT(std::equal(vr.begin(), vr.end(), io.begin()), "reduce_scatter in place '%s' count %zu", algo, count);
        }
      }
      // ---- non-commutative user op: rank-ordered matrix products (pairwise / automatic)
      if (count <= 1000) {
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
        std::vector<M2> send(nn * count), want(count);
        for (std::size_t i = 0; i < nn * count; ++i) send[i] = mat(me, i);
        for (std::size_t i = 0; i < count; ++i) {
          want[i] = mat(0, mine * count + i);
          for (int k = 1; k < n; ++k) want[i] = mul(want[i], mat(k, mine * count + i));
        }
        for (const char* algo : {"pairwise", ""}) {
          std::vector<M2> recv(count, M2{0, 0, 0, 0});
          world.reduce_scatter_block(send.data(), recv.data(), count, op, opts(algo)).get();
          EXPECT(count == 0 || std::memcmp(recv.data(), want.data(), count * sizeof(M2)) == 0,
                 "matmul reduce_scatter_block '%s' count %zu", algo, count);
        }
      }
    }

    // ---- a burst of loose calls in flight at once (beyond the credits)
    if (!large) {
      const int k = 24;
      const std::size_t cnt = 333;
      std::vector<std::vector<std::int32_t>> in(k), out(k);
      std::vector<strata::Future<void>> fs;
      for (int j = 0; j < k; ++j) {
        auto& i = in[static_cast<std::size_t>(j)];
        auto& o = out[static_cast<std::size_t>(j)];
        i.assign(nn * cnt, me + j);
        o.assign(nn * cnt, -1);
        if (j % 3 == 0)
          fs.push_back(world.allgather(i.data(), cnt, o.data(), strata::Datatype::int32, base));
        else if (j % 3 == 1)
          fs.push_back(world.alltoall(i.data(), o.data(), cnt, strata::Datatype::int32, base));
        else
          fs.push_back(
              world.reduce_scatter_block(i.data(), o.data(), cnt, strata::Datatype::int32, strata::Op::sum, base));
      }
      strata::when_all(std::move(fs)).get();
      for (int j = 0; j < k; ++j) {
        const auto& o = out[static_cast<std::size_t>(j)];
        bool ok = true;
        if (j % 3 == 2) {
          for (std::size_t i = 0; i < cnt && ok; ++i) ok = o[i] == n * (n - 1) / 2 + n * j;
        } else {
          for (std::size_t r = 0; r < nn && ok; ++r) ok = o[r * cnt] == static_cast<int>(r) + j;
        }
        EXPECT(ok, "burst call %d", j);
      }
    }

    // ---- bad input: clear errors naming the argument, nothing moves
    if (!large) {
      std::vector<std::int32_t> a(64 * nn), b(64 * nn);
      std::vector<std::size_t> cnt(nn, 4), dsp(nn);
      for (std::size_t r = 0; r < nn; ++r) dsp[r] = 4 * r;
      std::vector<std::size_t> short_cnt(nn + 1, 4);
      EXPECT(throws([&] { return world.allgatherv(a.data(), 4, b.data(), short_cnt, dsp, strata::Datatype::int32); },
                    strata::Errc::invalid_argument, "'counts'"),
             "allgatherv counts size");
      if (n > 1) {
        std::vector<std::size_t> ov = dsp;
        ov[1] = 1;  // block 1 overlaps block 0
        EXPECT(throws([&] { return world.allgatherv(a.data(), 4, b.data(), cnt, ov, strata::Datatype::int32); },
                      strata::Errc::invalid_argument, "overlap"),
               "allgatherv overlapping blocks");
      }
      {
        strata::CollOptions t;
        t.tree = "single:binomial";
        EXPECT(throws([&] { return world.allgather(a.data(), 4, b.data(), strata::Datatype::int32, t); },
                      strata::Errc::invalid_argument, "argument 'tree'"),
               "allgather with a tree shape");
        EXPECT(throws([&] { return world.alltoall(a.data(), b.data(), 4, strata::Datatype::int32, t); },
                      strata::Errc::invalid_argument, "argument 'tree'"),
               "alltoall with a tree shape");
      }
      EXPECT(throws([&] { return world.allgather(nullptr, 4, b.data(), strata::Datatype::int32); },
                    strata::Errc::invalid_argument, "'send'"),
             "allgather null send");
      EXPECT(throws([&] { return world.alltoall(a.data(), nullptr, 4, strata::Datatype::int32); },
                    strata::Errc::invalid_argument, "'recv'"),
             "alltoall null recv");
      EXPECT(throws([&] { return world.alltoall(a.data(), a.data() + 1, 4, strata::Datatype::int32); },
                    strata::Errc::invalid_argument, "overlap"),
             "alltoall overlapping send / recv");
      std::vector<std::size_t> rc = cnt;
      rc[mine] = 5;
      EXPECT(throws([&] { return world.alltoallv(a.data(), cnt, dsp, b.data(), rc, dsp, strata::Datatype::int32); },
                    strata::Errc::invalid_argument, "recv_counts"),
             "alltoallv self counts differ");
      strata::CollOptions o;
      o.algorithm = "nonsense";
      EXPECT(throws([&] { return world.allgather(a.data(), 4, b.data(), strata::Datatype::int32, o); },
                    strata::Errc::invalid_argument, "nonsense"),
             "unknown algorithm");
      o.algorithm = "bruck";
      EXPECT(throws([&] { return world.alltoallv(a.data(), cnt, dsp, b.data(), cnt, dsp, strata::Datatype::int32, o); },
                    strata::Errc::invalid_argument, "bruck"),
             "bruck alltoallv");
      strata::UserOp nc;
      nc.elem_size = 4;
      nc.commutative = false;
      nc.fn = [](const void*, const void*, void*, std::size_t) {};
      o.algorithm = "ring";
      EXPECT(throws([&] { return world.reduce_scatter_block(a.data(), b.data(), 4, nc, o); }, strata::Errc::unsupported,
                    "'ring'"),
             "non-commutative ring");
      float f[64] = {};
      float g[64] = {};
      EXPECT(
          throws([&] { return world.reduce_scatter_block(f, g, 64 / nn, strata::Datatype::float32, strata::Op::bxor); },
                 strata::Errc::unsupported, "bxor"),
          "bxor on float");
      std::vector<std::size_t> rs_short(nn + 2, 1);
      EXPECT(throws(
                 [&] {
                   return world.reduce_scatter(a.data(), b.data(), rs_short, strata::Datatype::int32, strata::Op::sum);
                 },
                 strata::Errc::invalid_argument, "'counts'"),
             "reduce_scatter counts size");
    }
    world.barrier().get();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: exception: %s\n", me, e.what());
    return 1;
  }
  if (failures == 0 && me == 0) std::printf("sym_rank: OK\n");
  return failures == 0 ? 0 : 1;
}
