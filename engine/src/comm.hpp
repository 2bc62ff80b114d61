// Engine internals shared by the engine/src files: the engine core, the
// communicator implementation (windows, credits, plan cache, submit) and the
// argument checks / algorithm choice of the public calls. Not installed.
#pragma once

#include <unistd.h>
#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>

#include <unordered_map>
#include <vector>

#include "fastpath.hpp"
#include "ids.hpp"
#include "strata/collectives/compile.hpp"
#include "strata/dag/executor.hpp"
#include "strata/detail/env.hpp"
#include "strata/detail/log.hpp"
#include "strata/engine.hpp"
#include "strata/transport/bootstrap.hpp"
#include "strata/transport/progress.hpp"
#include "strata/transport/transport.hpp"

namespace strata {

namespace detail {

inline dag::DataType to_dag(Datatype t) {
  switch (t) {
    case Datatype::int8:
      return dag::DataType::i8;
    case Datatype::int16:
      return dag::DataType::i16;
    case Datatype::int32:
      return dag::DataType::i32;
    case Datatype::int64:
      return dag::DataType::i64;
    case Datatype::uint8:
      return dag::DataType::u8;
    case Datatype::uint16:
      return dag::DataType::u16;
    case Datatype::uint32:
      return dag::DataType::u32;
    case Datatype::uint64:
      return dag::DataType::u64;
    case Datatype::float32:
      return dag::DataType::f32;
    case Datatype::float64:
      return dag::DataType::f64;
  }
  return dag::DataType::u8;
}

inline dag::ReduceOp to_dag(Op op) {
  switch (op) {
    case Op::sum:
      return dag::ReduceOp::sum;
    case Op::prod:
      return dag::ReduceOp::prod;
    case Op::min:
      return dag::ReduceOp::min;
    case Op::max:
      return dag::ReduceOp::max;
    case Op::band:
      return dag::ReduceOp::band;
    case Op::bor:
      return dag::ReduceOp::bor;
    case Op::bxor:
      return dag::ReduceOp::bxor;
  }
  return dag::ReduceOp::sum;
}

// Page-aligned, zeroed window memory: a transport SharedRegion when the rank
// has same-host peers among @p members (world ranks; they map it at once and
// put into it with one memcpy), else private memory.
struct WindowMem {
  void* p = nullptr;
  std::size_t len = 0;
  std::unique_ptr<transport::SharedRegion> shared;
  WindowMem(transport::Transport& t, std::size_t n, const std::vector<int>& members) : len(n) {
    shared = t.allocate_shared(n, members);
    if (shared) {
      p = shared->addr;
      return;
    }
    if (posix_memalign(&p, 4096, n) != 0)
      throw Error(Errc::internal, "cannot allocate a window of " + std::to_string(n) + " bytes");
    std::memset(p, 0, n);
  }
  ~WindowMem() {
    if (!shared) std::free(p);
  }
  WindowMem(const WindowMem&) = delete;
  WindowMem& operator=(const WindowMem&) = delete;
};

// Everything a rank's engine owns; communicators keep it alive.
struct CommImpl;
struct WindowTable;  // window.cpp: this engine's windows (signal routing)
// Communicator id reserved for window signals (window.cpp); split never gives it out.
inline constexpr std::uint16_t kWindowSignalComm = 0xFFFF;

// Removes an EngineOptions::log_sink from the logger when the engine goes.
struct LogSinkHandle {
  int handle = 0;
  LogSinkHandle() = default;
  LogSinkHandle(const LogSinkHandle&) = delete;
  LogSinkHandle& operator=(const LogSinkHandle&) = delete;
  ~LogSinkHandle() { reset(); }
  void reset() {
    if (handle != 0) remove_log_sink(handle);
    handle = 0;
  }
};

struct EngineCore {
  EngineOptions opts;
  LogSinkHandle log_sink;
  // The tuning table of every communicator of this engine (docs/tuning.md):
  // loaded once at start-up and agreed by all ranks; where it came from.
  std::shared_ptr<const coll::Tuning> tuning = std::make_shared<const coll::Tuning>();
  coll::TuningChoice tuning_choice;
  // The fast path's configuration (STRATA_FASTPATH*, else the table's fastpath_bytes).
  FastConfig fast_cfg = FastConfig::get();
  std::unique_ptr<Bootstrap> boot;
  Hierarchy hier;
  // Before the transport: its progress hook polls the hub until it is destroyed.
  std::shared_ptr<FastHub> fast_hub = std::make_shared<FastHub>();
  std::unique_ptr<transport::Transport> transport;
  std::unique_ptr<dag::Executor> exec;
  std::atomic<dag::Executor*> polled_exec{nullptr};  // the progress hook's view of exec (null while it goes)
  std::unique_ptr<transport::ProgressServer> progress;
  std::shared_ptr<FutureContext> fctx;
  // fctx's hooks against shutdown (fctx->live is its flag; futures may outlive the engine).
  std::shared_ptr<HookGuard> hooks = std::make_shared<HookGuard>();
  std::atomic<bool> alive{true};
  std::mutex id_mu;
  // Communicator ids in use here (0 is the world; 0xFFFB-0xFFFF are signal
  // tags: watermark grants, grants and grant requests (dag/executor.hpp),
  // fast-path nudges, windows).
  IdPool comm_ids{1, dag::kWatermarkComm};     // ids below every signal tag
  std::vector<std::weak_ptr<CommImpl>> comms;  // under id_mu: every communicator, for shutdown
  std::shared_ptr<WindowTable> windows;        // window.cpp

  Status check_alive(const char* what) const {
    if (alive.load(std::memory_order_acquire)) return Status::ok();
    return {Errc::shutdown,
            std::string(what) + " on rank " + std::to_string(boot ? boot->rank() : -1) + ": the engine has shut down"};
  }
};

// window.cpp: installs the transport handlers that route window events and
// forward the others to the executor (after the executor exists, before any post).
void install_window_routing(EngineCore& core);
// window.cpp: fails what the windows still wait for (shutdown, after the executor is gone).
void shutdown_windows(EngineCore& core);

// One communicator on this rank.
// A process-wide serial per communicator object: ids and addresses are
// reused after free, memo keys (resolve_allreduce) must not be.
inline std::uint64_t next_comm_serial() {
  static std::atomic<std::uint64_t> n{0};
  return n.fetch_add(1, std::memory_order_relaxed) + 1;
}

struct CommImpl : std::enable_shared_from_this<CommImpl> {
  std::shared_ptr<EngineCore> core;
  const std::uint64_t serial = next_comm_serial();
  std::uint16_t id = 0;
  coll::Group group;
  std::unique_ptr<WindowMem> window;
  std::vector<dag::PeerKey> peers;
  std::shared_ptr<FastChannel> fast;  // the small-message fast path (null: not on this communicator)

  std::mutex mu;
  std::uint32_t next_seq = 0;
  // Per window slot: whether an instance holds it, the instances queued behind
  // it (each start returns true when the instance started, false when it failed
  // at once), and the state of the drain loop of release().
  struct Slot {
    bool busy = false;
    bool draining = false;
    int released = 0;
    std::deque<std::function<bool()>> pending;
    // The promise of the instance started in this slot and not finished (a
    // slot runs one instance at a time; engine shutdown and a member's death
    // fail it if the executor could not drain it), and its sequence number.
    std::optional<Promise<void>> live;
    std::uint32_t live_seq = 0;
  };
  std::vector<Slot> slots;

  // Set (under mu) when a member died: every unfinished, queued and later
  // plan-path call fails with it (a survivor may wait for a live member that
  // stopped because of the death, so its own plan never sees the dead peer).
  Status broken;

  // A member (world rank @p world_rank) died: fails what is unfinished or
  // queued and everything later (the fast path notices deaths itself).
  void member_died(int world_rank, const Status& why) {
    const auto& w = group.world;
    const auto it = std::find(w.begin(), w.end(), world_rank);
    if (it == w.end()) return;
    const Status st(Errc::peer_dead, "communicator " + std::to_string(id) + " on rank " + std::to_string(rank()) +
                                         ": member rank " + std::to_string(it - w.begin()) + " (world rank " +
                                         std::to_string(world_rank) + ") died: " + why.message());
    {
      std::lock_guard<std::mutex> lk(mu);
      if (!broken.is_ok()) return;
      broken = st;
    }
    fail_all(st);
  }

  // Engine shutdown: fails every queued and unfinished call with @p why.
  void fail_all(const Status& why) {
    std::vector<std::function<bool()>> queued;
    std::vector<Promise<void>> live;
    {
      std::lock_guard<std::mutex> lk(mu);
      for (Slot& sl : slots) {
        for (auto& f : sl.pending) queued.push_back(std::move(f));
        sl.pending.clear();
        if (sl.live) live.push_back(std::move(*sl.live));
        sl.live.reset();
      }
    }
    for (auto& f : queued) f();  // the engine is no longer alive: each fails its promise
    for (auto& p : live) p.set_error(why);
    if (fast) fast->fail(why);
  }
  std::unordered_map<std::string, std::shared_ptr<const dag::Plan>> cache;

  ~CommImpl() {
    if (window && core && core->transport) core->transport->deregister_memory(window->p, window->len);
    // This rank's mappings of the members' windows (its fast path pointed into them).
    if (core && core->transport && core->alive.load(std::memory_order_acquire))
      for (int r = 0; r < static_cast<int>(peers.size()); ++r)
        if (r != group.rank)
          core->transport->unmap_peer(peers[static_cast<std::size_t>(r)].rank, peers[static_cast<std::size_t>(r)].key);
    if (core && core->exec && grants_bound) core->exec->bind_flags(id, nullptr, 0);
    if (core && id != 0) core->comm_ids.release(id);  // reusable (ids are 16 bits)
  }

  int rank() const { return group.rank; }
  int size() const { return group.size(); }

  // Registers the window; returns its key (the caller exchanges keys).
  transport::RemoteKey open_window() {
    // The fast path's area follows the collective slots (same offset on every member).
    const std::size_t bytes = flags_at() + flag_area_bytes();
    window = std::make_unique<WindowMem>(*core->transport, bytes, group.world);
    // Until the members mapped the region its name is in /dev/shm, where a job
    // killed with its launcher would leave it (docs/transport.md, "Mapped
    // regions"). Every member creates its window in this same collective call
    // and answers from its progress; bounded all the same (a name left over
    // goes when the window is destroyed).
    if (window->shared && core->progress)
      core->progress->wait_until([this] { return window->shared->is_settled(); }, std::chrono::seconds(10));
    transport::RemoteKey key;
    throw_if_error(core->transport->register_memory(window->p, bytes, &key));
    slots.assign(static_cast<std::size_t>(group.credits), Slot{});
    // Own flag block, bound from the first call on: every slice's final
    // flag_set keeps it current (enable_flags maps the same-host peers' later).
    flag_table.assign(static_cast<std::size_t>(group.world_size), nullptr);
    flag_table[static_cast<std::size_t>(group.world[static_cast<std::size_t>(rank())])] =
        reinterpret_cast<std::atomic<std::uint32_t>*>(static_cast<std::byte*>(window->p) + flags_at());
    return key;
  }

  // Window layout: credits x slot_bytes, the fast path's area (one-host
  // communicators), then the flag words (one per credit slot: seq + 1 of the
  // last instance that finished with that slot here; docs/algorithms.md,
  // "Window flags"). Same offsets on every member.
  [[nodiscard]] std::size_t flags_at() const {
    return group.slot_bytes * static_cast<std::size_t>(group.credits) +
           (fast_candidate() ? fast_area_bytes(core->fast_cfg) : 0);
  }
  // Words: one flag per credit slot, padded to a cache line, then the wake
  // words (Bindings::flag_wake): "somebody waits" and one per world rank.
  [[nodiscard]] std::uint32_t flag_wake_word() const {
    return static_cast<std::uint32_t>((static_cast<std::size_t>(group.credits) + 15) / 16 * 16);
  }
  // Then the single-copy publication records: dag::kPublishWords per credit
  // slot (publish / read_peer nodes; Group::publish_word).
  [[nodiscard]] std::uint32_t publish_word() const {
    const std::size_t w = flag_wake_word() + 1 + static_cast<std::size_t>(group.world_size);
    return static_cast<std::uint32_t>((w + dag::kPublishWords - 1) / dag::kPublishWords * dag::kPublishWords);
  }
  [[nodiscard]] std::size_t flag_area_bytes() const {
    const std::size_t words =
        publish_word() + static_cast<std::size_t>(dag::kPublishWords) * static_cast<std::size_t>(group.credits);
    return (words * sizeof(std::uint32_t) + 63) / 64 * 64;
  }

  // flag_table[w]: world rank w's flag words as mapped here (own included),
  // nullptr for ranks that are not same-host members (Bindings::flags).
  std::vector<std::atomic<std::uint32_t>*> flag_table;
  // Copies of the flag words of members on other hosts (Group::grants):
  // one word per credit slot each, updated by their grants.
  std::vector<std::unique_ptr<std::atomic<std::uint32_t>[]>> grant_copies;
  bool grants_bound = false;

  // After set_peer_keys, on every member (collective): maps the flag words of
  // every same-host member and agrees (one allreduce) that all members could,
  // so that every pair takes the same protocol (memory flags instead of the
  // first ready-to-receive of each window region, collectives/ "flag edges").
  // STRATA_WINDOW_FLAGS=off keeps the signal protocol.
  void enable_flags() {
    static const bool on = [] { return !strata::detail::env::is("STRATA_WINDOW_FLAGS", "off"); }();
    static const bool grants_on = [] { return !strata::detail::env::is("STRATA_GRANTS", "off"); }();
    const std::size_t at = flags_at();
    const std::size_t len = flag_area_bytes();
    std::uint64_t ok = on ? 1 : 0;
    const int myhost = group.host[static_cast<std::size_t>(rank())];
    bool remote = false;
    for (int r = 0; r < size() && ok != 0; ++r) {
      const auto ur = static_cast<std::size_t>(r);
      if (r == rank()) continue;
      if (group.host[ur] != myhost) {
        remote = true;
        continue;
      }
      void* p = core->transport->map_peer(peers[ur].rank, peers[ur].key, at, len);
      if (p == nullptr) ok = 0;
      flag_table[static_cast<std::size_t>(group.world[ur])] = static_cast<std::atomic<std::uint32_t>*>(p);
    }
    // Grants (Group::grants) for members on other hosts: local copies of
    // their flag words, bound before the agreement (a grant that arrives
    // earlier is dropped; the copy's reader then asks for one).
    if (ok != 0 && remote && grants_on && group.credits <= static_cast<int>(dag::kMaxGrantSlots)) {
      // A copy: the peer's flag words (grants and drain watermarks raise them).
      std::vector<std::uint8_t> copies(flag_table.size(), 0);
      for (int r = 0; r < size(); ++r) {
        const auto ur = static_cast<std::size_t>(r);
        if (group.host[ur] == myhost) continue;
        grant_copies.emplace_back(new std::atomic<std::uint32_t>[static_cast<std::size_t>(group.credits)]());
        flag_table[static_cast<std::size_t>(group.world[ur])] = grant_copies.back().get();
        copies[static_cast<std::size_t>(group.world[ur])] = 1;
      }
      std::uint32_t first = 0;
      {
        std::lock_guard<std::mutex> lk(mu);
        first = next_seq;
      }
      core->exec->bind_flags(id, flag_table.data(), flag_table.size(), std::move(copies),
                             static_cast<std::uint32_t>(group.credits), first);
      grants_bound = true;
      ok = 2;
    }
    // Single copy: every member on this host, each readable from here
    // (Transport::read_peer: CMA), unless STRATA_SINGLE_COPY=off.
    static const bool single_on = [] {
      const char* v = strata::detail::env::get("STRATA_SINGLE_COPY");
      const std::string s = v == nullptr ? "on" : v;
      if (s != "on" && s != "off" && s != "always")
        throw Error(Errc::invalid_argument, "STRATA_SINGLE_COPY='" + s + "': expected on, off or always");
      return s != "off";
    }();
    if (ok == 1 && !remote && single_on && size() > 1) {
      bool readable = true;
      for (int r = 0; r < size() && readable; ++r)
        readable = r == rank() || core->transport->can_read_peer(group.world[static_cast<std::size_t>(r)]);
      if (readable) ok = 3;
    }
    // One agreement for all: 0 = no flags, 1 = flags, 2 = flags and grants
    // (members on other hosts), 3 = flags and single copy (one host).
    ok = agree_min(ok);
    std::lock_guard<std::mutex> lk(mu);
    group.flags = ok != 0;
    group.grants = ok == 2;
    group.publish_word = ok == 3 ? publish_word() : 0;
    cache.clear();  // plans compiled before (the agreement itself) use signals only
    detail::logger().debug("comm {}: window flags {}, grants {}, single copy {}", id, group.flags ? "on" : "off",
                           group.grants ? "on" : "off", group.publish_word != 0 ? "on" : "off");
  }

  // Collective, internal: the minimum of @p mine over the members (an
  // agreement: 0 anywhere makes it 0 everywhere). Not checked by STRATA_CHECK.
  std::uint64_t agree_min(std::uint64_t mine) {
    if (size() <= 1) return mine;
    std::uint64_t all = 0;
    coll::Call k;
    k.kind = coll::Kind::allreduce;
    k.count = 1;
    k.dtype = dag::DataType::u64;
    k.op = dag::ReduceOp::min;
    submit(k, &mine, &all, nullptr, /*internal=*/true).get();
    return all;
  }

  // Whether the fast path may serve this communicator: enabled, every member on this host.
  [[nodiscard]] bool fast_candidate() const {
    if (!core->fast_cfg.enabled) return false;
    for (int h : group.host)
      if (h != group.host[static_cast<std::size_t>(group.rank)]) return false;
    return true;
  }

  // After set_peer_keys, on every member (collective): maps the members' fast
  // areas and agrees (one allreduce) that every member could, so that all of
  // them take the same calls on the fast path.
  void enable_fast() {
    if (!fast_candidate()) return;
    const std::size_t at = group.slot_bytes * static_cast<std::size_t>(group.credits);
    const std::size_t len = fast_area_bytes(core->fast_cfg);
    std::vector<std::byte*> areas(static_cast<std::size_t>(size()), nullptr);
    std::uint64_t ok = 1;
    for (int r = 0; r < size(); ++r) {
      const auto ur = static_cast<std::size_t>(r);
      areas[ur] = r == rank()
                      ? static_cast<std::byte*>(window->p) + at
                      : static_cast<std::byte*>(core->transport->map_peer(peers[ur].rank, peers[ur].key, at, len));
      if (areas[ur] == nullptr) ok = 0;
    }
    ok = agree_min(ok);
    if (ok == 0) {
      detail::logger().debug("comm {}: fast path off (a member cannot map the others' areas)", id);
      return;
    }
    fast = FastChannel::create(*core->transport, core->progress.get(), core->fctx, core->hooks, id, rank(), group.world,
                               std::move(areas), core->fast_cfg);
    fast->set_owner(weak_from_this());
    if (core->exec && core->exec->tracing()) fast->set_tracer(&core->polled_exec);
    core->fast_hub->add(fast);
  }

  void set_peer_keys(const std::vector<transport::RemoteKey>& keys) {
    peers.clear();
    for (int r = 0; r < size(); ++r) {
      dag::PeerKey pk;
      pk.rank = group.world[static_cast<std::size_t>(r)];
      pk.id = 0;
      pk.key = keys[static_cast<std::size_t>(r)];
      peers.push_back(pk);
    }
  }

  // STRATA_CHECK=1: every member compares the call's signature (collective,
  // root, datatype, op, and count for the non-v collectives) with an allreduce
  // of (sig, ~sig) under max before the call; a mismatch fails on every rank
  // (a rank with sig < max sees max(sig) != sig, the one with the max sees
  // max(~sig) != ~sig). This serializes calls: a debugging aid.
  void check_signature(const coll::Call& c) {
    const bool v = c.kind == coll::Kind::gatherv || c.kind == coll::Kind::scatterv ||
                   c.kind == coll::Kind::allgatherv || c.kind == coll::Kind::alltoallv ||
                   c.kind == coll::Kind::reduce_scatter;
    std::uint64_t sig = 1469598103934665603ull;
    auto mix = [&sig](std::uint64_t x) { sig = (sig ^ x) * 1099511628211ull; };
    mix(static_cast<std::uint64_t>(c.kind));
    mix(static_cast<std::uint64_t>(c.root));
    mix(static_cast<std::uint64_t>(c.dtype));
    mix(static_cast<std::uint64_t>(c.op));
    mix(c.user_op ? c.user_op->elem_size : 0);
    if (!v) mix(c.count);
    // allgatherv / reduce_scatter: every rank must pass the same counts (displacements are local).
    if (c.kind == coll::Kind::allgatherv || c.kind == coll::Kind::reduce_scatter)
      for (std::size_t x : c.counts) mix(x);
    std::uint64_t mine[2] = {sig, ~sig}, all[2] = {0, 0};
    coll::Call k;
    k.kind = coll::Kind::allreduce;
    k.count = 2;
    k.dtype = dag::DataType::u64;
    k.op = dag::ReduceOp::max;
    submit(k, mine, all, nullptr, /*internal=*/true).get();
    if (all[0] != mine[0] || all[1] != mine[1])
      throw Error(Errc::invalid_argument, std::string(coll::to_string(c.kind)) + " on rank " + std::to_string(rank()) +
                                              " (comm " + std::to_string(id) +
                                              "): ranks disagree on this call's count, root, datatype or op "
                                              "(detected by STRATA_CHECK=1)");
    if (c.kind == coll::Kind::alltoallv) check_pairwise_counts(c);
  }

  // STRATA_CHECK=1, alltoallv: rank i's send_counts[j] must equal rank j's
  // recv_counts[i]. Each rank adds h(i, j, send_counts[j]) and subtracts
  // h(j, i, recv_counts[j]) for every j; one sum-allreduce of that word is 0
  // on every rank when all pairs agree (h: a 64-bit mix, so a mismatch cancels
  // out with probability ~2^-64), and nonzero on every rank otherwise.
  void check_pairwise_counts(const coll::Call& c) {
    auto h = [](std::uint64_t src, std::uint64_t dst, std::uint64_t n) {
      std::uint64_t z = src * 0x9E3779B97F4A7C15ull + dst * 0xC2B2AE3D27D4EB4Full + n * 0x165667B19E3779F9ull + 1;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      return z ^ (z >> 31);
    };
    std::uint64_t mine = 0, all = 0;
    const auto me = static_cast<std::uint64_t>(rank());
    for (std::size_t j = 0; j < c.counts.size() && j < c.rcounts.size(); ++j) {
      mine += h(me, j, c.counts[j]);
      mine -= h(j, me, c.rcounts[j]);
    }
    coll::Call k;
    k.kind = coll::Kind::allreduce;
    k.count = 1;
    k.dtype = dag::DataType::u64;
    k.op = dag::ReduceOp::sum;
    submit(k, &mine, &all, nullptr, /*internal=*/true).get();
    if (all != 0)
      throw Error(Errc::invalid_argument,
                  "alltoallv on rank " + std::to_string(rank()) + " (comm " + std::to_string(id) +
                      "): ranks disagree on the pairwise counts (some rank i's send_counts[j] differs from rank "
                      "j's recv_counts[i]; detected by STRATA_CHECK=1)");
  }

  // Frees a slot: starts the next queued instance for it, if any.
  // @p finished: the slot's instance with this sequence number ended (its
  // promise leaves the slot under the same lock).
  void release(std::size_t slot, std::optional<std::uint32_t> finished = std::nullopt) {
    // Iterative: an instance that completes (or fails) inside its own start
    // releases the slot again from the same stack; the active loop picks that
    // up instead of recursing (a long queue failing at once must not overflow).
    std::unique_lock<std::mutex> lk(mu);
    Slot& sl = slots[slot];
    if (finished && sl.live && sl.live_seq == *finished) sl.live.reset();
    ++sl.released;
    if (sl.draining) return;
    sl.draining = true;
    while (sl.released > 0) {
      --sl.released;
      if (sl.pending.empty()) {
        sl.busy = false;
        continue;
      }
      std::function<bool()> next = std::move(sl.pending.front());
      sl.pending.pop_front();
      lk.unlock();
      const bool started = next();
      lk.lock();
      if (!started) ++sl.released;
    }
    sl.draining = false;
  }

  static constexpr std::size_t kPlanCacheEntries = 512;  // per communicator (docs/algorithms.md)
  std::shared_ptr<const dag::Plan> plan_for(const coll::Call& c, int slot, const std::string& key) {
    if (!key.empty()) {
      std::lock_guard<std::mutex> lk(mu);
      auto it = cache.find(key);
      if (it != cache.end()) return it->second;
    }
    auto plan = coll::compile(group, c, slot);
    // One line per compiled plan (cached plans are not logged again): the concrete algorithm.
    detail::logger().info("plan: {} of {} elements on comm {} ({} ranks): algorithm {} ({} nodes)",
                          coll::to_string(c.kind), c.count, id, size(),
                          plan->algorithm().empty() ? c.algo.name : plan->algorithm(), plan->size());
    if (!key.empty()) {
      std::lock_guard<std::mutex> lk(mu);
      // Bounded: a program that calls many different shapes must not grow
      // without limit; an evicted plan stays alive while instances use it.
      if (cache.size() >= kPlanCacheEntries) cache.erase(cache.begin());
      cache.emplace(key, plan);
    }
    return plan;
  }

  // Starts one instance (or queues it behind the instance holding its slot).
  // @p peer_keys overrides the window keys (persistent plans add receive-buffer keys).
  // @p internal: the STRATA_CHECK allreduce itself (not checked again).
  Future<void> submit(const coll::Call& c, const void* send, void* recv,
                      std::shared_ptr<const std::vector<dag::PeerKey>> peer_keys = nullptr, bool internal = false) {
    throw_if_error(core->check_alive(coll::to_string(c.kind)));
    if (core->opts.check && !internal) check_signature(c);
    if (fast && fast->takes(c)) {
      Future<void> f = fast->submit(c, send, recv);
      core->fast_hub->touch(!f.ready());
      detail::logger().debug("{} of {} elements on comm {}: {}", coll::to_string(c.kind), c.count, id,
                             fast->direct(c) ? "fast path, shared buffers" : "fast path");
      return f;
    }
    std::uint32_t seq = 0;
    Status dead;
    {
      std::lock_guard<std::mutex> lk(mu);
      dead = broken;
      if (dead.is_ok()) seq = next_seq++;
    }
    if (!dead.is_ok()) {
      // A member died: fail at once. Queued behind a window slot, the call
      // would wait for an instance that member_died() failed but that still
      // holds the slot (it waits for a survivor that gave up): forever.
      Promise<void> failed(core->fctx);
      Future<void> f = failed.get_future();
      failed.set_error(dead);
      return f;
    }
    const int slot = static_cast<int>(seq % static_cast<std::uint32_t>(group.credits));
    // Binary key: the call's fields as raw bytes, gathered in a stack buffer
    // and appended once to a per-thread string (no allocation per call; ten
    // appends into a fresh string cost ~1,500 instructions: callgrind).
    thread_local std::string key;
    key.clear();
    if (!c.user_op && !c.on_block) {
      std::array<char, 160> fixed;
      std::size_t nfixed = 0;
      auto put = [&fixed, &nfixed](auto v) {
        static_assert(sizeof v <= 16, "key field");
        std::memcpy(fixed.data() + nfixed, &v, sizeof v);
        nfixed += sizeof v;
      };
      put(c.kind);
      put(c.count);
      put(c.dtype);
      put(c.op);
      put(c.root);
      put(static_cast<std::uint8_t>(c.in_place | c.entry_all << 1 | c.exit_all << 2 | c.direct << 3 |
                                    c.algo.hierarchical << 4 | c.fast_ok << 5 | c.algo.tree_from_table << 6 |
                                    c.algo.direction_from_table << 7));
      for (const coll::Shape& sh : {c.algo.host, c.algo.numa, c.algo.core, c.algo.single}) {
        put(sh.kind);
        put(sh.radix);
      }
      put(c.algo.fragment);
      put(c.algo.halves_threshold);
      put(static_cast<std::uint8_t>(
          static_cast<unsigned>(c.algo.dir_host) | static_cast<unsigned>(c.algo.dir_numa) << 1 |
          static_cast<unsigned>(c.algo.dir_core) << 2 | static_cast<unsigned>(c.algo.dir_single) << 3));
      put(slot);
      for (const auto* v : {&c.counts, &c.displs, &c.rcounts, &c.rdispls}) put(v->size());
      key.assign(fixed.data(), nfixed);
      for (const auto* v : {&c.counts, &c.displs, &c.rcounts, &c.rdispls})
        if (!v->empty()) key.append(reinterpret_cast<const char*>(v->data()), v->size() * sizeof(std::size_t));
      key += c.algo.name;
    }
    auto plan = plan_for(c, slot, key);
    Promise<void> promise(core->fctx);
    Future<void> fut = promise.get_future();
    char* slot_base = static_cast<char*>(window->p) + static_cast<std::size_t>(slot) * group.slot_bytes;
    auto start = [this, plan, send, recv, slot_base, seq, promise, peer_keys]() mutable -> bool {
      // Queued starts may run while the engine shuts down (the executor's
      // drain completes the instance ahead of them): fail them, never start.
      const auto slot_index = static_cast<std::size_t>(seq % static_cast<std::uint32_t>(group.credits));
      Status alive_st = core->check_alive(plan->name().c_str());
      if (alive_st.is_ok()) {
        // One lock: a member's death (broken), and the promise parked in the
        // slot for fail_all (the slot is this call's until it releases it).
        std::lock_guard<std::mutex> lk(mu);
        alive_st = broken;
        if (alive_st.is_ok()) {
          slots[slot_index].live = promise;
          slots[slot_index].live_seq = seq;
        }
      }
      if (!alive_st.is_ok()) {
        promise.set_error(alive_st);
        return false;
      }
      dag::Bindings b;
      b.inputs = {send};
      b.outputs = {recv, slot_base};
      b.peer_table = peer_keys ? peer_keys.get() : &peers;
      b.flags = flag_table.data();
      b.nflags = flag_table.size();
      b.flag_wake = flag_wake_word();
      // The callback keeps the communicator alive and frees the slot before it
      // fulfils the future: a waiter woken by the future may drop the last
      // handle at once (regression: heap corruption at exit, 1 run in ~30).
      std::shared_ptr<CommImpl> self = shared_from_this();
      // Sequence numbers travel modulo 2^28 (the executor's and the signals' width).
      const Status st = core->exec->start(plan, b, id, seq & dag::kSeqMask,
                                          [self, slot_index, seq, promise](const Status& s) mutable {
                                            self->release(slot_index, seq);
                                            promise.set(s);
                                          });
      if (!st.is_ok()) {
        {
          std::lock_guard<std::mutex> lk(mu);
          if (slots[slot_index].live_seq == seq) slots[slot_index].live.reset();
        }
        promise.set_error(st);
        return false;
      }
      return true;
    };
    bool run_now = false;
    {
      std::lock_guard<std::mutex> lk(mu);
      Slot& sl = slots[static_cast<std::size_t>(slot)];
      if (!sl.busy) {
        sl.busy = true;
        run_now = true;
      } else {
        sl.pending.push_back(std::move(start));
      }
    }
    if (run_now && !start()) release(static_cast<std::size_t>(slot));
    detail::logger().debug("{} #{} on comm {}: algorithm {} ({} nodes)", coll::to_string(c.kind), seq, id, c.algo.name,
                           plan->size());
    return fut;
  }
};

}  // namespace detail

namespace detail {

[[noreturn]] inline void bad(const char* coll, const CommImpl& c, const std::string& what) {
  throw Error(Errc::invalid_argument, std::string(coll) + " on rank " + std::to_string(c.rank()) + " (comm " +
                                          std::to_string(c.id) + "): " + what);
}

inline void check_buffer(const char* coll, const CommImpl& c, const char* name, const void* p, std::size_t bytes) {
  if (bytes > 0 && p == nullptr) bad(coll, c, std::string("argument '") + name + "' is null with a nonzero count");
}

inline void check_count(const char* coll, const CommImpl& c, std::size_t count, std::size_t esize) {
  if (esize != 0 && count > (std::size_t{1} << 40) / esize)
    bad(coll, c, "argument 'count' = " + std::to_string(count) + " is too large (negative or overflowed?)");
}

inline void check_root(const char* coll, const CommImpl& c, int root) {
  if (root < 0 || root >= c.size())
    bad(coll, c, "argument 'root' = " + std::to_string(root) + " outside [0, " + std::to_string(c.size()) + ")");
}

inline void check_overlap(const char* coll, const CommImpl& c, const void* a, std::size_t alen, const void* b,
                          std::size_t blen) {
  if (a == nullptr || b == nullptr || alen == 0 || blen == 0) return;
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  const auto y = reinterpret_cast<std::uintptr_t>(b);
  if (x < y + blen && y < x + alen)
    bad(coll, c, "arguments 'send' and 'recv' overlap (use strata::in_place for an in-place call)");
}

inline coll::Shape parse_shape(const std::string& s, const std::string& what) {
  if (s == "flat") return {coll::Shape::flat, 0};
  if (s == "binary") return {coll::Shape::binary, 0};
  if (s == "chain") return {coll::Shape::knomial, 1};
  if (s == "binomial") return {coll::Shape::knomial, 2};
  char* end = nullptr;
  const long k = std::strtol(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0' || k < 1 || k > 64)
    throw Error(Errc::invalid_argument,
                what + ": tree shape '" + s + "' is not flat|binary|chain|binomial|<radix 1..64>");
  return {coll::Shape::knomial, static_cast<int>(k)};
}

// The STRATA_* selection variables, read once (first use) instead of a
// getenv per call; changing them after the first collective has no effect.
inline const std::unordered_map<std::string, std::string>& strata_env() {
  static const std::unordered_map<std::string, std::string> env = [] {
    std::unordered_map<std::string, std::string> m;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      const std::string kv = *e;
      const std::size_t eq = kv.find('=');
      if (kv.rfind("STRATA_", 0) == 0 && eq != std::string::npos) m.emplace(kv.substr(0, eq), kv.substr(eq + 1));
    }
    return m;
  }();
  return env;
}

inline std::string env_or(const std::string& v, const std::string& var) {
  if (!v.empty()) return v;
  strata::detail::env::require(var);  // every STRATA_ name is in the registry (docs/environment.md)
  const auto& env = strata_env();
  const auto it = env.find(var);
  return it == env.end() ? std::string() : it->second;
}

inline std::string upper(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

// Whether a collective can pull (docs/algorithms.md): broadcast and the scatters.
inline bool pull_capable(coll::Kind kind) {
  return kind == coll::Kind::broadcast || kind == coll::Kind::scatter || kind == coll::Kind::scatterv;
}

// Parses a direction spec into @p a: "push" | "pull" | "auto" | "" (all levels), or
// comma-separated "level:push|pull" items, level host | numa | core | single.
// Throws strata::Error naming the argument 'direction', the collective and the rank.
inline void parse_direction(coll::Kind kind, const std::string& spec, const std::string& from, int rank,
                            coll::Algorithm* a) {
  const std::string who =
      std::string(coll::to_string(kind)) + (rank >= 0 ? " on rank " + std::to_string(rank) : std::string());
  auto dir = [&](const std::string& v) {
    if (v == "push") return coll::Direction::push;
    if (v == "pull") return coll::Direction::pull;
    throw Error(Errc::invalid_argument,
                who + ": argument 'direction' = '" + spec + "' (" + from + "): '" + v +
                    "' is not push | pull (e.g. \"pull\" or \"host:pull,numa:push,core:pull\")");
  };
  if (spec.empty() || spec == "auto") return;
  if (spec.find(':') == std::string::npos) {
    a->dir_host = a->dir_numa = a->dir_core = a->dir_single = dir(spec);
  } else {
    std::size_t pos = 0;
    while (pos <= spec.size()) {
      const std::size_t comma = spec.find(',', pos);
      const std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      const std::size_t colon = item.find(':');
      const std::string level = item.substr(0, colon);
      if (colon == std::string::npos)
        throw Error(Errc::invalid_argument, who + ": argument 'direction' = '" + spec + "' (" + from +
                                                "): expected push | pull or level:push|pull items");
      const coll::Direction d = dir(item.substr(colon + 1));
      if (level == "host")
        a->dir_host = d;
      else if (level == "numa")
        a->dir_numa = d;
      else if (level == "core")
        a->dir_core = d;
      else if (level == "single")
        a->dir_single = d;
      else
        throw Error(Errc::invalid_argument, who + ": argument 'direction' = '" + spec + "' (" + from + "): level '" +
                                                level + "' is not host | numa | core | single");
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  if (a->any_pull() && !pull_capable(kind))
    throw Error(Errc::invalid_argument, who + ": argument 'direction' = '" + spec + "' (" + from +
                                            "): pull applies to broadcast, scatter and " + "scatterv only; " +
                                            coll::to_string(kind) + " moves data by push");
}

// Resolves the algorithm of one call: per-call options, then STRATA_ALGO_<COLL>,
// STRATA_TREE_<COLL>/STRATA_TREE, STRATA_FRAGMENT_<COLL>/STRATA_FRAGMENT,
// STRATA_DIRECTION_<COLL>/STRATA_DIRECTION (the latter only for the collectives
// that can pull), then defaults. @p rank (the caller's communicator rank, -1 if
// unknown) is named in errors.
inline coll::Algorithm choose_uncached(coll::Kind kind, const CollOptions& o, int rank) {
  const std::string cname = upper(coll::to_string(kind));
  coll::Algorithm a;
  const std::string algo = env_or(o.algorithm, "STRATA_ALGO_" + cname);
  if (kind == coll::Kind::barrier) {
    a.name = "dissemination";
    // Tree algorithm names are accepted (options are often shared between calls).
    if (!algo.empty() && algo != "dissemination" && algo != "tree" && algo != "single")
      throw Error(Errc::invalid_argument, "barrier: algorithm '" + algo + "' unknown (dissemination)");
    return a;
  }
  if (algo.empty() || algo == "tree" || algo == "hierarchical") {
    a.name = "tree";
    a.hierarchical = true;
  } else if (algo == "single" || algo == "flat-tree") {
    a.name = "single";
    a.hierarchical = false;
  } else if (algo == "single-copy" && kind == coll::Kind::broadcast) {
    a.name = "single-copy";  // docs/algorithms.md, "Single copy"
  } else {
    throw Error(Errc::invalid_argument,
                std::string(coll::to_string(kind)) + ": algorithm '" + algo + "' unknown (tree | single" +
                    (kind == coll::Kind::broadcast ? " | single-copy" : "") + "); see docs/algorithms.md");
  }
  std::string tree = env_or(o.tree, "STRATA_TREE_" + cname);
  tree = env_or(tree, "STRATA_TREE");
  std::size_t pos = 0;
  while (pos < tree.size()) {
    const std::size_t comma = tree.find(',', pos);
    const std::string item = tree.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const std::size_t colon = item.find(':');
    if (colon == std::string::npos)
      throw Error(Errc::invalid_argument, "tree option '" + tree + "': expected level:shape items");
    const std::string level = item.substr(0, colon);
    const coll::Shape sh = parse_shape(item.substr(colon + 1), "tree option '" + tree + "'");
    if (level == "host")
      a.host = sh;
    else if (level == "numa")
      a.numa = sh;
    else if (level == "core")
      a.core = sh;
    else if (level == "single") {
      a.single = sh;
      a.hierarchical = false;
      a.name = "single";
    } else
      throw Error(Errc::invalid_argument,
                  "tree option '" + tree + "': level '" + level + "' is not host|numa|core|single");
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  a.tree_from_table = tree.empty();  // no tree named: the tuning table's shapes (coll::with_table)
  std::string frag = env_or(o.fragment, "STRATA_FRAGMENT_" + cname);
  frag = env_or(frag, "STRATA_FRAGMENT");
  if (!frag.empty() && frag != "auto") {
    const std::size_t colon = frag.find(':');
    const std::string mode = frag.substr(0, colon);
    long v = 0;
    if (colon != std::string::npos) {
      char* end = nullptr;
      v = std::strtol(frag.c_str() + colon + 1, &end, 10);
      if (*end != '\0' || v <= 0) throw Error(Errc::invalid_argument, "fragment option '" + frag + "': bad size");
    }
    if (mode == "none") {
      a.fragment = std::size_t{1} << 40;
    } else if (mode == "fixed" && v > 0) {
      a.fragment = static_cast<std::size_t>(v);
    } else if (mode == "halves") {
      a.halves_threshold = v > 0 ? static_cast<std::size_t>(v) : 8192;
    } else {
      throw Error(Errc::invalid_argument,
                  "fragment option '" + frag + "': expected none | fixed:BYTES | halves[:BYTES]");
    }
  }
  // Direction: the per-call option and STRATA_DIRECTION_<COLL> apply as given
  // (pull on a push-only collective is an error); the global STRATA_DIRECTION
  // only reaches the collectives that can pull.
  const auto& env = strata_env();
  if (!o.direction.empty()) {
    parse_direction(kind, o.direction, "CollOptions::direction", rank, &a);
  } else if (const auto it = env.find("STRATA_DIRECTION_" + cname); it != env.end()) {
    parse_direction(kind, it->second, "STRATA_DIRECTION_" + cname, rank, &a);
  } else if (const auto all = env.find("STRATA_DIRECTION"); all != env.end() && pull_capable(kind)) {
    parse_direction(kind, all->second, "STRATA_DIRECTION", rank, &a);
  } else {
    a.direction_from_table = true;  // no direction named: the tuning table's (coll::with_table)
  }
  return a;
}

// A small per-thread memo of algorithm resolutions: the environment is read
// once per process, so (kind, the four option strings, rank) determine the
// result of @p uncached. Resolving by parsing on every call cost 0.3-1 us of
// a small collective (string building and registry lookups, perf). Each
// distinct @p F (one lambda per call site) has its own memo. Errors are not
// memoized (they throw again).
template <class F>
coll::Algorithm memo_algorithm(coll::Kind kind, const CollOptions& o, int rank, F&& uncached) {
  struct Entry {
    coll::Kind kind;
    int rank;
    std::string algorithm, tree, fragment, direction;
    coll::Algorithm result;
  };
  constexpr std::size_t kEntries = 16;
  thread_local std::vector<Entry> memo;
  thread_local std::size_t next = 0;
  for (const Entry& e : memo)
    if (e.kind == kind && e.rank == rank && e.algorithm == o.algorithm && e.tree == o.tree &&
        e.fragment == o.fragment && e.direction == o.direction)
      return e.result;
  coll::Algorithm a = uncached();
  Entry e{kind, rank, o.algorithm, o.tree, o.fragment, o.direction, a};
  if (memo.size() < kEntries) {
    memo.push_back(std::move(e));
  } else {
    memo[next] = std::move(e);
    next = (next + 1) % kEntries;
  }
  return a;
}

// choose_uncached() through the memo.
inline coll::Algorithm choose(coll::Kind kind, const CollOptions& o, int rank = -1) {
  return memo_algorithm(kind, o, rank, [&] { return choose_uncached(kind, o, rank); });
}

// Whether STRATA_ALGO_<COLL> or STRATA_ALGO_<FAMILY> names an algorithm for @p kind (read once).
inline bool algo_env_set(coll::Kind kind) {
  static const std::vector<bool> set = [] {
    std::vector<bool> v;
    const auto& env = strata_env();
    for (int k = 0; k <= static_cast<int>(coll::Kind::reduce_scatter_block); ++k) {
      const std::string name = upper(coll::to_string(static_cast<coll::Kind>(k)));
      std::string fam = name;
      for (const char* suffix : {"V", "_BLOCK"}) {
        const std::string sx = suffix;
        if (fam.size() > sx.size() && fam.compare(fam.size() - sx.size(), sx.size(), sx) == 0 && fam != "ALLREDUCE")
          fam.resize(fam.size() - sx.size());
      }
      v.push_back(env.count("STRATA_ALGO_" + name) > 0 || env.count("STRATA_ALGO_" + fam) > 0);
    }
    return v;
  }();
  const auto i = static_cast<std::size_t>(kind);
  return i < set.size() && set[i];
}

// Strict synchronization and the fast path's eligibility (an automatic
// algorithm, no per-call tree / fragment / direction, loose).
inline void apply_sync(coll::Call& c, const CollOptions& o) {
  c.entry_all = o.sync.entry == SyncMode::all;
  c.exit_all = o.sync.exit == SyncMode::all;
  c.fast_ok = !c.entry_all && !c.exit_all && (o.algorithm.empty() || o.algorithm == "auto") && o.tree.empty() &&
              o.fragment.empty() && o.direction.empty() && !o.on_block && !algo_env_set(c.kind);
  c.shared_buffers = o.shared_buffers;
}

// Sets @p c's synchronization and fast-path eligibility (apply_sync) and tells
// whether the small-message fast path will take it: then the algorithm need
// not be resolved (the plan path never sees the call).
inline bool fast_takes(const CommImpl& impl, coll::Call& c, const CollOptions& o) {
  apply_sync(c, o);
  return impl.fast && impl.fast->takes(c);
}

inline std::shared_ptr<const dag::UserReduce> wrap(const UserOp& op, const char* coll, const CommImpl& c) {
  if (!op.fn) bad(coll, c, "argument 'op': user op has no function");
  if (op.elem_size == 0) bad(coll, c, "argument 'op': user op elem_size is 0");
  auto u = std::make_shared<dag::UserReduce>();
  u->fn = op.fn;
  u->elem_size = op.elem_size;
  u->commutative = op.commutative;
  u->name = op.name;
  return u;
}

inline void need(const std::shared_ptr<CommImpl>& p, const char* what) {
  if (!p) throw Error(Errc::invalid_argument, std::string(what) + ": invalid communicator handle");
}

}  // namespace detail

}  // namespace strata
