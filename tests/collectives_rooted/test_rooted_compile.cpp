// Gather(v) / scatter(v) compilers without processes: every rank's slice is
// compiled and validated across ranks (every signal has its wait, counts
// match), for several group shapes (flat, hierarchical, cyclic placement),
// algorithms, fragmentations and roots; a subset is executed over the fake
// transport (random release order) and checked against a sequential reference.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../common/fake_ranks.hpp"
#include "strata/collectives/compile.hpp"
#include "strata/dag/executor.hpp"

namespace {

using strata::coll::Call;
using strata::coll::Group;
using strata::coll::Kind;
namespace dag = strata::dag;

using fake_ranks::make_group;
using fake_ranks::Place;

struct Algo {
  const char* name;  // compiler algorithm name
  bool hierarchical;
  strata::coll::Shape single;
  const char* label;
  int pull = 0;  // 0 push, 1 pull on every level, 2 mixed (host:pull, numa:push, core:pull); scatter only
};

void set_direction(strata::coll::Algorithm& a, int pull) {
  using strata::coll::Direction;
  if (pull == 0) return;
  a.dir_host = a.dir_core = a.dir_single = Direction::pull;
  a.dir_numa = pull == 1 ? Direction::pull : Direction::push;
}

const Algo kAlgos[] = {
    {"tree", true, {strata::coll::Shape::knomial, 2}, "tree"},
    {"single", false, {strata::coll::Shape::knomial, 2}, "single:binomial"},
    {"single", false, {strata::coll::Shape::knomial, 1}, "single:chain"},
    {"single", false, {strata::coll::Shape::binary, 0}, "single:binary"},
    {"single", false, {strata::coll::Shape::knomial, 3}, "single:3"},
    {"flat", false, {strata::coll::Shape::knomial, 2}, "flat"},
    {"ring", false, {strata::coll::Shape::knomial, 2}, "ring"},
    {"tree", true, {strata::coll::Shape::knomial, 2}, "tree pull", 1},
    {"tree", true, {strata::coll::Shape::knomial, 2}, "tree mixed push/pull", 2},
    {"single", false, {strata::coll::Shape::knomial, 2}, "single:binomial pull", 1},
    {"single", false, {strata::coll::Shape::knomial, 1}, "single:chain pull", 1},
};

// Pull applies to scatter(v) only; gather(v) refuses it (tested separately).
bool skip(Kind k, const Algo& a) { return a.pull != 0 && (k == Kind::gather || k == Kind::gatherv); }

bool is_v(Kind k) { return k == Kind::gatherv || k == Kind::scatterv; }
bool is_gather(Kind k) { return k == Kind::gather || k == Kind::gatherv; }

// Counts with zeros and different sizes per rank.
std::vector<std::size_t> vcounts(int n, std::size_t count, int salt) {
  std::vector<std::size_t> c;
  for (int r = 0; r < n; ++r)
    c.push_back((r + salt) % 3 == 1 ? 0 : count + static_cast<std::size_t>((r * 5 + salt) % 7));
  return c;
}

// Displacements in reverse rank order with gaps.
std::vector<std::size_t> vdispls(const std::vector<std::size_t>& counts) {
  std::vector<std::size_t> d(counts.size());
  std::size_t at = 2;
  for (std::size_t i = counts.size(); i-- > 0;) {
    d[i] = at;
    at += counts[i] + 3;
  }
  return d;
}

// One rank's call: v-variants carry counts at the root, and on every rank for
// the tree (the engine broadcasts them); a non-root of flat / ring knows only its count.
Call make_call(Kind k, int n, int rank, int root, std::size_t count, const Algo& a, bool in_place) {
  Call c;
  c.kind = k;
  c.dtype = dag::DataType::i32;
  c.root = root;
  c.in_place = in_place && rank == root;
  c.algo.name = a.name;
  c.algo.hierarchical = a.hierarchical;
  c.algo.single = a.single;
  set_direction(c.algo, a.pull);
  c.count = count;
  if (is_v(k)) {
    const auto counts = vcounts(n, count, root);
    c.count = counts[static_cast<std::size_t>(rank)];
    const bool direct = std::string(a.name) == "flat" || std::string(a.name) == "ring";
    if (rank == root || !direct) {
      c.counts = counts;
      c.displs = vdispls(counts);
    }
  }
  return c;
}

std::vector<std::shared_ptr<const dag::Plan>> compile_ranks(const Group& g0, Kind k, int root, std::size_t count,
                                                            const Algo& a, bool in_place, std::size_t fragment,
                                                            std::size_t halves) {
  std::vector<std::shared_ptr<const dag::Plan>> plans;
  Group g = g0;
  for (int r = 0; r < g.size(); ++r) {
    g.rank = r;
    Call c = make_call(k, g.size(), r, root, count, a, in_place);
    c.algo.fragment = fragment;
    c.algo.halves_threshold = halves;
    plans.push_back(strata::coll::compile(g, c, 1));
  }
  return plans;
}

std::vector<const dag::Plan*> raw(const std::vector<std::shared_ptr<const dag::Plan>>& p) {
  std::vector<const dag::Plan*> r;
  for (const auto& x : p) r.push_back(x.get());
  return r;
}

const Kind kKinds[] = {Kind::gather, Kind::scatter, Kind::gatherv, Kind::scatterv};

TEST(RootedCompile, AllSlicesValidateAcrossRanks) {
  struct Shape {
    int n;
    Place p;
  };
  const Shape shapes[] = {{1, Place::one},   {2, Place::one},    {3, Place::one},    {5, Place::hosts2},
                          {8, Place::numa4}, {8, Place::cyclic}, {7, Place::hosts2}, {11, Place::cyclic}};
  int checked = 0;
  for (const Shape& s : shapes) {
    for (std::size_t slot : {std::size_t{4096}, std::size_t{1} << 20}) {
      const Group g = make_group(s.n, s.p, slot);
      for (Kind k : kKinds)
        for (const Algo& a : kAlgos)
          for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}})
            for (int root : {0, 1, s.n / 2, s.n - 1}) {
              if (root >= s.n || skip(k, a)) continue;
              const std::string what = std::string(strata::coll::to_string(k)) + " " + a.label +
                                       " n=" + std::to_string(s.n) + " place=" + std::to_string(static_cast<int>(s.p)) +
                                       " slot=" + std::to_string(slot) + " count=" + std::to_string(count) +
                                       " root=" + std::to_string(root);
              std::vector<std::shared_ptr<const dag::Plan>> plans;
              ASSERT_NO_THROW(plans = compile_ranks(g, k, root, count, a, root % 2 == 1, 0, 0)) << what;
              const strata::Status st = dag::validate(raw(plans));
              ASSERT_TRUE(st.is_ok()) << what << ": " << st.message();
              // Every put lands inside (every get reads from) the instance's window slot (slot 1) of its peer.
              for (const auto& p : plans) {
                for (const dag::Node& nd : p->nodes()) {
                  if (nd.kind == dag::NodeKind::get) {
                    ASSERT_TRUE(nd.src.offset >= slot && nd.src.offset + nd.src.len <= 2 * slot)
                        << what << ": get outside the slot at " << nd.src.offset << "+" << nd.src.len;
                    continue;
                  }
                  if (nd.kind != dag::NodeKind::put_with_signal && nd.kind != dag::NodeKind::put) continue;
                  ASSERT_TRUE(nd.dst.offset >= slot && nd.dst.offset + nd.dst.len <= 2 * slot)
                      << what << ": put outside the slot at " << nd.dst.offset << "+" << nd.dst.len;
                }
              }
              ++checked;
            }
    }
  }
  EXPECT_GT(checked, 500);
}

TEST(RootedCompile, UniformCallsThroughCompileAll) {
  // compile_all: one Call for every rank (counts known everywhere), strict sync, fragmentations.
  for (int n : {1, 3, 8}) {
    const Group g = make_group(n, Place::numa4, 1 << 16);
    for (Kind k : kKinds)
      for (const Algo& a : kAlgos)
        for (int frag = 0; frag < 3; ++frag) {
          if (skip(k, a)) continue;
          Call c;
          c.kind = k;
          c.dtype = dag::DataType::f64;
          c.count = 5003;
          c.root = n - 1;
          c.entry_all = c.exit_all = frag == 1;
          c.algo.name = a.name;
          c.algo.hierarchical = a.hierarchical;
          c.algo.single = a.single;
          set_direction(c.algo, a.pull);
          if (frag == 1) c.algo.fragment = 4096;
          if (frag == 2) c.algo.halves_threshold = 8192;
          if (is_v(k)) {
            c.counts.assign(static_cast<std::size_t>(n), 5003);
            c.displs = vdispls(c.counts);
          }
          std::vector<std::shared_ptr<const dag::Plan>> plans;
          ASSERT_NO_THROW(plans = strata::coll::compile_all(g, c, 0)) << a.label;
          const strata::Status st = dag::validate(raw(plans));
          EXPECT_TRUE(st.is_ok()) << strata::coll::to_string(k) << " " << a.label << " n=" << n << ": " << st.message();
        }
  }
}

TEST(RootedCompile, RejectsBadLayouts) {
  const Group g = make_group(4, Place::one, 1 << 20);
  Call c;
  c.kind = Kind::gatherv;
  c.dtype = dag::DataType::i32;
  c.count = 2;
  c.counts = {2, 2, 2};
  c.displs = {0, 2, 4};
  auto message = [&](const Call& call) {
    try {
      (void)strata::coll::compile(g, call, 0);
    } catch (const strata::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(c).find("'counts'"), std::string::npos) << message(c);
  c.counts = {2, 2, 2, 2};
  EXPECT_NE(message(c).find("'displs'"), std::string::npos) << message(c);
  c.displs = {0, 2, 3, 6};  // ranks 1 and 2 overlap
  EXPECT_NE(message(c).find("overlap"), std::string::npos) << message(c);
  c.displs = {0, 2, 4, 6};
  EXPECT_EQ(message(c), "no error");
  c.root = 4;
  EXPECT_NE(message(c).find("'root'"), std::string::npos) << message(c);
  c.root = 0;
  c.counts.clear();
  c.displs.clear();
  EXPECT_NE(message(c).find("'counts'"), std::string::npos) << message(c);  // the root must know them
  Group g1 = g;
  g1.rank = 2;
  c.algo.name = "tree";
  try {
    (void)strata::coll::compile(g1, c, 0);
    ADD_FAILURE() << "tree gatherv without counts at a non-root accepted";
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2"), std::string::npos) << e.what();
  }
  c.algo.name = "flat";
  EXPECT_NO_THROW((void)strata::coll::compile(g1, c, 0));
}

TEST(RootedCompile, PullIsRefusedWhereItDoesNotApply) {
  Group g = make_group(4, Place::one, 1 << 20);
  g.rank = 3;
  auto message = [&](Kind k, const char* algo) {
    Call c;
    c.kind = k;
    c.dtype = dag::DataType::i32;
    c.count = 2;
    c.algo.name = algo;
    c.algo.hierarchical = std::string(algo) == "tree";
    set_direction(c.algo, 1);
    try {
      (void)strata::coll::compile(g, c, 0);
    } catch (const strata::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  for (Kind k : {Kind::gather, Kind::gatherv}) {
    const std::string m = message(k, "tree");
    EXPECT_NE(m.find("'direction'"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 3"), std::string::npos) << m;
    EXPECT_NE(m.find(strata::coll::to_string(k)), std::string::npos) << m;
  }
  EXPECT_NE(message(Kind::scatter, "flat").find("'direction'"), std::string::npos);
  EXPECT_NE(message(Kind::scatter, "ring").find("'direction'"), std::string::npos);
  EXPECT_EQ(message(Kind::scatter, "tree"), "no error");
  EXPECT_EQ(message(Kind::scatter, "single"), "no error");
}

// ---------------------------------------------------------------- execution over the fake transport

using fake_ranks::data_or_null;
using fake_ranks::FakeRanks;

std::int32_t val(int r, std::size_t i) {
  return static_cast<std::int32_t>(r * 100000 + static_cast<int>(i % 9973) + 1);
}

struct SimCase {
  int n;
  Place place;
  std::size_t slot;
};

class RootedSim : public ::testing::TestWithParam<SimCase> {};

TEST_P(RootedSim, MatchesSequentialReference) {
  const int n = GetParam().n;
  const auto nn = static_cast<std::size_t>(n);
  const Group g = make_group(n, GetParam().place, GetParam().slot);
  FakeRanks sim(n, GetParam().slot, 11 + static_cast<std::uint64_t>(n));
  for (Kind k : kKinds)
    for (const Algo& a : kAlgos)
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{3001}})
        for (int root = 0; root < n; ++root) {
          if (skip(k, a)) continue;
          const bool in_place = (root + static_cast<int>(count)) % 2 == 1;
          const std::size_t frag = count == 3001 && root == 0 ? 1024 : 0;
          const std::string what = std::string(strata::coll::to_string(k)) + " " + a.label + " n=" + std::to_string(n) +
                                   " count=" + std::to_string(count) + " root=" + std::to_string(root) +
                                   (in_place ? " in-place" : "");
          const auto plans = compile_ranks(g, k, root, count, a, in_place, frag, 0);
          ASSERT_TRUE(dag::validate(raw(plans)).is_ok()) << what;
          // Layout of the rooted buffer.
          std::vector<std::size_t> cnt(nn, count), dsp(nn);
          for (std::size_t r = 0; r < nn; ++r) dsp[r] = r * count;
          if (is_v(k)) {
            cnt = vcounts(n, count, root);
            dsp = vdispls(cnt);
          }
          std::size_t ext = 0;
          for (std::size_t r = 0; r < nn; ++r) ext = std::max(ext, cnt[r] + dsp[r]);
          const auto ur = static_cast<std::size_t>(root);
          std::vector<std::vector<std::int32_t>> send(nn), recv(nn), want(nn);
          if (is_gather(k)) {
            for (std::size_t r = 0; r < nn; ++r)
              for (std::size_t i = 0; i < cnt[r]; ++i) send[r].push_back(val(static_cast<int>(r), i));
            recv[ur].assign(ext + 1, -1);  // +1: never empty at the root
            want[ur] = recv[ur];
            for (std::size_t r = 0; r < nn; ++r)
              for (std::size_t i = 0; i < cnt[r]; ++i) want[ur][dsp[r] + i] = val(static_cast<int>(r), i);
            if (in_place) {
              for (std::size_t i = 0; i < cnt[ur]; ++i) recv[ur][dsp[ur] + i] = val(root, i);
              send[ur].clear();
            }
          } else {
            send[ur].assign(ext + 1, -2);
            for (std::size_t r = 0; r < nn; ++r)
              for (std::size_t i = 0; i < cnt[r]; ++i) send[ur][dsp[r] + i] = val(static_cast<int>(r), i);
            for (std::size_t r = 0; r < nn; ++r) {
              recv[r].assign(cnt[r], -1);
              for (std::size_t i = 0; i < cnt[r]; ++i) want[r].push_back(val(static_cast<int>(r), i));
            }
            if (in_place) {
              recv[ur].clear();
              want[ur].clear();
            }
          }
          // send[r] / recv[r] empty means "not bound".
          ASSERT_TRUE(sim.run(plans, [&](int r) -> FakeRanks::Io {
            const auto q = static_cast<std::size_t>(r);
            return {data_or_null(send[q]), data_or_null(recv[q])};
          })) << what;
          for (std::size_t r = 0; r < nn; ++r) ASSERT_EQ(recv[r], want[r]) << what << " rank " << r;
        }
}

INSTANTIATE_TEST_SUITE_P(Ranks, RootedSim,
                         ::testing::Values(SimCase{1, Place::one, 1 << 20}, SimCase{2, Place::one, 1 << 20},
                                           SimCase{3, Place::one, 4096}, SimCase{5, Place::hosts2, 8192},
                                           SimCase{8, Place::numa4, 1 << 16}, SimCase{8, Place::cyclic, 4096},
                                           SimCase{6, Place::cyclic, 1 << 20}));

}  // namespace
