// The tuning table (docs/tuning.md): the strict JSON reader / writer, the
// file's parser (malformed, wrong version, wrong type, unknown field, out of
// range), the machine fingerprint check, the resolution (STRATA_TUNING,
// default location, off), round trip, and that a table changes what the
// compilers emit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "../common/fake_ranks.hpp"
#include "json_codec.hpp"  // collectives/src: the private codec of the tuning files
#include "strata/collectives/compile.hpp"
#include "strata/collectives/tuning.hpp"
#include "strata/error.hpp"

namespace {

using strata::coll::Fingerprint;
using strata::coll::Tuning;
using strata::coll::TuningFile;
namespace json = strata::coll::detail;

// The message of the Error thrown by f (empty when nothing is thrown).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const strata::Error& e) {
    return e.what();
  }
  return {};
}

std::string valid_doc(const std::string& decisions = "\"pipeline_fragment\": 65536",
                      const Fingerprint& m = Fingerprint::here(), const std::string& version = "1") {
  TuningFile f;
  f.machine = m;
  std::string machine = f.machine.to_json();
  machine.pop_back();  // trailing newline
  return "{\"strata_tuning\": " + version + ", \"machine\": " + machine + ", \"decisions\": {" + decisions + "}}";
}

// A scratch directory, removed at the end of the test.
struct TempDir {
  std::filesystem::path p;
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "strata-tuning-test.XXXXXX").string();
    p = mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(p, ec);
  }
  std::string file(const std::string& name, const std::string& text) const {
    const std::string path = (p / name).string();
    std::ofstream(path) << text;
    return path;
  }
};

// Sets an environment variable for the scope of a test.
struct ScopedEnv {
  std::string name;
  std::string old;
  bool had;
  ScopedEnv(const char* n, const char* v) : name(n) {
    const char* o = std::getenv(n);
    had = o != nullptr;
    if (had) old = o;
    if (v != nullptr)
      setenv(n, v, 1);
    else
      unsetenv(n);
  }
  ~ScopedEnv() {
    if (had)
      setenv(name.c_str(), old.c_str(), 1);
    else
      unsetenv(name.c_str());
  }
};

// ---------------------------------------------------------------- JSON
TEST(Json, ParsesEveryTypeAndKeepsOrder) {
  const json::Json v = json::parse_strict(
      R"({"b": true, "n": null, "u": 18446744073709551615, "d": -1.5e3, "s": "a\"\\\u00e9\ud83d\ude00", "a": [1, {}]})",
      "t");
  ASSERT_TRUE(v.is_object());
  ASSERT_EQ(v.size(), 6u);
  EXPECT_EQ(v.begin().key(), "b");
  EXPECT_TRUE(v.at("b").get<bool>());
  EXPECT_TRUE(v.at("n").is_null());
  EXPECT_TRUE(v.at("u").is_number_unsigned());
  EXPECT_EQ(v.at("u").get<std::uint64_t>(), 18446744073709551615ull);
  EXPECT_FALSE(v.at("d").is_number_unsigned());
  EXPECT_DOUBLE_EQ(v.at("d").get<double>(), -1500.0);
  EXPECT_EQ(v.at("s").get<std::string>(), "a\"\\\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(v.at("a").size(), 2u);
}

TEST(Json, RefusesWhatRfc8259Refuses) {
  for (const char* bad : {"",
                          "{",
                          "{\"a\": 1,}",
                          "[1, 2,]",
                          "{'a': 1}",
                          "{\"a\" 1}",
                          "01",
                          "1.",
                          ".5",
                          "+1",
                          "NaN",
                          "[1] 2",
                          "{\"a\": 1, \"a\": 2}",
                          "\"\t\"",
                          "\"\\x\"",
                          "\"\\ud800\"",
                          "// c\n1",
                          "tru",
                          "[1 2]",
                          "1e"}) {
    const std::string e = error_of([&] { (void)json::parse_strict(bad, "doc"); });
    EXPECT_EQ(e.rfind("doc: ", 0), 0u) << "accepted: " << bad;
    EXPECT_NE(e.find("malformed JSON"), std::string::npos) << e;
    // Syntax errors name the line and column (a duplicate key has no position).
    if (std::string(bad).find("\"a\": 2") == std::string::npos) {
      EXPECT_NE(e.find("doc: line"), std::string::npos) << e;
    }
  }
  // Values nested in more than 64 containers are refused.
  std::string deep(66, '[');
  deep += std::string(66, ']');
  EXPECT_NE(error_of([&] { (void)json::parse_strict(deep, "doc"); }).find("nesting deeper than 64"), std::string::npos);
  EXPECT_NO_THROW((void)json::parse_strict(std::string(65, '[') + std::string(65, ']'), "doc"));
  EXPECT_NE(error_of([] { (void)json::parse_strict("[1e400]", "doc"); }).find("number out of range"),
            std::string::npos);
}

TEST(Json, ErrorNamesLineAndColumn) {
  const std::string e = error_of([] { (void)json::parse_strict("{\n  \"a\": {\"b\": [1, 2, x]}\n}", "f.json"); });
  EXPECT_NE(e.find("f.json: line 2, column 21: malformed JSON"), std::string::npos) << e;
}

TEST(Json, DumpParsesBackToTheSameValues) {
  json::Json v = json::Json::object();
  v["x"] = 12345678901234ull;
  v["s"] = "tab\there \"q\" \x01";
  json::Json& a = v["a"] = json::Json::array();
  a.push_back(2.5);
  a.push_back(json::Json{{"k", false}});
  const json::Json w = json::parse_strict(json::dump_pretty(v), "dump");
  EXPECT_EQ(w.at("x").get<std::uint64_t>(), 12345678901234ull);
  EXPECT_EQ(w.at("s").get<std::string>(), "tab\there \"q\" \x01");
  EXPECT_DOUBLE_EQ(w.at("a")[0].get<double>(), 2.5);
  EXPECT_FALSE(w.at("a")[1].at("k").get<bool>());
}

// The layout of the files written before the codec moved to nlohmann-json
// (strata's own writer): members one per line, scalar arrays and flat records
// in arrays on one line, floats with 6 significant digits. Such a file is
// written back byte for byte.
TEST(Json, KeepsTheLayoutOfEarlierFiles) {
  const std::string before =
      "{\n"
      "  \"strata_tuning\": 1,\n"
      "  \"empty\": {},\n"
      "  \"none\": [],\n"
      "  \"m\": {\n"
      "    \"us\": [1.5, 2, 0.333333, 1e-07, \"infeasible\"],\n"
      "    \"points\": [\n"
      "      {\"collective\": \"broadcast\", \"bytes\": 8},\n"
      "      {\n"
      "        \"nested\": [1]\n"
      "      },\n"
      "      [1, 2]\n"
      "    ],\n"
      "    \"s\": \"q\\\"\\\\\\n\\t\\r\\u0001\",\n"
      "    \"b\": true,\n"
      "    \"n\": null,\n"
      "    \"neg\": -3\n"
      "  }\n"
      "}\n";
  EXPECT_EQ(json::dump_pretty(json::parse_strict(before, "before")), before);
  // Floating-point values are written with 6 significant digits, as before.
  EXPECT_EQ(json::dump_pretty(json::Json(1.0 / 3.0)), "0.333333\n");
  EXPECT_EQ(json::dump_pretty(json::Json(5.0)), "5\n");
}

// ---------------------------------------------------------------- the file
TEST(TuningFile, ParsesDecisionsAndKeepsDefaultsForTheRest) {
  const TuningFile f =
      strata::coll::parse_tuning(valid_doc("\"pipeline_fragment\": 65536, \"mapped_max_bytes\": 8192"), "x");
  EXPECT_EQ(f.table.pipeline_fragment, 65536u);
  EXPECT_EQ(f.table.mapped_max_bytes, 8192u);
  EXPECT_EQ(f.table.allreduce_rd_max_bytes, Tuning{}.allreduce_rd_max_bytes);
  EXPECT_TRUE(f.machine.difference(Fingerprint::here()).empty());
}

// A table written before the fast path was retired still loads: its
// fastpath_bytes decision is accepted and has no effect.
TEST(TuningFile, RetiredFastpathBytesIsAcceptedWithoutEffect) {
  const TuningFile f =
      strata::coll::parse_tuning(valid_doc("\"fastpath_bytes\": 4096, \"pipeline_fragment\": 65536"), "x");
  EXPECT_EQ(f.table.pipeline_fragment, 65536u);
  Tuning want;
  want.pipeline_fragment = 65536;
  EXPECT_EQ(f.table, want);
  EXPECT_THROW(strata::coll::parse_tuning(valid_doc("\"fastpath_bytez\": 4096"), "x"), strata::Error);
}

TEST(TuningFile, MalformedJsonIsAnErrorNamingTheFile) {
  const std::string e = error_of([] { (void)strata::coll::parse_tuning("{\"strata_tuning\": 1,", "/etc/t.json"); });
  EXPECT_NE(e.find("tuning file /etc/t.json"), std::string::npos) << e;
  EXPECT_NE(e.find("malformed JSON"), std::string::npos) << e;
}

TEST(TuningFile, WrongOrMissingVersionIsAnErrorNamingTheField) {
  std::string e = error_of([] { (void)strata::coll::parse_tuning(valid_doc("", Fingerprint::here(), "2"), "t.json"); });
  EXPECT_NE(e.find("tuning file t.json: field 'strata_tuning'"), std::string::npos) << e;
  EXPECT_NE(e.find("version 2 is not supported"), std::string::npos) << e;
  e = error_of([] { (void)strata::coll::parse_tuning(valid_doc("", Fingerprint::here(), "\"1\""), "t.json"); });
  EXPECT_NE(e.find("field 'strata_tuning': expected number, got string"), std::string::npos) << e;
  e = error_of([] { (void)strata::coll::parse_tuning("{\"decisions\": {}}", "t.json"); });
  EXPECT_NE(e.find("field 'strata_tuning': missing"), std::string::npos) << e;
}

TEST(TuningFile, FieldOfTheWrongTypeIsAnErrorNamingItsPath) {
  std::string e =
      error_of([] { (void)strata::coll::parse_tuning(valid_doc("\"pipeline_fragment\": \"128K\""), "t.json"); });
  EXPECT_NE(e.find("field 'decisions.pipeline_fragment': expected an unsigned integer, got string"), std::string::npos)
      << e;
  e = error_of([] { (void)strata::coll::parse_tuning(valid_doc("\"pipeline_fragment\": 65536.5"), "t.json"); });
  EXPECT_NE(e.find("field 'decisions.pipeline_fragment': expected an unsigned integer, got 65536.5"), std::string::npos)
      << e;
  e = error_of([] { (void)strata::coll::parse_tuning(valid_doc("\"inline_bytes\": -1"), "t.json"); });
  EXPECT_NE(e.find("field 'decisions.inline_bytes'"), std::string::npos) << e;
  Fingerprint m = Fingerprint::here();
  std::string doc = valid_doc();
  doc.replace(doc.find("\"cores\": "), 9, "\"cores\": \"two\", \"x\": ");
  e = error_of([&] { (void)strata::coll::parse_tuning(doc, "t.json"); });
  EXPECT_NE(e.find("field 'machine.cores': expected number, got string"), std::string::npos) << e;
}

TEST(TuningFile, UnknownDecisionAndOutOfRangeValuesAreErrors) {
  std::string e = error_of([] { (void)strata::coll::parse_tuning(valid_doc("\"pipeline_fragmnet\": 65536"), "t"); });
  EXPECT_NE(e.find("field 'decisions.pipeline_fragmnet': unknown decision"), std::string::npos) << e;
  e = error_of([] { (void)strata::coll::parse_tuning(valid_doc("\"pipeline_fragment\": 100"), "t"); });
  EXPECT_NE(e.find("field 'decisions.pipeline_fragment': 100 is out of range"), std::string::npos) << e;
  e = error_of([] { (void)strata::coll::parse_tuning(valid_doc("\"pipeline_fragment\": 65537"), "t"); });
  EXPECT_NE(e.find("not a multiple of 64"), std::string::npos) << e;
  e = error_of([] { (void)strata::coll::parse_tuning("{\"strata_tuning\": 1, \"extra\": 1}", "t"); });
  EXPECT_NE(e.find("field 'extra': unknown field"), std::string::npos) << e;
}

// The executor's start spins are a table decision (ExecutorOptions::start_spins
// takes it unless STRATA_START_SPINS is set): parsed, range-checked, default 16.
TEST(TuningFile, StartSpinsIsADecisionWithItsRange) {
  EXPECT_EQ(strata::coll::Tuning{}.start_spins, 16u);
  const auto f = strata::coll::parse_tuning(valid_doc("\"start_spins\": 0"), "t");
  EXPECT_EQ(f.table.start_spins, 0u);
  EXPECT_NE(f.table.hash(), strata::coll::Tuning{}.hash());
  const std::string e = error_of([] { (void)strata::coll::parse_tuning(valid_doc("\"start_spins\": 2000000"), "t"); });
  EXPECT_NE(e.find("field 'decisions.start_spins': 2000000 is out of range"), std::string::npos) << e;
}

TEST(TuningFile, WriteThenReadRoundTrips) {
  TempDir d;
  TuningFile f;
  f.machine = Fingerprint::here();
  f.created = "2026-01-01T00:00:00Z";
  f.tool = "test";
  for (const auto& field : strata::coll::tuning_fields())
    f.table.*field.member = field.lo + (field.multiple - field.lo % field.multiple) % field.multiple;
  f.table.pipeline_fragment = 3 * 65536;
  f.measurements = R"({"searches": {"pipeline_fragment": 1.25}})";
  const std::string path = (d.p / "sub" / "dir" / "t.json").string();  // parents are created
  strata::coll::write_tuning_file(path, f);
  const TuningFile g = strata::coll::read_tuning_file(path);
  EXPECT_TRUE(g.table == f.table);
  EXPECT_EQ(g.table.hash(), f.table.hash());
  EXPECT_NE(g.table.hash(), Tuning{}.hash());
  EXPECT_TRUE(g.machine.difference(f.machine).empty());
  EXPECT_EQ(g.created, f.created);
  EXPECT_EQ(g.tool, "test");
  EXPECT_DOUBLE_EQ(json::parse_strict(g.measurements, "m").at("searches").at("pipeline_fragment").get<double>(), 1.25);
  // Measurements that are not a JSON object are refused when written.
  f.measurements = "[1]";
  EXPECT_THROW(strata::coll::write_tuning_file(path, f), strata::Error);
}

// ---------------------------------------------------------------- resolution
TEST(TuningLoad, AnotherMachinesFileFallsBackToDefaultsSayingWhy) {
  TempDir d;
  Fingerprint other = Fingerprint::here();
  other.cores += 7;
  const std::string path = d.file("t.json", valid_doc("\"pipeline_fragment\": 65536", other));
  ScopedEnv env("STRATA_TUNING", path.c_str());
  const strata::coll::TuningChoice c = strata::coll::load_tuning();
  EXPECT_TRUE(c.table == Tuning{});
  EXPECT_TRUE(c.path.empty());
  EXPECT_NE(c.note.find("is for another machine (cores:"), std::string::npos) << c.note;
  EXPECT_NE(c.note.find(path), std::string::npos) << c.note;
}

TEST(TuningLoad, ThisMachinesFileIsInEffect) {
  TempDir d;
  const std::string path = d.file("t.json", valid_doc("\"pipeline_fragment\": 65536"));
  ScopedEnv env("STRATA_TUNING", path.c_str());
  const strata::coll::TuningChoice c = strata::coll::load_tuning();
  EXPECT_EQ(c.table.pipeline_fragment, 65536u);
  EXPECT_EQ(c.path, path);
  EXPECT_EQ(c.origin, "STRATA_TUNING");
}

TEST(TuningLoad, OffIgnoresEvenABrokenDefaultFile) {
  TempDir d;
  d.file("strata/tuning.json", "");
  std::filesystem::create_directories(d.p / "strata");
  std::ofstream(d.p / "strata" / "tuning.json") << "{broken";
  ScopedEnv xdg("XDG_CONFIG_HOME", d.p.string().c_str());
  {
    ScopedEnv env("STRATA_TUNING", "off");
    const strata::coll::TuningChoice c = strata::coll::load_tuning();
    EXPECT_TRUE(c.path.empty());
    EXPECT_EQ(c.note, "STRATA_TUNING=off");
  }
  ScopedEnv env("STRATA_TUNING", nullptr);
  EXPECT_EQ(strata::coll::default_tuning_path(), (d.p / "strata" / "tuning.json").string());
  const std::string e = error_of([] { (void)strata::coll::load_tuning(); });
  EXPECT_NE(e.find((d.p / "strata" / "tuning.json").string()), std::string::npos) << e;
}

TEST(TuningLoad, AbsentDefaultFileMeansDefaults) {
  TempDir d;
  ScopedEnv xdg("XDG_CONFIG_HOME", d.p.string().c_str());
  ScopedEnv env("STRATA_TUNING", nullptr);
  const strata::coll::TuningChoice c = strata::coll::load_tuning();
  EXPECT_TRUE(c.table == Tuning{});
  EXPECT_NE(c.note.find("no tuning file at"), std::string::npos) << c.note;
}

TEST(TuningLoad, MissingExplicitFileIsAnError) {
  ScopedEnv env("STRATA_TUNING", "/nonexistent/strata-tuning.json");
  const std::string e = error_of([] { (void)strata::coll::load_tuning(); });
  EXPECT_NE(e.find("tuning file /nonexistent/strata-tuning.json: cannot read it"), std::string::npos) << e;
}

// ---------------------------------------------------------------- decisions
TEST(TuningDecisions, FragmentSizeChangesTheBroadcastPlan) {
  const strata::coll::Group g0 = fake_ranks::make_group(2, fake_ranks::Place::one, 4u << 20);
  strata::coll::Call c;
  c.kind = strata::coll::Kind::broadcast;
  c.dtype = strata::dag::DataType::u8;
  c.count = 1u << 20;
  auto nodes = [&](std::uint64_t frag) {
    strata::coll::Group g = g0;
    if (frag > 0) {
      Tuning t;
      t.pipeline_fragment = frag;
      g.tuning = std::make_shared<const Tuning>(t);
    }
    std::size_t n = 0, puts = 0;
    for (const auto& p : strata::coll::compile_all(g, c, 0)) {
      n += p->size();
      for (const auto& nd : p->nodes()) puts += nd.kind == strata::dag::NodeKind::put_with_signal ? 1 : 0;
    }
    return std::make_pair(n, puts);
  };
  const auto def = nodes(0);
  const auto same = nodes(Tuning{}.pipeline_fragment);
  const auto small = nodes(64u << 10);
  const auto big = nodes(1u << 20);
  EXPECT_EQ(def, same);
  EXPECT_EQ(def.second, (1u << 20) / Tuning{}.pipeline_fragment);  // one put per fragment
  EXPECT_EQ(small.second, 16u);
  EXPECT_EQ(big.second, 1u);
  EXPECT_GT(small.first, def.first);
  EXPECT_LT(big.first, def.first);
}

TEST(TuningDecisions, ThresholdsChangeTheAutomaticAlgorithm) {
  strata::coll::Group g = fake_ranks::make_group(4, fake_ranks::Place::one, 1u << 20);
  EXPECT_EQ(strata::coll::allreduce_auto(g, 32768, false), "rabenseifner");
  EXPECT_EQ(strata::coll::allreduce_auto(g, 4u << 20, false), "ring");
  Tuning t;
  t.allreduce_rd_max_bytes = 65536;
  t.allreduce_ring_min_bytes = 8u << 20;
  g.tuning = std::make_shared<const Tuning>(t);
  EXPECT_EQ(strata::coll::allreduce_auto(g, 32768, false), "rd");
  EXPECT_EQ(strata::coll::allreduce_auto(g, 4u << 20, false), "rabenseifner");
  // Members on several hosts: allreduce_net_rd_max_bytes decides instead.
  strata::coll::Group net = fake_ranks::make_group(4, fake_ranks::Place::hosts2, 1u << 20);
  ASSERT_TRUE(net.spans_hosts());
  t.allreduce_net_rd_max_bytes = 16384;
  net.tuning = std::make_shared<const Tuning>(t);
  EXPECT_EQ(strata::coll::allreduce_auto(net, 16384, false), "rd");
  EXPECT_EQ(strata::coll::allreduce_auto(net, 32768, false), "rabenseifner");
  t.allreduce_net_rd_max_bytes = 65536;
  t.allreduce_rd_max_bytes = 4096;
  net.tuning = std::make_shared<const Tuning>(t);
  EXPECT_EQ(strata::coll::allreduce_auto(net, 32768, false), "rd") << "the one-host limit does not decide here";
  // The rules strata-info prints follow the table.
  bool found = false;
  for (const auto& [colls, rule] : strata::coll::selection_rules(t))
    if (colls == "allreduce")
      found =
          rule.find("rd: up to 4 KiB (64 KiB across hosts); rabenseifner: above rd, below 8 MiB") != std::string::npos;
  EXPECT_TRUE(found);
}

// ---------------------------------------------------------------- tree decisions
TEST(TuningFile, TreeFieldsOutOfRangeOrOfTheWrongTypeAreErrorsNamingTheField) {
  std::string e = error_of([] { (void)strata::coll::parse_tuning(valid_doc("\"broadcast_tree_host\": 65"), "t"); });
  EXPECT_NE(e.find("field 'decisions.broadcast_tree_host': 65 is out of range [0, 64]"), std::string::npos) << e;
  e = error_of([] { (void)strata::coll::parse_tuning(valid_doc("\"broadcast_pull_core\": 2"), "t"); });
  EXPECT_NE(e.find("field 'decisions.broadcast_pull_core': 2 is out of range [0, 1]"), std::string::npos) << e;
  e = error_of([] { (void)strata::coll::parse_tuning(valid_doc("\"reduce_tree_numa\": \"chain\""), "t"); });
  EXPECT_NE(e.find("field 'decisions.reduce_tree_numa': expected an unsigned integer, got string"), std::string::npos)
      << e;
  e = error_of([] { (void)strata::coll::parse_tuning(valid_doc("\"allreduce_tree_core\": true"), "t"); });
  EXPECT_NE(e.find("field 'decisions.allreduce_tree_core': expected an unsigned integer"), std::string::npos) << e;
  const TuningFile f = strata::coll::parse_tuning(
      valid_doc("\"broadcast_tree_host\": 1, \"broadcast_pull_numa\": 1, \"reduce_tree_core\": 64"), "t");
  EXPECT_EQ(f.table.broadcast_tree_host, 1u);
  EXPECT_EQ(f.table.broadcast_pull_numa, 1u);
  EXPECT_EQ(f.table.reduce_tree_core, 64u);
  EXPECT_EQ(f.table.reduce_tree_host, Tuning{}.reduce_tree_host);
}

TEST(TuningDecisions, ShapeCodesRoundTripAndDefaultsEqualTheBuiltInTree) {
  using strata::coll::Shape;
  EXPECT_EQ(strata::coll::shape_of(0).kind, Shape::flat);
  EXPECT_EQ(strata::coll::shape_of(1).kind, Shape::knomial);
  EXPECT_EQ(strata::coll::shape_of(1).radix, 1);
  EXPECT_EQ(strata::coll::shape_of(8).radix, 8);
  for (std::uint64_t code : {0u, 1u, 2u, 3u, 16u, 64u})
    EXPECT_EQ(strata::coll::shape_code(strata::coll::shape_of(code)), static_cast<int>(code));
  const strata::coll::Algorithm a;  // the built-in tree
  const Tuning t;
  for (std::uint64_t v : {t.broadcast_tree_host, t.reduce_tree_host, t.allreduce_tree_host})
    EXPECT_EQ(static_cast<int>(v), strata::coll::shape_code(a.host));
  for (std::uint64_t v : {t.broadcast_tree_numa, t.reduce_tree_numa, t.allreduce_tree_numa})
    EXPECT_EQ(static_cast<int>(v), strata::coll::shape_code(a.numa));
  for (std::uint64_t v : {t.broadcast_tree_core, t.reduce_tree_core, t.allreduce_tree_core})
    EXPECT_EQ(static_cast<int>(v), strata::coll::shape_code(a.core));
  for (std::uint64_t v : {t.broadcast_tree_package, t.reduce_tree_package, t.allreduce_tree_package})
    EXPECT_EQ(static_cast<int>(v), strata::coll::shape_code(a.package));
  EXPECT_EQ(t.broadcast_pull_host + t.broadcast_pull_package + t.broadcast_pull_numa + t.broadcast_pull_core, 0u);
}

// Every rank's plan of @p kind (8 ranks, one host, 4 NUMA regions) as DOT text.
std::string plans_of(strata::coll::Kind kind, std::shared_ptr<const Tuning> table, bool from_table,
                     const std::string& tree = "") {
  strata::coll::Group g = fake_ranks::make_group(8, fake_ranks::Place::numa4, 1u << 20);
  g.tuning = std::move(table);
  strata::coll::Call c;
  c.kind = kind;
  const bool red = kind != strata::coll::Kind::broadcast;
  c.dtype = red ? strata::dag::DataType::f32 : strata::dag::DataType::u8;
  c.count = 65536;
  c.root = 3;
  if (kind == strata::coll::Kind::allreduce) c.algo.name = "tree";
  c.algo.tree_from_table = from_table;
  c.algo.direction_from_table = from_table;
  if (tree == "chain") c.algo.numa = {strata::coll::Shape::knomial, 1};
  std::string out;
  for (const auto& p : strata::coll::compile_all(g, c, 1)) out += strata::dag::to_dot(*p);
  return out;
}

TEST(TuningDecisions, TreeFieldsAtTheirDefaultsGiveTheSamePlansAsNoTable) {
  // A file that states every tree field at its default value.
  std::string d;
  for (const strata::coll::TuningField& f : strata::coll::tuning_fields()) {
    const std::string n = f.name;
    if (n.find("_tree_") == std::string::npos && n.find("_pull_") == std::string::npos) continue;
    d += (d.empty() ? "\"" : ", \"") + n + "\": " + std::to_string(Tuning{}.*f.member);
  }
  const TuningFile f = strata::coll::parse_tuning(valid_doc(d), "t");
  EXPECT_EQ(f.table, Tuning{});
  const auto table = std::make_shared<const Tuning>(f.table);
  using K = strata::coll::Kind;
  for (K k : {K::broadcast, K::reduce, K::allreduce}) {
    const std::string none = plans_of(k, nullptr, false);
    EXPECT_FALSE(none.empty());
    EXPECT_EQ(plans_of(k, table, true), none) << strata::coll::to_string(k);
    EXPECT_EQ(plans_of(k, nullptr, true), none) << strata::coll::to_string(k);
  }
}

TEST(TuningDecisions, TreeFieldsChangeTheTreeUnlessTheCallNamesOne) {
  using K = strata::coll::Kind;
  Tuning t;
  t.broadcast_tree_numa = 1;  // chain among the 4 NUMA regions
  t.broadcast_pull_numa = 1;
  t.reduce_tree_numa = 1;
  t.allreduce_tree_numa = 0;
  const auto table = std::make_shared<const Tuning>(t);
  for (K k : {K::broadcast, K::reduce, K::allreduce}) {
    const std::string none = plans_of(k, nullptr, false);
    const std::string tuned = plans_of(k, table, true);
    EXPECT_NE(tuned, none) << strata::coll::to_string(k);
    // A call that names its tree / direction (flags cleared) ignores the table.
    EXPECT_EQ(plans_of(k, table, false), none) << strata::coll::to_string(k);
  }
  // The table's chain is the chain a call can name (broadcast: without pull, as named).
  Tuning chain_only;
  chain_only.reduce_tree_numa = 1;
  EXPECT_EQ(plans_of(K::reduce, std::make_shared<const Tuning>(chain_only), true),
            plans_of(K::reduce, nullptr, false, "chain"));
  // Pull from the table: the broadcast plan gets gets.
  EXPECT_NE(plans_of(K::broadcast, table, true).find("get"), std::string::npos);
  EXPECT_EQ(plans_of(K::broadcast, nullptr, false).find("get"), std::string::npos);
}

// The package fields: 8 ranks on one host of 4 packages (2 ranks each, one
// NUMA region per package). The default binomial package level sends 0 -> 4,
// 0 -> 2, 4 -> 6; the table's flat one 0 -> 2, 4, 6; its pull makes the
// package edges pull; a call that names its tree keeps its own.
TEST(TuningDecisions, PackageFieldsShapeThePackageLevel) {
  strata::coll::Group g = fake_ranks::make_group(8, fake_ranks::Place::one, 1u << 20);
  g.package.clear();
  g.numa.clear();
  for (int r = 0; r < 8; ++r) {
    g.package.push_back(r / 2);
    g.numa.push_back(r / 2);
  }
  strata::coll::Call c;
  c.kind = strata::coll::Kind::broadcast;
  c.count = 4096;
  c.algo.tree_from_table = c.algo.direction_from_table = true;
  auto package_kids = [&](const strata::coll::Group& grp, const strata::coll::Call& call, int parent) {
    std::vector<int> kids;
    for (const strata::coll::TreeEdge& e : strata::coll::plan_tree(grp, call))
      if (e.parent == parent && e.level == "package") kids.push_back(e.child);
    return kids;
  };
  EXPECT_EQ(package_kids(g, c, 0), (std::vector<int>{4, 2}));
  EXPECT_EQ(package_kids(g, c, 4), (std::vector<int>{6}));
  Tuning t;
  t.broadcast_tree_package = 0;
  t.broadcast_pull_package = 1;
  g.tuning = std::make_shared<const Tuning>(t);
  EXPECT_EQ(package_kids(g, c, 0), (std::vector<int>{2, 4, 6}));
  for (const strata::coll::TreeEdge& e : strata::coll::plan_tree(g, c))
    EXPECT_EQ(e.direction, e.level == "package" ? strata::coll::Direction::pull : strata::coll::Direction::push)
        << e.parent << " -> " << e.child;
  const strata::coll::Algorithm a = strata::coll::with_table(t, c.kind, c.algo);
  EXPECT_EQ(a.package.kind, strata::coll::Shape::flat);
  EXPECT_EQ(a.dir_package, strata::coll::Direction::pull);
  EXPECT_EQ(strata::coll::shape_code(strata::coll::with_table(t, strata::coll::Kind::reduce, c.algo).package), 2);
  strata::coll::Call named = c;
  named.algo.tree_from_table = named.algo.direction_from_table = false;
  EXPECT_EQ(package_kids(g, named, 0), (std::vector<int>{4, 2}));
}

}  // namespace
