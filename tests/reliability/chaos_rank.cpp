// chaos_rank: random collectives for the reference soak and the chaos test
// (scripts/soak.sh, scripts/chaos.sh, test_chaos), run under strata-run.
//
// Every rank draws the same pseudo-random sequence (--seed): batches of 1..16
// nonblocking calls of random kinds (all 14 collectives and barriers,
// v-variants included), datatypes, ops (a non-commutative user op among them),
// sizes (mapped plans, window plans, a few large), roots, in place or not, loose or
// strict sync, on the world, a dup or one of two splits. The inputs are a
// function of (seed, call, contributing rank, element), so each rank computes
// the expected result of every call locally.
//
//   --ref N       N calls in total (summed over batches), each result checked
//                 byte for byte against the local reference, including that the
//                 one-element gaps of v-variant receive buffers stay untouched.
//                 Prints "REF rank R: C calls checked, M mismatches, E errors"
//                 and "chaos_rank: ref OK" (exit 0), or the first mismatches
//                 (exit 1). CHAOS_CORRUPT=K flips a byte of call K's result.
//   --cover       one call per row of a covering design over the options
//                 (collective, communicator, in place, op class, root
//                 position, tree, fragment, sync, size): every pair of option
//                 values that some collective can use together, plus every
//                 in place x op x root x tree combination of reduce and
//                 allreduce; checked like --ref. Prints "COVER rank R: ..." and
//                 "chaos_rank: cover OK".
//   --fp-identical N
//                 N float allreduces of values whose sum depends on the
//                 association, over every allreduce algorithm; the ranks
//                 compare their result bits (an allgather) after each. Prints
//                 "FP rank R: ..." and "chaos_rank: fp-identical OK".
//                 CHAOS_FP_PERTURB=K flips a bit of rank 1's call K result.
//   --chaos DIR   runs batches (each starting with a world call) until the
//                 survivors agree to stop (a rank is killed or stopped by
//                 scripts/chaos.sh, or kills itself: CHAOS_VICTIM=R with
//                 --self-kill CALL). Every rank writes its pid to DIR/pid.R once
//                 its communicators exist. A survivor records every error (it
//                 must be peer_dead or timeout naming one rank), writes the
//                 batch of its first one to DIR/err.R, and runs on to the
//                 largest such batch of all survivors (so calls on a split
//                 without the victim are posted by all its members or none);
//                 then a final world barrier, which must fail too. It reads the
//                 kill time (DIR/kill, CLOCK_REALTIME ns, written by whoever
//                 kills) and prints
//                 "CHAOS rank R: E errors naming rank V, O other, ..., last error T s after the kill"
//                 writes DIR/done.R, waits for the other survivors' done files
//                 and leaves without the engine's shutdown barrier (a member is dead).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "strata/detail/rendezvous.hpp"
#include "strata/strata.hpp"

namespace {

int me = 0;

// ------------------------------------------------------------ randomness

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
struct Rng {
  std::uint64_t s;
  std::uint64_t next() { return s = mix(s); }
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(next() % n); }
  bool chance(int percent) { return below(100) < static_cast<std::size_t>(percent); }
};

// ------------------------------------------------------------ values

enum class Kind {
  barrier,
  broadcast,
  reduce,
  allreduce,
  gather,
  gatherv,
  scatter,
  scatterv,
  allgather,
  allgatherv,
  alltoall,
  alltoallv,
  reduce_scatter_block,
  reduce_scatter,
  count_
};
const char* kind_name(Kind k) {
  static const char* n[] = {"barrier",
                            "broadcast",
                            "reduce",
                            "allreduce",
                            "gather",
                            "gatherv",
                            "scatter",
                            "scatterv",
                            "allgather",
                            "allgatherv",
                            "alltoall",
                            "alltoallv",
                            "reduce_scatter_block",
                            "reduce_scatter"};
  return n[static_cast<int>(k)];
}

const strata::Datatype kTypes[] = {strata::Datatype::int8,   strata::Datatype::int16,  strata::Datatype::int32,
                                   strata::Datatype::int64,  strata::Datatype::uint8,  strata::Datatype::uint16,
                                   strata::Datatype::uint32, strata::Datatype::uint64, strata::Datatype::float32,
                                   strata::Datatype::float64};
bool is_float(strata::Datatype t) { return t == strata::Datatype::float32 || t == strata::Datatype::float64; }

/// Stores v (a small integer, exact in every type) as element i of type t.
void put(unsigned char* b, std::size_t i, strata::Datatype t, std::int64_t v) {
  switch (t) {
    case strata::Datatype::int8:
      reinterpret_cast<std::int8_t*>(b)[i] = static_cast<std::int8_t>(v);
      break;
    case strata::Datatype::int16:
      reinterpret_cast<std::int16_t*>(b)[i] = static_cast<std::int16_t>(v);
      break;
    case strata::Datatype::int32:
      reinterpret_cast<std::int32_t*>(b)[i] = static_cast<std::int32_t>(v);
      break;
    case strata::Datatype::int64:
      reinterpret_cast<std::int64_t*>(b)[i] = v;
      break;
    case strata::Datatype::uint8:
      reinterpret_cast<std::uint8_t*>(b)[i] = static_cast<std::uint8_t>(v);
      break;
    case strata::Datatype::uint16:
      reinterpret_cast<std::uint16_t*>(b)[i] = static_cast<std::uint16_t>(v);
      break;
    case strata::Datatype::uint32:
      reinterpret_cast<std::uint32_t*>(b)[i] = static_cast<std::uint32_t>(v);
      break;
    case strata::Datatype::uint64:
      reinterpret_cast<std::uint64_t*>(b)[i] = static_cast<std::uint64_t>(v);
      break;
    case strata::Datatype::float32:
      reinterpret_cast<float*>(b)[i] = static_cast<float>(v);
      break;
    case strata::Datatype::float64:
      reinterpret_cast<double*>(b)[i] = static_cast<double>(v);
      break;
  }
}

/// The value a sentinel-filled buffer holds (0xA5 bytes), compared bytewise.
constexpr unsigned char kSentinel = 0xA5;

/// The user op: affine maps x -> a*x + b (mod 2^32) as (a, b) pairs, composed
/// lower rank first: not commutative, so rank order matters.
struct Affine {
  std::uint32_t a, b;
};
Affine compose(Affine lo, Affine hi) { return {hi.a * lo.a, hi.a * lo.b + hi.b}; }
strata::UserOp affine_op() {
  strata::UserOp op;
  op.fn = [](const void* a, const void* b, void* dst, std::size_t n) {
    const auto* x = static_cast<const Affine*>(a);
    const auto* y = static_cast<const Affine*>(b);
    auto* d = static_cast<Affine*>(dst);
    for (std::size_t i = 0; i < n; ++i) d[i] = compose(x[i], y[i]);
  };
  op.elem_size = sizeof(Affine);
  op.commutative = false;
  op.name = "affine";
  return op;
}

// ------------------------------------------------------------ one call

struct Call {
  Kind kind = Kind::barrier;
  int comm = 0;  // index into the communicator set
  strata::Datatype type = strata::Datatype::int32;
  strata::Op op = strata::Op::sum;
  bool user = false;  // the affine user op (elements are Affine pairs)
  bool in_place = false;
  bool strict = false;
  std::size_t count = 0;
  std::uint64_t seed = 0;  // of the inputs
  int root_draw = 0;
  int root_pos = -1;      // >= 0 (--cover): 0 the first rank, 1 the middle one, 2 the last; else root_draw % n
  std::string tree;       // CollOptions::tree ("" = default)
  std::string fragment;   // CollOptions::fragment ("" = default)
  std::string algorithm;  // CollOptions::algorithm ("" = automatic)
};

/// Input element @p i of communicator rank @p r for the call (op-dependent range).
std::int64_t input(const Call& c, int r, std::size_t i) {
  const std::uint64_t h = mix(c.seed ^ mix(static_cast<std::uint64_t>(r) * 0x100000001B3ULL + i));
  switch (c.op) {
    case strata::Op::sum:
      return static_cast<std::int64_t>(h % 21);
    case strata::Op::prod:
      return static_cast<std::int64_t>(1 + h % 2);
    case strata::Op::min:
    case strata::Op::max:
      return static_cast<std::int64_t>(h % 101);
    default:
      return static_cast<std::int64_t>(h % 128);
  }
}
Affine input_affine(const Call& c, int r, std::size_t i) {
  const std::uint64_t h = mix(c.seed ^ mix(static_cast<std::uint64_t>(r) * 0x100000001B3ULL + i) ^ 0xABCDEFULL);
  return {static_cast<std::uint32_t>(h) | 1u, static_cast<std::uint32_t>(h >> 32)};
}
std::int64_t fold(strata::Op op, std::int64_t a, std::int64_t b) {
  switch (op) {
    case strata::Op::sum:
      return a + b;
    case strata::Op::prod:
      return a * b;
    case strata::Op::min:
      return std::min(a, b);
    case strata::Op::max:
      return std::max(a, b);
    case strata::Op::band:
      return a & b;
    case strata::Op::bor:
      return a | b;
    case strata::Op::bxor:
      return a ^ b;
  }
  return 0;
}

/// A buffer of n elements of elem bytes, filled with the sentinel.
struct Buf {
  std::vector<unsigned char> b;
  explicit Buf(std::size_t bytes = 0) : b(bytes + 1, kSentinel) {}  // +1: never empty
  unsigned char* p() { return b.data(); }
};

/// A posted call with its buffers and what to check afterwards.
struct Posted {
  Call c;
  std::optional<strata::Future<void>> f;
  Buf send, recv;
  std::vector<std::size_t> counts, displs, scounts, sdispls, rcounts, rdispls;
  std::vector<unsigned char> expect;  // expected recv bytes ("" = nothing to check)
  std::vector<char> check_mask;       // 1 where expect is significant
};

class Runner {
 public:
  Runner(strata::Engine& e, std::uint64_t seed) : engine_(e), rng_{seed} {
    strata::Communicator& w = e.world();
    comms_.push_back(w);
    comms_.push_back(w.dup());
    comms_.push_back(w.split(w.rank() % 2, w.size() - w.rank()));                // interleaved halves, reversed order
    comms_.push_back(w.split(w.rank() < (w.size() + 1) / 2 ? 0 : 1, w.rank()));  // blocks
    op_ = affine_op();
  }

  /// Draws the next batch (the same on every rank).
  std::vector<Call> draw_batch() {
    std::vector<Call> out(1 + rng_.below(16));
    for (Call& c : out) {
      c.kind = static_cast<Kind>(rng_.below(static_cast<std::size_t>(Kind::count_)));
      c.comm = static_cast<int>(rng_.below(comms_.size()));
      c.type = kTypes[rng_.below(10)];
      const bool reducing = c.kind == Kind::reduce || c.kind == Kind::allreduce ||
                            c.kind == Kind::reduce_scatter_block || c.kind == Kind::reduce_scatter;
      c.user = reducing && c.kind != Kind::reduce_scatter && rng_.chance(15);
      const int nops = is_float(c.type) ? 4 : 7;
      c.op = static_cast<strata::Op>(rng_.below(static_cast<std::size_t>(nops)));
      c.in_place = rng_.chance(25);
      c.strict = rng_.chance(20);
      const std::size_t size_class = rng_.below(100);
      c.count = size_class < 70 ? 1 + rng_.below(64) : size_class < 95 ? 1 + rng_.below(2048) : 1 + rng_.below(24576);
      if (rng_.chance(3)) c.count = 0;
      c.seed = rng_.next();
      c.root_draw = static_cast<int>(rng_.below(1024));
    }
    return out;
  }

  std::unique_ptr<Posted> post(const Call& c) {
    auto p = std::make_unique<Posted>();
    p->c = c;
    strata::Communicator& cm = comms_[static_cast<std::size_t>(c.comm)];
    const int n = cm.size();
    const int r = cm.rank();
    const int root = c.root_pos == 0 ? 0 : c.root_pos == 1 ? n / 2 : c.root_pos == 2 ? n - 1 : c.root_draw % n;
    const std::size_t es = c.user ? sizeof(Affine) : strata::size_of(c.type);
    const std::size_t cnt = c.count;
    strata::CollOptions o;
    if (c.strict) o.sync = strata::Sync::strict();
    o.tree = c.tree;
    o.fragment = c.fragment;
    o.algorithm = c.algorithm;
    const auto dt = c.type;
    auto fill = [&](Buf& b, int who, std::size_t at, std::size_t from, std::size_t k) {
      for (std::size_t i = 0; i < k; ++i) {
        if (c.user) {
          const Affine v = input_affine(c, who, from + i);
          std::memcpy(b.p() + (at + i) * es, &v, es);
        } else {
          put(b.p(), at + i, dt, input(c, who, from + i));
        }
      }
    };
    // The expected bytes of a buffer of @p elems elements, all significant unless masked later.
    auto expect_init = [&](std::size_t elems) {
      p->expect.assign(elems * es + 1, kSentinel);
      p->check_mask.assign(elems * es + 1, 1);
    };
    auto expect_val = [&](std::size_t at, int who, std::size_t from) {  // a copied element
      if (c.user) {
        const Affine v = input_affine(c, who, from);
        std::memcpy(p->expect.data() + at * es, &v, es);
      } else {
        put(p->expect.data(), at, dt, input(c, who, from));
      }
    };
    auto expect_red = [&](std::size_t at, std::size_t from) {  // the reduction over every rank
      if (c.user) {
        Affine acc = input_affine(c, 0, from);
        for (int q = 1; q < n; ++q) acc = compose(acc, input_affine(c, q, from));
        std::memcpy(p->expect.data() + at * es, &acc, es);
      } else {
        std::int64_t acc = input(c, 0, from);
        for (int q = 1; q < n; ++q) acc = fold(c.op, acc, input(c, q, from));
        put(p->expect.data(), at, dt, acc);
      }
    };
    auto unmask = [&](std::size_t from_elem, std::size_t to_elem) {
      for (std::size_t b = from_elem * es; b < to_elem * es && b < p->check_mask.size(); ++b) p->check_mask[b] = 0;
    };
    const void* ip = strata::in_place;
    switch (c.kind) {
      case Kind::barrier:
        p->f = cm.barrier(o);
        break;
      case Kind::broadcast: {
        p->recv = Buf(cnt * es);
        if (r == root) fill(p->recv, root, 0, 0, cnt);
        expect_init(cnt);
        for (std::size_t i = 0; i < cnt; ++i) expect_val(i, root, i);
        p->f = cm.broadcast(p->recv.p(), cnt, dt, root, o);
        break;
      }
      case Kind::reduce:
      case Kind::allreduce: {
        const bool all = c.kind == Kind::allreduce;
        const bool inp = c.in_place && (all || r == root);
        p->send = Buf(cnt * es);
        p->recv = Buf(cnt * es);
        fill(inp ? p->recv : p->send, r, 0, 0, cnt);
        if (all || r == root) {
          expect_init(cnt);
          for (std::size_t i = 0; i < cnt; ++i) expect_red(i, i);
        }
        const void* s = inp ? ip : p->send.p();
        if (all)
          p->f = c.user ? cm.allreduce(s, p->recv.p(), cnt, op_, o) : cm.allreduce(s, p->recv.p(), cnt, dt, c.op, o);
        else
          p->f =
              c.user ? cm.reduce(s, p->recv.p(), cnt, op_, root, o) : cm.reduce(s, p->recv.p(), cnt, dt, c.op, root, o);
        break;
      }
      case Kind::gather:
      case Kind::allgather: {
        const bool all = c.kind == Kind::allgather;
        const bool inp = c.in_place && (all || r == root);
        p->send = Buf(cnt * es);
        p->recv = Buf(cnt * es * static_cast<std::size_t>(n));
        fill(inp ? p->recv : p->send, r, inp ? static_cast<std::size_t>(r) * cnt : 0, 0, cnt);
        if (all || r == root) {
          expect_init(cnt * static_cast<std::size_t>(n));
          for (int q = 0; q < n; ++q)
            for (std::size_t i = 0; i < cnt; ++i) expect_val(static_cast<std::size_t>(q) * cnt + i, q, i);
        }
        const void* s = inp ? ip : p->send.p();
        p->f = all ? cm.allgather(s, cnt, p->recv.p(), dt, o) : cm.gather(s, cnt, p->recv.p(), dt, root, o);
        break;
      }
      case Kind::gatherv:
      case Kind::allgatherv: {
        const bool all = c.kind == Kind::allgatherv;
        std::size_t total = 0;
        for (int q = 0; q < n; ++q) {
          p->counts.push_back((cnt + static_cast<std::size_t>(q) * 7) % (cnt + 3));
          p->displs.push_back(total);
          total += p->counts.back() + 1;  // a gap of one element after each block
        }
        const std::size_t mine = p->counts[static_cast<std::size_t>(r)];
        p->send = Buf(mine * es);
        p->recv = Buf(total * es);
        fill(p->send, r, 0, 0, mine);
        if (all || r == root) {
          expect_init(total);
          for (int q = 0; q < n; ++q)
            for (std::size_t i = 0; i < p->counts[static_cast<std::size_t>(q)]; ++i)
              expect_val(p->displs[static_cast<std::size_t>(q)] + i, q, i);
        }
        p->f = all ? cm.allgatherv(p->send.p(), mine, p->recv.p(), p->counts, p->displs, dt, o)
                   : cm.gatherv(p->send.p(), mine, p->recv.p(), p->counts, p->displs, dt, root, o);
        break;
      }
      case Kind::scatter: {
        const bool inp = c.in_place && r == root;
        p->send = Buf(cnt * es * static_cast<std::size_t>(n));
        p->recv = Buf(cnt * es);
        if (r == root) fill(p->send, root, 0, 0, cnt * static_cast<std::size_t>(n));
        if (!inp) {
          expect_init(cnt);
          for (std::size_t i = 0; i < cnt; ++i) expect_val(i, root, static_cast<std::size_t>(r) * cnt + i);
        }
        p->f = cm.scatter(p->send.p(), inp ? const_cast<void*>(strata::in_place) : p->recv.p(), cnt, dt, root, o);
        break;
      }
      case Kind::scatterv: {
        std::size_t total = 0;
        for (int q = 0; q < n; ++q) {
          p->counts.push_back((cnt + static_cast<std::size_t>(q) * 5) % (cnt + 2));
          p->displs.push_back(total);
          total += p->counts.back() + 1;
        }
        const std::size_t mine = p->counts[static_cast<std::size_t>(r)];
        p->send = Buf(total * es);
        p->recv = Buf(mine * es);
        if (r == root) fill(p->send, root, 0, 0, total);
        expect_init(mine);
        for (std::size_t i = 0; i < mine; ++i) expect_val(i, root, p->displs[static_cast<std::size_t>(r)] + i);
        p->f = cm.scatterv(p->send.p(), p->counts, p->displs, p->recv.p(), mine, dt, root, o);
        break;
      }
      case Kind::alltoall: {
        const std::size_t all = cnt * static_cast<std::size_t>(n);
        p->send = Buf(all * es);
        p->recv = Buf(all * es);
        fill(c.in_place ? p->recv : p->send, r, 0, 0, all);  // block j = elements j*cnt.. of my input
        expect_init(all);
        for (int q = 0; q < n; ++q)
          for (std::size_t i = 0; i < cnt; ++i)
            expect_val(static_cast<std::size_t>(q) * cnt + i, q, static_cast<std::size_t>(r) * cnt + i);
        p->f = cm.alltoall(c.in_place ? ip : p->send.p(), p->recv.p(), cnt, dt, o);
        break;
      }
      case Kind::alltoallv: {
        // cnt(a, b): what a sends to b; both sides derive it.
        auto pair_count = [&](int a, int b) {
          return static_cast<std::size_t>(mix(c.seed ^ static_cast<std::uint64_t>(a * 131 + b)) % (cnt + 1));
        };
        auto layout = [&](int a, bool sending, std::vector<std::size_t>& counts, std::vector<std::size_t>& displs) {
          std::size_t t = 0;
          for (int q = 0; q < n; ++q) {
            counts.push_back(sending ? pair_count(a, q) : pair_count(q, a));
            displs.push_back(t);
            t += counts.back() + 1;
          }
          return t;
        };
        const std::size_t stotal = layout(r, true, p->scounts, p->sdispls);
        const std::size_t rtotal = layout(r, false, p->rcounts, p->rdispls);
        p->send = Buf(stotal * es);
        p->recv = Buf(rtotal * es);
        fill(p->send, r, 0, 0, stotal);
        expect_init(rtotal);
        for (int q = 0; q < n; ++q) {
          std::vector<std::size_t> qc, qd;
          layout(q, true, qc, qd);
          for (std::size_t i = 0; i < p->rcounts[static_cast<std::size_t>(q)]; ++i)
            expect_val(p->rdispls[static_cast<std::size_t>(q)] + i, q, qd[static_cast<std::size_t>(r)] + i);
        }
        p->f = cm.alltoallv(p->send.p(), p->scounts, p->sdispls, p->recv.p(), p->rcounts, p->rdispls, dt, o);
        break;
      }
      case Kind::reduce_scatter_block: {
        const std::size_t all = cnt * static_cast<std::size_t>(n);
        p->send = Buf(all * es);
        p->recv = Buf((c.in_place ? all : cnt) * es);
        fill(c.in_place ? p->recv : p->send, r, 0, 0, all);
        expect_init(c.in_place ? all : cnt);
        for (std::size_t i = 0; i < cnt; ++i) expect_red(i, static_cast<std::size_t>(r) * cnt + i);
        if (c.in_place) unmask(cnt, all);  // the rest of an in-place buffer is scratch
        const void* s = c.in_place ? ip : p->send.p();
        p->f = c.user ? cm.reduce_scatter_block(s, p->recv.p(), cnt, op_, o)
                      : cm.reduce_scatter_block(s, p->recv.p(), cnt, dt, c.op, o);
        break;
      }
      case Kind::reduce_scatter: {
        std::size_t total = 0, before = 0;
        for (int q = 0; q < n; ++q) {
          p->counts.push_back((cnt + static_cast<std::size_t>(q) * 3) % (cnt + 2));
          if (q < r) before += p->counts.back();
          total += p->counts.back();
        }
        const std::size_t mine = p->counts[static_cast<std::size_t>(r)];
        p->send = Buf(total * es);
        p->recv = Buf((c.in_place ? total : mine) * es);
        fill(c.in_place ? p->recv : p->send, r, 0, 0, total);
        expect_init(c.in_place ? total : mine);
        for (std::size_t i = 0; i < mine; ++i) expect_red(i, before + i);
        if (c.in_place) unmask(mine, total);
        p->f = cm.reduce_scatter(c.in_place ? ip : p->send.p(), p->recv.p(), p->counts, dt, c.op, o);
        break;
      }
      case Kind::count_:
        break;
    }
    return p;
  }

  /// Compares @p p's receive buffer with its expectation; prints the first difference.
  bool check(const Posted& p, long index) {
    if (p.expect.empty()) return true;
    const std::size_t n = std::min(p.expect.size(), p.recv.b.size());
    for (std::size_t b = 0; b < n; ++b) {
      if (p.check_mask[b] != 0 && p.expect[b] != p.recv.b[b]) {
        const Call& c = p.c;
        std::printf(
            "REF rank %d: MISMATCH call %ld %s on comm %d (size %d) type %s op %s%s count %zu%s%s root_draw %d "
            "root_pos %d tree '%s' fragment '%s' algorithm '%s': byte %zu is 0x%02x, want 0x%02x\n",
            me, index, kind_name(c.kind), c.comm, comms_[static_cast<std::size_t>(c.comm)].size(),
            strata::to_string(c.type), c.user ? "affine(user, non-commutative)" : strata::to_string(c.op), "", c.count,
            c.in_place ? " in place" : "", c.strict ? " strict" : " loose", c.root_draw, c.root_pos, c.tree.c_str(),
            c.fragment.c_str(), c.algorithm.c_str(), b, p.recv.b[b], p.expect[b]);
        return false;
      }
    }
    return true;
  }

  strata::Communicator& world() { return comms_[0]; }
  int comm_size(int i) { return comms_[static_cast<std::size_t>(i)].size(); }

 private:
  strata::Engine& engine_;
  Rng rng_;
  std::vector<strata::Communicator> comms_;
  strata::UserOp op_;
};

int ref_mode(strata::Engine& engine, long total, std::uint64_t seed) {
  Runner run(engine, seed);
  long done = 0, mismatches = 0, errors = 0;
  std::size_t kinds[static_cast<int>(Kind::count_)] = {};
  const char* cv = std::getenv("CHAOS_CORRUPT");
  const long corrupt = cv != nullptr ? std::atol(cv) : -1;
  while (done < total) {
    std::vector<Call> batch = run.draw_batch();
    std::vector<std::unique_ptr<Posted>> posted;
    for (const Call& c : batch) posted.push_back(run.post(c));
    for (std::size_t i = 0; i < posted.size(); ++i) {
      Posted& p = *posted[i];
      try {
        p.f->get();
        // CHAOS_CORRUPT=K: flip the first checked byte of call K's result (shows the check can fail).
        if (corrupt == done + static_cast<long>(i))
          for (std::size_t b = 0; b < p.expect.size(); ++b)
            if (p.check_mask[b] != 0 && b < p.recv.b.size()) {
              p.recv.b[b] = static_cast<unsigned char>(p.expect[b] ^ 0x5A);
              break;
            }
        if (!run.check(p, done + static_cast<long>(i))) ++mismatches;
        ++kinds[static_cast<int>(p.c.kind)];
      } catch (const std::exception& e) {
        ++errors;
        std::printf("REF rank %d: ERROR call %ld %s: %s\n", me, done + static_cast<long>(i), kind_name(p.c.kind),
                    e.what());
      }
    }
    done += static_cast<long>(batch.size());
    if (mismatches + errors > 20) break;
  }
  run.world().barrier().get();
  std::string per;
  for (int k = 0; k < static_cast<int>(Kind::count_); ++k)
    per += std::string(k ? ", " : "") + kind_name(static_cast<Kind>(k)) + " " + std::to_string(kinds[k]);
  std::printf("REF rank %d: %ld calls checked, %ld mismatches, %ld errors (%s)\n", me, done, mismatches, errors,
              per.c_str());
  if (mismatches == 0 && errors == 0) std::printf("chaos_rank: ref OK (rank %d)\n", me);
  std::fflush(stdout);
  return mismatches == 0 && errors == 0 ? 0 : 1;
}

// ------------------------------------------------------------ covering design (--cover)
//
// Factors of one call and their levels. A covering array over them holds every
// pair of (factor, level) values that some collective can use together in at
// least one call (a strength-2 covering design, built greedily the AETG way:
// each new row starts from an uncovered pair and fills the other factors with
// the level that covers the most new pairs). A factor's level is "effective"
// for a call only where the collective uses it (a root for the rooted ones, a
// tree for the tree collectives, an op for the reductions), so pairs that no
// collective can use together are not required. On top of the pairs: every
// risky triple of in place x op x root position x tree for reduce, and in
// place x op x tree for allreduce (a non-commutative op reduced in place at a
// root whose tree has several lower subtrees gave a wrong result once).
namespace cover {

enum Factor { kKind, kComm, kInPlace, kOpClass, kRootPos, kTree, kFrag, kSync, kSize, kFactors };
const char* const kTrees[] = {
    "", "single:flat", "single:binary", "single:chain", "single:binomial", "host:chain,core:flat"};
const char* const kFrags[] = {"", "fixed:64", "halves:256", "none"};
const std::size_t kSizes[] = {0, 7, 1000, 20000};
constexpr int kLevels[kFactors] = {static_cast<int>(Kind::count_), 4, 2, 3, 3, 6, 4, 2, 4};

bool reducing(Kind k) {
  return k == Kind::reduce || k == Kind::allreduce || k == Kind::reduce_scatter_block || k == Kind::reduce_scatter;
}
bool rooted(Kind k) {
  return k == Kind::broadcast || k == Kind::reduce || k == Kind::gather || k == Kind::gatherv || k == Kind::scatter ||
         k == Kind::scatterv;
}
bool tree_kind(Kind k) {
  return k == Kind::broadcast || k == Kind::reduce || k == Kind::allreduce || k == Kind::gather || k == Kind::scatter;
}
bool in_place_kind(Kind k) {
  return k == Kind::reduce || k == Kind::allreduce || k == Kind::gather || k == Kind::allgather || k == Kind::scatter ||
         k == Kind::alltoall || k == Kind::reduce_scatter_block || k == Kind::reduce_scatter;
}
// Whether level v of factor f means something for collective k (and is allowed).
bool effective(int f, int v, Kind k) {
  switch (f) {
    case kKind:
    case kComm:
    case kSync:
      return true;
    case kInPlace:
      return in_place_kind(k);
    case kOpClass:
      return reducing(k) && !(k == Kind::reduce_scatter && v == 2);  // no user op for reduce_scatter (v)
    case kRootPos:
      return rooted(k);
    case kTree:
      return tree_kind(k);
    case kFrag:
    case kSize:
      return k != Kind::barrier;
    default:
      return false;
  }
}
using Row = std::array<int, kFactors>;

bool pair_ok(int f1, int v1, int f2, int v2, Kind k) {
  if (f1 == kKind && static_cast<int>(k) != v1) return false;
  if (f2 == kKind && static_cast<int>(k) != v2) return false;
  return effective(f1, v1, k) && effective(f2, v2, k);
}
// Whether some collective can use (f1 = v1, f2 = v2) together.
bool pair_possible(int f1, int v1, int f2, int v2) {
  for (int k = 0; k < static_cast<int>(Kind::count_); ++k)
    if (pair_ok(f1, v1, f2, v2, static_cast<Kind>(k))) return true;
  return false;
}

struct Design {
  std::vector<Row> rows;
  std::size_t pairs = 0;  // required pairs (all covered)
};

Design build(std::uint64_t seed) {
  // Pair index: (f1 < f2, v1, v2) -> flat offset.
  std::vector<std::size_t> base(kFactors * kFactors, 0);
  std::size_t total = 0;
  for (int f1 = 0; f1 < kFactors; ++f1)
    for (int f2 = f1 + 1; f2 < kFactors; ++f2) {
      base[static_cast<std::size_t>(f1 * kFactors + f2)] = total;
      total += static_cast<std::size_t>(kLevels[f1] * kLevels[f2]);
    }
  auto at = [&](int f1, int v1, int f2, int v2) {
    if (f1 > f2) std::swap(f1, f2), std::swap(v1, v2);
    return base[static_cast<std::size_t>(f1 * kFactors + f2)] + static_cast<std::size_t>(v1 * kLevels[f2] + v2);
  };
  // need: 1 = required and uncovered, 0 = covered or impossible.
  std::vector<char> need(total, 0);
  Design d;
  for (int f1 = 0; f1 < kFactors; ++f1)
    for (int f2 = f1 + 1; f2 < kFactors; ++f2)
      for (int v1 = 0; v1 < kLevels[f1]; ++v1)
        for (int v2 = 0; v2 < kLevels[f2]; ++v2)
          if (pair_possible(f1, v1, f2, v2)) need[at(f1, v1, f2, v2)] = 1, ++d.pairs;
  auto gain = [&](const Row& r, int upto_factor_mask) {
    std::size_t g = 0;
    const Kind k = static_cast<Kind>(r[kKind]);
    for (int f1 = 0; f1 < kFactors; ++f1)
      for (int f2 = f1 + 1; f2 < kFactors; ++f2) {
        if (((upto_factor_mask >> f1) & 1) == 0 || ((upto_factor_mask >> f2) & 1) == 0) continue;
        if (pair_ok(f1, r[static_cast<std::size_t>(f1)], f2, r[static_cast<std::size_t>(f2)], k) &&
            need[at(f1, r[static_cast<std::size_t>(f1)], f2, r[static_cast<std::size_t>(f2)])] != 0)
          ++g;
      }
    return g;
  };
  Rng rng{seed};
  for (;;) {
    // The first uncovered pair seeds the row.
    std::size_t first = total;
    for (std::size_t i = 0; i < total && first == total; ++i)
      if (need[i] != 0) first = i;
    if (first == total) break;
    int sf1 = 0, sf2 = 0, sv1 = 0, sv2 = 0;
    for (int f1 = 0; f1 < kFactors; ++f1)
      for (int f2 = f1 + 1; f2 < kFactors; ++f2)
        for (int v1 = 0; v1 < kLevels[f1]; ++v1)
          for (int v2 = 0; v2 < kLevels[f2]; ++v2)
            if (at(f1, v1, f2, v2) == first) sf1 = f1, sf2 = f2, sv1 = v1, sv2 = v2;
    Row best{};
    std::size_t best_gain = 0;
    for (int attempt = 0; attempt < 8; ++attempt) {
      Row r{};
      int fixed = (1 << sf1) | (1 << sf2);
      r[static_cast<std::size_t>(sf1)] = sv1;
      r[static_cast<std::size_t>(sf2)] = sv2;
      // The collective first (it decides what is effective): one that can use the seed pair.
      if ((fixed & (1 << kKind)) == 0) {
        std::vector<int> ks;
        for (int k = 0; k < static_cast<int>(Kind::count_); ++k)
          if (pair_ok(sf1, sv1, sf2, sv2, static_cast<Kind>(k))) ks.push_back(k);
        r[kKind] = ks[rng.below(ks.size())];
        fixed |= 1 << kKind;
      }
      // The other factors in a random order, each at its best level.
      std::vector<int> order;
      for (int f = 0; f < kFactors; ++f)
        if ((fixed & (1 << f)) == 0) order.push_back(f);
      for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
      for (int f : order) {
        int best_v = static_cast<int>(rng.below(static_cast<std::size_t>(kLevels[f])));
        std::size_t bg = 0;
        for (int v = 0; v < kLevels[f]; ++v) {
          r[static_cast<std::size_t>(f)] = v;
          const std::size_t g = gain(r, fixed | (1 << f));
          if (g > bg) bg = g, best_v = v;
        }
        r[static_cast<std::size_t>(f)] = best_v;
        fixed |= 1 << f;
      }
      const std::size_t g = gain(r, (1 << kFactors) - 1);
      if (g > best_gain) best_gain = g, best = r;
    }
    const Kind k = static_cast<Kind>(best[kKind]);
    for (int f1 = 0; f1 < kFactors; ++f1)
      for (int f2 = f1 + 1; f2 < kFactors; ++f2)
        if (pair_ok(f1, best[static_cast<std::size_t>(f1)], f2, best[static_cast<std::size_t>(f2)], k))
          need[at(f1, best[static_cast<std::size_t>(f1)], f2, best[static_cast<std::size_t>(f2)])] = 0;
    d.rows.push_back(best);
  }
  // Risky combinations, in full: reduce (in place x op x root x tree) and
  // allreduce (in place x op x tree), on a communicator that changes per row.
  int comm = 0;
  for (Kind k : {Kind::reduce, Kind::allreduce})
    for (int inp = 0; inp < 2; ++inp)
      for (int op = 0; op < 3; ++op)
        for (int root = 0; root < (k == Kind::reduce ? 3 : 1); ++root)
          for (int tree = 0; tree < kLevels[kTree]; ++tree)
            d.rows.push_back(Row{static_cast<int>(k), comm++ % 4, inp, op, root, tree, 0, 0, 1});
  return d;
}

}  // namespace cover

// Turns a design row into a call (the same on every rank).
Call cover_call(const cover::Row& r, std::size_t index, std::uint64_t seed) {
  using namespace cover;
  Call c;
  c.kind = static_cast<Kind>(r[kKind]);
  c.comm = r[kComm];
  c.in_place = r[kInPlace] != 0;
  const std::uint64_t h = mix(seed ^ index);
  if (r[kOpClass] == 1) {
    c.type = (h & 1) != 0 ? strata::Datatype::float32 : strata::Datatype::float64;
    c.op = static_cast<strata::Op>((h >> 8) % 4);
  } else {
    c.type = kTypes[(h >> 16) % 8];
    c.op = static_cast<strata::Op>((h >> 8) % 7);
  }
  c.user = r[kOpClass] == 2 && reducing(c.kind) && c.kind != Kind::reduce_scatter;
  c.root_pos = r[kRootPos];
  c.tree = tree_kind(c.kind) ? kTrees[r[kTree]] : "";
  if (c.kind == Kind::allreduce && !c.tree.empty()) c.algorithm = "tree";  // else the table's schedule ignores it
  c.fragment = c.kind == Kind::barrier ? "" : kFrags[r[kFrag]];
  c.strict = r[kSync] != 0;
  c.count = kSizes[r[kSize]];
  c.seed = mix(h);
  return c;
}

// --cover: every row of the covering design once, in batches of up to 8
// nonblocking calls, each result checked like --ref.
int cover_mode(strata::Engine& engine, std::uint64_t seed) {
  Runner run(engine, seed);
  const cover::Design d = cover::build(seed);
  long mismatches = 0, errors = 0;
  std::size_t kinds[static_cast<int>(Kind::count_)] = {};
  for (std::size_t i = 0; i < d.rows.size();) {
    std::vector<std::unique_ptr<Posted>> posted;
    const std::size_t batch = 1 + (mix(seed + i) % 8);
    for (std::size_t j = 0; j < batch && i + j < d.rows.size(); ++j) {
      const Call c = cover_call(d.rows[i + j], i + j, seed);
      try {
        posted.push_back(run.post(c));
      } catch (const std::exception& e) {
        ++errors;
        std::printf("COVER rank %d: ERROR posting call %zu %s: %s\n", me, i + j, kind_name(c.kind), e.what());
        posted.push_back(nullptr);
      }
    }
    for (std::size_t j = 0; j < posted.size(); ++j) {
      if (!posted[j]) continue;
      Posted& p = *posted[j];
      try {
        p.f->get();
        if (!run.check(p, static_cast<long>(i + j))) ++mismatches;
        ++kinds[static_cast<int>(p.c.kind)];
      } catch (const std::exception& e) {
        ++errors;
        std::printf("COVER rank %d: ERROR call %zu %s: %s\n", me, i + j, kind_name(p.c.kind), e.what());
      }
    }
    i += posted.size();
    if (mismatches + errors > 20) break;
  }
  run.world().barrier().get();
  std::printf("COVER rank %d: %zu calls (%zu pairs covered), %ld mismatches, %ld errors\n", me, d.rows.size(), d.pairs,
              mismatches, errors);
  if (mismatches == 0 && errors == 0) std::printf("chaos_rank: cover OK (rank %d)\n", me);
  std::fflush(stdout);
  return mismatches == 0 && errors == 0 ? 0 : 1;
}

// --fp-identical N: N float allreduces (sums of values of mixed magnitude,
// where a different association changes the rounded result) over every
// allreduce algorithm, in place or not, at sizes from one element to the
// single-copy range; after each, the ranks compare their results bytewise
// (an allgather of the result bytes). A convergence test that differs between
// ranks would diverge and then hang: every rank must hold the same bits.
int fp_identical_mode(strata::Engine& engine, long n, std::uint64_t seed) {
  strata::Communicator w = engine.world();
  const int size = w.size();
  const char* const algos[] = {"", "tree", "single", "rd", "rabenseifner", "ring", "hier", "mapped", "single-copy"};
  const std::size_t counts[] = {1, 3, 100, 1024, 9000, 20000};
  long diffs = 0, errors = 0, calls = 0;
  Rng rng{seed};
  for (long i = 0; i < n; ++i) {
    const char* algo = algos[rng.below(9)];
    const std::size_t cnt = counts[rng.below(6)];
    const bool inp = rng.chance(50) && std::string(algo) != "single-copy";
    const bool dbl = rng.chance(50);
    const std::uint64_t vs = rng.next();
    const std::size_t es = dbl ? 8 : 4;
    std::vector<unsigned char> send(cnt * es), recv(cnt * es);
    for (std::size_t e = 0; e < cnt; ++e) {
      const std::uint64_t h = mix(vs ^ mix(static_cast<std::uint64_t>(w.rank()) * 7919 + e));
      // Magnitudes from 1e-8 to 1e8 and both signs: sums round differently when regrouped.
      const double mag = std::pow(10.0, static_cast<double>(h % 17) - 8.0);
      const double v = ((h >> 8) % 2 != 0 ? -1.0 : 1.0) * mag * (1.0 + static_cast<double>((h >> 16) % 1000) / 997.0);
      if (dbl) {
        std::memcpy(send.data() + e * es, &v, es);
      } else {
        const auto f = static_cast<float>(v);
        std::memcpy(send.data() + e * es, &f, es);
      }
    }
    if (inp) recv = send;
    strata::CollOptions o;
    o.algorithm = algo;
    const auto dt = dbl ? strata::Datatype::float64 : strata::Datatype::float32;
    try {
      w.allreduce(inp ? strata::in_place : send.data(), recv.data(), cnt, dt, strata::Op::sum, o).get();
      ++calls;
    } catch (const strata::Error& e) {
      // An algorithm that does not apply here (e.g. single copy across hosts) says so; anything else is an error.
      if (e.errc() != strata::Errc::unsupported) {
        ++errors;
        std::printf("FP rank %d: ERROR allreduce %zu x %s algorithm '%s'%s: %s\n", me, cnt, dbl ? "f64" : "f32", algo,
                    inp ? " in place" : "", e.what());
      }
      continue;
    }
    // CHAOS_FP_PERTURB=K: rank 1 flips the lowest bit of call K's first element (shows the comparison can fail).
    if (const char* pv = std::getenv("CHAOS_FP_PERTURB"); pv != nullptr && std::atol(pv) == i && w.rank() == 1)
      recv[0] = static_cast<unsigned char>(recv[0] ^ 1u);
    std::vector<unsigned char> all(recv.size() * static_cast<std::size_t>(size));
    w.allgather(recv.data(), recv.size(), all.data(), strata::Datatype::uint8).get();
    for (int r = 1; r < size; ++r)
      if (std::memcmp(all.data(), all.data() + static_cast<std::size_t>(r) * recv.size(), recv.size()) != 0) {
        ++diffs;
        std::printf("FP rank %d: DIFFERENT BITS allreduce %zu x %s algorithm '%s'%s: rank %d differs from rank 0\n", me,
                    cnt, dbl ? "f64" : "f32", algo, inp ? " in place" : "", r);
        break;
      }
    if (diffs + errors > 10) break;
  }
  std::printf("FP rank %d: %ld allreduces compared, %ld with different bits, %ld errors\n", me, calls, diffs, errors);
  if (diffs == 0 && errors == 0) std::printf("chaos_rank: fp-identical OK (rank %d)\n", me);
  std::fflush(stdout);
  return diffs == 0 && errors == 0 ? 0 : 1;
}

std::int64_t realtime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}
void write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << text;
  std::rename(tmp.c_str(), path.c_str());
}

bool file_exists(const std::string& path) { return std::ifstream(path).good(); }
long read_long(const std::string& path) {
  long v = -1;
  std::ifstream(path) >> v;
  return v;
}

int chaos_mode(strata::Engine& engine, const std::string& dir, std::uint64_t seed, long self_kill_at) {
  // For the driver's leak checks: this job's shared-memory name prefix and directory.
  if (me == 0) {
    namespace rdv = strata::detail::rdv;
    const char* id = std::getenv(rdv::env::kJobId);
    const char* hex = std::getenv(rdv::env::kSecret);
    const char* jd = std::getenv(rdv::env::kJobDir);
    rdv::Secret secret{};
    if (id != nullptr && hex != nullptr && rdv::secret_from_hex(hex, secret))
      write_file(dir + "/shm_prefix", "strata-" + rdv::shm_job_tag(id, secret.data(), secret.size()) + "-\n");
    if (jd != nullptr) write_file(dir + "/job_dir", std::string(jd) + "\n");
  }
  const int n = engine.size();
  Runner run(engine, seed);  // dup and splits: blocking, before the driver may kill
  write_file(dir + "/pid." + std::to_string(me), std::to_string(::getpid()) + "\n");
  long calls = 0, batch_no = 0, stop_after = -1;
  int errors = 0, others = 0, named = -1;
  std::int64_t last_error_ns = 0;
  std::string first_msg, last_msg;
  auto record = [&](const strata::Error& e) {
    last_error_ns = realtime_ns();
    const std::string m = e.what();
    if (first_msg.empty()) first_msg = m;
    last_msg = m;
    // The dead member: "world rank N" if the message has it (communicator
    // ranks differ from world ranks), else the first "rank N" that is not us.
    int who = -1;
    const std::size_t wr = m.find("world rank ");
    if (wr != std::string::npos) who = std::atoi(m.c_str() + wr + 11);
    for (std::size_t at = m.find("rank "); at != std::string::npos && who < 0; at = m.find("rank ", at + 1)) {
      if (at + 5 >= m.size() || m[at + 5] < '0' || m[at + 5] > '9') continue;
      const int v = std::atoi(m.c_str() + at + 5);
      if (v != me) who = v;
    }
    const bool typed = e.errc() == strata::Errc::peer_dead || e.errc() == strata::Errc::timeout;
    if (!typed || who < 0 || (named >= 0 && who != named)) {
      ++others;
      std::printf("CHAOS rank %d: OTHER error: %s\n", me, m.c_str());
    } else {
      named = who;
      ++errors;
    }
  };
  // Survivors stop together: after its first error (in batch b) a survivor
  // writes err.R = b and goes on with the same batches until it knows every
  // other survivor's b (files), then stops after the largest. So a call on a
  // communicator without the victim is posted by all its members or by none.
  // Every batch starts with a call on the world, so every survivor meets the
  // death within one batch of learning it.
  auto stop_known = [&]() -> bool {
    long mx = -1;
    int seen = 0;
    for (int r = 0; r < n; ++r) {
      const long b = read_long(dir + "/err." + std::to_string(r));
      if (b >= 0) ++seen, mx = std::max(mx, b);
    }
    if (seen < n - 1) return false;
    stop_after = mx;
    return true;
  };
  const auto t_start = std::chrono::steady_clock::now();
  for (;; ++batch_no) {
    if (stop_after >= 0 && batch_no > stop_after) break;
    std::vector<Call> batch = run.draw_batch();
    batch[0].comm = 0;  // the world
    std::vector<std::unique_ptr<Posted>> posted;
    bool err_here = false;
    for (const Call& c : batch) {
      if (self_kill_at >= 0 && calls == self_kill_at) {
        write_file(dir + "/kill", std::to_string(realtime_ns()) + "\n");
        std::fflush(stdout);
        ::raise(SIGKILL);
      }
      ++calls;
      try {
        posted.push_back(run.post(c));
      } catch (const strata::Error& e) {
        record(e);  // a post fails at once on a communicator with a member known dead
        err_here = true;
      }
    }
    // Wait for all of them in any order: a failure is recorded (and err.R
    // written) while other calls of the batch still wait.
    bool wrote_err = errors + others > 0;
    auto note_err = [&] {
      if (!wrote_err) {
        write_file(dir + "/err." + std::to_string(me), std::to_string(batch_no) + "\n");
        wrote_err = true;
      }
    };
    if (err_here) note_err();
    std::vector<char> settled(posted.size(), 0);
    const auto t_batch = std::chrono::steady_clock::now();
    bool told = false;
    for (std::size_t left = posted.size(); left > 0;) {
      if (!told && std::chrono::steady_clock::now() - t_batch > std::chrono::seconds(15)) {
        // Longer than STRATA_TIMEOUT + 1 s can explain: say which calls still wait.
        told = true;
        for (std::size_t i = 0; i < posted.size(); ++i)
          if (settled[i] == 0) {
            const Call& c = posted[i]->c;
            std::printf(
                "CHAOS rank %d: STILL PENDING after 15 s: batch %ld call %zu %s on comm %d (size %d), count "
                "%zu, %s, %s\n",
                me, batch_no, i, kind_name(c.kind), c.comm, run.comm_size(c.comm), c.count,
                c.in_place ? "in place" : "not in place", c.strict ? "strict" : "loose");
          }
        std::fflush(stdout);
      }
      for (std::size_t i = 0; i < posted.size(); ++i) {
        if (settled[i] != 0 || !posted[i]->f->wait_for(std::chrono::milliseconds(2))) continue;
        settled[i] = 1;
        --left;
        try {
          posted[i]->f->get();
        } catch (const strata::Error& e) {
          record(e);
          note_err();
        }
      }
      if (std::chrono::steady_clock::now() - t_start > std::chrono::seconds(120)) {
        std::printf("CHAOS rank %d: OTHER: %zu calls of batch %ld still pending after 120 s\n", me, left, batch_no);
        std::fflush(stdout);
        _exit(3);
      }
    }
    if (wrote_err && stop_after < 0) {
      // Wait (polling the files, bounded) until every survivor has met the
      // death, then run on up to the last of their batches: a slower
      // survivor's calls with this rank must still be posted here.
      for (int i = 0; i < 6000 && !stop_known(); ++i) {
        struct timespec ts {
          0, 10000000
        };
        ::nanosleep(&ts, nullptr);
      }
      if (stop_after < 0) {
        std::printf("CHAOS rank %d: OTHER: the other survivors never reported an error\n", me);
        stop_after = batch_no;
        ++others;
      }
    }
  }
  // The world includes the dead member: a final barrier must fail too.
  try {
    strata::Future<void> fb = run.world().barrier();
    if (!fb.wait_for(std::chrono::seconds(15))) {
      std::printf("CHAOS rank %d: STILL PENDING after 15 s: the final world barrier (batch %ld)\n", me, batch_no);
      std::fflush(stdout);
    }
    fb.get();
    std::printf("CHAOS rank %d: OTHER: the final world barrier succeeded\n", me);
    ++others;
  } catch (const strata::Error& e) {
    record(e);
  }
  std::int64_t kill_ns = 0;
  {
    std::ifstream in(dir + "/kill");
    in >> kill_ns;
  }
  const double after = kill_ns > 0 ? static_cast<double>(last_error_ns - kill_ns) / 1e9 : -1.0;
  std::printf("CHAOS rank %d: %d errors naming rank %d, %d other, %ld calls posted, last error %.3f s after the kill\n",
              me, errors, named, others, calls, after);
  std::printf("CHAOS rank %d: first error: %s\nCHAOS rank %d: last error: %s\n", me, first_msg.c_str(), me,
              last_msg.c_str());
  std::fflush(stdout);
  write_file(dir + "/done." + std::to_string(me), std::to_string(after) + " " + std::to_string(named) + " " +
                                                      std::to_string(errors) + " " + std::to_string(others) + "\n");
  // Leave when every survivor is done (a survivor's progress may still serve
  // another's last calls); bounded.
  for (int i = 0; i < 3000; ++i) {
    int done = 0;
    for (int r = 0; r < n; ++r) done += file_exists(dir + "/done." + std::to_string(r)) ? 1 : 0;
    if (done >= n - 1) break;
    (void)run.world().size();
    std::this_thread::yield();
    struct timespec ts {
      0, 10000000
    };
    ::nanosleep(&ts, nullptr);  // polling the files, not synchronizing by time
  }
  _exit(0);  // the engine's shutdown barrier cannot succeed with a dead member
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode, dir;
  long n = 0, self_kill = -1;
  std::uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--ref" && i + 1 < argc) {
      mode = a;
      n = std::atol(argv[++i]);
    } else if (a == "--chaos" && i + 1 < argc) {
      mode = a;
      dir = argv[++i];
    } else if (a == "--cover") {
      mode = a;
    } else if (a == "--fp-identical" && i + 1 < argc) {
      mode = a;
      n = std::atol(argv[++i]);
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--self-kill" && i + 1 < argc) {
      self_kill = std::atol(argv[++i]);
    } else {
      std::fprintf(stderr, "chaos_rank: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  try {
    strata::Engine engine;
    me = engine.rank();
    if (mode == "--ref") return ref_mode(engine, n, seed);
    if (mode == "--cover") return cover_mode(engine, seed);
    if (mode == "--fp-identical") return fp_identical_mode(engine, n, seed);
    if (mode == "--chaos") {
      const char* victim = std::getenv("CHAOS_VICTIM");
      const long kill_at = victim != nullptr && std::atoi(victim) == me ? self_kill : -1;
      return chaos_mode(engine, dir, seed, kill_at);
    }
    std::fprintf(stderr, "chaos_rank: give --ref N, --cover, --fp-identical N or --chaos DIR\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: FAILED: exception: %s\n", me, e.what());
    return 1;
  }
}
