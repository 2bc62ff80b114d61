// Single copy between the same-host ranks of a multi-host communicator
// (docs/algorithms.md, "Single copy across hosts"), without processes: the
// broadcast's tree edges inside one host read the parent's published user
// buffer (read_peer) instead of a put into the child's window and a copy out
// of it; the hier-single-copy allreduce and allgather move only what crosses
// hosts through the windows. Every rank's slice is compiled for multi-host
// groups (block, cyclic and mixed placement), validated across ranks and
// executed over the fake transport (random release order, several instances
// in a row) against the expected buffers; the plans are checked for where
// each rank's bytes come from. The multi-process runs, with the bytes per
// rank over the real transports, are the HostSingleCopy tests of
// test_collectives.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "../common/fake_ranks.hpp"
#include "strata/collectives/compile.hpp"
#include "strata/dag/executor.hpp"

namespace {

using fake_ranks::FakeRanks;
using fake_ranks::make_group;
using fake_ranks::Place;
using strata::coll::Call;
using strata::coll::Group;
using strata::coll::Kind;
namespace dag = strata::dag;

constexpr std::size_t kSlot = 1 << 16;

Group sc_group(int n, Place p) {
  Group g = make_group(n, p, kSlot);
  g.flags = true;
  g.publish_word = 64;  // past the wake words (fake_ranks: 256 flag words per rank)
  return g;
}

Call bcast(int root, std::size_t count) {
  Call c;
  c.kind = Kind::broadcast;
  c.dtype = dag::DataType::i32;
  c.root = root;
  c.count = count;
  c.fast_ok = true;  // every choice left to strata, as for an automatic call
  return c;
}

// Every rank's slice of @p c on @p g, validated across ranks (a failure names the call).
std::vector<std::shared_ptr<const dag::Plan>> compile_every_rank(Group g, const Call& c) {
  std::vector<std::shared_ptr<const dag::Plan>> plans;
  std::vector<const dag::Plan*> raw;
  for (int r = 0; r < g.size(); ++r) {
    g.rank = r;
    plans.push_back(strata::coll::compile(g, c, 1));
    raw.push_back(plans.back().get());
  }
  const strata::Status st = dag::validate(raw);
  EXPECT_TRUE(st.is_ok()) << strata::coll::to_string(c.kind) << " count " << c.count << ": " << st.message();
  return plans;
}

// Bytes of rank r's read_peer nodes, and whether any of them reads a rank on another host.
std::uint64_t read_bytes(const Group& g, const dag::Plan& p, int r, bool* remote) {
  std::uint64_t sum = 0;
  for (const dag::Node& nd : p.nodes()) {
    if (nd.kind != dag::NodeKind::read_peer) continue;
    sum += nd.dst.len;
    if (g.host[static_cast<std::size_t>(nd.peer)] != g.host[static_cast<std::size_t>(r)]) *remote = true;
  }
  return sum;
}

// Bytes rank r copies into its receive buffer out of its window.
std::uint64_t copied_into_output(const dag::Plan& p) {
  std::uint64_t sum = 0;
  for (const dag::Node& nd : p.nodes())
    if (nd.kind == dag::NodeKind::copy && nd.dst.buf.kind == dag::BufferKind::output && nd.dst.buf.id == 0)
      sum += nd.dst.len;
  return sum;
}

std::int32_t val(int root, std::size_t i, int round) {
  return static_cast<std::int32_t>(root * 100000 + round * 7 + static_cast<int>(i % 9973) + 1);
}

struct Case {
  int n;
  Place place;
};

class HostSingleCopy : public ::testing::TestWithParam<Case> {};

TEST_P(HostSingleCopy, SameHostChildrenReadTheirParentsBufferOnceAndMatchTheRoot) {
  const int n = GetParam().n;
  const auto nn = static_cast<std::size_t>(n);
  const Group g = sc_group(n, GetParam().place);
  FakeRanks sim(n, kSlot, 11 + static_cast<std::uint64_t>(n));
  sim.with_flags();
  int round = 0;
  // 20 KB: one fragment; 280 KB: fragments through several window regions.
  for (std::size_t count : {std::size_t{5000}, std::size_t{70000}})
    for (int root = 0; root < n; ++root, ++round) {
      const std::string what =
          "n=" + std::to_string(n) + " count=" + std::to_string(count) + " root=" + std::to_string(root);
      const Call c = bcast(root, count);
      std::vector<std::shared_ptr<const dag::Plan>> plans;
      ASSERT_NO_THROW(plans = compile_every_rank(g, c)) << what;
      ASSERT_FALSE(HasFailure()) << what << ": the plans do not validate";
      ASSERT_FALSE(HasFailure()) << what << ": the plans do not validate";
      // One rank per host other than the root's receives across hosts (its
      // host leader); every other non-root reads its whole buffer once from
      // a same-host parent and copies nothing into it out of a window.
      int readers = 0;
      for (int r = 0; r < n; ++r) {
        bool remote = false;
        const std::uint64_t got = read_bytes(g, *plans[static_cast<std::size_t>(r)], r, &remote);
        EXPECT_FALSE(remote) << what << ": rank " << r << " reads a rank on another host";
        if (got == 0) continue;
        ++readers;
        EXPECT_NE(r, root) << what;
        EXPECT_EQ(got, count * 4) << what << ": rank " << r;
        EXPECT_EQ(copied_into_output(*plans[static_cast<std::size_t>(r)]), 0u) << what << ": rank " << r;
      }
      EXPECT_EQ(readers, n - 2) << what;
      std::vector<std::vector<std::int32_t>> buf(nn);
      for (std::size_t r = 0; r < nn; ++r) buf[r].assign(count, -1);
      for (std::size_t i = 0; i < count; ++i) buf[static_cast<std::size_t>(root)][i] = val(root, i, round);
      ASSERT_TRUE(sim.run(plans, [&](int r) -> FakeRanks::Io {
        void* mine = buf[static_cast<std::size_t>(r)].data();
        return r == root ? FakeRanks::Io{mine, nullptr} : FakeRanks::Io{nullptr, mine};
      })) << what;
      for (std::size_t r = 0; r < nn; ++r)
        for (std::size_t i = 0; i < count; ++i)
          ASSERT_EQ(buf[r][i], val(root, i, round)) << what << " rank " << r << " element " << i;
    }
}

INSTANTIATE_TEST_SUITE_P(TwoHosts, HostSingleCopy,
                         ::testing::Values(Case{4, Place::hosts2}, Case{5, Place::hosts2}, Case{6, Place::cyclic},
                                           Case{8, Place::hosts2}));

// Allreduce across hosts with single copy inside each host
// ("hier-single-copy"): every rank reads and folds (L - 1) chunks out of its
// host's send buffers, writes its finished chunk into the L - 1 other outputs
// of its host, and reads nothing from another host; the results match the
// sequential sum for rd (small chunks) and rabenseifner (chunks above
// allreduce_hier_rd_max_bytes) among the hosts.
class HostSingleCopyAllreduce : public ::testing::TestWithParam<Case> {};

TEST_P(HostSingleCopyAllreduce, EveryRankFoldsItsChunkAndWritesItToItsHostAndMatchesTheSum) {
  const int n = GetParam().n;
  const auto nn = static_cast<std::size_t>(n);
  Group g = sc_group(n, GetParam().place);
  auto t = std::make_shared<strata::coll::Tuning>();
  t->allreduce_single_copy_min_bytes = 4096;
  t->allreduce_hier_rd_max_bytes = 16384;  // chunks of 60 KB: recursive halving + doubling among hosts
  g.tuning = t;
  const int per_host = n / 2;
  FakeRanks sim(n, kSlot, 5 + static_cast<std::uint64_t>(n));
  sim.with_flags();
  int round = 0;
  for (std::size_t count : {std::size_t{1025}, std::size_t{15001 * static_cast<std::size_t>(per_host)}}) {
    ++round;
    const std::string what = "n=" + std::to_string(n) + " count=" + std::to_string(count);
    Call c;
    c.kind = Kind::allreduce;
    c.dtype = dag::DataType::i32;
    c.op = dag::ReduceOp::sum;
    c.count = count;
    c.fast_ok = true;
    std::vector<std::shared_ptr<const dag::Plan>> plans;
    ASSERT_NO_THROW(plans = compile_every_rank(g, c)) << what;
    ASSERT_FALSE(HasFailure()) << what << ": the plans do not validate";
    for (int r = 0; r < n; ++r) {
      const dag::Plan& p = *plans[static_cast<std::size_t>(r)];
      EXPECT_EQ(p.algorithm(), "hier-single-copy") << what;
      std::uint64_t read = 0, written = 0;
      for (const dag::Node& nd : p.nodes()) {
        if (nd.kind != dag::NodeKind::read_peer && nd.kind != dag::NodeKind::write_peer) continue;
        EXPECT_EQ(g.host[static_cast<std::size_t>(nd.peer)], g.host[static_cast<std::size_t>(r)])
            << what << ": rank " << r << " reaches into another host";
        (nd.kind == dag::NodeKind::read_peer ? read : written) +=
            nd.kind == dag::NodeKind::read_peer ? nd.dst.len : nd.src.len;
      }
      // Its chunk (count / L elements, +1 for the first count % L) from / to each of L - 1 members.
      const std::uint64_t chunk_lo = count / static_cast<std::size_t>(per_host) * 4;
      EXPECT_GE(read, chunk_lo * static_cast<std::uint64_t>(per_host - 1)) << what << " rank " << r;
      EXPECT_LE(read, (chunk_lo + 4) * static_cast<std::uint64_t>(per_host - 1)) << what << " rank " << r;
      EXPECT_EQ(written, read) << what << " rank " << r;
    }
    std::vector<std::vector<std::int32_t>> in(nn), out(nn);
    for (std::size_t r = 0; r < nn; ++r) {
      in[r].resize(count);
      out[r].assign(count, -7);
      for (std::size_t i = 0; i < count; ++i) in[r][i] = static_cast<std::int32_t>((r + 1) * 1000 + i % 977 + round);
    }
    ASSERT_TRUE(sim.run(plans, [&](int r) -> FakeRanks::Io {
      return {in[static_cast<std::size_t>(r)].data(), out[static_cast<std::size_t>(r)].data()};
    })) << what;
    for (std::size_t i = 0; i < count; ++i) {
      std::int32_t want = 0;
      for (std::size_t r = 0; r < nn; ++r) want += in[r][i];
      for (std::size_t r = 0; r < nn; ++r) ASSERT_EQ(out[r][i], want) << what << " rank " << r << " element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TwoHosts, HostSingleCopyAllreduce,
                         ::testing::Values(Case{4, Place::hosts2}, Case{6, Place::cyclic}, Case{8, Place::hosts2}));

// Uneven hosts, in place or a non-commutative operator: the window algorithms.
TEST(HostSingleCopyAllreduceOff, UnevenHostsInPlaceOrOrderedOperatorsKeepTheWindowAlgorithms) {
  auto algo = [](const Group& g0, bool in_place, bool ordered) {
    Group g = g0;
    Call c;
    c.kind = Kind::allreduce;
    c.dtype = dag::DataType::i32;
    c.count = 1 << 16;
    c.fast_ok = true;
    c.in_place = in_place;
    dag::UserReduce u;
    if (ordered) {
      u.elem_size = 4;
      u.commutative = false;
      u.name = "first";
      u.fn = [](const void* a, const void*, void* d, std::size_t k) { std::memmove(d, a, 4 * k); };
      c.user_op = std::make_shared<dag::UserReduce>(u);
    }
    return strata::coll::compile(g, c, 1)->algorithm();
  };
  EXPECT_EQ(algo(sc_group(4, Place::hosts2), false, false), "hier-single-copy") << "the case the others differ from";
  EXPECT_NE(algo(sc_group(5, Place::hosts2), false, false), "hier-single-copy") << "2 + 3 members";
  EXPECT_NE(algo(sc_group(4, Place::hosts2), true, false), "hier-single-copy") << "in place";
  EXPECT_NE(algo(sc_group(4, Place::hosts2), false, true), "hier-single-copy") << "non-commutative";
  Group off = sc_group(4, Place::hosts2);
  off.publish_word = 0;
  EXPECT_NE(algo(off, false, false), "hier-single-copy") << "STRATA_SINGLE_COPY=off";
}

// Allgather(v) across hosts with single copy inside each host
// ("hier-single-copy"): the i-th members of all hosts allgather their blocks
// over the windows (puts only to other hosts), every rank reads the blocks of
// its same-host members' columns out of their buffers (read_peer only from
// its own host) and copies out of its window only the H - 1 blocks that
// crossed hosts; the results match every rank's blocks, also in place, with
// uneven allgatherv blocks and blocks of several fragments.
struct HostMap {
  const char* name;
  std::vector<int> host;  // communicator rank -> host id
};

Group host_map_group(const std::vector<int>& host) {
  Group g = sc_group(static_cast<int>(host.size()), Place::one);
  g.host = host;
  return g;
}

// Bytes of rank r's nodes by kind: read_peer (and whether one reads another
// host), put_with_signal to a same-host peer, copies out of the window into recv.
// Also the reads-done protocol: the ranks whose reads-done word it waits for
// (the plans are compiled for credit slot 1) and whether it raises its own.
struct Moved {
  std::uint64_t read = 0, put_same_host = 0, put_other_host = 0, window_copy = 0;
  bool read_remote = false;
  std::set<int> waits_reads_done_of;
  bool says_reads_done = false;
};

Moved moved_by(const Group& g, const dag::Plan& p, int r) {
  Moved m;
  const int host = g.host[static_cast<std::size_t>(r)];
  const std::uint32_t reads_done = g.publish_word + dag::kPublishWords * 1 + 1;
  for (const dag::Node& nd : p.nodes()) {
    if (nd.kind == dag::NodeKind::flag_wait && nd.slot == reads_done) m.waits_reads_done_of.insert(nd.peer);
    if (nd.kind == dag::NodeKind::flag_set && nd.slot == reads_done) m.says_reads_done = true;
    if (nd.kind == dag::NodeKind::read_peer) {
      m.read += nd.dst.len;
      if (g.host[static_cast<std::size_t>(nd.peer)] != host) m.read_remote = true;
    } else if (nd.kind == dag::NodeKind::put_with_signal) {
      (g.host[static_cast<std::size_t>(nd.peer)] == host ? m.put_same_host : m.put_other_host) += nd.src.len;
    } else if (nd.kind == dag::NodeKind::copy && nd.dst.buf.kind == dag::BufferKind::output && nd.dst.buf.id == 0 &&
               nd.src.buf.kind == dag::BufferKind::output && nd.src.buf.id == 1) {
      m.window_copy += nd.dst.len;
    }
  }
  return m;
}

Call allgather(std::size_t count) {
  Call c;
  c.kind = Kind::allgather;
  c.dtype = dag::DataType::i32;
  c.count = count;
  c.fast_ok = true;
  return c;
}

std::int32_t block_val(int owner, std::size_t i, int round) {
  return static_cast<std::int32_t>(owner * 1000003 + round * 31 + static_cast<int>(i % 7919) + 1);
}

void PrintTo(const HostMap& m, std::ostream* os) { *os << m.name; }

class HostSingleCopyAllgather : public ::testing::TestWithParam<HostMap> {};

TEST_P(HostSingleCopyAllgather, SameHostBlocksAreReadOnceAndTheResultHoldsEveryBlock) {
  const std::vector<int>& hostmap = GetParam().host;
  const int n = static_cast<int>(hostmap.size());
  const auto nn = static_cast<std::size_t>(n);
  const Group g = host_map_group(hostmap);
  FakeRanks sim(n, kSlot, 23 + static_cast<std::uint64_t>(n));
  sim.with_flags();
  int round = 0;
  // 20 KB blocks: one fragment; 120 KB blocks: four 32 KiB fragments through the window's two regions;
  // allgatherv with blocks of 5000 .. 5000 + 1000 (n - 1) elements at shuffled displacements; in place.
  struct Shape {
    std::size_t count;
    bool v;
    bool in_place;
  };
  for (const Shape sh : {Shape{5000, false, false}, Shape{30000, false, false}, Shape{30000, false, true},
                         Shape{5000, true, false}, Shape{7000, true, true}}) {
    ++round;
    const std::string what = std::string(GetParam().name) + " count=" + std::to_string(sh.count) +
                             (sh.v ? " allgatherv" : "") + (sh.in_place ? " in place" : "");
    Call c = allgather(sh.count);
    c.in_place = sh.in_place;
    std::vector<std::size_t> counts(nn, sh.count), displs(nn);
    std::size_t total = 0;
    if (sh.v) {
      c.kind = Kind::allgatherv;
      for (std::size_t r = 0; r < nn; ++r) counts[r] = sh.count + 1000 * r;
      for (std::size_t k = 0; k < nn; ++k) {  // blocks stored in reverse rank order
        const std::size_t r = nn - 1 - k;
        displs[r] = total;
        total += counts[r];
      }
      c.counts = counts;
      c.displs = displs;
    } else {
      for (std::size_t r = 0; r < nn; ++r) displs[r] = r * sh.count;
      total = nn * sh.count;
    }
    std::vector<std::shared_ptr<const dag::Plan>> plans;
    ASSERT_NO_THROW(plans = compile_every_rank(g, c)) << what;
    ASSERT_FALSE(HasFailure()) << what << ": the plans do not validate";
    for (int r = 0; r < n; ++r) {
      const auto ur = static_cast<std::size_t>(r);
      const dag::Plan& p = *plans[ur];
      EXPECT_EQ(p.algorithm(), "hier-single-copy") << what;
      const Moved m = moved_by(g, p, r);
      // Read: every block of the other same-host members' columns; across hosts: the own column's blocks.
      std::uint64_t same_host_columns = 0, column = 0;
      std::size_t li = 0;
      for (std::size_t q = 0; q < ur; ++q) li += hostmap[q] == hostmap[ur] ? 1 : 0;
      for (std::size_t q = 0; q < nn; ++q) {
        std::size_t lq = 0;  // q's index on its host
        for (std::size_t o = 0; o < q; ++o) lq += hostmap[o] == hostmap[q] ? 1 : 0;
        if (lq == li && q != ur) column += counts[q] * 4;
        if (lq != li) same_host_columns += counts[q] * 4;
      }
      EXPECT_FALSE(m.read_remote) << what << ": rank " << r << " reads a rank on another host";
      EXPECT_EQ(m.read, same_host_columns) << what << ": rank " << r;
      EXPECT_EQ(m.put_same_host, 0u) << what << ": rank " << r << " puts into a same-host window";
      EXPECT_EQ(m.window_copy, column) << what << ": rank " << r << " copies out of its window";
      EXPECT_GT(m.put_other_host, 0u) << what << ": rank " << r;
      std::set<int> host_peers;
      for (int q = 0; q < n; ++q)
        if (q != r && hostmap[static_cast<std::size_t>(q)] == hostmap[ur]) host_peers.insert(q);
      EXPECT_EQ(m.waits_reads_done_of, host_peers) << what << ": rank " << r << " ends before its readers are done";
      EXPECT_TRUE(m.says_reads_done) << what << ": rank " << r;
      EXPECT_EQ(same_host_columns + column + counts[ur] * 4, total * 4) << what;
    }
    std::vector<std::vector<std::int32_t>> in(nn), out(nn);
    for (std::size_t r = 0; r < nn; ++r) {
      in[r].resize(counts[r]);
      for (std::size_t i = 0; i < counts[r]; ++i) in[r][i] = block_val(static_cast<int>(r), i, round);
      out[r].assign(total, -1);
      if (sh.in_place) std::memcpy(out[r].data() + displs[r], in[r].data(), counts[r] * 4);
    }
    ASSERT_TRUE(sim.run(plans, [&](int r) -> FakeRanks::Io {
      const auto ur = static_cast<std::size_t>(r);
      return {sh.in_place ? nullptr : in[ur].data(), out[ur].data()};
    })) << what;
    for (std::size_t r = 0; r < nn; ++r)
      for (std::size_t q = 0; q < nn; ++q)
        for (std::size_t i = 0; i < counts[q]; ++i)
          ASSERT_EQ(out[r][displs[q] + i], block_val(static_cast<int>(q), i, round))
              << what << ": rank " << r << ", block " << q << ", element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Hosts, HostSingleCopyAllgather,
                         ::testing::Values(HostMap{"block_2x2", {0, 0, 1, 1}}, HostMap{"cyclic_2x2", {0, 1, 0, 1}},
                                           HostMap{"block_2x4", {0, 0, 0, 0, 1, 1, 1, 1}},
                                           HostMap{"cyclic_2x4", {0, 1, 0, 1, 0, 1, 0, 1}},
                                           HostMap{"block_3x2", {0, 0, 1, 1, 2, 2}},
                                           HostMap{"cyclic_3x2", {0, 1, 2, 0, 1, 2}},
                                           HostMap{"mixed_2x3", {1, 0, 0, 1, 1, 0}}),
                         [](const ::testing::TestParamInfo<HostMap>& pi) { return std::string(pi.param.name); });

// Where the allgather row does not apply: hosts of different sizes, one host,
// blocks outside sym_single_copy_min_bytes .. max_bytes, no publication
// records, shared buffers, a named algorithm; named, it explains what it needs.
TEST(HostSingleCopyAllgatherOff, UnevenHostsOneHostSizesAndNamedCallsKeepTheOtherRows) {
  auto algo = [](const Group& g, const Call& c) { return strata::coll::compile(g, c, 1)->algorithm(); };
  const Group g = sc_group(4, Place::hosts2);
  EXPECT_EQ(algo(g, allgather(5000)), "hier-single-copy") << "the case the others differ from";
  EXPECT_EQ(algo(sc_group(8, Place::cyclic), allgather(5000)), "hier-single-copy") << "4 + 4 members, cyclic";
  EXPECT_NE(algo(sc_group(5, Place::hosts2), allgather(5000)), "hier-single-copy") << "2 + 3 members";
  EXPECT_NE(algo(host_map_group({0, 1, 1, 2, 2, 2}), allgather(5000)), "hier-single-copy") << "1 + 2 + 3 members";
  EXPECT_NE(algo(host_map_group({0, 1, 2}), allgather(5000)), "hier-single-copy") << "one member per host";
  EXPECT_EQ(algo(sc_group(4, Place::one), allgather(5000)), "single-copy") << "one host: the one-host plan";
  EXPECT_NE(algo(g, allgather(1000)), "hier-single-copy") << "4 KB: below sym_single_copy_min_bytes";
  EXPECT_NE(algo(g, allgather(40000)), "hier-single-copy") << "160 KB: above sym_single_copy_max_bytes";
  Group off = g;
  off.publish_word = 0;
  EXPECT_NE(algo(off, allgather(5000)), "hier-single-copy") << "STRATA_SINGLE_COPY=off";
  auto t = std::make_shared<strata::coll::Tuning>();
  t->sym_single_copy_max_bytes = 0;
  Group none = g;
  none.tuning = t;
  EXPECT_NE(algo(none, allgather(5000)), "hier-single-copy") << "sym_single_copy_max_bytes = 0 turns it off";
  Call shared = allgather(5000);
  shared.shared_buffers = true;
  EXPECT_NE(algo(g, shared), "hier-single-copy") << "shared buffers";
  Call named = allgather(5000);
  named.fast_ok = false;
  named.algo.name = "ring";
  EXPECT_EQ(algo(g, named), "ring") << "a caller's choice";
  // Named: any size (one 1 MB block here), refused with a reason where it cannot run.
  Call hsc = allgather(250000);
  hsc.fast_ok = false;
  hsc.algo.name = "hier-single-copy";
  EXPECT_EQ(algo(g, hsc), "hier-single-copy");
  Call empty = hsc;
  empty.count = 0;
  EXPECT_NO_THROW(compile_every_rank(g, empty)) << "no bytes: publication and reads-done words only";
  for (const Group& bad : {off, sc_group(5, Place::hosts2), sc_group(4, Place::one)}) {
    std::string m = "no error";
    try {
      (void)algo(bad, hsc);
    } catch (const strata::Error& e) {
      m = e.what();
      EXPECT_EQ(e.errc(), strata::Errc::unsupported) << m;
    }
    EXPECT_NE(m.find("'hier-single-copy' needs"), std::string::npos) << m;
  }
}

// Where single copy does not apply, the edges move data through the windows:
// below the broadcast window's minimum, a call that named its algorithm, a
// persistent (direct) plan, a group without publication records, one host.
TEST(HostSingleCopyOff, SmallNamedDirectOrUnavailableCallsReadNothing) {
  auto reads = [](const Group& g, const Call& c) {
    std::uint64_t sum = 0;
    for (const auto& p : compile_every_rank(g, c))
      for (const dag::Node& nd : p->nodes())
        if (nd.kind == dag::NodeKind::read_peer) sum += nd.dst.len;
    return sum;
  };
  const Group g = sc_group(4, Place::hosts2);
  EXPECT_GT(reads(g, bcast(0, 5000)), 0u) << "the case the others differ from";
  EXPECT_EQ(reads(g, bcast(0, 1000)), 0u) << "4 KB: below bcast_single_copy_min_bytes";
  Call named = bcast(0, 5000);
  named.fast_ok = false;
  EXPECT_EQ(reads(g, named), 0u) << "a caller's choice keeps the window protocol";
  Group off = g;
  off.publish_word = 0;
  EXPECT_EQ(reads(off, bcast(0, 5000)), 0u) << "no publication records (STRATA_SINGLE_COPY=off)";
  auto t = std::make_shared<strata::coll::Tuning>();
  t->bcast_single_copy_max_bytes = 0;
  Group none = g;
  none.tuning = t;
  EXPECT_EQ(reads(none, bcast(0, 5000)), 0u) << "bcast_single_copy_max_bytes = 0 turns it off";
  auto high = std::make_shared<strata::coll::Tuning>();
  high->bcast_host_single_copy_min_bytes = 32768;
  Group later = g;
  later.tuning = high;
  EXPECT_EQ(reads(later, bcast(0, 5000)), 0u) << "20 KB: below bcast_host_single_copy_min_bytes";
  EXPECT_GT(reads(later, bcast(0, 10000)), 0u) << "40 KB: from bcast_host_single_copy_min_bytes";
}

}  // namespace
