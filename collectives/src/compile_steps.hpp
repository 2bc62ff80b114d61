// The step emitter shared by the symmetric collectives (compile_symmetric.cpp)
// and the schedule-based allreduces (compile_allreduce.cpp): a
// patterns::Schedule compiled to DAG nodes with the window/RTR protocol
// (docs/algorithms.md, "Allgather, alltoall, reduce-scatter"). Not installed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compile_common.hpp"
#include "patterns/schedule.hpp"

namespace strata::coll::cc::steps {

constexpr std::size_t kMaxOutstandingPuts = 128;  // Chaimov et al. throttled at 128
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

inline void append(std::vector<NodeId>* d, const std::vector<NodeId>& more) {
  d->insert(d->end(), more.begin(), more.end());
}

// Copies a received window fragment to its place in recv, after every earlier
// access to that range (tracked), and records the write.
inline NodeId copy_out(Tracker& t, PlanBuilder& b, const Region& win, const Region& dst, NodeId arrived) {
  std::vector<NodeId> deps{arrived};
  append(&deps, t.write_deps(dst));
  const NodeId n = b.copy(win, dst, deps);
  t.write(dst, n);
  return n;
}

// Lands a received window fragment in @p dst as the step says: a copy, or a
// reduction with this rank's @p mine (operand order from the step), after
// every earlier access to the ranges (tracked); records the accesses.
inline NodeId land(Ctx& x, Tracker& t, const patterns::Step& st, const Region& win, const Region& mine,
                   const Region& dst, NodeId arrived) {
  if (st.action == patterns::RecvAction::copy) return copy_out(t, x.b(), win, dst, arrived);
  std::vector<NodeId> deps{arrived};
  append(&deps, t.write_deps(dst));
  append(&deps, t.read_deps(mine));
  const NodeId n = st.recv_is_left ? x.reduce(win, mine, dst, deps) : x.reduce(mine, win, dst, deps);
  t.read(mine, n);
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
  bool exact = false;  // stride >= every message's fragment count (region indices unique per (step, f))
};

// Fragment / region size for messages of at most `max_msg` bytes (0 = unknown).
// `large` (allgather / alltoall): the default fragment of messages of at least
// large.first bytes is large.second bytes instead of kDefaultFragment.
inline Geometry geometry(const Group& g, const Call& c, std::size_t esize, std::uint64_t max_msg, bool known,
                         std::pair<std::uint64_t, std::uint64_t> large = {0, 0}) {
  Geometry geo;
  std::uint64_t cap = g.slot_bytes / 2;
  cap -= cap % esize;
  if (cap == 0) fail(Errc::invalid_argument, g, c, "window slot too small (STRATA_SLOT_BYTES)");
  auto align_up = [esize](std::uint64_t v) { return (v + esize - 1) / esize * esize; };
  std::uint64_t z = 0;
  const std::uint64_t kDefaultFragment = default_fragment(g);  // the tuning table (compile_common.hpp)
  if (g.spans_hosts()) large = {0, 0};                         // net_pipeline_fragment for every message
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
  } else if (known && large.second > 0 && max_msg >= large.first) {
    z = std::min<std::uint64_t>(large.second, cap);
    z -= z % esize;
  } else {
    z = std::min<std::uint64_t>(kDefaultFragment, cap);
    z -= z % esize;
  }
  z = std::min(z, cap);
  geo.z = std::max<std::uint64_t>(z, esize);
  geo.regions = std::max<std::uint64_t>(1, std::min<std::uint64_t>(g.slot_bytes / geo.z, kMaxRegions));
  geo.stride = known ? std::max<std::uint64_t>(1, (max_msg + geo.z - 1) / geo.z) : 1;
  geo.exact = known;
  return geo;
}

inline std::vector<Seg> segments(const patterns::Schedule& s, const patterns::Step& st, bool send, const StepKind& k) {
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

inline std::vector<Piece> pieces(const std::vector<Seg>& segs, std::uint64_t begin, std::uint64_t end) {
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

inline std::uint64_t total(const std::vector<Seg>& segs) {
  std::uint64_t t = 0;
  for (const Seg& s : segs) t += s.len;
  return t;
}

// Emits the schedule's steps (sends before receives within a step).
class Emitter {
 public:
  Emitter(Ctx& x, Tracker& t, const Geometry& geo, std::vector<NodeId> start)
      : x_(x), t_(t), geo_(geo), start_(std::move(start)), last_(geo.regions) {}

  // At most `k` puts of this emitter in flight (put j waits for put j - k); 0 = kMaxOutstandingPuts.
  void limit_outstanding(std::size_t k) { max_out_ = k == 0 ? kMaxOutstandingPuts : k; }

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
          const NodeId ready = x_.rtr_waits({st.send_to}, data + 1, start_, first_use(si, f))[0];
          const std::uint64_t fend = std::min(bytes, (f + 1) * geo_.z);
          for (const Piece& p : pieces(segs, f * geo_.z, fend)) {
            const Region src = k.source(segs[p.seg].block, p.off, p.len);
            std::vector<NodeId> deps{ready};
            append(&deps, t_.read_deps(src));
            if (puts_.size() >= max_out_) deps.push_back(puts_[puts_.size() - max_out_]);
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
          x_.rtr(st.recv_from, data + 1, rdeps, first_use(si, f));
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
  // Whether (step, f) is certainly the first use of its region in this
  // instance, on the receiver as on the sender: with an exact stride (every
  // message's size known) region indices step * stride + f are distinct for
  // distinct (step, f), and those below `regions` map to distinct regions (a
  // sufficient condition both sides compute alike). Unknown sizes (alltoallv):
  // never (indices of different steps may share a region).
  bool first_use(std::size_t step, std::uint64_t f) const {
    return geo_.exact && static_cast<std::uint64_t>(step) * geo_.stride + f < geo_.regions;
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
  std::size_t max_out_ = kMaxOutstandingPuts;
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

inline std::vector<std::uint64_t> prefix(const std::vector<std::size_t>& counts) {
  std::vector<std::uint64_t> d(counts.size(), 0);
  std::uint64_t acc = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    d[i] = acc;
    acc += counts[i];
  }
  return d;
}

inline std::shared_ptr<const dag::Plan> done(Ctx& x) {
  finish(x);
  if (x.b().size() == 0) x.b().nop();
  return x.build();
}

// The hosts of the group: members per host ordered by communicator rank, hosts
// ordered by their lowest rank (its leader).
struct Hosts {
  std::vector<std::vector<int>> members;
  std::vector<int> host_of, local_of;
  [[nodiscard]] int leaders() const { return static_cast<int>(members.size()); }
  [[nodiscard]] std::size_t widest() const {
    std::size_t w = 1;
    for (const auto& m : members) w = std::max(w, m.size());
    return w;
  }
  // Every host holds the same number of members, at least two (the host single-copy plans).
  [[nodiscard]] bool even() const {
    const std::size_t l = members.front().size();
    if (l < 2) return false;
    for (const auto& m : members)
      if (m.size() != l) return false;
    return true;
  }
  // The members of @p rank's host but @p rank, in rank order.
  [[nodiscard]] std::vector<int> others_on_host(int rank) const {
    std::vector<int> o;
    for (const int r : members[static_cast<std::size_t>(host_of[static_cast<std::size_t>(rank)])])
      if (r != rank) o.push_back(r);
    return o;
  }
  // Every host's members are consecutive ranks (so host-then-leader order is rank order).
  [[nodiscard]] bool contiguous() const {
    for (const auto& m : members)
      if (m.back() - m.front() + 1 != static_cast<int>(m.size())) return false;
    return true;
  }
};

inline Hosts hosts_of(const Group& g) {
  Hosts h;
  const int n = g.size();
  std::map<int, int> index;  // host id -> host index (first appearance in rank order)
  h.host_of.assign(static_cast<std::size_t>(n), 0);
  h.local_of.assign(static_cast<std::size_t>(n), 0);
  for (int r = 0; r < n; ++r) {
    const int id = g.host[static_cast<std::size_t>(r)];
    auto it = index.find(id);
    if (it == index.end()) {
      it = index.emplace(id, static_cast<int>(h.members.size())).first;
      h.members.emplace_back();
    }
    auto& m = h.members[static_cast<std::size_t>(it->second)];
    h.host_of[static_cast<std::size_t>(r)] = it->second;
    h.local_of[static_cast<std::size_t>(r)] = static_cast<int>(m.size());
    m.push_back(r);
  }
  return h;
}

// Appends the steps of `in` to `out` with peers mapped by `real` (index ->
// communicator rank); `whole` maps the single block of a BlockSpace::whole
// schedule to every block [0, out.num_blocks()). Block indices stay as they are.
inline void append_steps(patterns::Schedule& out, const patterns::Schedule& in, const std::function<int(int)>& real,
                         bool whole) {
  for (const patterns::Step& st : in.steps()) {
    patterns::Step& d = out.add_step();
    d.send_to = st.send_to >= 0 ? real(st.send_to) : -1;
    d.recv_from = st.recv_from >= 0 ? real(st.recv_from) : -1;
    d.action = st.action;
    d.recv_is_left = st.recv_is_left;
    for (const patterns::BlockRange& r : in.send_ranges(st))
      out.add_send(whole ? 0 : r.first, whole ? out.num_blocks() : r.count);
    for (const patterns::BlockRange& r : in.recv_ranges(st))
      out.add_recv(whole ? 0 : r.first, whole ? out.num_blocks() : r.count);
  }
}

inline int log2_ceil(std::size_t v) {
  int k = 0;
  while ((std::size_t{1} << k) < v) ++k;
  return k;
}

}  // namespace strata::coll::cc::steps
