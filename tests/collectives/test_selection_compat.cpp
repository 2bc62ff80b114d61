// TEMPORARY (deleted once run): the old engine selection (HEAD's
// engine/src/select.hpp and the api_*.cpp resolvers) vs the registry's public
// selection over a broad grid of kinds x options; identical results or identical errors.
#include <gtest/gtest.h>

#include "old_select_tmp.hpp"
#include "strata/collectives/select.hpp"

namespace strata::old_sel {
const char* family(coll::Kind k) {
  switch (k) {
    case coll::Kind::allgatherv:
      return "allgather";
    case coll::Kind::alltoallv:
      return "alltoall";
    case coll::Kind::reduce_scatter_block:
      return "reduce_scatter";
    default:
      return coll::to_string(k);
  }
}
bool known_algo(coll::Kind k, const std::string& a) {
  switch (k) {
    case coll::Kind::allgather:
    case coll::Kind::allgatherv:
      return a == "ring" || a == "rd" || a == "bruck" || a == "hier" || a == "numa-ring" || a == "single-copy" ||
             a == "mapped";
    case coll::Kind::alltoall:
      return a == "pairwise" || a == "bruck" || a == "pull" || a == "single-copy" || a == "mapped";
    case coll::Kind::alltoallv:
      return a == "pairwise" || a == "pull";
    case coll::Kind::reduce_scatter_block:
      return a == "ring" || a == "rh" || a == "rd" || a == "halving" || a == "pairwise" || a == "single-copy" ||
             a == "mapped";
    default:
      return a == "ring" || a == "rh" || a == "rd" || a == "halving" || a == "pairwise" || a == "mapped";
  }
}
coll::Algorithm sym(coll::Kind kind, const CollOptions& o, int rank) {
  std::string name = env_or(o.algorithm, "STRATA_ALGO_" + upper(coll::to_string(kind)));
  name = env_or(name, "STRATA_ALGO_" + upper(family(kind)));
  if (name == "tree" || name == "single" || name == "hierarchical" || name == "auto") name.clear();
  if (!name.empty() && !known_algo(kind, name)) throw Error(Errc::invalid_argument, "unknown");
  const std::string tree = env_or(o.tree, "STRATA_TREE_" + upper(coll::to_string(kind)));
  if (!tree.empty()) throw Error(Errc::invalid_argument, "tree");
  CollOptions t = o;
  t.tree.clear();
  t.algorithm = "tree";
  coll::Algorithm a = choose_uncached(kind, t, rank);
  a.name = name.empty() ? "auto" : name;
  return a;
}
coll::Algorithm rooted(coll::Kind kind, const CollOptions& o, int rank) {
  const bool v = kind == coll::Kind::gatherv || kind == coll::Kind::scatterv;
  std::string algo = env_or(o.algorithm, "STRATA_ALGO_" + upper(coll::to_string(kind)));
  const bool automatic = algo.empty() || algo == "auto";
  if (automatic) algo = v ? "flat" : "tree";
  CollOptions rest = o;
  bool direct = algo == "flat" || algo == "ring" || algo == "mapped";
  if (!direct && algo != "tree" && algo != "hierarchical" && algo != "single" && algo != "flat-tree")
    throw Error(Errc::invalid_argument, "unknown");
  rest.algorithm = direct ? "tree" : algo;
  coll::Algorithm a = choose_uncached(kind, rest, rank);
  if (automatic && direct && a.any_pull()) direct = false;
  if (direct) a.name = algo;
  if (direct && a.any_pull()) throw Error(Errc::invalid_argument, "pull");
  return a;
}
coll::Algorithm allreduce(const CollOptions& o, const coll::Group& g, bool noncomm, std::uint64_t bytes) {
  std::string name = env_or(o.algorithm, "STRATA_ALGO_ALLREDUCE");
  if (name.empty() || name == "auto") {
    name = coll::allreduce_auto(g, bytes, noncomm);
    if (name == "tree") name.clear();
  }
  const bool tree = name.empty() || name == "auto" || name == "tree" || name == "hierarchical" || name == "single" ||
                    name == "flat-tree";
  CollOptions topts = o;
  topts.algorithm = tree && !name.empty() && name != "auto" ? name : "tree";
  if (tree) return choose_uncached(coll::Kind::allreduce, topts, 0);
  const bool hier = name == "hier" || name == "hier:rd" || name == "hier:rabenseifner" || name == "hier:ring";
  if (name == "recursive-doubling") name = "rd";
  if (name != "rd" && name != "rabenseifner" && name != "ring" && name != "mapped" && name != "single-copy" && !hier)
    throw Error(Errc::invalid_argument, "unknown");
  if (noncomm && (name == "rabenseifner" || name == "ring" || name == "hier:rabenseifner" || name == "hier:ring"))
    throw Error(Errc::unsupported, "order");
  coll::Algorithm a = choose_uncached(coll::Kind::allreduce, topts, 0);
  a.name = name;
  return a;
}
}  // namespace strata::old_sel

namespace {
using namespace strata;
bool same(const coll::Algorithm& a, const coll::Algorithm& b) {
  auto sh = [](const coll::Shape& x, const coll::Shape& y) { return x.kind == y.kind && x.radix == y.radix; };
  return a.name == b.name && a.hierarchical == b.hierarchical && sh(a.host, b.host) && sh(a.numa, b.numa) &&
         sh(a.core, b.core) && sh(a.single, b.single) && a.fragment == b.fragment &&
         a.halves_threshold == b.halves_threshold && a.dir_host == b.dir_host && a.dir_numa == b.dir_numa &&
         a.dir_core == b.dir_core && a.dir_single == b.dir_single && a.tree_from_table == b.tree_from_table &&
         a.direction_from_table == b.direction_from_table;
}

TEST(SelectionCompat, OldAndNewAgreeOnABroadGrid) {
  const std::vector<std::string> algos = {"",
                                          "auto",
                                          "tree",
                                          "single",
                                          "hierarchical",
                                          "flat-tree",
                                          "dissemination",
                                          "mapped",
                                          "single-copy",
                                          "flat",
                                          "ring",
                                          "rd",
                                          "recursive-doubling",
                                          "rabenseifner",
                                          "hier",
                                          "hier:rd",
                                          "hier:rabenseifner",
                                          "hier:ring",
                                          "bruck",
                                          "numa-ring",
                                          "pairwise",
                                          "pull",
                                          "rh",
                                          "halving",
                                          "nonsense"};
  const std::vector<std::string> trees = {"", "host:4", "single:3", "numa:binary,core:chain", "bad"};
  const std::vector<std::string> frags = {"", "auto", "none", "fixed:4096", "halves", "halves:100", "bogus"};
  const std::vector<std::string> dirs = {"", "auto", "push", "pull", "host:pull,numa:push", "single:pull", "x"};
  coll::Group g;
  for (int r = 0; r < 8; ++r) {
    g.world.push_back(r);
    g.host.push_back(r / 4);
    g.numa.push_back(0);
  }
  g.world_size = 8;
  int same_ok = 0, both_threw = 0;
  for (int k = 0; k <= static_cast<int>(coll::Kind::reduce_scatter_block); ++k)
    for (const auto& a : algos)
      for (const auto& t : trees)
        for (const auto& f : frags)
          for (const auto& d : dirs)
            for (const std::uint64_t bytes : {std::uint64_t{8}, std::uint64_t{64} << 10, std::uint64_t{8} << 20})
              for (const bool noncomm : {false, true}) {
                const auto kind = static_cast<coll::Kind>(k);
                if (kind != coll::Kind::allreduce && (bytes != 8 || noncomm)) continue;
                CollOptions o;
                o.algorithm = a;
                o.tree = t;
                o.fragment = f;
                o.direction = d;
                coll::Algorithm old_a, new_a;
                bool old_threw = false, new_threw = false;
                try {
                  switch (kind) {
                    case coll::Kind::barrier:
                    case coll::Kind::broadcast:
                    case coll::Kind::reduce:
                      old_a = old_sel::choose_uncached(kind, o, 0);
                      break;
                    case coll::Kind::allreduce:
                      old_a = old_sel::allreduce(o, g, noncomm, bytes);
                      break;
                    case coll::Kind::gather:
                    case coll::Kind::gatherv:
                    case coll::Kind::scatter:
                    case coll::Kind::scatterv:
                      old_a = old_sel::rooted(kind, o, 0);
                      break;
                    default:
                      old_a = old_sel::sym(kind, o, 0);
                  }
                } catch (const Error&) {
                  old_threw = true;
                }
                try {
                  coll::Request r;
                  r.kind = kind;
                  r.options = {a, t, f, d};
                  r.rank = 0;
                  r.bytes = bytes;
                  r.ordered = noncomm;
                  new_a = coll::select_algorithm(r, g, coll::Environment::process());
                } catch (const Error&) {
                  new_threw = true;
                }
                ASSERT_EQ(old_threw, new_threw) << coll::to_string(kind) << " a=" << a << " t=" << t << " f=" << f
                                                << " d=" << d << " bytes=" << bytes << " noncomm=" << noncomm;
                if (old_threw) {
                  ++both_threw;
                  continue;
                }
                ASSERT_TRUE(same(old_a, new_a)) << coll::to_string(kind) << " a=" << a << " t=" << t << " f=" << f
                                                << " d=" << d << " old " << old_a.name << " new " << new_a.name;
                ++same_ok;
              }
  std::printf("selection compat: %d identical, %d refused by both\n", same_ok, both_threw);
}
}  // namespace
