// Datatypes, reduction operators and per-call options of strata collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace strata {

/// @brief Element types of collective buffers.
enum class Datatype : std::uint8_t { int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64 };

/// @brief Size in bytes of one element of @p t.
std::size_t size_of(Datatype t) noexcept;
/// @brief Printable name ("int32", "float64", ...).
const char* to_string(Datatype t) noexcept;

/// @brief C++ type -> Datatype, e.g. `datatype_of<float>()`.
template <class T>
constexpr Datatype datatype_of() noexcept;
// clang-format off
template <> constexpr Datatype datatype_of<std::int8_t>() noexcept { return Datatype::int8; }
template <> constexpr Datatype datatype_of<std::int16_t>() noexcept { return Datatype::int16; }
template <> constexpr Datatype datatype_of<std::int32_t>() noexcept { return Datatype::int32; }
template <> constexpr Datatype datatype_of<std::int64_t>() noexcept { return Datatype::int64; }
template <> constexpr Datatype datatype_of<std::uint8_t>() noexcept { return Datatype::uint8; }
template <> constexpr Datatype datatype_of<std::uint16_t>() noexcept { return Datatype::uint16; }
template <> constexpr Datatype datatype_of<std::uint32_t>() noexcept { return Datatype::uint32; }
template <> constexpr Datatype datatype_of<std::uint64_t>() noexcept { return Datatype::uint64; }
template <> constexpr Datatype datatype_of<float>() noexcept { return Datatype::float32; }
template <> constexpr Datatype datatype_of<double>() noexcept { return Datatype::float64; }
// clang-format on

/// @brief Built-in reduction operators (bitwise ones on integer types only).
enum class Op : std::uint8_t { sum, prod, min, max, band, bor, bxor };
/// @brief Printable name ("sum", ...).
const char* to_string(Op op) noexcept;

/// @brief A user-defined reduction: `fn(a, b, dst, count)` computes
/// dst[i] = a[i] OP b[i] for `count` elements of `elem_size` bytes, where `a`
/// is the contribution of the lower ranks. `dst` may alias `a` or `b` exactly.
/// A non-commutative operator is applied in rank order, whatever the algorithm.
struct UserOp {
  std::function<void(const void* a, const void* b, void* dst, std::size_t count)> fn;
  std::size_t elem_size = 0;  ///< bytes per element, > 0
  bool commutative = true;
  std::string name = "user";
};

/// @brief Synchronization of one side (entry or exit) of a collective, after
/// the UPC collectives' MYSYNC / ALLSYNC flags (Mallon et al., "Scalable PGAS
/// Collective Operations in NUMA Clusters"). There is no NOSYNC: a rank cannot
/// move data before it called, and its future cannot complete before its part
/// is done, so "none" would mean exactly `mine`.
enum class SyncMode : std::uint8_t {
  mine,  ///< entry: my buffers are ready; exit: my part is done (the default)
  all,   ///< entry: every rank has entered; exit: every rank is done
};

/// @brief Entry and exit synchronization of a call.
struct Sync {
  SyncMode entry = SyncMode::mine;
  SyncMode exit = SyncMode::mine;
  /// Loose (default): data moves as soon as buffers are valid; the future
  /// completes when this rank's part is done; calls pipeline (Nishtala and Yelick).
  static constexpr Sync loose() noexcept { return {SyncMode::mine, SyncMode::mine}; }
  /// Strict: no data moves before every rank entered; no rank completes before all are done.
  static constexpr Sync strict() noexcept { return {SyncMode::all, SyncMode::all}; }
};

/// @brief Per-call options. Empty/zero fields take the communicator's
/// defaults, the tuning table and the STRATA_ALGO_<COLL> variables, in that order.
struct CollOptions {
  /// Algorithm name ("tree", "ring", "rd", "flat", ...; see docs/algorithms.md); empty = automatic.
  std::string algorithm;
  Sync sync = Sync::loose();
  /// Tree shapes per level as "host:K,package:K,numa:K,core:K" (any subset)
  /// where K is flat, binary, chain or a radix (2 = binomial); empty =
  /// defaults. "single:K" ignores the hierarchy.
  std::string tree;
  /// Fragmentation: "none", "fixed:BYTES" or "halves:THRESHOLD"; empty = default.
  std::string fragment;
  /// Direction for rooted collectives: "push" or "pull", or per level
  /// "host:pull,package:push,numa:push,core:pull"; empty = default.
  std::string direction;
  /// Every member's buffers of this call come from Engine::allocate() (must
  /// be equal on every member, like the other options). On a communicator
  /// whose members share one host, broadcast, scatter, gather, allgather,
  /// alltoall and reduce_scatter_block (not in place for the last two) then
  /// read each block straight out of its owner's buffer: one copy per block,
  /// no window staging (docs/algorithms.md, "Shared buffers"); a member's
  /// future completes once its own copies are done and nobody still reads
  /// its buffers. A buffer that is not from allocate() is still correct, read
  /// through CMA (slower). Ignored with an explicit algorithm, strict sync,
  /// across hosts, and by the other collectives.
  bool shared_buffers = false;
  /// alltoall / alltoallv only: application work put into the collective's
  /// graph. Runs as a compute node on the engine's executor with (source
  /// rank, address of the block from that source in the receive buffer, its
  /// bytes) as soon as that block has landed, while the rest of the exchange
  /// goes on (e.g. transform each block of an FFT transpose on arrival). An
  /// exception thrown by it fails the collective's future with its message.
  std::function<void(int source, void* block, std::size_t bytes)> on_block;
  /// Any collective: application work put into the collective's graph as one
  /// compute node that depends on nothing, so it starts with the call and
  /// runs on the engine's executor while the call's transfers go on (e.g. the
  /// interior of a stencil while the halo moves); the call's future completes
  /// after it and after every transfer. It must not block on strata futures.
  /// An exception thrown by it fails the collective's future with its
  /// message. The callable is bound per start (the call's plan is cached like
  /// any other); such calls never take the mapped or single-copy plans
  /// (docs/algorithms.md, "Application work inside a collective").
  std::function<void()> compute;
  /// Tagged collective (docs/embedding.md, "Tagged collectives"): with tag
  /// T >= 0 the call matches the other members' calls with tag T, the k-th
  /// with the k-th, whatever the order of calls with other tags and of
  /// untagged calls on this rank; so tasks that run in a different order on
  /// every rank may each use their own tag on one communicator. T must be
  /// below the tag count the communicator was made with (split / dup);
  /// -1 (the default): untagged, matched in issue order.
  int tag = -1;
};

}  // namespace strata
