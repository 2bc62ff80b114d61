// Transport: one-sided RMA with remote signals.
//
// Every cross-rank edge of a collective DAG becomes one operation here. The
// interface is small on purpose: the executor (dag/) talks only to it, a fake
// in-process implementation drives deterministic tests, and the real
// implementations are a router that sends each peer to the shared-memory
// backend (same virtual host) or the libfabric backend (other hosts).
//
// Semantics (docs/transport.md has the full text):
//  - Posting (put/get/...) is thread-safe and non-blocking. A non-OK Status
//    from a post means the operation was rejected before touching any memory
//    (bad peer, unregistered range, shutdown); no completion follows.
//  - An accepted operation produces exactly one completion, delivered to the
//    completion handler with the operation's context, with OK or an error
//    (peer dead, timeout, provider error), from the progress context.
//  - put: at completion the source buffer may be reused AND the data is
//    visible at the target (delivery complete, not just injected).
//  - put_with_signal: the data is visible at the target before the signal
//    handler runs there.
//  - Signals from one source to one target are delivered in posting order,
//    exactly once, never dropped (they are queued if the target's handler is
//    not yet installed).
//  - get: at completion the data is in the local buffer.
//  - fetch_add: atomic with respect to other fetch_adds on the same word.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/error.hpp"

namespace strata {
class Bootstrap;
class Hierarchy;

namespace transport {

/// @brief A remote-accessible description of a registered buffer: plain old
/// data, sent to peers as bytes. Each backend fills its own section.
struct RemoteKey {
  std::int32_t owner = -1;  ///< rank that registered the buffer
  std::uint32_t flags = 0;  ///< kShm | kFabric: which sections are valid
  std::uint64_t addr = 0;   ///< virtual address in the owner
  std::uint64_t len = 0;    ///< registered length in bytes
  // shared-memory section (same-host peers)
  std::int64_t shm_pid = 0;     ///< owner's pid (single-copy CMA access)
  std::uint64_t shm_token = 0;  ///< owner-defined id of the registration
  // libfabric section (remote peers)
  std::uint64_t fi_key = 0;   ///< fi_mr_key
  std::uint64_t fi_base = 0;  ///< address base for offsets (0 with FI_MR_VIRT_ADDR... see docs)
  std::uint64_t reserved = 0;

  static constexpr std::uint32_t kShm = 1u;
  static constexpr std::uint32_t kFabric = 2u;
  /// Shared-memory section: the buffer lies in a SharedRegion that same-host
  /// peers map (single-copy puts/gets); shm_token = region id, reserved = region base.
  static constexpr std::uint32_t kShmMapped = 4u;
  [[nodiscard]] bool valid() const noexcept { return owner >= 0; }
};
static_assert(sizeof(RemoteKey) == 64, "RemoteKey is a fixed 64-byte wire format");

/// Called once per accepted operation, from the progress context.
using CompletionHandler = std::function<void(void* context, const Status& status)>;
/// Called once per delivered signal on the target, from its progress context.
using SignalHandler = std::function<void(int source, std::uint64_t payload)>;
/// Called when a peer is declared dead (launcher report, timeout, provider error).
using PeerFailureHandler = std::function<void(int peer, const Status& why)>;

/// @brief Memory that same-host peers can load from and store to directly once
/// it is registered: a put or get into it is one memcpy by the initiator
/// instead of a hand-off through the owner's ring (docs/transport.md, "Mapped
/// regions"). Zeroed at allocation; unmapped when destroyed, also after the
/// transport is gone. Its shared-memory name is removed as soon as every peer
/// named at allocation mapped it (or died), at the latest when it is destroyed.
struct SharedRegion {
  void* addr = nullptr;
  std::size_t len = 0;
  std::function<void()> release;  ///< run once by the destructor
  /// Set by the owner when the peers hold no lasting pointer into the region
  /// (Engine::allocate): release() then tells them to unmap it (shm:
  /// region_unmap records). Communicator windows leave it false: each member
  /// unmaps its peers' windows itself (Transport::unmap_peer) when it frees
  /// the communicator, since its fast path points into them until then.
  bool notify_peers = false;
  /// True once the name is gone (nothing of the region can outlive the job);
  /// empty when the region never had a name. Progress on the peers moves it.
  std::function<bool()> settled;
  [[nodiscard]] bool is_settled() const { return !settled || settled(); }
  SharedRegion() = default;
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;
  ~SharedRegion() {
    if (release) release();
  }
};

/// @brief Region handles (Transport::read_peer): bit 63, the region's id
/// (RemoteKey::shm_token) in bits 40-62, the offset into the region in bits
/// 0-39. Ids of a rank's regions are never reused, so a handle cannot name a
/// freed region's successor (a plain address can).
inline constexpr std::uint64_t kRegionHandleBit = std::uint64_t{1} << 63;
inline constexpr std::uint64_t kRegionOffsetBits = 40;
/// @brief The handle of @p addr inside the shared region of @p key (from
/// Transport::shared_key), or 0 when the id or the offset does not fit.
inline std::uint64_t region_handle(const RemoteKey& key, std::uint64_t addr) noexcept {
  const std::uint64_t off = addr - key.reserved;
  if (addr < key.reserved || off >= (std::uint64_t{1} << kRegionOffsetBits) ||
      key.shm_token >= (std::uint64_t{1} << (63 - kRegionOffsetBits)))
    return 0;
  return kRegionHandleBit | key.shm_token << kRegionOffsetBits | off;
}

/// @brief One-sided RMA with remote signals; see the file comment for semantics.
class Transport {
 public:
  virtual ~Transport() = default;

  [[nodiscard]] virtual int rank() const noexcept = 0;
  [[nodiscard]] virtual int size() const noexcept = 0;
  /// Backend name and provider, e.g. "router(shm+ofi:tcp;ofi_rxm)".
  [[nodiscard]] virtual std::string name() const = 0;

  /// Handlers must be installed before the first operation is posted.
  virtual void set_completion_handler(CompletionHandler h) = 0;
  virtual void set_signal_handler(SignalHandler h) = 0;
  virtual void set_peer_failure_handler(PeerFailureHandler h) = 0;

  /// Registers [addr, addr+len) for remote access (cached: registering the
  /// same range again is free; a sub-range of a registered range reuses it).
  virtual Status register_memory(void* addr, std::size_t len, RemoteKey* key) = 0;
  /// Drops registrations overlapping [addr, addr+len) (call before freeing).
  virtual Status deregister_memory(void* addr, std::size_t len) = 0;
  /// Allocates @p len zeroed bytes that the same-host ranks among @p peers map
  /// at once (register the region, or a part of it, to hand out keys); the
  /// name is removed when they all mapped it (SharedRegion::is_settled), so
  /// other ranks reach it through the owner's ring. nullptr when no rank of
  /// @p peers is a same-host peer or memory cannot be shared: the caller
  /// allocates privately.
  virtual std::unique_ptr<SharedRegion> allocate_shared(std::size_t len, const std::vector<int>& peers) {
    (void)len;
    (void)peers;
    return nullptr;
  }

  /// Key of this rank's [@p addr, @p addr + @p len) when the range lies in a
  /// live SharedRegion of this transport (RemoteKey::kShmMapped: same-host
  /// peers reach it with map_peer()); false otherwise. No registration, no
  /// side effects: cheap enough per call (engine: Engine::allocate buffers).
  virtual bool shared_key(const void* addr, std::size_t len, RemoteKey* key) {
    (void)addr;
    (void)len;
    (void)key;
    return false;
  }

  /// Address through which this process may load from and store to
  /// [@p offset, @p offset + @p len) of @p peer's registered memory @p key
  /// directly: only for a same-host peer whose key lies in a SharedRegion
  /// (RemoteKey::kShmMapped); nullptr otherwise. Valid until shutdown(). Used
  /// by the engine's small-message fast path (docs/algorithms.md).
  virtual void* map_peer(int peer, const RemoteKey& key, std::uint64_t offset, std::size_t len) {
    (void)peer;
    (void)key;
    (void)offset;
    (void)len;
    return nullptr;
  }
  /// Whether read_peer() can reach @p peer's ordinary (unregistered) memory:
  /// a same-host peer whose memory this process may read through CMA
  /// (process_vm_readv; probed at start-up), or this rank itself.
  [[nodiscard]] virtual bool can_read_peer(int peer) const {
    (void)peer;
    return false;
  }
  /// Single copy out of a peer's ordinary memory: copies [@p addr, @p addr +
  /// @p len) of @p peer's address space into @p dst, synchronously, in the
  /// calling thread (CMA: one process_vm_readv system call per contiguous
  /// piece; the kernel copies once, no staging; a range inside a shared
  /// region of the peer's that this process maps, such as Engine::allocate
  /// memory: one memcpy out of the mapping). The caller makes sure the
  /// peer keeps the range valid until the call returns (the single-copy
  /// collectives' publication and reads-done flags, docs/algorithms.md).
  /// Errors name the peer and this rank: Errc::unsupported where
  /// can_read_peer(peer) is false, Errc::peer_dead when it is gone.
  ///
  /// @p addr may instead be a region handle (region_handle(): bit 63 set,
  /// never a user-space address): bytes of a shared region of @p peer's by
  /// its id, read out of this process's mapping of it; Errc::unsupported when
  /// this process does not map it (then the caller reads the plain address).
  virtual Status read_peer(int peer, void* dst, std::uint64_t addr, std::size_t len) {
    (void)dst;
    (void)addr;
    (void)len;
    return {Errc::unsupported, "read_peer: rank " + std::to_string(peer) + " cannot be read directly from rank " +
                                   std::to_string(rank()) + " (no CMA path)"};
  }
  /// Single copy into a peer's ordinary memory, the mirror of read_peer():
  /// copies @p len bytes at @p src into [@p addr, @p addr + @p len) of @p
  /// peer's address space, synchronously, in the calling thread (CMA: one
  /// process_vm_writev system call per contiguous piece). Available where
  /// can_read_peer(peer) is (the kernel checks the same access for both
  /// directions). The caller makes sure the peer keeps the range valid and
  /// does not read it until told (the split broadcast's publication and
  /// writes-done flags, docs/algorithms.md). @p addr is a plain address, never
  /// a region handle. Errors name the peer and this rank: Errc::unsupported
  /// without a CMA path, Errc::peer_dead when the peer is gone.
  virtual Status write_peer(int peer, const void* src, std::uint64_t addr, std::size_t len) {
    (void)src;
    (void)addr;
    (void)len;
    return {Errc::unsupported, "write_peer: rank " + std::to_string(peer) + " cannot be written directly from rank " +
                                   std::to_string(rank()) + " (no CMA path)"};
  }
  /// The bytes [handle, handle + @p len) of @p peer's shared region named by
  /// region handle @p handle (region_handle()) as mapped in this process, or
  /// nullptr when it is not mapped here (then read_peer() the plain address).
  /// Valid while the owner keeps its region (the caller's protocol).
  [[nodiscard]] virtual const void* mapped_peer(int peer, std::uint64_t handle, std::size_t len) {
    (void)peer;
    (void)handle;
    (void)len;
    return nullptr;
  }
  /// Extra work that every progress() call runs after the backends (progress
  /// servers, waiters, inline mode); returns the events it handled. Set before
  /// progress() can run concurrently (before the progress servers start).
  /// Releases this process's mapping of @p peer's region named by @p key
  /// (from map_peer); later map_peer calls on it may fail. No-op by default.
  virtual void unmap_peer(int peer, const RemoteKey& key) {
    (void)peer;
    (void)key;
  }
  virtual void set_progress_hook(std::function<std::size_t()> hook) { (void)hook; }

  virtual Status put(int peer, const void* src, std::size_t len, const RemoteKey& dst, std::uint64_t dst_offset,
                     void* context) = 0;
  virtual Status get(int peer, void* dst, std::size_t len, const RemoteKey& src, std::uint64_t src_offset,
                     void* context) = 0;
  virtual Status put_with_signal(int peer, const void* src, std::size_t len, const RemoteKey& dst,
                                 std::uint64_t dst_offset, std::uint64_t signal, void* context) = 0;
  virtual Status signal(int peer, std::uint64_t payload, void* context) = 0;
  virtual Status fetch_add(int peer, const RemoteKey& dst, std::uint64_t dst_offset, std::uint64_t addend,
                           std::uint64_t* fetched, void* context) = 0;

  /// Polls once: completions, incoming signals, queued injections, peer
  /// liveness. Returns the number of events handled. Thread-safe.
  virtual std::size_t progress() = 0;
  /// Blocks until an event may be ready, wake() is called or @p timeout passes.
  virtual void wait_for_event(std::chrono::microseconds timeout) = 0;
  /// Interrupts wait_for_event (from any thread).
  virtual void wake() = 0;
  /// As wait_for_event(), but also returns when @p fd (an eventfd of the
  /// caller's) becomes readable; @p fd is not read. Lets a thread that waits
  /// for a future sleep on the transport's own descriptors, so that an
  /// arriving message wakes it directly instead of through a progress server
  /// (one wake-up instead of two). Thread-safe: a progress server may wait at
  /// the same time. Returns false (at once) when unsupported.
  virtual bool wait_for_event_or(int fd, std::chrono::microseconds timeout) {
    (void)fd;
    (void)timeout;
    return false;
  }

  /// OK while @p peer is alive; the failure cause otherwise.
  [[nodiscard]] virtual Status peer_status(int peer) const = 0;
  /// Declares @p peer dead for a reason found outside the transport (the
  /// engine's heartbeats): every operation to it fails with @p why and the
  /// peer failure handler runs, as when the transport finds it dead itself.
  /// Default: nothing (transports without failure handling).
  virtual void declare_dead(int peer, const Status& why) {
    (void)peer;
    (void)why;
  }
  /// Stops accepting operations; in-flight ones complete with Errc::shutdown.
  virtual void shutdown() = 0;
};

/// @brief Options of the real transport (environment: see docs/environment.md).
struct TransportOptions {
  std::string intra = "shm";  ///< STRATA_INTRA: shm | fabric
  std::string provider;       ///< STRATA_PROVIDER: fi_getinfo provider name, empty = auto
  /// Automatic selection only (provider empty): this provider first when
  /// the machine has it, else the usual order (the tuning table's
  /// `fabric_prefer_net`: "net"). Never an error when absent.
  std::string prefer_provider;
  std::chrono::milliseconds timeout{30000};  ///< STRATA_TIMEOUT (ms): declare a silent peer dead
  std::size_t cma_threshold = 0;        ///< STRATA_CMA_THRESHOLD: bytes from which single-copy is used (0 = built-in)
  std::size_t mr_cache_entries = 1024;  ///< STRATA_MR_CACHE: bound of the registration cache
  /// Reads the STRATA_* environment over the defaults; throws strata::Error naming the variable.
  static TransportOptions from_environment();
};

/// @brief Creates the routed transport of this rank (collective over @p boot:
/// every rank must call it).
std::unique_ptr<Transport> make_transport(Bootstrap& boot, const Hierarchy& hier,
                                          const TransportOptions& opts = TransportOptions::from_environment());

}  // namespace transport
}  // namespace strata
