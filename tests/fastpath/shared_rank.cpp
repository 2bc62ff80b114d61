// shared_rank: one rank of the shared-buffer tests (run under strata-run).
//   shared_rank [--one-host] [--death]
// Default: buffers from Engine::allocate with CollOptions::shared_buffers for
// broadcast, scatter, gather (every root, in place at root 1), allgather (also
// in place), alltoall and reduce_scatter_block (also in place: those take a
// plan), allreduce (the flag is ignored: a plan), just above the ring entry
// size and at 1.2 MB, checked against a sequential reference; the same with
// rank 0's buffers in private memory (its peers read them through CMA); a
// root that overwrites its buffer as soon as its broadcast completes (the
// readers must be done by then); 12 loose allgathers in flight (more than the
// 8-entry ring); Engine::allocate(0) refused. --one-host: every SharedMemory
// must be shared (n > 1). Prints "shared_rank: OK".
// --death: after a working round the last rank exits (status 3); rank 0's
// broadcast (root 0: it waits for its readers) and every survivor's allgather
// must fail with peer_dead. Prints "SURVIVOR rank R".
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../common/rank_check.hpp"
#include "strata/strata.hpp"

namespace {

using rank_check::failures;
using rank_check::me;

bool one_host = false;

std::int32_t val(int r, std::size_t i, int salt) {
  return static_cast<std::int32_t>(r * 131 + static_cast<int>(i % 97) * 7 + salt);
}

// int32 elements in Engine::allocate memory, or (private) in a std::vector.
class Buf {
 public:
  Buf(strata::Engine& e, std::size_t n, bool priv, std::int32_t fill) {
    n = n == 0 ? 1 : n;
    if (priv) {
      v_.assign(n, fill);
      p_ = v_.data();
    } else {
      m_ = e.allocate(n * sizeof(std::int32_t));
      EXPECT(!one_host || e.size() == 1 || m_.shared(), "allocate(%zu): not shared with %d ranks on one host", n,
             e.size());
      p_ = m_.as<std::int32_t>();
      for (std::size_t i = 0; i < n; ++i) p_[i] = fill;
    }
  }
  std::int32_t* data() const { return p_; }
  std::int32_t& operator[](std::size_t i) const { return p_[i]; }

 private:
  strata::SharedMemory m_;
  std::vector<std::int32_t> v_;
  std::int32_t* p_ = nullptr;
};

strata::CollOptions shared() {
  strata::CollOptions o;
  o.shared_buffers = true;
  return o;
}

constexpr strata::Datatype i32 = strata::Datatype::int32;

// Every kind once at @p cnt elements per block; rank 0's buffers private when @p priv0.
void check_kinds(strata::Engine& e, strata::Communicator& w, std::size_t cnt, bool priv0) {
  const int mine = w.rank();
  const int n = w.size();
  const auto un = static_cast<std::size_t>(n);
  const bool priv = priv0 && mine == 0;
  const int salt = static_cast<int>(cnt % 13) + (priv0 ? 5 : 0);
  const strata::CollOptions o = shared();
  for (int root = 0; root < n; ++root) {
    {
      Buf b(e, cnt, priv, -7);
      if (mine == root)
        for (std::size_t i = 0; i < cnt; ++i) b[i] = val(root, i, salt);
      w.broadcast(b.data(), cnt, i32, root, o).get();
      for (std::size_t i = 0; i < cnt; ++i)
        if (b[i] != val(root, i, salt)) {
          EXPECT(b[i] == val(root, i, salt), "broadcast root %d count %zu [%zu] = %d", root, cnt, i, b[i]);
          break;
        }
    }
    {
      const bool inplace = mine == root && root == 1;
      Buf s(e, cnt * un, priv, 0), r(e, cnt, priv, -1);
      for (std::size_t i = 0; i < cnt * un; ++i) s[i] = val(root, i, salt);
      w.scatter(s.data(), inplace ? const_cast<void*>(strata::in_place) : r.data(), cnt, i32, root, o).get();
      if (!inplace)
        for (std::size_t i = 0; i < cnt; ++i)
          if (r[i] != val(root, static_cast<std::size_t>(mine) * cnt + i, salt)) {
            EXPECT(false, "scatter root %d count %zu [%zu] = %d", root, cnt, i, r[i]);
            break;
          }
    }
    {
      const bool inplace = mine == root && root == 1;
      Buf s(e, cnt, priv, 0), r(e, cnt * un, priv, -1);
      for (std::size_t i = 0; i < cnt; ++i) s[i] = val(mine, i, salt);
      if (inplace)
        for (std::size_t i = 0; i < cnt; ++i) r[static_cast<std::size_t>(mine) * cnt + i] = val(mine, i, salt);
      w.gather(inplace ? strata::in_place : s.data(), cnt, r.data(), i32, root, o).get();
      if (mine == root)
        for (int q = 0; q < n; ++q)
          for (std::size_t i = 0; i < cnt; ++i)
            if (r[static_cast<std::size_t>(q) * cnt + i] != val(q, i, salt)) {
              EXPECT(false, "gather root %d count %zu from %d [%zu]", root, cnt, q, i);
              q = n;
              break;
            }
    }
  }
  for (bool inplace : {false, true}) {
    Buf s(e, cnt, priv, 0), r(e, cnt * un, priv, -1);
    for (std::size_t i = 0; i < cnt; ++i) s[i] = val(mine, i, salt);
    if (inplace)
      for (std::size_t i = 0; i < cnt; ++i) r[static_cast<std::size_t>(mine) * cnt + i] = val(mine, i, salt);
    w.allgather(inplace ? strata::in_place : s.data(), cnt, r.data(), i32, o).get();
    for (int q = 0; q < n; ++q)
      for (std::size_t i = 0; i < cnt; ++i)
        if (r[static_cast<std::size_t>(q) * cnt + i] != val(q, i, salt)) {
          EXPECT(false, "allgather inplace %d count %zu from %d [%zu]", inplace, cnt, q, i);
          q = n;
          break;
        }
  }
  for (bool inplace : {false, true}) {
    Buf s(e, cnt * un, priv, 0), r(e, cnt * un, priv, -1);
    for (std::size_t i = 0; i < cnt * un; ++i) (inplace ? r : s)[i] = val(mine, i, salt);
    w.alltoall(inplace ? strata::in_place : s.data(), r.data(), cnt, i32, o).get();
    for (int q = 0; q < n; ++q)
      for (std::size_t i = 0; i < cnt; ++i)
        if (r[static_cast<std::size_t>(q) * cnt + i] != val(q, static_cast<std::size_t>(mine) * cnt + i, salt)) {
          EXPECT(false, "alltoall inplace %d count %zu from %d [%zu]", inplace, cnt, q, i);
          q = n;
          break;
        }
  }
  for (bool inplace : {false, true}) {
    Buf s(e, cnt * un, priv, 0), r(e, inplace ? cnt * un : cnt, priv, -1);
    for (std::size_t i = 0; i < cnt * un; ++i) (inplace ? r : s)[i] = val(mine, i, salt);
    w.reduce_scatter_block(inplace ? strata::in_place : s.data(), r.data(), cnt, i32, strata::Op::sum, o).get();
    for (std::size_t i = 0; i < cnt; ++i) {
      std::int32_t want = 0;
      for (int q = 0; q < n; ++q) want += val(q, static_cast<std::size_t>(mine) * cnt + i, salt);
      if (r[i] != want) {
        EXPECT(false, "reduce_scatter_block inplace %d count %zu [%zu] = %d, want %d", inplace, cnt, i, r[i], want);
        break;
      }
    }
  }
  {
    Buf s(e, cnt, priv, 0), r(e, cnt, priv, -1);
    for (std::size_t i = 0; i < cnt; ++i) s[i] = val(mine, i, salt);
    w.allreduce(s.data(), r.data(), cnt, i32, strata::Op::sum, o).get();
    for (std::size_t i = 0; i < cnt; ++i) {
      std::int32_t want = 0;
      for (int q = 0; q < n; ++q) want += val(q, i, salt);
      if (r[i] != want) {
        EXPECT(false, "allreduce count %zu [%zu]", cnt, i);
        break;
      }
    }
  }
  w.barrier().get();
}

// The root reuses its buffer the moment its broadcast completes: by then
// every reader must have its copy.
void check_owner_waits(strata::Engine& e, strata::Communicator& w) {
  constexpr std::size_t cnt = 300000;
  Buf b(e, cnt, false, 0);
  for (int rep = 0; rep < 20; ++rep) {
    if (w.rank() == 0)
      for (std::size_t i = 0; i < cnt; ++i) b[i] = val(0, i, rep);
    w.broadcast(b.data(), cnt, i32, 0, shared()).get();
    if (w.rank() == 0) std::memset(b.data(), 0xff, cnt * sizeof(std::int32_t));
    for (std::size_t i = 0; w.rank() != 0 && i < cnt; ++i)
      if (b[i] != val(0, i, rep)) {
        EXPECT(false, "broadcast rep %d [%zu] = %d: the root reused its buffer before this rank read it", rep, i, b[i]);
        break;
      }
    w.barrier().get();
  }
}

// 12 loose allgathers in flight: more than the 8 ring entries.
void check_burst(strata::Engine& e, strata::Communicator& w) {
  constexpr int kCalls = 12;
  constexpr std::size_t cnt = 5000;
  const int n = w.size();
  std::vector<Buf> s, r;
  std::vector<strata::Future<void>> fs;
  for (int c = 0; c < kCalls; ++c) {
    s.emplace_back(e, cnt, false, 0);
    r.emplace_back(e, cnt * static_cast<std::size_t>(n), false, -1);
    for (std::size_t i = 0; i < cnt; ++i) s.back()[i] = val(w.rank(), i, c);
    fs.push_back(w.allgather(s.back().data(), cnt, r.back().data(), i32, shared()));
  }
  for (auto& f : fs) f.get();
  for (int c = 0; c < kCalls; ++c)
    for (int q = 0; q < n; ++q)
      for (std::size_t i = 0; i < cnt; ++i)
        if (r[static_cast<std::size_t>(c)][static_cast<std::size_t>(q) * cnt + i] != val(q, i, c)) {
          EXPECT(false, "burst call %d from %d [%zu]", c, q, i);
          q = n;
          break;
        }
}

void check_bad_input(strata::Engine& e) {
  try {
    (void)e.allocate(0);
    EXPECT(false, "allocate(0) succeeded");
  } catch (const strata::Error& err) {
    const std::string m = err.what();
    EXPECT(err.errc() == strata::Errc::invalid_argument && m.find("'bytes'") != std::string::npos &&
               m.find("rank " + std::to_string(me)) != std::string::npos,
           "allocate(0): %s", err.what());
  }
}

int death(strata::Engine& e, strata::Communicator& w) {
  const int n = w.size();
  constexpr std::size_t cnt = 100000;
  Buf b(e, cnt, false, 1), s(e, cnt, false, 1), r(e, cnt * static_cast<std::size_t>(n), false, 0);
  w.allgather(s.data(), cnt, r.data(), i32, shared()).get();  // a working round
  if (me == n - 1) {
    rank_check::death_gate_wait(n - 1);  // after every survivor's working round
    std::fflush(stdout);
    _exit(3);
  }
  rank_check::death_gate_pass();
  std::string msg;
  if (me == 0 && !rank_check::fails_peer_dead([&] { w.broadcast(b.data(), cnt, i32, 0, shared()).get(); }, &msg))
    return 1;
  if (!rank_check::fails_peer_dead([&] { w.allgather(s.data(), cnt, r.data(), i32, shared()).get(); }, &msg)) return 1;
  std::printf("SURVIVOR rank %d: %s\n", me, msg.c_str());
  std::fflush(stdout);
  _exit(0);  // the engine's shutdown barrier cannot succeed with a dead member
}

}  // namespace

int main(int argc, char** argv) {
  bool die = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--death") die = true;
    if (std::string(argv[i]) == "--one-host") one_host = true;
  }
  try {
    strata::Engine engine;
    me = engine.rank();
    rank_check::me = me;
    strata::Communicator& w = engine.world();
    if (die) return death(engine, w);
    check_bad_input(engine);
    for (std::size_t cnt : {std::size_t{1025}, std::size_t{300007}}) {
      check_kinds(engine, w, cnt, false);
      check_kinds(engine, w, cnt, true);
    }
    check_owner_waits(engine, w);
    check_burst(engine, w);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: FAILED: exception: %s\n", me, e.what());
    return 1;
  }
  if (failures != 0) return 1;
  std::printf("shared_rank: OK (rank %d)\n", me);
  return 0;
}
