// The public entry point: Engine (one per rank) and Communicator.
//
// @code
//   #include <strata/strata.hpp>
//   int main() {
//     strata::Engine engine;                       // bootstraps (strata-run, PMIx or singleton)
//     strata::Communicator& world = engine.world();
//     std::vector<double> x(1024, world.rank()), y(1024);
//     auto f = world.allreduce(x.data(), y.data(), x.size(), strata::Datatype::float64, strata::Op::sum);
//     /* ... overlap work ... */
//     f.get();                                     // throws strata::Error on failure
//   }
// @endcode
//
// Ordering rule: collectives on one communicator must be called in the same
// order on every member (as in MPI); calls on different communicators are
// independent. A communicator may be used from several threads only if the
// threads agree on that order (in practice: one thread per communicator).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/collectives/tuning.hpp"
#include "strata/future.hpp"
#include "strata/transport/topology.hpp"
#include "strata/types.hpp"
#include "strata/window.hpp"

namespace strata {

class Bootstrap;
namespace detail {
struct EngineCore;
struct CommImpl;
struct PlanImpl;
}  // namespace detail

/// @brief A persistent collective (Ma et al.): compiled once, buffers registered
/// and their keys exchanged once, started many times. start() follows the same
/// ordering rule as the one-shot calls of its communicator.
///
/// @code
///   strata::Plan p = world.plan_allreduce(x.data(), y.data(), n, strata::Datatype::float64, strata::Op::sum);
///   for (int it = 0; it < iters; ++it) { fill(x); p.start().get(); use(y); }
/// @endcode
class Plan {
 public:
  Plan() = default;
  /// @brief False for a default-constructed plan.
  [[nodiscard]] bool valid() const noexcept { return impl_ != nullptr; }
  /// @brief Starts one execution; the buffers given at creation must be valid until the future completes.
  Future<void> start();
  /// @brief Internal handle.
  explicit Plan(std::shared_ptr<detail::PlanImpl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<detail::PlanImpl> impl_;
};

/// @brief Memory from Engine::allocate(): every rank on this host can read it
/// directly (a mapped shared-memory region), so collectives given
/// CollOptions::shared_buffers move each block once, straight from the
/// owner's buffer into the reader's (docs/algorithms.md, "Shared buffers").
/// A handle: copies share the memory, which is released when the last copy
/// goes (also after the engine is gone). Zeroed, page-aligned.
///
/// @code
///   strata::SharedMemory sb = engine.allocate(n * sizeof(float)), rb = engine.allocate(2 * n * sizeof(float));
///   strata::CollOptions o;
///   o.shared_buffers = true;
///   world.allgather(sb.as<float>(), n, rb.as<float>(), strata::Datatype::float32, o).get();
/// @endcode
class SharedMemory {
 public:
  SharedMemory() = default;
  /// @brief First byte (nullptr for a default-constructed handle).
  [[nodiscard]] void* data() const noexcept { return data_; }
  /// @brief The memory as @p T*.
  template <class T>
  [[nodiscard]] T* as() const noexcept {
    return static_cast<T*>(data_);
  }
  /// @brief Bytes allocated.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// @brief True when same-host peers can map it; false when the engine had
  /// no same-host peer or shared memory was refused (then it is private
  /// memory and shared_buffers collectives reach it through CMA).
  [[nodiscard]] bool shared() const noexcept { return shared_; }
  /// @brief Internal: @p hold keeps the memory.
  SharedMemory(std::shared_ptr<void> hold, void* data, std::size_t size, bool shared)
      : hold_(std::move(hold)), data_(data), size_(size), shared_(shared) {}

 private:
  std::shared_ptr<void> hold_;
  void* data_ = nullptr;
  std::size_t size_ = 0;
  bool shared_ = false;
};

/// @brief Engine construction options; from_environment() reads the STRATA_* variables.
///
/// Threads (docs/embedding.md): collectives are posted by the calling thread
/// and driven by progress-server threads (progress_threads > 0) or, in inline
/// mode, by the threads that wait. User reduction operators (UserOp::fn) run
/// as tasks in the executor's arena, or, for small inputs (up to
/// inline_bytes, among them every small-message call), directly in the thread
/// that makes them ready: a progress-server thread, an arena worker or a
/// thread inside Future::get()/wait(). Future::then continuations run as tasks
/// in the executor's arena; Future::on_complete callbacks run in the
/// completing thread (no task). None of these may block on strata futures
/// except then continuations and arena tasks (they suspend, see future.hpp).
/// @brief Severity of a line of strata's log (EngineOptions::log_sink).
enum class LogLevel { trace, debug, info, warn, error, critical };

struct EngineOptions {
  int progress_threads = 1;  ///< STRATA_PROGRESS_THREADS: communication servers, 0 = inline mode
  int worker_threads = 0;    ///< STRATA_THREADS: executor arena threads, 0 = oneTBB default
  /// The application's oneTBB arena for the executor (collective fragments,
  /// large copies and reductions, on_block and compute nodes, then()
  /// continuations): null = the engine creates its own arena of
  /// worker_threads threads (worker_threads is ignored when an arena is given).
  /// The arena must outlive the Engine; the engine initializes it if needed and
  /// never terminates it. Sharing it lets oneTBB balance the application's
  /// tasks and the collectives' on the same threads (docs/embedding.md).
  tbb::task_arena* arena = nullptr;
  std::size_t slot_bytes = 1u << 20;  ///< STRATA_SLOT_BYTES: window bytes per in-flight collective, 4096 .. 2^32
  /// STRATA_CREDITS: collectives in flight per communicator, a power of two in
  /// [1, 64] (window slot = call number % credits must survive the call
  /// numbers' wrap-around). The Engine refuses other values with an error.
  int credits = 4;
  bool check = false;  ///< STRATA_CHECK=1: cross-rank argument signature check
  /// STRATA_INLINE_BYTES: copies and reductions up to this size run in the
  /// thread that made them ready (progress server or waiter) instead of as a
  /// oneTBB task: a task hand-off costs tens of microseconds on a busy core.
  std::size_t inline_bytes = 1u << 20;
  /// STRATA_PLAN_CACHE_BYTES: byte budget of the engine's plan cache, shared
  /// by all its communicators, least recently used plans evicted first
  /// (Plan::footprint_bytes plus the instance block a plan keeps; a plan
  /// larger than the budget is not cached; 0 caches nothing). Evicting drops
  /// only the cache's reference: calls running it and persistent plans keep
  /// theirs (docs/algorithms.md, "Plan cache").
  std::size_t plan_cache_bytes = std::size_t{64} << 20;
  /// STRATA_WINDOW_BUDGET: bytes of communicator windows this rank registers
  /// before new communicators get smaller window slots. A new communicator
  /// (split, dup, create) takes the largest slot, halving from its parent's,
  /// whose window (credits x slot, its tag lane's too) fits what every member
  /// has left of its budget, but not below 64 KiB (nor below slot_bytes when
  /// that is smaller): the budget bounds the windows of communicators created
  /// within it and slows down the calls of those created beyond it (more
  /// fragments per message), never fails them. Windows of live communicators
  /// are not shrunk. 0 = no budget (docs/algorithms.md, "Window memory").
  std::size_t window_budget = std::size_t{1} << 30;
  /// Receives every line of strata's log that STRATA_LOG_LEVEL lets through
  /// (default warn), formatted as on stderr or in STRATA_LOG_FILE
  /// ("[time] [host rank R pid P] [level] message", no trailing newline), in
  /// addition to them; empty = none. Called from any strata thread (progress
  /// servers, executor workers, the caller) and under the logger's lock: keep it
  /// short and do not call strata from it. Installed before the bootstrap,
  /// topology and transport lines of this engine's start-up, removed when the
  /// Engine is destroyed (docs/embedding.md, "Logging").
  std::function<void(LogLevel level, const std::string& line)> log_sink;
  /// Reads the environment over the defaults; throws strata::Error naming a malformed variable.
  static EngineOptions from_environment();
};

/// @brief Options of Communicator::split_async() and dup_async().
struct CreateOptions {
  /// The creation's own calls on the parent carry this tag (CollOptions::tag):
  /// creations with distinct tags, started in any order on the members (one
  /// task each), match by tag, like tagged collectives. The tag is the
  /// creation's until its future completes: later calls with it on this rank
  /// wait behind it (docs/embedding.md, "Nonblocking communicator creation").
  /// -1 (the default): untagged, matched in issue order like an untagged
  /// collective; untagged calls posted on the parent after it wait behind it.
  int tag = -1;
  /// Tags the new communicator takes (split()'s @p tags).
  int tags = 0;
};

/// @brief A group of ranks that run collectives together (a handle: copies
/// share the communicator). Every collective is nonblocking and returns a
/// Future<void> that completes when this rank's part is done (loose sync) or
/// when every rank is done (strict exit sync); buffers must stay valid until then.
///
/// Counts are in elements of the datatype. Errors in arguments throw
/// strata::Error (Errc::invalid_argument / unsupported) naming the argument, the
/// collective and the rank, before anything moves.
class Communicator {
 public:
  Communicator() = default;
  /// @brief False for a default-constructed handle or a split with a negative color.
  [[nodiscard]] bool valid() const noexcept { return impl_ != nullptr; }
  /// @brief This rank's index in the communicator.
  [[nodiscard]] int rank() const;
  /// @brief Number of ranks.
  [[nodiscard]] int size() const;
  /// @brief World rank of communicator rank @p r.
  [[nodiscard]] int world_rank(int r) const;
  /// @brief Communicator id (unique on every member; used in signal matching).
  [[nodiscard]] std::uint16_t id() const;

  /// @brief Splits like MPI_Comm_split (collective, blocking: split_async().get();
  /// on one rank, at most 65,533 communicators may exist at once: ids are 16
  /// bits and reused after free, past that it throws Errc::unsupported naming
  /// the limit): ranks with equal
  /// @p color form a communicator, ordered by (@p key, rank). color < 0 returns
  /// an invalid handle. @p tags > 0 also gives the new communicator a lane of
  /// its own for tagged calls with CollOptions::tag in [0, tags) (a second
  /// window of the next power of two >= @p tags slots; docs/embedding.md,
  /// "Tagged collectives"); the largest value among the members of a color
  /// counts. Throws strata::Error naming 'tags' and the rank when @p tags is
  /// negative or above 16.
  Communicator split(int color, int key, int tags = 0) const;
  /// @brief A new communicator with the same members (collective, blocking),
  /// with a lane for @p tags tags (split()).
  Communicator dup(int tags = 0) const;
  /// @brief split() without blocking (MPI_Comm_isplit's role): posts the
  /// creation and returns at once; the future gives the new communicator
  /// (invalid for a negative @p color) or the error (a dead member:
  /// Errc::peer_dead within STRATA_TIMEOUT). Its steps (an exchange of
  /// (color, key, tags), rounds of id agreement, an exchange of window keys)
  /// run on the parent as internal collectives, each posted by strata's own
  /// threads when the one before completed, never on the caller's thread:
  /// a task may call it and return. Creations from one parent may run
  /// concurrently; give each its own @p opts.tag when they may start in
  /// different orders on different members (ompi#2025). Argument errors
  /// throw strata::Error naming the argument and the rank before anything
  /// is posted.
  [[nodiscard]] Future<Communicator> split_async(int color, int key, const CreateOptions& opts = {}) const;
  /// @brief dup() without blocking: split_async(0, rank(), opts).
  [[nodiscard]] Future<Communicator> dup_async(const CreateOptions& opts = {}) const;
  /// @brief Tags this communicator takes (CollOptions::tag in [0, tags())); 0: none.
  [[nodiscard]] int tags() const;

  /// @brief Revokes the communicator (local, nonblocking; ULFM's
  /// MPI_Comm_revoke): every queued, running and later call on it fails with
  /// Errc::revoked here, and the revocation reaches every live member (each
  /// forwards it once), where the same happens. Use it when a call failed
  /// with Errc::peer_dead on some members only, so that every member stops
  /// and calls shrink(). Idempotent.
  void revoke();
  /// @brief Collective over the live members (ULFM's MPI_Comm_shrink): revokes
  /// this communicator, agrees with the other survivors on the members that
  /// failed (tolerating further deaths during the agreement: the lowest live
  /// member coordinates, and a new one takes over when it dies) and returns a
  /// new communicator of the survivors, ordered as here. Blocks until the
  /// agreement is reached: a member declared dead is detected within
  /// STRATA_TIMEOUT (docs/reliability.md, "Revoke and shrink"). A member that
  /// dies after the agreement leaves the new communicator with a dead member
  /// (its calls fail with Errc::peer_dead; shrink it in turn). Every survivor
  /// must call it, and keep this communicator until it returned everywhere.
  /// Once per communicator (Errc::unsupported for a second call); at most 744
  /// members; not concurrently with split() or dup() on this rank. Throws
  /// strata::Error (Errc::peer_dead) on a rank the survivors excluded.
  Communicator shrink();
  /// @brief Members (ranks of this communicator) this rank knows to be dead.
  [[nodiscard]] std::vector<int> failed_members() const;

  /// @brief Barrier (dissemination: ceil(log2 n) rounds of signals).
  Future<void> barrier(const CollOptions& opts = {});
  /// @brief Broadcasts @p count elements of @p buf from @p root.
  Future<void> broadcast(void* buf, std::size_t count, Datatype type, int root, const CollOptions& opts = {});
  /// @brief Reduces @p send of every rank into @p recv at @p root (recv ignored
  /// elsewhere). @p send may be strata::in_place at the root (recv holds its contribution).
  Future<void> reduce(const void* send, void* recv, std::size_t count, Datatype type, Op op, int root,
                      const CollOptions& opts = {});
  /// @brief reduce() with a user-defined operator (count in op.elem_size units).
  Future<void> reduce(const void* send, void* recv, std::size_t count, const UserOp& op, int root,
                      const CollOptions& opts = {});
  /// @brief Every rank gets the reduction of every rank's @p send in @p recv;
  /// @p send may be strata::in_place.
  Future<void> allreduce(const void* send, void* recv, std::size_t count, Datatype type, Op op,
                         const CollOptions& opts = {});
  /// @brief allreduce() with a user-defined operator.
  Future<void> allreduce(const void* send, void* recv, std::size_t count, const UserOp& op,
                         const CollOptions& opts = {});

  /// @brief Gathers @p count elements of every rank's @p send into @p recv at
  /// @p root, in rank order (recv holds size() * count elements; ignored elsewhere).
  /// At the root @p send may be strata::in_place (its block is already in recv).
  Future<void> gather(const void* send, std::size_t count, void* recv, Datatype type, int root,
                      const CollOptions& opts = {});
  /// @brief gather() with per-rank @p counts and @p displs (elements, into recv; significant at the root).
  Future<void> gatherv(const void* send, std::size_t count, void* recv, const std::vector<std::size_t>& counts,
                       const std::vector<std::size_t>& displs, Datatype type, int root, const CollOptions& opts = {});
  /// @brief Scatters block r (count elements) of @p send at @p root to rank r's
  /// @p recv. At the root @p recv may be strata::in_place.
  Future<void> scatter(const void* send, void* recv, std::size_t count, Datatype type, int root,
                       const CollOptions& opts = {});
  /// @brief scatter() with per-rank @p counts and @p displs (elements, into send; significant at the root).
  Future<void> scatterv(const void* send, const std::vector<std::size_t>& counts,
                        const std::vector<std::size_t>& displs, void* recv, std::size_t count, Datatype type, int root,
                        const CollOptions& opts = {});
  /// @brief Every rank gets every rank's @p count elements, in rank order
  /// (recv holds size() * count); @p send may be strata::in_place.
  Future<void> allgather(const void* send, std::size_t count, void* recv, Datatype type, const CollOptions& opts = {});
  /// @brief allgather() with per-rank @p counts and @p displs (elements, into recv).
  Future<void> allgatherv(const void* send, std::size_t count, void* recv, const std::vector<std::size_t>& counts,
                          const std::vector<std::size_t>& displs, Datatype type, const CollOptions& opts = {});
  /// @brief Block j (count elements) of @p send goes to rank j, where it lands
  /// as block i (i = this rank) of @p recv. @p send may be strata::in_place
  /// (the blocks are taken from recv, then overwritten).
  Future<void> alltoall(const void* send, void* recv, std::size_t count, Datatype type, const CollOptions& opts = {});
  /// @brief alltoall() with per-peer send and receive counts and displacements (elements).
  /// Rank i's send_counts[j] must equal rank j's recv_counts[i] (checked with STRATA_CHECK=1).
  /// @p send may be strata::in_place: send_counts / send_displs are then ignored and the
  /// receive counts and displacements describe both sides.
  Future<void> alltoallv(const void* send, const std::vector<std::size_t>& send_counts,
                         const std::vector<std::size_t>& send_displs, void* recv,
                         const std::vector<std::size_t>& recv_counts, const std::vector<std::size_t>& recv_displs,
                         Datatype type, const CollOptions& opts = {});
  /// @brief Reduces size() * count elements of every rank; rank r gets block r
  /// (count elements) of the result in @p recv. @p send may be strata::in_place:
  /// recv then holds the size() * count input elements and gets the result at its start.
  Future<void> reduce_scatter_block(const void* send, void* recv, std::size_t count, Datatype type, Op op,
                                    const CollOptions& opts = {});
  /// @brief reduce_scatter_block() with a user-defined operator.
  Future<void> reduce_scatter_block(const void* send, void* recv, std::size_t count, const UserOp& op,
                                    const CollOptions& opts = {});
  /// @brief Reduces sum(counts) elements; rank r gets counts[r] elements
  /// (starting at the sum of the counts before r) in @p recv. @p send may be
  /// strata::in_place: recv then holds the sum(counts) input elements.
  Future<void> reduce_scatter(const void* send, void* recv, const std::vector<std::size_t>& counts, Datatype type,
                              Op op, const CollOptions& opts = {});

  /// @brief A persistent plan of any collective (the MPI-4 `*_init` set and
  /// more: v-variants, user operators, `on_block`): @p post posts exactly one
  /// collective on this communicator, e.g.
  /// `[&](strata::Communicator& c) { return c.alltoallv(s, sc, sd, r, rc, rd, t); }`.
  /// Nothing moves then: the call is checked (every argument error is thrown
  /// here, naming the argument, the collective and the rank) and its algorithm
  /// resolved once; each start() runs it with the same buffers, counts and
  /// options, reading the buffers' contents at that start. Collective in the
  /// sense of the call it captures (every member makes the same plan, in the
  /// same order as its other calls on the communicator; creating it posts
  /// nothing). Throws strata::Error (invalid_argument) when @p post posts no
  /// collective, more than one, or one on another communicator. A start on a
  /// communicator with a dead member fails like a one-shot call; plans cannot
  /// be cancelled (a start runs to completion or fails).
  Plan plan(const std::function<Future<void>(Communicator&)>& post);
  /// @brief Persistent barrier.
  Plan plan_barrier(const CollOptions& opts = {});
  /// @brief Persistent broadcast (collective): receivers' buffers are
  /// registered and exchanged once; data is put straight into them (no window
  /// staging; one copy over libfabric RMA or CMA, through the ring between
  /// ranks of one host: docs/algorithms.md, "Persistent plans").
  Plan plan_broadcast(void* buf, std::size_t count, Datatype type, int root, const CollOptions& opts = {});
  /// @brief Persistent reduce (collective).
  Plan plan_reduce(const void* send, void* recv, std::size_t count, Datatype type, Op op, int root,
                   const CollOptions& opts = {});
  /// @brief Persistent allreduce (collective): the broadcast half writes straight into the receive buffers.
  Plan plan_allreduce(const void* send, void* recv, std::size_t count, Datatype type, Op op,
                      const CollOptions& opts = {});

  /// @brief Collective, blocking: exposes [@p base, @p base + @p bytes) of
  /// every member for one-sided put / put_signal / signal with counted waits
  /// (strata/window.hpp, docs/window.md). Sizes may differ between members;
  /// 0 bytes (signals only) is allowed. The memory must stay valid until the
  /// window is freed. Throws strata::Error naming the argument and the rank.
  Window create_window(void* base, std::size_t bytes);

  /// @brief Internal handle.
  explicit Communicator(std::shared_ptr<detail::CommImpl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<detail::CommImpl> impl_;
};

/// @brief Marker for in-place collectives (MPI_IN_PLACE).
extern const void* const in_place;

/// @brief One rank's strata runtime: bootstrap, topology, transports, progress
/// servers, the executor's oneTBB arena and the world communicator.
class Engine {
 public:
  /// @brief Bootstraps from the environment (strata-run, PMIx or a single rank).
  explicit Engine(EngineOptions opts = EngineOptions::from_environment());
  /// @brief Uses the given bootstrap (e.g. in-process ranks as threads).
  Engine(std::unique_ptr<Bootstrap> boot, EngineOptions opts);
  /// @brief Collective: waits for every rank, then shuts down (pending futures fail with Errc::shutdown).
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  [[nodiscard]] int rank() const noexcept;
  [[nodiscard]] int size() const noexcept;
  /// @brief The communicator of all ranks.
  [[nodiscard]] Communicator& world() noexcept;
  /// @brief The machine hierarchy and every rank's place on it.
  [[nodiscard]] const Hierarchy& hierarchy() const noexcept;
  /// @brief Transport description ("router(shm+ofi:...)").
  [[nodiscard]] std::string transport_name() const;
  /// @brief The tuning table in effect (docs/tuning.md): loaded once at start-up from
  /// STRATA_TUNING or the default location, the same on every rank.
  [[nodiscard]] const coll::Tuning& tuning() const noexcept;
  /// @brief Where the table came from: "PATH (STRATA_TUNING)", "PATH (default
  /// location)" or "built-in defaults (why)".
  [[nodiscard]] std::string tuning_source() const;
  /// @brief @p bytes of zeroed memory that every rank on this host maps (not
  /// collective: the peers map it from their progress). Collective buffers
  /// allocated here and passed with CollOptions::shared_buffers are read
  /// straight out of the owner's memory (one copy per block instead of two).
  /// When the last handle goes the peers are told to unmap it (nothing stays
  /// mapped per allocate/free; docs/reliability.md). Throws strata::Error naming 'bytes' and the
  /// rank when @p bytes is 0 or cannot be allocated.
  [[nodiscard]] SharedMemory allocate(std::size_t bytes);
  /// @brief Context for futures and continuations that run on the engine's arena.
  [[nodiscard]] std::shared_ptr<const FutureContext> future_context() const noexcept;
  /// @brief Hang forensics: this rank's communicators (id, size, the next
  /// call's sequence number, calls queued) and every call in flight with what
  /// it still waits for (signal waits with the ranks they come from, flag
  /// waits with the rank, word and values), one "strata-report rank R ..."
  /// line each. strata::report::merge() turns several ranks' reports into a
  /// summary ("rank 3 never posted allreduce #41 on communicator 2"). The
  /// engine also writes it by itself when a call is pending for
  /// STRATA_TIMEOUT and on SIGUSR2 (docs/reliability.md, "Hang reports").
  [[nodiscard]] std::string pending_report() const;
  /// @brief Advances progress once and returns at once (for a task runtime's
  /// idle hook): in inline progress mode (STRATA_PROGRESS_THREADS=0) it polls
  /// the executor's flag waits and the transport once, running what that
  /// completes on this thread (continuations, on_complete callbacks); with
  /// progress threads it only polls the flag waits (the threads drive the
  /// transport). Returns true when it handled something. Never blocks.
  bool progress();
  /// @brief Counters of this rank's progress servers since start-up (for
  /// tests and tools; docs/architecture.md, "Progress"): a server that sleeps
  /// while nothing can move adds one `sleeps` and about one `loops` per
  /// wake-up; a polling one adds a `loops` per poll. All zero in inline mode.
  struct ProgressStats {
    std::uint64_t loops = 0;   ///< transport polls by the servers (one per loop iteration)
    std::uint64_t sleeps = 0;  ///< times a server blocked on its wait object
    std::uint64_t events = 0;  ///< transport events the servers handled
  };
  /// @brief This rank's ProgressStats. Never blocks.
  [[nodiscard]] ProgressStats progress_stats() const noexcept;
  /// @brief Counters of this rank's plan cache since start-up
  /// (EngineOptions::plan_cache_bytes; docs/algorithms.md, "Plan cache"). A
  /// call whose window slot remembers its plan (a repeated call) does not
  /// reach the cache and counts neither a hit nor a miss.
  struct PlanCacheStats {
    std::uint64_t hits = 0;       ///< lookups that found the plan
    std::uint64_t misses = 0;     ///< lookups that compiled it
    std::uint64_t evictions = 0;  ///< plans dropped to fit the budget (a freed communicator's are not counted)
    std::size_t entries = 0;      ///< plans held now
    std::size_t bytes = 0;        ///< bytes held now (charged per plan, see plan_cache_bytes)
    std::size_t peak_bytes = 0;   ///< largest `bytes` so far
    std::size_t budget = 0;       ///< the budget in effect
  };
  /// @brief This rank's PlanCacheStats (takes the cache's lock briefly).
  [[nodiscard]] PlanCacheStats plan_cache_stats() const;
  /// @brief This rank's communicator windows against EngineOptions::window_budget.
  struct WindowStats {
    std::size_t bytes = 0;   ///< bytes of the windows of this rank's live communicators (lanes included)
    std::size_t budget = 0;  ///< EngineOptions::window_budget (0 = none)
  };
  /// @brief This rank's WindowStats. Never blocks.
  [[nodiscard]] WindowStats window_stats() const noexcept;

 private:
  std::shared_ptr<detail::EngineCore> core_;
  Communicator world_;
};

}  // namespace strata
