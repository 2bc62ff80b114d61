// Engine internals (not installed): the algorithm of one call through the
// public selection (strata/collectives/select.hpp: CollOptions, the
// STRATA_ALGO_* / STRATA_TREE* / STRATA_FRAGMENT* / STRATA_DIRECTION*
// variables and the registry's defaults, docs/algorithms.md "Selection"),
// memoized per thread; synchronization and the automatic plans' eligibility.
#pragma once

#include <string>
#include <unordered_map>

#include "comm.hpp"
#include "strata/collectives/select.hpp"

namespace strata::detail {

// The selection strings of @p o (coll::select_algorithm reads them).
inline coll::Options options_of(const CollOptions& o) { return {o.algorithm, o.tree, o.fragment, o.direction}; }

// The public selection (strata/collectives/select.hpp) of one call of @p kind
// under this process's STRATA_* variables; @p g matters for allreduce only.
inline coll::Algorithm select_uncached(coll::Kind kind, const CollOptions& o, int rank, const std::string& comm = {},
                                       const coll::Group& g = {}, std::uint64_t bytes = 0,
                                       const dag::UserReduce* user_op = nullptr) {
  coll::Request r;
  r.kind = kind;
  r.options = options_of(o);
  r.rank = rank;
  r.comm = comm;
  r.bytes = bytes;
  r.ordered = user_op != nullptr && !user_op->commutative;
  if (r.ordered) r.op_name = user_op->name;
  return coll::select_algorithm(r, g, coll::Environment::process());
}

// A small per-thread memo of algorithm resolutions: the environment is read
// once per process, so (kind, the four option strings, rank) determine the
// result of @p uncached. Resolving by parsing on every call cost 0.3-1 us of
// a small collective (string building and registry lookups, perf). Each
// distinct @p F (one lambda per call site) has its own memo. Errors are not
// memoized (they throw again).
template <class F>
coll::Algorithm memo_algorithm(coll::Kind kind, const CollOptions& o, int rank, F&& uncached) {
  struct Entry {
    coll::Kind kind;
    int rank;
    std::string algorithm, tree, fragment, direction;
    coll::Algorithm result;
  };
  constexpr std::size_t kEntries = 16;
  thread_local std::vector<Entry> memo;
  thread_local std::size_t next = 0;
  for (const Entry& e : memo)
    if (e.kind == kind && e.rank == rank && e.algorithm == o.algorithm && e.tree == o.tree &&
        e.fragment == o.fragment && e.direction == o.direction)
      return e.result;
  coll::Algorithm a = uncached();
  Entry e{kind, rank, o.algorithm, o.tree, o.fragment, o.direction, a};
  if (memo.size() < kEntries) {
    memo.push_back(std::move(e));
  } else {
    memo[next] = std::move(e);
    next = (next + 1) % kEntries;
  }
  return a;
}

// The algorithm of a barrier, broadcast or reduce through the memo.
inline coll::Algorithm choose(coll::Kind kind, const CollOptions& o, int rank = -1) {
  return memo_algorithm(kind, o, rank, [&] { return select_uncached(kind, o, rank); });
}

// Whether STRATA_ALGO_<COLL> or STRATA_ALGO_<FAMILY> names an algorithm for @p kind (read once).
inline bool algo_env_set(coll::Kind kind) {
  static const std::vector<bool> set = [] {
    std::vector<bool> v;
    for (int k = 0; k <= static_cast<int>(coll::Kind::reduce_scatter_block); ++k)
      v.push_back(coll::Environment::process().algorithm_set(static_cast<coll::Kind>(k)));
    return v;
  }();
  const auto i = static_cast<std::size_t>(kind);
  return i < set.size() && set[i];
}

// Default options: the call's plan depends only on its PlainSig (the
// selection reads the communicator, the tuning table and the environment,
// fixed for the engine's life), so a window slot's memo can start it
// (CommImpl::submit_plain). "auto" counts as an explicit algorithm here.
inline bool plain_options(const CollOptions& o) noexcept {
  return o.algorithm.empty() && o.sync.entry == SyncMode::mine && o.sync.exit == SyncMode::mine && o.tree.empty() &&
         o.fragment.empty() && o.direction.empty() && !o.shared_buffers && !o.on_block && !o.compute && o.tag < 0;
}

// Strict synchronization and the automatic memory-protocol plans' eligibility (an automatic
// algorithm, no per-call tree / fragment / direction, loose).
inline void apply_sync(coll::Call& c, const CollOptions& o) {
  c.entry_all = o.sync.entry == SyncMode::all;
  c.exit_all = o.sync.exit == SyncMode::all;
  c.fast_ok = !c.entry_all && !c.exit_all && coll::automatic_request(o.algorithm) && o.tree.empty() &&
              o.fragment.empty() && o.direction.empty() && !o.on_block && !o.compute && !algo_env_set(c.kind);
  c.shared_buffers = o.shared_buffers;
  c.compute = o.compute;
  c.tag = o.tag;
}

}  // namespace strata::detail
