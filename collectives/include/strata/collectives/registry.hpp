// The one registry of algorithms: a row per collective x algorithm, holding
// its name, when the automatic selection runs it (applies), its cost, the
// function that compiles it and the tuning keys that decide it. The engine's
// selection (strata/collectives/select.hpp), compile(), strata-info
// (--algorithms), strata-sim, strata-tune's search space and the table in
// docs/algorithms.md all read it; no other code compares algorithm names
// (docs/algorithms.md, "Adding an algorithm").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "strata/collectives/compile.hpp"

namespace strata::coll {

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
  std::shared_ptr<const dag::Plan> (*compile)(const Group& g, const Call& c, int slot) = nullptr;
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
