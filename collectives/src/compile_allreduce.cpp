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

// Appends the steps of `in` to `out` with peers mapped by `real` (index ->
// communicator rank); `whole` maps the single block of a BlockSpace::whole
// schedule to every block [0, out.num_blocks()).
void append_steps(patterns::Schedule& out, const patterns::Schedule& in, const std::function<int(int)>& real,
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
