// The model-based autotuner (autotune.hpp, docs/tuning.md "Tuning a simulated machine").
#include "strata/sim/autotune.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "strata/collectives/registry.hpp"
#include "strata/transport/topology.hpp"

namespace strata::sim {

namespace {

// The allreduce rows the crossovers (allreduce_rd_max_bytes,
// allreduce_ring_min_bytes) choose between, in the registry's order: below
// the first, between the two, from the second (rd, rabenseifner, ring).
std::vector<std::string> crossover_algorithms() {
  std::vector<std::string> out;
  for (const coll::AlgorithmRow* r : coll::algorithms_of(coll::Kind::allreduce)) {
    const auto& k = r->tuning_keys;
    if (std::find(k.begin(), k.end(), "allreduce_rd_max_bytes") != k.end() ||
        std::find(k.begin(), k.end(), "allreduce_ring_min_bytes") != k.end())
      out.push_back(r->name);
  }
  if (out.size() != 3)
    throw Error(Errc::internal, "strata-tune: the registry has " + std::to_string(out.size()) +
                                    " allreduce rows keyed by the crossovers, the search expects 3");
  return out;
}

using coll::Kind;
using coll::Tuning;
using coll::TuningField;
using Value = nlohmann::ordered_json;

std::string size_name(std::uint64_t b) {
  if (b >= (std::uint64_t{1} << 20) && b % (std::uint64_t{1} << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

// A JSON number, or "infeasible" for an infinite time / score (JSON has no infinity).
Value num(double x) { return std::isfinite(x) ? Value(x) : Value("infeasible"); }

// t / ref, with infeasible (infinite) times: inf / inf and x / 0 count as 1
// (no candidate can do better there), x / inf as 0, inf / x as inf.
double ratio(double t, double ref) {
  if (std::isinf(ref)) return std::isinf(t) ? 1.0 : 0.0;
  if (ref <= 0) return 1.0;
  return t / ref;
}

bool reduces(Kind k) { return k == Kind::reduce || k == Kind::allreduce; }

// One evaluation point of a search: a collective (with an explicit algorithm
// name, or "" for the automatic one) at one size.
struct Point {
  Kind kind;
  std::string algo;  // "" automatic; "tree", "rd", "rabenseifner", "ring"
  std::uint64_t bytes;
  bool reduced = false;  // on the machine of the allreduce crossovers (at most crossover_ranks ranks)
};

std::string point_name(const Point& p) {
  std::string s = coll::to_string(p.kind);
  if (!p.algo.empty()) s += ":" + p.algo;
  if (p.reduced) s += " (reduced machine)";
  return s;
}

class Tuner {
 public:
  Tuner(const MachineSpec& m, const CostModel& cost, const AutotuneOptions& o)
      : m_(m), cost_(cost), o_(o), places_(place_ranks(m)) {
    base_ = world_group(places_, o_.slot_bytes, o_.credits, true);
    // The allreduce crossovers on a machine of at most crossover_ranks ranks:
    // rabenseifner and ring plans have O(ranks^2) nodes in all.
    small_m_ = m_;
    const int ppn = static_cast<int>(places_.size()) / std::max(1, m_.hosts);
    if (static_cast<int>(places_.size()) > o_.crossover_ranks)
      small_m_.hosts = std::max(2, o_.crossover_ranks / std::max(1, ppn));
    small_places_ = place_ranks(small_m_);
    small_ = world_group(small_places_, o_.slot_bytes, o_.credits, true);
  }

  void say(const std::string& s) const {
    if (o_.progress) o_.progress(s);
  }

  // Simulated seconds of @p p under @p t (memoized by the table's hash).
  // The key is the point, the shapes and directions the call resolves to and
  // the rest of the table, so a table change that cannot affect the call
  // (another collective's tree) is not simulated again.
  double time(const Point& p, const Tuning& t, bool reduced = false) {
    coll::Group g = reduced ? small_ : base_;
    g.tuning = std::make_shared<const Tuning>(t);
    coll::Call c = automatic_call(g, p.kind, p.bytes);
    if (!p.algo.empty()) c.algo.name = p.algo;
    const coll::Algorithm a = coll::with_table(t, c.kind, c.algo);
    Tuning rest = t;
    for (const TuningField& f : coll::tuning_fields()) {
      const std::string n = f.name;
      if (n.find("_tree_") != std::string::npos || n.find("_pull_") != std::string::npos)
        rest.*f.member = Tuning{}.*f.member;
    }
    std::string key = std::to_string(static_cast<int>(p.kind)) + "/" + c.algo.name + "/" + std::to_string(p.bytes) +
                      "/" + std::to_string(rest.hash()) + (reduced ? "/reduced" : "");
    for (const coll::Shape& sh : {a.host, a.package, a.numa, a.core})
      key += "/" + std::to_string(static_cast<int>(sh.kind)) + ":" + std::to_string(sh.radix);
    for (coll::Direction d : {a.dir_host, a.dir_package, a.dir_numa, a.dir_core})
      key += d == coll::Direction::pull ? "P" : "p";
    const auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    double s = std::numeric_limits<double>::infinity();
    try {
      s = simulated_seconds(g, c, reduced ? small_places_ : places_, cost_);
    } catch (const Error& e) {
      // A candidate the compiler refuses (e.g. too many fragments) is
      // infeasible at this point: infinite time, never chosen.
      if (failures_.size() < 32) failures_.push_back(point_name(p) + " " + std::to_string(p.bytes) + " B: " + e.what());
    }
    ++sims_;
    memo_.emplace(key, s);
    return s;
  }

  // Searches one field over @p cand at @p pts; sets the chosen value in table_.
  // Returns whether it changed.
  bool search(const char* field_name, std::vector<std::uint64_t> cand, const std::vector<Point>& pts, Value* searches) {
    const TuningField* f = coll::tuning_field(field_name);
    const std::uint64_t cur = table_.*f->member;
    const std::uint64_t dflt = Tuning{}.*f->member;
    if (std::find(cand.begin(), cand.end(), cur) == cand.end()) cand.insert(cand.begin(), cur);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::vector<double>> times(cand.size(), std::vector<double>(pts.size()));
    for (std::size_t i = 0; i < cand.size(); ++i) {
      Tuning t = table_;
      t.*f->member = cand[i];
      for (std::size_t j = 0; j < pts.size(); ++j) times[i][j] = time(pts[j], t, pts[j].reduced);
    }
    std::vector<double> best(pts.size(), std::numeric_limits<double>::infinity());
    for (const auto& row : times)
      for (std::size_t j = 0; j < pts.size(); ++j) best[j] = std::min(best[j], row[j]);
    std::vector<double> score(cand.size(), 0.0);
    std::size_t icur = 0;
    for (std::size_t i = 0; i < cand.size(); ++i) {
      double lg = 0;
      for (std::size_t j = 0; j < pts.size(); ++j) lg += std::log(ratio(times[i][j], best[j]));
      score[i] = std::exp(lg / static_cast<double>(pts.size()));
      if (cand[i] == cur) icur = i;
    }
    // Eligible: nowhere more than max_loss slower than the current value
    // (a value that wins on the mean by losing at one size is refused).
    std::vector<double> worst(cand.size(), 0.0);
    for (std::size_t i = 0; i < cand.size(); ++i)
      for (std::size_t j = 0; j < pts.size(); ++j) worst[i] = std::max(worst[i], ratio(times[i][j], times[icur][j]));
    std::size_t ibest = icur;  // the current value stays on a tie
    for (std::size_t i = 0; i < cand.size(); ++i)
      if (worst[i] <= 1 + o_.max_loss && score[i] < score[ibest] * (1 - 1e-9)) ibest = i;
    table_.*f->member = cand[ibest];
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    char line[256];
    std::snprintf(line, sizeof line, "  %-26s %llu (score %.3f; previous %llu: %.3f) [%.1f s]", field_name,
                  static_cast<unsigned long long>(cand[ibest]), score[ibest], static_cast<unsigned long long>(cur),
                  score[icur], secs);
    say(line);
    // measurements.searches.<field>: the last search of the field wins.
    Value r = Value::object();
    r["default"] = Value(dflt);
    r["previous"] = Value(cur);
    r["chosen"] = Value(cand[ibest]);
    Value pv = Value::array();
    for (const Point& p : pts) {
      Value e = Value::object();
      e["collective"] = Value(point_name(p));
      e["bytes"] = Value(p.bytes);
      pv.push_back(std::move(e));
    }
    r["points"] = std::move(pv);
    Value cs = Value::array();
    for (std::size_t i = 0; i < cand.size(); ++i) {
      Value c = Value::object();
      c["value"] = Value(cand[i]);
      c["score"] = num(score[i]);
      c["worst_vs_previous"] = num(worst[i]);
      Value us = Value::array();
      for (double s : times[i]) us.push_back(num(s * 1e6));
      c["us"] = std::move(us);
      cs.push_back(std::move(c));
    }
    r["candidates"] = std::move(cs);
    (*searches)[field_name] = std::move(r);
    return cand[ibest] != cur;
  }

  // The allreduce crossovers: every algorithm at every size, then the pair
  // (rd_max, ring_min) whose selection has the lowest geometric mean of
  // (time / best algorithm's time) over the sizes (the current pair on a tie).
  void crossovers(const std::vector<std::uint64_t>& sizes, Value* searches) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<std::string> algos = crossover_algorithms();
    std::vector<std::vector<double>> t(algos.size(), std::vector<double>(sizes.size()));
    for (std::size_t a = 0; a < algos.size(); ++a)
      for (std::size_t j = 0; j < sizes.size(); ++j)
        t[a][j] = time({Kind::allreduce, algos[a], sizes[j], true}, table_, true);
    std::vector<double> best(sizes.size(), std::numeric_limits<double>::infinity());
    for (const auto& row : t)
      for (std::size_t j = 0; j < sizes.size(); ++j) best[j] = std::min(best[j], row[j]);
    auto score = [&](std::uint64_t rd_max, std::uint64_t ring_min) {
      double lg = 0;
      for (std::size_t j = 0; j < sizes.size(); ++j) {
        const std::size_t a = sizes[j] <= rd_max ? 0 : sizes[j] < ring_min ? 1 : 2;
        lg += std::log(ratio(t[a][j], best[j]));
      }
      return std::exp(lg / static_cast<double>(sizes.size()));
    };
    const std::uint64_t rd0 = table_.allreduce_rd_max_bytes, ring0 = table_.allreduce_ring_min_bytes;
    std::uint64_t rd = rd0, ring = ring0;
    double sbest = score(rd0, ring0);
    const double s0 = sbest;
    if (small_m_.hosts != m_.hosts)
      say("  (on " + std::to_string(small_m_.hosts) + " of the " + std::to_string(m_.hosts) + " hosts, " +
          std::to_string(small_.size()) + " ranks: rabenseifner and ring plans of " + std::to_string(base_.size()) +
          " ranks are too large to simulate in minutes)");
    std::vector<std::uint64_t> rds = {0}, rings = {std::uint64_t{64} << 30};
    for (std::uint64_t s : sizes) {
      rds.push_back(s);
      rings.push_back(s);
    }
    for (std::uint64_t a : rds)
      for (std::uint64_t b : rings) {
        if (b <= a) continue;
        const double s = score(a, b);
        if (s < sbest * (1 - 1e-9)) {
          sbest = s;
          rd = a;
          ring = b;
        }
      }
    table_.allreduce_rd_max_bytes = rd;
    table_.allreduce_ring_min_bytes = ring;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    char line[256];
    std::snprintf(line, sizeof line,
                  "  allreduce_rd_max_bytes      %llu, allreduce_ring_min_bytes %llu (score %.3f; previous %.3f) "
                  "[%.1f s]",
                  static_cast<unsigned long long>(rd), static_cast<unsigned long long>(ring), sbest, s0, secs);
    say(line);
    Value r = Value::object();
    r["rd_max_bytes"] = Value(rd);
    r["ring_min_bytes"] = Value(ring);
    r["score"] = num(sbest);
    r["previous_score"] = num(s0);
    r["hosts"] = Value(static_cast<std::uint64_t>(small_m_.hosts));
    r["ranks"] = Value(static_cast<std::uint64_t>(small_.size()));
    Value per = Value::array();
    for (std::size_t j = 0; j < sizes.size(); ++j) {
      Value e = Value::object();
      e["bytes"] = Value(sizes[j]);
      for (std::size_t a = 0; a < algos.size(); ++a) e[algos[a] + "_us"] = num(t[a][j] * 1e6);
      per.push_back(std::move(e));
    }
    r["per_size"] = std::move(per);
    (*searches)["allreduce_crossovers"] = std::move(r);
  }

  // Over ~80 lines: the simulated searches in sequence, each reading the table the previous wrote.
  AutotuneResult run() {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::uint64_t> sizes = o_.sizes;
    if (sizes.empty()) {
      sizes = {8, 64 << 10, 1 << 20};
      if (!o_.quick) sizes.push_back(16 << 20);
    }
    std::vector<std::uint64_t> ar_sizes = o_.allreduce_sizes;
    if (ar_sizes.empty())
      for (std::uint64_t s = 1024; s <= (o_.quick ? std::uint64_t{4} << 20 : std::uint64_t{16} << 20); s *= 4)
        ar_sizes.push_back(s);
    for (std::uint64_t s : sizes)
      if (s == 0 || s % 4 != 0)
        throw Error(Errc::invalid_argument,
                    "strata-tune --simulate: size " + std::to_string(s) + " is not a positive multiple of 4");
    auto points = [&](std::vector<Kind> kinds, const std::string& algo) {
      std::vector<Point> p;
      for (Kind k : kinds)
        for (std::uint64_t s : sizes) p.push_back({k, algo, s});
      return p;
    };
    const std::vector<Point> bcast = points({Kind::broadcast}, "");
    const std::vector<Point> red = points({Kind::reduce}, "");
    std::vector<Point> frag_pts = points({Kind::broadcast, Kind::reduce}, "");
    for (std::uint64_t s : ar_sizes)  // pipeline_fragment also cuts the allreduce step schedules
      if (s >= (64 << 10)) frag_pts.push_back({Kind::allreduce, "", s, true});
    const std::vector<Point> artree = points({Kind::allreduce}, "tree");
    const std::vector<std::uint64_t> host =
        o_.quick ? std::vector<std::uint64_t>{0, 1, 2, 4, 8} : std::vector<std::uint64_t>{0, 1, 2, 3, 4, 8, 16};
    const std::vector<std::uint64_t> inner =
        o_.quick ? std::vector<std::uint64_t>{0, 1, 2} : std::vector<std::uint64_t>{0, 1, 2, 4};
    const std::vector<std::uint64_t> dir = {0, 1};
    const std::vector<std::uint64_t> frag =
        o_.quick ? std::vector<std::uint64_t>{32 << 10, 64 << 10, 128 << 10, 256 << 10}
                 : std::vector<std::uint64_t>{16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10};
    char head[256];
    std::snprintf(head, sizeof head, "strata-tune --simulate: %d ranks (%d hosts x '%s'), sizes", base_.size(),
                  m_.hosts, m_.topology.c_str());
    std::string h = head;
    for (std::uint64_t s : sizes) h += " " + size_name(s);
    say(h);
    Value searches = Value::object();
    const int passes = o_.quick ? 1 : std::max(1, o_.passes);
    // The package level has edges only on hosts with more than one package:
    // elsewhere its fields cannot change a plan and are not searched.
    std::set<std::pair<int, int>> packages;
    for (const RankPlace& p : places_) packages.insert({p.host, p.package});
    const bool packaged = static_cast<int>(packages.size()) > m_.hosts;
    for (int pass = 0; pass < passes; ++pass) {
      say("pass " + std::to_string(pass + 1) + ":");
      bool changed = false;
      changed |= search("broadcast_tree_host", host, bcast, &searches);
      if (packaged) changed |= search("broadcast_tree_package", inner, bcast, &searches);
      changed |= search("broadcast_tree_numa", inner, bcast, &searches);
      changed |= search("broadcast_tree_core", inner, bcast, &searches);
      changed |= search("broadcast_pull_host", dir, bcast, &searches);
      if (packaged) changed |= search("broadcast_pull_package", dir, bcast, &searches);
      changed |= search("broadcast_pull_numa", dir, bcast, &searches);
      changed |= search("broadcast_pull_core", dir, bcast, &searches);
      changed |= search("reduce_tree_host", host, red, &searches);
      if (packaged) changed |= search("reduce_tree_package", inner, red, &searches);
      changed |= search("reduce_tree_numa", inner, red, &searches);
      changed |= search("reduce_tree_core", inner, red, &searches);
      if (!o_.quick) crossovers(ar_sizes, &searches);  // quick: once, at the end
      // Plans of a communicator spanning hosts take net_pipeline_fragment
      // (compile_common.hpp): that is the fragment a multi-host machine tunes.
      changed |= search(m_.hosts > 1 ? "net_pipeline_fragment" : "pipeline_fragment", frag, frag_pts, &searches);
      changed |= search("allreduce_tree_host", host, artree, &searches);
      if (packaged) changed |= search("allreduce_tree_package", inner, artree, &searches);
      changed |= search("allreduce_tree_numa", inner, artree, &searches);
      changed |= search("allreduce_tree_core", inner, artree, &searches);
      if (!changed) break;
    }
    say("allreduce crossovers under the final table:");
    crossovers(ar_sizes, &searches);

    AutotuneResult res;
    say("comparison with the built-in defaults:");
    auto cmp = [&](Kind k, std::uint64_t s) {
      AutotunePoint p;
      const bool reduced = k == Kind::allreduce && small_m_.hosts != m_.hosts;
      p.collective = coll::to_string(k);
      if (reduced) p.collective += " (" + std::to_string(small_.size()) + " ranks)";
      p.bytes = s;
      p.default_us = time({k, "", s}, Tuning{}, reduced) * 1e6;
      p.tuned_us = time({k, "", s}, table_, reduced) * 1e6;
      res.compare.push_back(p);
    };
    for (std::uint64_t s : sizes) cmp(Kind::broadcast, s);
    for (std::uint64_t s : sizes) cmp(Kind::reduce, s);
    for (std::uint64_t s : ar_sizes) cmp(Kind::allreduce, s);
    Value cv = Value::array();
    for (const AutotunePoint& p : res.compare) {
      Value e = Value::object();
      e["collective"] = Value(p.collective);
      e["bytes"] = Value(p.bytes);
      e["default_us"] = num(p.default_us);
      e["tuned_us"] = num(p.tuned_us);
      cv.push_back(std::move(e));
    }

    coll::TuningFile& f = res.file;
    f.table = table_;
    f.tool = o_.tool;
    {
      const std::time_t now = std::time(nullptr);
      std::tm tm{};
      gmtime_r(&now, &tm);
      char b[32];
      std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
      f.created = b;
    }
    f.machine.cpu_model = "simulated:" + (o_.machine_name.empty() ? std::string("machine") : o_.machine_name);
    f.machine.cores = static_cast<std::uint64_t>(base_.size());
    std::set<std::pair<int, int>> numas;
    for (const RankPlace& p : places_) numas.insert({p.host, p.numa});
    f.machine.numa_nodes = numas.size();
    f.machine.memory_bytes = 0;
    f.machine.kernel = "simulated";
    Value mach = Value::object();
    mach["file"] = Value(o_.machine_name);
    mach["hosts"] = Value(static_cast<std::uint64_t>(m_.hosts));
    mach["topology"] = Value(m_.topology);
    mach["ranks"] = Value(static_cast<std::uint64_t>(base_.size()));
    mach["cost_model"] = Value(cost_.describe());
    Value meas = Value::object();
    meas["simulated"] = std::move(mach);
    meas["score"] = Value(
        "per field: every candidate simulated at every (collective, size); score = "
        "geometric mean over the points of time / best candidate's time; lowest score "
        "among the candidates nowhere more than max_loss slower than the previous "
        "value wins, the previous value on a tie");
    meas["max_loss"] = num(o_.max_loss);
    meas["searches"] = std::move(searches);
    meas["comparison"] = std::move(cv);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    meas["seconds"] = num(secs);
    meas["simulations"] = Value(sims_);
    Value fails = Value::array();
    for (const std::string& e : failures_) fails.push_back(Value(e));
    meas["infeasible"] = std::move(fails);
    f.measurements = meas.dump();
    res.simulations = sims_;
    return res;
  }

 private:
  MachineSpec m_;
  CostModel cost_;
  AutotuneOptions o_;
  std::vector<RankPlace> places_;
  coll::Group base_;
  MachineSpec small_m_;
  std::vector<RankPlace> small_places_;
  coll::Group small_;
  Tuning table_;
  std::map<std::string, double> memo_;
  std::vector<std::string> failures_;  // infeasible points (compiler errors), the first 32
  std::uint64_t sims_ = 0;
};

}  // namespace

coll::Call automatic_call(const coll::Group& g, coll::Kind kind, std::uint64_t bytes) {
  coll::Call c;
  c.kind = kind;
  c.dtype = reduces(kind) ? dag::DataType::f32 : dag::DataType::u8;
  c.count = bytes / (reduces(kind) ? 4 : 1);
  c.root = 0;
  c.algo.tree_from_table = true;
  c.algo.direction_from_table = true;
  if (kind == Kind::allreduce) {
    const std::string n = coll::allreduce_auto(g, bytes, false);
    if (coll::find_algorithm(kind, n) != coll::default_algorithm(kind)) c.algo.name = n;
  }
  return c;
}

double simulated_seconds(const coll::Group& g, const coll::Call& call, const std::vector<RankPlace>& places,
                         const CostModel& cost) {
  return simulate(g, call, places, cost, 0).max_finish();
}

AutotuneResult autotune(const MachineSpec& m, const CostModel& cost, const AutotuneOptions& o) {
  Tuner t(m, cost, o);
  return t.run();
}

}  // namespace strata::sim
