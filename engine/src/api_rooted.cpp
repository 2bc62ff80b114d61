// Communicator::gather / gatherv / scatter / scatterv: argument checks,
// algorithm choice (the registry's, strata/collectives/select.hpp) and submission
// (docs/algorithms.md, "Gather and scatter").
#include <algorithm>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "checks.hpp"
#include "comm.hpp"
#include "select.hpp"
#include "strata/engine.hpp"

namespace strata {

namespace {

using namespace detail;  // NOLINT: argument checks and algorithm choice (checks.hpp, select.hpp)

bool is_v(coll::Kind k) { return k == coll::Kind::gatherv || k == coll::Kind::scatterv; }
bool is_gather(coll::Kind k) { return k == coll::Kind::gather || k == coll::Kind::gatherv; }

// Algorithm of one rooted call (the public selection, strata/collectives/select.hpp):
// per-call options, then STRATA_ALGO_<COLL>, then the registry's default (tree
// for gather / scatter; flat for the v-variants, whose tree needs the counts
// on every rank first).
coll::Algorithm rooted_algorithm_uncached(const CommImpl& impl, coll::Kind kind, const CollOptions& o) {
  return select_uncached(kind, o, impl.rank(), " (comm " + std::to_string(impl.id) + ")");
}

// rooted_algorithm_uncached() through the per-thread memo.
coll::Algorithm rooted_algorithm(const CommImpl& impl, coll::Kind kind, const CollOptions& o) {
  return memo_algorithm(kind, o, impl.rank(), [&] { return rooted_algorithm_uncached(impl, kind, o); });
}

// One-shot submission (the plan-cache key of CommImpl::submit covers the v-variant counts).
Future<void> submit_rooted(CommImpl& impl, const coll::Call& c, const void* send, void* recv) {
  return impl.submit(c, send, recv);
}

// Tree v-variants: every rank needs every count and displacement; the root
// broadcasts them (one small broadcast on the same communicator, waited for).
void share_layout(Communicator& comm, CommImpl& impl, coll::Call& c, int root, const char* n) {
  const auto un = static_cast<std::size_t>(impl.size());
  std::vector<std::uint64_t> w(2 * un, 0);
  if (impl.rank() == root)
    for (std::size_t r = 0; r < un; ++r) {
      w[r] = c.counts[r];
      w[un + r] = c.displs[r];
    }
  CollOptions o;
  o.algorithm = "tree";
  comm.broadcast(w.data(), w.size(), Datatype::uint64, root, o).get();
  if (impl.rank() == root) return;
  c.counts.assign(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(un));
  c.displs.assign(w.begin() + static_cast<std::ptrdiff_t>(un), w.end());
  const std::size_t mine = c.counts[static_cast<std::size_t>(impl.rank())];
  if (mine != c.count)
    bad(n, impl,
        "argument 'count' = " + std::to_string(c.count) + " differs from counts[" + std::to_string(impl.rank()) +
            "] = " + std::to_string(mine) + " given at the root");
}

struct RootedArgs {
  coll::Kind kind;
  const void* send;
  void* recv;
  std::size_t count;
  const std::vector<std::size_t>* counts;  // v-variants
  const std::vector<std::size_t>* displs;
  Datatype type;
  int root;
};

Future<void> rooted(Communicator& comm, const std::shared_ptr<CommImpl>& impl, const RootedArgs& a,
                    const CollOptions& opts) {
  const char* n = coll::to_string(a.kind);
  need(impl, n);
  const std::size_t es = size_of(a.type);
  const bool gather = is_gather(a.kind);
  const bool v = is_v(a.kind);
  const auto un = static_cast<std::size_t>(impl->size());
  coll::check_count(site(n, *impl), a.count, es);
  coll::check_root(site(n, *impl), a.root);
  const bool root = impl->rank() == a.root;
  // The user buffer that is in place at the root: send for gather, recv for scatter.
  const bool inplace = gather ? a.send == in_place : a.recv == in_place;
  if (root && !gather && a.send == in_place)
    bad(n, *impl, "argument 'send' cannot be strata::in_place (use 'recv' at the root)");
  if (root && gather && a.recv == in_place)
    bad(n, *impl, "argument 'recv' cannot be strata::in_place (use 'send' at the root)");
  if (inplace && !root)
    bad(n, *impl,
        std::string("argument '") + (gather ? "send" : "recv") +
            "' is strata::in_place on a rank that is not the root");
  coll::Call c;
  c.kind = a.kind;
  c.count = a.count;
  c.dtype = detail::to_dag(a.type);
  c.root = a.root;
  c.in_place = inplace;
  apply_sync(c, opts);
  // An option's error comes before the buffers' (a plain call's algorithm is resolved after its memo missed).
  const bool plain = !v && plain_options(opts);
  if (!plain) c.algo = rooted_algorithm(*impl, a.kind, opts);
  const std::size_t mine = a.count * es;
  if (root) {
    std::size_t extent = un * mine;
    if (v) {
      // The rooted buffer's blocks; gatherv writes them, so they must not overlap.
      extent = es * coll::check_blocks(site(n, *impl), "counts", "displs", gather ? "recv" : "send", *a.counts,
                                       *a.displs, es, /*allow_overlap=*/!gather);
      if (!inplace && a.count != (*a.counts)[static_cast<std::size_t>(a.root)])
        bad(n, *impl,
            "argument 'count' = " + std::to_string(a.count) +
                " differs from counts[root] = " + std::to_string((*a.counts)[static_cast<std::size_t>(a.root)]));
      c.counts = *a.counts;
      c.displs = *a.displs;
    }
    const void* rooted_buf = gather ? static_cast<const void*>(a.recv) : a.send;
    check_buffer(n, *impl, gather ? "recv" : "send", rooted_buf, extent);
    if (!inplace) {
      const void* own = gather ? a.send : static_cast<const void*>(a.recv);
      check_buffer(n, *impl, gather ? "send" : "recv", own, mine);
      check_overlap(n, *impl, a.send, gather ? mine : extent, a.recv, gather ? extent : mine);
    }
  } else {
    check_buffer(n, *impl, gather ? "send" : "recv", gather ? a.send : static_cast<const void*>(a.recv), mine);
  }
  const void* send = gather ? (inplace ? nullptr : a.send) : (root ? a.send : nullptr);
  void* recv = gather ? (root ? a.recv : nullptr) : (inplace ? nullptr : a.recv);
  // Default options: the window slot's memo starts it (no algorithm resolved, no key built).
  std::optional<CommImpl::PlainSig> sig;
  if (plain) {
    sig = CommImpl::PlainSig::make(a.kind, a.count, c.dtype, inplace, dag::ReduceOp{}, a.root);
    if (auto f = impl->submit_plain(*sig, send, recv)) return std::move(*f);
    c.algo = rooted_algorithm(*impl, a.kind, opts);
  }
  if (v && coll::uses_tree(c.kind, c.algo)) share_layout(comm, *impl, c, a.root, n);
  c.checked = true;  // the root checked counts / displs for every rank (share_layout sends those)
  if (sig) return impl->submit(c, send, recv, nullptr, false, &*sig);
  return submit_rooted(*impl, c, send, recv);
}

}  // namespace

Future<void> Communicator::gather(const void* send, std::size_t count, void* recv, Datatype type, int root,
                                  const CollOptions& opts) {
  return rooted(*this, impl_, {coll::Kind::gather, send, recv, count, nullptr, nullptr, type, root}, opts);
}

Future<void> Communicator::gatherv(const void* send, std::size_t count, void* recv,
                                   const std::vector<std::size_t>& counts, const std::vector<std::size_t>& displs,
                                   Datatype type, int root, const CollOptions& opts) {
  return rooted(*this, impl_, {coll::Kind::gatherv, send, recv, count, &counts, &displs, type, root}, opts);
}

Future<void> Communicator::scatter(const void* send, void* recv, std::size_t count, Datatype type, int root,
                                   const CollOptions& opts) {
  return rooted(*this, impl_, {coll::Kind::scatter, send, recv, count, nullptr, nullptr, type, root}, opts);
}

Future<void> Communicator::scatterv(const void* send, const std::vector<std::size_t>& counts,
                                    const std::vector<std::size_t>& displs, void* recv, std::size_t count,
                                    Datatype type, int root, const CollOptions& opts) {
  return rooted(*this, impl_, {coll::Kind::scatterv, send, recv, count, &counts, &displs, type, root}, opts);
}

}  // namespace strata
