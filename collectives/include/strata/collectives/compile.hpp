// The collective compiler: (collective, arguments, communicator layout,
// algorithm) -> this rank's DAG slice.
//
// Data moves through per-communicator *windows*: every member registers one
// window of `credits * slot_bytes` bytes at communicator creation and every
// member knows every other member's key. Instance `seq` of the communicator
// uses slot `seq % credits` of every window. Protocol (docs/algorithms.md):
//  - push with ready-to-receive: a receiver signals RTR for a window region
//    when the region is free (at instance start, or after it consumed the
//    fragment that used the region before); the sender waits for RTR, then
//    put_with_signal's the fragment into the region.
//  - the engine never starts instance seq + credits before instance seq
//    finished locally, so a window slot is never reused while in use, and a
//    fast rank can never overrun a slow one (it needs the slow one's RTR).
//
// Plans use world ranks for peers (the executor talks to the transport in
// world ranks); the communicator's members map comm ranks to world ranks.
//
// Buffer bindings of every compiled plan:
//   inputs[0]  = the user's send buffer (broadcast: the buffer, at the root)
//   outputs[0] = the user's receive buffer
//   outputs[1] = this rank's window slot (slot_bytes bytes)
//   outputs[2] = this rank's slot of its mapped area (mapped plans only)
//   peer buffer (r, 0) = rank r's whole window (offsets include the slot base)
//   peer buffer (r, 1) = rank r's receive buffer (Call::direct only)
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/collectives/tuning.hpp"
#include "strata/dag/plan.hpp"
#include "strata/dag/reduce.hpp"
#include "strata/error.hpp"

namespace strata::coll {

/// @brief The collectives the compiler knows.
enum class Kind : std::uint8_t {
  barrier,
  broadcast,
  reduce,
  allreduce,
  gather,
  gatherv,
  scatter,
  scatterv,
  allgather,
  allgatherv,
  alltoall,
  alltoallv,
  reduce_scatter,
  reduce_scatter_block,
};
/// @brief Printable name ("allreduce", ...).
const char* to_string(Kind k) noexcept;

/// @brief A communicator as the compiler sees it.
struct Group {
  int rank = 0;            ///< this rank's communicator rank
  std::vector<int> world;  ///< communicator rank -> world rank
  int world_size = 1;      ///< ranks in the job
  std::vector<int> host;   ///< communicator rank -> (virtual) host id
  std::vector<int> numa;   ///< communicator rank -> NUMA region id on its host
  /// Communicator rank -> package (socket) id on its host; empty = one
  /// package per host (every rank in package 0).
  std::vector<int> package;
  /// @brief Package of communicator rank @p r (0 when `package` is empty).
  [[nodiscard]] int package_of(int r) const noexcept {
    return package.empty() ? 0 : package[static_cast<std::size_t>(r)];
  }
  /// @brief True when the members are on more than one (virtual) host.
  [[nodiscard]] bool spans_hosts() const noexcept {
    for (const int h : host)
      if (h != host.front()) return true;
    return false;
  }
  std::size_t slot_bytes = 0;  ///< window bytes per credit slot
  int credits = 1;             ///< window slots (instances in flight)
  /// Window flags: every member mapped the flag words of its same-host members
  /// (agreed by all). Then the first use of a same-host peer's window region
  /// in an instance waits on that peer's flag (flag_wait: its instance seq -
  /// credits finished) instead of a ready-to-receive signal, and every slice
  /// ends with a flag_set. Plans compiled with and without must not be mixed.
  bool flags = false;
  /// Grants (with flags, agreed by all): members on other hosts keep a copy
  /// of each other's flag words, sent by every flag_set to the peers that put
  /// into this rank's window in that plan and on request when a copy is
  /// late; the first use of a remote peer's window region then waits on the
  /// copy (flag_wait granted) instead of a ready-to-receive round trip.
  /// Needs credits <= dag::kMaxGrantSlots.
  bool grants = false;
  /// Single copy (with flags, agreed by all; every member on this host and
  /// readable through Transport::read_peer): the flag word of slot 0's
  /// publication record (dag::kPublishWords words per credit slot follow);
  /// 0 = unavailable. Large allgather, alltoall and broadcast then read each
  /// block straight out of its owner's user buffer (docs/algorithms.md,
  /// "Single copy").
  std::uint32_t publish_word = 0;
  /// Mapped plans (with flags, agreed by all; every member on this host and
  /// every member's window mapped into this process, bound as
  /// dag::PeerKey::mapped, and the flag words of each bound at the flag words
  /// of that window, so that words past the flag area address the rest of
  /// it): the flag word where the mapped area begins (mapped_at in words
  /// from the flag words); 0 = unavailable. Each mapped slot opens with its
  /// record word (slot s's is mapped_word + s x mapped_slot_bytes / 4) and
  /// holds the contribution from byte kMappedHeader on, in the record's cache
  /// line: a reader's one transfer brings both. Small calls then run as mapped
  /// plans: each rank copies its contribution into its own slot, raises the
  /// record word, and the readers copy or fold it straight out of that slot
  /// (docs/algorithms.md, "Mapped plans").
  std::uint32_t mapped_word = 0;
  /// Mapped plans: byte offset of the mapped area in every member's window
  /// (mapped_slots slots of mapped_slot_bytes each, written only by mapped
  /// plans, so no window plan's put or pull lands where a mapped reader may
  /// still read), and the bytes of one slot of it (the most one rank writes
  /// per call).
  std::size_t mapped_at = 0;
  std::size_t mapped_slot_bytes = 0;
  /// Mapped plans: slots of the mapped area, a multiple of credits (0 when
  /// there is none: then credits). Call seq uses mapped slot seq %
  /// mapped_slots, so a slot is rewritten mapped_slots calls after its last
  /// readers read it, not credits calls: by then their caches no longer hold
  /// its lines in their first level, and the owner's stores do not wait for
  /// invalidations there (Tuning::mapped_slots, docs/algorithms.md "Mapped
  /// plans"). A plan is compiled for credit slot s (mapped slot s) and marks
  /// its peer-slot reads and record words relative (dag::kRelPeerRegions,
  /// kRelFlagWord, kRelRefreshFirst): the engine binds the instance's shift,
  /// (seq % mapped_slots - seq % credits) slots (dag::Bindings::shift), so one
  /// plan per credit slot serves the whole ring.
  int mapped_slots = 0;
  /// @brief Slots of the mapped area (mapped_slots, at least credits).
  [[nodiscard]] int mapped_ring() const noexcept { return mapped_slots > credits ? mapped_slots : credits; }
  /// Bytes before the contribution in a mapped slot (the record word, padded).
  static constexpr std::size_t kMappedHeader = 8;
  /// The tuning table in effect (the engine's, docs/tuning.md); null = the
  /// built-in defaults. Plans compiled under different tables differ: a plan
  /// cache must not be shared between groups with different tables.
  std::shared_ptr<const Tuning> tuning;
  [[nodiscard]] int size() const noexcept { return static_cast<int>(world.size()); }
};

/// @brief Tree shape of one level: kind flat / knomial(radix) / binary.
struct Shape {
  enum Kind : std::uint8_t { flat, knomial, binary } kind = knomial;
  int radix = 2;
};

/// @brief Who moves a fragment across one tree edge (docs/algorithms.md).
///  - push: the child signals ready-to-receive (RTR) for its window region,
///    the parent put_with_signal's the fragment into it;
///  - pull: the parent makes the fragment available in its own window region
///    and signals ready(f) to the child, the child `get`s it (into its window,
///    or straight into its receive buffer when it forwards nothing) and
///    signals done(f) back so the parent may reuse the region.
enum class Direction : std::uint8_t { push, pull };
/// @brief Printable name ("push", "pull").
const char* to_string(Direction d) noexcept;

/// @brief Algorithm choice for one call (resolved by the engine's selection).
struct Algorithm {
  std::string name = "tree";  ///< "tree", "ring", "rd" (recursive doubling), "dissemination", "flat", ...
  bool hierarchical = true;   ///< tree over host / package / NUMA / core levels, else single level
  Shape host{Shape::knomial, 2};
  Shape numa{Shape::knomial, 2};
  Shape core{Shape::flat, 0};
  Shape package{Shape::knomial, 2};  ///< among the package leaders of a host (no edge with one package)
  Shape single{Shape::knomial, 2};   ///< the single-level tree when !hierarchical
  /// Fragmentation: 0 = fragment size chosen from the slot (none if it fits);
  /// > 0 fixed fragments of this many bytes; halves when halves_threshold > 0.
  std::size_t fragment = 0;
  std::size_t halves_threshold = 0;
  /// Direction per tree level (broadcast, scatter, scatterv with the tree
  /// algorithms; every other collective moves data by push and refuses pull).
  /// An edge's level follows the places of its two ends: different hosts ->
  /// host, same host and different packages -> package, same package and
  /// different NUMA regions -> numa, else core; every edge of the
  /// single-level tree (!hierarchical) uses `dir_single`. Persistent plans
  /// (Call::direct) always push.
  Direction dir_host = Direction::push;
  Direction dir_numa = Direction::push;
  Direction dir_core = Direction::push;
  Direction dir_single = Direction::push;
  Direction dir_package = Direction::push;
  /// alltoall(v): remote operations (puts, or gets of the `pull` algorithm) a
  /// rank keeps in flight: operation j waits for operation j - max_outstanding.
  /// 0 = the default (128, Chaimov et al.); the engine sets STRATA_ALLTOALL_MAX_OUTSTANDING.
  std::size_t max_outstanding = 0;
  /// The call named no tree (CollOptions::tree, STRATA_TREE*): the compiler
  /// takes the host / package / numa / core shapes of broadcast, reduce and the tree
  /// allreduce from the tuning table (Group::tuning, docs/tuning.md "Tree
  /// decisions"; the built-in defaults equal the shapes above). Set by the
  /// engine's selection; false keeps host / numa / core as given.
  bool tree_from_table = false;
  /// The call named no direction (CollOptions::direction, STRATA_DIRECTION*):
  /// broadcast takes dir_host / dir_package / dir_numa / dir_core from the tuning table.
  bool direction_from_table = false;
  /// @brief Whether any level pulls.
  [[nodiscard]] bool any_pull() const noexcept {
    return dir_host == Direction::pull || dir_package == Direction::pull || dir_numa == Direction::pull ||
           dir_core == Direction::pull || dir_single == Direction::pull;
  }
};

/// @brief Bytes of one mapped slot (Group::mapped_slot_bytes) on a one-host
/// communicator of @p members ranks with window slots of @p slot_bytes: room
/// for the widest call (one block of @p mapped_max_bytes, at least 4 KiB, per
/// member) and the record's cache line, at most a window slot, in whole cache
/// lines; 0 for fewer than two members. The engine and strata-sim size it so.
std::size_t mapped_slot_bytes(std::uint64_t mapped_max_bytes, int members, std::size_t slot_bytes);

/// @brief The tree shape a tuning-table value encodes: 0 = flat, 1 = chain
/// (k-nomial of radix 1), k >= 2 = k-nomial of radix k (docs/tuning.md).
Shape shape_of(std::uint64_t code) noexcept;
/// @brief The tuning-table code of @p s (inverse of shape_of; binary has none: -1).
int shape_code(const Shape& s) noexcept;

/// @brief @p a with the tree shapes and directions of @p t applied where
/// @p a leaves them to the table (Algorithm::tree_from_table,
/// Algorithm::direction_from_table) for @p kind: shapes for broadcast, reduce
/// and the tree allreduce, directions for broadcast. Other kinds and explicit
/// choices are returned unchanged (the flags cleared).
Algorithm with_table(const Tuning& t, Kind kind, Algorithm a);

/// @brief Direction of the tree edge @p parent -> @p child (communicator ranks) of @p g under @p a.
Direction edge_direction(const Group& g, const Algorithm& a, int parent, int child) noexcept;

/// @brief Level of the edge between communicator ranks @p a and @p b of @p g
/// (their places): "host" (different hosts), "package" (same host, different
/// packages), "numa" (same package, different NUMA regions) or "core".
const char* edge_level(const Group& g, int a, int b) noexcept;

/// @brief One edge of a tree call's tree (plan_tree()).
struct TreeEdge {
  int parent = 0;     ///< communicator rank on the root's side
  int child = 0;      ///< communicator rank on the far side
  std::string level;  ///< edge_level() of the two ends; "single" for every edge of the single-level tree
  /// The root's extra hop to its host leader (the tree's root), taken before
  /// the tree by broadcast / scatter, after it by reduce / gather.
  bool hop = false;
  Direction direction = Direction::push;  ///< edge_direction() for broadcast / scatter(v), else push
  /// Broadcast on a multi-host group: a same-host edge that reads single copy
  /// out of the parent's buffer (docs/algorithms.md, "Single copy across hosts").
  bool single_copy = false;
};

/// @brief One call's arguments.
struct Call {
  Kind kind = Kind::barrier;
  std::size_t count = 0;  ///< elements per rank (see docs/algorithms.md per kind)
  dag::DataType dtype = dag::DataType::u8;
  dag::ReduceOp op = dag::ReduceOp::sum;
  std::shared_ptr<const dag::UserReduce> user_op;  ///< non-null: overrides op
  int root = 0;                                    ///< communicator rank
  bool in_place = false;                           ///< send buffer is the receive buffer
  bool entry_all = false;                          ///< strict entry: barrier before data moves
  bool exit_all = false;                           ///< strict exit: barrier before completion
  /// v-variants: per-rank element counts and displacements (elements) into
  /// the rooted / gathered buffer; alltoallv also uses rcounts/rdispls.
  std::vector<std::size_t> counts, displs, rcounts, rdispls;
  /// Persistent plans: every rank's receive buffer is registered and its key
  /// bound as peer buffer (r, 1), so broadcast data goes straight into the
  /// receivers' buffers (single copy, no window staging).
  bool direct = false;
  /// alltoall(v): called as a compute node of the DAG with (source rank,
  /// block address, block bytes) as soon as the block from that source has
  /// landed in the receive buffer; compiled as a bound compute node
  /// (kOnBlockNode + source), so plans with it hold no code and are cached.
  std::function<void(int source, void* data, std::size_t bytes)> on_block;
  /// Any kind: one compute node without predecessors (it runs as the call
  /// starts, beside its transfers; the call ends after it), bound (kComputeNode).
  std::function<void()> compute;
  Algorithm algo;
  /// Engine only (not compiled, not in the plan-cache key): the algorithm was
  /// left automatic and the call is loose, so the memory-protocol plans
  /// (mapped, single copy) may run it (docs/algorithms.md, "Mapped plans").
  bool fast_ok = false;
  /// CollOptions::shared_buffers: single-copy plans read the owners' buffers
  /// through this process's mappings (in the plan-cache key).
  bool shared_buffers = false;
  /// Not compiled, not in the plan-cache key: the arguments passed the checks
  /// of strata/collectives/checks.hpp already (the engine's, on the way in),
  /// so compile() does not run check_call() again. False: compile() checks them.
  bool checked = false;
  /// Engine only (not compiled, not in the plan-cache key): CollOptions::tag;
  /// a tagged call runs on its communicator's tag lane (engine/src/comm.cpp).
  int tag = -1;
};

/// @brief The automatic allreduce algorithm for @p bytes on @p g (the
/// measured decision table of @p g's tuning, docs/algorithms.md "Automatic selection"):
/// by default "rd" up to 16 KiB, "rabenseifner" up to 2 MiB, "ring" above; with
/// @p ordered (a non-commutative operator) "rd" up to 16 KiB, else "tree".
std::string allreduce_auto(const Group& g, std::uint64_t bytes, bool ordered);

/// @brief The automatic selection rules of the built-in defaults, one
/// (collective, rule) pair per collective, from the algorithm registry
/// (selection_rules(const Tuning&) for a table).
std::vector<std::pair<std::string, std::string>> selection_rules();

/// @brief Indices of a compiled call's bound compute nodes
/// (dag::PlanBuilder::compute_bound): kComputeNode runs Call::compute,
/// kOnBlockNode + r runs Call::on_block for the block from source r.
constexpr std::uint32_t kComputeNode = 0;
constexpr std::uint32_t kOnBlockNode = 1;

/// @brief The callable to bind (dag::Bindings::compute) when starting a plan
/// compiled from @p c; empty when @p c has neither on_block nor compute.
/// Plans hold no application code: a cached plan serves every callable.
dag::BoundComputeFn bound_compute(const Call& c);

/// @brief Compiles this rank's slice for instance slot @p slot (0 <= slot < credits).
/// Throws strata::Error(invalid_argument / unsupported) naming the argument;
/// the argument checks (check_call(), strata/collectives/checks.hpp) run
/// unless @p c is marked Call::checked.
std::shared_ptr<const dag::Plan> compile(const Group& g, const Call& c, int slot);

/// @brief The plan that stands for a call of @p kind on @p g that took
/// instance slot @p slot but could not be compiled (compile() threw): no data
/// moves; it only raises this rank's flag for the slot (and keeps the slot's
/// mapped record / publication words recent), as every plan does at its end.
/// Without it the slot's next user would wait forever for this rank to finish
/// the instance the slot had (docs/algorithms.md, "Window flags").
std::shared_ptr<const dag::Plan> compile_skipped(const Group& g, Kind kind, int slot);

/// @brief Compiles every rank's slice (tests, DOT export, cross-rank validation).
std::vector<std::shared_ptr<const dag::Plan>> compile_all(const Group& g, const Call& c, int slot);

/// @brief The tree the tree algorithms (broadcast, reduce, the tree
/// allreduce, gather, scatter and their v-variants) move @p c's data along on
/// @p g, as its edges in pre-order from c.root (children in send order; the
/// extra hop, if any, first), with the shapes and directions compile() would
/// use (those left to the table come from @p g's tuning). Reduce with a
/// non-commutative user operator re-roots it (patterns/rank_order.hpp); that
/// is not shown. strata-info --plan prints it.
std::vector<TreeEdge> plan_tree(const Group& g, const Call& c);

}  // namespace strata::coll
