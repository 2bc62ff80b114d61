// Mapped plans (collectives/src/compile_mapped.cpp, docs/algorithms.md
// "Mapped plans") without processes: every rank's slice compiled for a
// one-host group with mapped windows and window flags, executed over the fake
// transport (random release order, every window bound as mapped) for several
// instances in a row (the slot-reuse guard), against a sequential reference.
// The multi-process runs over the real transports are in test_collectives*.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
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

constexpr std::size_t kSlot = 1 << 16;

Group mapped_group(int n) {
  Group g = fake_ranks::make_group(n, fake_ranks::Place::one, kSlot);
  g.flags = true;
  // The fake windows hold the flag words, then the mapped slots, then
  // (at kSlot) the regular slot run() binds.
  g.mapped_at = fake_ranks::FakeRanks::kFlagBytes;
  g.mapped_word = static_cast<std::uint32_t>(g.mapped_at / 4);
  g.mapped_slot_bytes = kSlot / 2 - fake_ranks::FakeRanks::kFlagBytes;
  return g;
}

// A group whose mapped area is a ring of 8 slots of 2 KiB over 2 credit slots.
Group ring_group(int n) {
  Group g = mapped_group(n);
  g.credits = 2;
  g.mapped_slots = 8;
  g.mapped_slot_bytes = 2048;
  return g;
}

std::vector<std::shared_ptr<const dag::Plan>> compile_mapped(const Group& g, const Call& c) {
  auto plans = strata::coll::compile_all(g, c, 1);
  for (const auto& p : plans) EXPECT_EQ(p->algorithm(), "mapped") << strata::coll::to_string(c.kind);
  return plans;
}

// A non-commutative operator on int32 pairs: (a, b) o (c, d) = (a + c, b * 3 + d) keeps rank order visible.
dag::UserReduce ordered_op() {
  dag::UserReduce u;
  u.elem_size = 8;
  u.commutative = false;
  u.name = "ordered";
  u.fn = [](const void* a, const void* b, void* d, std::size_t count) {
    const auto* x = static_cast<const std::int32_t*>(a);
    const auto* y = static_cast<const std::int32_t*>(b);
    auto* z = static_cast<std::int32_t*>(d);
    for (std::size_t i = 0; i < count; ++i) {
      const std::int32_t s0 = x[2 * i] + y[2 * i];
      const std::int32_t s1 = x[2 * i + 1] * 3 + y[2 * i + 1];
      z[2 * i] = s0;
      z[2 * i + 1] = s1;
    }
  };
  return u;
}

class MappedSim : public ::testing::TestWithParam<int> {};

TEST_P(MappedSim, EveryKindMatchesTheSequentialReferenceOverSeveralInstances) {
  const int n = GetParam();
  const auto nn = static_cast<std::size_t>(n);
  const Group g = mapped_group(n);
  fake_ranks::FakeRanks ranks(n, kSlot, 1234u + static_cast<unsigned>(n));
  ranks.with_flags(g.mapped_at, g.mapped_slot_bytes);
  std::mt19937 rng(77u + static_cast<unsigned>(n));
  auto fill = [&rng](std::vector<std::int32_t>& v) {
    for (auto& e : v) e = static_cast<std::int32_t>(rng() % 1000) - 500;
  };
  for (const std::size_t count : {std::size_t{1}, std::size_t{3}, std::size_t{1000}}) {
    for (int round = 0; round < 3; ++round) {  // back-to-back instances reuse the window slot
      const int root = (round + 1) % n;
      // Allreduce / reduce (sum), in place and not.
      for (const Kind k : {Kind::allreduce, Kind::reduce}) {
        for (const bool in_place : {false, true}) {
          Call c;
          c.kind = k;
          c.count = count;
          c.dtype = dag::DataType::i32;
          c.op = dag::ReduceOp::sum;
          c.root = root;
          c.in_place = in_place;
          c.algo.name = "mapped";
          std::vector<std::vector<std::int32_t>> send(nn, std::vector<std::int32_t>(count)), recv = send;
          for (auto& s : send) fill(s);
          std::vector<std::int32_t> want(count, 0);
          for (const auto& s : send)
            for (std::size_t i = 0; i < count; ++i) want[i] += s[i];
          for (int r = 0; r < n; ++r)
            if (in_place) recv[static_cast<std::size_t>(r)] = send[static_cast<std::size_t>(r)];
          const auto plans = compile_mapped(g, c);
          ASSERT_TRUE(ranks.run(plans, [&](int r) {
            const auto ur = static_cast<std::size_t>(r);
            const bool gets = k == Kind::allreduce || r == root;
            fake_ranks::FakeRanks::Io io;
            io.input = in_place && gets ? nullptr : send[ur].data();
            io.output = gets ? recv[ur].data() : nullptr;
            return io;
          }));
          for (int r = 0; r < n; ++r) {
            if (k != Kind::allreduce && r != root) continue;
            EXPECT_EQ(recv[static_cast<std::size_t>(r)], want)
                << strata::coll::to_string(k) << " n=" << n << " count=" << count << " rank " << r
                << (in_place ? " in place" : "");
          }
        }
      }
      // Broadcast, gather, scatter, allgather, alltoall, reduce_scatter_block, barrier.
      for (const Kind k : {Kind::broadcast, Kind::gather, Kind::scatter, Kind::allgather, Kind::alltoall,
                           Kind::reduce_scatter_block, Kind::barrier}) {
        Call c;
        c.kind = k;
        c.count = k == Kind::barrier ? 0 : count;
        c.dtype = dag::DataType::i32;
        c.op = dag::ReduceOp::sum;
        c.root = root;
        c.algo.name = "mapped";
        const std::size_t per = c.count;
        const bool wide_in = k == Kind::scatter || k == Kind::alltoall || k == Kind::reduce_scatter_block;
        const bool wide_out = k == Kind::gather || k == Kind::allgather || k == Kind::alltoall;
        std::vector<std::vector<std::int32_t>> send(nn, std::vector<std::int32_t>(wide_in ? per * nn : per));
        std::vector<std::vector<std::int32_t>> recv(nn, std::vector<std::int32_t>(wide_out ? per * nn : per, -7));
        for (auto& s : send) fill(s);
        const auto plans = compile_mapped(g, c);
        ASSERT_TRUE(ranks.run(plans, [&](int r) {
          const auto ur = static_cast<std::size_t>(r);
          fake_ranks::FakeRanks::Io io;
          const bool has_in =
              k != Kind::barrier && (k != Kind::broadcast || r == root) && (k != Kind::scatter || r == root);
          const bool has_out =
              k != Kind::barrier && (k != Kind::broadcast || r != root) && (k != Kind::gather || r == root);
          io.input = has_in && per > 0 ? send[ur].data() : nullptr;
          io.output = has_out && per > 0 ? recv[ur].data() : nullptr;
          return io;
        })) << strata::coll::to_string(k);
        for (int r = 0; r < n && per > 0; ++r) {
          const auto ur = static_cast<std::size_t>(r);
          std::vector<std::int32_t> want;
          switch (k) {
            case Kind::broadcast:
              if (r == root) continue;
              want = send[static_cast<std::size_t>(root)];
              break;
            case Kind::gather:
              if (r != root) continue;
              for (const auto& s : send) want.insert(want.end(), s.begin(), s.end());
              break;
            case Kind::scatter:
              want.assign(send[static_cast<std::size_t>(root)].begin() + static_cast<std::ptrdiff_t>(ur * per),
                          send[static_cast<std::size_t>(root)].begin() + static_cast<std::ptrdiff_t>((ur + 1) * per));
              break;
            case Kind::allgather:
              for (const auto& s : send) want.insert(want.end(), s.begin(), s.end());
              break;
            case Kind::alltoall:
              for (const auto& s : send)
                want.insert(want.end(), s.begin() + static_cast<std::ptrdiff_t>(ur * per),
                            s.begin() + static_cast<std::ptrdiff_t>((ur + 1) * per));
              break;
            case Kind::reduce_scatter_block:
              want.assign(per, 0);
              for (const auto& s : send)
                for (std::size_t i = 0; i < per; ++i) want[i] += s[ur * per + i];
              break;
            default:
              break;
          }
          EXPECT_EQ(recv[ur], want) << strata::coll::to_string(k) << " n=" << n << " count=" << count << " rank " << r;
        }
      }
    }
  }
}

TEST_P(MappedSim, NonCommutativeFoldsInRankOrder) {
  const int n = GetParam();
  const auto nn = static_cast<std::size_t>(n);
  const Group g = mapped_group(n);
  fake_ranks::FakeRanks ranks(n, kSlot, 99u);
  ranks.with_flags(g.mapped_at, g.mapped_slot_bytes);
  Call c;
  c.kind = Kind::allreduce;
  c.count = 5;
  c.user_op = std::make_shared<const dag::UserReduce>(ordered_op());
  c.algo.name = "mapped";
  std::vector<std::vector<std::int32_t>> send(nn, std::vector<std::int32_t>(2 * c.count)), recv = send;
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < 2 * c.count; ++i)
      send[static_cast<std::size_t>(r)][i] = static_cast<std::int32_t>(r * 10 + static_cast<int>(i) + 1);
  std::vector<std::int32_t> want = send[0];
  const dag::UserReduce op = ordered_op();
  for (int r = 1; r < n; ++r) op.fn(want.data(), send[static_cast<std::size_t>(r)].data(), want.data(), c.count);
  const auto plans = compile_mapped(g, c);
  ASSERT_TRUE(ranks.run(plans, [&](int r) {
    fake_ranks::FakeRanks::Io io;
    io.input = send[static_cast<std::size_t>(r)].data();
    io.output = recv[static_cast<std::size_t>(r)].data();
    return io;
  }));
  for (int r = 0; r < n; ++r) EXPECT_EQ(recv[static_cast<std::size_t>(r)], want) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Ranks, MappedSim, ::testing::Values(2, 3, 5));

// Single-copy plans of scatter, gather and reduce_scatter_block
// (collectives/src/compile_single_copy.cpp) over the fake transport: publish,
// read_peer and read_peer_fold (the fake read is a memcpy of the address, the
// path a private buffer takes through CMA), several instances in a row, a
// non-commutative fold in rank order, against a sequential reference.
class SingleCopySim : public ::testing::TestWithParam<int> {};
TEST_P(SingleCopySim, ScatterGatherReduceScatterBlockMatchTheReference) {
  const int n = GetParam();
  const auto nn = static_cast<std::size_t>(n);
  Group g = mapped_group(n);
  g.publish_word = 64;  // past the wake words (fake_ranks: 256 flag words per rank)
  ASSERT_LE(64u + strata::dag::kPublishWords * static_cast<std::uint32_t>(g.credits),
            fake_ranks::FakeRanks::kFlagWords);
  fake_ranks::FakeRanks ranks(n, kSlot, 7u);
  ranks.with_flags(g.mapped_at, g.mapped_slot_bytes);
  const dag::UserReduce op = ordered_op();
  for (const Kind kind : {Kind::scatter, Kind::gather, Kind::reduce_scatter_block}) {
    for (int root = 0; root < (kind == Kind::reduce_scatter_block ? 1 : n); ++root) {
      Call c;
      c.kind = kind;
      c.count = 3;  // elements of 8 bytes (pairs of int32)
      c.root = root;
      c.algo.name = "single-copy";
      c.user_op = std::make_shared<const dag::UserReduce>(op);
      const std::size_t words = 2 * c.count;  // int32 per block
      const bool many_in = kind != Kind::gather;
      std::vector<std::vector<std::int32_t>> send(nn), recv(nn), want(nn);
      for (int r = 0; r < n; ++r) {
        const auto ur = static_cast<std::size_t>(r);
        const bool root_side = r == root;
        send[ur].resize(many_in && (kind == Kind::reduce_scatter_block || root_side) ? words * nn : words);
        for (std::size_t i = 0; i < send[ur].size(); ++i)
          send[ur][i] = static_cast<std::int32_t>(100 * r + static_cast<int>(i) + 1);
        recv[ur].assign(kind == Kind::gather && root_side ? words * nn : words, -1);
      }
      for (int r = 0; r < n; ++r) {
        const auto ur = static_cast<std::size_t>(r);
        if (kind == Kind::scatter) {
          want[ur].assign(send[static_cast<std::size_t>(root)].begin() + static_cast<std::ptrdiff_t>(ur * words),
                          send[static_cast<std::size_t>(root)].begin() + static_cast<std::ptrdiff_t>((ur + 1) * words));
        } else if (kind == Kind::gather) {
          if (r != root) {
            want[ur] = recv[ur];  // untouched
            continue;
          }
          for (int q = 0; q < n; ++q)
            want[ur].insert(want[ur].end(), send[static_cast<std::size_t>(q)].begin(),
                            send[static_cast<std::size_t>(q)].end());
        } else {
          want[ur].assign(send[0].begin() + static_cast<std::ptrdiff_t>(ur * words),
                          send[0].begin() + static_cast<std::ptrdiff_t>((ur + 1) * words));
          for (int q = 1; q < n; ++q)
            op.fn(want[ur].data(), send[static_cast<std::size_t>(q)].data() + ur * words, want[ur].data(), c.count);
        }
      }
      const auto plans = strata::coll::compile_all(g, c, 1);
      for (const auto& p : plans) ASSERT_EQ(p->algorithm(), "single-copy") << strata::coll::to_string(kind);
      for (int round = 0; round < 3; ++round) {  // the reads-done flags guard the next instance
        for (auto& v : recv) std::fill(v.begin(), v.end(), -1);
        for (int r = 0; r < n; ++r)
          if (kind == Kind::gather && r != root) want[static_cast<std::size_t>(r)] = recv[static_cast<std::size_t>(r)];
        ASSERT_TRUE(ranks.run(plans, [&](int r) {
          fake_ranks::FakeRanks::Io io;
          io.input = send[static_cast<std::size_t>(r)].data();
          io.output = recv[static_cast<std::size_t>(r)].data();
          return io;
        }));
        for (int r = 0; r < n; ++r)
          EXPECT_EQ(recv[static_cast<std::size_t>(r)], want[static_cast<std::size_t>(r)])
              << strata::coll::to_string(kind) << " root " << root << " rank " << r << " round " << round;
      }
    }
  }
}

// The split single-copy broadcast (Tuning::bcast_single_copy_split_min_bytes):
// from the limit every reader publishes its buffer and reads its first B - B/n
// bytes; the root writes the last B/n of each reader (write_peer after the
// reader's publication) and then raises its reads-done word, which every
// reader waits for. Below the limit (or with 0) the readers read everything
// and the root writes nothing. Several rounds with every root, element-checked.
TEST_P(SingleCopySim, SplitBroadcastRootWritesTheLastShareOfEveryReader) {
  const int n = GetParam();
  const auto nn = static_cast<std::size_t>(n);
  Group g = mapped_group(n);
  g.publish_word = 64;
  auto t = std::make_shared<strata::coll::Tuning>();
  t->bcast_single_copy_split_min_bytes = 1024;
  g.tuning = t;
  fake_ranks::FakeRanks ranks(n, kSlot, 11u);
  ranks.with_flags(g.mapped_at, g.mapped_slot_bytes);
  const std::uint32_t w = g.publish_word + dag::kPublishWords * 1;         // slot 1
  for (const std::size_t count : {std::size_t{100}, std::size_t{1000}}) {  // 400 B: whole; 4000 B: split
    const std::uint64_t bytes = count * 4;
    const bool split = bytes >= 1024;
    const std::uint64_t share = split ? bytes / nn / 64 * 64 : 0;
    for (int root = 0; root < n; ++root) {
      Call c;
      c.kind = Kind::broadcast;
      c.count = count;
      c.dtype = dag::DataType::i32;
      c.root = root;
      c.algo.name = "single-copy";
      const auto plans = strata::coll::compile_all(g, c, 1);
      for (int r = 0; r < n; ++r) {
        const auto& p = *plans[static_cast<std::size_t>(r)];
        ASSERT_EQ(p.algorithm(), "single-copy");
        std::vector<std::uint64_t> reads, writes;
        std::vector<int> written;
        int publishes = 0, writes_done_waits = 0;
        for (const dag::Node& nd : p.nodes()) {
          if (nd.kind == dag::NodeKind::read_peer) reads.push_back(nd.dst.len);
          if (nd.kind == dag::NodeKind::write_peer) {
            writes.push_back(nd.src.len);
            written.push_back(nd.peer);
            EXPECT_EQ(nd.dst.offset, bytes - share) << "the last share";
          }
          if (nd.kind == dag::NodeKind::publish) ++publishes;
          if (nd.kind == dag::NodeKind::flag_wait && nd.peer == root && nd.slot == w + 1) ++writes_done_waits;
        }
        if (r == root) {
          EXPECT_TRUE(reads.empty());
          EXPECT_EQ(writes, std::vector<std::uint64_t>(split ? nn - 1 : 0, share)) << "root " << root << ", " << bytes;
          std::sort(written.begin(), written.end());
          std::vector<int> others;
          for (int q = 0; q < n && split; ++q)
            if (q != root) others.push_back(q);
          EXPECT_EQ(written, others);
        } else {
          EXPECT_EQ(reads, std::vector<std::uint64_t>{bytes - share}) << "rank " << r << ", " << bytes;
          EXPECT_TRUE(writes.empty());
          EXPECT_EQ(publishes, split ? 1 : 0);
          EXPECT_EQ(writes_done_waits, split ? 1 : 0);
        }
      }
      std::mt19937 rng(static_cast<unsigned>(count * 31 + static_cast<std::size_t>(root)));
      for (int round = 0; round < 3; ++round) {  // the flags guard the next instance
        std::vector<std::int32_t> send(count);
        for (auto& e : send) e = static_cast<std::int32_t>(rng() % 100000);
        std::vector<std::vector<std::int32_t>> recv(nn, std::vector<std::int32_t>(count, -1));
        ASSERT_TRUE(ranks.run(plans, [&](int r) {
          fake_ranks::FakeRanks::Io io;
          io.input = r == root ? send.data() : nullptr;
          io.output = r == root ? nullptr : recv[static_cast<std::size_t>(r)].data();
          return io;
        }));
        for (int r = 0; r < n; ++r) {
          if (r == root) continue;
          EXPECT_EQ(recv[static_cast<std::size_t>(r)], send)
              << bytes << " B, root " << root << " rank " << r << " round " << round;
        }
      }
    }
  }
}

// Allreduce in single copies (compile_allreduce_single): rank r folds chunk r
// of every rank's send buffer in rank order (read_peer, then read_peer_fold)
// and writes it into every other rank's output (write_peer into region 1 of
// their publication). Counts that do not divide by n (chunks differ by one
// element, some ranks own none), a non-commutative operator (rank order kept)
// and a sum, several rounds, against a sequential reference.
TEST_P(SingleCopySim, AllreduceFoldsItsChunkAndWritesItIntoEveryOutput) {
  const int n = GetParam();
  const auto nn = static_cast<std::size_t>(n);
  Group g = mapped_group(n);
  g.publish_word = 64;
  fake_ranks::FakeRanks ranks(n, kSlot, 13u);
  ranks.with_flags(g.mapped_at, g.mapped_slot_bytes);
  const dag::UserReduce op = ordered_op();
  for (const std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{64}}) {
    for (const bool ordered : {true, false}) {
      Call c;
      c.kind = Kind::allreduce;
      c.count = count;
      c.algo.name = "single-copy";
      if (ordered) {
        c.user_op = std::make_shared<const dag::UserReduce>(op);  // 8-byte elements (pairs of int32)
      } else {
        c.dtype = dag::DataType::i32;
        c.op = dag::ReduceOp::sum;
      }
      const std::size_t words = ordered ? 2 * count : count;
      const auto plans = strata::coll::compile_all(g, c, 1);
      int writes = 0;
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(plans[static_cast<std::size_t>(r)]->algorithm(), "single-copy");
        for (const dag::Node& nd : plans[static_cast<std::size_t>(r)]->nodes())
          if (nd.kind == dag::NodeKind::write_peer) ++writes;
      }
      const std::size_t owners = std::min(count, nn);  // ranks with a chunk
      EXPECT_EQ(writes, static_cast<int>(owners * (nn - 1))) << count << " elements";
      std::mt19937 rng(static_cast<unsigned>(count * 7 + (ordered ? 1 : 0)));
      for (int round = 0; round < 3; ++round) {
        std::vector<std::vector<std::int32_t>> send(nn, std::vector<std::int32_t>(words));
        std::vector<std::vector<std::int32_t>> recv(nn, std::vector<std::int32_t>(words, -1));
        for (auto& v : send)
          for (auto& e : v) e = static_cast<std::int32_t>(rng() % 1000);
        std::vector<std::int32_t> want = send[0];
        for (int r = 1; r < n; ++r) {
          if (ordered) {
            op.fn(want.data(), send[static_cast<std::size_t>(r)].data(), want.data(), count);
          } else {
            for (std::size_t i = 0; i < words; ++i) want[i] += send[static_cast<std::size_t>(r)][i];
          }
        }
        ASSERT_TRUE(ranks.run(plans, [&](int r) {
          fake_ranks::FakeRanks::Io io;
          io.input = send[static_cast<std::size_t>(r)].data();
          io.output = recv[static_cast<std::size_t>(r)].data();
          return io;
        }));
        for (int r = 0; r < n; ++r)
          EXPECT_EQ(recv[static_cast<std::size_t>(r)], want)
              << count << " elements, " << (ordered ? "ordered" : "sum") << ", rank " << r << " round " << round;
      }
    }
  }
  // In place: refused with an error naming the argument.
  Call c;
  c.kind = Kind::allreduce;
  c.count = 8;
  c.dtype = dag::DataType::i32;
  c.in_place = true;
  c.algo.name = "single-copy";
  try {
    (void)strata::coll::compile_all(g, c, 1);
    ADD_FAILURE() << "in place accepted";
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find("not in place"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, SingleCopySim, ::testing::Values(2, 3, 5));

TEST(MappedCompile, ChosenAutomaticallyOnlyWhereTheTableAndTheGroupAllowIt) {
  Group g = mapped_group(3);
  Call c;
  c.kind = Kind::allreduce;
  c.count = 4;
  c.dtype = dag::DataType::f32;
  c.algo.name = "rd";
  c.fast_ok = true;  // the caller left the choice to strata
  EXPECT_EQ(strata::coll::compile(g, c, 0)->algorithm(), "mapped");
  c.fast_ok = false;  // an algorithm asked for
  EXPECT_EQ(strata::coll::compile(g, c, 0)->algorithm(), "rd");
  c.fast_ok = true;
  c.count = 1u << 20;  // above mapped_max_bytes and the mapped slot
  EXPECT_NE(strata::coll::compile(g, c, 0)->algorithm(), "mapped");
  c.count = 4;
  c.exit_all = true;  // strict: the window plans with their barriers
  EXPECT_NE(strata::coll::compile(g, c, 0)->algorithm(), "mapped");
  c.exit_all = false;
  Group two_hosts = g;
  two_hosts.host = {0, 0, 1};
  two_hosts.mapped_word = 0;  // the engine maps windows only when every member shares the host
  EXPECT_NE(strata::coll::compile(two_hosts, c, 0)->algorithm(), "mapped");
}

// reduce_scatter_block has its own mapped limit on the whole vector
// (mapped_rs_max_bytes, at least mapped_max_bytes); other kinds keep
// mapped_max_bytes, and nothing runs mapped beyond what the slot holds.
TEST(MappedCompile, ReduceScatterHasItsOwnMappedLimit) {
  Group g = mapped_group(2);
  g.mapped_slot_bytes = 2 * 32768 + Group::kMappedHeader;  // the engine's n x mapped_max_bytes + the record's line
  auto t = std::make_shared<strata::coll::Tuning>();
  t->mapped_max_bytes = 32768;
  t->mapped_rs_max_bytes = 65536;
  g.tuning = t;
  auto algo = [&](Kind k, std::size_t total_bytes) {
    Call c;
    c.kind = k;
    c.count = (k == Kind::reduce_scatter_block ? total_bytes / 2 : total_bytes) / 4;
    c.dtype = dag::DataType::f32;
    c.op = dag::ReduceOp::sum;
    c.fast_ok = true;
    return strata::coll::compile(g, c, 0)->algorithm();
  };
  EXPECT_EQ(algo(Kind::reduce_scatter_block, 65536), "mapped");
  EXPECT_NE(algo(Kind::allreduce, 65536), "mapped") << "mapped_max_bytes still limits the other kinds";
  EXPECT_EQ(algo(Kind::allreduce, 32768), "mapped");
  EXPECT_NE(algo(Kind::reduce_scatter_block, 131072), "mapped") << "does not fit the slot";
  t->mapped_rs_max_bytes = 0;
  EXPECT_NE(algo(Kind::reduce_scatter_block, 65536), "mapped") << "0: mapped_max_bytes decides";
  EXPECT_EQ(algo(Kind::reduce_scatter_block, 32768), "mapped");
}

// Inside the table's single-copy window, a broadcast, allgather or alltoall
// of ordinary buffers reads straight out of the owner's buffer even where the
// mapped plans would take it (single copy is the narrower, per-family
// decision); the kinds without an ordinary-buffer single-copy plan stay mapped.
TEST(MappedCompile, SingleCopyWindowTakesPrecedenceOverMappedPlans) {
  Group g = mapped_group(2);
  g.publish_word = 64;  // single copy available (CMA path to every member)
  auto t = std::make_shared<strata::coll::Tuning>();
  t->mapped_max_bytes = 16384;
  t->bcast_single_copy_min_bytes = 8192;
  t->sym_single_copy_min_bytes = 16384;
  g.tuning = t;
  auto algo = [&](Kind k, std::size_t bytes) {
    Call c;
    c.kind = k;
    c.count = bytes / 4;
    c.dtype = dag::DataType::f32;
    c.fast_ok = true;
    return strata::coll::compile(g, c, 0)->algorithm();
  };
  EXPECT_EQ(algo(Kind::broadcast, 4096), "mapped");
  EXPECT_EQ(algo(Kind::broadcast, 8192), "single-copy");
  EXPECT_EQ(algo(Kind::broadcast, 16384), "single-copy");
  EXPECT_EQ(algo(Kind::allgather, 8192), "mapped");
  EXPECT_EQ(algo(Kind::allgather, 16384), "single-copy");
  EXPECT_EQ(algo(Kind::alltoall, 4096), "mapped");  // n x 4 KiB in the slot
  EXPECT_EQ(algo(Kind::alltoall, 16384), "single-copy");
  // The single-copy reductions' windows (allreduce, reduce_scatter_block:
  // the whole vector) likewise, and never in place.
  t->allreduce_single_copy_min_bytes = 16384;
  t->rs_single_copy_min_bytes = 16384;
  t->mapped_rs_max_bytes = 65536;
  EXPECT_EQ(algo(Kind::allreduce, 8192), "mapped");
  EXPECT_EQ(algo(Kind::allreduce, 16384), "single-copy");
  EXPECT_EQ(algo(Kind::reduce_scatter_block, 4096), "mapped");  // a vector of 2 x 4 KiB
  EXPECT_EQ(algo(Kind::reduce_scatter_block, 8192), "single-copy");
  {
    Call c;
    c.kind = Kind::allreduce;
    c.count = 16384;
    c.dtype = dag::DataType::f32;
    c.fast_ok = true;
    c.in_place = true;
    EXPECT_NE(strata::coll::compile(g, c, 0)->algorithm(), "single-copy");
    c.in_place = false;
    c.fast_ok = false;  // an algorithm named by the caller: the table's window does not apply
    c.algo.name = "ring";
    EXPECT_NE(strata::coll::compile(g, c, 0)->algorithm(), "single-copy");
  }
  t->allreduce_single_copy_max_bytes = 0;
  t->rs_single_copy_max_bytes = 0;
  EXPECT_NE(algo(Kind::allreduce, 65536), "single-copy");
  EXPECT_NE(algo(Kind::reduce_scatter_block, 8192), "single-copy");
  g.publish_word = 0;  // no CMA path: the mapped plans again
  EXPECT_EQ(algo(Kind::broadcast, 8192), "mapped");
  EXPECT_EQ(algo(Kind::allgather, 16384), "mapped");
}

// Every plan of a one-host group, mapped or not, ends with the slot's
// flag_set, which keeps the slot's mapped record word and publication words
// recent (dag::Node::refresh): a rank that never offers into its mapped slot
// (a broadcast receiver, or every call a window plan) must not leave a word
// that a half-range "at or after" would read as raised after 2^27 calls.
TEST(MappedCompile, EveryPlanRefreshesTheSlotsRecordAndPublicationWords) {
  Group g = mapped_group(2);
  g.credits = 4;
  g.publish_word = 8;
  for (const std::size_t count : {std::size_t{4}, std::size_t{100000}}) {  // mapped, then a window plan
    for (const int slot : {0, 3}) {
      Call c;
      c.kind = Kind::broadcast;
      c.count = count;
      c.dtype = dag::DataType::i32;
      c.root = 0;
      c.fast_ok = true;
      const auto plans = strata::coll::compile_all(g, c, slot);
      for (const auto& p : plans) {
        ASSERT_FALSE(p->nodes().empty());
        const dag::Node& last = p->nodes().back();
        ASSERT_EQ(last.kind, dag::NodeKind::flag_set) << p->algorithm();
        EXPECT_EQ(last.slot, static_cast<std::uint32_t>(slot));
        const auto s = static_cast<std::uint32_t>(slot);
        const std::vector<std::uint32_t> want = {
            g.mapped_word + static_cast<std::uint32_t>(g.mapped_slot_bytes / 4) * s,
            g.publish_word + dag::kPublishWords * s, g.publish_word + dag::kPublishWords * s + 1};
        EXPECT_EQ(last.refresh, want) << p->algorithm() << " count " << count << " slot " << slot;
      }
    }
  }
}

// Group::mapped_slots > credits: a plan is compiled for its credit slot and
// marks what moves with the instance's mapped slot (dag::Bindings::shift):
// the reads of the peers' slots, the record word's waits and raise, and the
// record word its final flag_set keeps recent; the window flag and the
// publication words stay the credit slot's.
TEST(MappedCompile, PeerSlotReadsAndRecordWordsAreRelativeToTheInstancesMappedSlot) {
  Group g = mapped_group(2);
  g.credits = 4;
  g.mapped_slots = 16;
  g.mapped_slot_bytes = 256;
  g.publish_word = 8;
  ASSERT_EQ(g.mapped_ring(), 16);
  for (const int slot : {1, 3}) {
    Call c;
    c.kind = Kind::allgather;
    c.count = 4;
    c.dtype = dag::DataType::i32;
    c.algo.name = "mapped";
    const auto plans = strata::coll::compile_all(g, c, slot);
    const auto s = static_cast<std::uint32_t>(slot);
    const std::uint32_t record = g.mapped_word + static_cast<std::uint32_t>(g.mapped_slot_bytes / 4) * s;
    for (int r = 0; r < 2; ++r) {
      const auto& p = plans[static_cast<std::size_t>(r)];
      ASSERT_EQ(p->algorithm(), "mapped");
      bool waits_record = false, sets_record = false, reads_slot = false;
      for (const dag::Node& nd : p->nodes()) {
        if ((nd.kind == dag::NodeKind::flag_wait || nd.kind == dag::NodeKind::flag_set) && nd.slot == record) {
          EXPECT_EQ(nd.relative, dag::kRelFlagWord) << "rank " << r << " slot " << slot;
          (nd.kind == dag::NodeKind::flag_wait ? waits_record : sets_record) = true;
        }
        if (nd.kind == dag::NodeKind::copy && nd.src.buf.kind == dag::BufferKind::peer) {
          EXPECT_EQ(nd.src.offset, g.mapped_at + g.mapped_slot_bytes * s + Group::kMappedHeader) << "slot " << slot;
          EXPECT_EQ(nd.relative, dag::kRelPeerRegions);
          reads_slot = true;
        }
        if (nd.kind == dag::NodeKind::copy && nd.src.buf.kind != dag::BufferKind::peer) {
          EXPECT_EQ(nd.relative, 0);
        }
      }
      EXPECT_TRUE(waits_record && sets_record && reads_slot) << "rank " << r << " slot " << slot;
      // The peer's whole ring is declared: every shift stays inside it.
      for (const dag::BufferDecl& d : p->buffers()) {
        if (d.ref.kind == dag::BufferKind::peer) {
          EXPECT_EQ(d.size, g.mapped_at + g.mapped_slot_bytes * 16);
        }
      }
      const dag::Node& last = p->nodes().back();
      ASSERT_EQ(last.kind, dag::NodeKind::flag_set);
      EXPECT_EQ(last.slot, s) << "the end flag is the credit slot's";
      EXPECT_EQ(last.relative, dag::kRelRefreshFirst);
      const std::vector<std::uint32_t> want = {record, g.publish_word + dag::kPublishWords * s,
                                               g.publish_word + dag::kPublishWords * s + 1};
      EXPECT_EQ(last.refresh, want) << "slot " << slot;
    }
  }
  Call c;
  c.kind = Kind::allgather;
  c.count = 4;
  c.dtype = dag::DataType::i32;
  EXPECT_THROW(strata::coll::compile(g, c, 4), strata::Error) << "plans are compiled per credit slot";
}

// The same plans run on every slot of the ring: rank r's instance k binds
// mapped slot 1 + 2k (credits 2) and the shift of 2k slots; a reader that
// ignored the shift would read a stale slot (wrong data) or wait for a record
// word nobody raises (the run times out).
TEST(MappedSim, OnePlanPerCreditSlotServesEveryMappedSlotOfTheRing) {
  const int n = 3;
  const auto nn = static_cast<std::size_t>(n);
  Group g = ring_group(n);
  fake_ranks::FakeRanks ranks(n, kSlot, 4321u);
  ranks.with_flags(g.mapped_at, g.mapped_slot_bytes);
  std::mt19937 rng(99u);
  const std::size_t count = 100;  // 400 B per rank
  for (int round = 0; round < 8; ++round) {
    const std::uint64_t k = static_cast<std::uint64_t>(round % 4);
    ranks.shift_mapped_slot(k * 2 * g.mapped_slot_bytes);
    for (const Kind kind : {Kind::allgather, Kind::allreduce, Kind::broadcast}) {
      Call c;
      c.kind = kind;
      c.count = count;
      c.dtype = dag::DataType::i32;
      c.op = dag::ReduceOp::sum;
      c.root = round % n;
      c.algo.name = "mapped";
      const std::size_t out_count = kind == Kind::allgather ? count * nn : count;
      std::vector<std::vector<std::int32_t>> send(nn, std::vector<std::int32_t>(count));
      std::vector<std::vector<std::int32_t>> recv(nn, std::vector<std::int32_t>(out_count, -1));
      for (auto& v : send)
        for (auto& e : v) e = static_cast<std::int32_t>(rng() % 1000);
      const auto plans = strata::coll::compile_all(g, c, 1);
      ASSERT_TRUE(ranks.run(plans,
                            [&](int r) {
                              const auto ur = static_cast<std::size_t>(r);
                              fake_ranks::FakeRanks::Io io;
                              if (kind == Kind::broadcast) {
                                if (r == c.root) {
                                  io.input = send[ur].data();
                                } else {
                                  io.output = recv[ur].data();
                                }
                              } else {
                                io.input = send[ur].data();
                                io.output = recv[ur].data();
                              }
                              return io;
                            }))
          << strata::coll::to_string(kind) << " round " << round;
      for (int r = 0; r < n; ++r) {
        const auto ur = static_cast<std::size_t>(r);
        std::vector<std::int32_t> want(out_count, 0);
        if (kind == Kind::allgather) {
          for (std::size_t q = 0; q < nn; ++q) std::copy(send[q].begin(), send[q].end(), want.begin() + q * count);
        } else if (kind == Kind::allreduce) {
          for (std::size_t q = 0; q < nn; ++q)
            for (std::size_t i = 0; i < count; ++i) want[i] += send[q][i];
        } else {
          if (r == c.root) continue;
          want = send[static_cast<std::size_t>(c.root)];
        }
        EXPECT_EQ(recv[ur], want) << strata::coll::to_string(kind) << " round " << round << " rank " << r;
      }
    }
  }
}

// From mapped_bcast_split_min_bytes a mapped broadcast moves in two halves:
// the root raises its record word after the first half's copy and copies the
// second after that; a reader copies the first half after the record word and
// the second after the root's end-of-instance flag (lag 0, the credit slot's
// word, not moved by the ring). Below the limit (or with 0) one copy each.
// Run on every mapped slot of the ring with each rank as the root.
TEST(MappedSim, BroadcastInTwoHalvesAnnouncesTheSecondWithTheRootsEndFlag) {
  const int n = 3;
  const auto nn = static_cast<std::size_t>(n);
  Group g = ring_group(n);
  auto t = std::make_shared<strata::coll::Tuning>();
  t->mapped_bcast_split_min_bytes = 256;
  g.tuning = t;
  const std::uint32_t record = g.mapped_word + static_cast<std::uint32_t>(g.mapped_slot_bytes / 4) * 1;
  for (const std::size_t count : {std::size_t{50}, std::size_t{101}}) {  // 200 B: whole; 404 B: 200 + 204
    Call c;
    c.kind = Kind::broadcast;
    c.count = count;
    c.dtype = dag::DataType::i32;
    c.root = 0;
    c.algo.name = "mapped";
    const auto plans = strata::coll::compile_all(g, c, 1);
    const bool split = count * 4 >= 256;
    for (int r = 0; r < n; ++r) {
      const auto& p = *plans[static_cast<std::size_t>(r)];
      std::vector<std::uint64_t> lens;
      int end_waits = 0;
      for (const dag::Node& nd : p.nodes()) {
        if (nd.kind == dag::NodeKind::copy) lens.push_back(nd.src.len);
        if (nd.kind == dag::NodeKind::flag_wait && nd.slot == 1 && nd.count == 0) {
          ++end_waits;
          EXPECT_EQ(nd.relative, 0) << "the end flag is the credit slot's";
        }
        if (nd.kind == dag::NodeKind::flag_wait && nd.slot == record) {
          EXPECT_EQ(nd.relative, dag::kRelFlagWord);
        }
      }
      const std::vector<std::uint64_t> want =
          split ? std::vector<std::uint64_t>{200, 204} : std::vector<std::uint64_t>{count * 4};
      EXPECT_EQ(lens, want) << "rank " << r << ", " << count * 4 << " B";
      EXPECT_EQ(end_waits, split && r != c.root ? 1 : 0) << "rank " << r;
    }
  }
  fake_ranks::FakeRanks ranks(n, kSlot, 777u);
  ranks.with_flags(g.mapped_at, g.mapped_slot_bytes);
  std::mt19937 rng(5u);
  const std::size_t count = 101;
  for (int round = 0; round < 8; ++round) {
    ranks.shift_mapped_slot(static_cast<std::uint64_t>(round % 4) * 2 * g.mapped_slot_bytes);
    Call c;
    c.kind = Kind::broadcast;
    c.count = count;
    c.dtype = dag::DataType::i32;
    c.root = round % n;
    c.algo.name = "mapped";
    std::vector<std::int32_t> send(count);
    for (auto& e : send) e = static_cast<std::int32_t>(rng() % 100000);
    std::vector<std::vector<std::int32_t>> recv(nn, std::vector<std::int32_t>(count, -1));
    const auto plans = strata::coll::compile_all(g, c, 1);
    ASSERT_TRUE(ranks.run(plans,
                          [&](int r) {
                            fake_ranks::FakeRanks::Io io;
                            if (r == c.root)
                              io.input = send.data();
                            else
                              io.output = recv[static_cast<std::size_t>(r)].data();
                            return io;
                          }))
        << "round " << round;
    for (int r = 0; r < n; ++r) {
      if (r != c.root) {
        EXPECT_EQ(recv[static_cast<std::size_t>(r)], send) << "round " << round << " rank " << r;
      }
    }
  }
}

TEST(MappedCompile, AskedForWhereItCannotRunIsAnErrorThatSaysWhy) {
  Group g = mapped_group(2);
  g.mapped_word = 0;
  Call c;
  c.kind = Kind::broadcast;
  c.count = 4;
  c.dtype = dag::DataType::u8;
  c.algo.name = "mapped";
  try {
    (void)strata::coll::compile(g, c, 0);
    FAIL() << "expected an error";
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find("algorithm 'mapped' needs"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("on rank 0"), std::string::npos) << e.what();
  }
  g.mapped_word = static_cast<std::uint32_t>(fake_ranks::FakeRanks::kFlagBytes / 4);
  c.kind = Kind::allgatherv;  // not a mapped kind
  c.counts = {1, 2};
  c.displs = {0, 1};
  EXPECT_THROW((void)strata::coll::compile(g, c, 0), strata::Error);
}

// Rank 0 of 2 copies 8 bytes of rank 1's buffer 0 through the mapping, after a flag_wait on rank 1.
std::shared_ptr<const dag::Plan> mapped_read_plan() {
  dag::PlanBuilder b("copy", 0, 2);
  b.output(0, 8);
  b.peer_buffer(1, 0, 64);
  const dag::NodeId fw = b.flag_wait(1, 3, 0);
  b.copy(dag::peer(1, 0, 8, 8), dag::out(0, 0, 8), {fw});
  return b.build();
}

TEST(MappedPlan, AMappedReadMustFollowAFlagWaitOnItsOwner) {
  dag::PlanBuilder b("copy", 0, 2);
  b.output(0, 8);
  b.peer_buffer(1, 0, 64);
  b.copy(dag::peer(1, 0, 0, 8), dag::out(0, 0, 8));
  try {
    (void)b.build();
    FAIL() << "expected an error";
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not depend on a flag_wait on rank 1"), std::string::npos) << e.what();
  }
  ASSERT_EQ(mapped_read_plan()->mapped_reads().size(), 1u);
}

TEST(MappedPlan, StartRefusesAPeerBufferThatIsNotMapped) {
  strata::transport::FakeWorld world(2, strata::transport::FakeMode::manual, 5);
  dag::Executor ex(world.endpoint(0));
  const auto plan = mapped_read_plan();
  std::vector<char> out(8), peer(64);
  strata::transport::RemoteKey key;
  ASSERT_TRUE(world.endpoint(1).register_memory(peer.data(), peer.size(), &key).is_ok());
  std::vector<std::unique_ptr<std::atomic<std::uint32_t>[]>> blocks;
  std::vector<std::atomic<std::uint32_t>*> table;
  for (int r = 0; r < 2; ++r) {
    blocks.push_back(std::make_unique<std::atomic<std::uint32_t>[]>(64));
    table.push_back(blocks.back().get());
  }
  dag::Bindings bind;
  bind.outputs = {out.data()};
  bind.peers = {{1, 0, key, nullptr}};
  bind.flags = table.data();
  bind.nflags = table.size();
  bind.flag_wake = 8;
  const strata::Status st = ex.start(plan, bind, 0, 0, [](const strata::Status&) {});
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("not mapped here"), std::string::npos) << st.message();
  world.endpoint(1).deregister_memory(peer.data(), peer.size());
}

}  // namespace
