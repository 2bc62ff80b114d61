// Hierarchy: placement of ranks on synthetic machines, leaders and groups.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "strata/transport/topology.hpp"
#include "topology_helpers.hpp"

namespace strata {
namespace {

using test::block_places;
using test::iota;
using V = std::vector<int>;

constexpr const char* kTwoByTwo = "package:2 numa:2 core:4 pu:1";

TEST(Hierarchy, TwoHostsOfTwoPackagesTwoNumaFourCoresWith32Ranks) {
  const Hierarchy h(block_places(kTwoByTwo, {16, 16}));
  ASSERT_EQ(h.size(), 32);
  EXPECT_EQ(h.num_hosts(), 2);
  EXPECT_EQ(h.num_groups(Level::host), 2);
  EXPECT_EQ(h.num_groups(Level::package), 4);
  EXPECT_EQ(h.num_groups(Level::numa), 8);
  EXPECT_EQ(h.num_groups(Level::core), 32);

  // Every rank sits on core (local % 16), package core/8, NUMA core/4.
  for (int r = 0; r < 32; ++r) {
    const RankPlace& p = h.place(r);
    const int local = r % 16;
    EXPECT_EQ(p.rank, r);
    EXPECT_EQ(p.host, r / 16) << "rank " << r;
    EXPECT_EQ(p.core, local) << "rank " << r;
    EXPECT_EQ(p.package, local / 8) << "rank " << r;
    EXPECT_EQ(p.numa, local / 4) << "rank " << r;
    EXPECT_EQ(p.pu, -1) << "rank " << r;
  }

  EXPECT_EQ(h.host_leaders(), (V{0, 16}));
  EXPECT_EQ(h.leaders(Level::host), (V{0, 16}));
  EXPECT_EQ(h.leaders(Level::package), (V{0, 8, 16, 24}));
  EXPECT_EQ(h.leaders(Level::numa), (V{0, 4, 8, 12, 16, 20, 24, 28}));

  EXPECT_EQ(h.leader(0, Level::host), 0);
  EXPECT_EQ(h.leader(15, Level::host), 0);
  EXPECT_EQ(h.leader(16, Level::host), 16);
  EXPECT_EQ(h.leader(31, Level::host), 16);
  EXPECT_EQ(h.leader(9, Level::package), 8);
  EXPECT_EQ(h.leader(23, Level::package), 16);
  EXPECT_EQ(h.leader(27, Level::numa), 24);
  EXPECT_EQ(h.leader(7, Level::numa), 4);
  EXPECT_EQ(h.leader(13, Level::core), 13);

  EXPECT_EQ(h.group(21, Level::numa), (V{20, 21, 22, 23}));
  EXPECT_EQ(h.group(9, Level::package), iota(8, 15));
  EXPECT_EQ(h.group(30, Level::host), iota(16, 31));
  EXPECT_EQ(h.group(30, Level::core), (V{30}));
  EXPECT_EQ(h.host_ranks(3), iota(0, 15));

  EXPECT_EQ(h.numa_leaders_on_host(20), (V{16, 20, 24, 28}));
  EXPECT_EQ(h.numa_leaders_on_host(0), (V{0, 4, 8, 12}));
  EXPECT_EQ(h.package_leaders_on_host(31), (V{16, 24}));
  EXPECT_EQ(h.leaders_on_host(5, Level::host), (V{0}));

  EXPECT_TRUE(h.same_host(0, 15));
  EXPECT_FALSE(h.same_host(15, 16));
  EXPECT_TRUE(h.is_leader(24, Level::package));
  EXPECT_FALSE(h.is_leader(25, Level::numa));
}

TEST(Hierarchy, HostLeaderIsAlsoItsPackageAndNumaLeaderForEverySpec) {
  for (const char* spec : {kTwoByTwo, "numa:2 package:2 core:2 pu:1", "core:3 pu:2", "package:3 core:1 pu:1"}) {
    for (const V& hosts : {V{1}, V{5, 2, 4}, V{7, 7}, V{3, 1, 1, 9}}) {
      const Hierarchy h(block_places(spec, hosts));
      for (int leader : h.host_leaders()) {
        EXPECT_EQ(h.leader(leader, Level::package), leader) << spec;
        EXPECT_EQ(h.leader(leader, Level::numa), leader) << spec;
      }
      // Every group's leader is its smallest member and every member agrees.
      for (int r = 0; r < h.size(); ++r) {
        for (Level lv : {Level::host, Level::package, Level::numa, Level::core}) {
          const V g = h.group(r, lv);
          ASSERT_FALSE(g.empty());
          EXPECT_EQ(h.leader(r, lv), g.front()) << spec << " rank " << r << " " << level_name(lv);
          for (int m : g) EXPECT_EQ(h.leader(m, lv), g.front());
        }
      }
    }
  }
}

TEST(Hierarchy, ThreeHostsWithUnevenRanks) {
  // 4 cores: package core/2, one NUMA region per host.
  const Hierarchy h(block_places("package:2 core:2 pu:1", {5, 2, 4}));
  ASSERT_EQ(h.size(), 11);
  EXPECT_EQ(h.num_hosts(), 3);
  // host 0: ranks 0-4 on cores 0,1,2,3,0 (rank 4 wraps)
  EXPECT_EQ(h.place(4).core, 0);
  EXPECT_EQ(h.place(4).package, 0);
  EXPECT_EQ(h.place(3).package, 1);
  EXPECT_EQ(h.place(5).host, 1);
  EXPECT_EQ(h.place(5).core, 0);
  EXPECT_EQ(h.place(10).host, 2);
  EXPECT_EQ(h.place(10).core, 3);

  EXPECT_EQ(h.host_leaders(), (V{0, 5, 7}));
  EXPECT_EQ(h.leaders(Level::package), (V{0, 2, 5, 7, 9}));
  EXPECT_EQ(h.leaders(Level::numa), (V{0, 5, 7}));
  EXPECT_EQ(h.group(4, Level::package), (V{0, 1, 4}));
  EXPECT_EQ(h.group(3, Level::package), (V{2, 3}));
  EXPECT_EQ(h.group(6, Level::host), (V{5, 6}));
  EXPECT_EQ(h.group(8, Level::numa), (V{7, 8, 9, 10}));
  EXPECT_EQ(h.leader(10, Level::package), 9);
  EXPECT_EQ(h.leader(6, Level::numa), 5);
  EXPECT_EQ(h.package_leaders_on_host(1), (V{0, 2}));
  EXPECT_EQ(h.package_leaders_on_host(6), (V{5}));
  EXPECT_EQ(h.numa_leaders_on_host(9), (V{7}));
}

TEST(Hierarchy, ThreeHostsWithNumaAbovePackages) {
  // "numa:2 package:2 core:2": 8 cores, NUMA core/4, package core/2 (host-wide).
  const Hierarchy h(block_places("numa:2 package:2 core:2 pu:1", {3, 8, 6}));
  ASSERT_EQ(h.size(), 17);
  EXPECT_EQ(h.host_leaders(), (V{0, 3, 11}));
  // host 1: ranks 3..10, local 0..7
  EXPECT_EQ(h.place(10).numa, 1);
  EXPECT_EQ(h.place(10).package, 3);
  EXPECT_EQ(h.numa_leaders_on_host(4), (V{3, 7}));
  EXPECT_EQ(h.package_leaders_on_host(4), (V{3, 5, 7, 9}));
  EXPECT_EQ(h.group(8, Level::numa), (V{7, 8, 9, 10}));
  // host 2: ranks 11..16, local 0..5: NUMA 0 = 11..14, NUMA 1 = 15,16
  EXPECT_EQ(h.numa_leaders_on_host(16), (V{11, 15}));
  EXPECT_EQ(h.group(16, Level::package), (V{15, 16}));
  // host 0: ranks 0..2 all on NUMA 0, packages {0,1}, {2}
  EXPECT_EQ(h.numa_leaders_on_host(2), (V{0}));
  EXPECT_EQ(h.package_leaders_on_host(2), (V{0, 2}));
}

TEST(Hierarchy, SingleRankLeadsEverything) {
  const Hierarchy h(block_places(kTwoByTwo, {1}));
  ASSERT_EQ(h.size(), 1);
  EXPECT_EQ(h.num_hosts(), 1);
  for (Level lv : {Level::host, Level::package, Level::numa, Level::core}) {
    EXPECT_EQ(h.leader(0, lv), 0);
    EXPECT_EQ(h.group(0, lv), (V{0}));
    EXPECT_EQ(h.leaders(lv), (V{0}));
  }
  EXPECT_EQ(h.host_leaders(), (V{0}));
  EXPECT_EQ(h.numa_leaders_on_host(0), (V{0}));
  const std::string d = h.describe();
  EXPECT_NE(d.find("1 rank on 1 host"), std::string::npos) << d;
  EXPECT_NE(d.find("core 0: rank 0"), std::string::npos) << d;
}

TEST(Hierarchy, MoreRanksThanCoresWrapAroundTheCores) {
  const Hierarchy h(block_places("core:2 pu:1", {5}));
  ASSERT_EQ(h.size(), 5);
  EXPECT_EQ(h.place(0).core, 0);
  EXPECT_EQ(h.place(1).core, 1);
  EXPECT_EQ(h.place(2).core, 0);
  EXPECT_EQ(h.place(3).core, 1);
  EXPECT_EQ(h.place(4).core, 0);
  EXPECT_EQ(h.leaders(Level::numa), (V{0}));
  EXPECT_EQ(h.group(3, Level::numa), iota(0, 4));
  EXPECT_EQ(h.group(3, Level::core), (V{3}));  // a core group is the rank alone
  const std::string d = h.describe();
  EXPECT_NE(d.find("core 0: ranks 0,2,4 (oversubscribed)"), std::string::npos) << d;
  EXPECT_NE(d.find("core 1: ranks 1,3 (oversubscribed)"), std::string::npos) << d;
}

TEST(Hierarchy, DescribeListsHostsPackagesNumaAndLeaders) {
  const Hierarchy h(block_places(kTwoByTwo, {16, 16}));
  const std::string d = h.describe();
  EXPECT_NE(d.find("32 ranks on 2 hosts"), std::string::npos) << d;
  EXPECT_NE(d.find("host 1: ranks 16-31 (leader 16)"), std::string::npos) << d;
  EXPECT_NE(d.find("  package 1: ranks 24-31 (leader 24)"), std::string::npos) << d;
  EXPECT_NE(d.find("    numa 3: ranks 28-31 (leader 28)"), std::string::npos) << d;
  EXPECT_NE(d.find("      core 15: rank 31"), std::string::npos) << d;
}

TEST(Hierarchy, EncodeDecodeRoundTrip) {
  const std::vector<RankPlace> samples = {
      {0, 0, 0, 0, 0, -1},
      {7, 3, 1, 2, 9, 17},
      {std::numeric_limits<int>::max(), 65535, 255, 1023, 4095, std::numeric_limits<int>::max()},
      {1, 2, 3, 4, 5, std::numeric_limits<int>::min()},
  };
  for (const RankPlace& p : samples) {
    const std::vector<std::byte> blob = Hierarchy::encode(p);
    ASSERT_EQ(blob.size(), Hierarchy::kEncodedSize);
    EXPECT_EQ(Hierarchy::decode(blob.data(), blob.size()), p);
  }
}

TEST(Hierarchy, DecodeRejectsWrongLengthAndForeignBytes) {
  std::vector<std::byte> blob = Hierarchy::encode({3, 1, 0, 0, 2, -1});
  EXPECT_THROW((void)Hierarchy::decode(blob.data(), blob.size() - 1), Error);
  EXPECT_THROW((void)Hierarchy::decode(nullptr, Hierarchy::kEncodedSize), Error);
  blob[0] = std::byte{0};
  try {
    (void)Hierarchy::decode(blob.data(), blob.size());
    FAIL() << "decode accepted a blob with a bad magic";
  } catch (const Error& e) {
    EXPECT_EQ(e.errc(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("magic"), std::string::npos) << e.what();
  }
}

TEST(Hierarchy, RejectsPlacesOutOfOrderNamingTheRank) {
  std::vector<RankPlace> places = block_places(kTwoByTwo, {4});
  places[2].rank = 5;
  try {
    const Hierarchy h(places);
    FAIL() << "accepted places[2].rank == 5";
  } catch (const Error& e) {
    EXPECT_EQ(e.errc(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("rank 2"), std::string::npos) << e.what();
  }
  places[2].rank = 2;
  places[3].numa = -4;
  try {
    const Hierarchy h(places);
    FAIL() << "accepted a negative NUMA index";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("numa"), std::string::npos) << e.what();
  }
}

TEST(Hierarchy, RankOutsideTheJobIsAnUnknownPeer) {
  const Hierarchy h(block_places(kTwoByTwo, {2, 2}));
  for (int bad : {-1, 4, 100}) {
    try {
      (void)h.leader(bad, Level::host);
      FAIL() << "leader(" << bad << ") did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.errc(), Errc::unknown_peer);
      EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(bad)), std::string::npos) << e.what();
    }
    EXPECT_THROW((void)h.group(bad, Level::numa), Error);
    EXPECT_THROW((void)h.place(bad), Error);
    EXPECT_THROW((void)h.same_host(0, bad), Error);
  }
}

TEST(Hierarchy, EmptyHierarchyHasNoHosts) {
  const Hierarchy h;
  EXPECT_EQ(h.size(), 0);
  EXPECT_EQ(h.num_hosts(), 0);
  EXPECT_THROW((void)h.leader(0, Level::host), Error);
}

}  // namespace
}  // namespace strata
