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

namespace {

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

/// The stall clock of busy peers: CLOCK_MONOTONIC_COARSE (the steady clock's
/// base, a few ms resolution) is enough for timeouts of 200 ms and up and costs
/// a memory read instead of the TSC arithmetic of steady_clock::now(), which
/// was ~6% of a small collective's time (perf, barrier on 2 ranks).
Clock::time_point coarse_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(ts.tv_sec) +
                                                                       std::chrono::nanoseconds(ts.tv_nsec)));
}

/// Names of shared objects: unguessable without the job secret.
std::string job_tag(const JobInfo& job) {
  return strata::detail::rdv::shm_job_tag(job.job_id, job.secret.data(), job.secret.size());
}

std::uint64_t ring_bytes_from_env() {
  const char* v = strata::detail::env::get("STRATA_SHM_RING_BYTES");
  if (v == nullptr) return kDefaultRingBytes;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || n < 4096 || n > (1ULL << 30) || (n & (n - 1)) != 0) {
    throw Error(Errc::invalid_argument,
                std::string("STRATA_SHM_RING_BYTES='") + v + "': expected a power of two in [4096, 2^30]");
  }
  return n;
}

std::size_t direct_min_from_env() {
  const char* v = strata::detail::env::get("STRATA_SHM_DIRECT");
  if (v == nullptr) return kDefaultDirectMin;
  if (std::strcmp(v, "off") == 0) return SIZE_MAX;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0') {
    throw Error(Errc::invalid_argument, std::string("STRATA_SHM_DIRECT='") + v + "': expected a byte count or 'off'");
  }
  return static_cast<std::size_t>(n);
}

enum class NtMode : std::uint8_t { off, on, automatic };

NtMode nt_mode_from_env() {
  const char* v = strata::detail::env::get("STRATA_SHM_NT");
  if (v == nullptr || std::strcmp(v, "auto") == 0) return NtMode::automatic;
  if (std::strcmp(v, "on") == 0) return NtMode::on;
  if (std::strcmp(v, "off") == 0) return NtMode::off;
  throw Error(Errc::invalid_argument, std::string("STRATA_SHM_NT='") + v + "': expected auto, on or off");
}

double nt_gbps_from_env() {
  const char* v = strata::detail::env::get("STRATA_SHM_NT_GBPS");
  if (v == nullptr) return kDefaultNtGbps;
  char* end = nullptr;
  errno = 0;
  const double g = std::strtod(v, &end);
  if (errno != 0 || end == v || *end != '\0' || !(g > 0.0) || g > 1e6) {
    throw Error(Errc::invalid_argument, std::string("STRATA_SHM_NT_GBPS='") + v + "': expected GB/s in (0, 1e6]");
  }
  return g;
}

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

// ----------------------------------------------------------------- set-up

ShmBackend::ShmBackend(Bootstrap& boot, const Hierarchy& hier, const std::vector<bool>& serve,
                       const TransportOptions& opts)
    : rank_(boot.rank()), size_(boot.size()), timeout_(opts.timeout) {
  const JobInfo& job = boot.job();
  const std::string who = "shm backend (rank " + std::to_string(rank_) + ")";
  if (serve.size() != static_cast<std::size_t>(size_)) {
    throw Error(Errc::invalid_argument, who + ": serve mask has " + std::to_string(serve.size()) +
                                            " entries for a job of " + std::to_string(size_) + " ranks");
  }
  if (hier.size() != size_) {
    throw Error(Errc::invalid_argument,
                who + ": hierarchy has " + std::to_string(hier.size()) + " ranks, job has " + std::to_string(size_));
  }
  if (timeout_.count() <= 0) throw Error(Errc::invalid_argument, who + ": timeout must be positive");
  if (opts.cma_threshold != 0) cma_threshold_ = opts.cma_threshold;
  ring_bytes_ = ring_bytes_from_env();
  direct_min_ = direct_min_from_env();
  nt_mode_ = nt_mode_from_env();
  nt_gbps_ = nt_gbps_from_env();

  const std::vector<int> locals = hier.host_ranks(rank_);
  auto local_index = [&locals](int r) {
    auto it = std::find(locals.begin(), locals.end(), r);
    return it == locals.end() ? -1 : static_cast<int>(it - locals.begin());
  };
  peers_.resize(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    if (!serve[static_cast<std::size_t>(r)]) continue;
    if (local_index(r) < 0) {
      throw Error(Errc::invalid_argument, who + ": asked to serve rank " + std::to_string(r) + ", which is on host " +
                                              std::to_string(hier.place(r).host) + ", not this rank's host " +
                                              std::to_string(hier.place(rank_).host));
    }
    served_.push_back(r);
  }
  const std::string tag = job_tag(job);
  tag_ = tag;
  auto seg_name = [&tag](int r) { return "/strata-" + tag + "-" + std::to_string(r); };
  auto sock_addr = [&tag](int r, sockaddr_un* a, socklen_t* l) {
    const std::string n = "strata-" + tag + "-w" + std::to_string(r);
    std::memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    std::memcpy(a->sun_path + 1, n.data(), n.size());  // abstract namespace: sun_path[0] == 0
    *l = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n.size());
  };

  Hello mine{};
  mine.magic = kMagic;
  mine.pid = ::getpid();
  mine.host = hier.place(rank_).host;
  mine.ok = 1;
  auto fail_local = [&mine](const std::string& what) {
    mine.ok = 0;
    std::snprintf(mine.error, sizeof(mine.error), "%s", what.c_str());
  };
  const bool active = !served_.empty();
  bool created = false;
  if (active) {
    // Lets peers use CMA on us under Yama ptrace_scope=1 (EINVAL without Yama: ignored).
    (void)::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    sock_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sock_addr(rank_, &self_addr_, &self_len_);
    if (sock_ < 0 || ::bind(sock_, reinterpret_cast<const sockaddr*>(&self_addr_), self_len_) != 0) {
      fail_local(std::string("wake socket: ") + std::strerror(errno));
    }
    const std::uint64_t nlocal = locals.size();
    seg_bytes_ = sizeof(SegHeader) + nlocal * (sizeof(RingCtl) + ring_bytes_);
    const std::string name = seg_name(rank_);
    const int fd = mine.ok ? ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600) : -1;
    if (mine.ok && fd < 0) fail_local("shm_open(" + name + "): " + std::strerror(errno));
    if (fd >= 0) {
      created = true;
      if (::ftruncate(fd, static_cast<off_t>(seg_bytes_)) != 0) {
        fail_local("ftruncate(" + name + "): " + std::strerror(errno));
      } else {
        void* m = ::mmap(nullptr, seg_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
          fail_local("mmap(" + name + "): " + std::strerror(errno));
        } else {
          seg_ = m;
          hdr_ = new (seg_) SegHeader{};
          hdr_->magic = kMagic;
          hdr_->pid = mine.pid;
          hdr_->nlocal = nlocal;
          hdr_->ring_bytes = ring_bytes_;
          hdr_->sleeping.store(0, std::memory_order_relaxed);
          auto* base = static_cast<std::byte*>(seg_) + sizeof(SegHeader);
          for (std::uint64_t i = 0; i < nlocal; ++i) new (base + i * (sizeof(RingCtl) + ring_bytes_)) RingCtl{};
          mine.seg_addr = reinterpret_cast<std::uintptr_t>(seg_);
          mine.seg_bytes = seg_bytes_;
        }
      }
      ::close(fd);
    }
  }

  // Exchange 1: everyone's segment exists (or the reason it does not).
  std::vector<std::vector<std::byte>> hellos;
  try {
    hellos = boot.allgather(&mine, sizeof(mine));
  } catch (...) {
    if (created) ::shm_unlink(seg_name(rank_).c_str());
    throw;
  }
  std::string problem = mine.ok ? std::string() : std::string(mine.error);
  auto hello_of = [&hellos](int r) {
    Hello h{};
    const auto& blob = hellos.at(static_cast<std::size_t>(r));
    if (blob.size() == sizeof(Hello)) std::memcpy(&h, blob.data(), sizeof(Hello));
    return h;
  };
  for (int r : served_) {
    Peer& p = *(peers_[static_cast<std::size_t>(r)] = std::make_unique<Peer>());
    p.rank = r;
    p.served = true;
    if (!problem.empty()) continue;
    const Hello h = hello_of(r);
    if (h.magic != kMagic || h.ok == 0) {
      problem = "peer rank " + std::to_string(r) + " could not create its segment: " +
                (h.magic == kMagic ? std::string(h.error, strnlen(h.error, sizeof(h.error))) : "bad hello");
      continue;
    }
    p.pid = static_cast<pid_t>(h.pid);
    sock_addr(r, &p.wake_addr, &p.wake_len);
    void* m = seg_;
    if (r != rank_) {
      const std::string name = seg_name(r);
      const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
      if (fd < 0) {
        problem = "shm_open(" + name + ") of peer rank " + std::to_string(r) + ": " + std::strerror(errno);
        continue;
      }
      struct stat st {};
      m = (::fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_size) == h.seg_bytes)
              ? ::mmap(nullptr, h.seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
              : MAP_FAILED;
      ::close(fd);
      if (m == MAP_FAILED) {
        problem = "mapping the segment of peer rank " + std::to_string(r) + " failed";
        continue;
      }
      maps_.emplace_back(m, h.seg_bytes);
    }
    p.hdr = static_cast<SegHeader*>(m);
    if (p.hdr->magic != kMagic || p.hdr->ring_bytes != ring_bytes_ || p.hdr->nlocal != locals.size()) {
      problem =
          "segment of peer rank " + std::to_string(r) + " has a different layout (STRATA_SHM_RING_BYTES differs?)";
      continue;
    }
    auto ring_at = [this](void* seg, int idx) {
      auto* b = static_cast<std::byte*>(seg) + sizeof(SegHeader) +
                static_cast<std::uint64_t>(idx) * (sizeof(RingCtl) + ring_bytes_);
      return Ring(reinterpret_cast<RingCtl*>(b), b + sizeof(RingCtl), ring_bytes_);
    };
    p.out = ring_at(m, local_index(rank_));  // my ring inside the peer's segment
    p.in = ring_at(seg_, local_index(r));    // the peer's ring inside mine
    if (r != rank_) {
      // CMA probe: read the peer's magic through process_vm_readv.
      std::uint64_t probe = 0;
      iovec l{&probe, sizeof(probe)};
      iovec rv{reinterpret_cast<void*>(h.seg_addr), sizeof(probe)};
      const ssize_t n = ::process_vm_readv(p.pid, &l, 1, &rv, 1, 0);
      if (n == static_cast<ssize_t>(sizeof(probe)) && probe == kMagic) {
        p.cma.store(true, std::memory_order_relaxed);
        cma_any_ = true;
      } else {
        disable_cma(p, n < 0 ? errno : EIO);
      }
    }
  }
  frag_ = Ring(nullptr, nullptr, ring_bytes_).max_payload();

  // Exchange 2: everyone mapped everything; the names can go.
  std::int32_t ok = problem.empty() ? 1 : 0;
  std::vector<std::vector<std::byte>> oks;
  try {
    oks = boot.allgather(&ok, sizeof(ok));
  } catch (...) {
    if (created) ::shm_unlink(seg_name(rank_).c_str());
    throw;
  }
  if (created) ::shm_unlink(seg_name(rank_).c_str());
  for (int r : served_) {
    std::int32_t v = 0;
    const auto& blob = oks.at(static_cast<std::size_t>(r));
    if (blob.size() == sizeof(v)) std::memcpy(&v, blob.data(), sizeof(v));
    if (v == 0 && problem.empty()) problem = "peer rank " + std::to_string(r) + " failed to map the segments";
  }
  if (!problem.empty()) {
    for (auto& m : maps_) ::munmap(m.first, m.second);
    maps_.clear();
    if (seg_ != nullptr) ::munmap(seg_, seg_bytes_);
    seg_ = nullptr;
    if (sock_ >= 0) ::close(sock_);
    sock_ = -1;
    throw Error(Errc::transport_error, who + ": " + problem);
  }
  // Freed regions (notify_peers) tell the peers named at allocation to unmap them.
  std::lock_guard<std::mutex> g(regions_->mu);
  regions_->send_unmap = [this](int r, std::uint64_t id) {
    if (r < 0 || r >= size_ || !peers_[static_cast<std::size_t>(r)] || shut_.load(std::memory_order_acquire)) return;
    OutOp o;
    o.type = RecType::region_unmap;
    o.user = false;
    o.a = id;
    (void)post(*peers_[static_cast<std::size_t>(r)], o);  // dropped only when the peer is dead
  };
}

ShmBackend::~ShmBackend() {
  shut_.store(true, std::memory_order_release);
  {
    // Regions that outlive the transport keep their memory, not their names.
    std::lock_guard<std::mutex> g(regions_->mu);
    regions_->send_unmap = nullptr;
    for (RegionTable::Entry& e : regions_->live) {
      e.waiting.clear();
      RegionTable::unlink_if_done(e);
    }
  }
  for (auto& m : maps_) ::munmap(m.first, m.second);
  for (auto& p : peers_) {
    if (!p) continue;
    for (const Peer::Mapped& m : p->mapped)
      if (m.local != nullptr) ::munmap(m.local, m.len);
  }
  if (seg_ != nullptr) ::munmap(seg_, seg_bytes_);
  if (sock_ >= 0) ::close(sock_);
}

void ShmBackend::disable_cma(Peer& p, int err) {
  p.cma.store(false, std::memory_order_relaxed);
  std::call_once(cma_log_once_, [&] {
    strata::detail::logger().warn(
        "strata: rank {}: single-copy CMA to rank {} refused ({}); same-host transfers use the two-copy segment "
        "path",
        rank_, p.rank, std::strerror(err));
  });
}

// ----------------------------------------------------------------- checks

Status ShmBackend::check_peer(const char* op, int peer) const {
  if (shut_.load(std::memory_order_acquire)) {
    return {Errc::shutdown, std::string(op) + ": transport of rank " + std::to_string(rank_) + " is shut down"};
  }
  if (peer < 0 || peer >= size_) {
    return {Errc::unknown_peer, std::string(op) + ": peer " + std::to_string(peer) + " outside [0, " +
                                    std::to_string(size_) + ") (rank " + std::to_string(rank_) + ")"};
  }
  const Peer* p = peers_[static_cast<std::size_t>(peer)].get();
  if (p == nullptr) {
    return {Errc::unknown_peer, std::string(op) + ": peer " + std::to_string(peer) +
                                    " is not served by the shm backend of rank " + std::to_string(rank_) +
                                    " (not on the same host)"};
  }
  if (p->dead.load(std::memory_order_acquire)) return dead_status(*p);
  return {};
}

Status ShmBackend::check_key(const char* op, int peer, const RemoteKey& key, std::uint64_t offset,
                             std::uint64_t len) const {
  if (!key.valid() || (key.flags & RemoteKey::kShm) == 0) {
    return {Errc::invalid_argument, std::string(op) + ": remote key for peer " + std::to_string(peer) +
                                        " has no shared-memory section (rank " + std::to_string(rank_) + ")"};
  }
  if (key.owner != peer) {
    return {Errc::invalid_argument, std::string(op) + ": remote key registered by rank " + std::to_string(key.owner) +
                                        " used with peer " + std::to_string(peer) + " (rank " + std::to_string(rank_) +
                                        ")"};
  }
  if (offset > key.len || len > key.len - offset) {
    return {Errc::out_of_range, std::string(op) + " to peer " + std::to_string(peer) + ": offset " +
                                    std::to_string(offset) + " + length " + std::to_string(len) +
                                    " exceeds the registered length " + std::to_string(key.len) + " (rank " +
                                    std::to_string(rank_) + ")"};
  }
  return {};
}

Status ShmBackend::register_memory(void* addr, std::size_t len, RemoteKey* key) {
  if (key == nullptr) {
    return {Errc::invalid_argument, "register_memory: key is null (rank " + std::to_string(rank_) + ")"};
  }
  if (addr == nullptr && len > 0) {
    return {Errc::invalid_argument,
            "register_memory: addr is null with len " + std::to_string(len) + " (rank " + std::to_string(rank_) + ")"};
  }
  if (shut_.load(std::memory_order_acquire)) {
    return {Errc::shutdown, "register_memory: transport of rank " + std::to_string(rank_) + " is shut down"};
  }
  // The shared-memory section needs no kernel registration: peers reach the
  // buffer through CMA (pid + address) or through the owner's progress agent.
  key->owner = rank_;
  key->flags |= RemoteKey::kShm;
  key->addr = reinterpret_cast<std::uintptr_t>(addr);
  key->len = len;
  key->shm_pid = ::getpid();
  key->shm_token = next_token_.fetch_add(1, std::memory_order_relaxed);
  key->reserved = 0;
  (void)in_region(addr, len, key);
  return {};
}

bool ShmBackend::in_region(const void* addr, std::size_t len, RemoteKey* key) const {
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  std::lock_guard<std::mutex> g(regions_->mu);
  for (const RegionTable::Entry& e : regions_->live) {
    if (a >= e.base && len <= e.len && a - e.base <= e.len - len) {
      key->flags |= RemoteKey::kShmMapped;
      key->shm_token = e.id;
      key->reserved = e.base;
      return true;
    }
  }
  return false;
}

bool ShmBackend::shared_key(const void* addr, std::size_t len, RemoteKey* key) {
  if (key == nullptr || addr == nullptr) return false;
  RemoteKey k;
  k.owner = rank_;
  k.flags = RemoteKey::kShm;
  k.addr = reinterpret_cast<std::uintptr_t>(addr);
  k.len = len;
  k.shm_pid = ::getpid();
  if (!in_region(addr, len, &k)) return false;
  *key = k;
  return true;
}

std::unique_ptr<SharedRegion> ShmBackend::allocate_shared(std::size_t len, const std::vector<int>& peers) {
  // The same-host peers among @p peers: they map the region at once.
  std::vector<int> mappers;
  for (int r : peers) {
    if (r == rank_ || r < 0 || r >= size_ || peers_[static_cast<std::size_t>(r)] == nullptr) continue;
    if (std::find(mappers.begin(), mappers.end(), r) == mappers.end()) mappers.push_back(r);
  }
  if (mappers.empty() || len == 0 || shut_.load(std::memory_order_acquire)) return nullptr;
  const std::uint64_t id = next_region_.fetch_add(1, std::memory_order_relaxed);
  const std::string name = region_name(rank_, id);
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    strata::detail::logger().warn("strata: rank {}: shm_open({}) for a shared region failed ({}); using private memory",
                                  rank_, name, std::strerror(errno));
    return nullptr;
  }
  void* m = ::ftruncate(fd, static_cast<off_t>(len)) == 0
                ? ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                : MAP_FAILED;
  ::close(fd);
  if (m == MAP_FAILED) {
    strata::detail::logger().warn(
        "strata: rank {}: sizing/mapping the shared region {} failed ({}); using private memory", rank_, name,
        std::strerror(errno));
    ::shm_unlink(name.c_str());
    return nullptr;
  }
  const auto base = reinterpret_cast<std::uintptr_t>(m);
  {
    // In the table before the first map-now record goes out: answers find it.
    std::lock_guard<std::mutex> g(regions_->mu);
    regions_->live.push_back({id, base, len, name, mappers, true, mappers});
  }
  // Map-now records: each peer maps the region from its progress and answers;
  // the last answer (or the peer's death) removes the name. A post fails only
  // when the peer is already dead: nothing to wait for then.
  for (int r : mappers) {
    OutOp o;
    o.type = RecType::region_map;
    o.user = false;
    o.addr = base;
    o.a = id;
    o.c = len;
    if (!post(*peers_[static_cast<std::size_t>(r)], o)) regions_->answered(r, id);
  }
  auto region = std::make_unique<SharedRegion>();
  region->addr = m;
  region->len = len;
  // Both functions may run after the backend is gone; its destructor removed the names then.
  region->settled = [table = std::weak_ptr<RegionTable>(regions_), id] {
    const auto t = table.lock();
    if (!t) return true;
    std::lock_guard<std::mutex> g(t->mu);
    for (const RegionTable::Entry& e : t->live) {
      if (e.id == id) return !e.named;
    }
    return true;
  };
  // Runs in the region's destructor: `self` is still valid there.
  region->release = [table = std::weak_ptr<RegionTable>(regions_), id, m, len, self = region.get()] {
    if (const auto t = table.lock()) {
      std::lock_guard<std::mutex> g(t->mu);
      for (RegionTable::Entry& e : t->live) {
        if (e.id != id) continue;
        e.waiting.clear();
        RegionTable::unlink_if_done(e);
        // The peers' mappings go too (else every allocate/free grows them).
        if (self->notify_peers && t->send_unmap)
          for (int r : e.mappers) t->send_unmap(r, id);
      }
      t->live.erase(
          std::remove_if(t->live.begin(), t->live.end(), [id](const RegionTable::Entry& e) { return e.id == id; }),
          t->live.end());
    }
    ::munmap(m, len);
  };
  return region;
}

const Peer::Mapped& ShmBackend::map_region(Peer& p, std::uint64_t id, std::uint64_t base) {
  for (const Peer::Mapped& m : p.mapped) {
    if (m.id == id) return m;
  }
  Peer::Mapped nm{id, base, nullptr, 0};
  const std::string name = region_name(p.rank, id);
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd >= 0) {
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_size > 0) {
      void* m = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (m != MAP_FAILED) {
        nm.local = static_cast<std::byte*>(m);
        nm.len = static_cast<std::size_t>(st.st_size);
      }
    }
    ::close(fd);
  }
  if (nm.local == nullptr)
    strata::detail::logger().debug("strata: rank {}: cannot map region {} of rank {}; puts to it use the ring", rank_,
                                   name, p.rank);
  p.mapped.push_back(nm);
  return p.mapped.back();
}

void ShmBackend::drop_mapping(Peer& p, std::uint64_t id, std::uint64_t base) {
  std::lock_guard<std::mutex> g(p.map_mu);
  for (auto it = p.mapped.begin(); it != p.mapped.end(); ++it) {
    if (it->id != id || (base != 0 && it->remote_base != base)) continue;
    if (it->local != nullptr) ::munmap(it->local, it->len);
    p.mapped.erase(it);
    return;
  }
}

void ShmBackend::unmap_peer(int peer, const RemoteKey& key) {
  if (peer < 0 || peer >= size_ || peer == rank_ || !peers_[static_cast<std::size_t>(peer)]) return;
  if ((key.flags & RemoteKey::kShmMapped) == 0) return;
  drop_mapping(*peers_[static_cast<std::size_t>(peer)], key.shm_token, key.reserved);
}

void ShmBackend::on_region_map(Peer& p, std::uint64_t id, std::uint64_t base) {
  bool ok = false;
  {
    std::lock_guard<std::mutex> g(p.map_mu);
    const Peer::Mapped& m = map_region(p, id, base);
    ok = m.local != nullptr && m.remote_base == base;
  }
  OutOp o;
  o.type = RecType::region_ack;
  o.user = false;
  o.a = id;
  o.b = ok ? 1 : 0;
  (void)post(p, o);  // dropped only when the owner is dead
}

std::byte* ShmBackend::direct(Peer& p, const RemoteKey& key, std::uint64_t offset, std::uint64_t len) {
  return len < direct_min_ ? nullptr : map_range(p, key, offset, len);
}

void* ShmBackend::map_peer(int peer, const RemoteKey& key, std::uint64_t offset, std::size_t len) {
  if (peer < 0 || peer >= size_ || !peers_[static_cast<std::size_t>(peer)]) return nullptr;
  return map_range(*peers_[static_cast<std::size_t>(peer)], key, offset, len);
}

std::byte* ShmBackend::map_range(Peer& p, const RemoteKey& key, std::uint64_t offset, std::uint64_t len) {
  if ((key.flags & RemoteKey::kShmMapped) == 0 || len == 0) return nullptr;
  const std::uint64_t at = key.addr + offset - key.reserved;  // offset inside the region
  if (p.rank == rank_) return reinterpret_cast<std::byte*>(key.reserved) + at;
  std::lock_guard<std::mutex> g(p.map_mu);
  // Normally mapped by the owner's map-now record; a rank the owner did not
  // name maps it here while the name exists, and uses the ring afterwards.
  const Peer::Mapped& m = map_region(p, key.shm_token, key.reserved);
  if (m.local == nullptr || m.remote_base != key.reserved || at > m.len || len > m.len - at) return nullptr;
  return m.local + at;
}

Status ShmBackend::deregister_memory(void* /*addr*/, std::size_t /*len*/) { return {}; }

// ----------------------------------------------------------------- posting

// The pointer is used after the lock: the caller's protocol keeps the owner's
// buffer (and so its region) alive until every reader finished; region ids are
// never reused, so a handle never names a freed region's successor.
const void* ShmBackend::mapped_peer(int peer, std::uint64_t handle, std::size_t len) {
  if ((handle & kRegionHandleBit) == 0 || peer < 0 || peer >= size_ || peer == rank_ ||
      !peers_[static_cast<std::size_t>(peer)])
    return nullptr;
  const std::uint64_t id = (handle & ~kRegionHandleBit) >> kRegionOffsetBits;
  const std::uint64_t off = handle & ((std::uint64_t{1} << kRegionOffsetBits) - 1);
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  std::lock_guard<std::mutex> g(p.map_mu);
  for (const Peer::Mapped& m : p.mapped)
    if (m.id == id && m.local != nullptr && off <= m.len && len <= m.len - off) return m.local + off;
  return nullptr;
}

Status ShmBackend::read_peer(int peer, void* dst, std::uint64_t addr, std::size_t len) {
  Status s = check_peer("read_peer", peer);
  if (!s) return s;
  if (len == 0) return {};
  if (dst == nullptr || addr == 0) {
    return {Errc::invalid_argument, "read_peer: null " + std::string(dst == nullptr ? "destination" : "source") +
                                        " with length " + std::to_string(len) + " (rank " + std::to_string(rank_) +
                                        ", peer " + std::to_string(peer) + ")"};
  }
  if ((addr & kRegionHandleBit) != 0) {
    // A region handle (region_handle): one memcpy out of this process's
    // mapping of the peer's region, no system call.
    const void* from = mapped_peer(peer, addr, len);
    if (from == nullptr)
      return {Errc::unsupported, "read_peer: region " +
                                     std::to_string((addr & ~kRegionHandleBit) >> kRegionOffsetBits) + " of rank " +
                                     std::to_string(peer) + " is not mapped by rank " + std::to_string(rank_)};
    std::memcpy(dst, from, len);
    return {};
  }
  if (peer == rank_) {
    std::memcpy(dst, reinterpret_cast<const void*>(addr), len);
    return {};
  }
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  if (!p.cma.load(std::memory_order_relaxed)) {
    return {Errc::unsupported, "read_peer: no CMA path from rank " + std::to_string(rank_) + " to rank " +
                                   std::to_string(peer) + " (process_vm_readv refused at start-up)"};
  }
  Status r = cma(p, false, dst, addr, len);
  if (r.code() == Errc::peer_dead) fail_peer(peer, r);
  return r;
}

Status ShmBackend::write_peer(int peer, const void* src, std::uint64_t addr, std::size_t len) {
  Status s = check_peer("write_peer", peer);
  if (!s) return s;
  if (len == 0) return {};
  if (src == nullptr || addr == 0 || (addr & kRegionHandleBit) != 0) {
    return {Errc::invalid_argument, "write_peer: " +
                                        std::string(src == nullptr ? "null source"
                                                    : addr == 0    ? "null destination"
                                                                   : "a region handle as destination") +
                                        " with length " + std::to_string(len) + " (rank " + std::to_string(rank_) +
                                        ", peer " + std::to_string(peer) + ")"};
  }
  if (peer == rank_) {
    std::memcpy(reinterpret_cast<void*>(addr), src, len);
    return {};
  }
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  if (!p.cma.load(std::memory_order_relaxed)) {
    return {Errc::unsupported, "write_peer: no CMA path from rank " + std::to_string(rank_) + " to rank " +
                                   std::to_string(peer) + " (process_vm_readv refused at start-up)"};
  }
  // process_vm_writev only reads the local side.
  Status r = cma(p, true, const_cast<void*>(src), addr, len);
  if (r.code() == Errc::peer_dead) fail_peer(peer, r);
  return r;
}

Status ShmBackend::cma(Peer& p, bool write, void* local, std::uint64_t remote, std::size_t len) {
  std::size_t done = 0;
  while (done < len) {
    iovec l{static_cast<std::byte*>(local) + done, len - done};
    iovec r{reinterpret_cast<void*>(remote + done), len - done};
    const ssize_t n = write ? ::process_vm_writev(p.pid, &l, 1, &r, 1, 0) : ::process_vm_readv(p.pid, &l, 1, &r, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      if (err == EPERM) return {Errc::unsupported, "EPERM"};
      if (err == ESRCH) {
        return {Errc::peer_dead, "peer rank " + std::to_string(p.rank) + " (pid " + std::to_string(p.pid) +
                                     ") no longer exists (seen by rank " + std::to_string(rank_) + ")"};
      }
      return {Errc::transport_error, std::string(write ? "process_vm_writev" : "process_vm_readv") + " to peer rank " +
                                         std::to_string(p.rank) + " failed: " + std::strerror(err) + " (rank " +
                                         std::to_string(rank_) + ")"};
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}

void ShmBackend::push_completion(void* context, Status st) {
  {
    std::lock_guard<std::mutex> g(cq_mu_);
    cq_.push_back({context, std::move(st)});
    cq_size_.store(cq_.size(), std::memory_order_seq_cst);
  }
  if (hdr_ != nullptr && hdr_->sleeping.load(std::memory_order_seq_cst) != 0) wake();
}

void ShmBackend::copy_to_peer(Peer& p, std::byte* to, const void* src, std::size_t len) {
  if (nt_mode_ == NtMode::off || len < kNtMin) {
    std::memcpy(to, src, len);
    return;
  }
  const int left = p.nt_left.load(std::memory_order_relaxed);
  if (nt_mode_ == NtMode::on || left > 0) {
    if (left > 0) p.nt_left.store(left - 1, std::memory_order_relaxed);
    stream_copy(to, src, len);
    return;
  }
  const Clock::time_point t0 = Clock::now();
  std::memcpy(to, src, len);
  const double ns =
      static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  if (static_cast<double>(len) < nt_gbps_ * ns) {  // bytes / ns = GB/s
    p.nt_left.store(kNtRun, std::memory_order_relaxed);
    strata::detail::logger().debug(
        "strata: rank {}: puts to rank {}: non-temporal stores for the next {} ({} bytes copied at {:.1f} GB/s < {} "
        "GB/s, STRATA_SHM_NT_GBPS)",
        rank_, p.rank, kNtRun, len, static_cast<double>(len) / ns, nt_gbps_);
  }
}

Status ShmBackend::put_impl(const char* op, int peer, const void* src, std::size_t len, const RemoteKey& dst,
                            std::uint64_t dst_offset, bool with_signal, std::uint64_t payload, void* context) {
  Status s = check_peer(op, peer);
  if (!s) return s;
  s = check_key(op, peer, dst, dst_offset, len);
  if (!s) return s;
  if (src == nullptr && len > 0) {
    return {Errc::invalid_argument, std::string(op) + ": src is null with length " + std::to_string(len) + " (rank " +
                                        std::to_string(rank_) + ", peer " + std::to_string(peer) + ")"};
  }
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  const std::uint64_t raddr = dst.addr + dst_offset;
  if (std::byte* to = direct(p, dst, dst_offset, len)) {
    // Single copy into the peer's mapped region; the signal record published
    // after it (release) makes the data visible before the signal.
    copy_to_peer(p, to, src, len);
    STRATA_TSAN_RELEASE(&p);
    if (!with_signal) {
      push_completion(context, {});
      return {};
    }
    OutOp sig;
    sig.type = RecType::signal;
    sig.a = payload;
    sig.context = context;
    sig.eager = true;  // the data is in place: done once the signal is published
    return post(p, sig);
  }
  if (len >= cma_threshold_ && len > 0 && (peer == rank_ || p.cma.load(std::memory_order_relaxed))) {
    Status r;
    if (peer == rank_) {
      std::memcpy(reinterpret_cast<void*>(raddr), src, len);
    } else {
      r = cma(p, true, const_cast<void*>(src), raddr, len);
    }
    if (r.code() == Errc::unsupported) {
      disable_cma(p, EPERM);  // fall through to the segment path
    } else if (!r) {
      if (r.code() == Errc::peer_dead) fail_peer(peer, r);
      push_completion(context, std::move(r));
      return {};
    } else if (!with_signal) {
      push_completion(context, {});
      return {};
    } else {
      OutOp sig;
      sig.type = RecType::signal;
      sig.a = payload;
      sig.context = context;
      sig.eager = true;
      return post(p, sig);
    }
  }
  OutOp o;
  o.type = RecType::put;
  o.with_signal = with_signal;
  o.src = static_cast<const std::byte*>(src);
  o.len = len;
  o.addr = raddr;
  o.a = payload;
  o.context = context;
  return post(p, o);
}

Status ShmBackend::get(int peer, void* dst, std::size_t len, const RemoteKey& src, std::uint64_t src_offset,
                       void* context) {
  Status s = check_peer("get", peer);
  if (!s) return s;
  s = check_key("get", peer, src, src_offset, len);
  if (!s) return s;
  if (dst == nullptr && len > 0) {
    return {Errc::invalid_argument, "get: dst is null with length " + std::to_string(len) + " (rank " +
                                        std::to_string(rank_) + ", peer " + std::to_string(peer) + ")"};
  }
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  const std::uint64_t raddr = src.addr + src_offset;
  if (const std::byte* from = direct(p, src, src_offset, len)) {
    std::memcpy(dst, from, len);
    push_completion(context, {});
    return {};
  }
  if (len >= cma_threshold_ && len > 0 && (peer == rank_ || p.cma.load(std::memory_order_relaxed))) {
    Status r;
    if (peer == rank_) {
      std::memcpy(dst, reinterpret_cast<const void*>(raddr), len);
    } else {
      r = cma(p, false, dst, raddr, len);
    }
    if (r.code() == Errc::unsupported) {
      disable_cma(p, EPERM);
    } else {
      if (r.code() == Errc::peer_dead) fail_peer(peer, r);
      push_completion(context, std::move(r));
      return {};
    }
  }
  OutOp o;
  o.type = RecType::get_req;
  o.user = false;  // completes when the last get_data record arrives
  o.addr = raddr;
  o.a = reinterpret_cast<std::uintptr_t>(dst);
  o.c = len;
  o.context = context;
  return post(p, o);
}

Status ShmBackend::signal(int peer, std::uint64_t payload, void* context) {
  Status s = check_peer("signal", peer);
  if (!s) return s;
  OutOp o;
  o.type = RecType::signal;
  o.a = payload;
  o.context = context;
  o.eager = true;
  return post(*peers_[static_cast<std::size_t>(peer)], o);
}

Status ShmBackend::fetch_add(int peer, const RemoteKey& dst, std::uint64_t dst_offset, std::uint64_t addend,
                             std::uint64_t* fetched, void* context) {
  Status s = check_peer("fetch_add", peer);
  if (!s) return s;
  s = check_key("fetch_add", peer, dst, dst_offset, sizeof(std::uint64_t));
  if (!s) return s;
  const std::uint64_t raddr = dst.addr + dst_offset;
  if (raddr % alignof(std::uint64_t) != 0) {
    return {Errc::invalid_argument, "fetch_add: target word at offset " + std::to_string(dst_offset) +
                                        " is not 8-byte aligned (rank " + std::to_string(rank_) + ", peer " +
                                        std::to_string(peer) + ")"};
  }
  OutOp o;
  o.type = RecType::fadd_req;
  o.user = false;
  o.addr = raddr;
  o.a = addend;
  o.c = reinterpret_cast<std::uintptr_t>(fetched);
  o.context = context;
  return post(*peers_[static_cast<std::size_t>(peer)], o);
}

Status ShmBackend::post(Peer& p, OutOp op) {
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

bool ShmBackend::inject(Peer& p, OutOp& op) {
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

// ----------------------------------------------------------------- progress

void ShmBackend::complete_request(Peer& p, std::uint64_t id, std::vector<Completion>& done, bool* corrupt) {
  std::lock_guard<SpinLock> g(p.prod_mu);
  if (p.requests.empty() || p.requests.front().id != id) {
    if (!p.dead.load(std::memory_order_relaxed)) *corrupt = true;  // after fail_peer the list was drained
    return;
  }
  done.push_back({p.requests.front().context, {}});
  p.requests.pop_front();
}

std::size_t ShmBackend::consume(Peer& p, std::vector<Completion>& done) {
  std::unique_lock<SpinLock> g(p.cons_mu, std::try_to_lock);
  if (!g.owns_lock()) return 0;
  std::size_t n = 0;
  bool corrupt = false;
  while (n < static_cast<std::size_t>(kBatch)) {
    const RecHdr* r = p.in.peek(&corrupt);
    if (r == nullptr) break;
    STRATA_TSAN_ACQUIRE(&p);
    strata::detail::tsan_acquire_from_peers();  // the peer may have acted on a memory flag of ours
    const SignalHandler* sh = nullptr;
    if (r->type == RecType::signal || (r->flags & RecHdr::kSignal) != 0) {
      sh = signal_.get();
      if (sh == nullptr) break;  // keep it until a handler is installed
    }
    switch (r->type) {
      case RecType::put:
      case RecType::get_data:
        if (r->len > 0) std::memcpy(reinterpret_cast<void*>(r->addr), r->payload(), r->len);
        if (r->type == RecType::get_data && (r->flags & RecHdr::kLast) != 0) complete_request(p, r->b, done, &corrupt);
        if (sh != nullptr) (*sh)(p.rank, r->a);
        break;
      case RecType::signal:
        (*sh)(p.rank, r->a);
        break;
      case RecType::get_req: {
        OutOp o;
        o.type = RecType::get_data;
        o.user = false;
        o.src = reinterpret_cast<const std::byte*>(r->addr);
        o.len = r->c;
        o.addr = r->a;
        o.b = r->b;
        (void)post(p, o);  // dropped only when the requester is dead
        break;
      }
      case RecType::fadd_req: {
        OutOp o;
        o.type = RecType::fadd_reply;
        o.user = false;
        o.a = __atomic_fetch_add(reinterpret_cast<std::uint64_t*>(r->addr), r->a, __ATOMIC_SEQ_CST);
        o.addr = r->c;
        o.b = r->b;
        (void)post(p, o);
        break;
      }
      case RecType::fadd_reply:
        if (r->addr != 0) std::memcpy(reinterpret_cast<void*>(r->addr), &r->a, sizeof(r->a));
        complete_request(p, r->b, done, &corrupt);
        break;
      case RecType::region_map:
        on_region_map(p, r->a, r->addr);
        break;
      case RecType::region_ack:
        regions_->answered(p.rank, r->a);
        break;
      case RecType::region_unmap:
        drop_mapping(p, r->a, 0);
        break;
      default:
        corrupt = true;
        break;
    }
    if (corrupt) break;
    p.in.pop(r);
    ++n;
  }
  g.unlock();
  if (n > 0) {
    p.activity.fetch_add(n, std::memory_order_relaxed);
    notify(p, false);  // the producer may be sleeping on completions or ring space
  }
  if (corrupt) {
    fail_peer(p.rank, {Errc::transport_error, "malformed record in the ring from peer rank " + std::to_string(p.rank) +
                                                  " (seen by rank " + std::to_string(rank_) + ")"});
  }
  return n;
}

std::size_t ShmBackend::service_outgoing(Peer& p, std::vector<Completion>& done, Clock::time_point& now,
                                         bool& have_now) {
  std::unique_lock<SpinLock> g(p.prod_mu, std::try_to_lock);
  if (!g.owns_lock()) return 0;
  std::size_t events = 0;
  const std::uint64_t head = p.out.consumed();
  while (!p.inflight.empty() && p.inflight.front().end <= head) {
    done.push_back({p.inflight.front().context, {}});
    p.inflight.pop_front();
    ++events;
  }
  const std::uint64_t before = p.out.tail();
  while (!p.pending.empty() && !p.dead.load(std::memory_order_relaxed) && inject(p, p.pending.front())) {
    p.pending.pop_front();
  }
  const bool wrote = p.out.tail() != before;
  const bool busy = !p.inflight.empty() || !p.pending.empty() || !p.requests.empty();
  bool stalled = false;
  if (busy) {
    if (!have_now) {
      now = coarse_now();
      have_now = true;
    }
    const std::uint64_t act = p.activity.load(std::memory_order_relaxed);
    if (!p.was_busy || wrote || head != p.seen_head || act != p.seen_activity) {
      p.stall_since = now;
      p.seen_head = head;
      p.seen_activity = act;
    } else if (now - p.stall_since > timeout_) {
      stalled = true;
    } else if (now - p.stall_since > kDeathCheck && now - p.last_death_check > kDeathCheck) {
      // A peer that stopped draining may simply be gone (the launcher reaps
      // it): find out well before the timeout.
      p.last_death_check = now;
      stalled = ::kill(p.pid, 0) != 0 && errno == ESRCH;
    }
  }
  p.was_busy = busy;
  p.busy.store(busy, std::memory_order_relaxed);
  g.unlock();
  if (wrote) notify(p, true);
  if (stalled) {
    if (::kill(p.pid, 0) != 0 && errno == ESRCH) {
      fail_peer(p.rank, {Errc::peer_dead, "peer rank " + std::to_string(p.rank) + " (pid " + std::to_string(p.pid) +
                                              ") exited (seen by rank " + std::to_string(rank_) + ")"});
    } else {
      fail_peer(p.rank, {Errc::timeout, "peer rank " + std::to_string(p.rank) + " made no progress for " +
                                            std::to_string(timeout_.count()) + " ms (STRATA_TIMEOUT; seen by rank " +
                                            std::to_string(rank_) + ")"});
    }
  }
  return events;
}

void ShmBackend::deliver(std::vector<Completion>& done) {
  if (done.empty()) return;
  const CompletionHandler* h = completion_.get();
  if (h == nullptr) {  // keep them until a handler is installed
    std::lock_guard<std::mutex> g(cq_mu_);
    for (auto& c : done) cq_.push_back(std::move(c));
    cq_size_.store(cq_.size(), std::memory_order_release);
    return;
  }
  for (auto& c : done) (*h)(c.context, c.status);
}

namespace {
// State letter of process @p pid from /proc/PID/stat (R, S, D, T, t, Z, ...);
// 0 when the process does not exist.
char proc_state(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ESRCH ? 0 : 'R';  // unreadable: assume alive
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* close_paren = std::strrchr(buf, ')');  // the command name may hold spaces and parentheses
  return close_paren != nullptr && close_paren[1] == ' ' && close_paren[2] != '\0' ? close_paren[2] : 'R';
}
}  // namespace

// Liveness of the same-host peers, without the launcher and without traffic:
// a peer whose process is gone (or a zombie) is dead; a peer stopped by a
// signal (state T, SIGSTOP or a debugger) for longer than STRATA_TIMEOUT is
// declared dead too (it answers nobody, and a survivor that only waits to
// receive from it has nothing in flight that could time out). A peer that is
// merely busy or descheduled (R, S, D) is alive, however long it computes.
// Runs at most every 100 ms from whichever thread drives progress (the
// progress server wakes at least every STRATA_PROGRESS_MAX_BLOCK).
void ShmBackend::check_liveness() {
  const Clock::time_point now = coarse_now();
  const std::int64_t t = now.time_since_epoch().count();
  if (t < next_live_check_.load(std::memory_order_relaxed)) return;
  if (live_busy_.test_and_set(std::memory_order_acquire)) return;
  next_live_check_.store(t + std::chrono::duration_cast<Clock::duration>(std::chrono::milliseconds(100)).count(),
                         std::memory_order_relaxed);
  std::vector<std::pair<int, Status>> fails;
  for (int r : served_) {
    Peer& p = *peers_[static_cast<std::size_t>(r)];
    if (p.pid <= 0 || p.pid == ::getpid() || p.dead.load(std::memory_order_acquire)) continue;
    const char st = proc_state(p.pid);
    const std::string who = "peer rank " + std::to_string(r) + " (pid " + std::to_string(p.pid) + ")";
    if (st == 0 || st == 'Z' || st == 'X') {
      fails.emplace_back(r, Status(Errc::peer_dead, who + " exited (seen by rank " + std::to_string(rank_) + ")"));
    } else if (st == 'T' || st == 't') {
      if (!p.stopped) {
        p.stopped = true;
        p.stopped_since = now;
      } else if (now - p.stopped_since > timeout_) {
        fails.emplace_back(
            r, Status(Errc::timeout, who +
                                         " has been stopped (by a signal or a debugger) for more than "
                                         "STRATA_TIMEOUT=" +
                                         std::to_string(timeout_.count()) + " ms; declared dead (seen by rank " +
                                         std::to_string(rank_) + ")"));
      }
    } else {
      p.stopped = false;
    }
  }
  live_busy_.clear(std::memory_order_release);
  for (auto& f : fails) fail_peer(f.first, f.second);
}

std::size_t ShmBackend::progress() {
  if (served_.empty()) return 0;
  if ((live_calls_.fetch_add(1, std::memory_order_relaxed) & 63U) == 0) check_liveness();
  // Whoever polls disarms the wake-up (peers stop sending datagrams). The
  // datagrams already queued are drained by the sleeper after its poll (here
  // in wait_for_event(), or by the router), so polling needs no system call.
  if (hdr_->sleeping.load(std::memory_order_relaxed) != 0) hdr_->sleeping.store(0, std::memory_order_relaxed);
  std::vector<Completion> done;
  std::size_t events = 0;
  const std::size_t n = served_.size();
  const std::size_t start = rr_.fetch_add(1, std::memory_order_relaxed) % n;
  Clock::time_point now{};
  bool have_now = false;
  for (std::size_t i = 0; i < n; ++i) {
    Peer& p = *peers_[static_cast<std::size_t>(served_[(start + i) % n])];
    events += consume(p, done);
    if (p.busy.load(std::memory_order_relaxed)) events += service_outgoing(p, done, now, have_now);
  }
  if (cq_size_.load(std::memory_order_acquire) != 0 && completion_.get() != nullptr) {
    std::vector<Completion> local;
    {
      std::lock_guard<std::mutex> g(cq_mu_);
      local.swap(cq_);
      cq_size_.store(0, std::memory_order_release);
    }
    for (auto& c : local) done.push_back(std::move(c));
  }
  events += done.size();
  deliver(done);
  return events;
}

bool ShmBackend::prepare_wait() {
  if (served_.empty()) return true;
  check_liveness();  // about to sleep: a peer that stopped must still be noticed
  hdr_->sleeping.store(1, std::memory_order_seq_cst);
  bool work = cq_size_.load(std::memory_order_seq_cst) != 0;
  for (std::size_t i = 0; i < served_.size() && !work; ++i) {
    Peer& p = *peers_[static_cast<std::size_t>(served_[i])];
    if (p.in.has_data()) work = true;
    if (p.busy.load(std::memory_order_relaxed)) {
      std::unique_lock<SpinLock> g(p.prod_mu, std::try_to_lock);
      if (!g.owns_lock()) {
        work = true;  // someone is working on it; do not sleep on a stale view
      } else {
        const std::uint64_t head = p.out.consumed();
        if (!p.inflight.empty() && p.inflight.front().end <= head) work = true;
        if (!p.pending.empty() && head != p.seen_head) work = true;
      }
    }
  }
  if (work) hdr_->sleeping.store(0, std::memory_order_relaxed);
  return !work;
}

void ShmBackend::wait_for_event(std::chrono::microseconds timeout) {
  if (served_.empty() || !prepare_wait()) return;
  pollfd pfd{sock_, POLLIN, 0};
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout + std::chrono::microseconds(999));
  if (::poll(&pfd, 1, static_cast<int>(std::min<std::int64_t>(ms.count(), 1 << 30))) > 0) {
    char buf[64];
    while (::recv(sock_, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
    }
  }
}

// ----------------------------------------------------------------- failure

void ShmBackend::drain(Peer& p, const Status& why, std::vector<Completion>& out) {
  for (auto& f : p.inflight) out.push_back({f.context, why});
  for (auto& o : p.pending) {
    if (o.user) out.push_back({o.context, why});
  }
  for (auto& r : p.requests) out.push_back({r.context, why});
  p.inflight.clear();
  p.pending.clear();
  p.requests.clear();
  p.busy.store(false, std::memory_order_relaxed);
  p.was_busy = false;
}

void ShmBackend::fail_peer(int peer, const Status& why) {
  if (peer < 0 || peer >= size_ || peers_[static_cast<std::size_t>(peer)] == nullptr) return;
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  const Status st = why.is_ok() ? Status(Errc::peer_dead, "peer rank " + std::to_string(peer) + " failed") : why;
  std::vector<Completion> out;
  {
    std::lock_guard<SpinLock> g(p.prod_mu);
    if (p.dead.load(std::memory_order_relaxed)) return;
    {
      std::lock_guard<std::mutex> s(p.status_mu);
      p.status = st;
    }
    p.dead.store(true, std::memory_order_release);
    drain(p, st, out);
  }
  for (auto& c : out) push_completion(c.context, std::move(c.status));
  regions_->answered(peer, 0);  // a dead peer maps nothing: its regions' names may go
  if (const PeerFailureHandler* h = failure_.get()) (*h)(peer, st);
}

Status ShmBackend::peer_status(int peer) const {
  if (peer < 0 || peer >= size_ || peers_[static_cast<std::size_t>(peer)] == nullptr) {
    return {Errc::unknown_peer, "peer_status: peer " + std::to_string(peer) +
                                    " is not served by the shm backend of rank " + std::to_string(rank_)};
  }
  const Peer& p = *peers_[static_cast<std::size_t>(peer)];
  if (p.dead.load(std::memory_order_acquire)) return dead_status(p);
  return {};
}

void ShmBackend::shutdown() {
  if (shut_.exchange(true)) return;
  const Status why(Errc::shutdown, "transport of rank " + std::to_string(rank_) + " shut down");
  for (int r : served_) {
    Peer& p = *peers_[static_cast<std::size_t>(r)];
    std::vector<Completion> out;
    {
      std::lock_guard<SpinLock> g(p.prod_mu);
      // Keep internal replies (peers' gets and fetch_adds) flowing; fail ours.
      std::deque<OutOp> keep;
      for (auto& o : p.pending) {
        if (o.user) {
          out.push_back({o.context, why});
        } else if (o.type != RecType::get_req && o.type != RecType::fadd_req) {
          keep.push_back(o);
        }
      }
      p.pending.swap(keep);
      for (auto& f : p.inflight) out.push_back({f.context, why});
      for (auto& q : p.requests) out.push_back({q.context, why});
      p.inflight.clear();
      p.requests.clear();
    }
    for (auto& c : out) push_completion(c.context, std::move(c.status));
  }
}

}  // namespace

std::unique_ptr<Backend> make_shm_backend(Bootstrap& boot, const Hierarchy& hier, const std::vector<bool>& serve,
                                          const TransportOptions& opts) {
  return std::make_unique<ShmBackend>(boot, hier, serve, opts);
}

}  // namespace strata::transport::detail
