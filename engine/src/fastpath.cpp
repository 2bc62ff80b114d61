// The small-message fast path; the protocol is described in fastpath.hpp and
// docs/algorithms.md ("Fast path").
#include "fastpath.hpp"

#include <sched.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "strata/dag/executor.hpp"
#include "strata/detail/cpu.hpp"
#include "strata/detail/env.hpp"
#include "strata/detail/log.hpp"

namespace strata::detail {

namespace {

// Area layout: [0, 64) done; [64, 128) sleepers + inline flag + want; then `slots`
// entries of `stride` bytes: sequence word (call index + 1), bytes, data.
constexpr std::size_t kDoneOff = 0;
constexpr std::size_t kSleepOff = 64;
constexpr std::size_t kInlineOff = 68;
constexpr std::size_t kWantOff = 72;  // done count the queued calls wait for (0: none)
constexpr std::size_t kSlotsOff = 128;
constexpr std::size_t kEntryHeader = 16;

// blocker_k_ flag: the head call is queued and waits for the blocker's done count.
constexpr std::uint64_t kDoneWait = std::uint64_t{1} << 63;

// Longest waiter spin that a large direct call asks for (microseconds).
constexpr std::size_t kDirectSpinCapUs = 2000;

// An entry holds up to cap bytes of data, or (direct mode) one RemoteKey.
std::size_t stride_for(std::size_t cap) {
  return (kEntryHeader + std::max(cap, sizeof(transport::RemoteKey)) + 63) / 64 * 64;
}

std::uint64_t coarse_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

template <class T>
std::atomic<T>& atomic_at(std::byte* p) noexcept {
  static_assert(sizeof(std::atomic<T>) == sizeof(T) && std::atomic<T>::is_always_lock_free);
  return *reinterpret_cast<std::atomic<T>*>(p);
}

}  // namespace

const FastConfig& FastConfig::get() {
  static const FastConfig cfg = [] {
    FastConfig c;
    if (const char* e = strata::detail::env::get("STRATA_FASTPATH")) {
      const std::string v = e;
      if (v == "off" || v == "0") {
        c.enabled = false;
      } else if (v != "on" && v != "1" && !v.empty()) {
        throw Error(Errc::invalid_argument, "STRATA_FASTPATH='" + v + "': expected on or off");
      }
    }
    if (const char* e = strata::detail::env::get("STRATA_FASTPATH_BYTES")) {
      char* end = nullptr;
      const long long b = std::strtoll(e, &end, 10);
      if (end == e || *end != '\0' || b < 0 || b > (1 << 20))
        throw Error(Errc::invalid_argument,
                    std::string("STRATA_FASTPATH_BYTES='") + e + "': expected bytes in [0, 1048576]");
      c.bytes = static_cast<std::size_t>(b);
      c.bytes_from_env = true;
    }
    return c;
  }();
  return cfg;
}

std::size_t fast_area_bytes(const FastConfig& cfg) {
  return kSlotsOff + static_cast<std::size_t>(cfg.slots) * stride_for(cfg.bytes);
}

FastChannel::FastChannel(transport::Transport& t, transport::ProgressServer* servers,
                         std::shared_ptr<FutureContext> base, std::uint16_t comm_id, int me, std::vector<int> world,
                         std::vector<std::byte*> areas, const FastConfig& cfg)
    : t_(t),
      servers_(servers),
      ctx_(std::make_shared<FutureContext>()),
      id_(comm_id),
      me_(me),
      n_(static_cast<int>(world.size())),
      world_(std::move(world)),
      areas_(std::move(areas)),
      cap_(cfg.bytes),
      slots_(static_cast<std::uint64_t>(cfg.slots)),
      stride_(stride_for(cfg.bytes)) {
  const bool inline_mode = servers_ == nullptr || servers_->inline_mode();
  atomic_at<std::uint32_t>(areas_[static_cast<std::size_t>(me_)] + kInlineOff)
      .store(inline_mode ? 1u : 0u, std::memory_order_release);
  ctx_->arena = base ? base->arena : nullptr;
  if (inline_mode && base) {
    ctx_->progress = base->progress;
    ctx_->idle_spins = base->idle_spins;
  }
  if (!inline_mode && base) ctx_->block = base->block;  // sleep on the transport (FutureContext::block)
  // Usable while the engine's context is (cleared at shutdown); never written after.
  ctx_->live = base ? base->live : nullptr;
  ready_ = std::make_shared<detail::State<void>>(ctx_);
  ready_->complete(Status(), [] {});
}

std::shared_ptr<FastChannel> FastChannel::create(transport::Transport& t, transport::ProgressServer* servers,
                                                 std::shared_ptr<FutureContext> base, std::shared_ptr<HookGuard> guard,
                                                 std::uint16_t comm_id, int me, std::vector<int> world,
                                                 std::vector<std::byte*> areas, const FastConfig& cfg) {
  std::shared_ptr<FastChannel> ch(
      new FastChannel(t, servers, std::move(base), comm_id, me, std::move(world), std::move(areas), cfg));
  std::weak_ptr<FastChannel> weak = ch;
  if (servers != nullptr && !servers->inline_mode()) {
    // A waiter polls this channel (and the transport) during the servers'
    // wait spin; each round of it (one transport poll, one clock read) looks
    // at the channel many times: the answer is one cache line away.
    ch->ctx_->spin = [weak, servers, guard](const std::function<bool()>& done) {
      if (guard && !guard->enter()) return done();
      struct Leave {
        HookGuard* g;
        ~Leave() {
          if (g) g->leave();
        }
      } leave{guard.get()};
      std::shared_ptr<FastChannel> c = weak.lock();
      if (!c) return done();
      // A large single-copy call lasts longer than the usual spin budget:
      // waking a parked thread on a halted core costs more than the copy.
      // (STRATA_PROGRESS_WAIT_SPIN=0 still means: never spin.)
      const auto spin = servers->options().wait_spin;
      const auto budget = spin.count() <= 0 ? spin : std::max(spin, c->direct_spin());
      return servers->spin_until(
          [&] {
            for (int i = 0; i < 64; ++i) {
              c->poll();
              if (done()) return true;
              strata::detail::cpu_relax();
            }
            return false;
          },
          budget);
    };
  }
  // A waiter about to block counts itself in the shared sleeper word, then
  // looks once more (Dekker with the poster's sequence word): a member that
  // arrives later sees the count and nudges this rank's progress servers.
  ch->ctx_->park = [weak, guard](bool parking) {
    if (guard && !guard->enter()) return;
    struct Leave {
      HookGuard* g;
      ~Leave() {
        if (g) g->leave();
      }
    } leave{guard.get()};
    std::shared_ptr<FastChannel> c = weak.lock();
    if (!c) return;
    const std::shared_ptr<void> owner = c->owner_.lock();  // the areas live in its window
    if (!owner) return;
    auto& sl = c->sleepers_of(c->me_);
    if (parking) {
      sl.fetch_add(1, std::memory_order_seq_cst);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      c->poll();
    } else {
      sl.fetch_sub(1, std::memory_order_acq_rel);
    }
  };
  return ch;
}

std::atomic<std::uint64_t>& FastChannel::done_of(int r) const noexcept {
  return atomic_at<std::uint64_t>(areas_[static_cast<std::size_t>(r)] + kDoneOff);
}
std::atomic<std::uint32_t>& FastChannel::sleepers_of(int r) const noexcept {
  return atomic_at<std::uint32_t>(areas_[static_cast<std::size_t>(r)] + kSleepOff);
}
std::atomic<std::uint64_t>& FastChannel::want_of(int r) const noexcept {
  return atomic_at<std::uint64_t>(areas_[static_cast<std::size_t>(r)] + kWantOff);
}
std::atomic<std::uint64_t>& FastChannel::seq_of(int r, std::uint64_t k) const noexcept {
  return atomic_at<std::uint64_t>(areas_[static_cast<std::size_t>(r)] + kSlotsOff + (k % slots_) * stride_);
}
std::byte* FastChannel::data_of(int r, std::uint64_t k) const noexcept {
  return areas_[static_cast<std::size_t>(r)] + kSlotsOff + (k % slots_) * stride_ + kEntryHeader;
}

void FastChannel::nudge(int r) {
  (void)t_.signal(world_[static_cast<std::size_t>(r)], std::uint64_t{kFastNudgeComm} << 48, fast_nudge_context());
}

Status FastChannel::peer_dead(coll::Kind k, int r) const {
  const int wr = world_[static_cast<std::size_t>(r)];
  const Status st = t_.peer_status(wr);
  if (st.is_ok()) return {};
  return {Errc::peer_dead, where(k) + ": rank " + std::to_string(r) + " (world rank " + std::to_string(wr) +
                               ") failed: " + st.message()};
}

std::string FastChannel::where(coll::Kind k) const {
  return std::string(coll::to_string(k)) + " on rank " + std::to_string(me_) + " (comm " + std::to_string(id_) +
         ", fast path)";
}

namespace {
std::size_t esize_of(const coll::Call& c) noexcept {
  return c.user_op ? c.user_op->elem_size : dag::datatype_size(c.dtype);
}
}  // namespace

std::size_t FastChannel::publish_bytes(const coll::Call& c) const noexcept {
  const std::size_t b = c.count * esize_of(c);
  const auto n = static_cast<std::size_t>(n_);
  switch (c.kind) {
    case coll::Kind::barrier:
      return 0;
    case coll::Kind::broadcast:
    case coll::Kind::reduce:
    case coll::Kind::allreduce:
    case coll::Kind::gather:
    case coll::Kind::allgather:
      return b;
    case coll::Kind::scatter:
    case coll::Kind::alltoall:
    case coll::Kind::reduce_scatter_block:
      return b * n;
    default:
      return ~std::size_t{0};
  }
}

bool FastChannel::takes(const coll::Call& c) const noexcept {
  if (!c.fast_ok || c.on_block || c.entry_all || c.exit_all) return false;
  if (c.count > (std::size_t{1} << 30)) return false;  // no overflow in publish_bytes
  // A limit of 0 turns the ring entries off (barriers and empty calls too).
  return (cap_ > 0 && publish_bytes(c) <= cap_) || direct(c);
}

bool FastChannel::direct(const coll::Call& c) const noexcept {
  if (!c.shared_buffers || !c.fast_ok || c.count > (std::size_t{1} << 30) || publish_bytes(c) <= cap_) return false;
  // Every kind the direct mode took runs as a single-copy plan that reads
  // through the mappings (collectives/src/compile_single_copy.cpp), as fast
  // or faster (docs/performance.md, "One engine"): the direct mode is only
  // for a ring that was asked for (STRATA_FASTPATH_BYTES > 0).
  if (cap_ == 0) return false;
  switch (c.kind) {
    case coll::Kind::broadcast:
    case coll::Kind::scatter:
    case coll::Kind::gather:
    case coll::Kind::allgather:
      return true;
    case coll::Kind::alltoall:
    case coll::Kind::reduce_scatter_block:
      return !c.in_place;  // in place, the owners would overwrite what the peers read
    default:
      return false;
  }
}

bool FastChannel::needs(const Op& op, int r) const noexcept {
  switch (op.kind) {
    case coll::Kind::broadcast:
    case coll::Kind::scatter:
      return me_ != op.root && r == op.root;
    case coll::Kind::reduce:
    case coll::Kind::gather:
      return me_ == op.root;
    default:
      return true;  // barrier, allreduce, allgather, alltoall, reduce_scatter_block
  }
}

std::pair<const void*, std::size_t> FastChannel::contribution(const Op& op) const {
  const std::size_t b = op.count * op.esize;
  const auto n = static_cast<std::size_t>(n_);
  const void* src = nullptr;
  std::size_t len = 0;
  switch (op.kind) {
    case coll::Kind::barrier:
      break;
    case coll::Kind::broadcast:
      if (me_ == op.root) src = op.send, len = b;
      break;
    case coll::Kind::reduce:
    case coll::Kind::allreduce:
      src = op.in_place ? op.recv : op.send, len = b;
      break;
    case coll::Kind::gather:
      if (!op.in_place) src = op.send, len = b;  // in place: the root's block stays in recv
      break;
    case coll::Kind::scatter:
      if (me_ == op.root) src = op.send, len = b * n;
      break;
    case coll::Kind::allgather:
      src = op.in_place ? static_cast<const std::byte*>(op.recv) + static_cast<std::size_t>(me_) * b : op.send, len = b;
      break;
    case coll::Kind::alltoall:
    case coll::Kind::reduce_scatter_block:
      src = op.in_place ? op.recv : op.send, len = b * n;
      break;
    default:
      break;
  }
  return {src, len};
}

void FastChannel::publish(Op& op) {
  std::byte* dst = data_of(me_, op.k);
  const auto [src, len] = contribution(op);
  if (op.direct) {
    // The key of the buffer itself: mapped by the peers when it lies in a
    // shared region (Engine::allocate), else reached through CMA (pid, address).
    transport::RemoteKey key;
    if (len == 0 || !t_.shared_key(src, len, &key)) {
      key = transport::RemoteKey{};
      key.owner = world_[static_cast<std::size_t>(me_)];
      key.addr = reinterpret_cast<std::uintptr_t>(src);
      key.len = len;
      key.shm_pid = ::getpid();
    }
    std::memcpy(dst, &key, sizeof key);
  } else if (len > 0) {
    std::memcpy(dst, src, len);
  }
  atomic_at<std::uint64_t>(dst - kEntryHeader + 8).store(len, std::memory_order_relaxed);
  seq_of(me_, op.k).store(op.k + 1, std::memory_order_release);
  op.own = static_cast<const std::byte*>(src);
  op.posted = true;
}

bool FastChannel::entry_free(std::uint64_t k) const noexcept {
  if (k < slots_) return true;
  const std::uint64_t need = k - slots_ + 1;
  for (int r = 0; r < n_; ++r)
    if (done_of(r).load(std::memory_order_acquire) < need) return false;
  return true;
}

std::size_t FastChannel::post_queued_locked() {
  std::size_t posted = 0;
  while (nqueued_ > 0) {
    Op& op = ops_[ops_.size() - nqueued_];
    if (!entry_free(op.k)) {
      // Publish what we wait for, then look again (Dekker with nudge_wanting).
      auto& want = want_of(me_);
      const std::uint64_t need = op.k - slots_ + 1;
      if (want.load(std::memory_order_relaxed) != need) want.store(need, std::memory_order_seq_cst);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (!entry_free(op.k)) break;
    }
    publish(op);
    --nqueued_;
    ++posted;
    if (n_ > 1) nudge_sleepers(op);
  }
  if (nqueued_ == 0 && posted > 0) want_of(me_).store(0, std::memory_order_relaxed);
  return posted;
}

void FastChannel::nudge_wanting(std::uint64_t done) {
  // Our done count is out; a member that published its want before this
  // fence is seen here, one publishing after sees our done (post_queued_locked).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (int r = 0; r < n_; ++r) {
    if (r == me_) continue;
    const std::uint64_t w = want_of(r).load(std::memory_order_acquire);
    if (w == 0 || w > done || sleepers_of(r).load(std::memory_order_acquire) == 0) continue;
    nudge(r);
  }
}

const std::byte* FastChannel::direct_source(const Op& op, int r, std::size_t off, std::size_t len,
                                            std::vector<std::byte>& tmp, Status& err) const {
  if (r == me_) return op.own + off;
  transport::RemoteKey key;
  std::memcpy(&key, data_of(r, op.k), sizeof key);
  const int wr = world_[static_cast<std::size_t>(r)];
  if (key.len < off || key.len - off < len) {
    err = {Errc::internal, where(op.kind) + ": rank " + std::to_string(r) + " published " + std::to_string(key.len) +
                               " bytes, " + std::to_string(off + len) + " needed (do the counts agree?)"};
    return nullptr;
  }
  if ((key.flags & transport::RemoteKey::kShmMapped) != 0) {
    if (void* p = t_.map_peer(wr, key, off, len)) return static_cast<const std::byte*>(p);
  }
  // Not in a region this process maps: single copy through the kernel.
  if (!cma_noted_.exchange(true, std::memory_order_relaxed))
    logger().info(
        "{}: rank {}'s buffer is not memory from Engine::allocate mapped here; reading it through CMA "
        "(slower; noted once per communicator)",
        where(op.kind), r);
  tmp.resize(len);
  std::size_t done = 0;
  while (done < len) {
    iovec l{tmp.data() + done, len - done};
    iovec rv{reinterpret_cast<void*>(key.addr + off + done), len - done};
    const ssize_t got = ::process_vm_readv(static_cast<pid_t>(key.shm_pid), &l, 1, &rv, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      err = {Errc::transport_error, where(op.kind) + ": cannot read rank " + std::to_string(r) + "'s buffer (" +
                                        (got < 0 ? std::string(std::strerror(errno)) : std::string("short read")) +
                                        "): pass buffers from Engine::allocate with shared_buffers"};
      return nullptr;
    }
    done += static_cast<std::size_t>(got);
  }
  return tmp.data();
}

bool FastChannel::reads_mine(const Op& op, int r) const noexcept {
  if (r == me_) return false;
  switch (op.kind) {
    case coll::Kind::broadcast:
    case coll::Kind::scatter:
      return me_ == op.root;
    case coll::Kind::gather:
      return r == op.root;
    default:
      return true;  // allgather, alltoall, reduce_scatter_block
  }
}

bool FastChannel::readers_done(const Op& op) const noexcept {
  for (int r = 0; r < n_; ++r)
    if (reads_mine(op, r) && done_of(r).load(std::memory_order_acquire) < op.k + 1) return false;
  return true;
}

void FastChannel::nudge_owners(const Op& op) {
  // Our done count is out (release); an owner that parked before it sees a
  // sleeper count we see after this fence, and one parking after sees our done.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (int r = 0; r < n_; ++r) {
    if (r == me_ || !needs(op, r)) continue;
    if (sleepers_of(r).load(std::memory_order_acquire) == 0) continue;
    nudge(r);
  }
}

Status FastChannel::user_op_error(const Op& op, const std::string& what) const {
  const std::string name = op.user && !op.user->name.empty() ? " '" + op.user->name + "'" : std::string();
  return {Errc::invalid_argument, where(op.kind) + ": argument 'op': user reduction" + name + " threw: " + what};
}

void FastChannel::run_locked(Op& op) {
  Status st;
  // A user reduction op may throw: the call fails (typed, named), the ring
  // goes on (this rank's done count still moves, so no member waits for it).
  try {
    st = finish(op);
  } catch (const std::exception& e) {
    st = user_op_error(op, e.what());
  } catch (...) {
    st = user_op_error(op, "an exception that is not a std::exception");
  }
  if (!st.is_ok()) op.error = std::make_shared<const Status>(st);
  done_of(me_).store(op.k + 1, std::memory_order_release);
  op.finished = true;
  if (n_ > 1) nudge_wanting(op.k + 1);
  if (op.direct && n_ > 1) nudge_owners(op);
}

Status FastChannel::finish(const Op& op) {
  const std::size_t b = op.count * op.esize;
  if (op.direct) {
    Status err;
    std::vector<std::byte> tmp;
    auto* out = static_cast<std::byte*>(op.recv);
    const std::size_t mine = static_cast<std::size_t>(me_) * b;
    // Copies block [off, off + b) of member r's buffer to dst (no-op onto itself).
    auto take = [&](int r, std::size_t off, std::byte* dst) {
      if (!err.is_ok() || b == 0) return;
      const std::byte* src = direct_source(op, r, off, b, tmp, err);
      if (src != nullptr && src != dst) std::memcpy(dst, src, b);
    };
    switch (op.kind) {
      case coll::Kind::broadcast:
        if (me_ != op.root) take(op.root, 0, out);
        break;
      case coll::Kind::scatter:
        if (!(me_ == op.root && op.in_place)) take(op.root, mine, out);
        break;
      case coll::Kind::gather:
        if (me_ == op.root)
          for (int r = 0; r < n_; ++r)
            if (r != me_ || !op.in_place) take(r, 0, out + static_cast<std::size_t>(r) * b);
        break;
      case coll::Kind::allgather:
        // The peers' blocks first (the own block is hot in this cache).
        for (int i = 1; i <= n_; ++i) {
          const int r = (me_ + i) % n_;
          take(r, 0, out + static_cast<std::size_t>(r) * b);
        }
        break;
      case coll::Kind::alltoall:
        for (int i = 1; i <= n_; ++i) {
          const int r = (me_ + i) % n_;
          take(r, mine, out + static_cast<std::size_t>(r) * b);
        }
        break;
      case coll::Kind::reduce_scatter_block:
        // Rank-ordered fold of every member's block `mine` into out.
        for (int r = 0; r < n_ && err.is_ok() && b > 0; ++r) {
          const std::byte* x = direct_source(op, r, mine, b, tmp, err);
          if (x == nullptr) break;
          if (r == 0) {
            std::memcpy(out, x, b);
          } else if (op.user) {
            op.user->fn(out, x, out, op.count);
          } else {
            op.kernel(out, x, out, op.count);
          }
        }
        break;
      default:
        break;
    }
    return err;
  }
  const auto n = static_cast<std::size_t>(n_);
  auto* out = static_cast<std::byte*>(op.recv);
  const std::size_t mine = static_cast<std::size_t>(me_) * b;
  // Rank-ordered fold of block @p off of every member's entry into out.
  auto fold = [&](std::size_t off) {
    if (b == 0) return;
    if (n_ == 1) {
      std::memcpy(out, data_of(0, op.k) + off, b);
      return;
    }
    for (int r = 1; r < n_; ++r) {
      const void* a = r == 1 ? static_cast<const void*>(data_of(0, op.k) + off) : out;
      const void* x = data_of(r, op.k) + off;
      if (op.user)
        op.user->fn(a, x, out, op.count);
      else
        op.kernel(a, x, out, op.count);
    }
  };
  switch (op.kind) {
    case coll::Kind::broadcast:
      if (me_ != op.root && b > 0) std::memcpy(out, data_of(op.root, op.k), b);
      break;
    case coll::Kind::reduce:
      if (me_ == op.root) fold(0);
      break;
    case coll::Kind::allreduce:
      fold(0);
      break;
    case coll::Kind::reduce_scatter_block:
      fold(mine);
      break;
    case coll::Kind::gather:
      if (me_ == op.root && b > 0)
        for (int r = 0; r < n_; ++r)
          if (r != me_ || !op.in_place) std::memcpy(out + static_cast<std::size_t>(r) * b, data_of(r, op.k), b);
      break;
    case coll::Kind::scatter:
      if (b > 0 && !(me_ == op.root && op.in_place)) std::memcpy(out, data_of(op.root, op.k) + mine, b);
      break;
    case coll::Kind::allgather:
      if (b > 0)
        for (int r = 0; r < n_; ++r) std::memcpy(out + static_cast<std::size_t>(r) * b, data_of(r, op.k), b);
      break;
    case coll::Kind::alltoall:
      if (b > 0)
        for (int r = 0; r < n_; ++r) std::memcpy(out + static_cast<std::size_t>(r) * b, data_of(r, op.k) + mine, b);
      break;
    default:
      break;
  }
  (void)n;
  return {};
}

Status FastChannel::check_peers_locked(const Op& op) {
  for (int r = 0; r < n_; ++r) {
    if (r == me_) continue;
    if (!op.posted) {
      // Queued: waiting for every member to finish call k - slots.
      if (done_of(r).load(std::memory_order_acquire) >= op.k - slots_ + 1) continue;
    } else if (op.finished) {
      // Waiting for the readers of this rank's buffer.
      if (!reads_mine(op, r) || done_of(r).load(std::memory_order_acquire) >= op.k + 1) continue;
    } else if (!needs(op, r) || seq_of(r, op.k).load(std::memory_order_acquire) == op.k + 1) {
      continue;
    }
    const Status st = peer_dead(op.kind, r);
    if (!st.is_ok()) return st;
  }
  return {};
}

void FastChannel::fail_locked(const Status& why, std::vector<std::pair<Op, Status>>& out) {
  if (failed_.is_ok()) failed_ = why;
  for (Op& op : ops_) out.emplace_back(std::move(op), why);
  ops_.clear();
  nqueued_ = 0;
  want_of(me_).store(0, std::memory_order_relaxed);
  npending_.store(0, std::memory_order_release);
  ndirect_.store(0, std::memory_order_relaxed);
}

bool FastChannel::check_due() const noexcept {
  return coarse_ns() - last_check_ns_.load(std::memory_order_relaxed) >= 1000000;
}

std::size_t FastChannel::poll_locked(std::vector<Op>& out) {
  std::size_t done = 0;
  blocker_.store(-1, std::memory_order_relaxed);
  if (nqueued_ > 0) post_queued_locked();
  while (!ops_.empty()) {
    Op& op = ops_.front();
    if (!op.posted) {
      // Queued behind a busy entry (this rank's own calls are all complete):
      // wait for the first member still short of call k - slots.
      const std::uint64_t need = op.k - slots_ + 1;
      for (int r = 0; r < n_; ++r)
        if (done_of(r).load(std::memory_order_acquire) < need) {
          blocker_k_.store(need | kDoneWait, std::memory_order_relaxed);
          blocker_.store(r, std::memory_order_release);
          break;
        }
      break;
    }
    if (!op.finished) {
      int missing = -1;
      for (int r = 0; r < n_ && missing < 0; ++r)
        if (needs(op, r) && seq_of(r, op.k).load(std::memory_order_acquire) != op.k + 1) missing = r;
      if (missing >= 0) {
        blocker_k_.store(op.k, std::memory_order_relaxed);
        blocker_.store(missing, std::memory_order_release);
        break;
      }
      run_locked(op);
      // Our done count moved: entries of queued calls may be free now.
      if (nqueued_ > 0) post_queued_locked();
    }
    // Direct mode: this rank's buffer stays in use until its readers are done.
    if (op.direct && !readers_done(op)) break;
    out.push_back(std::move(op));
    ops_.pop_front();
    npending_.fetch_sub(1, std::memory_order_acq_rel);
    if (out.back().direct) ndirect_.fetch_sub(1, std::memory_order_relaxed);
    ++done;
  }
  return done;
}

std::size_t FastChannel::poll() {
  if (!pending()) return 0;
  // Lock-free look first: the member the head call waited for last time.
  const int r = blocker_.load(std::memory_order_acquire);
  if (r >= 0) {
    const std::uint64_t k = blocker_k_.load(std::memory_order_relaxed);
    // Still waiting: its entry of call k (or, for a queued call, its done count).
    const bool waiting = (k & kDoneWait) != 0 ? done_of(r).load(std::memory_order_acquire) < (k & ~kDoneWait)
                                              : seq_of(r, k).load(std::memory_order_acquire) != k + 1;
    // The dead-member check (a clock read) only every 256th look.
    thread_local std::uint32_t looks = 0;
    if (waiting && ((++looks & 255) != 0 || !check_due())) return 0;
  }
  std::vector<Op> ready;  // fulfilled (and their communicators released) after unlocking
  std::vector<std::pair<Op, Status>> failed;
  std::size_t n = 0;
  {
    std::unique_lock<std::mutex> lk(mu_, std::try_to_lock);
    if (!lk.owns_lock()) return 0;
    n = poll_locked(ready);
    if (!ops_.empty() && check_due()) {
      // The head call waits for somebody: look for dead members every millisecond.
      last_check_ns_.store(coarse_ns(), std::memory_order_relaxed);
      const Status st = check_peers_locked(ops_.front());
      if (!st.is_ok()) fail_locked(st, failed);
    }
  }
  settle(ready);
  settle_failed(failed);
  return n + failed.size();
}

void FastChannel::settle(std::vector<Op>& done) {
  for (auto& op : done) {
    if (tracer_ != nullptr) trace_done(op.kind, op.k, op.t0, !op.error);
    if (!op.error)
      op.promise->set_value();
    else
      op.promise->set_error(*op.error);
  }
}

void FastChannel::settle_failed(std::vector<std::pair<Op, Status>>& failed) {
  for (auto& f : failed) {
    if (tracer_ != nullptr) trace_done(f.first.kind, f.first.k, f.first.t0, false);
    f.first.promise->set_error(f.second);
  }
}

void FastChannel::trace_done(coll::Kind kind, std::uint64_t k, std::uint64_t t0, bool ok) {
  dag::Executor* ex = tracer_->load(std::memory_order_acquire);
  if (ex == nullptr) return;
  const std::uint64_t t1 = dag::Executor::trace_now_ns();
  // One name per kind (interned once); the call's number is the event's seq argument.
  ex->trace_event("fast", std::string(coll::to_string(kind)) + (ok ? " fast path" : " fast path (failed)"),
                  t0 != 0 ? t0 : t1, t1, static_cast<std::uint32_t>(k));
}

void FastChannel::fail(const Status& why) {
  std::vector<std::pair<Op, Status>> failed;
  {
    std::lock_guard<std::mutex> lk(mu_);
    fail_locked(why, failed);
  }
  settle_failed(failed);
}

bool FastChannel::ready_locked(const Op& op) const noexcept {
  for (int r = 0; r < n_; ++r)
    if (needs(op, r) && seq_of(r, op.k).load(std::memory_order_acquire) != op.k + 1) return false;
  return true;
}

void FastChannel::nudge_sleepers(const Op& op) {
  // Members that posted call k before us may wait for our entry: nudge the
  // ones with a blocked waiter (their progress servers may sleep).
  const std::uint64_t k = op.k;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (int r = 0; r < n_; ++r) {
    if (r == me_) continue;
    // Does r wait for our entry? (needs(), seen from r)
    if ((op.kind == coll::Kind::broadcast || op.kind == coll::Kind::scatter) && me_ != op.root) continue;
    if ((op.kind == coll::Kind::reduce || op.kind == coll::Kind::gather) && r != op.root) continue;
    if (sleepers_of(r).load(std::memory_order_acquire) == 0) continue;    // nobody blocked there
    if (seq_of(r, k).load(std::memory_order_acquire) != k + 1) continue;  // it sees ours when it posts
    nudge(r);
  }
}

Future<void> FastChannel::submit(const coll::Call& c, const void* send, void* recv) {
  // A call that completes inside submit shares the channel's ready state (no
  // allocation, no promise); the others get a promise of their own.
  Future<void> fut;
  auto promise = [this, &fut] {
    Promise<void> p(ctx_);
    fut = p.get_future();
    return p;
  };
  std::vector<Op> ready;  // fulfilled (and their communicators released) after unlocking
  std::vector<std::pair<Op, Status>> failed;
  bool now = false;                     // completed inside this call
  bool settled = false;                 // failed inside this call (a user op threw): in `ready`
  std::uint64_t now_k = 0, now_t0 = 0;  // tracing: the call completed inside
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!failed_.is_ok()) {
      Op op;
      op.promise.emplace(promise());
      failed.emplace_back(std::move(op), Status(failed_.code(), where(c.kind) + ": " + failed_.message()));
    } else {
      const std::uint64_t k = next_++;
      const bool dir = direct(c);
      if (dir) {
        // Expected length of the call: every member copies at most n blocks (4 GB/s, pessimistic).
        const std::size_t moved = c.count * esize_of(c) * static_cast<std::size_t>(n_);
        spin_us_.store(static_cast<std::uint32_t>(std::min<std::size_t>(kDirectSpinCapUs, moved / 4000)),
                       std::memory_order_relaxed);
      }
      Op op;
      if (tracer_ != nullptr) op.t0 = dag::Executor::trace_now_ns();
      op.direct = dir;
      op.k = k;
      op.kind = c.kind;
      op.count = c.count;
      op.esize = esize_of(c);
      op.kernel = c.user_op ? nullptr : dag::reduce_kernel(c.op, c.dtype);
      op.user = c.user_op;
      op.root = c.root;
      op.in_place = c.in_place;
      op.send = send;
      op.recv = recv;
      // Entry k % slots last held call k - slots: every member must be done
      // with it. If not (a member lags behind), the call queues: never block
      // the caller (another communicator's call may be what the laggard waits for).
      if (nqueued_ == 0 && !entry_free(k)) poll_locked(ready);  // our own completions may free it
      if (nqueued_ == 0 && entry_free(k)) {
        publish(op);
        if (n_ > 1) nudge_sleepers(op);
        if (ops_.empty() && ready_locked(op)) {
          // Everything it needs is there (the last member to arrive, or alone):
          // complete here, no pending entry, no communicator reference.
          run_locked(op);
          // A failed call (a user op threw) gets a promise: settled with its error below.
          now = !op.error && (!op.direct || readers_done(op));
          now_k = op.k;
          now_t0 = op.t0;
          if (op.error && (!op.direct || readers_done(op))) {
            op.promise.emplace(promise());
            ready.push_back(std::move(op));
            settled = true;
          }
        }
      } else {
        ++nqueued_;
      }
      if (!now && !settled) {
        op.promise.emplace(promise());
        op.keep = owner_.lock();
        ops_.push_back(std::move(op));
        npending_.fetch_add(1, std::memory_order_seq_cst);
        if (dir) ndirect_.fetch_add(1, std::memory_order_relaxed);
        poll_locked(ready);
      }
    }
  }
  if (now) fut = Future<void>(ready_);
  if (now && tracer_ != nullptr) trace_done(c.kind, now_k, now_t0, true);
  settle(ready);
  settle_failed(failed);
  return fut;
}

void FastChannel::park_server(bool parking) {
  const std::shared_ptr<void> owner = owner_.lock();  // the areas live in its window
  if (!owner) return;
  auto& sl = sleepers_of(me_);
  if (parking) {
    sl.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    poll();
  } else {
    sl.fetch_sub(1, std::memory_order_acq_rel);
  }
}

// ---------------------------------------------------------------- FastHub
void FastHub::park(bool parking) {
  // Per server thread: the channels it counted itself in.
  thread_local std::vector<std::shared_ptr<FastChannel>> mine;
  if (parking) {
    parked_.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (auto& c : channels())
      if (c->pending()) {
        c->park_server(true);
        mine.push_back(std::move(c));
      }
  } else {
    for (auto& c : mine) c->park_server(false);
    mine.clear();
    parked_.fetch_sub(1, std::memory_order_seq_cst);
  }
}

void FastHub::add(const std::shared_ptr<FastChannel>& ch) {
  std::lock_guard<std::mutex> lk(mu_);
  chans_.erase(std::remove_if(chans_.begin(), chans_.end(), [](const auto& w) { return w.expired(); }), chans_.end());
  chans_.push_back(ch);
}

std::vector<std::shared_ptr<FastChannel>> FastHub::channels() {
  std::vector<std::shared_ptr<FastChannel>> out;
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& w : chans_)
    if (auto c = w.lock()) out.push_back(std::move(c));
  return out;
}

std::size_t FastHub::poll() {
  if (!active_.load(std::memory_order_acquire)) return 0;
  // Another thread polling the hub covers it (completing a call never takes this lock).
  std::unique_lock<std::mutex> lk(mu_, std::try_to_lock);
  if (!lk.owns_lock()) return 0;
  std::size_t n = 0;
  bool any = false;
  for (auto& w : chans_) {
    std::shared_ptr<FastChannel> c = w.lock();
    if (!c || !c->pending()) continue;
    n += c->poll();
    any = any || c->pending();
  }
  if (!any) {
    // Clear, then look again: a submit that raced with the scan sets it again.
    active_.store(false, std::memory_order_seq_cst);
    for (auto& w : chans_) {
      std::shared_ptr<FastChannel> c = w.lock();
      if (c && c->pending()) {
        active_.store(true, std::memory_order_seq_cst);
        break;
      }
    }
  }
  return n;
}

}  // namespace strata::detail
