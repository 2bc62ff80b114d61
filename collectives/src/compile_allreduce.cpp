// Allreduce algorithms besides the tree (compile.cpp, compile_allreduce_tree):
// recursive doubling, Rabenseifner (recursive-halving reduce-scatter +
// recursive-doubling allgather), ring (ring reduce-scatter + ring allgather)
// and the hierarchical composition (intra-host binomial reduce to the host
// leaders, an inter-host algorithm among the leaders, intra-host binomial
// broadcast). Each is one step schedule (patterns/schedule.hpp) compiled by
// the step emitter of compile_steps.hpp with the window/RTR protocol; the
// vector is cut into blocks, partials accumulate in the receive buffer.
// Costs and selection: docs/algorithms.md, "Allreduce".
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compile_common.hpp"
#include "compile_steps.hpp"
#include "patterns/schedule.hpp"

namespace strata::coll::cc {

namespace {

using namespace steps;  // NOLINT: the step emitter

// The automatic choice is coll::allreduce_auto() (thresholds in
// the tuning table, compile_common.hpp); "hier" (Variant::hier) uses rd
// among the leaders up to allreduce_hier_rd_max_bytes, else rabenseifner.

// The leaders' algorithm of the hierarchical allreduce.
enum class Inter : std::uint8_t { none, rd, rabenseifner, ring };

// The vector cut into `parts` blocks of near-equal element counts.
void split(std::size_t count, std::size_t es, int parts, std::vector<std::uint64_t>* bytes,
           std::vector<std::uint64_t>* at) {
  const auto p = static_cast<std::size_t>(parts);
  bytes->assign(p, 0);
  at->assign(p, 0);
  std::uint64_t off = 0;
  for (std::size_t b = 0; b < p; ++b) {
    const std::size_t elems = count / p + (b < count % p ? 1 : 0);
    (*bytes)[b] = elems * es;
    (*at)[b] = off;
    off += elems * es;
  }
}

// Partials accumulate in recv (outputs[0]); a block not yet received on this
// rank is read from send (or recv, in place).
class AllreduceKind : public StepKind {
 public:
  AllreduceKind(Ctx& x, Tracker& t, std::vector<std::uint64_t> bytes, std::vector<std::uint64_t> at, bool in_place)
      : x_(x), t_(t), bytes_(std::move(bytes)), at_(std::move(at)), in_place_(in_place), in_acc_(bytes_.size(), 0) {}
  std::uint64_t send_bytes(int b) const override { return bytes_[static_cast<std::size_t>(b)]; }
  std::uint64_t recv_bytes(int b) const override { return bytes_[static_cast<std::size_t>(b)]; }
  Region local(int b, std::uint64_t off, std::uint64_t len) const {
    const std::uint64_t o = at_[static_cast<std::size_t>(b)] + off;
    return in_place_ || in_acc_[static_cast<std::size_t>(b)] ? dag::out(0, o, len) : dag::in(0, o, len);
  }
  Region source(int b, std::uint64_t off, std::uint64_t len) override { return local(b, off, len); }
  std::vector<NodeId> sink(std::size_t, const patterns::Step& st, const Region& win, int b, std::uint64_t off,
                           std::uint64_t len, NodeId arrived) override {
    const Region dst = dag::out(0, at_[static_cast<std::size_t>(b)] + off, len);
    return {land(x_, t_, st, win, local(b, off, len), dst, arrived)};
  }
  void after_step(std::size_t, const patterns::Step&, const std::vector<Seg>& got) override {
    for (const Seg& s : got) in_acc_[static_cast<std::size_t>(s.block)] = 1;
  }
  // Blocks this rank never received hold its own contribution only (n == 1): copy them to recv.
  void finish(const std::vector<NodeId>& start) {
    if (in_place_) return;
    for (std::size_t b = 0; b < bytes_.size(); ++b) {
      if (in_acc_[b] || bytes_[b] == 0) continue;
      const Region src = dag::in(0, at_[b], bytes_[b]);
      const Region dst = dag::out(0, at_[b], bytes_[b]);
      std::vector<NodeId> deps = start;
      append(&deps, t_.write_deps(dst));
      t_.write(dst, x_.b().copy(src, dst, deps));
    }
  }

 private:
  Ctx& x_;
  Tracker& t_;
  std::vector<std::uint64_t> bytes_, at_;
  bool in_place_;
  std::vector<char> in_acc_;
};

void idle_steps(patterns::Schedule& out, std::size_t k) {
  for (std::size_t i = 0; i < k; ++i) out.add_step();
}

// Reduce-scatter + allgather over `n` participants (index space), blocks = indices.
void rs_ag(int me, int n, bool ring, patterns::Schedule& out, const std::function<int(int)>& real) {
  patterns::Schedule a, b;
  if (ring) {
    patterns::ring_reduce_scatter(me, n, a);
    patterns::ring_allgather(me, n, b);
  } else {
    patterns::recursive_halving_reduce_scatter(me, n, a);
    patterns::recursive_doubling_allgather(me, n, b);
  }
  append_steps(out, a, real, false);
  append_steps(out, b, real, false);
}

// "hier[:inter]": binomial reduce to the host leader (local index 0), the
// inter algorithm among the leaders, binomial broadcast back. Every rank gets
// the same number of steps (idle ones where it has nothing to do).
void hier_schedule(const Hosts& h, int rank, int n, Inter inter, patterns::Schedule& out) {
  const int nl = h.leaders();
  out.reset(rank, n, nl, patterns::BlockSpace::rank_blocks, false);
  const auto& mem = h.members[static_cast<std::size_t>(h.host_of[static_cast<std::size_t>(rank)])];
  const int hs = static_cast<int>(mem.size());
  const int i = h.local_of[static_cast<std::size_t>(rank)];
  const int k = log2_ceil(h.widest());
  for (int s = 0; s < k; ++s) {  // reduce: i receives [i + d, i + 2d) from i + d
    const int d = 1 << s;
    patterns::Step& st = out.add_step();
    if (i % (2 * d) == d) {
      st.send_to = mem[static_cast<std::size_t>(i - d)];
      out.add_send(0, nl);
    } else if (i % (2 * d) == 0 && i + d < hs) {
      st.recv_from = mem[static_cast<std::size_t>(i + d)];
      st.action = patterns::RecvAction::reduce;
      st.recv_is_left = false;
      out.add_recv(0, nl);
    }
  }
  // Among the leaders (leader index = host index).
  patterns::Schedule probe;
  std::size_t inter_steps = 0;
  auto leader = [&h](int j) { return h.members[static_cast<std::size_t>(j)].front(); };
  auto build_inter = [&](int j, patterns::Schedule& o) {
    o.reset(j, nl, nl, patterns::BlockSpace::rank_blocks, false);
    if (inter == Inter::rd) {
      patterns::Schedule w;
      patterns::recursive_doubling_allreduce(j, nl, w);
      append_steps(o, w, leader, true);
    } else {
      rs_ag(j, nl, inter == Inter::ring, o, leader);
    }
  };
  build_inter(0, probe);
  inter_steps = probe.steps().size();
  if (i == 0) {
    patterns::Schedule w;
    build_inter(h.host_of[static_cast<std::size_t>(rank)], w);
    append_steps(
        out, w, [](int r) { return r; }, false);
  } else {
    idle_steps(out, inter_steps);
  }
  for (int s = k - 1; s >= 0; --s) {  // broadcast: i sends to i + d
    const int d = 1 << s;
    patterns::Step& st = out.add_step();
    if (i % (2 * d) == 0 && i + d < hs) {
      st.send_to = mem[static_cast<std::size_t>(i + d)];
      out.add_send(0, nl);
    } else if (i % (2 * d) == d) {
      st.recv_from = mem[static_cast<std::size_t>(i - d)];
      st.action = patterns::RecvAction::copy;
      out.add_recv(0, nl);
    }
  }
}

[[noreturn]] void refuse_order(const Group& g, const Call& c, const std::string& algo, const char* why) {
  fail(Errc::unsupported, g, c,
       "algorithm '" + algo + "' " + why + "; the non-commutative op '" + c.user_op->name +
           "' needs 'tree', 'single', 'rd' or 'hier' (hosts of consecutive ranks)");
}

}  // namespace

std::shared_ptr<const dag::Plan> compile_allreduce(const Group& g, const Call& c, int slot, const AlgorithmRow& row) {
  Ctx x(g, c, slot);
  const int n = g.size();
  const std::size_t es = x.esize();
  const std::uint64_t bytes = c.count * es;
  x.b().require_output_coverage(false);
  if (!c.in_place) x.b().input(0, bytes);
  x.b().output(0, bytes);
  x.b().algorithm(row.name);
  const bool ordered = !x.commutative();
  const std::string& name = row.name;

  Inter inter = Inter::none;  // hier: algorithm among the leaders
  Hosts hosts;
  int parts = 1;  // blocks of the vector
  switch (row.variant) {
    case Variant::rd:
      break;
    case Variant::rabenseifner:
    case Variant::ring:
      // A non-commutative op never gets here (AlgorithmRow::keeps_order, check_rank_order()).
      parts = n;
      break;
    default:  // Variant::hier, hier_rd, hier_rabenseifner, hier_ring
      hosts = hosts_of(g);
      inter = row.variant == Variant::hier_rd                             ? Inter::rd
              : row.variant == Variant::hier_rabenseifner                 ? Inter::rabenseifner
              : row.variant == Variant::hier_ring                         ? Inter::ring
              : ordered || bytes <= tuning(g).allreduce_hier_rd_max_bytes ? Inter::rd
                                                                          : Inter::rabenseifner;
      // A non-commutative op leaves inter = rd (hier:rabenseifner / hier:ring do not
      // keep order: check_rank_order() refused them); the placement can still lose it:
      if (ordered && !hosts.contiguous())
        refuse_order(g, c, name, "needs every host's ranks to be consecutive to keep rank order");
      parts = hosts.leaders();
      break;
  }
  std::vector<std::uint64_t> bb, at;
  split(c.count, es, parts, &bb, &at);

  auto build = [&](int r, patterns::Schedule& s) {
    if (parts == 1 && inter == Inter::none) {
      patterns::recursive_doubling_allreduce(r, n, s);
    } else if (inter == Inter::none) {
      s.reset(r, n, n, patterns::BlockSpace::rank_blocks, false);
      rs_ag(r, n, row.variant == Variant::ring, s, [](int q) { return q; });
    } else {
      hier_schedule(hosts, r, n, inter, s);
    }
  };

  Tracker t;
  AllreduceKind k(x, t, bb, at, c.in_place);
  const std::uint64_t maxm = max_message(n, build, k);
  const std::vector<NodeId> start = entry(x);
  patterns::Schedule s;
  build(g.rank, s);
  Emitter e(x, t, geometry(g, c, es, maxm, true), start);
  e.run(s, k);
  k.finish(start);
  return done(x);
}

bool host_single_copy_allreduce(const Group& g, const Call& c) {
  if (c.kind != Kind::allreduce || c.in_place || c.shared_buffers || !host_single_copy_eligible(g, c) ||
      (c.user_op && !c.user_op->commutative))
    return false;
  const Tuning& t = tuning(g);
  const std::uint64_t bytes = c.count * (c.user_op ? c.user_op->elem_size : dag::datatype_size(c.dtype));
  if (t.allreduce_single_copy_max_bytes == 0 || bytes < t.allreduce_single_copy_min_bytes ||
      bytes > t.allreduce_single_copy_max_bytes)
    return false;
  return hosts_of(g).even();
}

// Allreduce across hosts with single copy inside each host (docs/algorithms.md,
// "Single copy across hosts"): every host's L members split the vector into L
// chunks; member i folds chunk i of its host's send buffers into its output
// straight out of them (read_peer / read_peer_fold), the i-th members of all
// hosts allreduce their chunk among themselves over the window protocol (rd,
// or recursive halving + doubling above allreduce_hier_rd_max_bytes), and
// member i writes the finished chunk into its host's other outputs
// (write_peer). Per rank: (L - 1) m / L read and folded, (L - 1) m / L
// written, the chunk's allreduce among H hosts; no window copy inside a host.
std::shared_ptr<const dag::Plan> compile_allreduce_host_single(const Group& g, const Call& c, int slot,
                                                               const AlgorithmRow& row) {
  Ctx x(g, c, slot);
  const int n = g.size();
  const std::size_t es = x.esize();
  const std::uint64_t total = c.count * es;
  if (c.in_place) fail(Errc::unsupported, g, c, "algorithm '" + row.name + "' needs separate send and receive buffers");
  require_host_single_copy(g, c, row);
  if (c.user_op && !c.user_op->commutative)
    fail(Errc::unsupported, g, c, "algorithm '" + row.name + "' does not keep rank order (non-commutative op)");
  const Hosts h = hosts_of(g);
  if (!h.even())
    fail(Errc::unsupported, g, c, "algorithm '" + row.name + "' needs the same number (>= 2) of members on every host");
  x.b().require_output_coverage(false);
  x.b().input(0, total);
  x.b().output(0, total);
  x.b().algorithm(row.name);
  const int hosts = h.leaders();
  const auto me = static_cast<std::size_t>(g.rank);
  const std::vector<int>& local = h.members[static_cast<std::size_t>(h.host_of[me])];
  const int nl = static_cast<int>(local.size());
  const int li = h.local_of[me];
  // Chunk i: count / L elements, one more for the first count % L.
  const auto chunk = [&](int i, std::uint64_t* at) {
    const auto ui = static_cast<std::uint64_t>(i), ul = static_cast<std::uint64_t>(nl);
    const std::uint64_t q = c.count / ul, m = c.count % ul;
    *at = (ui * q + std::min(ui, m)) * es;
    return (q + (ui < m ? 1 : 0)) * es;
  };
  std::uint64_t at = 0;
  const std::uint64_t len = chunk(li, &at);
  const std::uint32_t w = publication_record(x);
  const std::vector<NodeId> start = entry(x);
  const NodeId pub = x.b().publish(w, total > 0 ? dag::in(0, 0, total) : Region{},
                                   total > 0 ? dag::out(0, 0, total) : Region{}, start);
  const std::function<NodeId(int)> published = publications(x, w, start);
  std::vector<NodeId> done;
  Tracker t;
  const Region acc = dag::out(0, at, len);
  // 1. This host's chunk li folded into acc, straight out of the send buffers.
  if (len > 0) {
    NodeId prev = dag::kNoNode;
    for (int j = 1; j < nl; ++j) {  // rotated: the next member first
      const int r = local[static_cast<std::size_t>((li + j) % nl)];
      std::vector<NodeId> d = start;
      if (prev != dag::kNoNode) d.push_back(prev);
      d.push_back(published(r));
      if (j == 1)
        prev = x.b().read_peer(x.world(r), w, 0, at, acc, d);
      else if (c.user_op)
        prev = x.b().read_peer_fold(x.world(r), w, 0, at, acc, x.user_index(), d);
      else
        prev = x.b().read_peer_fold(x.world(r), w, 0, at, acc, c.op, c.dtype, d);
      done.push_back(prev);
    }
    t.write(acc, x.reduce(acc, dag::in(0, at, len), acc, {prev}));
  }
  // 2. The chunk's allreduce among the li-th members of every host (in place on acc).
  const bool rd = len <= tuning(g).allreduce_hier_rd_max_bytes;
  const int parts = rd ? 1 : hosts;
  std::vector<std::uint64_t> bb, bat;
  split(len / es, es, parts, &bb, &bat);
  for (std::uint64_t& a : bat) a += at;
  auto build = [&](int r, patterns::Schedule& s) {
    const int j = h.host_of[static_cast<std::size_t>(r)];
    const int col = h.local_of[static_cast<std::size_t>(r)];
    const auto real = [&h, col](int q) {
      return h.members[static_cast<std::size_t>(q)][static_cast<std::size_t>(col)];
    };
    s.reset(r, n, parts, patterns::BlockSpace::rank_blocks, false);
    if (rd) {
      patterns::Schedule one;
      patterns::recursive_doubling_allreduce(j, hosts, one);
      append_steps(s, one, real, true);
    } else {
      rs_ag(j, hosts, false, s, real);
    }
  };
  AllreduceKind k(x, t, bb, bat, /*in_place=*/true);
  const std::uint64_t maxm = max_message(n, build, k);
  patterns::Schedule s;
  build(g.rank, s);
  Emitter e(x, t, geometry(g, c, es, maxm, true), start);
  e.run(s, k);
  // 3. The finished chunk written into the other members' outputs.
  if (len > 0) {
    const std::vector<NodeId> fin = t.read_deps(acc);
    for (int j = 1; j < nl; ++j) {
      const int r = local[static_cast<std::size_t>((li + j) % nl)];
      std::vector<NodeId> d = fin;
      d.push_back(published(r));
      done.push_back(x.b().write_peer(x.world(r), w, 1, at, acc, d));
    }
  }
  // Reads-done ("done with your send buffer and your output"); end after every other member's.
  x.b().flag_set(w + 1, done.empty() ? std::vector<NodeId>{pub} : done);
  wait_readers(x, h.others_on_host(g.rank), pub);
  return steps::done(x);
}

}  // namespace strata::coll::cc

namespace strata::coll {

std::string allreduce_auto(const Group& g, std::uint64_t bytes, bool ordered) {
  const Tuning& t = cc::tuning(g);  // the decision table
  if (g.size() <= 1) return "tree";
  if (bytes <= (g.spans_hosts() ? t.allreduce_net_rd_max_bytes : t.allreduce_rd_max_bytes)) return "rd";
  if (ordered) return "tree";  // rabenseifner / ring cannot keep rank order
  return bytes < t.allreduce_ring_min_bytes ? "rabenseifner" : "ring";
}

}  // namespace strata::coll
