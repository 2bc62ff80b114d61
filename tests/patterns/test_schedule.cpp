// Step schedules simulated symbolically for n = 1..33 (sets of block ids per rank).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "patterns/schedule.hpp"

namespace sp = strata::patterns;

namespace {

using Builder = std::function<void(int, int, sp::Schedule&)>;

std::vector<sp::Schedule> build_all(int n, const Builder& b) {
  std::vector<sp::Schedule> s(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) b(r, n, s[static_cast<std::size_t>(r)]);
  return s;
}

std::vector<int> blocks(const sp::Schedule& s, sp::View<sp::BlockRange> rs) {
  std::vector<int> out;
  for (sp::BlockRange b : rs) {
    EXPECT_GE(b.first, 0);
    EXPECT_GT(b.count, 0);
    EXPECT_LE(b.first + b.count, s.num_blocks());
    for (int i = 0; i < b.count; ++i) out.push_back(b.first + i);
  }
  return out;
}

// Same step counts everywhere; every send matched by a receive at the same step
// (and vice versa) with the same number of blocks; same block ids unless the
// space is send_recv (there the sender's block is the destination and the
// receiver's the source).
void check_matching(const std::vector<sp::Schedule>& all, const std::string& ctx) {
  const int n = static_cast<int>(all.size());
  const std::size_t steps = all[0].steps().size();
  for (int r = 0; r < n; ++r) {
    const sp::Schedule& s = all[static_cast<std::size_t>(r)];
    ASSERT_EQ(s.steps().size(), steps) << ctx;
    for (std::size_t i = 0; i < steps; ++i) {
      const sp::Step& st = s.steps()[i];
      if (st.send_to >= 0) {
        ASSERT_LT(st.send_to, n);
        ASSERT_NE(st.send_to, r) << ctx;
        const sp::Schedule& peer = all[static_cast<std::size_t>(st.send_to)];
        const sp::Step& ps = peer.steps()[i];
        ASSERT_EQ(ps.recv_from, r) << ctx << " step " << i << " rank " << r;
        const std::vector<int> sent = blocks(s, s.send_ranges(st));
        const std::vector<int> got = blocks(peer, peer.recv_ranges(ps));
        ASSERT_FALSE(sent.empty()) << ctx;
        if (s.space() == sp::BlockSpace::send_recv) {
          ASSERT_EQ(sent, std::vector<int>{st.send_to}) << ctx;
          ASSERT_EQ(got, std::vector<int>{r}) << ctx;
        } else {
          ASSERT_EQ(sent, got) << ctx << " step " << i << " rank " << r;
        }
      } else {
        ASSERT_TRUE(s.send_ranges(st).empty()) << ctx;
      }
      if (st.recv_from >= 0) {
        ASSERT_LT(st.recv_from, n);
        ASSERT_EQ(all[static_cast<std::size_t>(st.recv_from)].steps()[i].send_to, r) << ctx;
      } else {
        ASSERT_TRUE(s.recv_ranges(st).empty()) << ctx;
      }
    }
  }
}

int rd_steps(int n) { return sp::ceil_log2(sp::floor_pow2(n)) + (sp::floor_pow2(n) == n ? 0 : 2); }

// Allgather: every rank starts with its block; each block arrives exactly once; all end with all.
void simulate_allgather(const std::vector<sp::Schedule>& all, const std::string& ctx) {
  const int n = static_cast<int>(all.size());
  std::vector<std::vector<bool>> have(static_cast<std::size_t>(n), std::vector<bool>(static_cast<std::size_t>(n)));
  for (int r = 0; r < n; ++r) have[static_cast<std::size_t>(r)][static_cast<std::size_t>(r)] = true;
  for (std::size_t i = 0; i < all[0].steps().size(); ++i) {
    auto before = have;
    for (int r = 0; r < n; ++r) {
      const sp::Schedule& s = all[static_cast<std::size_t>(r)];
      const sp::Step& st = s.steps()[i];
      for (int b : blocks(s, s.send_ranges(st)))
        ASSERT_TRUE(before[static_cast<std::size_t>(r)][static_cast<std::size_t>(b)]) << ctx << " sends missing block";
      for (int b : blocks(s, s.recv_ranges(st))) {
        ASSERT_EQ(st.action, sp::RecvAction::copy);
        ASSERT_FALSE(before[static_cast<std::size_t>(r)][static_cast<std::size_t>(b)])
            << ctx << " duplicate block " << b;
        have[static_cast<std::size_t>(r)][static_cast<std::size_t>(b)] = true;
      }
    }
  }
  for (int r = 0; r < n; ++r)
    for (int b = 0; b < n; ++b) ASSERT_TRUE(have[static_cast<std::size_t>(r)][static_cast<std::size_t>(b)]) << ctx;
}

// Reduce-scatter: contributions per (rank, block) as a bit mask; a reduce must
// not count a contribution twice; rank r ends with block r (block 0 for
// BlockSpace::whole) from everyone.
void simulate_reduce_scatter(const std::vector<sp::Schedule>& all, const std::string& ctx) {
  const bool whole = all[0].space() == sp::BlockSpace::whole;
  const int n = static_cast<int>(all.size());
  const auto un = static_cast<std::size_t>(n);
  std::vector<std::vector<std::uint64_t>> mask(un, std::vector<std::uint64_t>(un));
  for (std::size_t r = 0; r < un; ++r)
    for (std::size_t b = 0; b < un; ++b) mask[r][b] = std::uint64_t{1} << r;
  for (std::size_t i = 0; i < all[0].steps().size(); ++i) {
    const auto before = mask;
    for (int r = 0; r < n; ++r) {
      const sp::Schedule& s = all[static_cast<std::size_t>(r)];
      const sp::Step& st = s.steps()[i];
      if (st.recv_from < 0) continue;
      for (int b : blocks(s, s.recv_ranges(st))) {
        const std::uint64_t in = before[static_cast<std::size_t>(st.recv_from)][static_cast<std::size_t>(b)];
        std::uint64_t& mine = mask[static_cast<std::size_t>(r)][static_cast<std::size_t>(b)];
        if (st.action == sp::RecvAction::reduce) {
          ASSERT_EQ(mine & in, 0u) << ctx << " contribution reduced twice, step " << i;
          mine |= in;
        } else {
          mine = in;
        }
      }
    }
  }
  const std::uint64_t full = n == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1;
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(mask[static_cast<std::size_t>(r)][whole ? 0 : static_cast<std::size_t>(r)], full) << ctx << " r=" << r;
}

}  // namespace

TEST(Schedule, RingAllgather) {
  for (int n = 1; n <= 33; ++n) {
    const auto all = build_all(n, sp::ring_allgather);
    EXPECT_EQ(static_cast<int>(all[0].steps().size()), n - 1);
    check_matching(all, "ring allgather n=" + std::to_string(n));
    simulate_allgather(all, "ring allgather n=" + std::to_string(n));
    for (int r = 0; r < n; ++r)
      for (std::size_t s = 0; s < all[static_cast<std::size_t>(r)].steps().size(); ++s) {
        const sp::Step& st = all[static_cast<std::size_t>(r)].steps()[s];
        EXPECT_EQ(st.send_to, (r + 1) % n);
        EXPECT_EQ(all[static_cast<std::size_t>(r)].send_ranges(st)[0].first, sp::mod(r - static_cast<int>(s), n));
        EXPECT_EQ(all[static_cast<std::size_t>(r)].recv_ranges(st)[0].first, sp::mod(r - static_cast<int>(s) - 1, n));
      }
  }
}

TEST(Schedule, RecursiveDoublingAllgather) {
  for (int n = 1; n <= 33; ++n) {
    const auto all = build_all(n, sp::recursive_doubling_allgather);
    EXPECT_EQ(static_cast<int>(all[0].steps().size()), rd_steps(n)) << n;
    check_matching(all, "rd allgather n=" + std::to_string(n));
    simulate_allgather(all, "rd allgather n=" + std::to_string(n));
    // Every transfer is at most two contiguous ranges.
    for (const auto& s : all)
      for (const sp::Step& st : s.steps()) EXPECT_LE(s.send_ranges(st).size(), 2u);
  }
}

TEST(Schedule, BruckAllgather) {
  for (int n = 1; n <= 33; ++n) {
    const auto all = build_all(n, sp::bruck_allgather);
    EXPECT_EQ(static_cast<int>(all[0].steps().size()), sp::ceil_log2(n));
    check_matching(all, "bruck allgather n=" + std::to_string(n));
    simulate_allgather(all, "bruck allgather n=" + std::to_string(n));
  }
}

TEST(Schedule, RingReduceScatter) {
  for (int n = 1; n <= 33; ++n) {
    const auto all = build_all(n, sp::ring_reduce_scatter);
    EXPECT_EQ(static_cast<int>(all[0].steps().size()), n - 1);
    EXPECT_FALSE(all[0].rank_ordered());
    check_matching(all, "ring rs n=" + std::to_string(n));
    simulate_reduce_scatter(all, "ring rs n=" + std::to_string(n));
  }
}

TEST(Schedule, RecursiveHalvingReduceScatter) {
  for (int n = 1; n <= 33; ++n) {
    const auto all = build_all(n, sp::recursive_halving_reduce_scatter);
    EXPECT_EQ(static_cast<int>(all[0].steps().size()), rd_steps(n)) << n;
    check_matching(all, "rh rs n=" + std::to_string(n));
    simulate_reduce_scatter(all, "rh rs n=" + std::to_string(n));
  }
}

TEST(Schedule, RecursiveDoublingAllreduceIsRankOrdered) {
  for (int n = 1; n <= 33; ++n) {
    const auto all = build_all(n, sp::recursive_doubling_allreduce);
    const std::string ctx = "rd allreduce n=" + std::to_string(n);
    EXPECT_EQ(static_cast<int>(all[0].steps().size()), rd_steps(n));
    EXPECT_TRUE(all[0].rank_ordered());
    check_matching(all, ctx);
    simulate_reduce_scatter(all, ctx);  // checks no double counting; block 0 == whole vector
    // Symbolic non-commutative op: concatenation in rank order.
    std::vector<std::string> v(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) v[static_cast<std::size_t>(r)] = std::to_string(r);
    for (std::size_t i = 0; i < all[0].steps().size(); ++i) {
      const auto before = v;
      for (int r = 0; r < n; ++r) {
        const sp::Step& st = all[static_cast<std::size_t>(r)].steps()[i];
        if (st.recv_from < 0) continue;
        const std::string& in = before[static_cast<std::size_t>(st.recv_from)];
        std::string& mine = v[static_cast<std::size_t>(r)];
        if (st.action == sp::RecvAction::copy) {
          mine = in;
        } else {
          mine = st.recv_is_left ? in + "," + mine : mine + "," + in;
        }
      }
    }
    std::string want;
    for (int r = 0; r < n; ++r) want += (r ? "," : "") + std::to_string(r);
    for (int r = 0; r < n; ++r) ASSERT_EQ(v[static_cast<std::size_t>(r)], want) << ctx;
  }
}

TEST(Schedule, BruckAlltoallDeliversEveryColumn) {
  for (int n = 1; n <= 33; ++n) {
    const auto all = build_all(n, sp::bruck_alltoall);
    const std::string ctx = "bruck alltoall n=" + std::to_string(n);
    EXPECT_EQ(static_cast<int>(all[0].steps().size()), sp::ceil_log2(n));
    check_matching(all, ctx);
    // work[r][i] = (src, dst); initially (r, r+i).
    using Blk = std::pair<int, int>;
    std::vector<std::vector<Blk>> work(static_cast<std::size_t>(n), std::vector<Blk>(static_cast<std::size_t>(n)));
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < n; ++i) work[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)] = {r, (r + i) % n};
    for (std::size_t s = 0; s < all[0].steps().size(); ++s) {
      const auto before = work;
      for (int r = 0; r < n; ++r) {
        const sp::Schedule& sc = all[static_cast<std::size_t>(r)];
        const sp::Step& st = sc.steps()[s];
        for (int b : blocks(sc, sc.recv_ranges(st)))
          work[static_cast<std::size_t>(r)][static_cast<std::size_t>(b)] =
              before[static_cast<std::size_t>(st.recv_from)][static_cast<std::size_t>(b)];
      }
    }
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < n; ++i)
        ASSERT_EQ(work[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)], Blk(sp::mod(r - i, n), r)) << ctx;
  }
}

TEST(Schedule, PairwiseAlltoallSendsAndReceivesOneBlockPerStep) {
  for (int n = 1; n <= 33; ++n) {
    const auto all = build_all(n, sp::pairwise_alltoall);
    const std::string ctx = "pairwise n=" + std::to_string(n);
    EXPECT_EQ(static_cast<int>(all[0].steps().size()), n - 1);
    check_matching(all, ctx);
    // Everyone ends with its column: recv[r][src] = (src, r), each exactly once.
    std::vector<std::vector<int>> got(static_cast<std::size_t>(n), std::vector<int>(static_cast<std::size_t>(n), 0));
    for (int r = 0; r < n; ++r) {
      got[static_cast<std::size_t>(r)][static_cast<std::size_t>(r)] = 1;  // local copy
      const sp::Schedule& sc = all[static_cast<std::size_t>(r)];
      for (std::size_t s = 0; s < sc.steps().size(); ++s) {
        const sp::Step& st = sc.steps()[s];
        EXPECT_EQ(st.send_to, (r + static_cast<int>(s) + 1) % n);
        EXPECT_EQ(st.recv_from, sp::mod(r - static_cast<int>(s) - 1, n));
        for (int b : blocks(sc, sc.recv_ranges(st))) ++got[static_cast<std::size_t>(r)][static_cast<std::size_t>(b)];
      }
    }
    for (int r = 0; r < n; ++r)
      for (int s = 0; s < n; ++s) ASSERT_EQ(got[static_cast<std::size_t>(r)][static_cast<std::size_t>(s)], 1) << ctx;
    // At every step each rank is the target of exactly one send.
    for (std::size_t s = 0; s + 1 < static_cast<std::size_t>(n); ++s) {
      std::vector<int> in(static_cast<std::size_t>(n), 0);
      for (int r = 0; r < n; ++r) ++in[static_cast<std::size_t>(all[static_cast<std::size_t>(r)].steps()[s].send_to)];
      for (int c : in) ASSERT_EQ(c, 1) << ctx;
    }
  }
}

TEST(Schedule, RebuildingReusesTheSameObject) {
  sp::Schedule s;
  sp::bruck_alltoall(3, 17, s);
  const std::size_t first = s.steps().size();
  sp::ring_allgather(0, 5, s);
  EXPECT_EQ(s.steps().size(), 4u);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.size(), 5);
  EXPECT_EQ(first, 5u);
  EXPECT_THROW(sp::ring_allgather(5, 5, s), std::invalid_argument);
}

TEST(TokenRing, OrderIsRootPlusOneAroundTheRing) {
  for (int n = 1; n <= 33; ++n) {
    for (int root = 0; root < n; ++root) {
      std::vector<int> at(static_cast<std::size_t>(n > 1 ? n - 1 : 0), -1);
      for (int r = 0; r < n; ++r) {
        const sp::TokenRingRole role = sp::token_ring(r, n, root);
        if (r == root) {
          EXPECT_EQ(role.position, -1);
          EXPECT_EQ(role.token_from, -1);
          EXPECT_EQ(role.token_to, -1);
          continue;
        }
        ASSERT_GE(role.position, 0);
        ASSERT_LT(role.position, n - 1);
        ASSERT_EQ(at[static_cast<std::size_t>(role.position)], -1);
        at[static_cast<std::size_t>(role.position)] = r;
      }
      for (int p = 0; p < n - 1; ++p) {
        const int r = at[static_cast<std::size_t>(p)];
        EXPECT_EQ(r, (root + 1 + p) % n);
        const sp::TokenRingRole role = sp::token_ring(r, n, root);
        EXPECT_EQ(role.token_from, p == 0 ? -1 : at[static_cast<std::size_t>(p - 1)]);
        EXPECT_EQ(role.token_to, p == n - 2 ? -1 : at[static_cast<std::size_t>(p + 1)]);
      }
    }
  }
}

TEST(TokenRing, SplitFollowsSeed000Rules) {
  EXPECT_EQ(sp::token_split(1000, 4096, false).before_pass, 0u);  // small: pass first
  EXPECT_EQ(sp::token_split(1000, 4096, false).after_pass, 1000u);
  EXPECT_EQ(sp::token_split(100000, 4096, true).before_pass, 0u);  // same host as root: pass first
  const sp::TokenSplit big = sp::token_split(100000, 4096, false);
  EXPECT_EQ(big.before_pass, 100000u - 4096u);
  EXPECT_EQ(big.after_pass, 4096u);
  for (std::size_t b : {std::size_t{0}, std::size_t{1}, std::size_t{4096}, std::size_t{4097}, std::size_t{1} << 24}) {
    const sp::TokenSplit s = sp::token_split(b, 4096, false);
    EXPECT_EQ(s.before_pass + s.after_pass, b);
  }
}
