// strata-tune's decision rule (docs/tuning.md, "The decision rule"), pure and
// header-only so that tests/tuning/test_tune_rule.cpp checks it on synthetic
// samples without measuring anything.
//
// A search measures the default and its alternatives in R interleaved rounds
// (default, alt 1, alt 2, then the reverse order, ...). Per round and
// alternative, the ratio of its time over the default's (geometric mean over
// the measured points of that round; < 1: the alternative is faster) is one
// sample. An alternative replaces the default only if its win, 1 - median of
// its per-round ratios, exceeds the spread of those ratios (max - min over the
// rounds) plus a minimum margin, and if at no point its median ratio over the
// rounds exceeds 1 + the point tolerance. Everything else keeps the default,
// with the reason. (Spread plus margin, not the larger of the two: with 3
// rounds, three noise-only ratios that happen to fall close together on one
// side would pass "larger of" about 4% of the time at 10% noise per
// measurement, "plus" about 1.5%; tests/tuning/test_tune_rule.cpp.)
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace strata::tune {

/// Median of @p v (the mean of the two middle values for an even count); 1 for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 1.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Per-round ratios (alternative / default) summarized: median and min-max range.
struct Rounds {
  std::size_t rounds = 0;
  double median = 1.0, lo = 1.0, hi = 1.0;
  double spread() const { return hi - lo; }  ///< min-max range of the per-round ratios
};

inline Rounds summarize(const std::vector<double>& ratios) {
  Rounds r;
  r.rounds = ratios.size();
  if (ratios.empty()) return r;
  r.median = median(ratios);
  r.lo = *std::min_element(ratios.begin(), ratios.end());
  r.hi = *std::max_element(ratios.begin(), ratios.end());
  return r;
}

struct Rule {
  double margin = 0.05;           ///< minimum win (0.05: 5% less time than the default)
  double point_tolerance = 0.08;  ///< largest median loss at any one point (0.08: 8% slower)
  std::size_t min_rounds = 3;     ///< fewer rounds measure no spread worth trusting: default kept
};

/// One alternative of a search: its value, per-round ratios and worst point.
struct Alternative {
  std::uint64_t value = 0;
  std::vector<double> ratios;  ///< per round: geometric mean over the points of alt / default
  double worst_point = 1.0;    ///< the largest median-over-rounds ratio alt / default at one point
  std::string worst_where;     ///< that point ("allgather 64K")
};

struct Verdict {
  Rounds r;
  double win = 0;   ///< 1 - median ratio
  double need = 0;  ///< what the win had to exceed: margin + spread
  bool eligible = true, take = false;
  std::string why;  ///< one phrase: "wins 31% > need 6%", "win 2% <= spread 9%", ...
};

inline std::string percent(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f%%", x * 100);
  return b;
}

/// The rule for one alternative (pure).
inline Verdict judge(const Alternative& a, const Rule& rule) {
  Verdict v;
  v.r = summarize(a.ratios);
  v.win = 1.0 - v.r.median;
  v.need = rule.margin + v.r.spread();
  v.eligible = a.worst_point <= 1.0 + rule.point_tolerance;
  if (v.r.rounds == 0) {
    v.why = "no point measured (none where its plan differs)";
  } else if (v.r.rounds < rule.min_rounds) {
    v.why = std::to_string(v.r.rounds) + " round(s) measure no spread (need " + std::to_string(rule.min_rounds) + ")";
  } else if (v.win <= 0) {
    v.why = "loses " + percent(-v.win);
  } else if (v.win <= rule.margin) {
    v.why = "win " + percent(v.win) + " <= margin " + percent(rule.margin);
  } else if (v.win <= v.need) {
    v.why = "win " + percent(v.win) + " <= margin " + percent(rule.margin) + " + spread " + percent(v.r.spread());
  } else if (!v.eligible) {
    v.why = "wins " + percent(v.win) + " but " + percent(a.worst_point - 1.0) + " slower at " + a.worst_where +
            " (tolerance " + percent(rule.point_tolerance) + ")";
  } else {
    v.take = true;
    v.why = "wins " + percent(v.win) + " > margin " + percent(rule.margin) + " + spread " + percent(v.r.spread());
  }
  return v;
}

struct Choice {
  int index = -1;  ///< the alternative taken, -1: the default kept
  std::vector<Verdict> verdicts;
  std::string reason;
};

/// The search's decision: the taken alternative with the lowest median ratio,
/// else the default; the reason names the deciding alternative's numbers.
inline Choice choose(const std::vector<Alternative>& alts, const Rule& rule) {
  Choice c;
  for (const Alternative& a : alts) c.verdicts.push_back(judge(a, rule));
  int closest = alts.empty() ? -1 : 0;  // the measured alternative with the lowest median (taken or not)
  for (std::size_t i = 0; i < alts.size(); ++i) {
    const Verdict& v = c.verdicts[i];
    const Verdict& w = c.verdicts[static_cast<std::size_t>(closest)];
    if (v.r.rounds > 0 && (w.r.rounds == 0 || v.r.median < w.r.median)) closest = static_cast<int>(i);
    if (v.take && (c.index < 0 || v.r.median < c.verdicts[static_cast<std::size_t>(c.index)].r.median))
      c.index = static_cast<int>(i);
  }
  if (alts.empty()) {
    c.reason = "no alternative: default kept";
  } else if (c.index >= 0) {
    const Verdict& v = c.verdicts[static_cast<std::size_t>(c.index)];
    c.reason = std::to_string(alts[static_cast<std::size_t>(c.index)].value) + " " + v.why + " over " +
               std::to_string(v.r.rounds) + " rounds: changed";
  } else {
    const Verdict& v = c.verdicts[static_cast<std::size_t>(closest)];
    c.reason = "best alternative " + std::to_string(alts[static_cast<std::size_t>(closest)].value) + ": " + v.why +
               " over " + std::to_string(v.r.rounds) + " rounds: default kept";
  }
  return c;
}

}  // namespace strata::tune
