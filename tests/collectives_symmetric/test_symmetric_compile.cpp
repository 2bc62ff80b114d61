// Allgather(v), alltoall(v), reduce-scatter(_block) compilers without processes:
// every rank's slice compiled and validated across ranks (signals match waits),
// and executed over the fake transport (random release order) against a
// sequential reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../common/fake_ranks.hpp"
#include "strata/collectives/compile.hpp"
#include "strata/dag/executor.hpp"

using strata::coll::Call;
using strata::coll::Group;
using strata::coll::Kind;
namespace dag = strata::dag;

namespace {

Group group(int n, std::size_t slot_bytes) {
  Group g;
  g.world_size = n;
  for (int r = 0; r < n; ++r) {
    g.world.push_back(r);
    g.host.push_back(0);
    g.numa.push_back(0);
  }
  g.slot_bytes = slot_bytes;
  g.credits = 2;
  return g;
}

// Counts with zeros and different sizes per rank.
std::vector<std::size_t> vcounts(int n, std::size_t count, int salt) {
  std::vector<std::size_t> c;
  for (int r = 0; r < n; ++r)
    c.push_back((r + salt) % 3 == 1 ? 0 : count + static_cast<std::size_t>((r * 5 + salt) % 7));
  return c;
}

// Displacements in reverse rank order with gaps of 3 elements.
std::vector<std::size_t> rdispls(const std::vector<std::size_t>& counts) {
  std::vector<std::size_t> d(counts.size());
  std::size_t at = 1;
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

Call make(Kind k, int n, std::size_t count, const std::string& algo, int me_for_a2av = -1) {
  Call c;
  c.kind = k;
  c.count = count;
  c.dtype = dag::DataType::i32;
  c.algo.name = algo;
  if (k == Kind::allgatherv) {
    c.counts = vcounts(n, count, 0);
    c.displs = rdispls(c.counts);
  } else if (k == Kind::reduce_scatter) {
    c.counts = vcounts(n, count, 1);
  }
  (void)me_for_a2av;
  return c;
}

struct AlgoCase {
  Kind kind;
  const char* algo;
};

const AlgoCase kCases[] = {
    {Kind::allgather, "ring"},
    {Kind::allgather, "rd"},
    {Kind::allgather, "bruck"},
    {Kind::allgather, "auto"},
    {Kind::allgatherv, "ring"},
    {Kind::allgatherv, "rd"},
    {Kind::allgatherv, "bruck"},
    {Kind::alltoall, "pairwise"},
    {Kind::alltoall, "bruck"},
    {Kind::alltoall, "auto"},
    {Kind::reduce_scatter_block, "ring"},
    {Kind::reduce_scatter_block, "rh"},
    {Kind::reduce_scatter_block, "pairwise"},
    {Kind::reduce_scatter, "ring"},
    {Kind::reduce_scatter, "rh"},
    {Kind::reduce_scatter, "pairwise"},
};

std::vector<const dag::Plan*> raw(const std::vector<std::shared_ptr<const dag::Plan>>& p) {
  std::vector<const dag::Plan*> r;
  for (const auto& x : p) r.push_back(x.get());
  return r;
}

TEST(SymmetricCompile, AllSlicesValidateAcrossRanks) {
  for (int n : {1, 2, 3, 4, 5, 7, 8, 13, 16}) {
    for (const AlgoCase& ac : kCases) {
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}}) {
        for (std::size_t slot : {std::size_t{4096}, std::size_t{1} << 20}) {
          const Group g = group(n, slot);
          const Call c = make(ac.kind, n, count, ac.algo);
          std::vector<std::shared_ptr<const dag::Plan>> plans;
          ASSERT_NO_THROW(plans = strata::coll::compile_all(g, c, 1))
              << strata::coll::to_string(ac.kind) << " " << ac.algo << " n=" << n << " count=" << count;
          const strata::Status st = dag::validate(raw(plans));
          EXPECT_TRUE(st.is_ok()) << strata::coll::to_string(ac.kind) << " " << ac.algo << " n=" << n
                                  << " count=" << count << " slot=" << slot << ": " << st.message();
        }
      }
    }
  }
}

TEST(SymmetricCompile, RefusesNonCommutativeWhereOrderIsLost) {
  const Group g = group(4, 1 << 20);
  auto u = std::make_shared<dag::UserReduce>();
  u->fn = [](const void*, const void*, void*, std::size_t) {};
  u->elem_size = 4;
  u->commutative = false;
  u->name = "nc";
  for (const char* algo : {"ring", "rh"}) {
    Call c = make(Kind::reduce_scatter_block, 4, 5, algo);
    c.user_op = u;
    try {
      (void)strata::coll::compile(g, c, 0);
      ADD_FAILURE() << algo << " accepted a non-commutative op";
    } catch (const strata::Error& e) {
      EXPECT_EQ(e.errc(), strata::Errc::unsupported);
      EXPECT_NE(std::string(e.what()).find(algo), std::string::npos) << e.what();
    }
  }
  for (const char* algo : {"pairwise", "auto"}) {
    Call c = make(Kind::reduce_scatter_block, 4, 5, algo);
    c.user_op = u;
    EXPECT_NO_THROW((void)strata::coll::compile_all(g, c, 0)) << algo;
  }
  Call bad = make(Kind::allgatherv, 4, 5, "ring");
  bad.counts.pop_back();
  EXPECT_THROW((void)strata::coll::compile(g, bad, 0), strata::Error);
}

// ---------------------------------------------------------------- execution over the fake transport
struct Sim : fake_ranks::FakeRanks {
  std::size_t slot_bytes;
  Group grp;
  Sim(int nranks, std::size_t slot, std::uint64_t seed)
      : FakeRanks(nranks, slot, seed), slot_bytes(slot), grp(group(nranks, slot)) {}
  // Runs every rank's slice of c with per-rank send / recv buffers.
  bool run(const Call& c, std::vector<std::vector<std::int32_t>>& send, std::vector<std::vector<std::int32_t>>& recv,
           std::uint32_t seq) {
    return run_plans(strata::coll::compile_all(grp, c, 1), c.in_place, send, recv, seq);
  }
  // Runs the given slices (slices[r] is rank r's); in place: no input buffer.
  bool run_plans(const std::vector<std::shared_ptr<const dag::Plan>>& plans, bool in_place,
                 std::vector<std::vector<std::int32_t>>& send, std::vector<std::vector<std::int32_t>>& recv,
                 std::uint32_t seq) {
    return FakeRanks::run(plans, seq, [&](int r) -> Io {
      const auto ur = static_cast<std::size_t>(r);
      return {in_place ? nullptr : send[ur].data(), recv[ur].data()};
    });
  }
};

std::int32_t val(int r, std::size_t i) { return static_cast<std::int32_t>(r * 1000 + static_cast<int>(i % 977) + 1); }

struct SimCase {
  int n;
  std::size_t slot;
};

class SymmetricSim : public ::testing::TestWithParam<SimCase> {};

TEST_P(SymmetricSim, MatchesSequentialReference) {
  const int n = GetParam().n;
  const auto nn = static_cast<std::size_t>(n);
  Sim sim(n, GetParam().slot, 7 + static_cast<std::uint64_t>(n));
  std::uint32_t seq = 0;
  for (const AlgoCase& ac : kCases) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{5003}}) {
      for (int inplace = 0; inplace < (ac.kind == Kind::allgather || ac.kind == Kind::allgatherv ? 2 : 1); ++inplace) {
        const std::string what = std::string(strata::coll::to_string(ac.kind)) + " " + ac.algo +
                                 " n=" + std::to_string(n) + " count=" + std::to_string(count) +
                                 (inplace ? " in-place" : "");
        Call c = make(ac.kind, n, count, ac.algo);
        c.in_place = inplace != 0;
        std::vector<std::vector<std::int32_t>> send(nn), recv(nn), want(nn);
        if (ac.kind == Kind::allgather || ac.kind == Kind::allgatherv) {
          std::vector<std::size_t> cnt(nn, count), dsp(nn);
          for (std::size_t r = 0; r < nn; ++r) dsp[r] = r * count;
          if (ac.kind == Kind::allgatherv) {
            cnt = c.counts;
            dsp = c.displs;
          }
          const std::size_t ext = extent(cnt, dsp);
          for (std::size_t r = 0; r < nn; ++r) {
            for (std::size_t i = 0; i < cnt[r]; ++i) send[r].push_back(val(static_cast<int>(r), i));
            recv[r].assign(ext, -1);
            want[r].assign(ext, -1);
            for (std::size_t q = 0; q < nn; ++q)
              for (std::size_t i = 0; i < cnt[q]; ++i) want[r][dsp[q] + i] = val(static_cast<int>(q), i);
            if (inplace)
              for (std::size_t i = 0; i < cnt[r]; ++i) recv[r][dsp[r] + i] = val(static_cast<int>(r), i);
          }
        } else if (ac.kind == Kind::alltoall) {
          for (std::size_t r = 0; r < nn; ++r) {
            recv[r].assign(nn * count, -1);
            for (std::size_t j = 0; j < nn; ++j)
              for (std::size_t i = 0; i < count; ++i) {
                send[r].push_back(val(static_cast<int>(r * nn + j), i));
                want[r].push_back(val(static_cast<int>(j * nn + r), i));
              }
          }
        } else {
          std::vector<std::size_t> cnt(nn, count);
          if (ac.kind == Kind::reduce_scatter) cnt = c.counts;
          std::size_t tot = 0;
          for (std::size_t x : cnt) tot += x;
          std::vector<std::int32_t> sum(tot, 0);
          for (std::size_t r = 0; r < nn; ++r)
            for (std::size_t i = 0; i < tot; ++i) {
              send[r].push_back(val(static_cast<int>(r), i * 3));
              sum[i] += send[r][i];
            }
          std::size_t at = 0;
          for (std::size_t r = 0; r < nn; ++r) {
            recv[r].assign(cnt[r], -1);
            want[r].assign(sum.begin() + static_cast<std::ptrdiff_t>(at),
                           sum.begin() + static_cast<std::ptrdiff_t>(at + cnt[r]));
            at += cnt[r];
          }
        }
        ASSERT_TRUE(sim.run(c, send, recv, seq++)) << what;
        for (std::size_t r = 0; r < nn; ++r) ASSERT_EQ(recv[r], want[r]) << what << " rank " << r;
      }
    }
  }
  // alltoallv: counts between every pair differ (zeros included), reversed / gapped displacements.
  for (std::size_t count : {std::size_t{0}, std::size_t{3}, std::size_t{2000}}) {
    auto pair = [count](std::size_t a, std::size_t b) -> std::size_t {
      return (a + 2 * b) % 4 == 1 ? 0 : count + (a * 3 + b) % 5;
    };
    std::vector<Call> calls(nn);
    std::vector<std::vector<std::int32_t>> send(nn), recv(nn), want(nn);
    for (std::size_t r = 0; r < nn; ++r) {
      Call& c = calls[r];
      c.kind = Kind::alltoallv;
      c.dtype = dag::DataType::i32;
      c.algo.name = "pairwise";
      for (std::size_t j = 0; j < nn; ++j) {
        c.counts.push_back(pair(r, j));
        c.rcounts.push_back(pair(j, r));
      }
      c.displs = rdispls(c.counts);
      c.rdispls = rdispls(c.rcounts);
      send[r].assign(extent(c.counts, c.displs), -2);
      for (std::size_t j = 0; j < nn; ++j)
        for (std::size_t i = 0; i < c.counts[j]; ++i) send[r][c.displs[j] + i] = val(static_cast<int>(r * nn + j), i);
      recv[r].assign(extent(c.rcounts, c.rdispls), -1);
      want[r] = recv[r];
      for (std::size_t j = 0; j < nn; ++j)
        for (std::size_t i = 0; i < c.rcounts[j]; ++i) want[r][c.rdispls[j] + i] = val(static_cast<int>(j * nn + r), i);
    }
    // Per-rank calls differ: compile each rank's slice from its own call.
    std::vector<std::shared_ptr<const dag::Plan>> plans;
    for (std::size_t r = 0; r < nn; ++r) {
      Group g = group(n, sim.slot_bytes);
      g.rank = static_cast<int>(r);
      plans.push_back(strata::coll::compile(g, calls[r], 1));
    }
    ASSERT_TRUE(dag::validate(raw(plans)).is_ok()) << dag::validate(raw(plans)).message();
    ASSERT_TRUE(sim.run_plans(plans, false, send, recv, seq++)) << "alltoallv count " << count;
    for (std::size_t r = 0; r < nn; ++r) ASSERT_EQ(recv[r], want[r]) << "alltoallv count " << count << " rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, SymmetricSim,
                         ::testing::Values(SimCase{1, 1 << 20}, SimCase{2, 1 << 20}, SimCase{3, 4096},
                                           SimCase{4, 1 << 20}, SimCase{5, 4096}, SimCase{6, 8192},
                                           SimCase{8, 1 << 16}),
                         [](const ::testing::TestParamInfo<SimCase>& i) {
                           return "n" + std::to_string(i.param.n) + "_slot" + std::to_string(i.param.slot);
                         });

// ---------------------------------------------------------------- large blocks
// From 1 MiB messages the own block is copied fragment by fragment after the
// puts of the same bytes (128 KiB fragments), and from 12 MiB of send + recv
// per rank the copies into recv are streaming (non-temporal stores). Sizes
// around the thresholds, in place, allgatherv / alltoallv, n = 1, 2, 3, 5.

struct PlanShape {
  std::size_t own_copies = 0;  // copy nodes reading the send buffer
  std::size_t streaming = 0;   // streaming copy nodes
};
PlanShape shape(const dag::Plan& p) {
  PlanShape s;
  for (const dag::Node& nd : p.nodes()) {
    if (nd.kind != dag::NodeKind::copy) continue;
    if (nd.src.buf.kind == dag::BufferKind::input) ++s.own_copies;
    if (nd.streaming) ++s.streaming;
  }
  return s;
}

class LargeSim : public ::testing::TestWithParam<int> {};

TEST_P(LargeSim, SplitOwnCopyAndStreamingMatchReference) {
  const int n = GetParam();
  const auto nn = static_cast<std::size_t>(n);
  Sim sim(n, std::size_t{1} << 20, 71 + static_cast<std::uint64_t>(n));
  std::uint32_t seq = 0;
  const std::size_t big = (std::size_t{1} << 20) + 13;  // int32: 4 MiB + 52 B per block
  for (std::size_t count :
       {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{16387}, std::size_t{262147}, big}) {
    const std::uint64_t block = count * 4;
    // allgather (ring, rd, bruck, automatic; in place), allgatherv (ring)
    for (const char* algo : {"ring", "rd", "bruck", "auto"}) {
      for (int inplace = 0; inplace < 2; ++inplace) {
        const std::string what = std::string("allgather ") + algo + " n=" + std::to_string(n) +
                                 " count=" + std::to_string(count) + (inplace ? " in-place" : "");
        Call c = make(Kind::allgather, n, count, algo);
        c.in_place = inplace != 0;
        const auto plans = strata::coll::compile_all(sim.grp, c, 1);
        ASSERT_TRUE(dag::validate(raw(plans)).is_ok()) << what << ": " << dag::validate(raw(plans)).message();
        const PlanShape sh = shape(*plans[0]);
        const bool split = !c.in_place && block >= (std::uint64_t{1} << 20);
        const bool stream = (c.in_place ? 0 : block) + nn * block >= (std::uint64_t{12} << 20);
        EXPECT_EQ(sh.own_copies, c.in_place || count == 0 ? 0
                                 : split                  ? (block + (128 << 10) - 1) / (128 << 10)
                                                          : 1)
            << what;
        EXPECT_EQ(sh.streaming > 0, stream && (n > 1 || !c.in_place) && count > 0) << what;
        std::vector<std::vector<std::int32_t>> send(nn), recv(nn), want(nn);
        for (std::size_t r = 0; r < nn; ++r) {
          for (std::size_t i = 0; i < count; ++i) send[r].push_back(val(static_cast<int>(r), i));
          recv[r].assign(nn * count, -1);
          for (std::size_t q = 0; q < nn; ++q)
            for (std::size_t i = 0; i < count; ++i) want[r].push_back(val(static_cast<int>(q), i));
          if (inplace)
            std::copy(send[r].begin(), send[r].end(), recv[r].begin() + static_cast<std::ptrdiff_t>(r * count));
        }
        ASSERT_TRUE(sim.run_plans(plans, c.in_place, send, recv, seq++)) << what;
        for (std::size_t r = 0; r < nn; ++r) ASSERT_TRUE(recv[r] == want[r]) << what << " rank " << r;
      }
    }
    {
      const std::string what = "allgatherv ring n=" + std::to_string(n) + " count=" + std::to_string(count);
      Call c = make(Kind::allgatherv, n, count, "ring");
      const auto plans = strata::coll::compile_all(sim.grp, c, 1);
      ASSERT_TRUE(dag::validate(raw(plans)).is_ok()) << what;
      const std::size_t ext = extent(c.counts, c.displs);
      std::vector<std::vector<std::int32_t>> send(nn), recv(nn), want(nn);
      for (std::size_t r = 0; r < nn; ++r) {
        for (std::size_t i = 0; i < c.counts[r]; ++i) send[r].push_back(val(static_cast<int>(r), i));
        recv[r].assign(ext, -1);
        want[r].assign(ext, -1);
        for (std::size_t q = 0; q < nn; ++q)
          for (std::size_t i = 0; i < c.counts[q]; ++i) want[r][c.displs[q] + i] = val(static_cast<int>(q), i);
      }
      ASSERT_TRUE(sim.run_plans(plans, false, send, recv, seq++)) << what;
      for (std::size_t r = 0; r < nn; ++r) ASSERT_TRUE(recv[r] == want[r]) << what << " rank " << r;
    }
    // alltoall (pairwise, pull, automatic; in place)
    for (const char* algo : {"pairwise", "pull", "auto"}) {
      for (int inplace = 0; inplace < 2; ++inplace) {
        const std::string what = std::string("alltoall ") + algo + " n=" + std::to_string(n) +
                                 " count=" + std::to_string(count) + (inplace ? " in-place" : "");
        Call c = make(Kind::alltoall, n, count, algo);
        c.in_place = inplace != 0;
        const auto plans = strata::coll::compile_all(sim.grp, c, 1);
        ASSERT_TRUE(dag::validate(raw(plans)).is_ok()) << what << ": " << dag::validate(raw(plans)).message();
        const PlanShape sh = shape(*plans[0]);
        const bool split = !c.in_place && block >= (std::uint64_t{1} << 20);
        if (!c.in_place && count > 0 && std::string(algo) == "pairwise") {
          EXPECT_EQ(sh.own_copies, split ? (block + (128 << 10) - 1) / (128 << 10) : 1) << what;
        }
        if (std::string(algo) == "pairwise" && n > 1) {
          EXPECT_EQ(sh.streaming > 0, 2 * nn * block >= (std::uint64_t{12} << 20)) << what;
        }
        std::vector<std::vector<std::int32_t>> send(nn), recv(nn), want(nn);
        for (std::size_t r = 0; r < nn; ++r)
          for (std::size_t j = 0; j < nn; ++j)
            for (std::size_t i = 0; i < count; ++i) {
              send[r].push_back(val(static_cast<int>(r * nn + j), i));
              want[r].push_back(val(static_cast<int>(j * nn + r), i));
            }
        for (std::size_t r = 0; r < nn; ++r) recv[r] = inplace ? send[r] : std::vector<std::int32_t>(nn * count, -1);
        ASSERT_TRUE(sim.run_plans(plans, c.in_place, send, recv, seq++)) << what;
        for (std::size_t r = 0; r < nn; ++r) ASSERT_TRUE(recv[r] == want[r]) << what << " rank " << r;
      }
    }
    // alltoallv (pairwise): unequal pairs, zeros, reversed / gapped displacements.
    {
      const std::string what = "alltoallv pairwise n=" + std::to_string(n) + " count=" + std::to_string(count);
      auto pair = [count](std::size_t a, std::size_t b) -> std::size_t {
        return (a + 2 * b) % 4 == 1 ? 0 : count + (a * 3 + b) % 5;
      };
      std::vector<std::shared_ptr<const dag::Plan>> plans;
      std::vector<std::vector<std::int32_t>> send(nn), recv(nn), want(nn);
      for (std::size_t r = 0; r < nn; ++r) {
        Call c;
        c.kind = Kind::alltoallv;
        c.dtype = dag::DataType::i32;
        c.algo.name = "pairwise";
        for (std::size_t j = 0; j < nn; ++j) {
          c.counts.push_back(pair(r, j));
          c.rcounts.push_back(pair(j, r));
        }
        c.displs = rdispls(c.counts);
        c.rdispls = rdispls(c.rcounts);
        Group g = sim.grp;
        g.rank = static_cast<int>(r);
        plans.push_back(strata::coll::compile(g, c, 1));
        send[r].assign(extent(c.counts, c.displs), -2);
        recv[r].assign(extent(c.rcounts, c.rdispls), -1);
        want[r] = recv[r];
        for (std::size_t j = 0; j < nn; ++j) {
          for (std::size_t i = 0; i < c.counts[j]; ++i) send[r][c.displs[j] + i] = val(static_cast<int>(r * nn + j), i);
          for (std::size_t i = 0; i < c.rcounts[j]; ++i)
            want[r][c.rdispls[j] + i] = val(static_cast<int>(j * nn + r), i);
        }
      }
      ASSERT_TRUE(dag::validate(raw(plans)).is_ok()) << what << ": " << dag::validate(raw(plans)).message();
      ASSERT_TRUE(sim.run_plans(plans, false, send, recv, seq++)) << what;
      for (std::size_t r = 0; r < nn; ++r) ASSERT_TRUE(recv[r] == want[r]) << what << " rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, LargeSim, ::testing::Values(1, 2, 3, 5),
                         [](const ::testing::TestParamInfo<int>& i) { return "n" + std::to_string(i.param); });

// ---------------------------------------------------------------- allreduce algorithms, hier /
// numa-ring allgather, pull and in-place alltoall(v), in-place reduce-scatter, over n = 1..12 ranks placed
// on hosts (blocks or cyclic) with 2 NUMA regions each, executed over the fake transport.

// n ranks on `hosts` hosts, in blocks (rank r on host r * hosts / n) or cyclic (r % hosts); 2 NUMA regions per host.
Group placed(int n, std::size_t slot, int hosts, bool cyclic) {
  Group g = group(n, slot);
  for (int r = 0; r < n; ++r) {
    g.host[static_cast<std::size_t>(r)] = cyclic ? r % hosts : r * hosts / n;
    g.numa[static_cast<std::size_t>(r)] = (r / (cyclic ? hosts : 1)) % 2;
  }
  return g;
}

// 2x2 matrices of uint32 (mod 2^32): a non-commutative operator, 16 bytes per element.
void matmul(const void* a, const void* b, void* dst, std::size_t count) {
  const auto* x = static_cast<const std::uint32_t*>(a);
  const auto* y = static_cast<const std::uint32_t*>(b);
  auto* z = static_cast<std::uint32_t*>(dst);
  for (std::size_t i = 0; i < count; ++i, x += 4, y += 4, z += 4) {
    const std::uint32_t r0 = x[0] * y[0] + x[1] * y[2], r1 = x[0] * y[1] + x[1] * y[3];
    const std::uint32_t r2 = x[2] * y[0] + x[3] * y[2], r3 = x[2] * y[1] + x[3] * y[3];
    z[0] = r0;
    z[1] = r1;
    z[2] = r2;
    z[3] = r3;
  }
}

std::shared_ptr<const dag::UserReduce> matmul_op() {
  auto u = std::make_shared<dag::UserReduce>();
  u->fn = matmul;
  u->elem_size = 16;
  u->commutative = false;
  u->name = "matmul";
  return u;
}

struct Issue6Case {
  int n;
  std::size_t slot;
  int hosts;
  bool cyclic;
};

class Issue6Sim : public ::testing::TestWithParam<Issue6Case> {};

std::string where(const Issue6Case& p) {
  return " n=" + std::to_string(p.n) + " hosts=" + std::to_string(p.hosts) + (p.cyclic ? " cyclic" : " blocks") +
         " slot=" + std::to_string(p.slot);
}

TEST_P(Issue6Sim, AllreduceAlgorithms) {
  const Issue6Case& p = GetParam();
  const auto nn = static_cast<std::size_t>(p.n);
  Sim sim(p.n, p.slot, 11 + static_cast<std::uint64_t>(p.n));
  sim.grp = placed(p.n, p.slot, p.hosts, p.cyclic);
  std::uint32_t seq = 0;
  for (const char* algo : {"tree", "rd", "rabenseifner", "ring", "hier", "hier:rd", "hier:ring", "hier:rabenseifner"}) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{5003}}) {
      for (int inplace = 0; inplace < 2; ++inplace) {
        const std::string what = std::string("allreduce ") + algo + " count=" + std::to_string(count) +
                                 (inplace ? " in-place" : "") + where(p);
        Call c;
        c.kind = Kind::allreduce;
        c.count = count;
        c.dtype = dag::DataType::i32;
        c.op = dag::ReduceOp::sum;
        c.algo.name = algo;
        c.in_place = inplace != 0;
        const auto plans = strata::coll::compile_all(sim.grp, c, 1);
        const strata::Status vs = dag::validate(raw(plans));
        ASSERT_TRUE(vs.is_ok()) << what << ": " << vs.message();
        std::vector<std::vector<std::int32_t>> send(nn), recv(nn);
        std::vector<std::int32_t> want(count, 0);
        for (std::size_t r = 0; r < nn; ++r) {
          for (std::size_t i = 0; i < count; ++i) {
            send[r].push_back(val(static_cast<int>(r), i * 7));
            want[i] += send[r][i];
          }
          recv[r] = inplace ? send[r] : std::vector<std::int32_t>(count, -1);
        }
        ASSERT_TRUE(sim.run_plans(plans, c.in_place, send, recv, seq++)) << what;
        for (std::size_t r = 0; r < nn; ++r) ASSERT_EQ(recv[r], want) << what << " rank " << r;
      }
    }
  }
  // Non-commutative: rank-ordered products with tree, rd and hier (hosts of consecutive ranks);
  // the others refuse, naming the algorithm and the op.
  for (const char* algo : {"tree", "rd", "hier", "rabenseifner", "ring", "hier:ring"}) {
    const bool refuse = std::string(algo) == "rabenseifner" || std::string(algo) == "ring" ||
                        std::string(algo) == "hier:ring" || (std::string(algo) == "hier" && p.cyclic && p.hosts > 1);
    for (std::size_t count : {std::size_t{1}, std::size_t{5}, std::size_t{700}}) {
      const std::string what = std::string("allreduce matmul ") + algo + " count=" + std::to_string(count) + where(p);
      Call c;
      c.kind = Kind::allreduce;
      c.count = count;
      c.user_op = matmul_op();
      c.algo.name = algo;
      if (refuse) {
        try {
          (void)strata::coll::compile_all(sim.grp, c, 1);
          if (p.n > 1 || std::string(algo) != "hier") ADD_FAILURE() << what << ": accepted";
        } catch (const strata::Error& e) {
          EXPECT_EQ(e.errc(), strata::Errc::unsupported) << what;
          EXPECT_NE(std::string(e.what()).find(algo), std::string::npos) << e.what();
          EXPECT_NE(std::string(e.what()).find("matmul"), std::string::npos) << e.what();
        }
        break;
      }
      const auto plans = strata::coll::compile_all(sim.grp, c, 1);
      ASSERT_TRUE(dag::validate(raw(plans)).is_ok()) << what;
      std::vector<std::vector<std::int32_t>> send(nn), recv(nn);
      std::vector<std::uint32_t> want(4 * count);
      for (std::size_t r = 0; r < nn; ++r) {
        for (std::size_t i = 0; i < count; ++i) {
          const auto rr = static_cast<std::int32_t>(r + 2);
          const auto k = static_cast<std::int32_t>(i % 5);
          for (std::int32_t v : {rr, 1 + k, rr * 3 + 1, 1}) send[r].push_back(v);
        }
        recv[r].assign(4 * count, -1);
        if (r == 0)
          std::memcpy(want.data(), send[0].data(), 16 * count);
        else
          matmul(want.data(), send[r].data(), want.data(), count);
      }
      ASSERT_TRUE(sim.run_plans(plans, false, send, recv, seq++)) << what;
      for (std::size_t r = 0; r < nn; ++r)
        ASSERT_EQ(std::memcmp(recv[r].data(), want.data(), 16 * count), 0) << what << " rank " << r;
    }
  }
}

TEST_P(Issue6Sim, AllgatherHierAndNumaRing) {
  const Issue6Case& p = GetParam();
  const auto nn = static_cast<std::size_t>(p.n);
  Sim sim(p.n, p.slot, 23 + static_cast<std::uint64_t>(p.n));
  sim.grp = placed(p.n, p.slot, p.hosts, p.cyclic);
  std::uint32_t seq = 0;
  for (Kind kind : {Kind::allgather, Kind::allgatherv}) {
    for (const char* algo : {"hier", "numa-ring"}) {
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{3001}}) {
        for (int inplace = 0; inplace < 2; ++inplace) {
          const std::string what = std::string(strata::coll::to_string(kind)) + " " + algo +
                                   " count=" + std::to_string(count) + (inplace ? " in-place" : "") + where(p);
          Call c = make(kind, p.n, count, algo);
          c.in_place = inplace != 0;
          const auto plans = strata::coll::compile_all(sim.grp, c, 1);
          ASSERT_TRUE(dag::validate(raw(plans)).is_ok()) << what;
          std::vector<std::size_t> cnt(nn, count), dsp(nn);
          for (std::size_t r = 0; r < nn; ++r) dsp[r] = r * count;
          if (kind == Kind::allgatherv) {
            cnt = c.counts;
            dsp = c.displs;
          }
          const std::size_t ext = extent(cnt, dsp);
          std::vector<std::vector<std::int32_t>> send(nn), recv(nn);
          std::vector<std::int32_t> want(ext, -1);
          for (std::size_t r = 0; r < nn; ++r)
            for (std::size_t i = 0; i < cnt[r]; ++i) want[dsp[r] + i] = val(static_cast<int>(r), i);
          for (std::size_t r = 0; r < nn; ++r) {
            for (std::size_t i = 0; i < cnt[r]; ++i) send[r].push_back(val(static_cast<int>(r), i));
            recv[r].assign(ext, -1);
            if (inplace)
              for (std::size_t i = 0; i < cnt[r]; ++i) recv[r][dsp[r] + i] = send[r][i];
          }
          ASSERT_TRUE(sim.run_plans(plans, c.in_place, send, recv, seq++)) << what;
          for (std::size_t r = 0; r < nn; ++r) ASSERT_EQ(recv[r], want) << what << " rank " << r;
        }
      }
    }
  }
}

TEST_P(Issue6Sim, AlltoallPullInPlaceAndReduceScatterInPlace) {
  const Issue6Case& p = GetParam();
  const auto nn = static_cast<std::size_t>(p.n);
  Sim sim(p.n, p.slot, 31 + static_cast<std::uint64_t>(p.n));
  sim.grp = placed(p.n, p.slot, p.hosts, p.cyclic);
  std::uint32_t seq = 0;
  // alltoall: pull (throttled to 3 gets in flight, and the default), and in place with every algorithm.
  for (const char* algo : {"pull", "pairwise", "bruck"}) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}}) {
      for (int inplace = 0; inplace < 2; ++inplace) {
        for (std::size_t limit : {std::size_t{0}, std::size_t{3}}) {
          if (limit != 0 && std::string(algo) != "pull") continue;
          const std::string what = std::string("alltoall ") + algo + " count=" + std::to_string(count) +
                                   (inplace ? " in-place" : "") + " limit=" + std::to_string(limit) + where(p);
          Call c = make(Kind::alltoall, p.n, count, algo);
          c.in_place = inplace != 0;
          c.algo.max_outstanding = limit;
          const auto plans = strata::coll::compile_all(sim.grp, c, 1);
          ASSERT_TRUE(dag::validate(raw(plans)).is_ok()) << what << ": " << dag::validate(raw(plans)).message();
          std::vector<std::vector<std::int32_t>> send(nn), recv(nn), want(nn);
          for (std::size_t r = 0; r < nn; ++r)
            for (std::size_t j = 0; j < nn; ++j)
              for (std::size_t i = 0; i < count; ++i) {
                send[r].push_back(val(static_cast<int>(r * nn + j), i));
                want[r].push_back(val(static_cast<int>(j * nn + r), i));
              }
          for (std::size_t r = 0; r < nn; ++r) recv[r] = inplace ? send[r] : std::vector<std::int32_t>(nn * count, -1);
          ASSERT_TRUE(sim.run_plans(plans, c.in_place, send, recv, seq++)) << what;
          for (std::size_t r = 0; r < nn; ++r) ASSERT_EQ(recv[r], want[r]) << what << " rank " << r;
        }
      }
    }
  }
  // alltoallv: pull, and pairwise / pull in place (the receive counts describe both sides).
  for (const char* algo : {"pull", "pairwise"}) {
    for (int inplace = 0; inplace < 2; ++inplace) {
      if (!inplace && std::string(algo) == "pairwise") continue;  // covered by SymmetricSim
      for (std::size_t count : {std::size_t{0}, std::size_t{3}, std::size_t{2000}}) {
        const std::string what = std::string("alltoallv ") + algo + " count=" + std::to_string(count) +
                                 (inplace ? " in-place" : "") + where(p);
        // In place needs symmetric counts: count(a -> b) == count(b -> a).
        auto pair = [count, inplace](std::size_t a, std::size_t b) -> std::size_t {
          if (inplace) return (a + b) % 4 == 1 ? 0 : count + (a + b) % 5;
          return (a + 2 * b) % 4 == 1 ? 0 : count + (a * 3 + b) % 5;
        };
        std::vector<std::shared_ptr<const dag::Plan>> plans;
        std::vector<std::vector<std::int32_t>> send(nn), recv(nn), want(nn);
        for (std::size_t r = 0; r < nn; ++r) {
          Call c;
          c.kind = Kind::alltoallv;
          c.dtype = dag::DataType::i32;
          c.algo.name = algo;
          c.in_place = inplace != 0;
          for (std::size_t j = 0; j < nn; ++j) {
            c.counts.push_back(pair(r, j));
            c.rcounts.push_back(pair(j, r));
          }
          c.rdispls = rdispls(c.rcounts);
          c.displs = inplace ? c.rdispls : rdispls(c.counts);
          if (inplace) c.counts = c.rcounts;
          Group g = sim.grp;
          g.rank = static_cast<int>(r);
          plans.push_back(strata::coll::compile(g, c, 1));
          recv[r].assign(extent(c.rcounts, c.rdispls), inplace ? -2 : -1);  // in place: gaps keep send's -2
          want[r] = recv[r];
          send[r].assign(extent(c.counts, c.displs), -2);
          for (std::size_t j = 0; j < nn; ++j) {
            for (std::size_t i = 0; i < c.counts[j]; ++i)
              send[r][c.displs[j] + i] = val(static_cast<int>(r * nn + j), i);
            for (std::size_t i = 0; i < c.rcounts[j]; ++i)
              want[r][c.rdispls[j] + i] = val(static_cast<int>(j * nn + r), i);
          }
          if (inplace) recv[r] = send[r];
        }
        ASSERT_TRUE(dag::validate(raw(plans)).is_ok()) << what << ": " << dag::validate(raw(plans)).message();
        ASSERT_TRUE(sim.run_plans(plans, inplace != 0, send, recv, seq++)) << what;
        for (std::size_t r = 0; r < nn; ++r) ASSERT_EQ(recv[r], want[r]) << what << " rank " << r;
      }
    }
  }
  // reduce_scatter(_block) in place: the input is in recv, the result lands at its start.
  for (Kind kind : {Kind::reduce_scatter_block, Kind::reduce_scatter}) {
    for (const char* algo : {"ring", "rh", "pairwise"}) {
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}}) {
        const std::string what = std::string(strata::coll::to_string(kind)) + " in-place " + algo +
                                 " count=" + std::to_string(count) + where(p);
        Call c = make(kind, p.n, count, algo);
        c.in_place = true;
        const auto plans = strata::coll::compile_all(sim.grp, c, 1);
        ASSERT_TRUE(dag::validate(raw(plans)).is_ok()) << what;
        std::vector<std::size_t> cnt(nn, count);
        if (kind == Kind::reduce_scatter) cnt = c.counts;
        std::size_t tot = 0;
        for (std::size_t x : cnt) tot += x;
        std::vector<std::int32_t> sum(tot, 0);
        std::vector<std::vector<std::int32_t>> send(nn), recv(nn);
        for (std::size_t r = 0; r < nn; ++r)
          for (std::size_t i = 0; i < tot; ++i) {
            recv[r].push_back(val(static_cast<int>(r), i * 3));
            sum[i] += recv[r][i];
          }
        ASSERT_TRUE(sim.run_plans(plans, true, send, recv, seq++)) << what;
        std::size_t at = 0;
        for (std::size_t r = 0; r < nn; ++r) {
          for (std::size_t i = 0; i < cnt[r]; ++i) ASSERT_EQ(recv[r][i], sum[at + i]) << what << " rank " << r;
          at += cnt[r];
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, Issue6Sim,
                         ::testing::Values(Issue6Case{1, 1 << 16, 1, false}, Issue6Case{2, 1 << 16, 2, false},
                                           Issue6Case{3, 4096, 1, false}, Issue6Case{4, 1 << 16, 2, false},
                                           Issue6Case{5, 8192, 2, true}, Issue6Case{6, 1 << 16, 3, false},
                                           Issue6Case{7, 4096, 2, false}, Issue6Case{8, 1 << 16, 2, true},
                                           Issue6Case{9, 8192, 3, true}, Issue6Case{10, 1 << 16, 2, false},
                                           Issue6Case{11, 1 << 16, 3, false}, Issue6Case{12, 8192, 4, true}),
                         [](const ::testing::TestParamInfo<Issue6Case>& i) {
                           return "n" + std::to_string(i.param.n) + "_hosts" + std::to_string(i.param.hosts) +
                                  (i.param.cyclic ? "_cyclic" : "_blocks") + "_slot" + std::to_string(i.param.slot);
                         });

}  // namespace
