// strata-tune's decision rule (tools/common/tune_rule.hpp, docs/tuning.md "The
// decision rule") on synthetic per-round samples: noise keeps the default, a
// clear win switches, a win inside the spread or the margin keeps it, a point
// loss vetoes, and a kept default says why.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tune_rule.hpp"

namespace {

using strata::tune::Alternative;
using strata::tune::Choice;
using strata::tune::Rule;

Alternative alt(std::uint64_t value, std::vector<double> ratios, double worst = 1.0) {
  Alternative a;
  a.value = value;
  a.ratios = std::move(ratios);
  a.worst_point = worst;
  a.worst_where = "bcast 1M";
  return a;
}

// Per-round ratios of an alternative that runs the same plan as the default:
// two independent noisy medians (log-normal, sigma) per round.
std::vector<double> noise(std::mt19937& g, int rounds, double sigma) {
  std::normal_distribution<double> d(0.0, sigma);
  std::vector<double> r;
  for (int i = 0; i < rounds; ++i) r.push_back(std::exp(d(g)) / std::exp(d(g)));
  return r;
}

TEST(TuneRule, MedianAndSpread) {
  EXPECT_DOUBLE_EQ(strata::tune::median({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(strata::tune::median({4, 1, 2, 3}), 2.5);
  const auto r = strata::tune::summarize({0.9, 1.1, 0.95, 1.0, 1.05});
  EXPECT_EQ(r.rounds, 5u);
  EXPECT_DOUBLE_EQ(r.median, 1.0);
  EXPECT_DOUBLE_EQ(r.lo, 0.9);
  EXPECT_DOUBLE_EQ(r.hi, 1.1);
  EXPECT_NEAR(r.spread(), 0.2, 1e-12);
}

TEST(TuneRule, NoiseOnlyKeepsTheDefault) {
  // Ratios scattered around 1, and one whose median is a "win" inside the noise.
  for (const std::vector<double>& r :
       std::vector<std::vector<double>>{{1.02, 0.96, 1.01}, {0.97, 1.04, 0.99, 1.01, 0.95}, {0.91, 1.00, 0.93}}) {
    const Choice c = strata::tune::choose({alt(1, r)}, Rule{});
    EXPECT_EQ(c.index, -1) << c.reason;
    EXPECT_NE(c.reason.find("default kept"), std::string::npos) << c.reason;
  }
}

TEST(TuneRule, NoiseOnlyRarelySwitches) {
  // Alternatives that are the default in disguise, each measurement off by a
  // log-normal noise of sigma (10%: a busy shared 2-core machine; 3%: a quiet
  // one): how often one switches, per alternative. 3 rounds about 1.5% and
  // 0.1%, 5 rounds about 0.1% and 0 (tools/common/tune_rule.hpp).
  std::mt19937 g(38);
  const int trials = 20000;
  auto rate = [&](int rounds, double sigma) {
    int switched = 0;
    for (int t = 0; t < trials; ++t)
      if (strata::tune::choose({alt(1, noise(g, rounds, sigma))}, Rule{}).index >= 0) ++switched;
    return static_cast<double>(switched) / trials;
  };
  EXPECT_LT(rate(3, 0.10), 0.025);
  EXPECT_LT(rate(3, 0.03), 0.005);
  EXPECT_LT(rate(5, 0.10), 0.005);
  EXPECT_LT(rate(5, 0.03), 0.001);
}

TEST(TuneRule, ClearWinSwitches) {
  const Choice c = strata::tune::choose({alt(0, {0.70, 0.72, 0.69})}, Rule{});
  ASSERT_EQ(c.index, 0) << c.reason;
  EXPECT_TRUE(c.verdicts[0].take);
  EXPECT_NEAR(c.verdicts[0].win, 0.30, 1e-12);
  EXPECT_NE(c.reason.find("wins 30% > margin 5% + spread 3%"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("changed"), std::string::npos) << c.reason;
}

TEST(TuneRule, WinSmallerThanTheSpreadKeepsTheDefault) {
  // Median 0.85 (a 15% win), but the rounds range 0.6..1.1: spread 0.5.
  const Choice c = strata::tune::choose({alt(0, {0.85, 0.60, 1.10})}, Rule{});
  EXPECT_EQ(c.index, -1) << c.reason;
  EXPECT_FALSE(c.verdicts[0].take);
  EXPECT_NE(c.reason.find("win 15% <= margin 5% + spread 50%"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("default kept"), std::string::npos) << c.reason;
  // The same win with a tight spread switches; a spread that leaves less than the margin does not.
  EXPECT_EQ(strata::tune::choose({alt(0, {0.85, 0.84, 0.86})}, Rule{}).index, 0);
  EXPECT_EQ(strata::tune::choose({alt(0, {0.85, 0.78, 0.90})}, Rule{}).index, -1);
}

TEST(TuneRule, WinBelowTheMarginKeepsTheDefault) {
  const Choice c = strata::tune::choose({alt(0, {0.97, 0.965, 0.975})}, Rule{});
  EXPECT_EQ(c.index, -1);
  EXPECT_NE(c.reason.find("<= margin 5%"), std::string::npos) << c.reason;
}

TEST(TuneRule, PointLossVetoesAWin) {
  const Choice c = strata::tune::choose({alt(0, {0.7, 0.7, 0.7}, /*worst=*/1.30)}, Rule{});
  EXPECT_EQ(c.index, -1);
  EXPECT_NE(c.reason.find("30% slower at bcast 1M"), std::string::npos) << c.reason;
  // Within the tolerance it does not.
  EXPECT_EQ(strata::tune::choose({alt(0, {0.7, 0.7, 0.7}, 1.05)}, Rule{}).index, 0);
}

TEST(TuneRule, ALossKeepsTheDefault) {
  const Choice c = strata::tune::choose({alt(0, {1.40, 1.38, 1.41}), alt(1, {})}, Rule{});
  EXPECT_EQ(c.index, -1);
  EXPECT_NE(c.reason.find("best alternative 0: loses 40%"), std::string::npos) << c.reason;
  EXPECT_NE(c.verdicts[1].why.find("no point measured"), std::string::npos) << c.verdicts[1].why;
}

TEST(TuneRule, TooFewRoundsKeepTheDefault) {
  const Choice c = strata::tune::choose({alt(0, {0.5, 0.5})}, Rule{});
  EXPECT_EQ(c.index, -1);
  EXPECT_NE(c.reason.find("measure no spread"), std::string::npos) << c.reason;
}

TEST(TuneRule, TheBestTakenAlternativeWins) {
  // Two alternatives pass; the lower median is taken, a noisy better one is not.
  const Choice c = strata::tune::choose(
      {alt(10, {0.80, 0.79, 0.81}), alt(20, {0.60, 0.62, 0.61}), alt(30, {0.40, 0.95, 0.30})}, Rule{});
  ASSERT_EQ(c.index, 1) << c.reason;
  EXPECT_FALSE(c.verdicts[2].take);
  EXPECT_NE(c.reason.rfind("20 wins", 0), std::string::npos) << c.reason;
}

TEST(TuneRule, NoAlternativeKeepsTheDefault) {
  const Choice c = strata::tune::choose({}, Rule{});
  EXPECT_EQ(c.index, -1);
  EXPECT_FALSE(c.reason.empty());
}

}  // namespace
