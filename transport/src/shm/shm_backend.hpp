// Private to the same-host backend: its shared-memory layouts, records and
// the ShmBackend class, whose members are defined by concern:
//   shm_setup.cpp     options, segments, the start-up exchanges, teardown
//   shm_memory.cpp    registration, SharedRegions and their mappings, CMA
//   shm_rma.cpp       posting: put, get, signal, fetch_add into the rings
//   shm_progress.cpp  consuming rings, completing operations, liveness, waiting
//   shm_failure.cpp   dead peers, draining their operations, shutdown
//
// Same-host RMA backend: one engine-owned shared-memory segment per rank
// holding the incoming SPSC rings of every same-host source, plus single-copy
// CMA (process_vm_readv/writev) for large transfers. docs/transport.md
// describes the protocol; this comment only maps it onto the code.
//
// Segment of rank q (shm_open name derived from the job secret, mode 0600,
// unlinked once every same-host peer mapped it):
//   SegHeader | RingCtl + data for source local index 0 | ... | index n-1
// The ring from p to q lives in q's segment; p produces, q consumes.
//
// SharedRegions (allocate_shared) get a name of their own; the owner sends a
// region_map record to each peer named at allocation, the peer maps the region
// from its progress and answers region_ack, and the last answer (or the
// peer's death) unlinks the name, like the segments' start-up handshake.
//
// Threads: posting is thread-safe (a per-peer producer spin lock guards the
// outgoing ring, the backlog of operations waiting for ring space, and the
// lists of operations waiting for completion); progress() may be called from
// several threads at once (per-peer consumer try-locks keep each ring's
// records, hence signals, in order). Handlers are never called with a
// producer lock held, so they may post.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "backend.hpp"
#include "shm/ring.hpp"
#include "shm/sync.hpp"
#include "strata/detail/env.hpp"
#include "strata/detail/log.hpp"
#include "strata/detail/rendezvous.hpp"
#include "strata/detail/tsan.hpp"
#include "strata/transport/copy.hpp"

namespace strata::transport::detail {
// Cross-process ordering is invisible to ThreadSanitizer: a write into a
// peer's mapped region by one thread and the next write to the same bytes by
// another thread are ordered through the peer (it reads, then answers through
// its ring). Under TSan every record sent to a peer releases, and every record
// consumed from it acquires, one per-peer tag, which carries that order.
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define STRATA_TSAN_RELEASE(p) __tsan_release(p)
#define STRATA_TSAN_ACQUIRE(p) __tsan_acquire(p)
#else
#define STRATA_TSAN_RELEASE(p) (void)(p)
#define STRATA_TSAN_ACQUIRE(p) (void)(p)
#endif

namespace shmem {

using shm::RecHdr;
using shm::RecType;
using shm::Ring;
using shm::RingCtl;
using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kMagic = 0x31304d4853415453ULL;  // "STASHM01"
constexpr std::uint64_t kDefaultRingBytes = 256 * 1024;
// Measured 2026-11-21 (docs/performance.md, transport): the pipelined two-copy
// ring beats CMA at every size up to 64 MiB (1 MiB put: 37-55 GB/s vs 11 GB/s;
// 16 MiB: 5.0 vs 1.8 GB/s; 64 MiB: 3.0 vs 2.7 GB/s), so single-copy CMA is
// used only from 64 MiB on (STRATA_CMA_THRESHOLD overrides).
constexpr std::size_t kDefaultCmaThreshold = std::size_t{64} << 20;
// Puts/gets of at least this many bytes into a peer's mapped SharedRegion are
// one memcpy by the initiator; smaller ones travel inside the ring record
// (one cache line less to move). STRATA_SHM_DIRECT overrides ("off" disables).
constexpr std::size_t kDefaultDirectMin = 1024;
// Adaptive non-temporal puts (docs/transport.md, "Adaptive non-temporal
// puts"): a direct put of at least kNtMin bytes times its memcpy into the
// peer's mapping; when that ran below STRATA_SHM_NT_GBPS (the destination's
// lines were held by the peer's core and each store waited for an
// invalidation: measured 2.3-3.5 GB/s on a 2-vCPU KVM guest in its slow
// placement, against 10 GB/s end to end with streaming stores), the next
// kNtRun puts to that peer use non-temporal stores, then one memcpy measures
// again, so a return to fast cache-to-cache transfers is seen within kNtRun puts.
constexpr std::size_t kNtMin = 8192;
constexpr int kNtRun = 64;
constexpr double kDefaultNtGbps = 6.0;
constexpr int kBatch = 64;                             // records per ring per progress() call
constexpr std::chrono::milliseconds kDeathCheck{200};  // stall after which a peer's pid is checked

/// First bytes of every segment (shared memory).
struct alignas(shm::kCacheLine) SegHeader {
  std::uint64_t magic;
  std::int64_t pid;
  std::uint64_t nlocal;
  std::uint64_t ring_bytes;
  alignas(shm::kCacheLine) std::atomic<std::uint32_t> sleeping;  ///< owner blocked on its wake socket
};

/// Start-up exchange blob.
struct Hello {
  std::uint64_t magic;
  std::int64_t pid;
  std::uint64_t seg_addr;
  std::uint64_t seg_bytes;
  std::int32_t host;
  std::int32_t ok;
  char error[96];
};

struct Completion {
  void* context;
  Status status;
};

/// An operation (or the part of it) still to be written into a ring.
struct OutOp {
  RecType type = RecType::signal;
  bool with_signal = false;
  bool user = true;  ///< completes for the user when its last record is consumed
  /// ... or as soon as its last record is published (signals: the record is in
  /// the peer's ring, its effect needs nothing more from this side; waiting for
  /// the peer to consume it made every signal cost the sender a round trip)
  bool eager = false;
  const std::byte* src = nullptr;
  std::uint64_t len = 0;
  std::uint64_t done = 0;
  std::uint64_t addr = 0, a = 0, b = 0, c = 0;
  void* context = nullptr;
};

struct Inflight {
  std::uint64_t end;  ///< ring position after the operation's last record
  void* context;
};

struct Request {
  std::uint64_t id;
  void* context;
};

struct Peer {
  int rank = -1;
  bool served = false;
  pid_t pid = 0;
  std::atomic<bool> cma{false};
  std::atomic<int> nt_left{0};  // puts left in non-temporal mode (adaptive puts; racy decrements are fine)
  SegHeader* hdr = nullptr;     // the peer's segment header (its sleeping flag)
  sockaddr_un wake_addr{};
  socklen_t wake_len = 0;

  // producer side, guarded by prod_mu
  SpinLock prod_mu;
  Ring out;
  std::deque<OutOp> pending;
  std::deque<Inflight> inflight;
  std::deque<Request> requests;
  std::uint64_t next_id = 1;
  bool was_busy = false;
  std::uint64_t seen_head = 0;
  std::uint64_t seen_activity = 0;
  Clock::time_point stall_since{};
  Clock::time_point last_death_check{};
  std::atomic<bool> busy{false};
  // Liveness (check_liveness, under live_busy_): stopped by a signal since.
  bool stopped = false;
  Clock::time_point stopped_since{};

  // consumer side, guarded by cons_mu
  SpinLock cons_mu;
  Ring in;
  std::atomic<std::uint64_t> activity{0};  // records consumed from this peer

  std::atomic<bool> dead{false};
  mutable std::mutex status_mu;
  Status status;  // guarded by status_mu

  // The peer's SharedRegions this rank mapped (id -> local address), guarded by map_mu.
  struct Mapped {
    std::uint64_t id;
    std::uint64_t remote_base;
    std::byte* local;  // nullptr: mapping failed, use the ring
    std::size_t len;
  };
  std::mutex map_mu;
  std::vector<Mapped> mapped;
};

/// This rank's live SharedRegions (shared with their release functions, which may outlive the backend).
struct RegionTable {
  struct Entry {
    std::uint64_t id;
    std::uintptr_t base;
    std::size_t len;
    std::string name;          ///< shm_open name while `named`
    std::vector<int> waiting;  ///< peers that have not answered the map-now record yet
    bool named = true;         ///< the name still exists in /dev/shm
    std::vector<int> mappers;  ///< peers named at allocation (told region_unmap on release)
  };
  std::mutex mu;
  std::vector<Entry> live;  // guarded by mu, like every field of the entries
  /// Sends region_unmap for region id to a peer; set by the backend, cleared
  /// (under mu) when it goes: a region may outlive its transport.
  std::function<void(int peer, std::uint64_t id)> send_unmap;

  /// Removes @p e's name once nobody it waits for is left (mu held).
  static void unlink_if_done(Entry& e) {
    if (!e.named || !e.waiting.empty()) return;
    ::shm_unlink(e.name.c_str());
    e.named = false;
  }
  /// @p peer answered (or died) for region @p id, or for every region when @p id is 0.
  void answered(int peer, std::uint64_t id) {
    std::lock_guard<std::mutex> g(mu);
    for (Entry& e : live) {
      if (id != 0 && e.id != id) continue;
      e.waiting.erase(std::remove(e.waiting.begin(), e.waiting.end(), peer), e.waiting.end());
      unlink_if_done(e);
    }
  }
};

enum class NtMode : std::uint8_t { off, on, automatic };

class ShmBackend final : public Backend {
 public:
  ShmBackend(Bootstrap& boot, const Hierarchy& hier, const std::vector<bool>& serve, const TransportOptions& opts);
  ~ShmBackend() override;
  ShmBackend(const ShmBackend&) = delete;
  ShmBackend& operator=(const ShmBackend&) = delete;

  [[nodiscard]] int rank() const noexcept override { return rank_; }
  [[nodiscard]] int size() const noexcept override { return size_; }
  [[nodiscard]] std::string name() const override { return cma_any_ ? "shm+cma" : "shm"; }

  void set_completion_handler(CompletionHandler h) override { completion_.set(std::move(h)); }
  void set_signal_handler(SignalHandler h) override { signal_.set(std::move(h)); }
  void set_peer_failure_handler(PeerFailureHandler h) override { failure_.set(std::move(h)); }

  Status register_memory(void* addr, std::size_t len, RemoteKey* key) override;
  Status deregister_memory(void* addr, std::size_t len) override;
  std::unique_ptr<SharedRegion> allocate_shared(std::size_t len, const std::vector<int>& peers) override;
  bool shared_key(const void* addr, std::size_t len, RemoteKey* key) override;

  Status put(int peer, const void* src, std::size_t len, const RemoteKey& dst, std::uint64_t dst_offset,
             void* context) override {
    return put_impl("put", peer, src, len, dst, dst_offset, false, 0, context);
  }
  Status get(int peer, void* dst, std::size_t len, const RemoteKey& src, std::uint64_t src_offset,
             void* context) override;
  Status put_with_signal(int peer, const void* src, std::size_t len, const RemoteKey& dst, std::uint64_t dst_offset,
                         std::uint64_t signal, void* context) override {
    return put_impl("put_with_signal", peer, src, len, dst, dst_offset, true, signal, context);
  }
  Status signal(int peer, std::uint64_t payload, void* context) override;
  bool can_read_peer(int peer) const override {
    if (peer == rank_) return true;
    if (peer < 0 || peer >= size_) return false;
    const Peer* p = peers_[static_cast<std::size_t>(peer)].get();
    return p != nullptr && p->cma.load(std::memory_order_relaxed);
  }
  Status read_peer(int peer, void* dst, std::uint64_t addr, std::size_t len) override;
  Status write_peer(int peer, const void* src, std::uint64_t addr, std::size_t len) override;
  const void* mapped_peer(int peer, std::uint64_t handle, std::size_t len) override;
  void* map_peer(int peer, const RemoteKey& key, std::uint64_t offset, std::size_t len) override;
  void unmap_peer(int peer, const RemoteKey& key) override;
  Status fetch_add(int peer, const RemoteKey& dst, std::uint64_t dst_offset, std::uint64_t addend,
                   std::uint64_t* fetched, void* context) override;

  std::size_t progress() override;
  void wait_for_event(std::chrono::microseconds timeout) override;
  void wake() override { send_wake(self_addr_, self_len_); }

  [[nodiscard]] Status peer_status(int peer) const override;
  void shutdown() override;

  [[nodiscard]] int wait_fd() const override { return sock_; }
  bool prepare_wait() override;
  void fail_peer(int peer, const Status& why) override;

 private:
  // Constructor steps (shm_setup.cpp).
  /// Checks the arguments; reads the options and the STRATA_SHM_* variables.
  void read_options(const Hierarchy& hier, const std::vector<bool>& serve, const TransportOptions& opts,
                    const std::string& who);
  /// Fills served_ (every served rank must be on this host, in @p locals).
  void select_peers(const Hierarchy& hier, const std::vector<bool>& serve, const std::vector<int>& locals,
                    const std::string& who);
  /// shm_open name of rank @p r's segment.
  [[nodiscard]] std::string seg_name(int r) const;
  /// Abstract-namespace address of rank @p r's wake socket.
  void wake_address(int r, sockaddr_un* a, socklen_t* l) const;
  /// Opens the wake socket and creates this rank's segment (@p nlocal rings);
  /// failures go into @p mine. True when the segment name was created.
  bool create_segment(std::size_t nlocal, Hello& mine);
  /// boot.allgather(), unlinking this rank's segment name if it throws.
  std::vector<std::vector<std::byte>> exchange(Bootstrap& boot, const void* data, std::size_t len, bool created);
  /// The ring of local index @p idx inside segment @p seg.
  [[nodiscard]] Ring ring_at(void* seg, int idx) const;
  /// Maps served peer @p p's segment from its hello @p blob and sets up both
  /// rings and CMA; the problem, or "" when it worked.
  std::string attach_peer(Peer& p, const std::vector<std::byte>& blob, const std::vector<int>& locals);
  /// Enables CMA to @p p when it can read the peer's segment at @p seg_addr.
  void probe_cma(Peer& p, std::uint64_t seg_addr);
  /// Lets freed regions tell the peers named at allocation to unmap them.
  void install_region_unmap();

  Status check_peer(const char* op, int peer) const;
  /// Adds the kShmMapped section to @p key when [addr, addr+len) lies in a live region.
  bool in_region(const void* addr, std::size_t len, RemoteKey* key) const;
  Status check_key(const char* op, int peer, const RemoteKey& key, std::uint64_t offset, std::uint64_t len) const;
  Status put_impl(const char* op, int peer, const void* src, std::size_t len, const RemoteKey& dst,
                  std::uint64_t dst_offset, bool with_signal, std::uint64_t payload, void* context);
  Status post(Peer& p, OutOp op);
  /// Local address of [key.addr + offset, +len) when the key is a mapped region
  /// this rank can reach directly and len >= direct_min_; nullptr otherwise.
  std::byte* direct(Peer& p, const RemoteKey& key, std::uint64_t offset, std::uint64_t len);
  /// Copies a direct put into the peer's mapping: memcpy, or non-temporal
  /// stores while a timed memcpy to this peer ran slower than nt_gbps_.
  void copy_to_peer(Peer& p, std::byte* to, const void* src, std::size_t len);
  /// direct() without the size threshold (also map_peer()).
  std::byte* map_range(Peer& p, const RemoteKey& key, std::uint64_t offset, std::uint64_t len);
  /// Maps region @p id (owner's base @p base) of peer @p p by name; map_mu held.
  /// The entry has local == nullptr when that failed (puts use the ring).
  const Peer::Mapped& map_region(Peer& p, std::uint64_t id, std::uint64_t base);
  /// Region map-now record from @p p: map it and answer (consume() context).
  void on_region_map(Peer& p, std::uint64_t id, std::uint64_t base);
  /// Unmaps @p p's region @p id (any base when @p base is 0) if mapped here.
  void drop_mapping(Peer& p, std::uint64_t id, std::uint64_t base);
  [[nodiscard]] std::string region_name(int owner, std::uint64_t id) const {
    return "/strata-" + tag_ + "-" + std::to_string(owner) + "-m" + std::to_string(id);
  }
  bool inject(Peer& p, OutOp& op);  // prod_mu held; true when fully written
  Status cma(Peer& p, bool write, void* local, std::uint64_t remote, std::size_t len);
  void disable_cma(Peer& p, int err);
  void push_completion(void* context, Status st);
  std::size_t consume(Peer& p, std::vector<Completion>& done);
  std::size_t service_outgoing(Peer& p, std::vector<Completion>& done, Clock::time_point& now, bool& have_now);
  void complete_request(Peer& p, std::uint64_t id, std::vector<Completion>& done, bool* corrupt);
  void drain(Peer& p, const Status& why, std::vector<Completion>& out);
  /// Wakes @p p if it sleeps. @p as_producer: this rank just published into
  /// the ring it produces to p; otherwise it just consumed from p's ring.
  /// Pairs with prepare_wait(): flag store then index loads, all seq_cst.
  void notify(Peer& p, bool as_producer) {
    if (as_producer) {
      p.out.sync_tail();
    } else {
      p.in.sync_head();
    }
    if (p.hdr->sleeping.load(std::memory_order_seq_cst) != 0) send_wake(p.wake_addr, p.wake_len);
  }
  void send_wake(const sockaddr_un& addr, socklen_t len) const {
    if (sock_ < 0 || len == 0) return;
    const char b = 1;
    // Best effort: EAGAIN means the target already has a wake-up queued.
    (void)::sendto(sock_, &b, 1, MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&addr), len);
  }
  void deliver(std::vector<Completion>& done);
  void check_liveness();
  Status dead_status(const Peer& p) const {
    std::lock_guard<std::mutex> g(p.status_mu);
    return p.status;
  }

  int rank_ = 0;
  int size_ = 0;
  std::uint64_t ring_bytes_ = kDefaultRingBytes;
  std::uint64_t frag_ = 0;
  std::size_t cma_threshold_ = kDefaultCmaThreshold;
  std::chrono::milliseconds timeout_{30000};
  bool cma_any_ = false;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<int> served_;  // served peer ranks, ascending

  void* seg_ = nullptr;
  std::size_t seg_bytes_ = 0;
  SegHeader* hdr_ = nullptr;
  std::vector<std::pair<void*, std::size_t>> maps_;  // peer segments
  std::string tag_;                                  // job tag of the shared-memory names
  std::shared_ptr<RegionTable> regions_ = std::make_shared<RegionTable>();
  std::atomic<std::uint64_t> next_region_{1};
  std::size_t direct_min_ = kDefaultDirectMin;
  NtMode nt_mode_ = NtMode::automatic;
  double nt_gbps_ = kDefaultNtGbps;
  int sock_ = -1;
  sockaddr_un self_addr_{};
  socklen_t self_len_ = 0;

  std::atomic<bool> shut_{false};
  std::atomic<std::uint64_t> rr_{0};
  std::atomic<std::int64_t> next_live_check_{0};  // coarse clock ticks (check_liveness)
  std::atomic_flag live_busy_ = ATOMIC_FLAG_INIT;
  std::atomic<std::uint32_t> live_calls_{0};
  std::atomic<std::uint64_t> next_token_{1};
  std::mutex cq_mu_;
  std::vector<Completion> cq_;  // guarded by cq_mu_
  std::atomic<std::size_t> cq_size_{0};
  std::once_flag cma_log_once_;

  HandlerSlot<CompletionHandler> completion_;
  HandlerSlot<SignalHandler> signal_;
  HandlerSlot<PeerFailureHandler> failure_;
};

// The ring writers, defined here (inline) because both the posting calls
// (shm_rma.cpp) and the progress engine's answers to gets, fetch_adds and
// backlogged operations (shm_progress.cpp) run them on their hot paths.

inline void ShmBackend::push_completion(void* context, Status st) {
  {
    std::lock_guard<std::mutex> g(cq_mu_);
    cq_.push_back({context, std::move(st)});
    cq_size_.store(cq_.size(), std::memory_order_seq_cst);
  }
  if (hdr_ != nullptr && hdr_->sleeping.load(std::memory_order_seq_cst) != 0) wake();
}

inline Status ShmBackend::post(Peer& p, OutOp op) {
  STRATA_TSAN_RELEASE(&p);
  const bool request = op.type == RecType::get_req || op.type == RecType::fadd_req;
  bool wrote = false;
  {
    std::lock_guard<SpinLock> g(p.prod_mu);
    // Checked under the lock: fail_peer() and shutdown() drain under it too,
    // so nothing is queued after they ran.
    if (p.dead.load(std::memory_order_acquire)) return dead_status(p);
    if (op.user || request) {
      if (shut_.load(std::memory_order_acquire)) {
        return {Errc::shutdown, "transport of rank " + std::to_string(rank_) + " is shut down"};
      }
    }
    if (request) {
      op.b = p.next_id++;
      p.requests.push_back({op.b, op.context});
    }
    const std::uint64_t before = p.out.tail();
    if (!p.pending.empty() || !inject(p, op)) p.pending.push_back(op);
    wrote = p.out.tail() != before;
    p.busy.store(true, std::memory_order_relaxed);
  }
  if (wrote) notify(p, true);
  return {};
}

inline bool ShmBackend::inject(Peer& p, OutOp& op) {
  do {
    const std::uint64_t chunk = std::min(op.len - op.done, frag_);
    RecHdr* r = p.out.try_reserve(op.type == RecType::put || op.type == RecType::get_data ? chunk : 0);
    if (r == nullptr) return false;
    r->type = op.type;
    const bool last = op.done + chunk == op.len;
    switch (op.type) {
      case RecType::put:
      case RecType::get_data:
        if (chunk > 0) std::memcpy(r->payload(), op.src + op.done, chunk);  // src may be null for 0 bytes
        r->addr = op.addr + op.done;
        r->a = op.a;
        r->b = op.b;
        r->flags =
            static_cast<std::uint16_t>((last ? RecHdr::kLast : 0) | (last && op.with_signal ? RecHdr::kSignal : 0));
        op.done += chunk;
        break;
      default:  // single-record operations
        r->addr = op.addr;
        r->a = op.a;
        r->b = op.b;
        r->c = op.c;
        r->flags = RecHdr::kLast;
        op.done = op.len;
        break;
    }
    p.out.publish();
  } while (op.done < op.len);
  if (op.user) {
    if (op.eager)
      push_completion(op.context, {});
    else
      p.inflight.push_back({p.out.tail(), op.context});
  }
  return true;
}

}  // namespace shmem
}  // namespace strata::transport::detail
