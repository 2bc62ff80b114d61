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
// A rank keeps at most kMaxOutstandingPuts puts in flight (Chaimov et al.; for
// alltoall(v) Algorithm::max_outstanding, STRATA_ALLTOALL_MAX_OUTSTANDING).
// The emitter itself lives in compile_steps.hpp (shared with the schedule
// allreduces of compile_allreduce.cpp). Besides the step schedules: the pull
// alltoall (emit_pull), the hierarchical and NUMA-spreading allgathers, and
// the in-place forms (the send side read from a copy of recv in scratch 1).
// Large blocks (tuning table sym_large_*, sym_stream_min_bytes): 128 KiB
// fragments, the own block copied per fragment after the matching puts, and
// non-temporal stores into recv when the working set exceeds the caches.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compile_common.hpp"
#include "compile_steps.hpp"
#include "patterns/schedule.hpp"
#include "strata/collectives/registry.hpp"

namespace strata::coll::cc {

namespace {

using namespace steps;  // NOLINT: the step emitter

// ---------------------------------------------------------------- large blocks
// Messages of at least sym_large_message bytes travel in sym_large_fragment
// fragments (the tuning table, compile_common.hpp; docs/algorithms.md "Large
// blocks").
std::pair<std::uint64_t, std::uint64_t> sym_large(const Group& g) {
  return {tuning(g).sym_large_message, tuning(g).sym_large_fragment};
}

// The local copy of this rank's own block (src -> dst, `len` bytes) when it is
// large, cut into fragments of `z` bytes, each after the puts that read the
// send bytes `partner(off, flen)` names (allgather: the same bytes, which the
// copy then reads from the cache; alltoall: the same offsets of the first
// message). One copy of the whole block at the start would run as a separate
// task, evict what the puts are about to read, and compete with them for the
// core; the fragments interleave with the exchange, in the threads that
// complete the puts. `streaming`: non-temporal stores (PlanBuilder::streaming).
void own_copy(Ctx& x, Tracker& t, const Region& src, const Region& dst, std::uint64_t len, std::uint64_t z,
              const std::vector<NodeId>& start, bool streaming,
              const std::function<Region(std::uint64_t, std::uint64_t)>& partner) {
  PlanBuilder& b = x.b();
  for (std::uint64_t off = 0; off < len; off += z) {
    const std::uint64_t flen = std::min(z, len - off);
    const Region s{src.buf, src.offset + off, flen};
    const Region d{dst.buf, dst.offset + off, flen};
    std::vector<NodeId> deps = start;
    append(&deps, t.read_deps(s));
    append(&deps, t.write_deps(d));
    const Region pr = partner(off, flen);
    if (pr.len > 0) append(&deps, t.write_deps(pr));  // every access to it so far: the puts that read it
    const NodeId n = b.copy(s, d, deps);
    if (streaming) b.streaming(n);
    t.read(s, n);
    t.write(d, n);
  }
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
    const NodeId n = copy_out(t_, b_, win, dst, arrived);
    if (streaming) b_.streaming(n);
    return {n};
  }
  bool streaming = false;  // copies into recv bypass the caches

 private:
  Tracker& t_;
  PlanBuilder& b_;
  std::vector<std::uint64_t> bytes_, at_;
  int me_;
  bool in_place_;
};

// Adds blocks `ranks` (ascending) to the send or receive side of the last step, merging runs.
void add_blocks(patterns::Schedule& s, const std::vector<int>& ranks, bool send) {
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i + 1;
    while (j < ranks.size() && ranks[j] == ranks[j - 1] + 1) ++j;
    if (send)
      s.add_send(ranks[i], static_cast<int>(j - i));
    else
      s.add_recv(ranks[i], static_cast<int>(j - i));
    i = j;
  }
}

// Communicator ranks of local indices [lo, hi) of a host, ascending.
std::vector<int> local_range(const std::vector<int>& mem, int lo, int hi) {
  std::vector<int> r;
  for (int i = lo; i < std::min(hi, static_cast<int>(mem.size())); ++i) r.push_back(mem[static_cast<std::size_t>(i)]);
  std::sort(r.begin(), r.end());
  return r;
}

// Every rank except `skip` (ascending).
std::vector<int> all_but(int n, const std::vector<int>& skip) {
  std::vector<char> no(static_cast<std::size_t>(n), 0);
  for (int r : skip) no[static_cast<std::size_t>(r)] = 1;
  std::vector<int> out;
  for (int r = 0; r < n; ++r)
    if (!no[static_cast<std::size_t>(r)]) out.push_back(r);
  return out;
}

// "hier": binomial gather to the host leaders (local index 0), a ring among
// the leaders (each step forwards one host's blocks), binomial broadcast of
// everything a member does not hold yet.
void hier_allgather(const Hosts& h, int rank, int n, patterns::Schedule& out) {
  out.reset(rank, n, n, patterns::BlockSpace::rank_blocks, true);
  const int hi = h.host_of[static_cast<std::size_t>(rank)];
  const auto& mem = h.members[static_cast<std::size_t>(hi)];
  const int hs = static_cast<int>(mem.size());
  const int i = h.local_of[static_cast<std::size_t>(rank)];
  const int k = log2_ceil(h.widest());
  for (int s = 0; s < k; ++s) {
    const int d = 1 << s;
    patterns::Step& st = out.add_step();
    if (i % (2 * d) == d) {
      st.send_to = mem[static_cast<std::size_t>(i - d)];
      add_blocks(out, local_range(mem, i, i + d), true);
    } else if (i % (2 * d) == 0 && i + d < hs) {
      st.recv_from = mem[static_cast<std::size_t>(i + d)];
      add_blocks(out, local_range(mem, i + d, i + 2 * d), false);
    }
  }
  const int nl = h.leaders();
  for (int s = 0; s + 1 < nl; ++s) {
    patterns::Step& st = out.add_step();
    if (i != 0) continue;
    const int to = patterns::mod(hi + 1, nl), from = patterns::mod(hi - 1, nl);
    st.send_to = h.members[static_cast<std::size_t>(to)].front();
    st.recv_from = h.members[static_cast<std::size_t>(from)].front();
    auto host_blocks = [&h](int j) {
      std::vector<int> r = h.members[static_cast<std::size_t>(j)];
      std::sort(r.begin(), r.end());
      return r;
    };
    add_blocks(out, host_blocks(patterns::mod(hi - s, nl)), true);
    add_blocks(out, host_blocks(patterns::mod(hi - s - 1, nl)), false);
  }
  for (int s = k - 1; s >= 0; --s) {
    const int d = 1 << s;
    patterns::Step& st = out.add_step();
    if (i % (2 * d) == 0 && i + d < hs) {
      st.send_to = mem[static_cast<std::size_t>(i + d)];
      add_blocks(out, all_but(n, local_range(mem, i + d, i + 2 * d)), true);
    } else if (i % (2 * d) == d) {
      st.recv_from = mem[static_cast<std::size_t>(i - d)];
      add_blocks(out, all_but(n, local_range(mem, i, i + d)), false);
    }
  }
}

// "numa-ring": ring order that keeps hosts together and, inside a host, takes
// one rank of each NUMA region in turn, so consecutive ranks of the ring sit in
// different NUMA regions whatever the rank placement.
std::vector<int> numa_ring_order(const Group& g) {
  const Hosts h = hosts_of(g);
  std::vector<int> order;
  for (const auto& mem : h.members) {
    std::vector<std::vector<int>> by_numa;
    std::map<int, std::size_t> idx;
    for (int r : mem) {
      const int nid = g.numa[static_cast<std::size_t>(r)];
      auto it = idx.find(nid);
      if (it == idx.end()) {
        it = idx.emplace(nid, by_numa.size()).first;
        by_numa.emplace_back();
      }
      by_numa[it->second].push_back(r);
    }
    for (std::size_t j = 0;; ++j) {  // round robin over the NUMA regions
      bool any = false;
      for (const auto& v : by_numa)
        if (j < v.size()) {
          order.push_back(v[j]);
          any = true;
        }
      if (!any) break;
    }
  }
  return order;
}

// Ring allgather over the positions of `order` (order[p] = rank at position p).
void permuted_ring_allgather(const std::vector<int>& order, int rank, int n, patterns::Schedule& out) {
  out.reset(rank, n, n, patterns::BlockSpace::rank_blocks, true);
  const int p = static_cast<int>(std::find(order.begin(), order.end(), rank) - order.begin());
  auto at = [&order, n](int q) { return order[static_cast<std::size_t>(patterns::mod(q, n))]; };
  for (int s = 0; s < n - 1; ++s) {
    patterns::Step& st = out.add_step();
    st.send_to = at(p + 1);
    st.recv_from = at(p - 1);
    out.add_send(at(p - s), 1);
    out.add_recv(at(p - s - 1), 1);
  }
}

}  // namespace

std::shared_ptr<const dag::Plan> compile_allgather(const Group& g, const Call& c, int slot, const AlgorithmRow& row) {
  Ctx x(g, c, slot);
  const int n = g.size();
  const std::size_t es = x.esize();
  std::vector<std::size_t> counts(static_cast<std::size_t>(n), c.count), displs(static_cast<std::size_t>(n));
  if (c.kind == Kind::allgatherv) {
    counts = c.counts;  // checked once (check_call() or the engine)
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

  x.b().algorithm(row.name);
  std::function<void(int, patterns::Schedule&)> build;
  switch (row.variant) {
    case Variant::rd:
      build = [n](int r, patterns::Schedule& s) { patterns::recursive_doubling_allgather(r, n, s); };
      break;
    case Variant::bruck:
      build = [n](int r, patterns::Schedule& s) { patterns::bruck_allgather(r, n, s); };
      break;
    case Variant::hier:
      build = [h = hosts_of(g), n](int r, patterns::Schedule& s) { hier_allgather(h, r, n, s); };
      break;
    case Variant::numa_ring:
      build = [order = numa_ring_order(g), n](int r, patterns::Schedule& s) {
        permuted_ring_allgather(order, r, n, s);
      };
      break;
    default:  // Variant::ring
      build = [n](int r, patterns::Schedule& s) { patterns::ring_allgather(r, n, s); };
      break;
  }

  Tracker t;
  AllgatherKind k(t, x.b(), bytes, at, g.rank, c.in_place);
  const std::uint64_t send_total = c.in_place ? 0 : bytes[me];
  k.streaming = send_total + recv_total >= tuning(g).sym_stream_min_bytes;
  const std::uint64_t maxm = max_message(n, build, k);
  const Geometry geo = geometry(g, c, es, maxm, true, sym_large(g));
  const std::vector<NodeId> start = entry(x);
  const bool split = !c.in_place && bytes[me] >= tuning(g).sym_large_message;
  if (!c.in_place && bytes[me] > 0 && !split) {
    const Region dst = dag::out(0, at[me], bytes[me]);
    t.write(dst, x.b().copy(dag::in(0, 0, bytes[me]), dst, start));
  }
  patterns::Schedule s;
  build(g.rank, s);
  Emitter e(x, t, geo, start);
  e.run(s, k);
  if (split)
    own_copy(x, t, dag::in(0, 0, bytes[me]), dag::out(0, at[me], bytes[me]), bytes[me],
             std::max(geo.z, tuning(g).sym_large_fragment), start, k.streaming,
             [](std::uint64_t off, std::uint64_t len) { return dag::in(0, off, len); });
  return done(x);
}

bool host_single_copy_allgather(const Group& g, const Call& c, std::uint64_t block) {
  if ((c.kind != Kind::allgather && c.kind != Kind::allgatherv) || c.shared_buffers || !host_single_copy_eligible(g, c))
    return false;
  const Tuning& t = tuning(g);
  if (t.sym_single_copy_max_bytes == 0 || block < t.sym_single_copy_min_bytes || block > t.sym_single_copy_max_bytes)
    return false;
  return hosts_of(g).even();
}

// Allgather(v) across hosts with single copy inside each host
// ("hier-single-copy"; docs/algorithms.md, "Single copy across hosts"). H
// hosts of L members each; member i of host j is rank members[j][i]; column i
// = member i of every host. Every rank publishes its send buffer (region 0;
// none in place) and its receive buffer (region 1).
//  1. Column: the H members of column i run a ring allgather of their own
//     blocks over the window protocol (compile_steps.hpp's emitter, blocks in
//     host order): each received block is copied out of the window straight
//     to its final offset in recv, and once all of block j is there the
//     member signals READY(i, j) to the L - 1 other members of its host.
//  2. Host: each member reads what it still lacks out of its same-host
//     members (rotated: the next member first): member i's own block out of
//     its send buffer (in place: its recv) as soon as it is published, and
//     each of the H - 1 blocks member i gathered across hosts out of its recv
//     after READY(i, j) (read_peer, one copy each).
// After its reads a rank raises its reads-done word; it ends after every
// same-host member's (its buffers stay valid while they are read).
// Per rank (blocks of B bytes): (H - 1) B sent and received across hosts, each
// received block copied once out of the window; (L - 1) H B read_peer'd from
// the host's members; B own copy (not in place). No same-host window traffic.
std::shared_ptr<const dag::Plan> compile_allgather_host_single(const Group& g, const Call& c, int slot,
                                                               const AlgorithmRow& row) {
  Ctx x(g, c, slot);
  const int n = g.size();
  const std::size_t es = x.esize();
  require_host_single_copy(g, c, row);
  const Hosts h = hosts_of(g);
  if (!h.even())
    fail(Errc::unsupported, g, c, "algorithm '" + row.name + "' needs the same number (>= 2) of members on every host");
  std::vector<std::uint64_t> bytes(static_cast<std::size_t>(n)), at(static_cast<std::size_t>(n));
  std::uint64_t recv_total = 0, widest = 0;
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    bytes[ur] = (c.kind == Kind::allgatherv ? c.counts[ur] : c.count) * es;  // checked (check_call() or the engine)
    at[ur] = (c.kind == Kind::allgatherv ? c.displs[ur] : ur * c.count) * es;
    recv_total = std::max(recv_total, at[ur] + bytes[ur]);
    widest = std::max(widest, bytes[ur]);
  }
  const auto me = static_cast<std::size_t>(g.rank);
  x.b().require_output_coverage(false);
  if (!c.in_place) x.b().input(0, bytes[me]);
  x.b().output(0, recv_total);
  x.b().algorithm(row.name);
  const int hosts = h.leaders();
  const int hi = h.host_of[me];
  const int li = h.local_of[me];
  const std::vector<int>& local = h.members[static_cast<std::size_t>(hi)];
  const int nl = static_cast<int>(local.size());
  const auto member = [&h](int j, int i) {
    return h.members[static_cast<std::size_t>(j)][static_cast<std::size_t>(i)];
  };
  // Column schedule of rank r: the ring allgather among the hosts, peers and
  // blocks indexed by host (block j = the block of r's column member on host j).
  auto build = [&h, n, hosts](int r, patterns::Schedule& s) {
    const int col = h.local_of[static_cast<std::size_t>(r)];
    patterns::Schedule ring;
    patterns::ring_allgather(h.host_of[static_cast<std::size_t>(r)], hosts, ring);
    s.reset(r, n, hosts, patterns::BlockSpace::rank_blocks, true);
    append_steps(
        s, ring, [&h, col](int q) { return h.members[static_cast<std::size_t>(q)][static_cast<std::size_t>(col)]; },
        false);
  };
  std::vector<std::uint64_t> cb(static_cast<std::size_t>(hosts)), cat(static_cast<std::size_t>(hosts));
  for (int j = 0; j < hosts; ++j) {
    const auto q = static_cast<std::size_t>(member(j, li));
    cb[static_cast<std::size_t>(j)] = bytes[q];
    cat[static_cast<std::size_t>(j)] = at[q];
  }
  // Every message of the ring is one block: one geometry for every column,
  // so that the READY slots past the emitter's agree between the columns.
  const Geometry geo = geometry(g, c, es, widest, true);
  patterns::Schedule s;
  build(g.rank, s);
  const std::uint64_t ready_base = 2 * geo.stride * static_cast<std::uint64_t>(s.steps().size());
  if (ready_base + static_cast<std::uint64_t>(nl) * static_cast<std::uint64_t>(hosts) >= kDataSlotLimit)
    fail(Errc::unsupported, g, c, "too many fragments for algorithm '" + row.name + "'; raise the fragment size");
  // READY(i, j) on the reader: block j of column i is in member i's recv.
  const auto ready_slot = [&](int i, int j) {
    return static_cast<std::uint32_t>(ready_base + static_cast<std::uint64_t>(i) * static_cast<std::uint64_t>(hosts) +
                                      static_cast<std::uint64_t>(j));
  };
  // Hosts in the order their column blocks arrive (the same for every member of this host).
  std::vector<int> arrivals;
  for (const patterns::Step& st : s.steps())
    for (const patterns::BlockRange& r : s.recv_ranges(st))
      for (int b = r.first; b < r.first + r.count; ++b) arrivals.push_back(b);

  const std::uint32_t w = publication_record(x);
  const std::vector<NodeId> start = entry(x);
  const NodeId pub = x.b().publish(w, !c.in_place && bytes[me] > 0 ? dag::in(0, 0, bytes[me]) : Region{},
                                   recv_total > 0 ? dag::out(0, 0, recv_total) : Region{}, start);
  Tracker t;
  if (!c.in_place && bytes[me] > 0) {
    const Region dst = dag::out(0, at[me], bytes[me]);
    t.write(dst, x.b().copy(dag::in(0, 0, bytes[me]), dst, start));
  }
  // 1. The column's allgather; READY(li, j) to the host's other members once block j landed.
  AllgatherKind k(t, x.b(), cb, cat, hi, c.in_place);
  Emitter e(x, t, geo, start);
  e.run(s, k);
  const std::vector<int> peers = h.others_on_host(g.rank);
  for (const int j : arrivals) {
    const auto uj = static_cast<std::size_t>(j);
    if (cb[uj] == 0) continue;
    const std::vector<NodeId> landed = t.write_deps(dag::out(0, cat[uj], cb[uj]));
    for (const int r : peers) x.b().signal(x.world(r), ready_slot(li, j), landed);
  }
  // 2. The other columns' blocks out of their same-host members' buffers.
  const std::function<NodeId(int)> published = publications(x, w, start);
  std::vector<NodeId> reads;
  for (int d = 1; d < nl; ++d) {  // rotated: the next member first, its own block before the gathered ones
    const int i = (li + d) % nl;
    const int r = local[static_cast<std::size_t>(i)];
    const auto ur = static_cast<std::size_t>(r);
    x.b().expect_signals_from(x.world(r));
    if (bytes[ur] > 0)
      reads.push_back(x.b().read_peer(x.world(r), w, c.in_place ? 1 : 0, c.in_place ? at[ur] : 0,
                                      dag::out(0, at[ur], bytes[ur]), {published(r)}));
    for (const int j : arrivals) {
      const auto q = static_cast<std::size_t>(member(j, i));
      if (bytes[q] == 0) continue;
      const NodeId ready = x.b().wait(ready_slot(i, j), 1, start);
      reads.push_back(x.b().read_peer(x.world(r), w, 1, at[q], dag::out(0, at[q], bytes[q]), {published(r), ready}));
    }
  }
  // Reads-done ("done with your buffers"); end after every same-host member's.
  x.b().flag_set(w + 1, reads.empty() ? std::vector<NodeId>{pub} : reads);
  wait_readers(x, peers, pub);
  return done(x);
}

namespace {

// ---------------------------------------------------------------- alltoall(v)
// The send side of an alltoall(v): the user's send buffer, or (in place) the
// copy of the receive buffer taken at the start (scratch 1).
Region send_region(bool in_place, std::uint64_t off, std::uint64_t len) {
  return in_place ? dag::scratch(1, off, len) : dag::in(0, off, len);
}

// Pull alltoall(v) (receiver-reading): in rotated order (step s = 1..n-1 to
// rank r+s), the sender stages each fragment of its block for r+s into a
// region of its own window and signals READY (slot 2 (f n + s) on the
// receiver); the receiver gets the fragment from the sender's window straight
// into recv and signals DONE (slot 2 (f n + s) + 1 on the sender), which frees
// the region for the next fragment that maps to it. At most `max_out` gets in
// flight per rank. One copy on each side, no RTR round trip before the data.
void emit_pull(Ctx& x, Tracker& t, const Geometry& geo, const std::vector<NodeId>& start, bool in_place,
               const std::vector<std::uint64_t>& sb, const std::vector<std::uint64_t>& sat,
               const std::vector<std::uint64_t>& rb, const std::vector<std::uint64_t>& rat, std::size_t max_out) {
  PlanBuilder& b = x.b();
  const int n = x.g().size();
  const int me = x.me();
  const auto nn = static_cast<std::uint64_t>(n);
  auto slot = [&](int s, std::uint64_t f) {
    const std::uint64_t v = 2 * (f * nn + static_cast<std::uint64_t>(s));
    if (v + 1 >= kDataSlotLimit)
      fail(Errc::unsupported, x.g(), x.c(),
           "too many fragments (" + std::to_string(f + 1) + "); raise the fragment size");
    return static_cast<std::uint32_t>(v);
  };
  std::vector<NodeId> freed(geo.regions, dag::kNoNode);  // per region: DONE of its last fragment
  std::vector<NodeId> gets;
  for (int s = 1; s < n; ++s) {
    // Send side: stage for `to`.
    const int to = patterns::mod(me + s, n);
    const std::uint64_t sbytes = sb[static_cast<std::size_t>(to)];
    for (std::uint64_t f = 0; f * geo.z < sbytes; ++f) {
      const std::uint64_t len = std::min(geo.z, sbytes - f * geo.z);
      const std::uint64_t reg = (static_cast<std::uint64_t>(s) * geo.stride + f) % geo.regions;
      const Region src = send_region(in_place, sat[static_cast<std::size_t>(to)] + f * geo.z, len);
      const Region win = x.my_win(reg * geo.z, len);
      std::vector<NodeId> deps = start;
      if (freed[reg] != dag::kNoNode) deps.push_back(freed[reg]);
      append(&deps, t.read_deps(src));
      const NodeId staged = b.copy(src, win, deps);
      t.read(src, staged);
      b.signal(x.world(to), slot(s, f), {staged});
      b.expect_signals_from(x.world(to));
      freed[reg] = b.wait(slot(s, f) + 1, 1, {staged});
    }
    // Receive side: pull from `from`.
    const int from = patterns::mod(me - s, n);
    const std::uint64_t rbytes = rb[static_cast<std::size_t>(from)];
    for (std::uint64_t f = 0; f * geo.z < rbytes; ++f) {
      const std::uint64_t len = std::min(geo.z, rbytes - f * geo.z);
      const std::uint64_t reg = (static_cast<std::uint64_t>(s) * geo.stride + f) % geo.regions;
      b.expect_signals_from(x.world(from));
      std::vector<NodeId> deps = start;
      deps.push_back(b.wait(slot(s, f), 1, start));
      const Region dst = dag::out(0, rat[static_cast<std::size_t>(from)] + f * geo.z, len);
      append(&deps, t.write_deps(dst));
      if (gets.size() >= max_out) deps.push_back(gets[gets.size() - max_out]);
      const NodeId got = b.get(x.world(from), x.peer_win(from, reg * geo.z, len), dst, deps);
      t.write(dst, got);
      gets.push_back(got);
      b.signal(x.world(from), slot(s, f) + 1, {got});
    }
  }
}

class PairwiseKind : public StepKind {
 public:
  PairwiseKind(Tracker& t, PlanBuilder& b, std::vector<std::uint64_t> sb, std::vector<std::uint64_t> sat,
               std::vector<std::uint64_t> rb, std::vector<std::uint64_t> rat, bool in_place)
      : t_(t),
        b_(b),
        sb_(std::move(sb)),
        sat_(std::move(sat)),
        rb_(std::move(rb)),
        rat_(std::move(rat)),
        in_place_(in_place) {}
  std::uint64_t send_bytes(int b) const override { return sb_[static_cast<std::size_t>(b)]; }
  std::uint64_t recv_bytes(int b) const override { return rb_[static_cast<std::size_t>(b)]; }
  Region source(int b, std::uint64_t off, std::uint64_t len) override {
    return send_region(in_place_, sat_[static_cast<std::size_t>(b)] + off, len);
  }
  std::vector<NodeId> sink(std::size_t, const patterns::Step&, const Region& win, int b, std::uint64_t off,
                           std::uint64_t len, NodeId arrived) override {
    const Region dst = dag::out(0, rat_[static_cast<std::size_t>(b)] + off, len);
    const NodeId n = copy_out(t_, b_, win, dst, arrived);
    if (streaming) b_.streaming(n);
    return {n};
  }
  bool streaming = false;  // copies into recv bypass the caches

 private:
  Tracker& t_;
  PlanBuilder& b_;
  std::vector<std::uint64_t> sb_, sat_, rb_, rat_;
  bool in_place_;
};

// Bruck over positions: position i of rank r starts as the send block for r+i
// and ends as the receive block from r-i. A position received for the last
// time (its highest set bit) lands in recv; earlier receptions in scratch.
class BruckKind : public StepKind {
 public:
  BruckKind(Tracker& t, PlanBuilder& b, int me, int n, std::uint64_t bb, bool in_place)
      : t_(t), b_(b), me_(me), n_(n), bb_(bb), in_place_(in_place), in_scratch_(static_cast<std::size_t>(n), 0) {}
  std::uint64_t send_bytes(int) const override { return bb_; }
  std::uint64_t recv_bytes(int) const override { return bb_; }
  Region source(int i, std::uint64_t off, std::uint64_t len) override {
    if (in_scratch_[static_cast<std::size_t>(i)])
      return dag::scratch(0, static_cast<std::uint64_t>(i) * bb_ + off, len);
    return send_region(in_place_, static_cast<std::uint64_t>(patterns::mod(me_ + i, n_)) * bb_ + off, len);
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
  bool in_place_;
  std::vector<char> in_scratch_;
};

}  // namespace

// Over ~80 lines: the three schedules share the layout, the in-place copy and the own-block split.
std::shared_ptr<const dag::Plan> compile_alltoall(const Group& g, const Call& c, int slot, const AlgorithmRow& row) {
  Ctx x(g, c, slot);
  const int n = g.size();
  const auto nn = static_cast<std::size_t>(n);
  const std::size_t es = x.esize();
  std::vector<std::size_t> sc(nn, c.count), sd(nn), rc(nn, c.count), rd(nn);
  const bool v = c.kind == Kind::alltoallv;
  if (v) {
    sc = c.counts;  // checked once (check_call() or the engine)
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
  x.b().require_output_coverage(false);
  if (!c.in_place) x.b().input(0, in_total);
  x.b().output(0, out_total);

  const std::uint64_t bb = c.count * es;
  x.b().algorithm(row.name);
  const bool bruck = row.variant == Variant::bruck;
  if (bruck && v)
    fail(Errc::unsupported, g, c, "algorithm 'bruck' needs equal block sizes (use 'pairwise' for alltoallv)");
  const std::size_t max_out = c.algo.max_outstanding == 0 ? kMaxOutstandingPuts : c.algo.max_outstanding;

  Tracker t;
  const std::vector<NodeId> start = entry(x);
  if (c.in_place && out_total > 0) {  // the send side is a copy of recv taken before anything lands
    x.b().scratch(1, out_total);
    const Region whole = dag::out(0, 0, out_total);
    const Region copy = dag::scratch(1, 0, out_total);
    const NodeId n0 = x.b().copy(whole, copy, start);
    t.read(whole, n0);
    t.write(copy, n0);
  }
  const bool split = !c.in_place && !bruck && sb[me] >= tuning(g).sym_large_message;
  if (!c.in_place && sb[me] > 0 && !split) {
    const Region dst = dag::out(0, rat[me], rb[me]);
    t.write(dst, x.b().copy(dag::in(0, sat[me], sb[me]), dst, start));
  }
  patterns::Schedule s;
  if (bruck) {
    x.b().scratch(0, bb * nn);
    BruckKind k(t, x.b(), g.rank, n, bb, c.in_place);
    const std::uint64_t maxm = max_message(
        n, [n](int r, patterns::Schedule& o) { patterns::bruck_alltoall(r, n, o); }, k);
    Emitter e(x, t, geometry(g, c, es, maxm, true), start);
    e.limit_outstanding(max_out);
    patterns::bruck_alltoall(g.rank, n, s);
    e.run(s, k);
  } else {
    const Geometry geo = geometry(g, c, es, v ? 0 : bb, !v, sym_large(g));
    const bool stream = in_total + out_total >= tuning(g).sym_stream_min_bytes;
    if (row.variant == Variant::pull) {
      emit_pull(x, t, geo, start, c.in_place, sb, sat, rb, rat, max_out);
    } else {
      PairwiseKind k(t, x.b(), sb, sat, rb, rat, c.in_place);
      k.streaming = stream;
      Emitter e(x, t, geo, start);
      e.limit_outstanding(max_out);
      patterns::pairwise_alltoall(g.rank, n, s);
      e.run(s, k);
    }
    if (split) {
      const auto to = static_cast<std::size_t>(patterns::mod(g.rank + 1, n));
      own_copy(x, t, dag::in(0, sat[me], sb[me]), dag::out(0, rat[me], rb[me]), sb[me],
               std::max(geo.z, tuning(g).sym_large_fragment), start, stream, [&](std::uint64_t off, std::uint64_t len) {
                 if (n == 1 || off >= sb[to]) return dag::in(0, 0, 0);
                 return dag::in(0, sat[to] + off, std::min(len, sb[to] - off));
               });
    }
  }
  // Application work in the graph: a compute node per source block that runs
  // as soon as every node writing that block of recv is done (the on_block hook).
  // Bound per start (kOnBlockNode + source): the plan holds no code and is cached.
  if (c.on_block) {
    for (std::size_t r = 0; r < nn; ++r) {
      if (rb[r] == 0) continue;
      x.b().on_fragment_bound(dag::out(0, rat[r], rb[r]), kOnBlockNode + static_cast<std::uint32_t>(r));
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
  RsKind(Ctx& x, Tracker& t, std::vector<std::uint64_t> bytes, std::vector<std::uint64_t> at, std::size_t final_step,
         bool in_place)
      : x_(x),
        t_(t),
        bytes_(std::move(bytes)),
        at_(std::move(at)),
        final_step_(final_step),
        in_place_(in_place),
        in_acc_(bytes_.size(), 0) {}
  std::uint64_t send_bytes(int b) const override { return bytes_[static_cast<std::size_t>(b)]; }
  std::uint64_t recv_bytes(int b) const override { return bytes_[static_cast<std::size_t>(b)]; }
  Region local(int b, std::uint64_t off, std::uint64_t len) const {
    const std::uint64_t o = at_[static_cast<std::size_t>(b)] + off;
    return in_acc_[static_cast<std::size_t>(b)] ? dag::scratch(0, o, len) : send_region(in_place_, o, len);
  }
  Region source(int b, std::uint64_t off, std::uint64_t len) override { return local(b, off, len); }
  std::vector<NodeId> sink(std::size_t step, const patterns::Step& st, const Region& win, int b, std::uint64_t off,
                           std::uint64_t len, NodeId arrived) override {
    const bool to_out = b == x_.me() && step == final_step_;
    const Region dst = to_out ? dag::out(0, off, len) : dag::scratch(0, at_[static_cast<std::size_t>(b)] + off, len);
    return {land(x_, t_, st, win, local(b, off, len), dst, arrived)};
  }
  void after_step(std::size_t, const patterns::Step&, const std::vector<Seg>& got) override {
    for (const Seg& s : got) in_acc_[static_cast<std::size_t>(s.block)] = 1;
  }

 private:
  Ctx& x_;
  Tracker& t_;
  std::vector<std::uint64_t> bytes_, at_;
  std::size_t final_step_;
  bool in_place_;
  std::vector<char> in_acc_;
};

// Pairwise: every rank sends block j of its input straight to rank j
// (rotated, like the pairwise alltoall) and folds the n contributions to its
// own block in rank order, whatever their arrival order: contributions arrive
// from r-1, r-2, ..., 0 (prepended to P = x_r, accumulated in recv), then from
// n-1, n-2, ..., r+1 (prepended to Q, in scratch); finally recv = P op Q.
class RsPairwiseKind : public StepKind {
 public:
  RsPairwiseKind(Ctx& x, Tracker& t, std::vector<std::uint64_t> bytes, std::vector<std::uint64_t> at, bool in_place)
      : x_(x), t_(t), bytes_(std::move(bytes)), at_(std::move(at)), in_place_(in_place) {}
  std::uint64_t send_bytes(int b) const override { return bytes_[static_cast<std::size_t>(b)]; }
  std::uint64_t recv_bytes(int) const override { return bytes_[static_cast<std::size_t>(x_.me())]; }
  Region source(int b, std::uint64_t off, std::uint64_t len) override {
    return send_region(in_place_, at_[static_cast<std::size_t>(b)] + off, len);
  }
  Region p_region(std::uint64_t off, std::uint64_t len) const {
    return p_init_ ? dag::out(0, off, len) : send_region(in_place_, at_[static_cast<std::size_t>(x_.me())] + off, len);
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
  bool in_place_;
  bool p_init_ = false;
  bool q_init_ = false;
};

}  // namespace

// Over ~80 lines: (81) the ring / halving and the pairwise paths share the layout.
std::shared_ptr<const dag::Plan> compile_reduce_scatter(const Group& g, const Call& c, int slot,
                                                        const AlgorithmRow& row) {
  Ctx x(g, c, slot);
  const int n = g.size();
  const auto nn = static_cast<std::size_t>(n);
  const std::size_t es = x.esize();
  std::vector<std::size_t> counts(nn, c.count);
  if (c.kind == Kind::reduce_scatter) {
    counts = c.counts;  // checked once (check_call() or the engine)
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
  if (c.in_place) {  // MPI_IN_PLACE: the input is in recv (in_total bytes), the result goes to its start
    x.b().output(0, std::max(in_total, bytes[me]));
  } else {
    x.b().input(0, in_total);
    x.b().output(0, bytes[me]);
  }

  void (*build)(int, int, patterns::Schedule&) = nullptr;  // null: pairwise
  const std::string& algo = row.name;
  x.b().algorithm(algo);
  if (row.variant == Variant::ring)
    build = patterns::ring_reduce_scatter;
  else if (row.variant == Variant::halving)
    build = patterns::recursive_halving_reduce_scatter;

  Tracker t;
  const std::vector<NodeId> start = entry(x);
  if (c.in_place && in_total > 0) {  // the input is a copy of recv taken before anything lands (scratch 1)
    x.b().scratch(1, in_total);
    const Region whole = dag::out(0, 0, in_total);
    const Region copy = dag::scratch(1, 0, in_total);
    const NodeId n0 = x.b().copy(whole, copy, start);
    t.read(whole, n0);
    t.write(copy, n0);
  }
  patterns::Schedule s;
  if (build == nullptr) {  // pairwise
    x.b().scratch(0, bytes[me]);
    RsPairwiseKind k(x, t, bytes, at, c.in_place);
    // Pairwise messages carry one destination block: the largest block.
    const std::uint64_t maxm = *std::max_element(bytes.begin(), bytes.end());
    Emitter e(x, t, geometry(g, c, es, maxm, true), start);
    patterns::pairwise_alltoall(g.rank, n, s);
    e.run(s, k);
    k.finish_block(start);
    return done(x);
  }
  // A non-commutative op never gets here: only pairwise keeps rank order
  // (AlgorithmRow::keeps_order, check_rank_order() refused a named ring or
  // halving; the automatic choice is pairwise).
  build(g.rank, n, s);
  // The step of the last reception of this rank's own block (its final value goes straight to recv).
  std::size_t final_step = s.steps().size();
  for (std::size_t i = 0; i < s.steps().size(); ++i)
    for (const patterns::BlockRange& r : s.recv_ranges(s.steps()[i]))
      if (patterns::mod(g.rank - r.first, n) < r.count) final_step = i;
  x.b().scratch(0, in_total);
  RsKind k(x, t, bytes, at, final_step, c.in_place);
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
