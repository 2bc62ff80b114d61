// The public selection API: a call's options (CollOptions' strings or the
// STRATA_ALGO_* / STRATA_TREE* / STRATA_FRAGMENT* / STRATA_DIRECTION*
// variables) -> the coll::Algorithm the engine compiles, by the rules of the
// algorithm registry (strata/collectives/registry.hpp; docs/algorithms.md,
// "Selection"). The engine and strata-sim both resolve calls through it, so
// an option means the same in both.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "strata/collectives/compile.hpp"

namespace strata::coll {

/// @brief The selection strings of one call (CollOptions' fields of the same names).
struct Options {
  std::string algorithm;  ///< "" = automatic
  std::string tree;       ///< "host:K,package:K,numa:K,core:K" (any subset) or "single:K"; "" = defaults
  std::string fragment;   ///< "none" | "fixed:BYTES" | "halves[:BYTES]" | "auto" | ""
  std::string direction;  ///< "push" | "pull" | "level:dir,..." | "auto" | ""
};

/// @brief The STRATA_* variables the selection reads when an option is empty.
class Environment {
 public:
  /// @brief No variables set.
  Environment() = default;
  /// @brief The given variables (tests, tools).
  explicit Environment(std::unordered_map<std::string, std::string> vars) : vars_(std::move(vars)) {}
  /// @brief This process's STRATA_* variables, read once (first use); later changes have no effect.
  static const Environment& process();
  /// @brief The value of @p var, null when unset. @p var must be a registered
  /// STRATA_ name (docs/environment.md).
  [[nodiscard]] const std::string* find(const std::string& var) const;
  /// @brief Whether STRATA_ALGO_<COLL> or STRATA_ALGO_<FAMILY> names an algorithm for @p kind.
  [[nodiscard]] bool algorithm_set(Kind kind) const;

 private:
  std::unordered_map<std::string, std::string> vars_;
};

/// @brief One call to resolve.
struct Request {
  Kind kind = Kind::barrier;
  Options options;
  int rank = -1;            ///< the caller's communicator rank, named in errors (-1: unknown)
  std::string comm;         ///< appended to "<coll> on rank R" in argument errors of rooted calls, e.g. " (comm 2)"
  std::uint64_t bytes = 0;  ///< allreduce: bytes per rank (the automatic choice depends on it)
  bool ordered = false;     ///< allreduce: the operator is not commutative
  std::string op_name;      ///< allreduce: the non-commutative operator's name (errors)
};

/// @brief The algorithm of @p r on @p g under @p env. @p g matters for
/// allreduce only (the tuning table's crossovers). Throws strata::Error
/// (invalid_argument / unsupported) naming the argument, the collective and the rank.
Algorithm select_algorithm(const Request& r, const Group& g, const Environment& env);

/// @brief Whether @p algorithm (CollOptions::algorithm) leaves the choice to strata ("" or "auto").
bool automatic_request(const std::string& algorithm) noexcept;

/// @brief Whether a call with options @p o may run a memory-protocol plan
/// (Call::fast_ok, as the engine sets it): loose (@p strict false), no
/// algorithm, tree, fragmentation or direction asked for, none named by
/// STRATA_ALGO_<COLL> / STRATA_ALGO_<FAMILY> in @p env.
bool automatic_call(Kind kind, const Options& o, bool strict, const Environment& env);

/// @brief The call the engine builds for one loose call of @p kind with
/// @p bytes per rank (Call::count x element size) on @p g and options @p o:
/// float32 sum for the reductions, bytes otherwise, root 0, equal blocks for
/// the v-variants; its algorithm selected and Call::fast_ok set as the engine
/// does. strata-info --plan, strata-sim and the registry's tests use it.
Call planning_call(const Group& g, Kind kind, std::uint64_t bytes, const Options& o,
                   const Environment& env = Environment::process());

/// @brief Turns on, as the engine does for a communicator whose members
/// share one host with window flags, the memory-protocol plans: single copy
/// (Group::publish_word; @p single_copy false: STRATA_SINGLE_COPY=off) and
/// the mapped plans (Group::mapped_word and its area, sized from @p g's
/// tuning table; @p mapped false: STRATA_MAPPED=off). A group that spans
/// hosts, has no flags or one member is left as it is. Call it after
/// setting Group::tuning. strata-sim and planning_group() use it.
void memory_plans(Group* g, bool single_copy = true, bool mapped = true);

/// @brief Where the i-th rank of a host sits on its machine (planning_group()).
struct LocalPlace {
  int package = 0;  ///< package (socket) on the host
  int numa = 0;     ///< NUMA region on the host
};

/// @brief The communicator the engine builds for @p ranks ranks split evenly
/// over @p hosts hosts (one package and NUMA region each, or, with @p local
/// non-empty, the i-th rank of each host at local[i % local.size()], e.g.
/// strata::Machine::place_local(i) of a synthetic machine), with its
/// defaults: 1 MiB window slots, 4 credits, window flags, grants across hosts
/// and, on one host, the memory-protocol plans (memory_plans(); not those that
/// STRATA_SINGLE_COPY=off / STRATA_MAPPED=off turn off). strata-info --plan
/// and the registry's tests plan calls on it.
Group planning_group(int ranks, int hosts, const std::vector<LocalPlace>& local = {});

/// @brief Whether @p a on @p kind moves data along a tree (a v-variant then
/// needs every count on every rank; broadcast and scatter may pull).
bool uses_tree(Kind kind, const Algorithm& a);

/// @brief A tree shape spec ("flat" | "binary" | "chain" | "binomial" | radix
/// 1..64); throws invalid_argument prefixed by @p what.
Shape parse_shape(const std::string& s, const std::string& what);

}  // namespace strata::coll
