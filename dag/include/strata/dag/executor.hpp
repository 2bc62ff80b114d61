// The executor: runs instances of Plans over oneTBB and a Transport.
//
// Each instance has a communicator id and a sequence number; its per-node
// state (atomic dependency counters) lives in one allocation together with
// its scratch buffers. Local nodes run as TBB tasks in the executor's arena
// (cheap nodes run inline in the releasing thread; the last ready successor
// of a node runs in the same task, so chains cost no spawn); remote nodes are
// posted to the Transport with their node state as completion context.
// Completions and signals release successors.
//
// Signal payload (64 bits, see encode_signal): bits 63..48 communicator id,
// bits 47..20 sequence number modulo 2^28, bit 19 "drained" (the sender had
// finished every earlier instance of the communicator: a grant carried for
// free, see Executor::bind_flags), bits 18..0 slot. Signals for an instance
// that has not started on this rank are kept until it starts.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <oneapi/tbb/task_arena.h>

#include "strata/dag/plan.hpp"
#include "strata/error.hpp"
#include "strata/transport/transport.hpp"

namespace strata {
namespace dag {

/// @brief Sequence numbers travel modulo 2^28.
inline constexpr std::uint32_t kSeqMask = (1u << 28) - 1;

/// @brief Decoded signal payload.
struct SignalKey {
  std::uint16_t comm = 0;
  std::uint32_t seq = 0;
  std::uint32_t slot = 0;
  bool drained = false;  ///< the sender had finished every instance of comm before seq
};

/// @brief Payload bit of a signal whose sender had finished every earlier
/// instance of the communicator when it sent it (its drain watermark is seq).
inline constexpr std::uint64_t kDrainedBit = std::uint64_t{1} << 19;

/// @brief Packs (communicator, sequence, slot) into a transport signal payload.
///
/// @code
/// auto p = strata::dag::encode_signal(3, 17, 5);
/// auto k = strata::dag::decode_signal(p);  // k.comm == 3, k.seq == 17, k.slot == 5
/// @endcode
constexpr std::uint64_t encode_signal(std::uint16_t comm, std::uint32_t seq, std::uint32_t slot) noexcept {
  return (std::uint64_t{comm} << 48) | (std::uint64_t{seq & kSeqMask} << 20) | std::uint64_t{slot & kMaxSlot};
}
/// @brief Inverse of encode_signal.
constexpr SignalKey decode_signal(std::uint64_t payload) noexcept {
  return {static_cast<std::uint16_t>(payload >> 48), static_cast<std::uint32_t>((payload >> 20) & kSeqMask),
          static_cast<std::uint32_t>(payload & kMaxSlot), (payload & kDrainedBit) != 0};
}

/// @brief Signal tags (in the communicator field) of grant messages:
/// a rank's flag word sent to a peer on another host that keeps a copy of it
/// (kGrantComm), and a peer's request for one when its copy was late
/// (kGrantRequestComm). Communicator ids of plans stay below both.
inline constexpr std::uint16_t kGrantComm = 0xFFFD;
inline constexpr std::uint16_t kGrantRequestComm = 0xFFFC;
/// @brief Signal tag of a watermark grant: the sender finished every instance
/// of the communicator before `value` (slot field unused; see Executor::bind_flags).
inline constexpr std::uint16_t kWatermarkComm = 0xFFFB;
/// @brief Flag words a grant can name (4 bits): window slots per communicator.
inline constexpr std::uint32_t kMaxGrantSlots = 16;

/// @brief Failed calls whose members are all alive (Executor, "Failed calls"):
/// the origin announces instance (comm, seq) to every member (notice), each
/// member acknowledges once its own instance is marked failed (ack), and when
/// all have, the origin tells everyone to settle (settle): each then raises its
/// instance's flag words as a finished instance would, so the window slot's
/// next user does not wait forever, and completes it with the error.
inline constexpr std::uint16_t kAbortNoticeComm = 0xFFFA;
inline constexpr std::uint16_t kAbortAckComm = 0xFFF9;
inline constexpr std::uint16_t kAbortSettleComm = 0xFFF8;
/// @brief Signal tag of a hang-report request (the engine's watchdog asks the
/// other ranks for their reports when one of its calls is pending for
/// STRATA_TIMEOUT; docs/reliability.md, "Hang reports"). The executor ignores it.
inline constexpr std::uint16_t kReportRequestComm = 0xFFF7;
/// @brief Signal tag of a heartbeat between ranks on different hosts (the
/// engine's watchdog; docs/reliability.md, "Detection without the launcher").
inline constexpr std::uint16_t kHeartbeatComm = 0xFFF6;
/// @brief Signal tag of revoke and shrink messages between the members of a
/// communicator (engine/src/shrink.cpp; docs/reliability.md, "Revoke and
/// shrink"). The executor ignores it.
inline constexpr std::uint16_t kShrinkComm = 0xFFF5;
/// @brief The lowest signal tag: communicator ids of plans stay below it.
inline constexpr std::uint16_t kFirstSignalTag = kShrinkComm;

/// @brief Decoded notice / ack / settle payload: bits 63..48 tag, 47..20
/// sequence number, 19..16 the error code (notice), 15..0 communicator.
struct AbortKey {
  std::uint16_t tag = 0;
  std::uint16_t comm = 0;
  std::uint32_t seq = 0;
  Errc code = Errc::ok;
};
constexpr std::uint64_t encode_abort(std::uint16_t tag, std::uint16_t comm, std::uint32_t seq, Errc code) noexcept {
  return (std::uint64_t{tag} << 48) | (std::uint64_t{seq & kSeqMask} << 20) |
         (std::uint64_t{static_cast<std::uint32_t>(code) & 15u} << 16) | std::uint64_t{comm};
}
constexpr AbortKey decode_abort(std::uint64_t payload) noexcept {
  return {static_cast<std::uint16_t>(payload >> 48), static_cast<std::uint16_t>(payload & 0xFFFF),
          static_cast<std::uint32_t>((payload >> 20) & kSeqMask), static_cast<Errc>((payload >> 16) & 15u)};
}

/// @brief Decoded grant payload: bits 63..48 tag, 47..32 communicator,
/// 31..28 flag word, 27..0 value (grant: the flag; request: the value needed).
struct GrantKey {
  std::uint16_t tag = 0;
  std::uint16_t comm = 0;
  std::uint32_t slot = 0;
  std::uint32_t value = 0;
};
constexpr std::uint64_t encode_grant(std::uint16_t tag, std::uint16_t comm, std::uint32_t slot,
                                     std::uint32_t value) noexcept {
  return (std::uint64_t{tag} << 48) | (std::uint64_t{comm} << 32) | (std::uint64_t{slot & (kMaxGrantSlots - 1)} << 28) |
         std::uint64_t{value & kSeqMask};
}
constexpr GrantKey decode_grant(std::uint64_t payload) noexcept {
  return {static_cast<std::uint16_t>(payload >> 48), static_cast<std::uint16_t>(payload >> 32),
          static_cast<std::uint32_t>((payload >> 28) & (kMaxGrantSlots - 1)),
          static_cast<std::uint32_t>(payload & kSeqMask)};
}

/// @brief Remote key of buffer @p id registered by @p rank.
struct PeerKey {
  int rank = -1;
  std::uint32_t id = 0;
  transport::RemoteKey key;
  /// The buffer's start as mapped into this process (Transport::map_peer), or
  /// nullptr. Required for the buffers a plan reads directly (mapped reads:
  /// copy / reduce nodes with a peer source, Plan::mapped_reads()).
  void* mapped = nullptr;
};

/// @brief Addresses bound to a plan's symbolic buffers for one instance:
/// inputs[i] is user input i, outputs[i] user output i, peers name the
/// peer buffers. Sizes must cover the plan's declarations. Scratch is
/// allocated by the executor.
struct Bindings {
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
  std::vector<PeerKey> peers;
  /// When non-null, used instead of @p peers (no copy per start); must stay
  /// valid for the duration of Executor::start only.
  const std::vector<PeerKey>* peer_table = nullptr;
  /// Flag words of the memory-protocol nodes (flag_wait / flag_set): flags[r]
  /// is world rank r's array of flag words as mapped in this process (this
  /// rank's own for flag_set), nullptr where not mapped; @p nflags entries.
  /// Required when the plan uses flags; must outlive every instance started with it.
  std::atomic<std::uint32_t>* const* flags = nullptr;
  std::size_t nflags = 0;
  /// Word offset, in every rank's flag block, of its wake words: word
  /// flag_wake is "somebody waits", word flag_wake + 1 + r is "world rank r
  /// waits" (a flag_wait that finds its flag unset raises both, a flag_set
  /// that finds them raised nudges the waiters; see ExecutorOptions::nudge).
  std::uint32_t flag_wake = 0;
  /// Optional shadows of same-host peers' flag words: flag_shadows[r] is this
  /// rank's copy of world rank r's first @p shadow_words flag words (nullptr:
  /// none; never this rank's own), each entry `observer seq << 32 | value`,
  /// zero-initialized. A flag_wait on such a word first looks at the copy: a
  /// flag value only grows, so a recent observation that shows the flag
  /// reached proves it without touching the owner's cache line (in a loop,
  /// the credit check of a slot finds it there: the previous calls saw the
  /// peer finish it). Otherwise it reads the owner's words of that cache line
  /// and refreshes the copy. Must outlive every instance started with it.
  std::atomic<std::uint64_t>* const* flag_shadows = nullptr;
  std::uint32_t shadow_words = 0;
  /// Bytes (a multiple of 4) by which this instance moves what its plan marks
  /// relative (Node::relative): peer regions of kRelPeerRegions nodes, the
  /// flag word of kRelFlagWord nodes and the first refresh word of
  /// kRelRefreshFirst nodes (shift / 4 words). One plan then serves every
  /// slot of a ring of same-sized slots; the caller keeps the moved regions
  /// inside the declared peer buffers. Bound per start, like the outputs.
  std::uint64_t shift = 0;
  /// The callable of the plan's bound compute nodes (PlanBuilder::compute_bound),
  /// bound per start like the outputs; must outlive the instance. Required
  /// when the plan has bound compute nodes.
  const BoundComputeFn* compute = nullptr;
  /// Identity of everything here except @p inputs, @p outputs and @p compute (the peer
  /// table's contents, the flag, wake and shadow words); 0 = none. A start
  /// whose nonzero stamp equals the one its plan's last finished instance on
  /// this executor had reuses that instance's resolved and checked peer and
  /// scratch bindings (a pre-built instance: only the inputs and outputs are
  /// bound again). The caller guarantees that equal stamps mean equal contents.
  std::uint64_t stamp = 0;
};

/// @brief One in-flight instance, as Executor::pending_report sees it.
struct PendingCall {
  std::uint16_t comm = 0;
  std::uint32_t seq = 0;
  std::string collective;   ///< the plan's name
  std::uint64_t bytes = 0;  ///< the largest input / first output buffer
  std::int64_t age_ms = 0;  ///< since a pending_report first saw it in flight (no clock read per start)
  bool failed = false;      ///< failed, still draining (or waiting to settle)
  /// What it waits for, one line per node: signal waits, flag waits.
  std::vector<std::string> waiting;
  std::vector<int> peers;  ///< the ranks those nodes wait on
};

/// @brief Called once when an instance finishes: OK, or the first failure's cause.
using DoneFn = std::function<void(const Status&)>;

/// @brief Executor construction options.
struct ExecutorOptions {
  /// Arena to run in (shared with the application); null = the executor owns one.
  tbb::task_arena* arena = nullptr;
  /// Threads of the owned arena (0 = oneTBB default).
  int threads = 0;
  /// Install the transport's completion, signal and peer-failure handlers
  /// (false: the owner forwards events to handle_*()).
  bool install_handlers = true;
  /// Copies and reductions up to this many bytes run inline in a releasing
  /// thread outside the arena (progress/handler threads); larger ones become
  /// tasks, except in a serial arena (Executor::serial) where all run inline.
  std::size_t inline_bytes = 4096;
  /// A straight start (a plan of memory nodes) whose flag is not there yet
  /// looks again up to this many times, a CPU pause between looks, before it
  /// publishes the instance, but only while no other instance is in flight in
  /// this executor (a call waited for at once, not one of a stream). A peer
  /// that arrives within those ~0.2-0.3 us saves the publication and the
  /// waiter's completion path (2-rank 8 B allreduce 0.47 -> 0.40 us); a
  /// stream of loose calls never spins (docs/dag.md, "Waiting").
  int start_spins = 16;
  /// In a serial arena (Executor::serial: one thread's worth of CPU, a rank
  /// bound to one core), compute nodes (CollOptions::compute, on_block, a
  /// plan's own) run in the thread that has the core instead of waking the
  /// arena's worker, which could only take that same core: a root compute node
  /// runs at the end of its start, after the start posted every transfer;
  /// one released in a thread waiting for the executor's work
  /// (a WaiterScope, inside Future::get) runs there once the thread stops
  /// polling the transport. Elsewhere, and with false, they are tasks.
  /// docs/dag.md, "Compute nodes on one core".
  bool inline_compute = true;
  /// Wake-up for a rank whose flag_wait found its flag unset (its progress
  /// threads may sleep): the executor sends this signal payload with this
  /// completion context to that rank after the flag is set. The owner routes
  /// both to nothing (the signal only wakes the target's progress, which calls
  /// poll()). payload 0: no nudges (the caller polls, e.g. fake transports).
  std::uint64_t nudge_payload = 0;
  void* nudge_context = nullptr;
  /// Trace file prefix; empty = the STRATA_TRACE environment variable (unset = no tracing).
  /// Each rank writes <prefix>.<rank>.json (one Chrome trace event per line;
  /// the executor truncates it when it starts and appends at every flush).
  std::string trace_path;
};

/// @brief Runs plan instances; thread-safe: start, cancel and the handle_*
/// entry points may be called from any thread.
///
/// Failed calls. A failure that leaves every member alive (a user reduction
/// operator or an alltoall `on_block` callable that threw) is announced: the
/// instance stops moving data like any failed instance, and its rank sends a
/// notice to every member of the plan (Plan::members()). Each member marks
/// its instance of the same (comm, seq) failed (or remembers to fail it when
/// it starts) and answers; once all have answered, the origin sends settle.
/// Only then does any member raise the flag words the instance would have
/// raised and complete it with an error naming the origin rank and the call:
/// no member can read data of the failed call as valid, and the window
/// slot's next user finds its flags. A member whose instance had completed
/// before the notice keeps its (correct) result. A member that dies meanwhile
/// ends the protocol (its communicators fail as for any death). Transport
/// failures and dead peers fail the instance without the protocol.
///
/// @code
/// strata::transport::FakeWorld world(1, strata::transport::FakeMode::auto_complete);
/// strata::dag::Executor ex(world.endpoint(0));
/// strata::dag::PlanBuilder b("copy", 0, 1);
/// b.input(0, 8).output(0, 8);
/// b.copy(strata::dag::in(0, 0, 8), strata::dag::out(0, 0, 8));
/// auto plan = b.build();
/// char src[8] = "abcdefg", dst[8];
/// std::atomic<bool> done{false};
/// strata::dag::Bindings bind{{src}, {dst}, {}};
/// strata::throw_if_error(ex.start(plan, bind, /*comm=*/0, /*seq=*/0, [&](const strata::Status&) { done = true; }));
/// while (!done) world.progress_all();
/// @endcode
class Executor {
 public:
  /// @param t the transport (must outlive the executor)
  /// @param opts options
  explicit Executor(transport::Transport& t, ExecutorOptions opts = {});
  /// Cancels what is in flight and drives the transport until every instance
  /// has finished (bounded: after 10 s the remaining instances are leaked, not freed).
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// @brief Starts an instance of @p plan under (@p comm, @p seq).
  /// @return an error (and @p done is never called) when the bindings do not
  /// fit the plan, the sequence is already in flight or a peer of the plan is
  /// dead; OK otherwise, and @p done runs exactly once (possibly before start returns).
  /// @param ended_inline when not null: an instance that runs every node and
  /// completes without failing inside this call does not call @p done;
  /// `*ended_inline` is set to true instead, and the caller ends the call
  /// itself (its per-call cost without a callback). Otherwise (false) @p done
  /// runs exactly once as above.
  Status start(std::shared_ptr<const Plan> plan, const Bindings& bindings, std::uint16_t comm, std::uint32_t seq,
               DoneFn done, bool* ended_inline = nullptr);
  /// @brief Bytes of one instance's memory block of @p plan (instance state,
  /// node states, buffer bindings, scratch slots). A plan that has run keeps
  /// one such block for its next start (freed with the plan), so a cache of
  /// plans holds up to this much per plan beyond Plan::footprint_bytes().
  [[nodiscard]] static std::size_t instance_bytes(const Plan& plan) noexcept;
  /// @brief Next sequence number of communicator @p comm (0, 1, ...), for callers that do not keep their own.
  std::uint32_t next_seq(std::uint16_t comm);
  /// @brief Advisory cancellation: the instance stops launching nodes and
  /// finishes with Errc::cancelled once its posted operations completed.
  /// @return false if no such instance is in flight.
  bool cancel(std::uint16_t comm, std::uint32_t seq);
  /// @brief Completes the flag_wait nodes whose flag is now set (and those of
  /// failed instances); returns how many. Cheap when none is pending (one
  /// atomic load). Call it from every progress loop (the engine installs it
  /// as part of the transport's progress hook); never blocks (skips when
  /// another thread is polling).
  std::size_t poll();

  /// @brief A thread of this rank that drives progress is about to block
  /// (true) or runs again (false). A flag_wait that finds its flag unset asks
  /// the owner for a nudge (ExecutorOptions::nudge_payload) only while some
  /// such thread blocks; park(true) asks for every pending one, then looks
  /// again (a Dekker pair with the owner's flag_set, so no wake-up is lost).
  /// While nothing blocks, the pollers see the flag themselves and the owner
  /// sends nothing (a nudge costs both sides a transport message).
  void park(bool parking);
  /// @brief Registers the flag table of communicator @p comm for grants
  /// (PlanBuilder::flag_wait with `granted`): @p table[r] is world rank r's
  /// flag words as seen here: this rank's own block, and for peers on other
  /// hosts a local copy that their grants update (@p n entries; at most
  /// kMaxGrantSlots words per block are named). This rank answers requests
  /// from its own block. nullptr unregisters (before the table goes; grants
  /// for an unregistered communicator are dropped).
  void bind_flags(std::uint16_t comm, std::atomic<std::uint32_t>* const* table, std::size_t n);
  /// @brief bind_flags with drain watermarks (grants carried by signals).
  /// @p copies[r] != 0 marks @p table[r] as a local copy of a peer on another
  /// host (at least @p credits words). This rank then tracks which instances
  /// of @p comm finished (from @p next_seq, the communicator's next sequence
  /// number; nothing of @p comm may be in flight), and every signal it sends
  /// for instance `seq` carries kDrainedBit when every instance before `seq`
  /// had finished (never again once a start failed or completions ran more
  /// than 64 instances apart). A receiver raises every word (< @p credits) of
  /// its copy of the sender to such a `seq`: a word w means "finished the
  /// slot's instances up to w - 1", which finishing all of them implies, so a
  /// granted flag_wait needs nothing else. With @p credits >= 2 an
  /// instance that completes with nothing of @p comm left unfinished skips
  /// its grants to the peers it signalled: its next signal to them carries
  /// the grant (a peer that needs it earlier asks, as for a late grant); to
  /// the other peers it owes one watermark grant (kWatermarkComm) every
  /// credits / 2 instances instead of one grant per instance, sent when a
  /// later instance that does not signal the peer starts or a thread of this
  /// rank is about to block (park), and dropped when a drained signal to the
  /// peer says as much first: never on the completing caller's way back.
  /// Saves one message per instance per remote peer in lock-step loops.
  /// @p vouch (0: off; else below @p credits, a power of two): every member
  /// starts at most @p vouch instances of @p comm at once, in sequence order,
  /// so instance u starts only after u - vouch finished. A signal of a
  /// peer's instance u then raises the copy's word of window slot
  /// (u - vouch) % credits to u - vouch + 1, and an instance skips its grants
  /// to the peers its plan signals (the signals of its successor vouch calls
  /// later carry them). In a loose stream of symmetric collectives no grant
  /// travels: a call u + credits needs the peer's u finished, which the
  /// peer's signal of u + vouch (<= credits / 2 later) proves, and that
  /// signal arrived before this rank finished its own u + vouch.
  void bind_flags(std::uint16_t comm, std::atomic<std::uint32_t>* const* table, std::size_t n,
                  std::vector<std::uint8_t> copies, std::uint32_t credits, std::uint32_t next_seq,
                  std::uint32_t vouch = 0);
  /// @brief Instances started and not yet finished.
  [[nodiscard]] std::size_t in_flight() const;
  /// @brief The instances seen in flight by an earlier call at least @p
  /// older_than_ms ago (the engine's watchdog calls it every second, so its
  /// ages are at most a second short), with the
  /// nodes each still waits on (hang forensics; sorted by communicator and
  /// sequence number). Takes the shard locks briefly; not for hot paths.
  [[nodiscard]] std::vector<PendingCall> pending_report(std::int64_t older_than_ms = 0);
  /// @brief Nodes handed to the arena as oneTBB tasks so far (the others ran
  /// inline in the thread that made them ready).
  [[nodiscard]] std::uint64_t tasks_spawned() const noexcept;
  /// @brief Whether the arena has a single thread (max_concurrency 1, e.g. a
  /// rank bound to one core): then copies, reductions and single-copy reads
  /// of every size run inline where they become ready (ExecutorOptions::
  /// inline_bytes does not apply), since a task could only take the core the
  /// releasing thread holds; compute nodes still become tasks.
  [[nodiscard]] bool serial() const noexcept;
  /// @brief Whether nodes that take a while (compute nodes; copies,
  /// reductions and single-copy reads of 64 KiB or more) are running right
  /// now on as many threads as the arena has CPUs for (one, for a rank bound
  /// to a core). A thread waiting for a future then sleeps instead of
  /// polling: its polling would only take the CPU from that work (the
  /// engine's wait hook; docs/dag.md, "Waiting").
  [[nodiscard]] bool cores_busy() const noexcept;

  /// @brief Transport event entry points (installed as handlers by default).
  void handle_completion(void* context, const Status& status);
  void handle_signal(int source, std::uint64_t payload);
  void handle_peer_failure(int peer, const Status& why);

  [[nodiscard]] tbb::task_arena& arena() noexcept;
  [[nodiscard]] transport::Transport& transport() noexcept;
  /// @brief Writes the trace events recorded so far (no-op without tracing).
  void flush_trace();
  /// @brief True when this executor writes a trace (trace_path or STRATA_TRACE).
  [[nodiscard]] bool tracing() const noexcept;
  /// @brief Records an event that is not a node of a plan (e.g. a fast-path
  /// call) in the calling thread's trace buffer: a Chrome "X" event of
  /// category @p cat and name @p name (both JSON-escaped when written) from
  /// @p start_ns to @p end_ns (trace_now_ns() clock), with args seq and, when
  /// @p peer >= 0, peer. No-op without tracing.
  void trace_event(const std::string& cat, const std::string& name, std::uint64_t start_ns, std::uint64_t end_ns,
                   std::uint32_t seq = 0, std::int64_t peer = -1);
  /// @brief The trace clock: steady_clock in nanoseconds.
  static std::uint64_t trace_now_ns() noexcept;

  struct Impl;

 private:
  friend class WaiterScope;
  Status start_unchecked(std::shared_ptr<const Plan>&& plan, const Bindings& bindings, std::uint16_t comm,
                         std::uint32_t seq, DoneFn&& done, bool* ended_inline);
  std::unique_ptr<Impl> impl_;
};

namespace exec {
struct Instance;
}  // namespace exec

/// @brief Internal: compute nodes a thread keeps to run itself
/// (ExecutorOptions::inline_compute): a start's, run after it launched every
/// root; a WaiterScope's, run once its thread stops polling.
struct DeferredCompute {
  const Executor::Impl* im = nullptr;
  std::vector<std::pair<exec::Instance*, NodeId>> nodes;
};

/// @brief The calling thread waits for @p ex's work while this lives (the
/// engine makes one around a Future::get spin). In a serial arena with
/// ExecutorOptions::inline_compute, compute nodes that become ready in this
/// thread (an on_block whose block landed during the thread's poll) are kept
/// here instead of waking the arena's worker, which could only take this
/// thread's core; run() executes them in this thread, to be called outside
/// any transport poll so that the progress servers may run meanwhile. The
/// destructor hands what is left to the arena. Not copyable; nests.
class WaiterScope {
 public:
  /// @param ex the executor (null: a scope that keeps nothing)
  explicit WaiterScope(Executor* ex) noexcept;
  ~WaiterScope();
  WaiterScope(const WaiterScope&) = delete;
  WaiterScope& operator=(const WaiterScope&) = delete;
  /// True when compute nodes wait for run().
  [[nodiscard]] bool pending() const noexcept { return !kept_.nodes.empty(); }
  /// Runs the kept nodes in this thread (and those they release, kept again
  /// and run in turn) until none is left; returns how many ran.
  std::size_t run();

 private:
  Executor* ex_ = nullptr;
  const void* prev_waiter_ = nullptr;
  DeferredCompute* prev_defer_ = nullptr;
  DeferredCompute kept_;
};

}  // namespace dag
}  // namespace strata
