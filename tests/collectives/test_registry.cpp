// The algorithm registry (strata/collectives/registry.hpp): its rows are
// consistent, compile() runs the row the registry plans for every call of a
// grid of collectives, sizes, worlds and named algorithms, strata-info --plan
// and strata-sim report that same row, and docs/algorithms.md holds the
// current generated table.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "../common/launch.hpp"
#include "strata/collectives/registry.hpp"
#include "strata/collectives/select.hpp"

namespace {

namespace coll = strata::coll;
using coll::Kind;

constexpr int kKinds = static_cast<int>(Kind::reduce_scatter_block) + 1;

coll::Group world(int ranks, int hosts) {
  coll::Group g;
  g.world_size = ranks;
  g.slot_bytes = std::size_t{1} << 20;
  g.credits = 4;
  for (int r = 0; r < ranks; ++r) {
    g.world.push_back(r);
    g.host.push_back(static_cast<int>(static_cast<long long>(r) * hosts / ranks));
    g.numa.push_back(0);
  }
  return g;
}

// The plan's recorded algorithm belongs to @p row (tree rows record "tree (...)").
bool label_matches(const coll::AlgorithmRow& row, const std::string& label) {
  if (row.tree) return label.rfind("tree", 0) == 0;
  return label.rfind(row.name, 0) == 0;
}

TEST(Registry, EveryCollectiveHasRowsWithUniqueNamesAndCompilers) {
  for (int k = 0; k < kKinds; ++k) {
    const auto kind = static_cast<Kind>(k);
    const auto rows = coll::algorithms_of(kind);
    ASSERT_FALSE(rows.empty()) << coll::to_string(kind);
    std::set<std::string> names;
    for (const coll::AlgorithmRow* r : rows) {
      EXPECT_NE(r->compile, nullptr) << r->name;
      EXPECT_FALSE(r->schedule.empty()) << r->name;
      EXPECT_FALSE(r->cost.empty()) << r->name;
      EXPECT_TRUE(names.insert(r->name).second) << coll::to_string(kind) << " " << r->name;
      for (const std::string& a : r->aliases) EXPECT_TRUE(names.insert(a).second) << a;
      EXPECT_EQ(coll::find_algorithm(kind, r->name), r);
    }
    EXPECT_EQ(coll::find_algorithm(kind, "no-such-algorithm"), nullptr);
  }
  EXPECT_EQ(coll::default_algorithm(Kind::broadcast)->name, "tree");
  EXPECT_EQ(coll::default_algorithm(Kind::gatherv)->name, "flat");
  EXPECT_EQ(coll::default_algorithm(Kind::allgather), nullptr);
}

// For every call of the grid that the selection accepts, compile() runs the
// planned row (the plan records its algorithm) on every rank.
TEST(Registry, CompileRunsThePlannedRow) {
  int checked = 0;
  for (int k = 0; k < kKinds; ++k) {
    const auto kind = static_cast<Kind>(k);
    std::vector<std::string> algos = {""};
    for (const coll::AlgorithmRow* r : coll::algorithms_of(kind))
      if (r->selectable && r->variant != coll::Variant::mapped && r->variant != coll::Variant::single_copy)
        algos.push_back(r->name);  // the memory-protocol rows need flags the planning groups lack
    for (const auto& [ranks, hosts] : std::vector<std::pair<int, int>>{{1, 1}, {2, 1}, {4, 1}, {8, 2}, {6, 3}})
      for (const std::uint64_t bytes : {std::uint64_t{64}, std::uint64_t{4096}, std::uint64_t{256} << 10})
        for (const std::string& a : algos) {
          coll::Group g = world(ranks, hosts);
          coll::Options o;
          o.algorithm = a;
          coll::Call c;
          try {
            c = coll::planning_call(g, kind, bytes, o, coll::Environment());
          } catch (const strata::Error&) {
            continue;  // refused by the selection (e.g. pull-less names the tree needs)
          }
          const coll::AlgorithmRow* row = coll::planned_algorithm(g, c);
          ASSERT_NE(row, nullptr) << coll::to_string(kind) << " '" << a << "'";
          if (!a.empty() && !coll::means_automatic(kind, a)) {
            EXPECT_TRUE(row->named(a)) << row->name << " for " << a;
          }
          for (int r = 0; r < ranks; ++r) {
            g.rank = r;
            std::shared_ptr<const strata::dag::Plan> p;
            try {
              p = coll::compile(g, c, 0);
            } catch (const strata::Error& e) {
              ADD_FAILURE() << coll::to_string(kind) << " " << bytes << " B '" << a << "' on " << ranks << "/" << hosts
                            << ": " << e.what();
              break;
            }
            EXPECT_TRUE(label_matches(*row, p->algorithm()))
                << coll::to_string(kind) << " " << bytes << " B '" << a << "': planned " << row->name << ", compiled "
                << p->algorithm();
          }
          ++checked;
        }
  }
  EXPECT_GT(checked, 300);
}

// The tools of this build (STRATA_BIN from CTest, else the build tree's bin/).
std::string bin(const char* tool) {
  const char* b = std::getenv("STRATA_BIN");
  return (b != nullptr ? std::string(b) : std::string(STRATA_BINARY_DIR) + "/bin") + "/" + tool;
}

// The package level in the tree and direction specs: CollOptions::tree /
// direction and STRATA_TREE_<COLL> set it alone; an unknown level is named.
TEST(Registry, TreeAndDirectionSpecsAcceptThePackageLevel) {
  using Vars = std::unordered_map<std::string, std::string>;
  const coll::Group g = world(4, 1);
  coll::Request r;
  r.kind = Kind::broadcast;
  r.options.tree = "host:flat,package:chain,numa:3";
  r.options.direction = "package:pull,core:pull";
  const coll::Algorithm a = coll::select_algorithm(r, g, coll::Environment());
  EXPECT_EQ(a.package.kind, coll::Shape::knomial);
  EXPECT_EQ(a.package.radix, 1);
  EXPECT_EQ(a.host.kind, coll::Shape::flat);
  EXPECT_EQ(a.numa.radix, 3);
  EXPECT_EQ(a.dir_package, coll::Direction::pull);
  EXPECT_EQ(a.dir_core, coll::Direction::pull);
  EXPECT_EQ(a.dir_numa, coll::Direction::push);
  EXPECT_EQ(a.dir_host, coll::Direction::push);
  EXPECT_FALSE(a.tree_from_table);
  EXPECT_FALSE(a.direction_from_table);

  coll::Request e;
  e.kind = Kind::reduce;
  const coll::Algorithm b =
      coll::select_algorithm(e, g, coll::Environment(Vars{{"STRATA_TREE_REDUCE", "package:flat"}}));
  EXPECT_EQ(b.package.kind, coll::Shape::flat);
  EXPECT_EQ(b.numa.kind, coll::Shape::knomial);  // untouched
  e.kind = Kind::broadcast;
  const coll::Algorithm p = coll::select_algorithm(e, g, coll::Environment(Vars{{"STRATA_DIRECTION", "pull"}}));
  EXPECT_EQ(p.dir_package, coll::Direction::pull);  // "pull" alone: every level

  for (const char* bad : {"socket:2", "package"}) {
    coll::Request q;
    q.kind = Kind::broadcast;
    q.options.tree = bad;
    std::string m = "no error";
    try {
      (void)coll::select_algorithm(q, g, coll::Environment());
    } catch (const strata::Error& err) {
      m = err.what();
    }
    EXPECT_NE(m.find("'tree'"), std::string::npos) << bad << ": " << m;
  }
  coll::Request q;
  q.kind = Kind::broadcast;
  q.options.tree = "socket:2";
  try {
    (void)coll::select_algorithm(q, g, coll::Environment());
    ADD_FAILURE() << "socket:2 accepted";
  } catch (const strata::Error& err) {
    EXPECT_NE(std::string(err.what()).find("is not host|package|numa|core|single"), std::string::npos) << err.what();
  }
  q.options.tree.clear();
  q.options.direction = "socket:pull";
  try {
    (void)coll::select_algorithm(q, g, coll::Environment());
    ADD_FAILURE() << "socket:pull accepted";
  } catch (const strata::Error& err) {
    EXPECT_NE(std::string(err.what()).find("is not host | package | numa | core | single"), std::string::npos)
        << err.what();
  }
}

// strata-info --plan and strata-sim report the row the registry plans on the
// engine's communicator (coll::planning_group), every rank's compiled plan is
// that row's, and strata-sim runs it: across hosts, and on one host where the
// memory-protocol plans (mapped, single copy) take calls over.
TEST(Registry, StrataInfoAndStrataSimAgreeWithTheRegistry) {
  struct Case {
    Kind kind;
    std::uint64_t bytes;
    const char* algo;
    int hosts;
  };
  std::set<std::string> planned;
  for (const Case& k :
       {Case{Kind::allreduce, 1024, "", 2}, Case{Kind::allreduce, 256 << 10, "", 2},
        Case{Kind::allreduce, 8 << 20, "", 2}, Case{Kind::allgather, 64, "", 2}, Case{Kind::allgather, 1 << 20, "", 2},
        Case{Kind::alltoall, 64, "", 2}, Case{Kind::broadcast, 4096, "", 2},
        Case{Kind::reduce_scatter_block, 4096, "", 2}, Case{Kind::gather, 4096, "ring", 2},
        Case{Kind::allgather, 4096, "numa-ring", 2},
        Case{Kind::allgather, 64 << 10, "", 2},  // hier-single-copy: 4 + 4 members, 64 KiB blocks
        // one host: mapped and single-copy selections, automatic and named
        Case{Kind::allreduce, 64, "", 1}, Case{Kind::allreduce, 64 << 10, "", 1}, Case{Kind::barrier, 0, "", 1},
        Case{Kind::broadcast, 64, "", 1}, Case{Kind::broadcast, 16 << 10, "", 1}, Case{Kind::broadcast, 4 << 20, "", 1},
        Case{Kind::reduce, 64, "", 1}, Case{Kind::gather, 1024, "", 1}, Case{Kind::scatter, 1024, "", 1},
        Case{Kind::allgather, 64 << 10, "", 1}, Case{Kind::alltoall, 16 << 10, "", 1},
        Case{Kind::reduce_scatter_block, 4096, "", 1}, Case{Kind::reduce_scatter_block, 64 << 10, "", 1},
        Case{Kind::broadcast, 64, "mapped", 1}, Case{Kind::allgather, 64, "single-copy", 1},
        Case{Kind::allreduce, 64, "rd", 1}}) {
    const int ranks = k.hosts == 1 ? 4 : 8;
    coll::Group g = coll::planning_group(ranks, k.hosts);
    coll::Options o;
    o.algorithm = k.algo;
    const coll::Call c = coll::planning_call(g, k.kind, k.bytes, o);
    const coll::AlgorithmRow* row = coll::planned_algorithm(g, c);
    ASSERT_NE(row, nullptr);
    planned.insert(row->name);
    const std::string name = coll::to_string(k.kind);
    for (int r = 0; r < ranks; ++r) {
      g.rank = r;
      const std::string label = coll::compile(g, c, 0)->algorithm();
      EXPECT_TRUE(label_matches(*row, label))
          << name << " " << k.bytes << " B: planned " << row->name << ", compiled " << label;
    }
    const std::string algo = *k.algo != '\0' ? std::string(" --algo ") + k.algo : std::string();
    const launch::ProcessResult info =
        launch::run_command(bin("strata-info") + " --plan " + name + " --bytes " + std::to_string(k.bytes) +
                            " --ranks " + std::to_string(ranks) + " --hosts " + std::to_string(k.hosts) + algo);
    ASSERT_EQ(info.status, 0) << info.out;
    EXPECT_NE(info.out.find(": " + row->name + "\n"), std::string::npos) << info.out << " vs " << row->name;
    const launch::ProcessResult sim = launch::run_command(bin("strata-sim") + " --hosts " + std::to_string(k.hosts) +
                                                          " --topology 'package:1 numa:1 core:4 pu:1' --coll " + name +
                                                          " --bytes " + std::to_string(k.bytes) + " --quiet" + algo);
    ASSERT_EQ(sim.status, 0) << sim.out;
    EXPECT_NE(sim.out.find("algorithm " + row->name + ","), std::string::npos) << sim.out << " vs " << row->name;
  }
  EXPECT_EQ(planned.count("mapped"), 1u) << "no case ran a mapped plan";
  EXPECT_EQ(planned.count("single-copy"), 1u) << "no case ran a single-copy plan";
  EXPECT_EQ(planned.count("hier-single-copy"), 1u) << "no case ran a single-copy plan across hosts";
}

// docs/algorithms.md holds the current generated table (strata-info --algorithms --markdown).
TEST(Registry, DocsHoldTheGeneratedTable) {
  std::ifstream in(std::string(STRATA_SOURCE_DIR) + "/docs/algorithms.md");
  ASSERT_TRUE(in) << "docs/algorithms.md";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string table = coll::algorithm_table_markdown();
  EXPECT_NE(ss.str().find(table), std::string::npos)
      << "docs/algorithms.md is out of date: replace its algorithm table with the output of "
         "strata-info --algorithms --markdown";
  EXPECT_NE(ss.str().find("## Adding an algorithm"), std::string::npos);
}

}  // namespace
