// libfabric RMA backend. See docs/fabric.md for the design.
//
// One RDM endpoint, one CQ (FI_CQ_FORMAT_DATA, FI_WAIT_FD when available), one
// AV table. All libfabric calls happen under one mutex (domain threading
// FI_THREAD_DOMAIN); user handlers run outside it, one dispatcher at a time, in
// the order events were produced, so signals from one source keep their order.
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
#include "mr_cache.hpp"
#include "shm/sync.hpp"
#include "strata/detail/env.hpp"
#include "strata/detail/log.hpp"
#include "strata/detail/rendezvous.hpp"

namespace strata::transport::detail {
namespace fabric {
namespace {

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

std::string fi_err(int rc) { return std::string(fi_strerror(rc < 0 ? -rc : rc)) + " (" + std::to_string(rc) + ")"; }

const char* kind_name(Kind k) {
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
bool connection_lost(int e) {
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

int provider_rank(const std::string& prov, const std::string& prefer) {
  // Lower is better; -1 excluded from automatic selection.
  if (!prefer.empty() && prov == prefer) return 0;
  static const char* const order[] = {"verbs;ofi_rxm", "efa", "cxi", "psm3", "opx", "tcp;ofi_rxm", "sockets", "tcp"};
  int i = 0;
  for (const char* p : order) {
    if (prov == p) return i + 1;
    ++i;
  }
  if (prov == "shm" || prov.find("ofi_rxd") != std::string::npos || prov == "udp" || prov == "net" ||
      prov.find("hook") != std::string::npos)
    return -1;
  return i + 1;
}

bool env_is(const char* name, const char* value) { return strata::detail::env::is(name, value); }

class FabricBackend final : public Backend, public PollHint {
 public:
  FabricBackend(Bootstrap& boot, const Hierarchy& hier, const std::vector<bool>& serve, const TransportOptions& opts)
      : rank_(boot.rank()),
        size_(boot.size()),
        shm_tag_(
            strata::detail::rdv::shm_job_tag(boot.job().job_id, boot.job().secret.data(), boot.job().secret.size())),
        opts_(opts) {
    if (static_cast<int>(serve.size()) != size_)
      throw Error(Errc::invalid_argument, "fabric backend (rank " + std::to_string(rank_) + "): serve has " +
                                              std::to_string(serve.size()) + " entries for " + std::to_string(size_) +
                                              " ranks");
    if (hier.size() != 0 && hier.size() != size_)
      throw Error(Errc::invalid_argument, "fabric backend (rank " + std::to_string(rank_) + "): hierarchy has " +
                                              std::to_string(hier.size()) + " ranks, bootstrap " +
                                              std::to_string(size_));
    peers_.resize(static_cast<std::size_t>(size_));
    bool any = false;
    for (int p = 0; p < size_; ++p) {
      peers_[static_cast<std::size_t>(p)].served = serve[static_cast<std::size_t>(p)] && p != rank_;
      if (peers_[static_cast<std::size_t>(p)].served) {
        single_peer_ = any ? -1 : p;  // the only served peer, or -1
        any = true;
      }
    }
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

    // 1. Open the fabric when some peer needs it; a failure is reported through
    //    the allgather so that every rank fails instead of hanging.
    std::string open_error;
    if (any) {
      try {
        open();
      } catch (const Error& e) {
        open_error = e.what();
        const std::string suffix = ": " + e.code().message();  // added by std::system_error
        if (open_error.size() > suffix.size() &&
            open_error.compare(open_error.size() - suffix.size(), suffix.size(), suffix) == 0)
          open_error.resize(open_error.size() - suffix.size());
        close_all();
      }
    }
    BlobHeader h;
    h.opened = (opened_ ? 1u : 0u);
    h.flags = local_flags_;
    h.landing_addr = landing_rma_addr_;
    h.landing_key = landing_key_;
    h.mbox_addr = mbox_rma_addr_;
    h.mbox_key = mbox_key_;
    h.credit_addr = credit_rma_addr_;
    h.credit_key = credit_key_;
    std::snprintf(h.provider, sizeof(h.provider), "%s", provider_.c_str());
    std::snprintf(h.error, sizeof(h.error), "%s", open_error.c_str());
    h.name_len = static_cast<std::uint32_t>(ep_name_.size());
    h.bell_len = static_cast<std::uint32_t>(bell_len_);
    std::memcpy(h.bell_addr.data(), &bell_self_, std::min<std::size_t>(bell_len_, h.bell_addr.size()));
    std::vector<std::byte> blob(sizeof(h) + ep_name_.size());
    std::memcpy(blob.data(), &h, sizeof(h));
    if (!ep_name_.empty()) std::memcpy(blob.data() + sizeof(h), ep_name_.data(), ep_name_.size());
    auto all = boot.allgather(blob.data(), blob.size());
    if (!open_error.empty()) throw Error(Errc::transport_error, open_error);

    // 2. Check the peers' blobs, decide atomics, insert served peers into the AV.
    std::vector<BlobHeader> heads(static_cast<std::size_t>(size_));
    for (int p = 0; p < size_; ++p) {
      const auto& b = all.at(static_cast<std::size_t>(p));
      BlobHeader& ph = heads[static_cast<std::size_t>(p)];
      if (b.size() < sizeof(BlobHeader)) fail_start(Errc::bootstrap_error, p, "sent a malformed start-up blob");
      std::memcpy(&ph, b.data(), sizeof(BlobHeader));
      ph.provider[sizeof(ph.provider) - 1] = '\0';
      ph.error[sizeof(ph.error) - 1] = '\0';
      if (ph.magic != kBlobMagic || b.size() != sizeof(BlobHeader) + ph.name_len)
        fail_start(Errc::bootstrap_error, p, "sent a malformed start-up blob");
      if (ph.error[0] != '\0')
        fail_start(Errc::transport_error, p, std::string("failed to open libfabric: ") + ph.error);
    }
    native_atomics_ = opened_ && !env_is("STRATA_FI_ATOMICS", "emulate");
    for (int p = 0; p < size_; ++p) {
      const BlobHeader& ph = heads[static_cast<std::size_t>(p)];
      if (ph.opened != 0 && (ph.flags & kNativeAtomics) == 0) native_atomics_ = false;
    }
    if (!opened_) return;
    for (int p = 0; p < size_; ++p) {
      PeerState& ps = peers_[static_cast<std::size_t>(p)];
      if (!ps.served) continue;
      const BlobHeader& ph = heads[static_cast<std::size_t>(p)];
      if (ph.opened == 0) fail_start(Errc::bootstrap_error, p, "did not open libfabric although this rank serves it");
      if (provider_ != ph.provider)
        fail_start(Errc::transport_error, p,
                   std::string("uses provider '") + ph.provider + "', this rank '" + provider_ + "'");
      const auto& b = all[static_cast<std::size_t>(p)];
      fi_addr_t a = FI_ADDR_UNSPEC;
      int rc = fi_av_insert(av_, b.data() + sizeof(BlobHeader), 1, &a, 0, nullptr);
      if (rc != 1) fail_start(Errc::transport_error, p, "fi_av_insert failed: " + fi_err(rc));
      ps.addr = a;
      if (ph.bell_len > 0 && ph.bell_len <= ph.bell_addr.size()) {
        std::memcpy(&ps.bell, ph.bell_addr.data(), ph.bell_len);
        ps.bell_len = static_cast<socklen_t>(ph.bell_len);
      }
      ps.landing_addr = ph.landing_addr;
      ps.landing_key = ph.landing_key;
      // Mailboxes when both sides keep them; each rank's ring and credit word
      // at the peer are indexed by its world rank.
      ps.mbox = (local_flags_ & kMailboxes) != 0 && (ph.flags & kMailboxes) != 0;
      if (ps.mbox) {
        ps.mbox_addr = ph.mbox_addr + static_cast<std::uint64_t>(rank_) * kMboxEntries * sizeof(MboxEntry);
        ps.mbox_key = ph.mbox_key;
        ps.credit_addr = ph.credit_addr + static_cast<std::uint64_t>(rank_) * sizeof(std::uint64_t);
        ps.credit_key = ph.credit_key;
        mbox_peers_.push_back(p);
      }
      // Per direction: signals to p are CQ data when p can attribute them (the
      // provider is the same on both sides, so cq_data_ok_ holds there too).
      ps.cq_signals = cq_data_ok_ && (ph.flags & kCanResolveSource) != 0 && !env_is("STRATA_FI_SIGNAL", "msg");
      if (addr_to_rank_.size() <= a) addr_to_rank_.resize(static_cast<std::size_t>(a) + 1, -1);
      addr_to_rank_[static_cast<std::size_t>(a)] = p;
    }

    // Deep idle sleep only when every peer that may post to this rank can ring.
    deep_ok_ = bell_fd_ >= 0;
    for (const PeerState& ps : peers_)
      if (ps.served && ps.bell_len == 0) deep_ok_ = false;

    // 3. Warm connections: one hello each way with every served peer.
    warm_up();
  }

  ~FabricBackend() override {
    shutdown();
    std::lock_guard<std::mutex> lk(mu_);
    close_all();
    if (wake_fd_ >= 0) ::close(wake_fd_);
  }

  FabricBackend(const FabricBackend&) = delete;
  FabricBackend& operator=(const FabricBackend&) = delete;

  // ------------------------------------------------------------ Transport
  [[nodiscard]] int rank() const noexcept override { return rank_; }
  [[nodiscard]] int size() const noexcept override { return size_; }
  [[nodiscard]] std::string name() const override {
    // "+mailboxes": small signals to some peers travel as mailbox entries.
    // "+waitfd": the CQ's wait fd is what a blocked server sleeps on.
    return "ofi:" + (provider_.empty() ? std::string("none") : provider_) + (mbox_peers_.empty() ? "" : "+mailboxes") +
           (cq_fd_ >= 0 ? "+waitfd" : "");
  }

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

  Status register_memory(void* addr, std::size_t len, RemoteKey* key) override {
    if (key == nullptr) return err(Errc::invalid_argument, "register_memory: key is null");
    if (addr == nullptr || len == 0) return err(Errc::invalid_argument, "register_memory: empty range (addr or len 0)");
    std::lock_guard<std::mutex> lk(mu_);
    if (shut_) return err(Errc::shutdown, "register_memory after shutdown");
    key->owner = rank_;
    key->addr = reinterpret_cast<std::uintptr_t>(addr);
    key->len = len;
    if (!opened_) return Status::ok();  // no fabric peer: nothing to register
    auto a = reinterpret_cast<std::uintptr_t>(addr);
    // Held: peers get the key, so the entry stays until deregister_memory().
    const MrCache::Entry* e = nullptr;
    if (Status s = cache_->hold(addr, len, &e); !s) return err(s.code(), "register_memory: " + s.message());
    const std::uint64_t k = fi_mr_key(mr_of(e));
    published_[k] = HeldRange{e->base, e->len};
    key->flags |= RemoteKey::kFabric;
    key->fi_key = k;
    // RMA address of byte 0 of the range = fi_base (+ offset at use).
    key->fi_base = virt_addr_ ? a : a - e->base;
    return Status::ok();
  }

  Status deregister_memory(void* addr, std::size_t len) override {
    if (addr == nullptr || len == 0) return err(Errc::invalid_argument, "deregister_memory: empty range");
    std::lock_guard<std::mutex> lk(mu_);
    if (!opened_) return Status::ok();
    // Forget the keys of every overlapping registration (the rule of
    // MrCache::invalidate) before the cache drops the entries.
    const auto a = reinterpret_cast<std::uintptr_t>(addr);
    const std::uintptr_t end = a + len < a ? UINTPTR_MAX : a + len;
    for (auto it = published_.begin(); it != published_.end();) {
      if (it->second.base < end && it->second.base + it->second.len > a)
        it = published_.erase(it);
      else
        ++it;
    }
    cache_->invalidate(addr, len);
    return Status::ok();
  }

  Status put(int peer, const void* src, std::size_t len, const RemoteKey& dst, std::uint64_t dst_offset,
             void* context) override {
    return post_rma(Kind::put, peer, src, nullptr, len, dst, dst_offset, 0, context);
  }
  Status get(int peer, void* dst, std::size_t len, const RemoteKey& src, std::uint64_t src_offset,
             void* context) override {
    return post_rma(Kind::get, peer, nullptr, dst, len, src, src_offset, 0, context);
  }
  Status put_with_signal(int peer, const void* src, std::size_t len, const RemoteKey& dst, std::uint64_t dst_offset,
                         std::uint64_t signal, void* context) override {
    return post_rma(Kind::put_signal, peer, src, nullptr, len, dst, dst_offset, signal, context);
  }

  Status signal(int peer, std::uint64_t payload, void* context) override {
    std::unique_lock<std::mutex> lk(mu_);
    if (Status s = check_peer("signal", peer); !s) return s;
    Op* op = new_op(Kind::signal, peer, context);
    op->data = payload;
    const PeerState& ps = peers_[static_cast<std::size_t>(peer)];
    op->mbox = ps.mbox;
    if (ps.mbox) {
      // one mailbox entry (post_mbox)
    } else if (ps.cq_signals) {
      op->raddr = ps.landing_addr;
      op->rkey = ps.landing_key;
    } else {
      op->msg.type = static_cast<std::uint32_t>(MsgType::signal);
      op->msg.a = payload;
    }
    if (submit(op)) {
      lk.unlock();
      dispatch();
    }
    return Status::ok();
  }

  Status fetch_add(int peer, const RemoteKey& dst, std::uint64_t dst_offset, std::uint64_t addend,
                   std::uint64_t* fetched, void* context) override {
    std::unique_lock<std::mutex> lk(mu_);
    if (Status s = check_peer("fetch_add", peer); !s) return s;
    if (fetched == nullptr)
      return err(Errc::invalid_argument, "fetch_add to rank " + std::to_string(peer) + ": fetched is null");
    if (Status s = check_key("fetch_add", peer, dst, dst_offset, sizeof(std::uint64_t)); !s) return s;
    if ((dst.addr + dst_offset) % alignof(std::uint64_t) != 0)
      return err(Errc::invalid_argument, "fetch_add to rank " + std::to_string(peer) + ": dst_offset " +
                                             std::to_string(dst_offset) + " gives a misaligned 64-bit word");
    Op* op = new_op(Kind::fetch_add, peer, context);
    op->raddr = dst.fi_base + dst_offset;
    op->rkey = dst.fi_key;
    op->data = addend;
    op->fetched = fetched;
    if (!native_atomics_) {
      op->msg.type = static_cast<std::uint32_t>(MsgType::atomic_req);
      op->msg.a = op->raddr;
      op->msg.b = op->rkey;
      op->msg.c = addend;
      op->msg.d = next_req_id_;
      op->awaiting_resp = true;
      atomic_reqs_[next_req_id_++] = op;
    }
    submit(op);
    return Status::ok();
  }

  std::size_t progress() override {
    std::size_t n = 0;
    bool events = false;
    Clock::time_point t0;
    Clock::time_point t1;
    Clock::duration extra{0};
    {
      std::lock_guard<std::mutex> lk(mu_);
      t0 = Clock::now();
      n = progress_locked(t0);
      t1 = Clock::now();
      // What an empty call costs on this machine: the lowest recent duration
      // (drifting up slowly so that it follows the machine).
      const Clock::duration d = t1 - t0;
      if (d < empty_call_)
        empty_call_ = d;
      else
        empty_call_ += (d - empty_call_) / 1024;
      extra = d - empty_call_;
      live_ops_.store(ops_.size(), std::memory_order_relaxed);
      events = !events_.empty();
    }
    // A passive RMA target sees no CQ entry for incoming writes, but the
    // provider moves their bytes inside this call: long calls mean data is
    // streaming in, so keep the short poll interval (poll_interval()) as if
    // an event had arrived. "Long" is measured against what an empty call
    // costs here (on this KVM guest 1.7-2 us, more when the machine is
    // loaded), and one long call is only a probe (poll every kBusyPoll for
    // kProbeWindow); a second one within it confirms the stream. A call that
    // was merely descheduled is long too: against a fixed 2 us and without
    // the confirmation, such calls kept an idle rank polling without pause
    // (27-42% of a core, strata-bench --idle).
    const auto now = t1.time_since_epoch().count();
    bool confirmed = false;
    if (extra > kStreamCall) {
      const auto prev = last_long_.exchange(now, std::memory_order_relaxed);
      confirmed = now - prev < std::chrono::duration_cast<Clock::duration>(kProbeWindow).count();
    }
    if (n > 0 || (confirmed && extra > kBusyCall)) last_activity_.store(now, std::memory_order_relaxed);
    if (confirmed) last_stream_.store(now, std::memory_order_relaxed);
    // Nothing to hand out: skip the dispatcher (two locks) on empty polls.
    if (events || held_pending_.load(std::memory_order_acquire)) dispatch();
    return n;
  }

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
  [[nodiscard]] std::chrono::microseconds poll_interval() const override {
    if (cq_fd_ >= 0) return std::chrono::microseconds(1000);
    if (stream_poll_ && bulk_ops_.load(std::memory_order_relaxed) > 0) return std::chrono::microseconds(0);
    const auto now = Clock::now().time_since_epoch().count();
    if (stream_poll_ && now - last_stream_.load(std::memory_order_relaxed) <
                            std::chrono::duration_cast<Clock::duration>(kStreamWindow).count())
      return std::chrono::microseconds(0);
    if (stream_poll_ && now - last_long_.load(std::memory_order_relaxed) <
                            std::chrono::duration_cast<Clock::duration>(kProbeWindow).count())
      return kBusyPoll;  // one long call: look again soon (a second confirms a stream)
    if (live_ops_.load(std::memory_order_relaxed) > 0) return kBusyPoll;
    const auto since = now - last_activity_.load(std::memory_order_relaxed);
    if (since < std::chrono::duration_cast<Clock::duration>(kHotWindow).count()) return kBusyPoll;
    // With a doorbell, every peer rings before its first post after a pause
    // of kBellGap (ring()), so a rank idle for kDeepAfter > kBellGap + transit
    // can sleep long: the bell wakes it. kDeepPoll only bounds a lost bell.
    if (deep_ok_ && since >= std::chrono::duration_cast<Clock::duration>(kDeepAfter).count()) return kDeepPoll;
    if (since < std::chrono::duration_cast<Clock::duration>(kWarmWindow).count()) return kWarmPoll;
    return std::chrono::microseconds(1000);
  }

  void wait_for_event(std::chrono::microseconds timeout) override {
    std::chrono::microseconds limit = std::max(timeout, std::chrono::microseconds(0));
    std::array<pollfd, 2> fds{};
    nfds_t nfds = 0;
    fds[nfds++] = pollfd{wake_fd_, POLLIN, 0};
    if (cq_fd_ >= 0 && prepare_wait()) {
      fds[nfds++] = pollfd{cq_fd_, POLLIN, 0};
    } else if (cq_fd_ >= 0) {
      return;  // work pending
    } else if (opened_) {
      // No fd: poll again at the PollHint interval (20 us while busy), with
      // microsecond resolution (poll()'s milliseconds made every blocking
      // ping-pong hop of fabric_rank and the start-up hello ~0.5-1 ms).
      limit = std::min(limit, poll_interval());
    }
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(limit.count() / 1000000);
    ts.tv_nsec = static_cast<long>((limit.count() % 1000000) * 1000);
    if (::ppoll(fds.data(), nfds, &ts, nullptr) > 0 && (fds[0].revents & POLLIN) != 0) {
      std::uint64_t v = 0;
      ssize_t r = ::read(wake_fd_, &v, sizeof(v));
      (void)r;
    }
  }

  void wake() override {
    std::uint64_t one = 1;
    ssize_t r = ::write(wake_fd_, &one, sizeof(one));
    (void)r;
  }

  [[nodiscard]] Status peer_status(int peer) const override {
    if (peer < 0 || peer >= size_)
      return Status(Errc::unknown_peer, "fabric (rank " + std::to_string(rank_) + "): peer " + std::to_string(peer) +
                                            " outside [0, " + std::to_string(size_) + ")");
    std::lock_guard<std::mutex> lk(mu_);
    return peers_[static_cast<std::size_t>(peer)].dead;
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (shut_) return;
      shut_ = true;
      Status why(Errc::shutdown, "fabric (rank " + std::to_string(rank_) + "): transport shut down");
      for (Op* o : ops_) finish_user(*o, why);
      for (Op* o : retry_) o->queued = false;
      retry_.clear();
      reap();
    }
    dispatch();
  }

  // ------------------------------------------------------------ Backend
  /// The CQ's fd when it is used (the net provider, or STRATA_FI_WAIT=fd), else
  /// the doorbell socket (polled() stays true: it rings only after a pause).
  [[nodiscard]] int wait_fd() const override { return cq_fd_ >= 0 ? cq_fd_ : bell_fd_; }
  [[nodiscard]] bool polled() const override { return cq_fd_ < 0; }
  void wait_fd_ready() override {
    if (cq_fd_ >= 0 || bell_fd_ < 0) return;
    std::array<char, 64> buf{};
    while (::recv(bell_fd_, buf.data(), buf.size(), MSG_DONTWAIT) > 0) {
    }
    // A doorbell announces work: poll at the busy interval (kHotWindow).
    last_activity_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  }

  bool prepare_wait() override {
    std::lock_guard<std::mutex> lk(mu_);
    if (!opened_ || cq_fd_ < 0) return true;
    if (!retry_.empty() || !events_.empty()) return false;
    fid* fids[1] = {&cq_->fid};
    return fi_trywait(fabric_, fids, 1) == FI_SUCCESS;
  }

  void fail_peer(int peer, const Status& why) override {
    if (peer < 0 || peer >= size_) return;
    {
      std::lock_guard<std::mutex> lk(mu_);
      fail_peer_locked(peer, why);
    }
    dispatch();
  }

 private:
  // ------------------------------------------------------------ set-up
  [[noreturn]] void fail_start(Errc code, int peer, const std::string& what) {
    throw Error(code, "fabric backend (rank " + std::to_string(rank_) + "): rank " + std::to_string(peer) + " " + what);
  }

  Status err(Errc code, const std::string& what) const {
    return Status(code, "fabric (rank " + std::to_string(rank_) + "): " + what);
  }

  fi_info* get_info(std::uint64_t caps, std::uint64_t order, const std::string& prov) {
    fi_info* hints = fi_allocinfo();
    if (hints == nullptr) throw Error(Errc::internal, "fi_allocinfo failed");
    hints->caps = caps;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->tx_attr->msg_order = order;
    hints->rx_attr->msg_order = order;
    if (!prov.empty()) hints->fabric_attr->prov_name = strdup(prov.c_str());
    fi_info* info = nullptr;
    int rc = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info);
    fi_freeinfo(hints);
    if (rc != 0) return nullptr;
    return info;
  }

  void open() {
    const std::uint64_t base =
        FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_SEND | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE;
    const std::uint64_t tries[] = {base | FI_ATOMIC | FI_SOURCE, base | FI_SOURCE, base | FI_ATOMIC, base};
    const std::string& want = opts_.provider;
    // Providers report the ordering that was asked for: ask for what the
    // signal paths can use (WAW: CQ-data signals after earlier writes; SAW:
    // a signal message right behind its write; RAW: flush reads), then less.
    const std::uint64_t orders[] = {FI_ORDER_SAS | FI_ORDER_WAW | FI_ORDER_SAW | FI_ORDER_RAW, FI_ORDER_SAS};
    // Pick: the requested provider, else the best-ranked one over ALL the
    // capability tiers (a provider that lacks atomics or RAW ordering, like
    // tcp;ofi_rxm, must still beat `sockets`, which offers everything but is
    // ~4 ms per operation here); within a provider the richest tier wins, and
    // a non-loopback domain is preferred.
    fi_info* pick = nullptr;
    int best = 1 << 30;
    bool any = false;
    for (std::uint64_t order : orders) {
      for (std::uint64_t caps : tries) {
        fi_info* list = get_info(caps, order, want);
        if (list == nullptr) continue;
        any = true;
        for (fi_info* i = list; i != nullptr; i = i->next) {
          std::string prov = i->fabric_attr->prov_name != nullptr ? i->fabric_attr->prov_name : "";
          int r = want.empty() ? provider_rank(prov, opts_.prefer_provider) : 0;
          if (r < 0) continue;
          bool lo = i->domain_attr->name != nullptr && std::strcmp(i->domain_attr->name, "lo") == 0;
          r = r * 2 + (lo ? 1 : 0);
          if (r < best) {
            best = r;
            if (pick != nullptr) fi_freeinfo(pick);
            pick = fi_dupinfo(i);
          }
        }
        fi_freeinfo(list);
        if (!want.empty() && pick != nullptr) break;  // the requested provider at its richest tier
      }
      if (!want.empty() && pick != nullptr) break;
    }
    if (!any)
      throw Error(Errc::transport_error,
                  "fabric backend (rank " + std::to_string(rank_) + "): no libfabric provider " +
                      (want.empty() ? std::string("with FI_RDM + FI_RMA + FI_MSG") : "'" + want + "'") +
                      " available (check STRATA_PROVIDER and fi_info)");
    if (pick == nullptr) {
      throw Error(Errc::transport_error, "fabric backend (rank " + std::to_string(rank_) +
                                             "): no suitable provider for remote peers (only shm/udp/rxd found); set "
                                             "STRATA_PROVIDER");
    }
    info_ = pick;
    provider_ = info_->fabric_attr->prov_name;
    strata::detail::logger().info(
        "fabric: provider {}, fabric {}, domain (interface) {}, {} remote peer(s)", provider_,
        info_->fabric_attr->name != nullptr ? info_->fabric_attr->name : "?",
        info_->domain_attr != nullptr && info_->domain_attr->name != nullptr ? info_->domain_attr->name : "?",
        std::count_if(peers_.begin(), peers_.end(), [](const auto& q) { return q.served; }));
    const std::uint64_t mr_mode = static_cast<std::uint64_t>(info_->domain_attr->mr_mode);
    virt_addr_ = (mr_mode & FI_MR_VIRT_ADDR) != 0;
    prov_key_ = (mr_mode & FI_MR_PROV_KEY) != 0;
    mr_local_ = (mr_mode & FI_MR_LOCAL) != 0;
    mr_endpoint_ = (mr_mode & FI_MR_ENDPOINT) != 0;
    max_msg_ = info_->ep_attr->max_msg_size == 0 ? (std::size_t{1} << 30) : info_->ep_attr->max_msg_size;
    max_msg_ = std::min<std::size_t>(max_msg_, std::size_t{1} << 30);
    const bool has_source = (info_->caps & FI_SOURCE) != 0;
    const bool waw = (info_->tx_attr->msg_order & FI_ORDER_WAW) != 0;
    saw_ = (info_->tx_attr->msg_order & FI_ORDER_SAW) != 0;
    raw_ = (info_->tx_attr->msg_order & FI_ORDER_RAW) != 0;
    // CQ-data signals need the source of a remote write from fi_cq_readfrom.
    // Measured with libfabric 1.17: shm reports it; tcp;ofi_rxm accepts
    // FI_SOURCE but leaves src_addr unset for remote writes, so signals to it
    // travel as messages. STRATA_FI_SIGNAL=cqdata|msg overrides.
    // A rank that serves a single fabric peer needs no source: every remote
    // CQ data entry comes from that peer (e.g. 2 ranks on 2 hosts).
    const bool source_for_rma = provider_ == "shm" || env_is("STRATA_FI_SIGNAL", "cqdata");
    cq_data_ok_ = waw && info_->domain_attr->cq_data_size >= 8;
    if (cq_data_ok_ && ((has_source && source_for_rma) || single_peer_ >= 0)) local_flags_ |= kCanResolveSource;
    // Delivery complete: requested per operation; fall back to a flushing read.
    delivery_complete_ = !env_is("STRATA_FI_DELIVERY", "flush") || !raw_;
    // Small signals and put_with_signal go out with fi_inject*: done at the
    // post, no transmit completion to reap (over tcp;ofi_rxm that completion
    // costs a poll, a pipe write and read and a CQ read: ~2.4 us measured on
    // a broadcast root's 8 B put; docs/fabric.md, "Mailboxes").
    inject_max_ = env_is("STRATA_FI_INJECT", "off") ? 0 : info_->tx_attr->inject_size;

    auto check = [this](int rc, const char* what) {
      if (rc != 0)
        throw Error(Errc::transport_error, "fabric backend (rank " + std::to_string(rank_) + ", provider " + provider_ +
                                               "): " + what + " failed: " + fi_err(rc));
    };
    check(fi_fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
    check(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_DATA;
    cq_attr.size = 0;
    // With libfabric 1.17 neither tcp;ofi_rxm nor shm wake a thread blocked on
    // the CQ fd reliably when data arrives (measured: every wait ran to its
    // timeout), so the fd is opt-in for them (STRATA_FI_WAIT=fd); the default is no
    // wait object and wait_fd() == -1: the caller polls.
    // The net provider's fd does wake a blocked server when data arrives
    // (session 19: a 1 MiB broadcast across 2 hosts overlapped 81-86% with
    // compute in 6 of 8 runs through it, 35-64% polling; same latency 8 B -
    // 1 MiB; docs/fabric.md "Progress, waiting"), so it
    // is the default there; STRATA_FI_WAIT=poll|fd overrides either way.
    const bool want_fd = env_is("STRATA_FI_WAIT", "fd") || (provider_ == "net" && !env_is("STRATA_FI_WAIT", "poll"));
    cq_attr.wait_obj = want_fd ? FI_WAIT_FD : FI_WAIT_NONE;
    if (fi_cq_open(domain_, &cq_attr, &cq_, nullptr) != 0) {
      cq_attr.wait_obj = FI_WAIT_NONE;
      check(fi_cq_open(domain_, &cq_attr, &cq_, nullptr), "fi_cq_open");
    }
    if (cq_attr.wait_obj == FI_WAIT_FD) {
      int fd = -1;
      if (fi_control(&cq_->fid, FI_GETWAIT, &fd) == 0) cq_fd_ = fd;
    }
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    check(fi_av_open(domain_, &av_attr, &av_, nullptr), "fi_av_open");
    check(fi_endpoint(domain_, info_, &ep_, nullptr), "fi_endpoint");
    check(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
    check(fi_ep_bind(ep_, &av_->fid, 0), "fi_ep_bind(av)");
    // libfabric 1.17's tcp provider queues an RMA inject without marking it
    // one (tcpx_rma_inject_common sets no TCPX_INJECT_OP): when the
    // connection fails while one is queued it reports an error entry with no
    // context, which ofi_rxm dereferences (SIGSEGV in rxm_handle_comp_error,
    // read from a core with a debug build of 1.17.0: err ENOTCONN, context
    // null; a survivor crashed in ~1 of 100 peer-death runs across two virtual
    // hosts). ofi_rxm emulates every RMA inject through a buffer of its own
    // (a context it owns, freed on error) once the endpoint has a write
    // counter: bind one. It costs an rxm buffer copy per inject.
    if (provider_ == "tcp;ofi_rxm" && FI_VERSION_LT(fi_version(), FI_VERSION(1, 18)) &&
        !env_is("STRATA_FI_INJECT_GUARD", "off")) {
      fi_cntr_attr ca{};
      ca.events = FI_CNTR_EVENTS_COMP;
      ca.wait_obj = FI_WAIT_NONE;
      check(fi_cntr_open(domain_, &ca, &wr_cntr_, nullptr), "fi_cntr_open (rxm inject guard)");
      check(fi_ep_bind(ep_, &wr_cntr_->fid, FI_WRITE), "fi_ep_bind(write counter)");
    }
    if (provider_ == "shm") {
      // The shm provider names its region "<pid>:<domain>:<endpoint>" in
      // /dev/shm; a killed process leaves it behind and a later process that
      // reuses the PID fails fi_enable with EBUSY (seen in CI). A name from the
      // job tag is unique per job and rank, and strata-run's end-of-job sweep
      // of "strata-<tag>-*" removes it if this rank dies.
      std::string shm_name = "strata-" + shm_tag_ + "-fi" + std::to_string(rank_);
      check(fi_setname(&ep_->fid, shm_name.data(), shm_name.size() + 1), "fi_setname");
    }
    check(fi_enable(ep_), "fi_enable");
    std::array<char, 256> name{};
    std::size_t name_len = name.size();
    check(fi_getname(&ep_->fid, name.data(), &name_len), "fi_getname");
    ep_name_.assign(name.data(), name.data() + name_len);
    open_bell();

    if ((info_->caps & FI_ATOMIC) != 0) {
      std::size_t count = 0;
      if (fi_fetch_atomicvalid(ep_, FI_UINT64, FI_SUM, &count) == 0 && count >= 1) local_flags_ |= kNativeAtomics;
    }

    // The registration cache (transport/src/mr_cache.hpp): user registrations
    // and the slabs below are held, local descriptors of operations pinned.
    cache_ = std::make_unique<MrCache>(
        opts_.mr_cache_entries,
        [this](void* addr, std::size_t len, std::uint64_t* handle) -> Status {
          fid_mr* mr = nullptr;
          if (int rc = reg_mr(addr, len, &mr); rc != 0)
            return Status(Errc::transport_error,
                          "fi_mr_reg of " + std::to_string(len) + " bytes failed: " + fi_err(rc));
          *handle = reinterpret_cast<std::uintptr_t>(mr);
          return Status::ok();
        },
        [](std::uint64_t handle, void*, std::size_t) { fi_close(&reinterpret_cast<fid_mr*>(handle)->fid); });
    // Registered slabs: send slots, receive slots, signal landing region.
    send_slab_.resize(kSendSlots);
    recv_slab_.resize(kRecvSlots);
    landing_.resize(1);
    auto hold = [this](void* addr, std::size_t len, const char* what) {
      const MrCache::Entry* e = nullptr;
      Status s = cache_->hold(addr, len, &e);
      if (!s)
        throw Error(Errc::transport_error, "fabric backend (rank " + std::to_string(rank_) + ", provider " + provider_ +
                                               "): registering the " + what + ": " + s.message());
      return e;
    };
    send_desc_ = fi_mr_desc(mr_of(hold(send_slab_.data(), kSendSlots * kSlotSize, "send slots")));
    recv_desc_ = fi_mr_desc(mr_of(hold(recv_slab_.data(), kRecvSlots * kSlotSize, "receive slots")));
    landing_key_ = fi_mr_key(mr_of(hold(landing_.data(), kMsgSize, "signal landing region")));
    landing_rma_addr_ = virt_addr_ ? reinterpret_cast<std::uintptr_t>(landing_.data()) : 0;
    // Mailboxes: only where the provider places incoming data inside this
    // rank's own progress calls (manual data progress, a socket provider), so
    // that an entry whose last word shows its sequence number was placed
    // whole before progress_locked() reads it; and where a 64-byte entry is
    // one inject behind earlier writes (WAW).
    const bool socket_prov = provider_.rfind("tcp", 0) == 0 || provider_.rfind("sockets", 0) == 0;
    if (socket_prov && info_->domain_attr->data_progress == FI_PROGRESS_MANUAL &&
        info_->tx_attr->inject_size >= sizeof(MboxEntry) && (info_->tx_attr->msg_order & FI_ORDER_WAW) != 0 &&
        !env_is("STRATA_FI_MAILBOX", "off")) {
      mbox_.resize(static_cast<std::size_t>(size_) * kMboxEntries);
      mbox_credit_.assign(static_cast<std::size_t>(size_), 0);
      mbox_key_ = fi_mr_key(mr_of(hold(mbox_.data(), mbox_.size() * sizeof(MboxEntry), "mailboxes")));
      credit_key_ = fi_mr_key(
          mr_of(hold(mbox_credit_.data(), mbox_credit_.size() * sizeof(std::uint64_t), "mailbox credit words")));
      mbox_rma_addr_ = virt_addr_ ? reinterpret_cast<std::uintptr_t>(mbox_.data()) : 0;
      credit_rma_addr_ = virt_addr_ ? reinterpret_cast<std::uintptr_t>(mbox_credit_.data()) : 0;
      local_flags_ |= kMailboxes;
    }
    for (std::size_t i = 0; i < kSendSlots; ++i) free_slots_.push_back(static_cast<int>(kSendSlots - 1 - i));
    recv_ops_.resize(kRecvSlots);
    for (std::size_t i = 0; i < kRecvSlots; ++i) {
      recv_ops_[i] = std::make_unique<Op>();
      recv_ops_[i]->kind = Kind::recv;
      recv_ops_[i]->slot = static_cast<int>(i);
      int prc = post_recv(static_cast<int>(i));
      check(prc, "fi_recv (pre-posting)");
    }
    opened_ = true;
  }

  int reg_mr(void* addr, std::size_t len, fid_mr** out) {
    std::uint64_t requested = prov_key_ ? 0 : next_key_++;
    fid_mr* mr = nullptr;
    int rc = fi_mr_reg(domain_, addr, len, kMrAccess, 0, requested, 0, &mr, nullptr);
    if (rc != 0) return rc;
    if (mr_endpoint_) {
      rc = fi_mr_bind(mr, &ep_->fid, 0);
      if (rc == 0) rc = fi_mr_enable(mr);
      if (rc != 0) {
        fi_close(&mr->fid);
        return rc;
      }
    }
    *out = mr;
    return 0;
  }

  static fid_mr* mr_of(const MrCache::Entry* e) { return reinterpret_cast<fid_mr*>(e->handle); }

  void close_all() {
    if (bell_fd_ >= 0) ::close(bell_fd_);
    bell_fd_ = -1;
    bell_len_ = 0;
    if (ep_ != nullptr) fi_close(&ep_->fid);
    ep_ = nullptr;
    if (wr_cntr_ != nullptr) fi_close(&wr_cntr_->fid);
    wr_cntr_ = nullptr;
    for (Op* o : ops_) o->local_mr = nullptr;
    cache_.reset();  // closes every registration (before the domain)
    published_.clear();
    send_desc_ = recv_desc_ = nullptr;
    if (av_ != nullptr) fi_close(&av_->fid);
    av_ = nullptr;
    if (cq_ != nullptr) fi_close(&cq_->fid);
    cq_ = nullptr;
    cq_fd_ = -1;
    if (domain_ != nullptr) fi_close(&domain_->fid);
    domain_ = nullptr;
    if (fabric_ != nullptr) fi_close(&fabric_->fid);
    fabric_ = nullptr;
    if (info_ != nullptr) fi_freeinfo(info_);
    info_ = nullptr;
    ops_.clear();
    opened_ = false;
  }

  void warm_up() {
    std::vector<int> targets;
    {
      std::lock_guard<std::mutex> lk(mu_);
      // The lower rank connects first and the higher one answers: rxm
      // resolves simultaneous connects, but measured here the pair then ran
      // one to two orders of magnitude slower than after a one-sided connect.
      for (int p = 0; p < size_; ++p) {
        if (!peers_[static_cast<std::size_t>(p)].served) continue;
        targets.push_back(p);
        if (p > rank_) send_hello(p);
      }
    }
    const auto deadline = Clock::now() + opts_.timeout;
    for (;;) {
      int missing = -1;
      bool sends_pending = false;
      {
        std::lock_guard<std::mutex> lk(mu_);
        progress_locked(Clock::now());
        for (int p : targets) {
          const PeerState& ps = peers_[static_cast<std::size_t>(p)];
          if (!ps.dead.is_ok())
            throw Error(ps.dead.code(), "fabric backend (rank " + std::to_string(rank_) +
                                            "): warming the connection to rank " + std::to_string(p) +
                                            " failed: " + ps.dead.message());
          if (!ps.hello_seen && missing < 0) missing = p;
        }
        sends_pending = !ops_.empty();
      }
      if (missing < 0 && !sends_pending) break;
      if (Clock::now() > deadline)
        throw Error(Errc::timeout, "fabric backend (rank " + std::to_string(rank_) + "): rank " +
                                       std::to_string(missing < 0 ? targets.front() : missing) +
                                       " did not answer the start-up hello within " +
                                       std::to_string(opts_.timeout.count()) + " ms");
      wait_for_event(std::chrono::microseconds(1000));
    }
    // Events produced while warming (none owed to the user) are dropped.
    std::lock_guard<std::mutex> lk(mu_);
    events_.clear();
  }

  // ------------------------------------------------------------ validation
  Status check_peer(const char* what, int peer) const {
    if (shut_) return err(Errc::shutdown, std::string(what) + " after shutdown");
    if (peer < 0 || peer >= size_)
      return err(Errc::unknown_peer,
                 std::string(what) + ": peer " + std::to_string(peer) + " outside [0, " + std::to_string(size_) + ")");
    const PeerState& ps = peers_[static_cast<std::size_t>(peer)];
    if (!ps.served || !opened_)
      return err(Errc::unknown_peer,
                 std::string(what) + ": peer " + std::to_string(peer) + " is not served by the libfabric backend");
    if (!ps.dead.is_ok()) return ps.dead;
    return Status::ok();
  }

  Status check_key(const char* what, int peer, const RemoteKey& key, std::uint64_t offset, std::size_t len) const {
    const std::string who = std::string(what) + " to rank " + std::to_string(peer);
    if (!key.valid() || (key.flags & RemoteKey::kFabric) == 0)
      return err(Errc::invalid_argument, who + ": remote key has no libfabric registration");
    if (key.owner != peer)
      return err(Errc::invalid_argument, who + ": remote key belongs to rank " + std::to_string(key.owner));
    if (offset > key.len || len > key.len - offset)
      return err(Errc::out_of_range, who + ": offset " + std::to_string(offset) + " + length " + std::to_string(len) +
                                         " exceeds the registration of " + std::to_string(key.len) + " bytes");
    return Status::ok();
  }

  Status post_rma(Kind kind, int peer, const void* src, void* dst, std::size_t len, const RemoteKey& key,
                  std::uint64_t offset, std::uint64_t signal_value, void* context) {
    const char* what = kind_name(kind);
    std::unique_lock<std::mutex> lk(mu_);
    if (Status s = check_peer(what, peer); !s) return s;
    if (len > 0 && src == nullptr && kind != Kind::get)
      return err(Errc::invalid_argument, std::string(what) + " to rank " + std::to_string(peer) + ": src is null");
    if (len > 0 && dst == nullptr && kind == Kind::get)
      return err(Errc::invalid_argument, std::string(what) + " from rank " + std::to_string(peer) + ": dst is null");
    if (Status s = check_key(what, peer, key, offset, len); !s) return s;
    const PeerState& ps = peers_[static_cast<std::size_t>(peer)];
    // Small put_with_signal on the message path: the data is copied into the
    // signal message (one message; the target copies it out before the signal).
    // Up to kMboxInline bytes ride in a mailbox entry (one inject, nothing to
    // complete on either side); larger data keeps one write carrying the
    // signal (or the message path), ordered with the entries by signal index.
    const bool mbox = kind == Kind::put_signal && ps.mbox && len <= kMboxInline;
    const bool inline_data = !mbox && kind == Kind::put_signal && !ps.cq_signals && len > 0 && len <= inline_max_;
    const MrCache::Entry* local_mr = nullptr;
    if (len > 0 && mr_local_ && !inline_data && !mbox) {
      void* a = kind == Kind::get ? dst : const_cast<void*>(src);
      if (Status s = cache_->acquire(a, len, &local_mr); !s)
        return err(Errc::not_registered, std::string(what) + ": registering the local buffer failed: " + s.message());
    }
    Op* op = new_op(kind, peer, context);
    op->src = static_cast<const std::byte*>(src);
    op->dst = static_cast<std::byte*>(dst);
    op->len = len;
    op->raddr = key.fi_base + offset;
    op->rkey = key.fi_key;
    op->data = signal_value;
    op->local_mr = local_mr;
    op->inline_data = inline_data;
    op->mbox = mbox;
    if (len >= kStreamBytes) {
      op->bulk = true;
      bulk_ops_.fetch_add(1, std::memory_order_relaxed);
    }
    std::size_t chunks = len == 0 ? 0 : (len + max_msg_ - 1) / max_msg_;
    if (mbox) {
      op->nsteps = 1;
    } else if (inline_data) {
      op->nsteps = 1;
      op->msg.type = static_cast<std::uint32_t>(MsgType::put_signal);
      op->msg.a = signal_value;
      op->msg.b = op->raddr;
      op->msg.c = op->rkey;
      op->msg.d = len;
    } else if (kind == Kind::put_signal) {
      if (ps.cq_signals) {
        // chunks-1 plain writes, the last one carries the signal as CQ data.
        op->nsteps = static_cast<int>(std::max<std::size_t>(chunks, 1));
        if (len == 0) {
          op->raddr = ps.landing_addr;
          op->rkey = ps.landing_key;
        }
      } else {
        op->nsteps = static_cast<int>(chunks) + 1;  // writes, then the signal message (FI_ORDER_SAW or flushed)
        op->msg.type = static_cast<std::uint32_t>(MsgType::signal);
        op->msg.a = signal_value;
      }
    } else {
      op->nsteps = static_cast<int>(chunks);
      // Without FI_DELIVERY_COMPLETE a read that follows the writes
      // (FI_ORDER_RAW) completes only once they are visible at the target.
      if (kind == Kind::put && chunks > 0 && !delivery_complete_) op->nsteps += 1;
    }
    if (op->nsteps == 0) {  // zero-length put/get: nothing to move
      link(op);
      finish_user(*op, Status::ok());
      reap();
      lk.unlock();
      dispatch();
      return Status::ok();
    }
    if (submit(op)) {
      lk.unlock();
      dispatch();
    }
    return Status::ok();
  }

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
  bool submit(Op* raw) {
    link(raw);
    live_ops_.store(ops_.size(), std::memory_order_relaxed);
    // new_op() read the clock for the deadline: reuse it (one read per post).
    const auto posted = (raw->deadline - opts_.timeout).time_since_epoch().count();
    last_activity_.store(posted, std::memory_order_relaxed);
    // Post first, ring after: the peer, woken 60-150 us later (an idle core),
    // then finds the bytes already on its socket instead of polling for them.
    if (!retry_.empty() || !advance(*raw)) {
      raw->queued = true;
      retry_.push_back(raw);
      ring(raw->peer, posted);
      return false;
    }
    ring(raw->peer, posted);
    const bool finished = raw->user_done;
    mark(*raw);
    reap();  // may recycle raw
    return finished;
  }

  /// Notes that @p op may have become free-able.
  void mark(Op& op) {
    if (op.reap_listed) return;
    op.reap_listed = true;
    reap_list_.push_back(&op);
  }

  /// Posts the op's remaining steps. Returns false when it must wait (EAGAIN).
  bool advance(Op& op) {
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
        Status why = err(lost ? Errc::peer_dead : Errc::transport_error, std::string(kind_name(op.kind)) + " to rank " +
                                                                             std::to_string(op.peer) +
                                                                             ": posting failed: " + fi_err(rc));
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
    if (op.step == op.nsteps && op.outstanding == 0 && !op.user_done && !op.awaiting_resp)
      finish_user(op, Status::ok());
    return true;
  }

  /// Opens the doorbell at this endpoint's IP address (tcp-like providers);
  /// none for other address formats or with STRATA_FI_DOORBELL=off.
  void open_bell() {
    if (env_is("STRATA_FI_DOORBELL", "off") || ep_name_.size() < sizeof(sockaddr_in)) return;
    sockaddr_storage a{};
    std::memcpy(&a, ep_name_.data(), std::min(ep_name_.size(), sizeof(a)));
    socklen_t len = 0;
    if (a.ss_family == AF_INET) {
      len = sizeof(sockaddr_in);
      reinterpret_cast<sockaddr_in*>(&a)->sin_port = 0;
    } else if (a.ss_family == AF_INET6 && ep_name_.size() >= sizeof(sockaddr_in6)) {
      len = sizeof(sockaddr_in6);
      reinterpret_cast<sockaddr_in6*>(&a)->sin6_port = 0;
    } else {
      return;
    }
    const int fd = ::socket(a.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    socklen_t got = sizeof(bell_self_);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&bell_self_), &got) != 0 ||
        got > sizeof(BlobHeader{}.bell_addr)) {
      ::close(fd);
      return;
    }
    bell_fd_ = fd;
    bell_len_ = got;
  }

  /// Rings @p peer's doorbell unless this rank posted to it or heard from it
  /// within kBellGap (then it is awake: see poll_interval()). Under mu_.
  void ring(int peer, std::int64_t now) {
    PeerState& ps = peers_[static_cast<std::size_t>(peer)];
    if (ps.bell_len == 0 || bell_fd_ < 0) return;
    const std::int64_t gap = std::chrono::duration_cast<Clock::duration>(kBellGap).count();
    if (now - std::max(ps.last_bell, ps.last_heard) < gap) return;
    ps.last_bell = now;
    const char one = 1;
    (void)::sendto(bell_fd_, &one, 1, MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&ps.bell), ps.bell_len);
  }

  int acquire_slot(Op& op) {
    if (op.slot >= 0) return 0;
    if (free_slots_.empty()) return -FI_EAGAIN;
    op.slot = free_slots_.back();
    free_slots_.pop_back();
    return 0;
  }

  int post_step(Op& op, int step) {
    const PeerState& ps = peers_[static_cast<std::size_t>(op.peer)];
    void* ctx = &op.fictx;
    void* ldesc = op.local_mr != nullptr ? fi_mr_desc(mr_of(op.local_mr)) : nullptr;
    const std::uint64_t dc = delivery_complete_ ? FI_DELIVERY_COMPLETE : 0;
    auto rma = [&](bool write, std::size_t off, std::size_t n, bool with_data, std::uint64_t flags) -> int {
      iovec iov{};
      iov.iov_base =
          write ? static_cast<void*>(const_cast<std::byte*>(op.src + off)) : static_cast<void*>(op.dst + off);
      iov.iov_len = n;
      fi_rma_iov riov{};
      riov.addr = op.raddr + off;
      riov.len = n;
      riov.key = op.rkey;
      fi_msg_rma m{};
      m.msg_iov = n > 0 ? &iov : nullptr;
      m.desc = n > 0 ? &ldesc : nullptr;
      m.iov_count = n > 0 ? 1 : 0;
      m.addr = ps.addr;
      m.rma_iov = &riov;
      m.rma_iov_count = 1;
      m.context = ctx;
      m.data = with_data ? op.data : 0;
      if (write && injectable(op, n)) {
        // Copied by the provider at the post, no completion owed: the op's
        // step is done here (no CQ entry to reap, no wake of the provider's
        // completion signal).
        const ssize_t rc = with_data ? fi_inject_writedata(ep_, iov.iov_base, n, op.data, ps.addr, riov.addr, riov.key)
                                     : fi_inject_write(ep_, iov.iov_base, n, ps.addr, riov.addr, riov.key);
        return rc == 0 ? kInjected : static_cast<int>(rc);
      }
      flags |= FI_COMPLETION | (with_data ? FI_REMOTE_CQ_DATA : 0);
      return static_cast<int>(write ? fi_writemsg(ep_, &m, flags) : fi_readmsg(ep_, &m, flags));
    };
    auto chunk = [&](int i, std::size_t* off, std::size_t* n) {
      *off = static_cast<std::size_t>(i) * max_msg_;
      *n = std::min(max_msg_, op.len - *off);
    };
    std::size_t off = 0;
    std::size_t n = 0;
    if (op.mbox) return post_mbox(op);
    switch (op.kind) {
      case Kind::put:
        if (!delivery_complete_ && step == op.nsteps - 1) {
          if (int rc = acquire_slot(op); rc != 0) return rc;
          Msg& s = send_slab_[static_cast<std::size_t>(op.slot)].hdr;
          void* d = send_desc_;
          return static_cast<int>(
              fi_read(ep_, &s, sizeof(std::uint64_t), d, ps.addr, ps.landing_addr, ps.landing_key, ctx));
        }
        chunk(step, &off, &n);
        return rma(true, off, n, false, dc);
      case Kind::get:
        chunk(step, &off, &n);
        return rma(false, off, n, false, 0);
      case Kind::put_signal:
        if (op.inline_data) return send_msg(op);
        if (ps.cq_signals) {
          // A bare signal needs no delivery-complete (nothing to make visible;
          // shm never completes a 0-byte FI_DELIVERY_COMPLETE write).
          if (op.len == 0) return rma(true, 0, 0, true, 0);
          // Remote CQ data is written only after the data is placed, so the
          // signal needs no delivery-complete round trip.
          chunk(step, &off, &n);
          return rma(true, off, n, step == op.nsteps - 1, 0);
        }
        if (step < op.nsteps - 1) {
          // With FI_ORDER_SAW the signal message is processed at the target
          // after these writes were placed, so they need no delivery-complete
          // acknowledgement (one message less per put_with_signal); without
          // SAW the message waits for their (delivery) completion.
          chunk(step, &off, &n);
          return rma(true, off, n, false, saw_ ? 0 : dc);
        }
        return send_msg(op);
      case Kind::signal:
        if (ps.cq_signals) return rma(true, 0, 0, true, 0);
        return send_msg(op);
      case Kind::fetch_add:
        if (native_atomics_) {
          if (int rc = acquire_slot(op); rc != 0) return rc;
          Msg& s = send_slab_[static_cast<std::size_t>(op.slot)].hdr;
          s.a = op.data;
          s.b = 0;
          fi_ioc ioc{&s.a, 1};
          fi_ioc res{&s.b, 1};
          fi_rma_ioc rioc{op.raddr, 1, op.rkey};
          void* d = send_desc_;
          fi_msg_atomic m{};
          m.msg_iov = &ioc;
          m.desc = &d;
          m.iov_count = 1;
          m.addr = ps.addr;
          m.rma_iov = &rioc;
          m.rma_iov_count = 1;
          m.datatype = FI_UINT64;
          m.op = FI_SUM;
          m.context = ctx;
          return static_cast<int>(fi_fetch_atomicmsg(ep_, &m, &res, &d, 1, FI_COMPLETION));
        }
        return send_msg(op);
      case Kind::internal_send:
        return send_msg(op);
      case Kind::recv:
        break;
    }
    return -FI_EINVAL;
  }

  /// Writes @p op (a signal or a put_with_signal of <= kMboxInline bytes) as
  /// the next entry of this rank's ring at the peer. -FI_EAGAIN while the ring
  /// is full (the op waits in retry_ for the peer's credit report).
  int post_mbox(Op& op) {
    PeerState& ps = peers_[static_cast<std::size_t>(op.peer)];
    const std::uint64_t consumed = __atomic_load_n(&mbox_credit_[static_cast<std::size_t>(op.peer)], __ATOMIC_ACQUIRE);
    if (ps.mbox_sent - consumed >= kMboxEntries) return -FI_EAGAIN;
    MboxEntry e;
    e.signal = op.data;
    e.index = ps.sig_sent + 1;
    if (op.kind == Kind::put_signal && op.len > 0) {
      e.raddr = op.raddr;
      e.rkey = op.rkey;
      e.len = static_cast<std::uint32_t>(op.len);
      std::memcpy(e.data.data(), op.src, op.len);
    }
    e.seq = ps.mbox_sent + 1;
    const std::uint64_t at = ps.mbox_addr + (ps.mbox_sent % kMboxEntries) * sizeof(MboxEntry);
    const ssize_t rc = fi_inject_write(ep_, &e, sizeof e, ps.addr, at, ps.mbox_key);
    if (rc != 0) return static_cast<int>(rc);
    ++ps.mbox_sent;
    return kInjected;
  }

  /// Delivers the entries the provider placed in the mailboxes since the last
  /// call, in each peer's order, and reports consumption back every
  /// kMboxCreditEvery entries. Returns the number delivered. Under mu_.
  std::size_t scan_mailboxes() {
    std::size_t n = 0;
    for (int p : mbox_peers_) {
      PeerState& ps = peers_[static_cast<std::size_t>(p)];
      MboxEntry* ring = &mbox_[static_cast<std::size_t>(p) * kMboxEntries];
      for (;;) {
        MboxEntry& e = ring[ps.mbox_got % kMboxEntries];
        if (__atomic_load_n(&e.seq, __ATOMIC_ACQUIRE) != ps.mbox_got + 1) break;
        // Signals with lower indices came by CQ data or message: they were
        // placed before this entry (one connection, in order), but their CQ
        // entries may not be read yet; then this entry waits.
        while (ps.sig_got + 1 != e.index && !ps.pending.empty()) pop_pending(p, ps);
        if (ps.sig_got + 1 != e.index) break;
        bool deliver = true;
        if (e.len > 0) {
          std::byte* local = e.len <= kMboxInline ? resolve_local(e.rkey, e.raddr, e.len) : nullptr;
          if (local != nullptr) {
            std::memcpy(local, e.data.data(), e.len);
          } else {
            deliver = false;  // no signal without its data
            if (!warned_bad_inline_) {
              warned_bad_inline_ = true;
              strata::detail::logger().warn(
                  "fabric rank {}: dropped a put_with_signal of {} bytes from rank {}: the target range is not "
                  "registered here (deregistered while peers still write to it?)",
                  rank_, e.len, p);
            }
          }
        }
        if (deliver) push_signal(p, e.signal);
        ++ps.sig_got;
        ++ps.mbox_got;
        ++n;
      }
      // What is left came after every entry placed so far.
      while (!ps.pending.empty()) pop_pending(p, ps);
      if (ps.mbox_got - ps.mbox_reported >= kMboxCreditEvery && ps.dead.is_ok()) {
        const std::uint64_t got = ps.mbox_got;
        if (fi_inject_write(ep_, &got, sizeof got, ps.addr, ps.credit_addr, ps.credit_key) == 0) ps.mbox_reported = got;
      }
    }
    return n;
  }

  void pop_pending(int p, PeerState& ps) {
    const auto [payload, deliver] = ps.pending.front();
    ps.pending.pop_front();
    if (deliver) push_signal(p, payload);
    ++ps.sig_got;
  }

  /// A signal from @p src that came by CQ data or message (@p deliver false:
  /// dropped, but it used an index). From a peer with mailboxes it waits for
  /// scan_mailboxes(), which delivers in index order.
  void signal_from(int src, std::uint64_t payload, bool deliver) {
    if (src >= 0 && src < size_ && peers_[static_cast<std::size_t>(src)].mbox) {
      peers_[static_cast<std::size_t>(src)].pending.emplace_back(payload, deliver);
      return;
    }
    if (deliver) push_signal(src, payload);
  }

  int send_msg(Op& op) {
    if (int rc = acquire_slot(op); rc != 0) return rc;
    Slot& s = send_slab_[static_cast<std::size_t>(op.slot)];
    s.hdr = op.msg;
    s.hdr.src = rank_;
    std::size_t bytes = sizeof(Msg);
    if (op.inline_data) {
      std::memcpy(s.data.data(), op.src, op.len);
      bytes += op.len;
    }
    const PeerState& ps = peers_[static_cast<std::size_t>(op.peer)];
    if (injectable(op, bytes)) {
      const ssize_t rc = fi_inject(ep_, &s, bytes, ps.addr);
      return rc == 0 ? kInjected : static_cast<int>(rc);
    }
    return static_cast<int>(fi_send(ep_, &s, bytes, send_desc_, ps.addr, &op.fictx));
  }

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
  std::size_t progress_locked(Clock::time_point now) {
    if (!opened_) return 0;
    std::size_t n = 0;
    std::array<fi_cq_data_entry, 32> ent{};
    std::array<fi_addr_t, 32> src{};
    src.fill(FI_ADDR_NOTAVAIL);
    for (int round = 0; round < 8; ++round) {
      ssize_t got = fi_cq_readfrom(cq_, ent.data(), ent.size(), src.data());
      if (got == -FI_EAGAIN) break;
      if (got == -FI_EAVAIL) {
        handle_cq_error();
        ++n;
        continue;
      }
      if (got < 0) {
        if (debug_)
          strata::detail::logger().info("fabric rank {}: fi_cq_readfrom: {}", rank_, fi_err(static_cast<int>(got)));
        break;
      }
      for (ssize_t i = 0; i < got; ++i) handle_cqe(ent[static_cast<std::size_t>(i)], src[static_cast<std::size_t>(i)]);
      n += static_cast<std::size_t>(got);
      if (static_cast<std::size_t>(got) < ent.size()) break;
    }
    if (!mbox_peers_.empty()) n += scan_mailboxes();
    // Retry queued posts in order.
    bool progressed = false;
    while (!retry_.empty()) {
      Op* op = retry_.front();
      if (!advance(*op)) break;
      retry_.pop_front();
      op->queued = false;
      mark(*op);
      progressed = true;
    }
    for (std::size_t i = 0; i < repost_.size();) {
      if (post_recv(repost_[i]) == -FI_EAGAIN) {
        ++i;
      } else {
        repost_[i] = repost_.back();
        repost_.pop_back();
      }
    }
    // Deadlines, at most every millisecond.
    if (now >= next_deadline_check_) {
      next_deadline_check_ = now + std::chrono::milliseconds(1);
      for (Op* o : ops_) {
        Op& op = *o;
        if (op.user_done || op.internal || now < op.deadline) continue;
        Status why(Errc::timeout, "fabric (rank " + std::to_string(rank_) + "): " + kind_name(op.kind) + " to rank " +
                                      std::to_string(op.peer) + " did not complete within " +
                                      std::to_string(opts_.timeout.count()) + " ms");
        fail_peer_locked(op.peer, why);
      }
    }
    if (progressed || n > 0 || !reap_list_.empty()) reap();
    return n + events_.size();
  }

  void handle_cqe(const fi_cq_data_entry& e, fi_addr_t from) {
    if (debug_)
      strata::detail::logger().info("fabric rank {}: cqe flags {:#x} len {} from {} ctx {}", rank_,
                                    static_cast<unsigned long long>(e.flags), e.len,
                                    static_cast<unsigned long long>(from), e.op_context);
    if ((e.flags & FI_REMOTE_CQ_DATA) != 0 && (e.flags & FI_RECV) == 0) {
      // Remote write with data: a signal from 'from'.
      int src = single_peer_ >= 0                                           ? single_peer_
                : (from != FI_ADDR_NOTAVAIL && from < addr_to_rank_.size()) ? addr_to_rank_[from]
                                                                            : -1;
      signal_from(src, e.data, true);
      return;
    }
    if (e.op_context == nullptr) return;
    Op& op = *static_cast<Op*>(e.op_context);
    if (op.kind == Kind::recv) {
      handle_msg(op.slot, e.len);
      return;
    }
    --op.outstanding;
    mark(op);
    if (op.kind == Kind::fetch_add && native_atomics_ && op.outstanding == 0 && op.step == op.nsteps && !op.user_done) {
      *op.fetched = send_slab_[static_cast<std::size_t>(op.slot)].hdr.b;
    }
    if (op.outstanding == 0 && op.step == op.nsteps && !op.awaiting_resp) finish_user(op, Status::ok());
    // freed by reap()
  }

  void handle_cq_error() {
    fi_cq_err_entry ee{};
    if (fi_cq_readerr(cq_, &ee, 0) < 0) return;
    std::array<char, 256> buf{};
    const char* msg = fi_cq_strerror(cq_, ee.prov_errno, ee.err_data, buf.data(), buf.size());
    std::string pmsg = msg != nullptr ? msg : fi_strerror(ee.err);
    if (ee.op_context == nullptr) return;
    Op& op = *static_cast<Op*>(ee.op_context);
    if (op.kind == Kind::recv) {
      if (ee.err != FI_ECANCELED && opened_ && !shut_) post_recv(op.slot);
      return;
    }
    --op.outstanding;
    mark(op);
    // strata never cancels operations: a cancelled transmit means the
    // provider dropped the connection (rxm: ENOTCONN once the peer died).
    // Such an op fails as peer_dead, like every other op to that peer.
    const bool lost = connection_lost(ee.err) || (ee.err == FI_ECANCELED && !shut_);
    Status why(lost ? Errc::peer_dead : Errc::transport_error,
               "fabric (rank " + std::to_string(rank_) + "): " + kind_name(op.kind) + " to rank " +
                   std::to_string(op.peer) + " failed: " + pmsg + " (" + fi_strerror(ee.err) + ")");
    finish_user(op, why);
    if (lost) fail_peer_locked(op.peer, why);
  }

  void handle_msg(int slot, std::size_t len) {
    const Slot& in = recv_slab_[static_cast<std::size_t>(slot)];
    Msg m = in.hdr;
    if (m.src >= 0 && m.src < size_)
      peers_[static_cast<std::size_t>(m.src)].last_heard = Clock::now().time_since_epoch().count();
    // Inline data is copied out before the slot is reposted; its signal is
    // queued after the copy, so the handler sees the data.
    if (static_cast<MsgType>(m.type) == MsgType::put_signal && m.src >= 0 && m.src < size_) {
      std::byte* local = len >= sizeof(Msg) && m.d <= len - sizeof(Msg) ? resolve_local(m.c, m.b, m.d) : nullptr;
      if (local != nullptr) {
        std::memcpy(local, in.data.data(), m.d);
      } else {
        m.type = 0;  // dropped: no signal without its data (its index still counts)
        signal_from(m.src, m.a, false);
        if (!warned_bad_inline_) {
          warned_bad_inline_ = true;
          strata::detail::logger().warn(
              "fabric rank {}: dropped a put_with_signal of {} bytes from rank {}: the target range is not registered "
              "here (deregistered while peers still write to it?)",
              rank_, static_cast<unsigned long long>(m.d), m.src);
        }
      }
    }
    if (!shut_ && post_recv(slot) == -FI_EAGAIN) repost_.push_back(slot);
    if (m.src < 0 || m.src >= size_) return;
    switch (static_cast<MsgType>(m.type)) {
      case MsgType::hello: {
        PeerState& ps = peers_[static_cast<std::size_t>(m.src)];
        if (!ps.hello_seen && m.src < rank_ && ps.served) send_hello(m.src);
        ps.hello_seen = true;
        break;
      }
      case MsgType::signal:
      case MsgType::put_signal:
        signal_from(m.src, m.a, true);
        break;
      case MsgType::atomic_req:
        serve_atomic(m);
        break;
      case MsgType::atomic_resp: {
        auto it = atomic_reqs_.find(m.a);
        if (it == atomic_reqs_.end()) break;
        Op& op = *it->second;
        op.awaiting_resp = false;
        if (m.c == 0) {
          *op.fetched = m.b;
          if (op.outstanding == 0)
            finish_user(op, Status::ok());
          else
            atomic_reqs_.erase(it);  // completes when the request send completes
        } else {
          finish_user(op, err(static_cast<Errc>(m.c), "fetch_add to rank " + std::to_string(op.peer) +
                                                          ": the target rejected the address (not registered)"));
        }
        break;
      }
    }
  }

  void send_hello(int peer) {
    Op* op = new_op(Kind::internal_send, peer, nullptr);
    op->internal = true;
    op->msg.type = static_cast<std::uint32_t>(MsgType::hello);
    submit(op);
  }

  void serve_atomic(const Msg& m) {
    Op* op = new_op(Kind::internal_send, m.src, nullptr);
    op->internal = true;
    op->msg.type = static_cast<std::uint32_t>(MsgType::atomic_resp);
    op->msg.a = m.d;
    std::byte* local = resolve_local(m.b, m.a, sizeof(std::uint64_t));
    if (local != nullptr && reinterpret_cast<std::uintptr_t>(local) % alignof(std::uint64_t) == 0) {
      auto* word = reinterpret_cast<std::uint64_t*>(local);
      op->msg.b = __atomic_fetch_add(word, m.c, __ATOMIC_SEQ_CST);
      op->msg.c = 0;
    } else {
      op->msg.c = static_cast<std::uint64_t>(Errc::out_of_range);
    }
    PeerState& ps = peers_[static_cast<std::size_t>(m.src)];
    if (!ps.served || !ps.dead.is_ok()) {
      recycle(op);
      return;
    }
    op->step = 0;
    op->nsteps = 1;
    submit(op);
  }

  /// The local address of [raddr, raddr+len) in this rank's registration
  /// @p key (one that register_memory() handed out), or nullptr when the key
  /// is unknown or the range leaves the registration.
  std::byte* resolve_local(std::uint64_t key, std::uint64_t raddr, std::uint64_t len) const {
    auto it = published_.find(key);
    if (it == published_.end()) return nullptr;
    const HeldRange& r = it->second;
    // Offset from the start of the registration: the RMA address is virtual
    // with FI_MR_VIRT_ADDR, else already an offset (RemoteKey::fi_base).
    std::uint64_t off = raddr;
    if (virt_addr_) {
      if (raddr < r.base) return nullptr;
      off = raddr - r.base;
    }
    if (off > r.len || len > r.len - off) return nullptr;
    return reinterpret_cast<std::byte*>(r.base + off);
  }

  void push_signal(int src, std::uint64_t payload) {
    if (src >= 0 && src < size_)
      peers_[static_cast<std::size_t>(src)].last_heard = Clock::now().time_since_epoch().count();
    Event ev;
    ev.type = Event::signal;
    ev.source = src;
    ev.payload = payload;
    events_.push_back(std::move(ev));
  }

  void fail_peer_locked(int peer, const Status& why) {
    PeerState& ps = peers_[static_cast<std::size_t>(peer)];
    if (!ps.dead.is_ok()) return;
    ps.dead = why.is_ok() ? Status(Errc::peer_dead, "rank " + std::to_string(peer) + " failed") : why;
    for (Op* o : ops_) {
      Op& op = *o;
      if (op.peer != peer || op.user_done) continue;
      finish_user(op, ps.dead);
    }
    for (Op* o : retry_)
      if (o->peer == peer) o->queued = false;
    retry_.erase(std::remove_if(retry_.begin(), retry_.end(), [peer](Op* o) { return o->peer == peer; }), retry_.end());
    Event ev;
    ev.type = Event::peer_failed;
    ev.source = peer;
    ev.status = ps.dead;
    events_.push_back(std::move(ev));
  }

  /// Runs handlers outside mu_, one dispatcher at a time, in event order.
  /// Signals wait (in order) until a signal handler is installed.
  void dispatch() {
    std::unique_lock<std::mutex> lk(mu_);
    if (dispatching_) return;
    dispatching_ = true;
    for (;;) {
      std::deque<Event>& batch = batch_;  // only the dispatcher uses it: keeps its nodes
      batch.swap(events_);
      lk.unlock();
      {
        std::lock_guard<std::mutex> hk(handler_mu_);
        if (on_signal_) {
          while (!held_.empty()) {
            Event h = std::move(held_.front());
            held_.pop_front();
            on_signal_(h.source, h.payload);
          }
        }
        for (auto& ev : batch) {
          switch (ev.type) {
            case Event::completion:
              if (on_complete_) on_complete_(ev.ctx, ev.status);
              break;
            case Event::signal:
              if (on_signal_ && held_.empty())
                on_signal_(ev.source, ev.payload);
              else
                held_.push_back(std::move(ev));
              break;
            case Event::peer_failed:
              if (on_peer_failed_) on_peer_failed_(ev.source, ev.status);
              break;
          }
        }
        held_pending_.store(!held_.empty(), std::memory_order_release);
      }
      batch.clear();
      lk.lock();
      if (events_.empty()) break;
    }
    dispatching_ = false;
  }

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
  int wake_fd_ = -1;
  // Doorbell (docs/fabric.md "Idle ranks"): a UDP socket at this rank's
  // endpoint address; a peer sends one byte to it before its first post
  // after a pause, so an idle rank can sleep until it rings.
  int bell_fd_ = -1;
  sockaddr_storage bell_self_{};
  std::size_t bell_len_ = 0;
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

}  // namespace
}  // namespace fabric

std::unique_ptr<Backend> make_fabric_backend(Bootstrap& boot, const Hierarchy& hier, const std::vector<bool>& serve,
                                             const TransportOptions& opts) {
  return std::make_unique<fabric::FabricBackend>(boot, hier, serve, opts);
}

}  // namespace strata::transport::detail
