// The one registry of algorithms: a row per collective x algorithm, holding
// its name, when the automatic selection runs it (applies), its cost, the
// function that compiles it and the tuning keys that decide it. The engine's
// selection (strata/collectives/select.hpp), compile(), strata-info
// (--algorithms), strata-sim, strata-tune's search space and the table in
// docs/algorithms.md all read it; no other code compares algorithm names
// (docs/algorithms.md, "Adding an algorithm").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/collectives/compile.hpp"

namespace strata::coll {

/// @brief Which schedule of its family a row's compile function emits: the
/// row carries it, so a compile function dispatches on its row and never
/// compares algorithm names (the family compilers of collectives/src).
enum class Variant : std::uint8_t {
  tree,               ///< the (multilevel or single-level) tree of Call::algo; barrier: dissemination
  mapped,             ///< the mapped plan (one host, mapped windows)
  single_copy,        ///< read straight out of the owners' buffers
  flat,               ///< gather / scatter: the root exchanges every block directly
  ring,               ///< ring (rooted: blocks along the ring of ranks)
  rd,                 ///< recursive doubling
  bruck,              ///< Bruck's allgather / alltoall
  hier,               ///< allgather: gather to host leaders, ring, broadcast; allreduce: leaders pick rd / rabenseifner
  numa_ring,          ///< allgather: ring ordered host by host, NUMA region by NUMA region
  pairwise,           ///< alltoall(v) push / reduce_scatter rank-ordered pairwise exchange
  pull,               ///< alltoall(v): receivers get each block
  halving,            ///< reduce_scatter: recursive halving
  rabenseifner,       ///< allreduce: recursive-halving reduce-scatter + recursive-doubling allgather
  hier_rd,            ///< allreduce: hier with rd among the leaders
  hier_rabenseifner,  ///< allreduce: hier with rabenseifner among the leaders
  hier_ring,          ///< allreduce: hier with ring among the leaders
};

struct AlgorithmRow;

/// @brief A row's compile function: this rank's slice of @p c on @p g for
/// credit slot @p slot, as @p row (its Variant, its name for the plan's label).
using CompileFn = std::shared_ptr<const dag::Plan> (*)(const Group& g, const Call& c, int slot,
                                                       const AlgorithmRow& row);

/// @brief One algorithm of one collective.
struct AlgorithmRow {
  /// The collective.
  Kind kind = Kind::barrier;
  /// Canonical name: CollOptions::algorithm, STRATA_ALGO_<COLL>, strata-sim --algo.
  std::string name;
  /// Other spellings the selection accepts for it (kept as given in Algorithm::name).
  std::vector<std::string> aliases;
  /// What it does, in one line.
  std::string schedule;
  /// Critical-path cost (n ranks, m bytes per rank, h tree height, f fragment bytes).
  std::string cost;
  /// When the automatic selection runs it (empty: only when named).
  std::string chosen;
  /// Fields of the tuning table (coll::Tuning, docs/tuning.md) that decide when it runs or how.
  std::vector<std::string> tuning_keys;
  /// A caller may name it (CollOptions::algorithm, STRATA_ALGO_*); false: automatic only.
  bool selectable = true;
  /// Data moves along a tree (so a v-variant needs the layout on every rank and
  /// broadcast / scatter may pull).
  bool tree = false;
  /// The single-level tree (Algorithm::hierarchical = false).
  bool single_level = false;
  /// Folds in rank order, so a non-commutative operator may use it.
  bool keeps_order = true;
  /// Whether it runs @p c on @p g although @p c did not name it (the automatic
  /// choice, or a memory-protocol plan taking over); rows are tried in table
  /// order after the named one. Null: only when named.
  bool (*applies)(const Group& g, const Call& c) = nullptr;
  /// Compiles this rank's slice (explains with strata::Error when it cannot run the call).
  CompileFn compile = nullptr;
  /// The schedule the compile function emits for this row.
  Variant variant = Variant::tree;
  /// @brief Whether @p n is this row's name or one of its aliases.
  [[nodiscard]] bool named(const std::string& n) const;
};

/// @brief Every row, grouped by collective in Kind order; within a collective in
/// the order the automatic selection tries them.
const std::vector<AlgorithmRow>& algorithm_table();

/// @brief The rows of @p kind (table order).
std::vector<const AlgorithmRow*> algorithms_of(Kind kind);

/// @brief The row of @p kind named @p name (name or alias); null when there is none.
const AlgorithmRow* find_algorithm(Kind kind, const std::string& name);

/// @brief The row an automatic request of @p kind resolves to when the choice
/// does not depend on the call (barrier: dissemination; the tree collectives:
/// tree; gatherv / scatterv: flat); null for the step-schedule collectives.
const AlgorithmRow* default_algorithm(Kind kind);

/// @brief Whether @p name leaves @p kind's algorithm to strata: "" and "auto";
/// for the step-schedule collectives also the tree names shared with the
/// tree collectives' options ("tree", "single", "hierarchical").
bool means_automatic(Kind kind, const std::string& name);

/// @brief The selectable names of @p kind joined by " | " (for error messages).
std::string algorithm_names(Kind kind);

/// @brief The row compile() runs for @p c on @p g: a memory-protocol row that
/// applies (mapped, single copy), else the row @p c names, else the first row
/// whose automatic rule applies. Null when @p c names no algorithm of its
/// kind (compile() then throws invalid_argument).
const AlgorithmRow* planned_algorithm(const Group& g, const Call& c);

/// @brief The registry as a markdown table (docs/algorithms.md, "Algorithm
/// table"; strata-info --algorithms --markdown).
std::string algorithm_table_markdown();

}  // namespace strata::coll
