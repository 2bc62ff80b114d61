// rooted_rank: one rank of the gather / scatter integration tests (run under strata-run).
//   rooted_rank [--quick] [--algo tree|single|flat|ring|all] [--tree SPEC] [--fragment SPEC]
//               [--direction SPEC] [--strict]
// --direction (push | pull | host:pull,numa:push,core:pull | single:pull) applies
// to scatter / scatterv with the tree algorithms; gather always pushes (and
// flat / ring scatter too), so those calls run without it.
// Checks gather, gatherv, scatter and scatterv (every root, in place and not,
// counts that differ per rank including zeros) against a sequential reference
// computed on every rank, many calls in flight at once, and bad-input errors.
// Prints "rooted_rank: OK" on success.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "../common/rank_check.hpp"
#include "strata/strata.hpp"

namespace {

using rank_check::failures;
using rank_check::me;

std::int32_t val(int rank, std::size_t i) {
  return static_cast<std::int32_t>(rank * 1000003 + static_cast<int>(i % 100003) + 1);
}

// Per-rank counts with zeros and differences; displacements in reverse rank order with gaps.
std::vector<std::size_t> vcounts(int n, std::size_t count, int root) {
  std::vector<std::size_t> c;
  for (int r = 0; r < n; ++r)
    c.push_back((r + root) % 3 == 1 ? 0 : count + static_cast<std::size_t>((r * 7 + root) % 5));
  return c;
}
std::vector<std::size_t> vdispls(const std::vector<std::size_t>& counts) {
  std::vector<std::size_t> d(counts.size());
  std::size_t at = 3;
  for (std::size_t i = counts.size(); i-- > 0;) {
    d[i] = at;
    at += counts[i] + 2;
  }
  return d;
}

// Runs every rooted collective with every root; returns nothing, counts failures.
void check_all(strata::Communicator& comm, const std::vector<std::size_t>& sizes, const strata::CollOptions& opts,
               const std::string& algo) {
  const int n = comm.size();
  const auto nn = static_cast<std::size_t>(n);
  const char* a = algo.c_str();
  // Pull is for the tree scatters only.
  strata::CollOptions gopts = opts, sopts = opts;
  gopts.direction.clear();
  if (algo == "flat" || algo == "ring") sopts.direction.clear();
  for (std::size_t count : sizes) {
    for (int root = 0; root < n; ++root) {
      const bool at_root = me == root;
      const auto ur = static_cast<std::size_t>(root);
      for (int inplace = 0; inplace < 2; ++inplace) {
        // gather
        {
          std::vector<std::int32_t> send(count), recv(at_root ? nn * count : 0, -1);
          for (std::size_t i = 0; i < count; ++i) send[i] = val(me, i);
          if (at_root && inplace)
            for (std::size_t i = 0; i < count; ++i) recv[ur * count + i] = val(me, i);
          const void* s = at_root && inplace ? strata::in_place : send.data();
          comm.gather(s, count, recv.data(), strata::Datatype::int32, root, gopts).get();
          if (at_root) {
            bool ok = true;
            for (std::size_t r = 0; r < nn && ok; ++r)
              for (std::size_t i = 0; i < count && ok; ++i) ok = recv[r * count + i] == val(static_cast<int>(r), i);
            EXPECT(ok, "%s gather count %zu root %d in_place %d", a, count, root, inplace);
          }
        }
        // scatter
        {
          std::vector<std::int32_t> send(at_root ? nn * count : 0), recv(count, -1);
          if (at_root)
            for (std::size_t r = 0; r < nn; ++r)
              for (std::size_t i = 0; i < count; ++i) send[r * count + i] = val(static_cast<int>(r), i);
          void* rv = at_root && inplace ? const_cast<void*>(strata::in_place) : recv.data();
          comm.scatter(send.data(), rv, count, strata::Datatype::int32, root, sopts).get();
          if (!(at_root && inplace)) {
            bool ok = true;
            for (std::size_t i = 0; i < count && ok; ++i) ok = recv[i] == val(me, i);
            EXPECT(ok, "%s scatter count %zu root %d in_place %d", a, count, root, inplace);
          }
        }
        // gatherv (counts / displs significant at the root only)
        {
          const std::vector<std::size_t> cnt = vcounts(n, count, root);
          const std::vector<std::size_t> dsp = vdispls(cnt);
          std::size_t ext = 0;
          for (std::size_t r = 0; r < nn; ++r) ext = std::max(ext, cnt[r] + dsp[r]);
          const std::size_t mine = cnt[static_cast<std::size_t>(me)];
          std::vector<std::int32_t> send(mine), recv(at_root ? ext : 0, -1);
          for (std::size_t i = 0; i < mine; ++i) send[i] = val(me, i);
          if (at_root && inplace)
            for (std::size_t i = 0; i < mine; ++i) recv[dsp[ur] + i] = val(me, i);
          const void* s = at_root && inplace ? strata::in_place : send.data();
          const std::vector<std::size_t> none;
          comm.gatherv(s, mine, recv.data(), at_root ? cnt : none, at_root ? dsp : none, strata::Datatype::int32, root,
                       gopts)
              .get();
          if (at_root) {
            std::vector<std::int32_t> want(ext, -1);
            for (std::size_t r = 0; r < nn; ++r)
              for (std::size_t i = 0; i < cnt[r]; ++i) want[dsp[r] + i] = val(static_cast<int>(r), i);
            EXPECT(recv == want, "%s gatherv count %zu root %d in_place %d", a, count, root, inplace);
          }
        }
        // scatterv
        {
          const std::vector<std::size_t> cnt = vcounts(n, count + 1, root);
          const std::vector<std::size_t> dsp = vdispls(cnt);
          std::size_t ext = 0;
          for (std::size_t r = 0; r < nn; ++r) ext = std::max(ext, cnt[r] + dsp[r]);
          const std::size_t mine = cnt[static_cast<std::size_t>(me)];
          std::vector<std::int32_t> send(at_root ? ext : 0, -2), recv(mine, -1);
          if (at_root)
            for (std::size_t r = 0; r < nn; ++r)
              for (std::size_t i = 0; i < cnt[r]; ++i) send[dsp[r] + i] = val(static_cast<int>(r), i);
          void* rv = at_root && inplace ? const_cast<void*>(strata::in_place) : recv.data();
          const std::vector<std::size_t> none;
          comm.scatterv(send.data(), at_root ? cnt : none, at_root ? dsp : none, rv, mine, strata::Datatype::int32,
                        root, sopts)
              .get();
          if (!(at_root && inplace)) {
            bool ok = true;
            for (std::size_t i = 0; i < mine && ok; ++i) ok = recv[i] == val(me, i);
            EXPECT(ok, "%s scatterv count %zu root %d in_place %d", a, count, root, inplace);
          }
        }
      }
    }
  }
}

// Many gathers / scatters in flight at once (loose pipelining beyond the credits).
void check_in_flight(strata::Communicator& comm, const strata::CollOptions& opts, const std::string& algo) {
  const int n = comm.size();
  const auto nn = static_cast<std::size_t>(n);
  const int k = 24;
  const std::size_t count = 301;
  strata::CollOptions gopts = opts, sopts = opts;
  gopts.direction.clear();
  if (algo == "flat" || algo == "ring") sopts.direction.clear();
  std::vector<std::vector<std::int32_t>> gs(k), gr(k), ss(k), sr(k);
  std::vector<strata::Future<void>> fs;
  for (int j = 0; j < k; ++j) {
    const auto uj = static_cast<std::size_t>(j);
    const int root = j % n;
    gs[uj].assign(count, val(me, uj));
    gr[uj].assign(me == root ? nn * count : 0, -1);
    fs.push_back(comm.gather(gs[uj].data(), count, gr[uj].data(), strata::Datatype::int32, root, gopts));
    ss[uj].assign(me == root ? nn * count : 0, 0);
    for (std::size_t r = 0; r < ss[uj].size() / count; ++r)
      for (std::size_t i = 0; i < count; ++i) ss[uj][r * count + i] = val(static_cast<int>(r), uj + i);
    sr[uj].assign(count, -1);
    fs.push_back(comm.scatter(ss[uj].data(), sr[uj].data(), count, strata::Datatype::int32, root, sopts));
  }
  strata::when_all(std::move(fs)).get();
  for (int j = 0; j < k; ++j) {
    const auto uj = static_cast<std::size_t>(j);
    bool ok = true;
    for (std::size_t r = 0; r < gr[uj].size() / count && ok; ++r)
      ok = gr[uj][r * count + 7] == val(static_cast<int>(r), uj);
    EXPECT(ok, "%s in-flight gather %d", algo.c_str(), j);
    EXPECT(sr[uj][5] == val(me, uj + 5), "%s in-flight scatter %d", algo.c_str(), j);
  }
}

// Calls that must fail before anything moves; each is made only on ranks where it fails.
void expect_error(const char* what, const char* needle, const std::function<void()>& f) {
  try {
    f();
    EXPECT(false, "%s: no error", what);
  } catch (const strata::Error& e) {
    const std::string m = e.what();
    EXPECT(m.find(needle) != std::string::npos && m.find("rank " + std::to_string(me)) != std::string::npos,
           "%s: message '%s' lacks '%s' or the rank", what, m.c_str(), needle);
  }
}

void check_bad_input(strata::Communicator& comm) {
  const int n = comm.size();
  const auto nn = static_cast<std::size_t>(n);
  std::vector<std::int32_t> buf(4 * nn + 16, 0), other(4 * nn + 16, 0);
  const auto i32 = strata::Datatype::int32;
  expect_error("gather root out of range", "'root'", [&] { (void)comm.gather(buf.data(), 1, other.data(), i32, n); });
  expect_error("scatter negative root", "'root'", [&] { (void)comm.scatter(buf.data(), other.data(), 1, i32, -1); });
  expect_error("gather null send", "'send'", [&] { (void)comm.gather(nullptr, 3, other.data(), i32, 0); });
  expect_error("unknown algorithm", "algorithm", [&] {
    strata::CollOptions o;
    o.algorithm = "bogus";
    (void)comm.scatter(buf.data(), other.data(), 1, i32, 0, o);
  });
  // Direction: gather pushes only; flat / ring scatter push only; bad specs.
  expect_error("gather with pull", "'direction'", [&] {
    strata::CollOptions o;
    o.direction = "pull";
    (void)comm.gather(buf.data(), 1, other.data(), i32, 0, o);
  });
  expect_error("gatherv with numa:pull", "'direction'", [&] {
    strata::CollOptions o;
    o.direction = "host:push,numa:pull";
    (void)comm.gatherv(buf.data(), 1, other.data(), {}, {}, i32, n - 1, o);
  });
  expect_error("flat scatter with pull", "'direction'", [&] {
    strata::CollOptions o;
    o.algorithm = "flat";
    o.direction = "pull";
    (void)comm.scatter(buf.data(), other.data(), 1, i32, 0, o);
  });
  expect_error("scatter with a bad direction", "'direction'", [&] {
    strata::CollOptions o;
    o.direction = "host:sideways";
    (void)comm.scatter(buf.data(), other.data(), 1, i32, 0, o);
  });
  expect_error("scatter with a bad direction level", "'direction'", [&] {
    strata::CollOptions o;
    o.direction = "rack:pull";
    (void)comm.scatter(buf.data(), other.data(), 1, i32, 0, o);
  });
  if (me == 0) {
    expect_error("gather null recv at the root", "'recv'", [&] { (void)comm.gather(buf.data(), 3, nullptr, i32, 0); });
    expect_error("scatter null send at the root", "'send'",
                 [&] { (void)comm.scatter(nullptr, other.data(), 3, i32, 0); });
    std::vector<std::size_t> cnt(nn + 1, 1), dsp(nn + 1, 0);
    expect_error("gatherv counts size", "'counts'",
                 [&] { (void)comm.gatherv(buf.data(), 1, other.data(), cnt, dsp, i32, 0); });
    cnt.assign(nn, 2);
    dsp.assign(nn, 0);
    for (std::size_t r = 0; r < nn; ++r) dsp[r] = 2 * r;
    std::vector<std::size_t> shortd(dsp.begin(), dsp.end() - 1);
    expect_error("scatterv displs size", "'displs'",
                 [&] { (void)comm.scatterv(buf.data(), cnt, shortd, other.data(), 2, i32, 0); });
    if (n > 1) {
      std::vector<std::size_t> ov = dsp;
      ov[1] = 1;  // overlaps rank 0's block in recv
      expect_error("gatherv overlapping displs", "overlap",
                   [&] { (void)comm.gatherv(buf.data(), 2, other.data(), cnt, ov, i32, 0); });
    }
    expect_error("gather send overlaps recv", "overlap",
                 [&] { (void)comm.gather(buf.data(), 2, buf.data() + 1, i32, 0); });
  } else {
    expect_error("gather in_place at a non-root", "in_place",
                 [&] { (void)comm.gather(strata::in_place, 1, other.data(), i32, 0); });
    expect_error("scatter in_place at a non-root", "in_place",
                 [&] { (void)comm.scatter(buf.data(), const_cast<void*>(strata::in_place), 1, i32, 0); });
    expect_error("scatterv null recv", "'recv'", [&] { (void)comm.scatterv(buf.data(), {}, {}, nullptr, 5, i32, 0); });
  }
}

}  // namespace

int main(int argc, char** argv) {
  strata::CollOptions opts;
  bool quick = false, skip_bad = false, skip_flight = false, skip_large = false;
  std::string algo = "all";
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--quick")
      quick = true;
    else if (s == "--algo" && i + 1 < argc)
      algo = argv[++i];
    else if (s == "--tree" && i + 1 < argc)
      opts.tree = argv[++i];
    else if (s == "--fragment" && i + 1 < argc)
      opts.fragment = argv[++i];
    else if (s == "--direction" && i + 1 < argc)
      opts.direction = argv[++i];
    else if (s == "--strict")
      opts.sync = strata::Sync::strict();
    else if (s == "--skip-bad")
      skip_bad = true;
    else if (s == "--skip-flight")
      skip_flight = true;
    else if (s == "--skip-large")
      skip_large = true;
    else {
      std::fprintf(stderr, "rooted_rank: unknown argument '%s'\n", s.c_str());
      return 2;
    }
  }
  try {
    strata::Engine engine;
    strata::Communicator& world = engine.world();
    me = world.rank();
    std::vector<std::size_t> sizes = {0, 1, 7, 1000, 65539};
    if (quick) sizes = {0, 1, 7, 1000};
    std::vector<std::string> algos = {algo};
    if (algo == "all") algos = {"tree", "single", "flat", "ring"};
    for (const std::string& a : algos) {
      strata::CollOptions o = opts;
      o.algorithm = a;
      check_all(world, sizes, o, a);
      if (!skip_flight) check_in_flight(world, o, a);
    }
    if (quick && !skip_large) {  // the largest size with the default algorithms only
      strata::CollOptions o = opts;
      check_all(world, {65539}, o, "default");
    }
    if (!skip_bad) check_bad_input(world);
    // After the errors the communicator still works.
    check_all(world, {3}, opts, "after-errors");
    world.barrier().get();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: exception: %s\n", me, e.what());
    return 1;
  }
  if (failures != 0) {
    std::fprintf(stderr, "rank %d: %d failures\n", me, failures);
    return 1;
  }
  if (me == 0) std::printf("rooted_rank: OK\n");
  return 0;
}
