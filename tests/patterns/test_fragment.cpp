// Fragmentation: fragments cover [0, len) exactly, in order, without overlap.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "patterns/fragment.hpp"

namespace sp = strata::patterns;

namespace {

const std::vector<std::size_t> kLengths = {0,     1,     2,     3,     7,     8,      9,
                                           100,   4095,  8191,  8192,  8193,  16383,  16384,
                                           16385, 32767, 32768, 32769, 65536, 100001, (1u << 20) + 3};

std::vector<sp::FragPolicy> policies() {
  return {sp::FragPolicy::none(),    sp::FragPolicy::fixed(32768),      sp::FragPolicy::fixed(16384, 8),
          sp::FragPolicy::fixed(1),  sp::FragPolicy::fixed(3),          sp::FragPolicy::fixed(5, 8),
          sp::FragPolicy::fixed(0),  sp::FragPolicy::fixed(512 * 1024), sp::FragPolicy::halves(),
          sp::FragPolicy::halves(0), sp::FragPolicy::halves(8192, 8),   sp::FragPolicy::halves(0, 4096)};
}

std::size_t align(const sp::FragPolicy& p) { return p.align == 0 ? 1 : p.align; }

}  // namespace

TEST(Fragment, FragmentsTileTheMessageExactly) {
  std::vector<sp::Fragment> f;
  for (const sp::FragPolicy& p : policies()) {
    for (std::size_t len : kLengths) {
      const std::string ctx = "mode=" + std::to_string(static_cast<int>(p.mode)) + " size=" + std::to_string(p.size) +
                              " align=" + std::to_string(p.align) + " len=" + std::to_string(len);
      sp::fragments(len, p, f);
      ASSERT_EQ(f.size(), sp::fragment_count(len, p)) << ctx;
      if (len == 0) {
        EXPECT_TRUE(f.empty()) << ctx;
        continue;
      }
      std::size_t pos = 0;
      for (std::size_t i = 0; i < f.size(); ++i) {
        EXPECT_EQ(f[i], sp::fragment_at(len, p, i)) << ctx;
        ASSERT_EQ(f[i].offset, pos) << ctx << " fragment " << i;  // no gap, no overlap
        ASSERT_GT(f[i].length, 0u) << ctx;
        EXPECT_EQ(f[i].offset % align(p), 0u) << ctx;  // aligned boundaries
        pos += f[i].length;
      }
      EXPECT_EQ(pos, len) << ctx;
    }
  }
}

TEST(Fragment, NoneIsOneFragment) {
  for (std::size_t len : kLengths)
    if (len) {
      EXPECT_EQ(sp::fragment_count(len, sp::FragPolicy::none()), 1u);
    }
}

TEST(Fragment, FixedFragmentsAreFullExceptTheLast) {
  const sp::FragPolicy p = sp::FragPolicy::fixed(32768);
  EXPECT_EQ(sp::fragment_count(32768, p), 1u);
  EXPECT_EQ(sp::fragment_count(32769, p), 2u);
  EXPECT_EQ(sp::fragment_at(32769, p, 1).length, 1u);
  EXPECT_EQ(sp::fragment_count(100001, p), 4u);
  for (std::size_t len : kLengths) {
    const std::size_t n = sp::fragment_count(len, p);
    for (std::size_t i = 0; i + 1 < n; ++i) EXPECT_EQ(sp::fragment_at(len, p, i).length, 32768u);
  }
  // Size rounded down to the alignment, never below it.
  EXPECT_EQ(sp::fragment_at(100, sp::FragPolicy::fixed(30, 8), 0).length, 24u);
  EXPECT_EQ(sp::fragment_at(100, sp::FragPolicy::fixed(5, 8), 0).length, 8u);
  EXPECT_EQ(sp::fragment_count(100, sp::FragPolicy::fixed(0)), 100u);
}

TEST(Fragment, HalvesSplitOnlyAboveTheThreshold) {
  const sp::FragPolicy p = sp::FragPolicy::halves(8192);
  EXPECT_EQ(sp::fragment_count(8192, p), 1u);
  EXPECT_EQ(sp::fragment_count(8193, p), 2u);
  EXPECT_EQ(sp::fragment_at(8193, p, 0), (sp::Fragment{0, 4097}));
  EXPECT_EQ(sp::fragment_at(8193, p, 1), (sp::Fragment{4097, 4096}));
  EXPECT_EQ(sp::fragment_count(1u << 20, p), 2u);  // two halves, not recursive
  // Aligned halves: 8 * 1001 bytes split at 8 * 501.
  const sp::FragPolicy a = sp::FragPolicy::halves(0, 8);
  EXPECT_EQ(sp::fragment_at(8008, a, 0), (sp::Fragment{0, 4008}));
  EXPECT_EQ(sp::fragment_at(8008, a, 1), (sp::Fragment{4008, 4000}));
  // A message of one element cannot be split.
  EXPECT_EQ(sp::fragment_count(8, a), 1u);
  EXPECT_EQ(sp::fragment_count(1, sp::FragPolicy::halves(0)), 1u);
  EXPECT_EQ(sp::fragment_count(2, sp::FragPolicy::halves(0)), 2u);
}
