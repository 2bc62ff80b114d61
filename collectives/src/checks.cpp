// The argument checks of the collectives (strata/collectives/checks.hpp).
#include "strata/collectives/checks.hpp"

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "strata/collectives/registry.hpp"
#include "strata/collectives/select.hpp"

namespace strata::coll {

void fail_argument(const CheckSite& s, Errc code, const std::string& what) {
  std::string m = std::string(s.coll) + " on rank " + std::to_string(s.rank);
  if (s.comm >= 0) m += " (comm " + std::to_string(s.comm) + ")";
  throw Error(code, m + ": " + what);
}

namespace check_detail {

void bad_count(const CheckSite& s, const char* name, std::size_t count) {
  fail_argument(
      s, Errc::invalid_argument,
      std::string("argument '") + name + "' = " + std::to_string(count) + " is too large (negative or overflowed?)");
}

void bad_root(const CheckSite& s, int root) {
  fail_argument(s, Errc::invalid_argument,
                "argument 'root' = " + std::to_string(root) + " outside [0, " + std::to_string(s.size) + ")");
}

void bad_user_op(const CheckSite& s, bool has_fn) {
  fail_argument(s, Errc::invalid_argument,
                has_fn ? "argument 'op': user op elem_size is 0" : "argument 'op': user op has no function");
}

void bad_op(const CheckSite& s, dag::ReduceOp op, dag::DataType dt) {
  fail_argument(s, Errc::unsupported,
                std::string("argument 'op' ") + dag::to_string(op) + " is not defined on " + dag::to_string(dt));
}

}  // namespace check_detail

void check_entries(const CheckSite& s, const char* name, const std::vector<std::size_t>& v) {
  if (v.size() != static_cast<std::size_t>(s.size))
    fail_argument(s, Errc::invalid_argument,
                  std::string("argument '") + name + "' has " + std::to_string(v.size()) +
                      " entries, the communicator has " + std::to_string(s.size) + " ranks");
}

namespace {

void check_entry(const CheckSite& s, const char* name, std::size_t r, std::size_t v, std::size_t esize) {
  if (v > max_elements(esize))
    fail_argument(s, Errc::invalid_argument,
                  std::string("argument '") + name + "' entry " + std::to_string(r) + " = " + std::to_string(v) +
                      " is too large (negative or overflowed?)");
}

}  // namespace

std::size_t check_blocks(const CheckSite& s, const char* cname, const char* dname, const char* buffer,
                         const std::vector<std::size_t>& counts, const std::vector<std::size_t>& displs,
                         std::size_t esize, bool allow_overlap) {
  check_entries(s, cname, counts);
  check_entries(s, dname, displs);
  std::vector<std::pair<std::size_t, std::size_t>> blocks;  // (displacement, rank) of the nonempty blocks
  std::size_t extent = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    check_entry(s, cname, r, counts[r], esize);
    check_entry(s, dname, r, displs[r], esize);
    if (counts[r] == 0) continue;
    extent = std::max(extent, displs[r] + counts[r]);
    if (!allow_overlap) blocks.emplace_back(displs[r], r);
  }
  if (extent > max_elements(esize))
    fail_argument(s, Errc::invalid_argument,
                  std::string("arguments '") + cname + "' / '" + dname + "': the blocks reach element " +
                      std::to_string(extent) + " of '" + buffer + "', too large");
  std::sort(blocks.begin(), blocks.end());
  for (std::size_t k = 1; k < blocks.size(); ++k) {
    const std::size_t a = blocks[k - 1].second, b = blocks[k].second;
    if (displs[a] + counts[a] > displs[b])
      fail_argument(s, Errc::invalid_argument,
                    std::string("arguments '") + cname + "' / '" + dname + "': the blocks of ranks " +
                        std::to_string(a) + " and " + std::to_string(b) + " overlap in '" + buffer + "'");
  }
  return extent;
}

std::size_t check_reduce_counts(const CheckSite& s, const std::vector<std::size_t>& counts, std::size_t esize) {
  check_entries(s, "counts", counts);
  std::size_t total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    check_entry(s, "counts", r, counts[r], esize);
    total += counts[r];
  }
  if (total > max_elements(esize))
    fail_argument(s, Errc::invalid_argument,
                  "argument 'counts' sums to " + std::to_string(total) + " elements, too large");
  return total;
}

void check_self_block(const CheckSite& s, const std::vector<std::size_t>& send_counts,
                      const std::vector<std::size_t>& recv_counts) {
  const auto me = static_cast<std::size_t>(s.rank);
  if (send_counts[me] != recv_counts[me])
    fail_argument(s, Errc::invalid_argument,
                  "send_counts[" + std::to_string(me) + "] = " + std::to_string(send_counts[me]) +
                      " differs from recv_counts[" + std::to_string(me) + "] = " + std::to_string(recv_counts[me]) +
                      " (this rank's block to itself)");
}

void check_rank_order(const CheckSite& s, Kind kind, const std::string& algorithm, const std::string& op_name) {
  if (means_automatic(kind, algorithm)) return;
  const AlgorithmRow* row = find_algorithm(kind, algorithm);
  // An unknown name is not this check's to report: the selection / compile() refuse it.
  if (row == nullptr || row->keeps_order) return;
  std::vector<std::string> ordered;  // the algorithms to name instead (not the one-host memory-protocol plans)
  for (const AlgorithmRow* r : algorithms_of(kind))
    if (r->keeps_order && r->selectable && r->variant != Variant::mapped && r->variant != Variant::single_copy)
      ordered.push_back("'" + r->name + "'");
  std::string list;
  for (std::size_t i = 0; i < ordered.size(); ++i)
    list += (i == 0 ? "" : i + 1 == ordered.size() ? " or " : ", ") + ordered[i];
  fail_argument(s, Errc::unsupported,
                "algorithm '" + algorithm + "' does not keep rank order; the non-commutative op '" + op_name +
                    "' needs " + (list.empty() ? std::string("another algorithm") : list));
}

void check_call(const Group& g, const Call& c) {
  const CheckSite s{to_string(c.kind), g.rank, g.size(), -1};
  check_root(s, c.root);
  const bool reduction = c.kind == Kind::reduce || c.kind == Kind::allreduce || c.kind == Kind::reduce_scatter ||
                         c.kind == Kind::reduce_scatter_block;
  if (c.user_op)
    check_user_op(s, static_cast<bool>(c.user_op->fn), c.user_op->elem_size);
  else if (reduction)
    check_op(s, c.op, c.dtype);
  // 'direction' (the engine's selection refuses it from the options already).
  if (c.algo.any_pull() && !c.direct) {
    const bool scatter = c.kind == Kind::scatter || c.kind == Kind::scatterv;
    if (!(c.kind == Kind::broadcast || (scatter && uses_tree(c.kind, c.algo))))
      fail_argument(s, Errc::invalid_argument,
                    std::string("argument 'direction': pull applies to broadcast and to scatter / scatterv with the "
                                "tree algorithms (tree | single); ") +
                        to_string(c.kind) + (scatter ? " with algorithm '" + c.algo.name + "'" : std::string()) +
                        " moves data by push only");
  }
  const std::size_t es = c.user_op ? c.user_op->elem_size : dag::datatype_size(c.dtype);
  switch (c.kind) {
    case Kind::gatherv:
    case Kind::scatterv: {
      const bool gather = c.kind == Kind::gatherv;
      // Without counts a non-root knows its own count only (flat / ring; the tree refuses it).
      if (c.counts.empty() && c.displs.empty()) {
        if (g.rank == c.root) fail_argument(s, Errc::invalid_argument, "argument 'counts' is required at the root");
        break;
      }
      (void)check_blocks(s, "counts", "displs", gather ? "recv" : "send", c.counts, c.displs, es, !gather);
      break;
    }
    case Kind::allgatherv:
      (void)check_blocks(s, "counts", "displs", "recv", c.counts, c.displs, es, false);
      break;
    case Kind::alltoallv:
      (void)check_blocks(s, "send_counts", "send_displs", "send", c.counts, c.displs, es, true);
      (void)check_blocks(s, "recv_counts", "recv_displs", "recv", c.rcounts, c.rdispls, es, false);
      check_self_block(s, c.counts, c.rcounts);
      if (c.in_place && (c.counts != c.rcounts || c.displs != c.rdispls))
        fail_argument(s, Errc::invalid_argument, "in place: send counts / displacements must equal the receive ones");
      break;
    case Kind::reduce_scatter:
      (void)check_reduce_counts(s, c.counts, es);
      break;
    default:
      break;
  }
  if (c.user_op && !c.user_op->commutative &&
      (c.kind == Kind::allreduce || c.kind == Kind::reduce_scatter || c.kind == Kind::reduce_scatter_block))
    check_rank_order(s, c.kind, c.algo.name, c.user_op->name);
}

}  // namespace strata::coll
