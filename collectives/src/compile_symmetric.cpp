// Allgather(v), alltoall(v), reduce-scatter(_block): the step schedules of
// patterns/schedule.hpp compiled to DAG slices with the window/RTR protocol
// (docs/algorithms.md, "Allgather, alltoall, reduce-scatter").
//
// Every schedule step moves at most one message out of and one message into
// each rank. A message is the concatenation of the blocks of the step's block
// ranges (both sides list the same blocks in the same order), cut into
// fragments of Z bytes; a fragment spanning two blocks travels as one
// put_with_signal per block piece, all on one signal slot. Per fragment
// (step s, fragment f) of a message from A to B:
//   B: RTR signal to A on slot 2 (f S + s) + 1 once its window region is free,
//   A: wait RTR, put_with_signal the pieces into B's region (slot 2 (f S + s)),
//   B: wait for the pieces, copy / reduce them out of the window.
// Region of (s, f): (s * stride + f) mod R, where R regions of Z bytes fill the
// window slot and stride is the largest fragment count of any message (1 when
// unknown, alltoallv). The receiver walks its fragments in (s, f) order and a
// region's next RTR follows the consumption of its previous fragment, so every
// dependency points to an earlier (s, f): no cycles, no overrun.
// Local buffers are tracked per byte range (read after write, write after
// read, write after write), which orders forwarding (ring, Bruck, recursive
// doubling) and reuse of working buffers (Bruck alltoall) without barriers.
// A rank keeps at most kMaxOutstandingPuts puts in flight (seed 002).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compile_common.hpp"
#include "patterns/schedule.hpp"

namespace strata::coll::cc {

namespace {

constexpr std::size_t kMaxOutstandingPuts = 128;  // seed 002 throttled at 128
constexpr std::size_t kDefaultFragment = 32768;   // seed 000
constexpr std::size_t kMaxRegions = 1024;

// Local buffer accesses, for read-after-write / write-after-read / write-after-write edges.
class Tracker {
 public:
  [[nodiscard]] std::vector<NodeId> read_deps(const Region& r) const { return deps(r, false); }
  [[nodiscard]] std::vector<NodeId> write_deps(const Region& r) const { return deps(r, true); }
  void read(const Region& r, NodeId n) { add(r, n, false); }
  void write(const Region& r, NodeId n) { add(r, n, true); }

 private:
  struct Access {
    dag::BufferKind kind;
    std::uint32_t id;
    std::uint64_t off;
    std::uint64_t len;
    NodeId node;
    bool write;
  };
  std::vector<NodeId> deps(const Region& r, bool writing) const {
    std::vector<NodeId> d;
    for (const Access& a : acc_) {
      if (a.kind != r.buf.kind || a.id != r.buf.id) continue;
      if (!(a.write || writing)) continue;
      if (a.off < r.offset + r.len && r.offset < a.off + a.len) d.push_back(a.node);
    }
    return d;
  }
  void add(const Region& r, NodeId n, bool w) {
    if (r.len == 0) return;
    acc_.push_back({r.buf.kind, r.buf.id, r.offset, r.len, n, w});
  }
  std::vector<Access> acc_;
};

void append(std::vector<NodeId>* d, const std::vector<NodeId>& more) { d->insert(d->end(), more.begin(), more.end()); }

// Copies a received window fragment to its place in recv, after every earlier
// access to that range (tracked), and records the write.
NodeId copy_out(Tracker& t, PlanBuilder& b, const Region& win, const Region& dst, NodeId arrived) {
  std::vector<NodeId> deps{arrived};
  append(&deps, t.write_deps(dst));
  const NodeId n = b.copy(win, dst, deps);
  t.write(dst, n);
  return n;
}

// One block of a message (bytes of block space).
struct Seg {
  int block = 0;
  std::uint64_t len = 0;
};

// Per-kind behaviour of the generic step emitter.
class StepKind {
 public:
  virtual ~StepKind() = default;
  // Bytes of block b on the send / receive side.
  [[nodiscard]] virtual std::uint64_t send_bytes(int b) const = 0;
  [[nodiscard]] virtual std::uint64_t recv_bytes(int b) const = 0;
  // Where bytes [off, off + len) of send block b currently are.
  virtual Region source(int b, std::uint64_t off, std::uint64_t len) = 0;
  // Consumes bytes [off, off + len) of receive block b that arrived in `win`;
  // returns the nodes that read `win` (the region is free once they are done).
  virtual std::vector<NodeId> sink(std::size_t step, const patterns::Step& st, const Region& win, int b,
                                   std::uint64_t off, std::uint64_t len, NodeId arrived) = 0;
  // Called after every step's sends and receives were emitted.
  virtual void after_step(std::size_t /*step*/, const patterns::Step& /*st*/, const std::vector<Seg>& /*received*/) {}
};

struct Geometry {
  std::uint64_t z = 0;       // fragment / region bytes
  std::uint64_t stride = 1;  // region index step between schedule steps
  std::uint64_t regions = 1;
};

// Fragment / region size for messages of at most `max_msg` bytes (0 = unknown).
Geometry geometry(const Group& g, const Call& c, std::size_t esize, std::uint64_t max_msg, bool known) {
  Geometry geo;
  std::uint64_t cap = g.slot_bytes / 2;
  cap -= cap % esize;
  if (cap == 0) fail(Errc::invalid_argument, g, c, "window slot too small (STRATA_SLOT_BYTES)");
  auto align_up = [esize](std::uint64_t v) { return (v + esize - 1) / esize * esize; };
  std::uint64_t z = 0;
  if (c.algo.fragment > 0) {
    z = std::min<std::uint64_t>(c.algo.fragment, cap);
    z -= z % esize;
  } else if (c.algo.halves_threshold > 0) {
    if (known)
      z = max_msg > c.algo.halves_threshold ? align_up((max_msg + 1) / 2) : max_msg;
    else
      z = align_up(c.algo.halves_threshold);
    z = std::min(z, cap);
  } else if (known && max_msg <= kDefaultFragment) {
    z = max_msg;
  } else {
    z = std::min<std::uint64_t>(kDefaultFragment, cap);
    z -= z % esize;
  }
  z = std::min(z, cap);
  geo.z = std::max<std::uint64_t>(z, esize);
  geo.regions = std::max<std::uint64_t>(1, std::min<std::uint64_t>(g.slot_bytes / geo.z, kMaxRegions));
  geo.stride = known ? std::max<std::uint64_t>(1, (max_msg + geo.z - 1) / geo.z) : 1;
  return geo;
}

std::vector<Seg> segments(const patterns::Schedule& s, const patterns::Step& st, bool send, const StepKind& k) {
  std::vector<Seg> out;
  for (const patterns::BlockRange& r : send ? s.send_ranges(st) : s.recv_ranges(st))
    for (int i = 0; i < r.count; ++i) {
      const int b = r.first + i;
      const std::uint64_t len = send ? k.send_bytes(b) : k.recv_bytes(b);
      if (len > 0) out.push_back({b, len});
    }
  return out;
}

// A piece of fragment f: bytes [off, off + len) of segment seg, at `at` inside the fragment.
struct Piece {
  std::size_t seg;
  std::uint64_t off;
  std::uint64_t len;
  std::uint64_t at;
};

std::vector<Piece> pieces(const std::vector<Seg>& segs, std::uint64_t begin, std::uint64_t end) {
  std::vector<Piece> out;
  std::uint64_t pos = 0;
  for (std::size_t i = 0; i < segs.size() && pos < end; ++i) {
    const std::uint64_t a = std::max(pos, begin);
    const std::uint64_t b = std::min(pos + segs[i].len, end);
    if (a < b) out.push_back({i, a - pos, b - a, a - begin});
    pos += segs[i].len;
  }
  return out;
}

std::uint64_t total(const std::vector<Seg>& segs) {
  std::uint64_t t = 0;
  for (const Seg& s : segs) t += s.len;
  return t;
}

// Emits the schedule's steps (sends before receives within a step).
class Emitter {
 public:
  Emitter(Ctx& x, Tracker& t, const Geometry& geo, std::vector<NodeId> start)
      : x_(x), t_(t), geo_(geo), start_(std::move(start)), last_(geo.regions) {}

  void run(const patterns::Schedule& s, StepKind& k) {
    PlanBuilder& b = x_.b();
    const std::size_t nsteps = s.steps().size();
    for (std::size_t si = 0; si < nsteps; ++si) {
      const patterns::Step& st = s.steps()[si];
      if (st.send_to >= 0) {
        const std::vector<Seg> segs = segments(s, st, true, k);
        const std::uint64_t bytes = total(segs);
        const std::uint64_t nf = (bytes + geo_.z - 1) / geo_.z;
        for (std::uint64_t f = 0; f < nf; ++f) {
          const std::uint32_t data = data_slot(si, f, nsteps);
          const std::uint64_t roff = region_of(si, f) * geo_.z;
          x_.b().expect_signals_from(x_.world(st.send_to));
          const NodeId ready = b.wait(data + 1, 1, start_);
          const std::uint64_t fend = std::min(bytes, (f + 1) * geo_.z);
          for (const Piece& p : pieces(segs, f * geo_.z, fend)) {
            const Region src = k.source(segs[p.seg].block, p.off, p.len);
            std::vector<NodeId> deps{ready};
            append(&deps, t_.read_deps(src));
            if (puts_.size() >= kMaxOutstandingPuts) deps.push_back(puts_[puts_.size() - kMaxOutstandingPuts]);
            const NodeId put =
                b.put_with_signal(x_.world(st.send_to), src, x_.peer_win(st.send_to, roff + p.at, p.len), data, deps);
            t_.read(src, put);
            puts_.push_back(put);
          }
        }
      }
      std::vector<Seg> got;
      if (st.recv_from >= 0) {
        got = segments(s, st, false, k);
        const std::uint64_t bytes = total(got);
        const std::uint64_t nf = (bytes + geo_.z - 1) / geo_.z;
        for (std::uint64_t f = 0; f < nf; ++f) {
          const std::uint32_t data = data_slot(si, f, nsteps);
          const std::uint64_t reg = region_of(si, f);
          const std::uint64_t roff = reg * geo_.z;
          std::vector<NodeId> rdeps = start_;
          append(&rdeps, last_[reg]);
          b.signal(x_.world(st.recv_from), data + 1, rdeps);
          b.expect_signals_from(x_.world(st.recv_from));
          const std::uint64_t fend = std::min(bytes, (f + 1) * geo_.z);
          const std::vector<Piece> ps = pieces(got, f * geo_.z, fend);
          const Region win = x_.my_win(roff, fend - f * geo_.z);
          const NodeId arrived = b.wait(data, static_cast<std::uint32_t>(ps.size()), {}, &win);
          std::vector<NodeId> users;
          for (const Piece& p : ps)
            append(&users, k.sink(si, st, x_.my_win(roff + p.at, p.len), got[p.seg].block, p.off, p.len, arrived));
          if (users.empty()) users.push_back(arrived);
          last_[reg] = std::move(users);
        }
      }
      k.after_step(si, st, got);
    }
  }

 private:
  std::uint32_t data_slot(std::size_t step, std::uint64_t f, std::size_t nsteps) const {
    const std::uint64_t slot = 2 * (f * nsteps + step);
    if (slot + 1 >= kDataSlotLimit)
      fail(Errc::unsupported, x_.g(), x_.c(),
           "too many fragments (" + std::to_string(f + 1) + " in one step); raise the fragment size");
    return static_cast<std::uint32_t>(slot);
  }
  std::uint64_t region_of(std::size_t step, std::uint64_t f) const {
    return (static_cast<std::uint64_t>(step) * geo_.stride + f) % geo_.regions;
  }

  Ctx& x_;
  Tracker& t_;
  Geometry geo_;
  std::vector<NodeId> start_;
  std::vector<std::vector<NodeId>> last_;  // per region: nodes that read its last fragment
  std::vector<NodeId> puts_;
};

// Largest message of any rank's schedule (block sizes must not depend on the rank).
template <class Build>
std::uint64_t max_message(int n, const Build& build, const StepKind& k) {
  std::uint64_t m = 0;
  patterns::Schedule s;
  for (int r = 0; r < n; ++r) {
    build(r, s);
    for (const patterns::Step& st : s.steps())
      if (st.send_to >= 0) m = std::max(m, total(segments(s, st, true, k)));
  }
  return m;
}

std::vector<std::uint64_t> prefix(const std::vector<std::size_t>& counts) {
  std::vector<std::uint64_t> d(counts.size(), 0);
  std::uint64_t acc = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    d[i] = acc;
    acc += counts[i];
  }
  return d;
}

void check_sizes(const Group& g, const Call& c, const std::vector<std::size_t>& v, const char* name) {
  if (v.size() != static_cast<std::size_t>(g.size()))
    fail(Errc::invalid_argument, g, c,
         std::string("argument '") + name + "' has " + std::to_string(v.size()) + " entries for " +
             std::to_string(g.size()) + " ranks");
}

// "", "auto", "tree", "single", "hierarchical": let the compiler pick.
bool automatic(const std::string& name) {
  return name.empty() || name == "auto" || name == "tree" || name == "single" || name == "hierarchical";
}

std::shared_ptr<const dag::Plan> done(Ctx& x) {
  finish(x);
  if (x.b().size() == 0) x.b().nop();
  return x.build();
}

// ---------------------------------------------------------------- allgather(v)
class AllgatherKind : public StepKind {
 public:
  AllgatherKind(Tracker& t, PlanBuilder& b, std::vector<std::uint64_t> bytes, std::vector<std::uint64_t> at, int me,
                bool in_place)
      : t_(t), b_(b), bytes_(std::move(bytes)), at_(std::move(at)), me_(me), in_place_(in_place) {}
  std::uint64_t send_bytes(int b) const override { return bytes_[static_cast<std::size_t>(b)]; }
  std::uint64_t recv_bytes(int b) const override { return bytes_[static_cast<std::size_t>(b)]; }
  Region source(int b, std::uint64_t off, std::uint64_t len) override {
    if (b == me_ && !in_place_) return dag::in(0, off, len);
    return dag::out(0, at_[static_cast<std::size_t>(b)] + off, len);
  }
  std::vector<NodeId> sink(std::size_t, const patterns::Step&, const Region& win, int b, std::uint64_t off,
                           std::uint64_t len, NodeId arrived) override {
    const Region dst = dag::out(0, at_[static_cast<std::size_t>(b)] + off, len);
    return {copy_out(t_, b_, win, dst, arrived)};
  }

 private:
  Tracker& t_;
  PlanBuilder& b_;
  std::vector<std::uint64_t> bytes_, at_;
  int me_;
  bool in_place_;
};

}  // namespace

std::shared_ptr<const dag::Plan> compile_allgather(const Group& g, const Call& c, int slot) {
  Ctx x(g, c, slot);
  const int n = g.size();
  const std::size_t es = x.esize();
  std::vector<std::size_t> counts(static_cast<std::size_t>(n), c.count), displs(static_cast<std::size_t>(n));
  if (c.kind == Kind::allgatherv) {
    check_sizes(g, c, c.counts, "counts");
    check_sizes(g, c, c.displs, "displs");
    counts = c.counts;
    displs = c.displs;
  } else {
    for (int r = 0; r < n; ++r) displs[static_cast<std::size_t>(r)] = static_cast<std::size_t>(r) * c.count;
  }
  std::vector<std::uint64_t> bytes(counts.size()), at(counts.size());
  std::uint64_t recv_total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    bytes[r] = counts[r] * es;
    at[r] = displs[r] * es;
    recv_total = std::max(recv_total, at[r] + bytes[r]);
  }
  const auto me = static_cast<std::size_t>(g.rank);
  x.b().require_output_coverage(false);
  if (!c.in_place) x.b().input(0, bytes[me]);
  x.b().output(0, recv_total);

  const std::string& name = c.algo.name;
  void (*build)(int, int, patterns::Schedule&) = nullptr;
  if (name == "ring" || (automatic(name) && (n <= 2 || recv_total > 16384)))
    build = patterns::ring_allgather;
  else if (name == "rd")
    build = patterns::recursive_doubling_allgather;
  else if (name == "bruck" || automatic(name))
    build = patterns::bruck_allgather;
  else
    fail(Errc::invalid_argument, g, c, "algorithm '" + name + "' unknown (ring | rd | bruck)");

  Tracker t;
  AllgatherKind k(t, x.b(), bytes, at, g.rank, c.in_place);
  const std::uint64_t maxm = max_message(
      n, [&](int r, patterns::Schedule& s) { build(r, n, s); }, k);
  const Geometry geo = geometry(g, c, es, maxm, true);
  const std::vector<NodeId> start = entry(x);
  if (!c.in_place && bytes[me] > 0) {
    const Region dst = dag::out(0, at[me], bytes[me]);
    t.write(dst, x.b().copy(dag::in(0, 0, bytes[me]), dst, start));
  }
  patterns::Schedule s;
  build(g.rank, n, s);
  Emitter e(x, t, geo, start);
  e.run(s, k);
  return done(x);
}

namespace {

// ---------------------------------------------------------------- alltoall(v)
class PairwiseKind : public StepKind {
 public:
  PairwiseKind(Tracker& t, PlanBuilder& b, std::vector<std::uint64_t> sb, std::vector<std::uint64_t> sat,
               std::vector<std::uint64_t> rb, std::vector<std::uint64_t> rat)
      : t_(t), b_(b), sb_(std::move(sb)), sat_(std::move(sat)), rb_(std::move(rb)), rat_(std::move(rat)) {}
  std::uint64_t send_bytes(int b) const override { return sb_[static_cast<std::size_t>(b)]; }
  std::uint64_t recv_bytes(int b) const override { return rb_[static_cast<std::size_t>(b)]; }
  Region source(int b, std::uint64_t off, std::uint64_t len) override {
    return dag::in(0, sat_[static_cast<std::size_t>(b)] + off, len);
  }
  std::vector<NodeId> sink(std::size_t, const patterns::Step&, const Region& win, int b, std::uint64_t off,
                           std::uint64_t len, NodeId arrived) override {
    const Region dst = dag::out(0, rat_[static_cast<std::size_t>(b)] + off, len);
    return {copy_out(t_, b_, win, dst, arrived)};
  }

 private:
  Tracker& t_;
  PlanBuilder& b_;
  std::vector<std::uint64_t> sb_, sat_, rb_, rat_;
};

// Bruck over positions: position i of rank r starts as the send block for r+i
// and ends as the receive block from r-i. A position received for the last
// time (its highest set bit) lands in recv; earlier receptions in scratch.
class BruckKind : public StepKind {
 public:
  BruckKind(Tracker& t, PlanBuilder& b, int me, int n, std::uint64_t bb)
      : t_(t), b_(b), me_(me), n_(n), bb_(bb), in_scratch_(static_cast<std::size_t>(n), 0) {}
  std::uint64_t send_bytes(int) const override { return bb_; }
  std::uint64_t recv_bytes(int) const override { return bb_; }
  Region source(int i, std::uint64_t off, std::uint64_t len) override {
    if (in_scratch_[static_cast<std::size_t>(i)])
      return dag::scratch(0, static_cast<std::uint64_t>(i) * bb_ + off, len);
    return dag::in(0, static_cast<std::uint64_t>(patterns::mod(me_ + i, n_)) * bb_ + off, len);
  }
  std::vector<NodeId> sink(std::size_t step, const patterns::Step&, const Region& win, int i, std::uint64_t off,
                           std::uint64_t len, NodeId arrived) override {
    const bool last = (static_cast<unsigned>(i) >> (step + 1)) == 0;
    const Region dst = last ? dag::out(0, static_cast<std::uint64_t>(patterns::mod(me_ - i, n_)) * bb_ + off, len)
                            : dag::scratch(0, static_cast<std::uint64_t>(i) * bb_ + off, len);
    return {copy_out(t_, b_, win, dst, arrived)};
  }
  void after_step(std::size_t, const patterns::Step&, const std::vector<Seg>& got) override {
    for (const Seg& s : got) in_scratch_[static_cast<std::size_t>(s.block)] = 1;
  }

 private:
  Tracker& t_;
  PlanBuilder& b_;
  int me_, n_;
  std::uint64_t bb_;
  std::vector<char> in_scratch_;
};

}  // namespace

std::shared_ptr<const dag::Plan> compile_alltoall(const Group& g, const Call& c, int slot) {
  Ctx x(g, c, slot);
  const int n = g.size();
  const auto nn = static_cast<std::size_t>(n);
  const std::size_t es = x.esize();
  if (c.in_place) fail(Errc::unsupported, g, c, "in-place alltoall is not supported");
  std::vector<std::size_t> sc(nn, c.count), sd(nn), rc(nn, c.count), rd(nn);
  const bool v = c.kind == Kind::alltoallv;
  if (v) {
    check_sizes(g, c, c.counts, "send_counts");
    check_sizes(g, c, c.displs, "send_displs");
    check_sizes(g, c, c.rcounts, "recv_counts");
    check_sizes(g, c, c.rdispls, "recv_displs");
    sc = c.counts;
    sd = c.displs;
    rc = c.rcounts;
    rd = c.rdispls;
  } else {
    for (std::size_t r = 0; r < nn; ++r) sd[r] = rd[r] = r * c.count;
  }
  std::vector<std::uint64_t> sb(nn), sat(nn), rb(nn), rat(nn);
  std::uint64_t in_total = 0, out_total = 0;
  for (std::size_t r = 0; r < nn; ++r) {
    sb[r] = sc[r] * es;
    sat[r] = sd[r] * es;
    rb[r] = rc[r] * es;
    rat[r] = rd[r] * es;
    in_total = std::max(in_total, sat[r] + sb[r]);
    out_total = std::max(out_total, rat[r] + rb[r]);
  }
  const auto me = static_cast<std::size_t>(g.rank);
  if (sb[me] != rb[me])
    fail(Errc::invalid_argument, g, c,
         "send_counts[" + std::to_string(me) + "] = " + std::to_string(sc[me]) + " differs from recv_counts[" +
             std::to_string(me) + "] = " + std::to_string(rc[me]));
  x.b().require_output_coverage(false);
  x.b().input(0, in_total);
  x.b().output(0, out_total);

  const std::string& name = c.algo.name;
  const std::uint64_t bb = c.count * es;
  bool bruck = false;
  if (name == "bruck") {
    if (v) fail(Errc::unsupported, g, c, "algorithm 'bruck' needs equal block sizes (use 'pairwise' for alltoallv)");
    bruck = true;
  } else if (automatic(name)) {
    bruck = !v && n > 4 && bb <= 256;  // small blocks: log2(n) messages instead of n-1
  } else if (name != "pairwise") {
    fail(Errc::invalid_argument, g, c, "algorithm '" + name + "' unknown (pairwise | bruck)");
  }

  Tracker t;
  const std::vector<NodeId> start = entry(x);
  if (sb[me] > 0) {
    const Region dst = dag::out(0, rat[me], rb[me]);
    t.write(dst, x.b().copy(dag::in(0, sat[me], sb[me]), dst, start));
  }
  patterns::Schedule s;
  if (bruck) {
    x.b().scratch(0, bb * nn);
    BruckKind k(t, x.b(), g.rank, n, bb);
    const std::uint64_t maxm = max_message(
        n, [n](int r, patterns::Schedule& o) { patterns::bruck_alltoall(r, n, o); }, k);
    Emitter e(x, t, geometry(g, c, es, maxm, true), start);
    patterns::bruck_alltoall(g.rank, n, s);
    e.run(s, k);
  } else {
    PairwiseKind k(t, x.b(), sb, sat, rb, rat);
    Emitter e(x, t, geometry(g, c, es, v ? 0 : bb, !v), start);
    patterns::pairwise_alltoall(g.rank, n, s);
    e.run(s, k);
  }
  // Application work in the graph: a compute node per source block that runs
  // as soon as every node writing that block of recv is done (issue 4's hook).
  if (c.on_block) {
    for (std::size_t r = 0; r < nn; ++r) {
      if (rb[r] == 0) continue;
      const auto fn = c.on_block;
      const int src = static_cast<int>(r);
      x.b().on_fragment(dag::out(0, rat[r], rb[r]), [fn, src](const dag::ComputeArgs& a) { fn(src, a.data, a.len); });
    }
  }
  return done(x);
}

namespace {

// ---------------------------------------------------------------- reduce-scatter
// Partials of block b accumulate in scratch at the block's input offset; the
// last reception of this rank's own block reduces straight into recv.
class RsKind : public StepKind {
 public:
  RsKind(Ctx& x, Tracker& t, std::vector<std::uint64_t> bytes, std::vector<std::uint64_t> at, std::size_t final_step)
      : x_(x),
        t_(t),
        bytes_(std::move(bytes)),
        at_(std::move(at)),
        final_step_(final_step),
        in_acc_(bytes_.size(), 0) {}
  std::uint64_t send_bytes(int b) const override { return bytes_[static_cast<std::size_t>(b)]; }
  std::uint64_t recv_bytes(int b) const override { return bytes_[static_cast<std::size_t>(b)]; }
  Region local(int b, std::uint64_t off, std::uint64_t len) const {
    const std::uint64_t o = at_[static_cast<std::size_t>(b)] + off;
    return in_acc_[static_cast<std::size_t>(b)] ? dag::scratch(0, o, len) : dag::in(0, o, len);
  }
  Region source(int b, std::uint64_t off, std::uint64_t len) override { return local(b, off, len); }
  std::vector<NodeId> sink(std::size_t step, const patterns::Step& st, const Region& win, int b, std::uint64_t off,
                           std::uint64_t len, NodeId arrived) override {
    const bool to_out = b == x_.me() && step == final_step_;
    const Region dst = to_out ? dag::out(0, off, len) : dag::scratch(0, at_[static_cast<std::size_t>(b)] + off, len);
    std::vector<NodeId> deps{arrived};
    append(&deps, t_.write_deps(dst));
    NodeId n = dag::kNoNode;
    if (st.action == patterns::RecvAction::copy) {
      n = x_.b().copy(win, dst, deps);
    } else {
      const Region mine = local(b, off, len);
      append(&deps, t_.read_deps(mine));
      n = st.recv_is_left ? x_.reduce(win, mine, dst, deps) : x_.reduce(mine, win, dst, deps);
      t_.read(mine, n);
    }
    t_.write(dst, n);
    return {n};
  }
  void after_step(std::size_t, const patterns::Step&, const std::vector<Seg>& got) override {
    for (const Seg& s : got) in_acc_[static_cast<std::size_t>(s.block)] = 1;
  }

 private:
  Ctx& x_;
  Tracker& t_;
  std::vector<std::uint64_t> bytes_, at_;
  std::size_t final_step_;
  std::vector<char> in_acc_;
};

// Pairwise: every rank sends block j of its input straight to rank j
// (rotated, like the pairwise alltoall) and folds the n contributions to its
// own block in rank order, whatever their arrival order: contributions arrive
// from r-1, r-2, ..., 0 (prepended to P = x_r, accumulated in recv), then from
// n-1, n-2, ..., r+1 (prepended to Q, in scratch); finally recv = P op Q.
class RsPairwiseKind : public StepKind {
 public:
  RsPairwiseKind(Ctx& x, Tracker& t, std::vector<std::uint64_t> bytes, std::vector<std::uint64_t> at)
      : x_(x), t_(t), bytes_(std::move(bytes)), at_(std::move(at)) {}
  std::uint64_t send_bytes(int b) const override { return bytes_[static_cast<std::size_t>(b)]; }
  std::uint64_t recv_bytes(int) const override { return bytes_[static_cast<std::size_t>(x_.me())]; }
  Region source(int b, std::uint64_t off, std::uint64_t len) override {
    return dag::in(0, at_[static_cast<std::size_t>(b)] + off, len);
  }
  Region p_region(std::uint64_t off, std::uint64_t len) const {
    return p_init_ ? dag::out(0, off, len) : dag::in(0, at_[static_cast<std::size_t>(x_.me())] + off, len);
  }
  std::vector<NodeId> sink(std::size_t, const patterns::Step&, const Region& win, int from, std::uint64_t off,
                           std::uint64_t len, NodeId arrived) override {
    const bool lower = from < x_.me();
    const Region dst = lower ? dag::out(0, off, len) : dag::scratch(0, off, len);
    std::vector<NodeId> deps{arrived};
    append(&deps, t_.write_deps(dst));
    NodeId n = dag::kNoNode;
    if (!lower && !q_init_) {
      n = x_.b().copy(win, dst, deps);
    } else {
      const Region right = lower ? p_region(off, len) : dst;
      append(&deps, t_.read_deps(right));
      n = x_.reduce(win, right, dst, deps);
      t_.read(right, n);
    }
    t_.write(dst, n);
    return {n};
  }
  void after_step(std::size_t, const patterns::Step& st, const std::vector<Seg>& got) override {
    if (got.empty()) return;
    if (st.recv_from < x_.me())
      p_init_ = true;
    else
      q_init_ = true;
  }
  // recv = P op Q (or P alone).
  void finish_block(const std::vector<NodeId>& start) {
    const std::uint64_t len = bytes_[static_cast<std::size_t>(x_.me())];
    if (len == 0) return;
    const Region dst = dag::out(0, 0, len);
    const Region p = p_region(0, len);
    std::vector<NodeId> deps = start;
    append(&deps, t_.write_deps(dst));
    append(&deps, t_.read_deps(p));
    if (q_init_) {
      const Region q = dag::scratch(0, 0, len);
      append(&deps, t_.read_deps(q));
      t_.write(dst, x_.reduce(p, q, dst, deps));
    } else if (!p_init_) {
      t_.write(dst, x_.b().copy(p, dst, deps));
    }
  }

 private:
  Ctx& x_;
  Tracker& t_;
  std::vector<std::uint64_t> bytes_, at_;
  bool p_init_ = false;
  bool q_init_ = false;
};

}  // namespace

std::shared_ptr<const dag::Plan> compile_reduce_scatter(const Group& g, const Call& c, int slot) {
  Ctx x(g, c, slot);
  const int n = g.size();
  const auto nn = static_cast<std::size_t>(n);
  const std::size_t es = x.esize();
  if (c.in_place) fail(Errc::unsupported, g, c, "in-place reduce-scatter is not supported");
  if (!c.user_op && dag::reduce_kernel(c.op, c.dtype) == nullptr)
    fail(Errc::unsupported, g, c,
         std::string("argument 'op': ") + dag::to_string(c.op) + " is not defined on " + dag::to_string(c.dtype));
  std::vector<std::size_t> counts(nn, c.count);
  if (c.kind == Kind::reduce_scatter) {
    check_sizes(g, c, c.counts, "counts");
    counts = c.counts;
  }
  const std::vector<std::uint64_t> displs = prefix(counts);
  std::vector<std::uint64_t> bytes(nn), at(nn);
  for (std::size_t r = 0; r < nn; ++r) {
    bytes[r] = counts[r] * es;
    at[r] = displs[r] * es;
  }
  const std::uint64_t in_total = nn == 0 ? 0 : at[nn - 1] + bytes[nn - 1];
  const auto me = static_cast<std::size_t>(g.rank);
  x.b().require_output_coverage(false);
  x.b().input(0, in_total);
  x.b().output(0, bytes[me]);

  const std::string& name = c.algo.name;
  const bool ordered = !x.commutative();
  void (*build)(int, int, patterns::Schedule&) = nullptr;
  std::string algo = name;
  if (automatic(name)) algo = ordered ? "pairwise" : "ring";
  if (algo == "ring")
    build = patterns::ring_reduce_scatter;
  else if (algo == "rh" || algo == "rd" || algo == "halving")
    build = patterns::recursive_halving_reduce_scatter;
  else if (algo != "pairwise")
    fail(Errc::invalid_argument, g, c, "algorithm '" + name + "' unknown (ring | rh | pairwise)");

  Tracker t;
  const std::vector<NodeId> start = entry(x);
  patterns::Schedule s;
  if (build == nullptr) {  // pairwise
    x.b().scratch(0, bytes[me]);
    RsPairwiseKind k(x, t, bytes, at);
    // Pairwise messages carry one destination block: the largest block.
    const std::uint64_t maxm = *std::max_element(bytes.begin(), bytes.end());
    Emitter e(x, t, geometry(g, c, es, maxm, true), start);
    patterns::pairwise_alltoall(g.rank, n, s);
    e.run(s, k);
    k.finish_block(start);
    return done(x);
  }
  build(g.rank, n, s);
  if (ordered && !s.rank_ordered())
    fail(Errc::unsupported, g, c,
         "algorithm '" + algo + "' does not keep rank order; a non-commutative op needs algorithm 'pairwise'");
  // The step of the last reception of this rank's own block (its final value goes straight to recv).
  std::size_t final_step = s.steps().size();
  for (std::size_t i = 0; i < s.steps().size(); ++i)
    for (const patterns::BlockRange& r : s.recv_ranges(s.steps()[i]))
      if (patterns::mod(g.rank - r.first, n) < r.count) final_step = i;
  x.b().scratch(0, in_total);
  RsKind k(x, t, bytes, at, final_step);
  const std::uint64_t maxm = max_message(
      n, [&](int r, patterns::Schedule& o) { build(r, n, o); }, k);
  Emitter e(x, t, geometry(g, c, es, maxm, true), start);
  e.run(s, k);
  if (final_step == s.steps().size() && bytes[me] > 0) {  // own block never received (n == 1)
    const Region src = k.local(g.rank, 0, bytes[me]);
    std::vector<NodeId> deps = start;
    append(&deps, t.read_deps(src));
    x.b().copy(src, dag::out(0, 0, bytes[me]), deps);
  }
  return done(x);
}

}  // namespace strata::coll::cc
