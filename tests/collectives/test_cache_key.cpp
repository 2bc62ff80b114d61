// The plan-cache key (engine/src/cache_key.hpp): changing any field of a call
// that the compiler reads changes the key, so two different calls never share
// a plan; calls with code in them (a user reduction) get
// no key; equal calls get equal keys.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cache_key.hpp"

namespace {

using strata::coll::Call;
using strata::detail::cache_key;
using strata::detail::CacheKeyBuffer;

std::string key_of(const Call& c) {
  CacheKeyBuffer buf;
  return std::string(cache_key(c, buf));
}

// A call whose every field differs from the mutations below.
Call base(bool with_vectors) {
  Call c;
  c.kind = strata::coll::Kind::allreduce;
  c.count = 1000;
  c.dtype = strata::dag::DataType::f32;
  c.op = strata::dag::ReduceOp::sum;
  c.root = 1;
  if (with_vectors) {
    c.counts = {1, 2, 3};
    c.displs = {0, 1, 3};
    c.rcounts = {3, 2, 1};
    c.rdispls = {0, 3, 5};
  }
  c.algo.name = "tree";
  return c;
}

// One mutation per field of Call, Algorithm and Shape that is in the key
// (cache_key.hpp lists them; the structured bindings there fail to compile
// when a field is added, and this list must then grow too).
std::vector<std::pair<const char*, std::function<void(Call&)>>> mutations() {
  using strata::coll::Direction;
  using strata::coll::Shape;
  std::vector<std::pair<const char*, std::function<void(Call&)>>> m = {
      {"kind", [](Call& c) { c.kind = strata::coll::Kind::broadcast; }},
      {"count", [](Call& c) { c.count += 1; }},
      {"dtype", [](Call& c) { c.dtype = strata::dag::DataType::f64; }},
      {"op", [](Call& c) { c.op = strata::dag::ReduceOp::max; }},
      {"root", [](Call& c) { c.root = 2; }},
      {"in_place", [](Call& c) { c.in_place = true; }},
      {"entry_all", [](Call& c) { c.entry_all = true; }},
      {"exit_all", [](Call& c) { c.exit_all = true; }},
      {"counts (value)",
       [](Call& c) {
         c.counts.assign({1, 2, 4});
       }},
      {"counts (size)", [](Call& c) { c.counts.push_back(7); }},
      {"displs",
       [](Call& c) {
         c.displs.assign({0, 1, 4});
       }},
      {"rcounts",
       [](Call& c) {
         c.rcounts.assign({3, 2, 2});
       }},
      {"rdispls",
       [](Call& c) {
         c.rdispls.assign({0, 3, 6});
       }},
      {"direct", [](Call& c) { c.direct = true; }},
      {"fast_ok", [](Call& c) { c.fast_ok = true; }},
      {"shared_buffers", [](Call& c) { c.shared_buffers = true; }},
      {"algo.name", [](Call& c) { c.algo.name = "ring"; }},
      {"algo.hierarchical", [](Call& c) { c.algo.hierarchical = false; }},
      {"algo.fragment", [](Call& c) { c.algo.fragment = 4096; }},
      {"algo.halves_threshold", [](Call& c) { c.algo.halves_threshold = 65536; }},
      {"algo.dir_host", [](Call& c) { c.algo.dir_host = Direction::pull; }},
      {"algo.dir_numa", [](Call& c) { c.algo.dir_numa = Direction::pull; }},
      {"algo.dir_core", [](Call& c) { c.algo.dir_core = Direction::pull; }},
      {"algo.dir_single", [](Call& c) { c.algo.dir_single = Direction::pull; }},
      {"algo.dir_package", [](Call& c) { c.algo.dir_package = Direction::pull; }},
      {"algo.max_outstanding", [](Call& c) { c.algo.max_outstanding = 16; }},
      {"algo.tree_from_table", [](Call& c) { c.algo.tree_from_table = true; }},
      {"algo.direction_from_table", [](Call& c) { c.algo.direction_from_table = true; }},
  };
  for (auto level : {&strata::coll::Algorithm::host, &strata::coll::Algorithm::package, &strata::coll::Algorithm::numa,
                     &strata::coll::Algorithm::core, &strata::coll::Algorithm::single}) {
    m.emplace_back("algo.<level>.kind", [level](Call& c) {
      Shape& s = c.algo.*level;
      s.kind = s.kind == Shape::binary ? Shape::flat : Shape::binary;
    });
    m.emplace_back("algo.<level>.radix", [level](Call& c) { (c.algo.*level).radix += 3; });
  }
  return m;
}

TEST(CacheKey, EqualCallsHaveEqualKeys) {
  for (bool vectors : {false, true}) {
    EXPECT_FALSE(key_of(base(vectors)).empty());
    EXPECT_EQ(key_of(base(vectors)), key_of(base(vectors)));
  }
  EXPECT_NE(key_of(base(false)), key_of(base(true)));
}

TEST(CacheKey, ChangingAnyFieldChangesTheKey) {
  for (bool vectors : {false, true}) {
    const std::string k0 = key_of(base(vectors));
    for (const auto& [what, mutate] : mutations()) {
      Call c = base(vectors);
      mutate(c);
      const std::string k = key_of(c);
      EXPECT_FALSE(k.empty()) << what;
      EXPECT_NE(k, k0) << what << (vectors ? " (with vectors)" : "");
    }
  }
}

TEST(CacheKey, AlgorithmNameAndVectorsAreDelimited) {
  // The name is the key's tail and the vectors' sizes come first, so moving
  // an element from one vector to the next (or into the name) changes the key.
  Call a = base(true);
  Call b = base(true);
  b.counts.pop_back();
  b.displs.insert(b.displs.begin(), 3);
  EXPECT_NE(key_of(a), key_of(b));
  Call c = base(false);
  Call d = base(false);
  c.algo.name = "rd";
  d.algo.name = "rd2";
  EXPECT_NE(key_of(c), key_of(d));
  // A long name leaves the stack buffer: same key either way.
  Call e = base(false);
  e.algo.name = std::string(300, 'x');
  EXPECT_EQ(key_of(e), key_of(e));
  Call f = e;
  f.algo.name.back() = 'y';
  EXPECT_NE(key_of(e), key_of(f));
}

// Excluded on purpose (cache_key.hpp says why): the tag routes a call to its
// communicator's tag lane and does not change the plan.
TEST(CacheKey, TheTagIsNotInTheKey) {
  Call a = base(false);
  Call b = a;
  b.tag = 3;
  EXPECT_EQ(key_of(a), key_of(b));
}

TEST(CacheKey, UserReductionsAreNotCached) {
  Call d = base(false);
  d.user_op = std::make_shared<strata::dag::UserReduce>();
  EXPECT_TRUE(key_of(d).empty());
}

// on_block and compute callables are bound per start (Bindings::compute):
// their presence is in the key, the callables are not.
TEST(CacheKey, CallbacksAreBoundPerStartSoOnlyTheirPresenceIsKeyed) {
  const Call plain = base(false);
  Call a = plain, b = plain, c = plain, d = plain;
  a.on_block = [](int, void*, std::size_t) {};
  b.on_block = [](int, void*, std::size_t) { (void)0; };
  c.compute = [] {};
  d.compute = [] {};
  d.on_block = a.on_block;
  for (const Call* x : {&a, &b, &c, &d}) EXPECT_FALSE(key_of(*x).empty());
  EXPECT_EQ(key_of(a), key_of(b));
  EXPECT_NE(key_of(a), key_of(plain));
  EXPECT_NE(key_of(c), key_of(plain));
  EXPECT_NE(key_of(c), key_of(a));
  EXPECT_NE(key_of(d), key_of(a));
  EXPECT_NE(key_of(d), key_of(c));
}

}  // namespace
