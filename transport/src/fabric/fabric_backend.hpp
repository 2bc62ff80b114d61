// libfabric RMA backend. See docs/fabric.md for the design.
//
// Private to the libfabric backend: its wire formats, operation records and
// the FabricBackend class, whose members are defined by concern, the way
// libfabric's rxm provider is split:
//   fabric_setup.cpp     provider choice, endpoint, start-up exchange, warm-up
//   fabric_memory.cpp    memory registration (MrCache, published keys)
//   fabric_rma.cpp       posting: RMA, control messages, mailboxes, atomics
//   fabric_progress.cpp  completion queue, incoming messages, dispatch, pacing
//   fabric_failure.cpp   errors, dead peers, deadlines, shutdown
// Small helpers of the operation life cycle (new_op, finish_user, reap, ...)
// stay defined in the class so that every file's hot path can inline them.
//
// One RDM endpoint, one CQ (FI_CQ_FORMAT_DATA, FI_WAIT_FD when available), one
// AV table. All libfabric calls happen under one mutex (domain threading
// FI_THREAD_DOMAIN); user handlers run outside it, one dispatcher at a time, in
// the order events were produced, so signals from one source keep their order.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend.hpp"
#include "fabric/doorbell.hpp"
#include "mr_cache.hpp"
#include "shm/sync.hpp"
#include "strata/detail/env.hpp"
#include "strata/detail/log.hpp"
#include "strata/detail/rendezvous.hpp"

namespace strata::transport::detail::fabric {

using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kBlobMagic = 0x5354464bu;  // "STFK"
constexpr std::size_t kMsgSize = 64;               // message header
constexpr std::size_t kSlotSize = 1024;            // one send / receive slot: header + inline data
/// put_with_signal payloads up to this size travel inside the signal message
/// on the message path (one message instead of a write plus a message).
constexpr std::size_t kInlineMax = kSlotSize - kMsgSize;
/// post_step's result for a step posted with fi_inject*: complete at the post.
constexpr int kInjected = 1;
constexpr std::size_t kSendSlots = 1024;
constexpr std::size_t kRecvSlots = 256;
constexpr std::uint64_t kMrAccess = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SEND | FI_RECV;

// Flags a rank advertises in its start-up blob.
// The rank can attribute remote CQ data to its source (FI_SOURCE for remote
// writes, or it serves a single fabric peer) and its provider has 8-byte CQ
// data and WAW ordering: signals *to* it travel as CQ data.
constexpr std::uint32_t kCanResolveSource = 1u;
constexpr std::uint32_t kNativeAtomics = 2u;  // fi_fetch_atomic(FI_UINT64, FI_SUM) valid
constexpr std::uint32_t kMailboxes = 4u;      // takes signals as mailbox entries (MboxEntry)

/// Mailboxes (docs/fabric.md, "Mailboxes"): every rank keeps, per fabric
/// peer, a ring of kMboxEntries 64-byte entries that only that peer writes,
/// with fi_inject_write (one message, no completion on either side). An entry
/// carries a signal and up to kMboxInline bytes of put_with_signal data; its
/// last word is its sequence number (entries counted from 1), which the
/// receiver's progress reads after the provider placed the entry.
constexpr std::size_t kMboxEntries = 64;
constexpr std::size_t kMboxInline = 24;
/// Consumed entries are reported back (one 8-byte inject) every this many.
constexpr std::size_t kMboxCreditEvery = kMboxEntries / 4;

struct alignas(64) MboxEntry {
  std::uint64_t signal = 0;
  std::uint64_t raddr = 0;  // inline data: its destination (RMA address and key at the receiver)
  std::uint64_t rkey = 0;
  std::uint32_t len = 0;    // inline bytes, 0: a bare signal
  std::uint32_t index = 0;  // the signal's index among all signals to the receiver (mod 2^32), from 1
  std::array<std::byte, kMboxInline> data{};
  std::uint64_t seq = 0;  // the entry's number in its ring, from 1: written last (the entry's last bytes)
};
static_assert(sizeof(MboxEntry) == 64, "a mailbox entry is one 64-byte inject");

/// Control messages (pre-posted receives, FI_ORDER_SAS per pair).
/// put_signal: a put_with_signal whose data (d bytes) follows the header; the
/// target copies it into its registration (b = RMA address, c = key), then
/// delivers the signal a.
enum class MsgType : std::uint32_t { hello = 1, signal = 2, atomic_req = 3, atomic_resp = 4, put_signal = 5 };

struct Msg {
  std::uint32_t type = 0;
  std::int32_t src = -1;
  std::uint64_t a = 0;  // signal payload | atomic: remote address | resp: request id
  std::uint64_t b = 0;  // atomic: key | resp: fetched value | put_signal: remote address
  std::uint64_t c = 0;  // atomic: addend | resp: errc | put_signal: key
  std::uint64_t d = 0;  // atomic: request id | put_signal: data length
  std::uint64_t pad[3] = {};
};
static_assert(sizeof(Msg) == kMsgSize, "Msg is the 64-byte header of a slot");

/// One registered message buffer: the header, then inline put_with_signal data.
struct Slot {
  Msg hdr;
  std::array<std::byte, kInlineMax> data;
};
static_assert(sizeof(Slot) == kSlotSize, "Slot is kSlotSize bytes");

/// The blob each rank contributes to the start-up allgather.
struct BlobHeader {
  std::uint32_t magic = kBlobMagic;
  std::uint32_t opened = 0;
  std::uint32_t flags = 0;
  std::uint32_t name_len = 0;
  std::uint64_t landing_addr = 0;  // RMA address of the 64-byte signal landing region
  std::uint64_t landing_key = 0;
  std::uint64_t mbox_addr = 0;  // RMA address of the mailbox rings (size x kMboxEntries entries)
  std::uint64_t mbox_key = 0;
  std::uint64_t credit_addr = 0;  // RMA address of the credit words (one u64 per rank)
  std::uint64_t credit_key = 0;
  char provider[48] = {};
  char error[128] = {};
  std::uint32_t bell_len = 0;                // 0: this rank has no doorbell
  std::array<std::byte, 28> bell_addr = {};  // its UDP address (sockaddr_in or sockaddr_in6)
};

enum class Kind : std::uint8_t { put, get, put_signal, signal, fetch_add, internal_send, recv };

/// One operation. The fi_context2 must come first: libfabric providers with
/// FI_CONTEXT/FI_CONTEXT2 mode use the memory the context points at.
struct Op {
  fi_context2 fictx{};
  Kind kind = Kind::put;
  int peer = -1;
  void* user_ctx = nullptr;
  Clock::time_point deadline{};
  bool user_done = false;      // completion delivered (or none owed: internal ops)
  bool internal = false;       // no user completion
  bool awaiting_resp = false;  // emulated atomic: waiting for the response message
  bool queued = false;         // in the retry queue
  bool reap_listed = false;    // in the reap candidate list
  std::size_t live_index = 0;  // position in ops_ while live
  int outstanding = 0;         // posted fi operations not yet completed
  int step = 0;                // next step to post
  int nsteps = 1;
  // parameters
  const std::byte* src = nullptr;
  std::byte* dst = nullptr;
  std::size_t len = 0;
  std::uint64_t raddr = 0;
  std::uint64_t rkey = 0;
  std::uint64_t data = 0;  // signal payload / addend
  std::uint64_t* fetched = nullptr;
  const MrCache::Entry* local_mr = nullptr;  // pinned while the op uses it as a local descriptor
  bool inline_data = false;                  // put_with_signal: the data rides in the signal message
  bool mbox = false;                         // posted as one mailbox entry (MboxEntry)
  bool bulk = false;                         // counted in bulk_ops_ until its user completion
  int slot = -1;                             // send slot (messages, native atomic operand/result)
  Msg msg{};                                 // message to send (copied into the slot when posted)
  Status error;                              // first error seen while posting/completing
};

struct PeerState {
  bool served = false;
  fi_addr_t addr = FI_ADDR_UNSPEC;
  bool cq_signals = false;  // signals to this peer travel as remote CQ data
  std::uint64_t landing_addr = 0;
  std::uint64_t landing_key = 0;
  Status dead;  // non-OK once failed
  bool hello_seen = false;
  sockaddr_storage bell{};  // the peer's doorbell (bell_len 0: none)
  socklen_t bell_len = 0;
  std::int64_t last_bell = 0;   // steady ns of the last doorbell rung at it (under mu_)
  std::int64_t last_heard = 0;  // steady ns of the last signal or message from it (under mu_)
  // Mailboxes (both sides have them): where this rank's entries and credit
  // reports land at the peer, and the counts of each direction.
  bool mbox = false;
  std::uint64_t mbox_addr = 0;  // RMA address of this rank's ring at the peer
  std::uint64_t mbox_key = 0;
  std::uint64_t credit_addr = 0;  // RMA address of this rank's credit word at the peer
  std::uint64_t credit_key = 0;
  std::uint64_t mbox_sent = 0;      // entries written into the peer's ring
  std::uint64_t mbox_got = 0;       // entries consumed from the peer's ring here
  std::uint64_t mbox_reported = 0;  // mbox_got last reported to the peer
  // Signal order across paths: every signal to the peer (entry, CQ data or
  // message) gets the next index when posted; signals from it that did not
  // come through the ring wait in `pending` (payload, deliver?) until the
  // ring's entries with lower indices were delivered (scan_mailboxes).
  std::uint32_t sig_sent = 0;
  std::uint32_t sig_got = 0;
  std::deque<std::pair<std::uint64_t, bool>> pending;
};

struct Event {
  enum Type : std::uint8_t { completion, signal, peer_failed } type = completion;
  void* ctx = nullptr;
  Status status;
  int source = -1;
  std::uint64_t payload = 0;
};

inline std::string fi_err(int rc) {
  return std::string(fi_strerror(rc < 0 ? -rc : rc)) + " (" + std::to_string(rc) + ")";
}

inline const char* kind_name(Kind k) {
  switch (k) {
    case Kind::put:
      return "put";
    case Kind::get:
      return "get";
    case Kind::put_signal:
      return "put_with_signal";
    case Kind::signal:
      return "signal";
    case Kind::fetch_add:
      return "fetch_add";
    case Kind::internal_send:
      return "control message";
    case Kind::recv:
      return "receive";
  }
  return "operation";
}

/// Error numbers (positive) that mean the peer is gone, not that one operation was bad.
inline bool connection_lost(int e) {
  switch (e) {
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_EIO:
    case FI_ETIMEDOUT:
    case FI_EOTHER:
      return true;
    default:
      return false;
  }
}

inline bool env_is(const char* name, const char* value) { return strata::detail::env::is(name, value); }

class FabricBackend final : public Backend, public PollHint {
 public:
  FabricBackend(Bootstrap& boot, const Hierarchy& hier, const std::vector<bool>& serve, const TransportOptions& opts);

  ~FabricBackend() override;

  FabricBackend(const FabricBackend&) = delete;
  FabricBackend& operator=(const FabricBackend&) = delete;

  // ------------------------------------------------------------ Transport
  [[nodiscard]] int rank() const noexcept override { return rank_; }
  [[nodiscard]] int size() const noexcept override { return size_; }
  [[nodiscard]] std::string name() const override;

  void set_completion_handler(CompletionHandler h) override {
    std::lock_guard<std::mutex> lk(handler_mu_);
    on_complete_ = std::move(h);
  }
  void set_signal_handler(SignalHandler h) override {
    std::lock_guard<std::mutex> lk(handler_mu_);
    on_signal_ = std::move(h);
  }
  void set_peer_failure_handler(PeerFailureHandler h) override {
    std::lock_guard<std::mutex> lk(handler_mu_);
    on_peer_failed_ = std::move(h);
  }

  Status register_memory(void* addr, std::size_t len, RemoteKey* key) override;

  Status deregister_memory(void* addr, std::size_t len) override;

  Status put(int peer, const void* src, std::size_t len, const RemoteKey& dst, std::uint64_t dst_offset,
             void* context) override;
  Status get(int peer, void* dst, std::size_t len, const RemoteKey& src, std::uint64_t src_offset,
             void* context) override;
  Status put_with_signal(int peer, const void* src, std::size_t len, const RemoteKey& dst, std::uint64_t dst_offset,
                         std::uint64_t signal, void* context) override;

  Status signal(int peer, std::uint64_t payload, void* context) override;

  Status fetch_add(int peer, const RemoteKey& dst, std::uint64_t dst_offset, std::uint64_t addend,
                   std::uint64_t* fetched, void* context) override;

  std::size_t progress() override;

  // ------------------------------------------------------------ PollHint
  /// Without a CQ wait object a sleeping thread must come back on its own.
  /// Every provider here needs the target to progress for RMA to complete,
  /// and a passive target sees no CQ entry for it (FI_RMA_EVENT gives none),
  /// so the interval follows this rank's own activity (posts and events):
  /// zero (do not sleep) while bulk data moves: a put/get of kStreamBytes or
  /// more is in flight, or a progress() call within kStreamWindow copied
  /// incoming data (a passive target of a stream of puts); kBusyPoll while
  /// operations are in flight or within kHotWindow of the last activity,
  /// kWarmPoll within kWarmWindow, a millisecond when idle.
  /// Why zero: the provider moves a large transfer's bytes only inside
  /// progress calls on both sides (tcp: the socket is fed and drained there),
  /// so every nap of the source or of the target is idle link time; a 20 us
  /// nap (70 us with the default timer slack of a waiting thread) per ~150 us
  /// of a 1 MiB put cost a good part of the bandwidth (docs/fabric.md).
  [[nodiscard]] std::chrono::microseconds poll_interval() const override;

  void wait_for_event(std::chrono::microseconds timeout) override;

  void wake() override {
    std::uint64_t one = 1;
    ssize_t r = ::write(wake_fd_, &one, sizeof(one));
    (void)r;
  }

  [[nodiscard]] Status peer_status(int peer) const override;

  void shutdown() override;

  // ------------------------------------------------------------ Backend
  /// When the CQ's fd is used (the net provider, or STRATA_FI_WAIT=fd): an
  /// epoll set holding it edge-triggered (edge_fd_), else the doorbell socket
  /// (polled() stays true: it rings only after a pause).
  [[nodiscard]] int wait_fd() const override { return cq_fd_ >= 0 ? edge_fd_ : bell_.fd(); }
  [[nodiscard]] bool polled() const override { return cq_fd_ < 0; }
  void wait_fd_ready() override;

  bool prepare_wait() override;

  void fail_peer(int peer, const Status& why) override;

 private:
  // ------------------------------------------------------------ set-up
  [[noreturn]] void fail_start(Errc code, int peer, const std::string& what) {
    throw Error(code, "fabric backend (rank " + std::to_string(rank_) + "): rank " + std::to_string(peer) + " " + what);
  }

  Status err(Errc code, const std::string& what) const {
    return Status(code, "fabric (rank " + std::to_string(rank_) + "): " + what);
  }

  fi_info* get_info(std::uint64_t caps, std::uint64_t order, const std::string& prov);

  // Constructor steps (fabric_setup.cpp).
  /// Marks the served peers; false when none is (the fabric stays closed).
  bool select_peers(const Hierarchy& hier, const std::vector<bool>& serve);
  /// open(), turning a failure into its message ("" on success).
  std::string try_open();
  /// This rank's contribution to the start-up allgather.
  [[nodiscard]] std::vector<std::byte> start_blob(const std::string& open_error) const;
  /// Every rank's blob header, checked (throws on a malformed or failed one).
  std::vector<BlobHeader> check_blobs(const std::vector<std::vector<std::byte>>& all);
  /// Inserts served peer @p p into the AV and records its keys and paths.
  void connect_peer(int p, const BlobHeader& ph, const std::vector<std::byte>& blob);
  /// Opens the fabric: provider, domain, CQ, endpoint, registrations, receives.
  void open();
  /// The best provider's fi_info (the requested one, else by provider_rank()).
  fi_info* pick_provider();
  /// Reads info_'s modes and orderings into the path decisions.
  void read_provider();
  /// Throws transport_error "<what> failed" when @p rc is not 0.
  void check_fi(int rc, const char* what) const;
  /// Opens fabric, domain and completion queue (with its wait fd, if any).
  void open_domain();
  /// Opens AV and endpoint, binds and enables it, opens the doorbell.
  void open_endpoint();
  /// The registration cache, the registered slabs and the mailboxes (fabric_memory.cpp).
  void open_registrations();
  /// Fills the send slot free list and pre-posts every receive slot.
  void post_receives();

  int reg_mr(void* addr, std::size_t len, fid_mr** out);

  static fid_mr* mr_of(const MrCache::Entry* e) { return reinterpret_cast<fid_mr*>(e->handle); }

  void close_all();

  void warm_up();

  // ------------------------------------------------------------ validation
  Status check_peer(const char* what, int peer) const;

  Status check_key(const char* what, int peer, const RemoteKey& key, std::uint64_t offset, std::size_t len) const;

  Status post_rma(Kind kind, int peer, const void* src, void* dst, std::size_t len, const RemoteKey& key,
                  std::uint64_t offset, std::uint64_t signal_value, void* context);

  // ------------------------------------------------------------ operations
  /// A fresh operation from the pool (no heap allocation once the pool is
  /// warm). It is not live until link()/submit(); give it back with recycle().
  Op* new_op(Kind kind, int peer, void* ctx) {
    Op* op = nullptr;
    if (op_free_.empty()) {
      op_store_.push_back(std::make_unique<Op>());
      op = op_store_.back().get();
    } else {
      op = op_free_.back();
      op_free_.pop_back();
    }
    op->kind = kind;
    op->peer = peer;
    op->user_ctx = ctx;
    op->deadline = Clock::now() + opts_.timeout;
    return op;
  }

  void recycle(Op* op) {
    *op = Op{};
    op_free_.push_back(op);
  }

  void link(Op* op) {
    op->live_index = ops_.size();
    ops_.push_back(op);
  }

  void unlink(Op* op) {
    Op* last = ops_.back();
    ops_[op->live_index] = last;
    last->live_index = op->live_index;
    ops_.pop_back();
  }

  /// Makes the op live, posts as much as possible; keeps FIFO order behind queued ops.
  /// Returns true when the op finished at the post (injected, or failed):
  /// its completion waits in events_, and the caller should dispatch() once
  /// it released mu_.
  bool submit(Op* raw);

  /// Notes that @p op may have become free-able.
  void mark(Op& op) {
    if (op.reap_listed) return;
    op.reap_listed = true;
    reap_list_.push_back(&op);
  }

  /// Posts the op's remaining steps. Returns false when it must wait (EAGAIN).
  bool advance(Op& op);

  /// Rings @p peer's doorbell unless this rank posted to it or heard from it
  /// within kBellGap (then it is awake: see poll_interval()). Under mu_.
  void ring(int peer, std::int64_t now);

  int acquire_slot(Op& op) {
    if (op.slot >= 0) return 0;
    if (free_slots_.empty()) return -FI_EAGAIN;
    op.slot = free_slots_.back();
    free_slots_.pop_back();
    return 0;
  }

  int post_step(Op& op, int step);
  /// Sets op.nsteps (and the message of message-path signals) for post_rma().
  void plan_steps(Op& op, const PeerState& ps) const;
  int rma_step(Op& op, const PeerState& ps, bool write, std::size_t off, std::size_t n, bool with_data,
               std::uint64_t flags);
  int post_atomic(Op& op, const PeerState& ps);

  /// Writes @p op (a signal or a put_with_signal of <= kMboxInline bytes) as
  /// the next entry of this rank's ring at the peer. -FI_EAGAIN while the ring
  /// is full (the op waits in retry_ for the peer's credit report).
  int post_mbox(Op& op);

  /// Delivers the entries the provider placed in the mailboxes since the last
  /// call, in each peer's order, and reports consumption back every
  /// kMboxCreditEvery entries. Returns the number delivered. Under mu_.
  std::size_t scan_mailboxes();

  void pop_pending(int p, PeerState& ps);

  /// A signal from @p src that came by CQ data or message (@p deliver false:
  /// dropped, but it used an index). From a peer with mailboxes it waits for
  /// scan_mailboxes(), which delivers in index order.
  void signal_from(int src, std::uint64_t payload, bool deliver);

  int send_msg(Op& op);

  /// Whether a step of @p op moving @p bytes is posted with fi_inject*: the
  /// provider copies at most inject_max_ bytes at the post and owes no
  /// completion. Only signals and put_with_signal (whose sender-side
  /// completion means "buffer reusable", which an inject meets at return);
  /// not plain puts (delivery complete) nor atomics and control answers.
  bool injectable(const Op& op, std::size_t bytes) const {
    return bytes <= inject_max_ && (op.kind == Kind::put_signal || op.kind == Kind::signal);
  }

  int post_recv(int slot) {
    Op& r = *recv_ops_[static_cast<std::size_t>(slot)];
    return static_cast<int>(
        fi_recv(ep_, &recv_slab_[static_cast<std::size_t>(slot)], sizeof(Slot), recv_desc_, FI_ADDR_UNSPEC, &r.fictx));
  }

  /// Delivers the user completion once (no-op if already delivered).
  void finish_user(Op& op, const Status& st) {
    if (op.user_done) return;
    op.user_done = true;
    if (op.bulk) bulk_ops_.fetch_sub(1, std::memory_order_relaxed);
    op.awaiting_resp = false;
    mark(op);
    if (op.kind == Kind::fetch_add) atomic_reqs_.erase(op.msg.d);
    if (op.internal) return;
    Event ev;
    ev.type = Event::completion;
    ev.ctx = op.user_ctx;
    ev.status = st;
    events_.push_back(std::move(ev));
  }

  /// Frees ops that the user and the provider are both done with.
  void reap() {
    reap_scratch_.clear();
    reap_scratch_.swap(reap_list_);  // both keep their capacity: no allocation per op
    for (Op* op : reap_scratch_) {
      op->reap_listed = false;
      if (op->user_done && op->outstanding == 0 && !op->queued) {
        release_resources(*op);
        unlink(op);
        recycle(op);
      }
    }
    reap_scratch_.clear();
  }

  void release_resources(Op& op) {
    if (op.slot >= 0) free_slots_.push_back(op.slot);
    op.slot = -1;
    if (op.local_mr != nullptr && cache_ != nullptr) cache_->release(op.local_mr);
    op.local_mr = nullptr;
  }

  // ------------------------------------------------------------ progress
  /// @p now: the time of the call (deadline checks).
  std::size_t progress_locked(Clock::time_point now);
  void check_deadlines(Clock::time_point now);  // fabric_failure.cpp

  void handle_cqe(const fi_cq_data_entry& e, fi_addr_t from);

  void handle_cq_error();

  void handle_msg(int slot, std::size_t len);

  void send_hello(int peer);

  void serve_atomic(const Msg& m);

  /// The local address of [raddr, raddr+len) in this rank's registration
  /// @p key (one that register_memory() handed out), or nullptr when the key
  /// is unknown or the range leaves the registration.
  std::byte* resolve_local(std::uint64_t key, std::uint64_t raddr, std::uint64_t len) const;

  void push_signal(int src, std::uint64_t payload);

  void fail_peer_locked(int peer, const Status& why);

  /// Runs handlers outside mu_, one dispatcher at a time, in event order.
  /// Signals wait (in order) until a signal handler is installed.
  void dispatch();

  // ------------------------------------------------------------ state
  int rank_;
  int size_;
  std::string shm_tag_;  // names the shm provider's region (see open())
  TransportOptions opts_;
  mutable std::mutex mu_;
  std::mutex handler_mu_;
  CompletionHandler on_complete_;
  SignalHandler on_signal_;
  PeerFailureHandler on_peer_failed_;
  std::deque<Event> held_;                 // signals waiting for a handler (handler_mu_)
  std::atomic<bool> held_pending_{false};  // !held_.empty(), readable without handler_mu_
  std::deque<Event> batch_;                // the dispatcher's batch (dispatching_)

  std::vector<PeerState> peers_;
  std::vector<int> addr_to_rank_;
  std::unique_ptr<MrCache> cache_;  // exists while the fabric is open
  /// Registrations handed to peers (register_memory), by key: the targets of
  /// inline put_with_signal and emulated fetch_add are checked against them.
  struct HeldRange {
    std::uintptr_t base = 0;
    std::size_t len = 0;
  };
  std::unordered_map<std::uint64_t, HeldRange> published_;
  bool warned_bad_inline_ = false;
  std::vector<Op*> ops_;                       // live operations (Op::live_index)
  std::vector<std::unique_ptr<Op>> op_store_;  // every Op ever allocated (pool)
  std::vector<Op*> op_free_;                   // recycled Ops
  std::deque<Op*> retry_;
  std::vector<Op*> reap_list_;
  std::vector<Op*> reap_scratch_;
  std::vector<int> repost_;
  std::unordered_map<std::uint64_t, Op*> atomic_reqs_;
  std::uint64_t next_req_id_ = 1;
  std::deque<Event> events_;
  bool dispatching_ = false;
  bool shut_ = false;
  Clock::time_point next_deadline_check_{};

  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
  fid_cntr* wr_cntr_ = nullptr;  // the tcp;ofi_rxm inject guard (open())
  int cq_fd_ = -1;
  // The CQ's fd, edge-triggered (docs/fabric.md "Progress, waiting"): with
  // libfabric 1.17's net provider the fd stays readable once a completion
  // was signalled (fi_cq_read does not clear it and fi_trywait does not
  // either), so a level-triggered wait returned at once, forever: an idle
  // rank spun at 21-27% of a core. An edge-triggered epoll entry on it still
  // fires on every new socket event and completion signal under it.
  int edge_fd_ = -1;
  int wake_fd_ = -1;
  // Doorbell (docs/fabric.md "Idle ranks"): a UDP socket at this rank's
  // endpoint address; a peer sends one byte to it before its first post
  // after a pause, so an idle rank can sleep until it rings.
  Doorbell bell_;
  bool deep_ok_ = false;  // this rank has a bell and every served peer can ring it
  static constexpr std::chrono::microseconds kBellGap{500};
  static constexpr std::chrono::milliseconds kDeepAfter{5};
  static constexpr std::chrono::milliseconds kDeepPoll{50};
  static constexpr std::chrono::microseconds kBusyPoll{20};
  // Durations of a progress() call beyond an empty call's (empty_call_):
  // this much more moved data. Measured over tcp;ofi_rxm (1 MiB puts) on
  // one VM: empty calls < 1 us, calls that move data 2-10 us (few > 10); on
  // another, empty calls 1.7-2 us (hence "beyond", not absolute).
  static constexpr std::chrono::microseconds kBusyCall{10};
  static constexpr std::chrono::microseconds kStreamCall{2};
  static constexpr std::chrono::microseconds kStreamWindow{200};
  static constexpr std::chrono::microseconds kProbeWindow{100};  // after one long call
  static constexpr std::size_t kStreamBytes = std::size_t{64} << 10;
  static constexpr std::chrono::microseconds kWarmPoll{100};
  static constexpr std::chrono::milliseconds kHotWindow{2};
  static constexpr std::chrono::milliseconds kWarmWindow{100};
  Clock::duration empty_call_ = std::chrono::hours(1);  // under mu_: an empty progress call's cost here
  std::atomic<Clock::rep> last_long_{0};                // steady time of the last long progress() call
  std::atomic<std::size_t> live_ops_{0};                // ops_.size(), readable without mu_
  std::atomic<Clock::rep> last_activity_{0};            // steady time of the last post or event
  std::atomic<Clock::rep> last_stream_{0};              // steady time of the last long progress() call
  std::atomic<int> bulk_ops_{0};                        // user puts/gets of >= kStreamBytes not yet completed
  bool opened_ = false;
  std::string provider_;
  std::string ep_name_;
  std::uint32_t local_flags_ = 0;
  bool virt_addr_ = false;
  bool prov_key_ = false;
  bool mr_local_ = false;
  bool mr_endpoint_ = false;
  bool delivery_complete_ = true;
  bool saw_ = false;
  bool debug_ = strata::detail::env::get("STRATA_FI_DEBUG") != nullptr;
  // Diagnostics (docs/fabric.md): STRATA_FI_INLINE=off sends every
  // put_with_signal of the message path as write + message;
  // STRATA_FI_STREAM_POLL=off lets pollers nap during bulk transfers.
  std::size_t inline_max_ = env_is("STRATA_FI_INLINE", "off") ? 0 : kInlineMax;
  /// Largest step posted with fi_inject* (the provider's inject_size; 0 with
  /// STRATA_FI_INJECT=off, and before open()).
  std::size_t inject_max_ = 0;
  bool stream_poll_ = !env_is("STRATA_FI_STREAM_POLL", "off");
  bool raw_ = false;
  bool native_atomics_ = false;
  bool cq_data_ok_ = false;  // 8-byte remote CQ data with WAW ordering
  int single_peer_ = -1;     // the only served peer, or -1
  std::size_t max_msg_ = std::size_t{1} << 30;
  std::uint64_t next_key_ = 1;

  std::vector<Slot> send_slab_;
  std::vector<Slot> recv_slab_;
  std::vector<Msg> landing_;
  std::vector<MboxEntry> mbox_;             // rings: peer p's at [p * kMboxEntries, (p + 1) * kMboxEntries)
  std::vector<std::uint64_t> mbox_credit_;  // [p]: entries peer p consumed from this rank's ring there
  std::uint64_t mbox_key_ = 0;
  std::uint64_t mbox_rma_addr_ = 0;
  std::uint64_t credit_key_ = 0;
  std::uint64_t credit_rma_addr_ = 0;
  std::vector<int> mbox_peers_;  // served peers with mailboxes, scanned by progress_locked()
  std::vector<int> free_slots_;
  std::vector<std::unique_ptr<Op>> recv_ops_;
  void* send_desc_ = nullptr;  // local descriptors of the held slabs
  void* recv_desc_ = nullptr;
  std::uint64_t landing_key_ = 0;
  std::uint64_t landing_rma_addr_ = 0;
};

// Defined here (inline) because both the posts (fabric_rma.cpp) and the
// retries of queued operations in progress_locked() (fabric_progress.cpp) run it.
inline bool FabricBackend::advance(Op& op) {
  while (op.step < op.nsteps && !op.user_done) {
    // Without FI_ORDER_SAW the signal message of a put_with_signal waits for
    // its writes to complete (the op stays at the head of the FIFO queue).
    if (op.kind == Kind::put_signal && !saw_ && op.step == op.nsteps - 1 && op.outstanding > 0 &&
        !peers_[static_cast<std::size_t>(op.peer)].cq_signals)
      return false;
    int rc = post_step(op, op.step);
    if (rc == -FI_EAGAIN) return false;
    if (rc < 0) {
      // A lost connection fails this op as peer_dead too: the caller sees
      // the same error class whichever op noticed the death first.
      const bool lost = connection_lost(-rc);
      Status why = err(
          lost ? Errc::peer_dead : Errc::transport_error,
          std::string(kind_name(op.kind)) + " to rank " + std::to_string(op.peer) + ": posting failed: " + fi_err(rc));
      finish_user(op, why);
      if (lost) fail_peer_locked(op.peer, why);
      return true;
    }
    if (rc != kInjected) ++op.outstanding;
    // The last step of a signal or put_with_signal carries its signal.
    if (op.step == op.nsteps - 1 && (op.kind == Kind::put_signal || op.kind == Kind::signal))
      ++peers_[static_cast<std::size_t>(op.peer)].sig_sent;
    ++op.step;
  }
  // Every step injected (or the rest completed meanwhile): done at the post.
  if (op.step == op.nsteps && op.outstanding == 0 && !op.user_done && !op.awaiting_resp) finish_user(op, Status::ok());
  return true;
}

}  // namespace strata::transport::detail::fabric
