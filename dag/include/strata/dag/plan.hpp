// The DAG IR: one rank's slice of a collective (a Plan), built with a
// PlanBuilder, validated alone and across all ranks' slices, exported to DOT.
//
// Buffers are symbolic: user input i, user output i, scratch slot i (allocated
// per instance by the executor) and a peer's registered buffer (peer rank,
// buffer id). Regions are (buffer, offset, length); addresses are bound when
// an instance starts (see executor.hpp, Bindings).
//
// Node semantics:
//  - copy:   dst <- src (equal lengths; dst local)
//  - reduce: dst <- src OP src2 element-wise (equal lengths, multiple of the
//            element size; dst local); src is the left operand
//            Mapped reads: the source of a copy and either operand of a
//            reduce may be a peer region (a same-host peer's window, read
//            through this process's mapping of it: PeerKey::mapped); the node
//            must then depend directly on a flag_wait on that peer, which
//            orders the peer's writes before the read (memory plans,
//            docs/algorithms.md "Mapped plans")
//  - put:    peer region dst <- local src; completes when visible at the peer
//  - get:    local dst <- peer region src
//  - put_with_signal: put, then the peer's wait node on `slot` counts one signal
//  - signal: the peer's wait node on `slot` counts one signal
//  - wait:   ready when its local dependencies are done AND `count` signals
//            for `slot` arrived (from any ranks); may name the region the
//            signals guard (for on_fragment and coverage)
//  - compute: runs an application callable on a region
//  - flag_wait: memory protocol (no message): ready when its local
//            dependencies are done AND flag word `slot` of peer `peer`, read
//            through this process's mapping of the peer's window, shows that
//            the peer finished its instance seq - `count` (the previous user
//            of the same window slot): flag >= seq - count + 1 modulo 2^28
//            A `granted` flag_wait reads this process's copy of a peer on
//            another host's flag word instead (kept current by the peer's
//            grant messages); when the copy is late it asks the peer for a
//            grant (one message each way, only then)
//  - flag_set: memory protocol: stores seq + 1 into this rank's own flag word
//            `slot` (release), for the peers' flag_wait nodes; nothing when
//            the instance has no flag block of its own bound. Then sends the
//            new value to each rank of `grants` (peers on other hosts whose
//            granted flag_wait reads it) without waiting for the sends. Then
//            brings each of its own words in `refresh` up to seq + 1 unless
//            the word is already within 2^20 instances of it (one load, no
//            store, in the common case): words that only some plans raise
//            (mapped record words, publication words) read "at or after"
//            with a half-range comparison, so a word left unwritten for 2^27
//            instances would look raised; the end-of-instance flag_set
//            keeps every such word of the slot recent. A flag_set of a
//            mapped record word (relative bit kRelFlagWord) does only the
//            store and the refresh: the instance's end flag_set, which
//            follows it in every mapped plan, fences and nudges for both
//  - publish: memory protocol for single copy: stores the addresses of its
//            two local regions (src, src2; an empty region publishes 0) into
//            this rank's flag words `slot` + 2 .. `slot` + 5, then seq + 1 into
//            word `slot` (release), like flag_set; same-host peers' read_peer
//            nodes read those addresses after a flag_wait (lag 0) on `slot`
//  - read_peer: single copy out of a peer's ordinary memory: dst (local) <-
//            [a + src.offset, + src.len) where a is the address published by
//            rank `peer` in its flag words `slot` + 2 + 2 * src.buf.id (src is
//            a peer region naming no declared buffer: buffer id 0 or 1 selects
//            the first or second published region); run locally through
//            Transport::read_peer (CMA). Needs a flag_wait on the publication
//            among its dependencies; the owner must keep the region valid until
//            the reader says it is done (a flag_set the owner waits on)
//  - write_peer: single copy into a peer's ordinary memory, the mirror of
//            read_peer: [a + dst.offset, + dst.len) <- src (local), where a is
//            the address rank `peer` published in its flag words `slot` + 2 +
//            2 * dst.buf.id; run locally through Transport::write_peer (CMA,
//            process_vm_writev). Needs a flag_wait on the publication among
//            its dependencies; the peer must keep the region valid and leave
//            it alone until told the writes are done (a flag_set it waits on)
//  - nop:    joins dependencies
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/dag/reduce.hpp"
#include "strata/error.hpp"

namespace strata {
namespace dag {

/// @brief Index of a node inside its plan.
using NodeId = std::uint32_t;
/// @brief "No node".
inline constexpr NodeId kNoNode = ~NodeId{0};
/// @brief Largest signal slot (19 bits of the signal payload's low 20; the
/// 20th is the sender's "drained" bit, see dag::kDrainedBit).
inline constexpr std::uint32_t kMaxSlot = (1u << 19) - 1;
/// @brief Flag words of one single-copy publication record (publish /
/// read_peer at word w): w the publication flag, w + 1 free for the readers'
/// reads-done flag, w + 2 .. w + 5 the two published addresses (low, high
/// 32 bits each), w + 6 .. w + 7 the first region's handle when it lies in
/// a shared region the peers map (transport::region_handle; else 0): a
/// read_peer of it then copies out of the reader's mapping.
inline constexpr std::uint32_t kPublishWords = 8;

/// @brief What a symbolic buffer refers to.
enum class BufferKind : std::uint8_t { input, output, scratch, peer };

/// @brief A symbolic buffer: kind + id (+ peer rank for BufferKind::peer).
struct BufferRef {
  BufferKind kind = BufferKind::input;
  std::uint32_t id = 0;
  std::int32_t peer = -1;
  [[nodiscard]] bool is_local() const noexcept { return kind != BufferKind::peer; }
};

/// @brief A byte range of a symbolic buffer.
struct Region {
  BufferRef buf;
  std::uint64_t offset = 0;
  std::uint64_t len = 0;
};

/// @brief Region of user input @p id.
inline Region in(std::uint32_t id, std::uint64_t offset, std::uint64_t len) {
  return {{BufferKind::input, id, -1}, offset, len};
}
/// @brief Region of user output @p id.
inline Region out(std::uint32_t id, std::uint64_t offset, std::uint64_t len) {
  return {{BufferKind::output, id, -1}, offset, len};
}
/// @brief Region of scratch slot @p id.
inline Region scratch(std::uint32_t id, std::uint64_t offset, std::uint64_t len) {
  return {{BufferKind::scratch, id, -1}, offset, len};
}
/// @brief Region of buffer @p id registered by @p rank.
inline Region peer(int rank, std::uint32_t id, std::uint64_t offset, std::uint64_t len) {
  return {{BufferKind::peer, id, rank}, offset, len};
}

/// @brief Node kinds; see the file comment.
enum class NodeKind : std::uint8_t {
  nop,
  copy,
  reduce,
  put,
  get,
  put_with_signal,
  signal,
  wait,
  compute,
  flag_wait,
  flag_set,
  publish,
  read_peer,
  write_peer
};
/// @brief Printable name of a node kind ("copy", "put_with_signal", ...).
const char* to_string(NodeKind k) noexcept;

/// @brief What a compute node's callable receives.
struct ComputeArgs {
  void* data = nullptr;    ///< start of the node's region (bound address)
  std::size_t len = 0;     ///< region length in bytes
  std::uint32_t seq = 0;   ///< sequence number of the instance
  std::uint16_t comm = 0;  ///< communicator id of the instance
  NodeId node = kNoNode;   ///< this node
};
/// @brief An application callable; throwing fails the instance with the message.
using ComputeFn = std::function<void(const ComputeArgs&)>;
/// @brief The per-start callable of bound compute nodes (Bindings::compute):
/// called with the node's index @p k (PlanBuilder::compute_bound) and its
/// arguments; throwing fails the instance with the message.
using BoundComputeFn = std::function<void(std::uint32_t k, const ComputeArgs&)>;
/// @brief Node::compute of a bound compute node with index k is kBoundCompute - k.
constexpr std::int32_t kBoundCompute = -2;

/// @brief Node::relative bits (PlanBuilder::relative): parts of a node that
/// move by the instance's Bindings::shift, so that one plan serves every slot
/// of a ring whose slots are a fixed stride apart (the mapped plans' slots
/// beyond the credits, collectives/compile.hpp Group::mapped_slots).
/// copy / reduce: peer regions (src, src2) are read shift bytes further on.
inline constexpr std::uint8_t kRelPeerRegions = 1;
/// flag_wait / flag_set: the flag word is shift / 4 words further on.
inline constexpr std::uint8_t kRelFlagWord = 2;
/// flag_set: the first refresh word is shift / 4 words further on.
inline constexpr std::uint8_t kRelRefreshFirst = 4;

/// @brief One node of a plan (read-only once built).
struct Node {
  NodeKind kind = NodeKind::nop;
  Region src;               ///< copy/reduce/put/put_with_signal/get source; compute region; wait guarded region
  Region src2;              ///< reduce right operand
  Region dst;               ///< copy/reduce/get destination; put/put_with_signal peer destination
  std::int32_t peer = -1;   ///< remote nodes: target rank; flag_wait: the rank whose flag is read
  std::uint32_t slot = 0;   ///< signal/put_with_signal: slot signalled; wait: slot waited; flag_*: flag word
  std::uint32_t count = 0;  ///< wait: signals expected; flag_wait: lag (instances between the two users)
  ReduceOp op = ReduceOp::sum;
  DataType dtype = DataType::u8;
  std::int32_t user_op = -1;  ///< reduce: index of a UserReduce, or -1 for a built-in op
  std::int32_t compute =
      -1;                  ///< compute: index of the callable; <= kBoundCompute: bound (index kBoundCompute - compute)
  bool streaming = false;  ///< copy: write dst with non-temporal stores (large data not read again soon)
  bool granted = false;    ///< flag_wait: the flag is a local copy kept current by the peer's grants
  bool fold = false;       ///< read_peer: dst = dst OP the peer's bytes (op / dtype or user_op)
  std::uint8_t relative = 0;           ///< kRel* bits: what moves by the instance's Bindings::shift
  std::vector<std::int32_t> grants;    ///< flag_set: ranks sent the new flag value (granted flag_waits)
  std::vector<std::uint32_t> refresh;  ///< flag_set: own words kept within 2^20 instances of seq + 1
  std::string label;                   ///< optional, shown in DOT and traces
  std::vector<NodeId> deps;            ///< local predecessors
};

/// @brief Size of a declared buffer.
struct BufferDecl {
  BufferRef ref;
  std::uint64_t size = 0;
};

/// @brief Alignment of the executor's per-instance memory blocks (a cache line).
inline constexpr std::size_t kInstanceAlign = 64;

/// @brief One rank's slice of a collective: immutable once built, shared by
/// every instance that runs it (thread-safe to read).
class Plan {
 public:
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan();
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// The concrete algorithm the compiler chose (e.g. "ring", "bruck", "tree"), empty if not recorded.
  [[nodiscard]] const std::string& algorithm() const noexcept { return algorithm_; }
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int nranks() const noexcept { return nranks_; }
  [[nodiscard]] const std::vector<Node>& nodes() const noexcept { return nodes_; }
  [[nodiscard]] const Node& node(NodeId id) const { return nodes_.at(id); }
  [[nodiscard]] std::size_t size() const noexcept { return nodes_.size(); }
  /// Successors of @p id (CSR storage).
  [[nodiscard]] const NodeId* succ_begin(NodeId id) const noexcept { return succ_.data() + succ_off_[id]; }
  [[nodiscard]] const NodeId* succ_end(NodeId id) const noexcept { return succ_.data() + succ_off_[id + 1]; }
  [[nodiscard]] const std::vector<BufferDecl>& buffers() const noexcept { return buffers_; }
  /// Declared size of @p ref, or -1 when undeclared.
  [[nodiscard]] std::int64_t buffer_size(const BufferRef& ref) const noexcept;
  /// Wait node of @p slot, or kNoNode.
  [[nodiscard]] NodeId wait_node(std::uint32_t slot) const noexcept {
    if (slot < slot_node_.size()) return slot_node_[slot];
    return sparse_wait_node(slot);
  }
  /// Ranks this slice talks to (remote nodes and declared wait sources).
  [[nodiscard]] const std::vector<int>& peers() const noexcept { return peers_; }
  /// World ranks of every member of the communicator this slice belongs to
  /// (PlanBuilder::members; empty when not declared). A failure of this
  /// slice that leaves every member alive (a user operator that threw) is
  /// announced to all of them (Executor, "Failed calls").
  [[nodiscard]] const std::vector<int>& members() const noexcept { return members_; }
  [[nodiscard]] bool involves(int peer) const noexcept;
  /// Whether a put_with_signal or signal node of this slice signals @p peer
  /// (its signals then carry this rank's drain watermark to it: Executor, "drained").
  [[nodiscard]] bool signals(int peer) const noexcept;
  [[nodiscard]] const std::vector<ComputeFn>& compute_fns() const noexcept { return compute_; }
  [[nodiscard]] const std::vector<UserReduce>& user_ops() const noexcept { return user_ops_; }
  /// One past the largest flag word a flag_wait / flag_set node uses (0: the plan uses no flags),
  /// as compiled: relative words (kRelFlagWord) move past it by the instance's Bindings::shift.
  [[nodiscard]] std::uint32_t flag_words() const noexcept { return flag_words_; }
  /// Ranks whose flag words a flag_wait or read_peer node reads (sorted, unique):
  /// each must be mapped in Bindings::flags.
  [[nodiscard]] const std::vector<int>& flag_peers() const noexcept { return flag_peers_; }
  /// Per node, the counters an instance starts with: dependencies still to
  /// finish (local predecessors plus, for wait nodes, the signals expected)
  /// and the signals alone.
  struct Initial {
    std::int32_t deps = 0;
    std::int32_t sig = 0;
  };
  [[nodiscard]] const std::vector<Initial>& initial() const noexcept { return initial_; }
  /// Nodes an instance launches at its start: no local predecessor, not a wait node.
  [[nodiscard]] const std::vector<NodeId>& roots() const noexcept { return roots_; }
  /// Index into buffers() of node @p id's region @p which (0 src, 1 src2, 2 dst), or kNoNode.
  [[nodiscard]] std::uint32_t buffer_index(NodeId id, int which) const noexcept {
    return nbuf_[3 * static_cast<std::size_t>(id) + static_cast<std::size_t>(which)];
  }
  /// Number of wait nodes.
  [[nodiscard]] const std::vector<NodeId>& wait_nodes() const noexcept { return waits_; }
  /// Indices into buffers() of the peer buffers that copy / reduce nodes read
  /// through a mapping (each must be bound with PeerKey::mapped).
  [[nodiscard]] const std::vector<std::uint32_t>& mapped_reads() const noexcept { return mapped_reads_; }
  /// Indices into buffers() of the user inputs and outputs (what every start
  /// binds again; the rest of a pre-built instance's bindings are kept).
  [[nodiscard]] const std::vector<std::uint32_t>& user_buffers() const noexcept { return user_bufs_; }
  /// True when a node of the plan is a compute node (application work).
  [[nodiscard]] bool has_compute() const noexcept { return has_compute_; }
  /// Straight plans (memory-protocol nodes only: nop, copy, reduce, flag_set,
  /// flag_wait, publish, read_peer; no wait, remote or compute node; at most
  /// 64 nodes, each after its predecessors): per node, the bit mask of its
  /// predecessors. Empty for every other plan. The executor runs a straight
  /// plan's nodes in id order in the starting thread, with plain bit masks
  /// instead of dependency counters, and builds an instance's counters only
  /// when a flag is not there yet (docs/architecture.md, "Straight starts").
  [[nodiscard]] const std::vector<std::uint64_t>& straight_preds() const noexcept { return straight_preds_; }
  /// Largest byte count of a straight plan's copy, reduce or read_peer node.
  [[nodiscard]] std::uint64_t straight_bytes() const noexcept { return straight_bytes_; }
  /// "name#rank node <id> (<kind> '<label>')": used in every error message.
  [[nodiscard]] std::string describe(NodeId id) const;
  /// Heap bytes this plan holds (what a plan cache that keeps it pays): the
  /// Plan object, the capacity of every vector (nodes, successor CSR, buffer
  /// declarations, slot tables, per-node counters and buffer indices, peer
  /// lists), each node's own vectors (deps, grants, refresh) and strings
  /// longer than the small-string buffer (name, algorithm, labels, user
  /// operator names), plus sizeof of each compute / user-reduce callable.
  /// An estimate from below: allocator headers and the callables' captured
  /// state are not counted, and neither is the instance block a plan that has
  /// run keeps for its next start (Executor::instance_bytes()). Computed on
  /// each call (O(nodes)): callers keep the result.
  [[nodiscard]] std::size_t footprint_bytes() const noexcept;

 private:
  friend class PlanBuilder;
  friend class Executor;
  // One finished instance's memory (node states, bindings, scratch: its size
  // follows from the plan alone), kept for the next start of this plan by any
  // executor: a cached plan starts without an allocation or a lock (per-call
  // cost, docs/architecture.md). Freed with the plan.
  mutable std::atomic<void*> spare_block_{nullptr};
  // The executor's instance block layout of this plan (offsets of node
  // states, bindings, scratch; total), computed at its first start: total
  // 0 until then (stored last, with release).
  mutable std::atomic<std::uint32_t> layout_nodes_{0}, layout_bufs_{0}, layout_scratch_{0};
  mutable std::atomic<std::uint64_t> layout_total_{0};
  std::string name_;
  std::string algorithm_;
  int rank_ = 0;
  int nranks_ = 1;
  std::vector<Node> nodes_;
  std::vector<std::uint32_t> succ_off_;
  std::vector<NodeId> succ_;
  std::vector<BufferDecl> buffers_;
  /// Slot -> wait node: a dense table for slots below kDenseSlots, sorted
  /// (slot, node) pairs above (barrier / token slots sit near 2^19: a dense
  /// table up to them cost 4 MB per cached plan).
  static constexpr std::uint32_t kDenseSlots = 4096;
  [[nodiscard]] NodeId sparse_wait_node(std::uint32_t slot) const noexcept;
  std::vector<NodeId> slot_node_;
  std::vector<std::pair<std::uint32_t, NodeId>> slot_sparse_;
  std::vector<NodeId> waits_;
  std::vector<std::uint32_t> mapped_reads_;
  std::vector<std::uint32_t> user_bufs_;
  bool has_compute_ = false;
  std::vector<int> flag_peers_;
  std::vector<Initial> initial_;
  std::vector<NodeId> roots_;
  std::vector<std::uint64_t> straight_preds_;
  std::uint64_t straight_bytes_ = 0;
  std::vector<std::uint32_t> nbuf_;
  std::vector<int> peers_;
  std::vector<int> members_;
  std::vector<int> signalled_;  // sorted: peers of put_with_signal / signal nodes
  std::vector<ComputeFn> compute_;
  std::vector<UserReduce> user_ops_;
  std::uint32_t flag_words_ = 0;
};

/// @brief Builds one rank's Plan. Node-adding calls return the new node's id;
/// @p deps lists local predecessors. build() validates and freezes the plan.
///
/// @code
/// using namespace strata::dag;
/// PlanBuilder b("bcast", /*rank=*/0, /*nranks=*/2);
/// b.input(0, 64);
/// b.peer_buffer(1, 0, 64);
/// NodeId p = b.put_with_signal(1, in(0, 0, 64), peer(1, 0, 0, 64), /*slot=*/0);
/// std::shared_ptr<const Plan> plan = b.build();  // throws strata::Error naming the node on bad input
/// @endcode
class PlanBuilder {
 public:
  /// @param name collective name used in traces and errors
  /// @param rank this slice's rank in [0, nranks)
  /// @param nranks number of ranks of the communicator (>= 1)
  PlanBuilder(std::string name, int rank, int nranks);

  /// @brief Records the concrete algorithm of this slice (Plan::algorithm(); logs, strata-info).
  PlanBuilder& algorithm(std::string name);
  /// @brief The algorithm recorded so far (empty if none).
  [[nodiscard]] const std::string& algorithm() const noexcept;
  /// @brief Declares the world ranks of every member of the communicator (Plan::members()).
  PlanBuilder& members(std::vector<int> world_ranks);

  /// @brief Declares user input / output / scratch slot / peer buffer @p id of @p size bytes.
  PlanBuilder& input(std::uint32_t id, std::uint64_t size);
  PlanBuilder& output(std::uint32_t id, std::uint64_t size);
  PlanBuilder& scratch(std::uint32_t id, std::uint64_t size);
  PlanBuilder& peer_buffer(int rank, std::uint32_t id, std::uint64_t size);
  /// @brief Registers a user-defined reduction; returns its index for reduce().
  std::int32_t add_user_op(UserReduce op);

  NodeId nop(std::vector<NodeId> deps = {});
  NodeId copy(const Region& src, const Region& dst, std::vector<NodeId> deps = {});
  /// @brief Marks copy node @p id as streaming: its destination is written
  /// with non-temporal stores that bypass the caches (for copies whose data
  /// is not read again soon and whose working set exceeds the caches).
  /// Same result as a plain copy; src and dst must not overlap.
  PlanBuilder& streaming(NodeId id);
  /// @brief dst = a OP b with a built-in operator.
  NodeId reduce(const Region& a, const Region& b, const Region& dst, ReduceOp op, DataType t,
                std::vector<NodeId> deps = {});
  /// @brief dst = a OP b with user operator @p user_op (from add_user_op).
  NodeId reduce(const Region& a, const Region& b, const Region& dst, std::int32_t user_op,
                std::vector<NodeId> deps = {});
  NodeId put(int peer, const Region& src, const Region& dst, std::vector<NodeId> deps = {});
  NodeId get(int peer, const Region& src, const Region& dst, std::vector<NodeId> deps = {});
  NodeId put_with_signal(int peer, const Region& src, const Region& dst, std::uint32_t slot,
                         std::vector<NodeId> deps = {});
  NodeId signal(int peer, std::uint32_t slot, std::vector<NodeId> deps = {});
  /// @brief Waits for @p count signals on @p slot; @p guards is the local region they announce (optional).
  NodeId wait(std::uint32_t slot, std::uint32_t count, std::vector<NodeId> deps = {}, const Region* guards = nullptr);
  /// @brief Memory protocol: waits (after @p deps) until flag word @p flag of
  /// same-host rank @p peer shows that its instance seq - @p lag finished
  /// (see flag_set). Replaces a ready-to-receive round trip when the peer's
  /// window slot is reused every @p lag instances: no message, one load when
  /// the peer is on time. Failure of @p peer fails the instance.
  /// With @p granted the peer is on another host: the flag read is this
  /// process's copy, which the peer's flag_set keeps current by grant
  /// messages (one message after the peer's instance, off the next call's
  /// critical path); a late copy makes this rank ask the peer for a grant.
  NodeId flag_wait(int peer, std::uint32_t flag, std::uint32_t lag, std::vector<NodeId> deps = {},
                   bool granted = false);
  /// @brief Memory protocol: stores seq + 1 into this rank's flag word @p flag
  /// after @p deps (release), releasing the peers' flag_wait nodes, and sends
  /// the new value to each rank of @p grant_to (their granted flag_waits).
  /// Each word of @p refresh (this rank's own) that is not within 2^20
  /// instances of seq + 1 is set to it as well (see the file comment).
  NodeId flag_set(std::uint32_t flag, std::vector<NodeId> deps = {}, std::vector<std::int32_t> grant_to = {},
                  std::vector<std::uint32_t> refresh = {});
  /// @brief Single copy: publishes the addresses of the local regions @p a and
  /// @p b (len 0: none) in this rank's flag words @p flag + 2 .. + 5, then
  /// seq + 1 in word @p flag (see the file comment).
  NodeId publish(std::uint32_t flag, const Region& a, const Region& b, std::vector<NodeId> deps = {});
  /// @brief Single copy: copies @p len bytes at @p offset of the region
  /// @p which (0 or 1) that rank @p peer published in its word @p flag into
  /// local region @p dst (Transport::read_peer). @p deps must include a
  /// flag_wait(peer, flag, 0).
  NodeId read_peer(int peer, std::uint32_t flag, std::uint32_t which, std::uint64_t offset, const Region& dst,
                   std::vector<NodeId> deps = {});
  /// @brief Single copy the other way: copies local region @p src into the
  /// region @p which (0 or 1) that rank @p peer published in its word @p flag,
  /// at @p offset (Transport::write_peer). @p deps must include a
  /// flag_wait(peer, flag, 0).
  NodeId write_peer(int peer, std::uint32_t flag, std::uint32_t which, std::uint64_t offset, const Region& src,
                    std::vector<NodeId> deps = {});
  /// @brief Single copy with a reduction: as read_peer, but folds the peer's
  /// bytes into @p dst (dst = dst OP peer, element by element) instead of
  /// copying them: straight out of this process's mapping of the peer's
  /// shared region when it has one (no copy at all), else through a
  /// temporary read.
  NodeId read_peer_fold(int peer, std::uint32_t flag, std::uint32_t which, std::uint64_t offset, const Region& dst,
                        ReduceOp op, DataType t, std::vector<NodeId> deps = {});
  /// @brief As above with user operator @p user_op (from add_user_op).
  NodeId read_peer_fold(int peer, std::uint32_t flag, std::uint32_t which, std::uint64_t offset, const Region& dst,
                        std::int32_t user_op, std::vector<NodeId> deps = {});
  /// @brief Runs @p fn on @p region after @p deps.
  NodeId compute(ComputeFn fn, const Region& region, std::vector<NodeId> deps = {});
  /// @brief Runs @p fn on @p region as soon as every node already added that
  /// writes an overlapping part of it (copy/reduce/get destination, wait guard)
  /// is done: the hook for overlapping application work with a collective.
  NodeId on_fragment(const Region& region, ComputeFn fn);
  /// @brief A compute node whose callable comes with each start
  /// (Bindings::compute, called with @p k): the plan holds no code, so it can
  /// be cached and shared by calls with different callables.
  NodeId compute_bound(std::uint32_t k, const Region& region, std::vector<NodeId> deps = {});
  /// @brief on_fragment() with a bound callable (compute_bound).
  NodeId on_fragment_bound(const Region& region, std::uint32_t k);
  /// @brief Adds the edge @p before -> @p after.
  PlanBuilder& depend(NodeId after, NodeId before);
  /// @brief Sets a node's label (DOT, traces).
  PlanBuilder& label(NodeId id, std::string text);
  /// @brief Marks parts of node @p id relative (kRel* bits, Node::relative):
  /// kRelPeerRegions on copy / reduce, kRelFlagWord on flag_wait / flag_set,
  /// kRelRefreshFirst on a flag_set with refresh words (build() checks).
  PlanBuilder& relative(NodeId id, std::uint8_t bits);
  /// @brief Node @p id as added so far.
  [[nodiscard]] const Node& node(NodeId id) const { return plan_->nodes_.at(id); }
  /// @brief Declares that waits in this slice receive signals from @p rank
  /// (so a failure of @p rank fails instances of this plan).
  PlanBuilder& expect_signals_from(int rank);
  /// @brief Whether build() requires every byte of every output to be written (default true).
  PlanBuilder& require_output_coverage(bool on);

  [[nodiscard]] std::size_t size() const noexcept { return plan_->nodes_.size(); }
  /// @brief Local predecessors of node @p id added so far.
  [[nodiscard]] const std::vector<NodeId>& deps_of(NodeId id) const { return plan_->nodes_.at(id).deps; }

  /// @brief Validates and returns the plan; throws strata::Error(invalid_argument) naming the node.
  std::shared_ptr<const Plan> build();
  /// @brief As build(), reporting failure as a Status.
  Status try_build(std::shared_ptr<const Plan>* out);

 private:
  NodeId add(Node n);
  std::shared_ptr<Plan> plan_;
  bool coverage_ = true;
  std::vector<int> extra_peers_;
};

/// @brief Validates one slice (done by build(); exposed for tests).
Status validate(const Plan& plan, bool require_output_coverage = true);
/// @brief Cross-rank validation of all slices of one collective (slices[r] is
/// rank r's): every wait's count equals the signals other slices send to its
/// slot, every signal targets an existing wait, every slice agrees on the rank
/// count and names its own rank.
Status validate(const std::vector<const Plan*>& slices);

/// @brief Graphviz DOT of one slice.
std::string to_dot(const Plan& plan);
/// @brief Graphviz DOT of all slices: one cluster per rank, dashed edges from
/// signalling nodes to the wait nodes they release.
std::string to_dot(const std::vector<const Plan*>& slices);

}  // namespace dag
}  // namespace strata
