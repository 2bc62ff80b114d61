// The per-machine tuning table (docs/tuning.md): every machine-dependent
// crossover of the collective compilers and the engine, with today's measured
// values as built-in defaults, and its file format (JSON, "strata_tuning": 1,
// written by strata-tune, loaded once per engine from STRATA_TUNING or the
// default location).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::coll {

/// @brief Every machine-dependent threshold the compilers and the engine
/// decide by. Defaults are the values measured on the developer VM
/// (docs/algorithms.md "Automatic selection"); a tuning file replaces them.
/// All ranks of a job must use the same table (the engine agrees on it at
/// start-up and falls back to the defaults when the ranks' tables differ).
struct Tuning {
  // ---- decision table (collectives/src, docs/algorithms.md "Automatic selection")
  std::uint64_t allgather_bruck_max_bytes = 16384;  ///< allgather(v): Bruck up to this receive total, n > 2
  std::uint64_t alltoall_bruck_min_ranks = 5;       ///< alltoall: Bruck from this many ranks ...
  std::uint64_t alltoall_bruck_max_block = 256;     ///< ... and blocks up to this many bytes
  std::uint64_t allreduce_rd_max_bytes = 16384;     ///< allreduce: recursive doubling up to this (one host)
  /// The same limit for communicators that span hosts (2 x 1 ranks at 10 Gbit/s,
  /// session 23: 8 KiB rd 10.7-11.9 us vs rabenseifner 21.9-22.7, 64 KiB rd 48 vs 37).
  std::uint64_t allreduce_net_rd_max_bytes = 16384;
  std::uint64_t allreduce_ring_min_bytes = std::uint64_t{2}
                                           << 20;                ///< allreduce: ring from this (rabenseifner between)
  std::uint64_t allreduce_hier_rd_max_bytes = 65536;             ///< "hier" allreduce: rd among the leaders up to this
  std::uint64_t sym_large_message = std::uint64_t{1} << 20;      ///< allgather / alltoall: "large" messages from this
  std::uint64_t sym_large_fragment = std::uint64_t{128} << 10;   ///< ... travel in fragments of this size
  std::uint64_t sym_stream_min_bytes = std::uint64_t{12} << 20;  ///< non-temporal copies from send + recv this large
  std::uint64_t pipeline_fragment = std::uint64_t{128} << 10;    ///< trees and step schedules: fragment size
  /// ... of a communicator whose members span hosts (every level's messages,
  /// and allgather / alltoall large messages too): each fragment across the
  /// network costs a write with its signal and completions on both sides.
  std::uint64_t net_pipeline_fragment = std::uint64_t{512} << 10;
  // Ranks on several hosts, automatic provider choice (no STRATA_PROVIDER):
  // 1 = libfabric's `net` provider first where the machine has it, 0 = the
  // usual order (`tcp;ofi_rxm` on socket networks). `net` is the default
  // because its progress is event-driven: its CQ fd (edge-triggered, see
  // docs/fabric.md "Progress, waiting") wakes a sleeping progress server
  // when a socket becomes readable or writable, so a rank with calls in
  // flight sleeps instead of polling; tcp;ofi_rxm's fd does not wake, so it
  // is polled (20 us - 1 ms). Latency: docs/performance.md, "Providers".
  std::uint64_t fabric_prefer_net = 1;
  std::uint64_t fallback_fragment = 32768;   ///< re-split of halves that exceed a window region
  std::uint64_t gather_token_bytes = 32768;  ///< ring gather/scatter: token hand-off split
  // ---- tree shapes and directions (docs/tuning.md "Tree decisions"): used when a call names no
  // tree (CollOptions::tree, STRATA_TREE*) / no direction (CollOptions::direction, STRATA_DIRECTION*).
  // Shape encoding: 0 = flat, 1 = chain, k = 2..64 k-nomial of radix k (shape_of()).
  std::uint64_t broadcast_tree_host = 2;     ///< broadcast: tree among the hosts
  std::uint64_t broadcast_tree_package = 2;  ///< broadcast: tree among one host's packages
  std::uint64_t broadcast_tree_numa = 2;     ///< broadcast: tree among one package's NUMA regions
  std::uint64_t broadcast_tree_core = 0;     ///< broadcast: tree among one NUMA region's ranks
  std::uint64_t broadcast_pull_host = 0;     ///< broadcast: 1 = edges between hosts pull, 0 = push
  std::uint64_t broadcast_pull_package = 0;  ///< broadcast: 1 = edges between packages of a host pull
  std::uint64_t broadcast_pull_numa = 0;     ///< broadcast: 1 = edges between NUMA regions of a package pull
  std::uint64_t broadcast_pull_core = 0;     ///< broadcast: 1 = edges inside a NUMA region pull
  std::uint64_t reduce_tree_host = 2;        ///< reduce: tree among the hosts
  std::uint64_t reduce_tree_package = 2;     ///< reduce: tree among one host's packages
  std::uint64_t reduce_tree_numa = 2;        ///< reduce: tree among one package's NUMA regions
  std::uint64_t reduce_tree_core = 0;        ///< reduce: tree among one NUMA region's ranks
  std::uint64_t allreduce_tree_host = 2;     ///< the "tree" allreduce (reduce + broadcast): tree among the hosts
  std::uint64_t allreduce_tree_package = 2;  ///< ... among one host's packages
  std::uint64_t allreduce_tree_numa = 2;     ///< ... among one package's NUMA regions
  std::uint64_t allreduce_tree_core = 0;     ///< ... among one NUMA region's ranks
  // One host, single copy (CMA) for blocks in [min, max] (max 0: never); measured on 2 ranks, one per core.
  std::uint64_t bcast_single_copy_min_bytes = std::uint64_t{16} << 10;  ///< broadcast: from this many bytes ...
  std::uint64_t bcast_single_copy_max_bytes = std::uint64_t{1} << 40;   ///< ... up to this many (split: always)
  // Single-copy broadcast: from this many bytes the root does not sit idle
  // while the readers copy: it writes the last 1/n of each reader's buffer
  // itself (CMA write) while the readers read the rest (0: never). Measured
  // (2 ranks, one per core, 2026-11-28, strata-bench --algo single-copy, two
  // rounds): 16 KiB 1.96-1.99 -> 1.80-1.87 us, 64 KiB 3.5-3.6 -> 2.9-3.0, 256
  // KiB 10.5-10.8 -> 6.4-6.8, 1 MiB 86-87 -> 26-35, 4 MiB 428-500 -> 304-352;
  // 8 KiB mixed. strata-tune searches it.
  std::uint64_t bcast_single_copy_split_min_bytes = std::uint64_t{16} << 10;
  // Broadcast on a communicator that spans hosts: from this many bytes the
  // tree's same-host edges read single copy out of the parent's buffer
  // (docs/algorithms.md, "Single copy across hosts"; up to
  // bcast_single_copy_max_bytes). Measured 2026-12-03 (4 ranks on 2 emulated
  // hosts, 10 Gbit/s, window path / single copy, quiet run): 256 KiB 1.01, 1
  // MiB 0.98, 4 MiB 1.13; one copy per receiver instead of two at every size.
  std::uint64_t bcast_host_single_copy_min_bytes = std::uint64_t{16} << 10;
  // Allreduce (not in place, ordinary buffers), one host: single copy both
  // ways (each rank folds its chunk out of the others' send buffers, then
  // writes it into their outputs) for vectors in [min, max] (max 0: never).
  // Measured 2026-11-28 (2 ranks, one per core, against the table's rd /
  // rabenseifner / ring): 64 KiB 5.4 vs 9.6 us, 128 KiB 8.4 vs 21, 1 MiB 113
  // vs 184, 4 MiB 576 vs 990, 16 MiB 3.1 vs 3.8 ms; off-cache 1 MiB 352 vs
  // 326, 4 MiB 1.37 vs 1.43 ms, 16 MiB 5.4 vs 5.6 ms. Pieces: 64 KiB 121 us at
  // 1 MiB, 256 KiB 107-114, 1 MiB 111 (4 MiB: 614 / 543-568 / 649).
  std::uint64_t allreduce_single_copy_min_bytes = std::uint64_t{64} << 10;
  std::uint64_t allreduce_single_copy_max_bytes = std::uint64_t{1} << 40;
  // reduce_scatter_block (not in place, ordinary buffers), one host: each
  // rank folds its block straight out of the others' send buffers (single
  // copy) for vectors in [min, max] (max 0: never). Measured 2026-11-28 (2
  // ranks, one per core) against the ring: 64 KiB 3.6 vs 5.0 us, 128 KiB 6.3
  // vs 15, 1 MiB 49 vs 93, 4 MiB 364 vs 445, 16 MiB 1.5 vs 2.2 ms.
  std::uint64_t rs_single_copy_min_bytes = std::uint64_t{64} << 10;
  std::uint64_t rs_single_copy_max_bytes = std::uint64_t{1} << 40;
  // The single-copy reductions (allreduce, reduce_scatter_block) in pieces of
  // this many bytes, each folded (and, for allreduce, written out) before the next.
  std::uint64_t single_copy_fold_piece = std::uint64_t{256} << 10;
  /// allgather(v) / alltoall: block from ... (across hosts: the hier-single-copy allgather's mean block)
  std::uint64_t sym_single_copy_min_bytes = std::uint64_t{16} << 10;
  std::uint64_t sym_single_copy_max_bytes = std::uint64_t{128} << 10;  ///< ... up to this (0: never)
  // Persistent plans (Communicator::plan_broadcast / plan_allreduce): write
  // straight into the receivers' registered buffers (direct mode: a
  // ready-to-receive signal per start) from this many bytes, 0 = never. The
  // window path won at every size measured here (one host 8 B - 4 MiB, 2 x 1
  // hosts over loopback 8 B - 4 MiB), hence the default.
  std::uint64_t persistent_direct_min_bytes = 0;
  // One host, mapped plans (docs/algorithms.md "Mapped plans"): calls whose
  // contribution per rank is at most this many bytes (0: never). Measured on
  // 2 ranks, one per core, medians of 5 alternating pairs: mapped / window
  // plans 0.84-0.93 at 8 KiB, 0.88-0.99 at 16 KiB, 0.93-1.04 at 32 KiB,
  // 1.00-1.23 at 64 KiB (docs/algorithms.md "Mapped plans").
  std::uint64_t mapped_max_bytes = 4096;
  // The same limit for shared-buffer calls (CollOptions::shared_buffers) of
  // the kinds with a single-copy plan (broadcast, scatter, gather, allgather,
  // alltoall, reduce_scatter_block), whose reads then go straight through the
  // mappings: 2 ranks, one per core (2026-11-27), mapped / single copy
  // 0.59-0.78 at 64-512 B, 0.96-1.09 at 1 KiB, 1.09-1.59 at 2-4 KiB.
  std::uint64_t shared_mapped_max_bytes = 1024;
  // One host, reduce_scatter_block: mapped plans while the whole vector (n
  // blocks, what a rank writes into its slot) is at most the larger of this
  // and mapped_max_bytes and fits the slot (n x mapped_max_bytes). Beyond the
  // mapped plans the ring's puts and signals took 8-11 us at 64 KiB on 2 ranks
  // (2026-11-27, three rounds) against 5.0 mapped, a 3x step from 32 KiB's
  // 3.0 us; allreduce at 64 KiB gained nothing mapped (11.7-12.4 vs 8.9-12.7).
  std::uint64_t mapped_rs_max_bytes = 65536;
  // One host, mapped broadcast: from this many bytes the root copies its
  // block into its slot in two halves and raises its record word after the
  // first, so the readers copy the first half while the root copies the
  // second (the second is announced by the root's end-of-instance flag:
  // no word more). 0: never split. Measured 2 ranks, one per core
  // (2026-11-27, four alternating rounds, --algo mapped): 8 KiB 1.58-1.63 vs
  // 1.64-1.69 us (the reader 2.02-2.08 vs 2.21-2.28, the root 0.05-0.1 us
  // slower), 12 KiB 2.01-2.08 vs 2.14-2.24; 4 KiB split lost (1.44-1.55 vs
  // 0.77-1.21). strata-tune searches it.
  std::uint64_t mapped_bcast_split_min_bytes = 8192;
  // One host, mapped plans: slots of each rank's mapped area (rounded down to
  // a power of two, at least the credits, and no more than fit in 4 MiB
  // of area). A slot is rewritten this many calls after its readers read it:
  // with the credits' 4 its lines were still in the readers' first-level
  // caches and the owner's copy into it waited on invalidations (2 ranks, one
  // per core, 4 vs 16 slots: 8 KiB allgather 1.96-2.38 -> 1.69-1.76 us,
  // allreduce 2.81-3.18 -> 2.19-2.23; docs/algorithms.md "A ring of mapped slots").
  std::uint64_t mapped_slots = 16;
  // ---- engine
  std::uint64_t inline_bytes = std::uint64_t{1}
                               << 20;  ///< copies / reductions run inline up to this (STRATA_INLINE_BYTES wins)
  // A straight start (a plan of memory nodes run in the calling thread) whose
  // flag is late looks again this many times, a CPU pause between looks,
  // before it publishes the instance; only while nothing else is in flight
  // (docs/dag.md, "Waiting"; STRATA_START_SPINS wins; 0: never). strata-tune
  // measures 0 against 16 (full: and 64) on 8-64 B allreduce and barrier.
  std::uint64_t start_spins = 16;

  /// @brief Field-wise equality.
  bool operator==(const Tuning& o) const noexcept;
  bool operator!=(const Tuning& o) const noexcept { return !(*this == o); }
  /// @brief A hash of every decision (equal tables, equal hashes; the engine's start-up agreement).
  [[nodiscard]] std::uint64_t hash() const noexcept;
};

/// @brief One field of Tuning: its JSON name, member, valid range and meaning.
struct TuningField {
  const char* name;               ///< key under "decisions"
  std::uint64_t Tuning::*member;  ///< the member it sets
  std::uint64_t lo, hi;           ///< valid range (inclusive)
  std::uint64_t multiple;         ///< the value must be a multiple of this (1: any)
  const char* what;               ///< one-line meaning (strata-info, docs/tuning.md)
};
/// @brief Every field, in file order.
const std::vector<TuningField>& tuning_fields();
/// @brief The field named @p name (nullptr when there is none).
const TuningField* tuning_field(const std::string& name);

/// @brief The machine fingerprint a tuning file is bound to (from /proc, /sys, uname).
struct Fingerprint {
  std::string cpu_model;           ///< /proc/cpuinfo "model name" (or "unknown")
  std::uint64_t cores = 0;         ///< online logical CPUs
  std::uint64_t numa_nodes = 0;    ///< /sys/devices/system/node/node* (1 when absent)
  std::uint64_t memory_bytes = 0;  ///< /proc/meminfo MemTotal
  std::string kernel;              ///< uname -r
  /// @brief This machine.
  static Fingerprint here();
  /// @brief Empty when equal, else "FIELD: 'file value' here 'this value'" for the first difference.
  [[nodiscard]] std::string difference(const Fingerprint& here) const;
  /// @brief As JSON text: the file's "machine" object (two-space indentation,
  /// a trailing newline).
  [[nodiscard]] std::string to_json() const;
};

/// @brief The file version this build reads and writes ("strata_tuning").
inline constexpr std::uint64_t kTuningVersion = 1;

/// @brief A tuning file's document: fingerprint, decisions, measurements.
struct TuningFile {
  Fingerprint machine;
  Tuning table;
  std::string created;  ///< UTC time of writing (ISO 8601)
  std::string tool;     ///< what wrote it ("strata-tune --quick", ...)
  /// @brief Free-form measurements behind each decision, as the JSON text of
  /// one object ("{}": none). Any JSON library reads and writes it; to_json()
  /// embeds it re-indented (numbers with up to 6 significant digits) and
  /// throws strata::Error (invalid_argument) when it is not an object;
  /// parse_tuning() fills it with the file's "measurements" (compact).
  std::string measurements = "{}";
  /// @brief The whole document as JSON text, as write_tuning_file() writes it
  /// (two-space indentation, a trailing newline).
  [[nodiscard]] std::string to_json() const;
};

/// @brief Parses a tuning file's text. Throws strata::Error (invalid_argument)
/// naming @p where and the JSON path of the wrong field ("decisions.pipeline_fragment:
/// expected an unsigned integer, got string") on malformed JSON, a missing or
/// unsupported "strata_tuning" version, an unknown decision, a value out of range.
/// Decisions absent from the file keep their defaults.
TuningFile parse_tuning(const std::string& text, const std::string& where);
/// @brief Reads and parses @p path (parse_tuning); throws naming the file when unreadable.
TuningFile read_tuning_file(const std::string& path);
/// @brief Writes @p f to @p path (creates parent directories; atomically via a temporary + rename).
void write_tuning_file(const std::string& path, const TuningFile& f);

/// @brief The table in effect and where it came from.
struct TuningChoice {
  Tuning table;               ///< the decisions in effect
  std::string path;           ///< the file they came from ("" = built-in defaults)
  std::string origin;         ///< "STRATA_TUNING", "default location", "built-in"
  std::string note;           ///< why the built-in defaults are in effect (empty when a file is)
  std::string created, tool;  ///< of the file in effect
};

/// @brief The default location: $XDG_CONFIG_HOME/strata/tuning.json, else
/// $HOME/.config/strata/tuning.json ("" when neither variable is set).
std::string default_tuning_path();

/// @brief Resolves the table the way every engine does (docs/tuning.md):
/// STRATA_TUNING=off -> defaults; STRATA_TUNING=PATH -> that file (must exist);
/// else the default location if the file exists; else defaults. A file for
/// another machine (fingerprint differs) -> defaults with a note saying why.
/// Throws strata::Error naming the file and field for a malformed file or a
/// wrong version.
TuningChoice load_tuning(const Fingerprint& here = Fingerprint::here());

/// @brief The automatic-selection rules of @p t in words, one (collective,
/// rule) pair per collective, generated from the algorithm registry
/// (strata/collectives/registry.hpp): each row that the automatic selection
/// runs, "name: when", its tuning keys replaced by their values in @p t
/// (strata-info, selection_rules()).
std::vector<std::pair<std::string, std::string>> selection_rules(const Tuning& t);

}  // namespace strata::coll
