// The model-based autotuner: searches the tuning table (docs/tuning.md) of a
// synthetic machine with the simulator (strata-tune --simulate, docs/tuning.md
// "Tuning a simulated machine").
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "strata/collectives/tuning.hpp"
#include "strata/sim/sim.hpp"

namespace strata::sim {

/// @brief What to search and how.
struct AutotuneOptions {
  /// Message sizes (bytes per rank) of broadcast / reduce and the tree searches;
  /// empty: 8 B, 64 KiB, 1 MiB, 16 MiB (quick: 8 B, 64 KiB, 1 MiB).
  std::vector<std::uint64_t> sizes;
  /// Sizes of the allreduce algorithm crossovers; empty: 1 KiB .. 16 MiB in
  /// steps of 4 (quick: up to 4 MiB).
  std::vector<std::uint64_t> allreduce_sizes;
  bool quick = false;  ///< fewer candidates and sizes, one pass
  /// A candidate is eligible only if it is at no (collective, size) more than
  /// this fraction slower than the field's current value (0.25 = 25%).
  double max_loss = 0.25;
  int passes = 2;                                 ///< coordinate-descent passes over the tree fields (quick: 1)
  std::string machine_name;                       ///< names the fingerprint: cpu_model "simulated:<machine_name>"
  std::string tool;                               ///< the file's "tool" string
  std::size_t slot_bytes = std::size_t{1} << 20;  ///< window slot (the engine's default)
  int credits = 4;                                ///< window credits (the engine's default)
  /// The allreduce crossovers (and allreduce in the comparison) are simulated
  /// on at most this many ranks: fewer hosts of the same kind when the machine
  /// is larger (rabenseifner and ring plans have O(ranks^2) nodes in all).
  int crossover_ranks = 256;
  /// Progress lines ("broadcast_tree_host: 4 (score 1.000, default 1.183)"); may be empty.
  std::function<void(const std::string&)> progress;
};

/// @brief One (collective, size) of the comparison of the tuned table with the built-in defaults.
struct AutotunePoint {
  std::string collective;
  std::uint64_t bytes = 0;
  double default_us = 0;  ///< simulated completion (last rank) under the built-in defaults
  double tuned_us = 0;    ///< ... under the tuned table
};

/// @brief The search's outcome.
struct AutotuneResult {
  coll::TuningFile file;               ///< fingerprint "simulated:<name>", decisions, measurements
  std::vector<AutotunePoint> compare;  ///< tuned vs defaults per collective and size
  std::uint64_t simulations = 0;       ///< simulations run (cached repeats not counted)
};

/// @brief The engine's automatic algorithm of @p kind at @p bytes per rank on
/// @p g (no CollOptions, no STRATA_* variables): tree shapes and directions
/// from the tuning table, allreduce by the table's crossovers (commutative sum).
coll::Call automatic_call(const coll::Group& g, coll::Kind kind, std::uint64_t bytes);

/// @brief Simulated completion time (seconds, last rank) of @p call on @p g under @p cost.
double simulated_seconds(const coll::Group& g, const coll::Call& call, const std::vector<RankPlace>& places,
                         const CostModel& cost);

/// @brief Searches tree shapes and directions (broadcast, reduce, the tree
/// allreduce), pipeline_fragment and the allreduce crossovers
/// (allreduce_rd_max_bytes, allreduce_ring_min_bytes) of @p m under @p cost:
/// each field in turn, every candidate simulated at every size, the candidate
/// with the lowest geometric mean over the sizes of (time / best candidate's
/// time) chosen; the current value stays on a tie. Deterministic. Throws
/// strata::Error naming the bad field of @p m.
AutotuneResult autotune(const MachineSpec& m, const CostModel& cost, const AutotuneOptions& o);

}  // namespace strata::sim
