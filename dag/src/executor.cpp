// The oneTBB executor (see strata/dag/executor.hpp): scheduling. Instances,
// node states, tasks, shards, start and end; the lifetime and failure rules
// are in executor_impl.hpp, which also lists the other concerns' files.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "executor_impl.hpp"
#include "strata/detail/clock.hpp"
#include "strata/detail/cpu.hpp"
#include "strata/detail/env.hpp"
#include "strata/detail/tsan.hpp"
#include "trace.hpp"

namespace strata {
namespace dag {

using exec::now_ns;
using strata::detail::handoff;

Executor::Impl::Impl(transport::Transport& t, ExecutorOptions o) : tp(t), opts(std::move(o)) {
  nranks = tp.size();
  my_rank = tp.rank();
  dead.reset(new std::atomic<bool>[static_cast<std::size_t>(std::max(nranks, 1))]);
  for (int i = 0; i < nranks; ++i) dead[static_cast<std::size_t>(i)].store(false);
  if (opts.arena != nullptr) {
    arena = opts.arena;
  } else {
    own_arena = opts.threads > 0 ? std::make_unique<tbb::task_arena>(opts.threads, 0)
                                 : std::make_unique<tbb::task_arena>(int{tbb::task_arena::automatic},
                                                                     1);  // int{}: no ODR-use (Debug links)
    arena = own_arena.get();
  }
  arena->initialize();
  concurrency = std::max(1, arena->max_concurrency());
  serial = concurrency <= 1;
  std::string path = opts.trace_path;
  if (path.empty()) {
    const char* env = strata::detail::env::get("STRATA_TRACE");
    if (env != nullptr) path = env;
  }
  if (!path.empty()) {
    observer = exec::make_chrome_trace(path, tp.rank());
    obs = observer.get();
  }
}

// Records the first failure of @p in and releases its wait nodes; false if it had failed already.
bool Executor::Impl::mark_failed(Instance* in, const Status& why, bool soft) {
  {
    std::lock_guard<std::mutex> g(in->err_mu);
    if (in->failed.load(std::memory_order_relaxed)) return false;
    in->error = why;
    in->soft = soft;
    in->failed.store(true, std::memory_order_release);
  }
  release_waits(in);
  return true;
}

void Executor::Impl::release_waits(Instance* in) {
  // Release wait nodes from the signals they still expect.
  for (NodeId w : in->plan->wait_nodes()) {
    const std::int32_t left = in->nodes[w].sig.exchange(0, std::memory_order_acq_rel);
    if (left > 0 && in->nodes[w].deps.fetch_sub(left, std::memory_order_acq_rel) == left) ready_outside(in, w);
  }
}

// Node @p id finished: releases its successors, then counts it done. Inline
// vs task by cost: every cheap successor (a post, a flag, a small copy: less
// work than waking a worker) runs in this thread; of the expensive ones, in
// the arena the first runs here too (a chain costs no spawn) and the others
// become tasks that the arena's threads run in parallel; outside the arena
// (progress and handler threads) all of them become tasks. In a serial
// arena (one thread) nothing but compute nodes is expensive (`cheap`).
void Executor::Impl::finish(Instance* in, NodeId id, Work& w, bool in_arena) {
  const Plan& p = *in->plan;
  const Plan::Initial* init = p.initial().data();
  bool heavy_here = false;
  for (const NodeId* s = p.succ_begin(id); s != p.succ_end(id); ++s) {
    // A successor with one dependency (this node, no signals) is ready
    // without touching its counter: nobody else ever decrements it.
    if (init[*s].deps != 1 && in->nodes[*s].deps.fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
    if (!in_arena && defer_compute(in, *s)) continue;
    const bool here = cheap(in, *s) || (in_arena && !heavy_here) || (!in_arena && compute_here());
    if (here && w.push(*s)) {
      heavy_here = heavy_here || !cheap(in, *s);
      continue;
    }
    spawn(in, *s);
  }
  ++w.finished;  // counted in `remaining` when run_work ends
}

void Executor::Impl::run_work(Instance* in, Work& w, bool in_arena) {
  while (w.n > 0) {
    const NodeId cur = w.ids[--w.n];
    const std::uint64_t t0 = obs != nullptr ? now_ns() : 0;
    const bool finished = run(in, cur);
    if (obs != nullptr) obs->node(*in, cur, t0);
    if (finished) finish(in, cur, w, in_arena);
  }
  if (w.finished > 0) {
    const std::int64_t k = w.finished;
    w.finished = 0;
    if (in->remaining.fetch_sub(k, std::memory_order_acq_rel) == k) complete(in);
  }
}

void Executor::Impl::drive(Instance* in, NodeId id, bool in_arena) {
  Work w;
  w.push(id);
  run_work(in, w, in_arena);
}

// Node @p id completed elsewhere (a transport completion, a flag): release and run its successors.
void Executor::Impl::completed(Instance* in, NodeId id, bool in_arena) {
  Work w;
  finish(in, id, w, in_arena);
  run_work(in, w, in_arena);
}

// A node became ready in a thread that may be outside the arena.
void Executor::Impl::ready_outside(Instance* in, NodeId id) {
  const bool in_arena = tls_in_task == this;
  if (!in_arena && defer_compute(in, id)) return;
  if (in_arena || cheap(in, id) || compute_here())
    drive(in, id, in_arena);
  else
    spawn(in, id);
}

// Inside our tasks: spawn into the task group (local deque, tracked by the
// group). Elsewhere: enqueue into the arena, counted in `tasks`.
void Executor::Impl::spawn(Instance* in, NodeId id) {
  spawned.fetch_add(1, std::memory_order_relaxed);
  queued.fetch_add(1, std::memory_order_relaxed);
  if (tls_in_task == this) {
    group.run(handoff([this, in, id] {
      queued.fetch_sub(1, std::memory_order_relaxed);
      drive(in, id, true);
    }));
    return;
  }
  tasks.fetch_add(1, std::memory_order_relaxed);
  arena->enqueue(handoff([this, in, id] {
    queued.fetch_sub(1, std::memory_order_relaxed);
    const Impl* prev = tls_in_task;
    tls_in_task = this;
    drive(in, id, true);
    tls_in_task = prev;
    tasks.fetch_sub(1, std::memory_order_release);
  }));
}

// @p registered: the instance was published (shard, `live`, its drain's
// `live`); a straight start that finished every node in the starting thread
// never was (straight()).
void Executor::Impl::complete(Instance* in, bool registered, bool* ended) {
  in->registered = registered;
  // A member announced this call failed: an instance that finished here
  // after its notice (it saw nothing of the failed data yet) fails too.
  if (nabort.load(std::memory_order_acquire) > 0 && !in->failed.load(std::memory_order_acquire))
    (void)apply_doom(in, false);
  const bool failed = in->failed.load(std::memory_order_acquire);
  if (registered) {
    Shard& sh = shard(in->key);
    std::lock_guard<strata::detail::SpinLock> g(sh.mu);
    if (in->listed)
      sh.unlink(in);
    else
      sh.map.erase(in->key);
    if (failed) tombstone(sh, in->key);
  }
  if (failed && !settle_failed(in)) return;  // settle() finishes it
  finish(in, failed ? nullptr : ended);
}

// The rest of complete(): the DoneFn, the drain watermark, the final grants.
void Executor::Impl::finish(Instance* in, bool* ended) {
  const bool registered = in->registered;
  const bool failed = in->failed.load(std::memory_order_acquire);
  // A start that ends the instance itself (@p ended) drops the callback with the instance.
  DoneFn done;
  if (ended == nullptr) done = std::move(in->done);
  Status st = failed ? in->error : Status::ok();
  // Grants of the final flag_set (set_flag), sent after done: keep the plan.
  std::shared_ptr<const Plan> gplan;
  const NodeId gnode = in->granting;
  const std::uint16_t gcomm = in->comm;
  const std::uint32_t gvalue = (in->seq + 1) & kSeqMask;
  // Nothing of the communicator left unfinished here: the next signal to a
  // peer carries kDrainedBit, which covers its next instance when the
  // communicator has >= 2 window slots; grants to the peers this plan
  // signals (and so will likely signal again) are skipped.
  // (A later instance that already runs may have signalled without the bit:
  // then the grant goes out as before.)
  // To a peer this plan does not signal (a broadcast's leaf granting its
  // root), one watermark grant every credits / 2 instances stands for all
  // of them: a peer one instance behind (lock-step) never needs more.
  bool drained = false, batch_due = false;
  Drain* const gdrain = in->drain;
  if (gdrain != nullptr) {
    const std::uint32_t wm = gdrain->done(in->seq);
    const bool last = registered ? gdrain->live.fetch_sub(1, std::memory_order_acq_rel) == 1
                                 : gdrain->live.load(std::memory_order_acquire) == 0;
    drained = last && wm == gvalue && gdrain->credits >= 2 && !failed;
    const std::uint32_t every = std::max<std::uint32_t>(1, gdrain->credits / 2);
    batch_due = ((every & (every - 1)) == 0 ? wm & (every - 1) : wm % every) == 0;  // a mask when a power of two
  }
  if (gnode != kNoNode) {
    gplan = in->plan;
    sending.fetch_add(1, std::memory_order_acq_rel);  // the destructor waits for it
  }
  if (obs != nullptr) obs->instance_end(*in);
  destroy(in);
  if (registered) live.fetch_sub(1, std::memory_order_acq_rel);
  if (ended != nullptr)
    *ended = true;  // the starting caller ends it (Executor::start's ended_inline); `done` is dropped
  else if (done)
    done(st);
  if (gplan) {
    // The window protocol's part (executor_window.cpp): a call only when
    // the plan grants (a send costs microseconds anyway).
    send_grants(*gplan, gplan->nodes()[gnode], gdrain, gcomm, gvalue, drained, batch_due);
    sending.fetch_sub(1, std::memory_order_acq_rel);
  }
}

// Straight start (Plan::straight_preds): runs every node whose
// predecessors are done, in id order, in this thread; a flag_wait whose
// flag is not there yet stays undone, and so do the nodes after it. Returns
// the mask of the nodes done. No counter, no atomic, no shard: a plan
// whose peers are on time completes here (complete(in, false)).
std::uint64_t Executor::Impl::run_straight(Instance* in, std::uint64_t done) {
  const Plan& p = *in->plan;
  const std::uint64_t* preds = p.straight_preds().data();
  const Node* nodes = p.nodes().data();
  const std::size_t n = p.size();
  if (obs == nullptr) {
    // Untraced (the common case): only the nodes not done yet are visited.
    std::uint64_t todo = (n == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1) & ~done;
    while (todo != 0) {
      const auto i = static_cast<NodeId>(__builtin_ctzll(todo));
      todo &= todo - 1;
      if ((preds[i] & ~done) != 0) continue;
      if (nodes[i].kind == NodeKind::flag_wait) {
        if (!in->failed.load(std::memory_order_acquire) && !flag_ready(in, nodes[i])) continue;
      } else {
        (void)run(in, i);  // memory nodes finish synchronously
      }
      done |= std::uint64_t{1} << i;
    }
    return done;
  }
  for (NodeId i = 0; i < n; ++i) {
    if (((done >> i) & 1) != 0 || (preds[i] & ~done) != 0) continue;
    const std::uint64_t t0 = now_ns();
    if (nodes[i].kind == NodeKind::flag_wait) {
      if (!in->failed.load(std::memory_order_acquire) && !flag_ready(in, nodes[i])) continue;
    } else {
      (void)run(in, i);  // memory nodes finish synchronously
    }
    obs->node(*in, i, t0);
    done |= std::uint64_t{1} << i;
  }
  return done;
}

void Executor::Impl::tombstone(Shard& sh, std::uint64_t key) {
  if (sh.tomb.insert(key).second) sh.tomb_order.push_back(key);
  while (sh.tomb_order.size() > 4096) {
    sh.tomb.erase(sh.tomb_order.front());
    sh.tomb_order.pop_front();
  }
}

void Executor::Impl::destroy(Instance* in) {
  void* block = in->block;
  const std::size_t total = in->block_size;
  Impl* ex = in->ex;
  // Node states need no destructor (a straight start never constructs them).
  static_assert(std::is_trivially_destructible_v<NodeState>);
  // The block goes back to its plan for the next start (Plan::spare_block_);
  // the plan is held here, not by the instance being destroyed inside it.
  std::shared_ptr<const Plan> plan = std::move(in->plan);
  const std::uint64_t stamp = in->stamp;
  in->~Instance();
  new (block) Parked{stamp, ex};  // its bindings stay in the block for the next start with this stamp
  void* none = nullptr;
  if (!plan->spare_block_.compare_exchange_strong(none, block, std::memory_order_acq_rel)) ex->free_block(block, total);
}

// ------------------------------------------------------------------ Executor

Executor::Executor(transport::Transport& t, ExecutorOptions opts) : impl_(std::make_unique<Impl>(t, std::move(opts))) {
  if (impl_->opts.install_handlers) {
    t.set_completion_handler([this](void* ctx, const Status& s) { handle_completion(ctx, s); });
    t.set_signal_handler([this](int src, std::uint64_t p) { handle_signal(src, p); });
    t.set_peer_failure_handler([this](int peer, const Status& why) { handle_peer_failure(peer, why); });
  }
}

Executor::~Executor() {
  Impl& im = *impl_;
  // Cancel everything in flight, then let posted operations drain.
  std::vector<std::uint64_t> keys;
  for (Shard& sh : im.shards) {
    std::lock_guard<strata::detail::SpinLock> g(sh.mu);
    sh.each([&](Instance* in) { keys.push_back(in->key); });
  }
  for (std::uint64_t k : keys) cancel(static_cast<std::uint16_t>(k >> 32), static_cast<std::uint32_t>(k & kSeqMask));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((im.live.load() > 0 || im.tasks.load() > 0 || im.sending.load() > 0) &&
         std::chrono::steady_clock::now() < deadline) {
    if (im.tp.progress() + im.poll_flags() + im.flush_settling() == 0) std::this_thread::yield();
  }
  (void)im.flush_settling();  // straight-started ones are not counted in `live`
  im.arena->execute([&] { im.group.wait(); });
  if (im.obs != nullptr) im.obs->flush();
  if (im.opts.install_handlers) {
    im.tp.set_completion_handler(nullptr);
    im.tp.set_signal_handler(nullptr);
    im.tp.set_peer_failure_handler(nullptr);
  }
}

tbb::task_arena& Executor::arena() noexcept { return *impl_->arena; }
transport::Transport& Executor::transport() noexcept { return impl_->tp; }
void Executor::flush_trace() {
  if (impl_->obs != nullptr) impl_->obs->flush();
}
bool Executor::tracing() const noexcept { return impl_->obs != nullptr; }
void Executor::trace_event(const std::string& cat, const std::string& name, std::uint64_t start_ns,
                           std::uint64_t end_ns, std::uint32_t seq, std::int64_t peer) {
  if (impl_->obs != nullptr) impl_->obs->event(cat, name, start_ns, end_ns, seq, peer);
}
std::uint64_t Executor::trace_now_ns() noexcept { return now_ns(); }
std::size_t Executor::poll() {
  const HandlerDepth depth;
  return impl_->poll_flags();
}

WaiterScope::WaiterScope(Executor* ex) noexcept : ex_(ex) {
  if (ex_ == nullptr) return;
  Executor::Impl* im = ex_->impl_.get();
  prev_waiter_ = tls_waiter;
  prev_defer_ = tls_defer;
  tls_waiter = im;
  if (im->serial && im->opts.inline_compute) {
    kept_.im = im;
    tls_defer = &kept_;
  }
}

WaiterScope::~WaiterScope() {
  if (ex_ == nullptr) return;
  tls_waiter = static_cast<const Executor::Impl*>(prev_waiter_);
  tls_defer = prev_defer_;
  // Left over (the waiter stopped early): the arena's worker runs them.
  for (const auto& [in, id] : kept_.nodes) ex_->impl_->spawn(in, id);
}

std::size_t WaiterScope::run() {
  std::size_t n = 0;
  while (!kept_.nodes.empty()) {
    std::vector<std::pair<exec::Instance*, NodeId>> batch;
    batch.swap(kept_.nodes);
    for (const auto& [in, id] : batch) {
      ex_->impl_->drive(in, id, false);  // what it releases is kept again (tls_defer)
      ++n;
    }
  }
  return n;
}
void Executor::park(bool parking) { impl_->park(parking); }
std::size_t Executor::in_flight() const { return static_cast<std::size_t>(impl_->live.load()); }
std::uint64_t Executor::tasks_spawned() const noexcept { return impl_->spawned.load(std::memory_order_relaxed); }
bool Executor::serial() const noexcept { return impl_->serial; }
bool Executor::cores_busy() const noexcept {
  // Tasks not started yet (they wait for the very CPU a spinning waiter
  // holds) plus long nodes running, in tasks or inline.
  return impl_->queued.load(std::memory_order_relaxed) + impl_->working.load(std::memory_order_relaxed) >=
         impl_->concurrency;
}

std::uint32_t Executor::next_seq(std::uint16_t comm) {
  std::lock_guard<std::mutex> g(impl_->seq_mu);
  return impl_->seqs[comm]++ & kSeqMask;
}

namespace {
// Offsets in an instance's block: Instance, node states, buffer bindings, scratch.
struct BlockLayout {
  std::size_t off_nodes = 0;
  std::size_t off_bufs = 0;
  std::size_t off_scratch = 0;
  std::size_t total = 0;
};
// Binds user input / output @p d from @p b into @p base; false (base
// untouched) when it is not bound. Inputs and outputs are bound at every
// start, pre-built or not.
bool bind_user(const BufferDecl& d, const Bindings& b, unsigned char*& base) {
  if (d.ref.kind == BufferKind::input) {
    if (d.ref.id >= b.inputs.size() || (b.inputs[d.ref.id] == nullptr && d.size > 0)) return false;
    base = static_cast<unsigned char*>(const_cast<void*>(b.inputs[d.ref.id]));
  } else {
    if (d.ref.id >= b.outputs.size() || (b.outputs[d.ref.id] == nullptr && d.size > 0)) return false;
    base = static_cast<unsigned char*>(b.outputs[d.ref.id]);
  }
  return true;
}

BlockLayout block_layout(const Plan& p) {
  BlockLayout L;
  L.off_nodes = align_up(sizeof(Instance));
  L.off_bufs = align_up(L.off_nodes + p.size() * sizeof(NodeState));
  L.off_scratch = align_up(L.off_bufs + p.buffers().size() * sizeof(BufBind));
  L.total = L.off_scratch;
  for (const BufferDecl& d : p.buffers())
    if (d.ref.kind == BufferKind::scratch) L.total = align_up(L.total + d.size);
  return L;
}

using Impl = Executor::Impl;

// One start's arguments and the plan's block layout (Executor::start_unchecked
// and its steps below). The start path runs for every call: ~0.1 us matters,
// so the steps take this by reference and build error text only on failure.
struct Start {
  Impl& im;
  const Plan& p;
  const Bindings& b;
  std::uint16_t comm;
  std::uint32_t seq;
  BlockLayout L;
  bool* ended_inline = nullptr;  // Executor::start's: set instead of the DoneFn when it completes here
  // Built only on an error path: formatting it eagerly cost ~0.1 us per start (perf).
  [[nodiscard]] std::string who() const {
    return "Executor::start(plan '" + p.name() + "', rank " + std::to_string(im.tp.rank()) + ", comm " +
           std::to_string(comm) + ", seq " + std::to_string(seq) + ")";
  }
  [[nodiscard]] Status unbound(const BufferDecl& d) const {
    return {Errc::invalid_argument, who() + (d.ref.kind == BufferKind::input ? ": input " : ": output ") +
                                        std::to_string(d.ref.id) + " (" + std::to_string(d.size) +
                                        " bytes) is not bound"};
  }
  [[nodiscard]] Status in_flight() const {
    return {Errc::invalid_argument, who() + ": this (comm, seq) is already in flight"};
  }
};

// The plan fits this executor and its peers are alive.
Status check_start(const Start& s) {
  if (s.seq > kSeqMask) return {Errc::invalid_argument, s.who() + ": seq exceeds 2^28-1"};
  if (s.p.rank() != s.im.my_rank || s.p.nranks() != s.im.nranks)
    return {Errc::invalid_argument, s.who() + ": plan is rank " + std::to_string(s.p.rank()) + " of " +
                                        std::to_string(s.p.nranks()) + " but the transport is rank " +
                                        std::to_string(s.im.tp.rank()) + " of " + std::to_string(s.im.tp.size())};
  if (s.im.ndead.load(std::memory_order_acquire) == 0) return Status::ok();
  for (int peer : s.p.peers())
    if (s.im.dead[static_cast<std::size_t>(peer)].load())
      return {Errc::peer_dead, s.who() + ": peer rank " + std::to_string(peer) + " is dead"};
  return Status::ok();
}

// Binding j of a peer buffer @p d from the bindings' peer table.
Status bind_peer(const Start& s, const BufferDecl& d, BufBind* bind) {
  const std::vector<PeerKey>& table = s.b.peer_table != nullptr ? *s.b.peer_table : s.b.peers;
  auto it = std::find_if(table.begin(), table.end(),
                         [&](const PeerKey& k) { return k.rank == d.ref.peer && k.id == d.ref.id; });
  if (it == table.end())
    return {Errc::invalid_argument, s.who() + ": peer buffer " + std::to_string(d.ref.id) + " of rank " +
                                        std::to_string(d.ref.peer) + " is not bound"};
  if (!it->key.valid() || it->key.owner != d.ref.peer || it->key.len < d.size)
    return {Errc::invalid_argument, s.who() + ": key of peer buffer " + std::to_string(d.ref.id) + " of rank " +
                                        std::to_string(d.ref.peer) + " is invalid or shorter than " +
                                        std::to_string(d.size) + " bytes"};
  bind->key = it->key;
  bind->base = static_cast<unsigned char*>(it->mapped);
  return Status::ok();
}

// Resolves every buffer of the plan into @p binds (constructing them when
// @p construct), then checks the mapped reads and the flag words it needs.
Status resolve_bindings(const Start& s, BufBind* binds, bool construct) {
  const Plan& p = s.p;
  std::size_t scratch_at = s.L.off_scratch;
  for (std::size_t j = 0; j < p.buffers().size(); ++j) {
    const BufferDecl& d = p.buffers()[j];
    if (construct) new (&binds[j]) BufBind();
    switch (d.ref.kind) {
      case BufferKind::input:
      case BufferKind::output:
        if (!bind_user(d, s.b, binds[j].base)) return s.unbound(d);
        break;
      case BufferKind::scratch:
        binds[j].base = nullptr;  // fixed up after allocation
        binds[j].key.reserved = scratch_at;
        scratch_at = align_up(scratch_at + d.size);
        break;
      case BufferKind::peer:
        if (Status st = bind_peer(s, d, &binds[j]); !st) return st;
        break;
    }
  }
  for (const std::uint32_t j : p.mapped_reads())
    if (binds[j].base == nullptr)
      return {Errc::invalid_argument, s.who() + ": peer buffer " + std::to_string(p.buffers()[j].ref.id) + " of rank " +
                                          std::to_string(p.buffers()[j].ref.peer) +
                                          " is read directly but not mapped here (PeerKey::mapped)"};
  if (p.flag_words() > 0) {
    // Memory-protocol nodes: every flag_wait peer's flags must be mapped here
    // (flag_set without a bound block of its own does nothing).
    for (const int r : p.flag_peers())
      if (s.b.flags == nullptr || static_cast<std::size_t>(r) >= s.b.nflags || s.b.flags[r] == nullptr)
        return {Errc::invalid_argument,
                s.who() + ": flag words of rank " + std::to_string(r) + " are not mapped here (flag_wait)"};
  }
  return Status::ok();
}

// Constructs the instance in @p block (bindings: @p binds, or already in the
// block when null) from the start's arguments.
Instance* make_instance(const Start& s, void* block, const BufBind* binds, std::shared_ptr<const Plan>&& plan,
                        DoneFn&& done) {
  auto* in = new (block) Instance;  // member initializers only (no zeroing of the whole)
  in->ex = &s.im;
  in->block_size = s.L.total;
  in->stamp = s.b.stamp;
  in->plan = std::move(plan);
  in->key = make_key(s.comm, s.seq);
  in->comm = s.comm;
  in->seq = s.seq & kSeqMask;
  in->done = std::move(done);
  in->block = block;
  in->nodes = reinterpret_cast<NodeState*>(static_cast<unsigned char*>(block) + s.L.off_nodes);
  in->bufs = reinterpret_cast<BufBind*>(static_cast<unsigned char*>(block) + s.L.off_bufs);
  in->flags = s.b.flags;
  in->shadows = s.b.flag_shadows;
  in->shadow_words = s.b.flag_shadows != nullptr ? s.b.shadow_words : 0;
  in->flag_wake = s.b.flag_wake;
  in->shift = s.b.shift;
  in->compute = s.b.compute;
  in->drain = s.b.flags != nullptr ? s.im.drain_of(s.comm) : nullptr;
  if (s.im.obs != nullptr) s.im.obs->instance_start(*in);
  if (binds != nullptr)
    for (std::size_t j = 0; j < s.p.buffers().size(); ++j) {
      BufBind* bb = new (&in->bufs[j]) BufBind(binds[j]);
      if (s.p.buffers()[j].ref.kind == BufferKind::scratch) {
        bb->base = static_cast<unsigned char*>(block) + bb->key.reserved;
        bb->key = transport::RemoteKey{};
      }
    }
  return in;
}

// Straight plans whose memory nodes all run inline (cheap()): runs them here
// first. Returns the nodes that ran (bit i: node i; 0 when it does not
// apply); @p finished when all did (the instance is then complete) or the
// start failed (@p st).
std::uint64_t run_straight_first(const Start& s, Instance* in, bool* finished, Status* st) {
  Impl& im = s.im;
  const Plan& p = s.p;
  *finished = false;
  if (p.straight_preds().empty() || !(im.serial || p.straight_bytes() <= im.opts.inline_bytes)) return 0;
  if (im.live.load(std::memory_order_acquire) > 0) {
    Shard& sh = im.shard(in->key);
    std::lock_guard<strata::detail::SpinLock> g(sh.mu);
    if (sh.find(in->key) != nullptr) {
      *st = s.in_flight();  // before destroy(): it may release the plan the message names
      Impl::destroy(in);
      *finished = true;
      return 0;
    }
  }
  std::uint64_t ran = im.run_straight(in);
  const std::size_t n = p.size();
  const std::uint64_t all = n == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1;
  // A late flag when nothing else is in flight here (a blocking-style
  // call, not one of a stream): look again a few times before paying for
  // the publication (ExecutorOptions::start_spins, docs/dag.md).
  if (ran != all && im.opts.start_spins > 0 && im.live.load(std::memory_order_relaxed) == 0)
    for (int k = 0; k < im.opts.start_spins && ran != all; ++k) {
      strata::detail::cpu_relax();
      ran = im.run_straight(in, ran);
    }
  if (ran == all) {
    im.complete(in, false, s.ended_inline);
    *st = Status::ok();
    *finished = true;
  }
  return ran;
}

// Node states of @p in; after a partial straight run (@p ran) the
// predecessors still to finish. Sets the instance's remaining count.
void init_nodes(const Start& s, Instance* in, std::uint64_t ran) {
  const std::size_t n = s.p.size();
  const Plan::Initial* init = s.p.initial().data();
  const std::vector<std::uint64_t>& preds = s.p.straight_preds();
  std::int64_t left = static_cast<std::int64_t>(n);
  for (NodeId i = 0; i < n; ++i) {
    NodeState* ns = new (&in->nodes[i]) NodeState();
    // (ran != 0 only for straight plans: at most 64 nodes, so i < 64 below.)
    const std::int32_t deps =
        ran == 0 ? init[i].deps : static_cast<std::int32_t>(__builtin_popcountll(preds[i] & ~ran));
    if (ran != 0 && ((ran >> i) & 1) != 0) --left;
    ns->deps.store(deps, std::memory_order_relaxed);
    ns->sig.store(init[i].sig, std::memory_order_relaxed);
    ns->inst = in;
  }
  in->remaining.store(left + 1, std::memory_order_relaxed);  // + start token
}

// Publishes @p in in its shard (an error, instance destroyed: the key is in
// flight); @p early receives the signals that arrived before it.
Status publish_instance(const Start& s, Instance* in, std::vector<std::uint32_t>* early) {
  // Counted before it is published: a signal handler may launch its nodes at once.
  Drain* const drain = in->drain;
  if (drain != nullptr) drain->live.fetch_add(1, std::memory_order_acq_rel);
  Shard& sh = s.im.shard(in->key);
  std::lock_guard<strata::detail::SpinLock> g(sh.mu);
  if (sh.find(in->key) != nullptr) {
    Status st = s.in_flight();  // before destroy(): it may release the plan the message names
    Impl::destroy(in);
    if (drain != nullptr) drain->live.fetch_sub(1, std::memory_order_acq_rel);  // start() abandons the watermark
    return st;
  }
  if (s.p.wait_nodes().empty()) {
    sh.link(in);  // no signal can name it
  } else {
    Entry& e = sh.map[in->key];
    sh.tomb.erase(in->key);
    e.inst = in;
    early->swap(e.early);
  }
  return Status::ok();
}

// Counts the signals that arrived before @p in was published.
void apply_early(const Start& s, Instance* in, const std::vector<std::uint32_t>& early) {
  for (std::uint32_t slot : early) {
    const NodeId w = in->plan->wait_node(slot);
    if (w == kNoNode) {
      s.im.fail(in, Status(Errc::internal, s.who() + ": an early signal named slot " + std::to_string(slot) +
                                               ", which no wait node uses"));
      continue;
    }
    NodeState& ns = in->nodes[w];
    std::int32_t v = ns.sig.load(std::memory_order_acquire);
    while (v > 0 && !ns.sig.compare_exchange_weak(v, v - 1, std::memory_order_acq_rel)) {
    }
    if (v > 0 && ns.deps.fetch_sub(1, std::memory_order_acq_rel) == 1) s.im.ready_outside(in, w);
  }
}

// Publishes the instance in @p block (bindings: @p binds, or already in the block when null) and launches its roots.
Status launch(const Start& s, void* block, const BufBind* binds, std::shared_ptr<const Plan>&& plan, DoneFn&& done) {
  Impl& im = s.im;
  Instance* in = make_instance(s, block, binds, std::move(plan), std::move(done));
  // Watermarks earlier instances owe the peers this one does not signal.
  if (in->drain != nullptr && in->drain->any_owed.load(std::memory_order_acquire))
    im.send_owed(in->drain, in->plan.get());
  // A member announced this call failed before it started here: it runs
  // nothing (its waits expect no signal) and settles like the others.
  const bool pre_failed = im.nabort.load(std::memory_order_acquire) > 0 && im.apply_doom(in, false);
  // Straight plans: the instance is published only if a flag is not there yet.
  bool finished = false;
  Status st = Status::ok();
  const std::uint64_t ran = run_straight_first(s, in, &finished, &st);
  if (finished) return st;
  init_nodes(s, in, ran);
  std::vector<std::uint32_t> early;
  if (Status pub = publish_instance(s, in, &early); !pub) return pub;
  im.live.fetch_add(1, std::memory_order_acq_rel);
  // A failure notice that came while this instance was being started (the
  // check above was too early, the notice's lookup too): fail it now.
  if (pre_failed)
    im.release_waits(in);  // its waits expect no signal
  else if (im.nabort.load(std::memory_order_acquire) > 0)
    (void)im.apply_doom(in, true);
  apply_early(s, in, early);
  // Roots (wait nodes are released by their signals only); the start token
  // keeps the instance alive while we launch them. After a partial straight
  // run: the nodes not done whose predecessors are (its late flag_waits).
  if (ran == 0) {
    // Compute nodes that run in this thread (inline_compute), roots and
    // those the roots release (an alltoall's own block's on_block), go
    // last: every transfer is posted before the application's work takes
    // the core. Other plans launch their roots as they come.
    if (!im.compute_here() || !s.p.has_compute()) {
      for (const NodeId i : s.p.roots()) im.ready_outside(in, i);
    } else {
      DeferredCompute later{&im, {}};
      DeferredCompute* const outer = tls_defer;
      tls_defer = &later;
      for (const NodeId i : s.p.roots()) im.ready_outside(in, i);
      tls_defer = outer;
      if (outer != nullptr && outer->im == &im) {
        // A start inside a waiter's poll (a queued call released there): its
        // compute waits for the waiter's run(), outside the poll.
        outer->nodes.insert(outer->nodes.end(), later.nodes.begin(), later.nodes.end());
      } else {
        // This thread acts as a waiter meanwhile: what the compute releases runs here too.
        const Impl* const prev = tls_waiter;
        tls_waiter = &im;
        for (const auto& [x, i] : later.nodes) im.drive(x, i, false);
        tls_waiter = prev;
      }
    }
  } else {
    const std::vector<std::uint64_t>& preds = s.p.straight_preds();
    for (NodeId i = 0; i < s.p.size(); ++i)
      if (((ran >> i) & 1) == 0 && (preds[i] & ~ran) == 0) im.ready_outside(in, i);
  }
  im.unpin(in);
  return Status::ok();
}
}  // namespace

Status Executor::start(std::shared_ptr<const Plan> plan, const Bindings& b, std::uint16_t comm, std::uint32_t seq,
                       DoneFn done, bool* ended_inline) {
  if (ended_inline != nullptr) *ended_inline = false;
  Status st = start_unchecked(std::move(plan), b, comm, seq, std::move(done), ended_inline);
  // A sequence number that never starts never finishes: the communicator's
  // drain watermark (if any) can no longer pass it.
  if (!st)
    if (Drain* d = impl_->drain_of(comm); d != nullptr) d->abandon();
  return st;
}

// The start path of every call: the checks, then a block (this plan's last
// one, pre-built or not, else a new one) and launch(). The steps are the
// functions above; the plan's spare block is handled here (Plan befriends
// the Executor).
Status Executor::start_unchecked(std::shared_ptr<const Plan>&& plan, const Bindings& b, std::uint16_t comm,
                                 std::uint32_t seq, DoneFn&& done, bool* ended_inline) {
  Impl& im = *impl_;
  if (!plan) return {Errc::invalid_argument, "Executor::start: plan is null"};
  const Plan& p = *plan;
  // The layout is the plan's alone: computed once (Plan::layout_*).
  BlockLayout lay;
  if (const std::uint64_t total = p.layout_total_.load(std::memory_order_acquire); total != 0) {
    lay.off_nodes = p.layout_nodes_.load(std::memory_order_relaxed);
    lay.off_bufs = p.layout_bufs_.load(std::memory_order_relaxed);
    lay.off_scratch = p.layout_scratch_.load(std::memory_order_relaxed);
    lay.total = static_cast<std::size_t>(total);
  } else {
    lay = block_layout(p);
    p.layout_nodes_.store(static_cast<std::uint32_t>(lay.off_nodes), std::memory_order_relaxed);
    p.layout_bufs_.store(static_cast<std::uint32_t>(lay.off_bufs), std::memory_order_relaxed);
    p.layout_scratch_.store(static_cast<std::uint32_t>(lay.off_scratch), std::memory_order_relaxed);
    p.layout_total_.store(lay.total, std::memory_order_release);
  }
  const Start s{im, p, b, comm, seq, lay, ended_inline};
  if (Status st = check_start(s); !st) return st;
  const std::size_t nb = p.buffers().size();
  // A block goes back to its plan for a later start, else to the executor.
  const auto give_back = [&](void* blk) {
    void* none = nullptr;
    if (!p.spare_block_.compare_exchange_strong(none, blk, std::memory_order_acq_rel)) im.free_block(blk, s.L.total);
  };
  // Pre-built instance: the block of this plan's last finished instance, with
  // its peer and scratch bindings still resolved and checked for the same
  // stamp (Bindings::stamp). Only the inputs and outputs are bound (and
  // checked) again: a cached plan's start resolves nothing else.
  if (b.stamp != 0) {
    void* spare = p.spare_block_.exchange(nullptr, std::memory_order_acq_rel);
    if (spare != nullptr) {
      const Parked parked = *static_cast<const Parked*>(spare);
      if (parked.stamp == b.stamp && parked.ex == &im) {
        auto* bufs = reinterpret_cast<BufBind*>(static_cast<unsigned char*>(spare) + s.L.off_bufs);
        for (const std::uint32_t j : p.user_buffers()) {
          const BufferDecl& d = p.buffers()[j];
          if (!bind_user(d, b, bufs[j].base)) {
            give_back(spare);
            return s.unbound(d);
          }
        }
        return launch(s, spare, nullptr, std::move(plan), std::move(done));
      }
      give_back(spare);  // bound for another stamp: resolved again below
    }
  }
  // Bindings resolved on the stack for the common small plans (no allocation).
  constexpr std::size_t kInlineBinds = 8;
  // Raw: only the entries used are constructed (zeroing all eight cost a
  // `rep stos` of 576 bytes per start, ~10% of it: perf).
  alignas(BufBind) unsigned char small[kInlineBinds * sizeof(BufBind)];
  std::vector<BufBind> large;
  if (nb > kInlineBinds) large.resize(nb);
  BufBind* binds = nb > kInlineBinds ? large.data() : reinterpret_cast<BufBind*>(small);
  if (Status st = resolve_bindings(s, binds, nb <= kInlineBinds); !st) return st;
  // The block of this plan's last finished instance, else a new one.
  void* block = p.spare_block_.exchange(nullptr, std::memory_order_acq_rel);
  if (block == nullptr) block = im.alloc_block(s.L.total);
  return launch(s, block, binds, std::move(plan), std::move(done));
}

std::size_t Executor::instance_bytes(const Plan& plan) noexcept { return block_layout(plan).total; }

bool Executor::cancel(std::uint16_t comm, std::uint32_t seq) {
  Impl& im = *impl_;
  const std::uint64_t key = make_key(comm, seq);
  Instance* in = nullptr;
  {
    Shard& sh = im.shard(key);
    std::lock_guard<strata::detail::SpinLock> g(sh.mu);
    in = sh.find(key);
    if (in == nullptr || !im.pin(in)) return false;
  }
  im.fail(in, Status(Errc::cancelled, "plan '" + in->plan->name() + "' comm " + std::to_string(comm) + " seq " +
                                          std::to_string(seq) + " cancelled on rank " + std::to_string(im.tp.rank())));
  im.unpin(in);
  return true;
}

void Executor::handle_completion(void* context, const Status& status) {
  const HandlerDepth depth;
  Impl& im = *impl_;
  if (context == &im.grant_ctx) return;  // a grant (or request) was sent: nothing waits for it
  auto* ns = static_cast<NodeState*>(context);
  if (ns == nullptr) return;  // operations posted by others without a context
  Instance* in = ns->inst;
  const auto id = static_cast<NodeId>(ns - in->nodes);
  if (!status) {
    const Node& nd = in->plan->nodes()[id];
    im.fail(in, Status(status.code(), in->plan->describe(id) + " on peer " + std::to_string(nd.peer) +
                                          " failed: " + status.message()));
  }
  if (im.obs != nullptr) im.obs->transport_completion(*in, id, now_ns());
  im.completed(in, id, tls_in_task == &im);
}

void Executor::handle_signal(int source, std::uint64_t payload) {
  const HandlerDepth depth;
  Impl& im = *impl_;
  const SignalKey k = decode_signal(payload);
  if (k.comm == kGrantComm || k.comm == kGrantRequestComm) {
    im.handle_grant(source, payload);
    return;
  }
  if (k.comm == kWatermarkComm) {
    const GrantKey g = decode_grant(payload);
    im.apply_watermark(source, g.comm, g.value);
    return;
  }
  if (k.comm == kAbortNoticeComm || k.comm == kAbortAckComm || k.comm == kAbortSettleComm) {
    im.on_abort(source, payload);
    return;
  }
  if (k.drained)
    im.apply_watermark(source, k.comm, k.seq);
  else
    im.apply_vouch(source, k.comm, k.seq);
  const std::uint64_t key = make_key(k.comm, k.seq);
  Instance* in = nullptr;
  {
    Shard& sh = im.shard(key);
    std::lock_guard<strata::detail::SpinLock> g(sh.mu);
    if (sh.tomb.count(key) != 0) return;  // instance already failed here
    // A listed instance (no wait nodes) is found too: the signal is then an
    // error below, not an early signal kept forever.
    in = sh.find(key);
    if (in == nullptr || !im.pin(in)) {
      sh.map[key].early.push_back(k.slot);
      return;
    }
  }
  const NodeId w = in->plan->wait_node(k.slot);
  if (w == kNoNode) {
    im.fail(in,
            Status(Errc::internal, "plan '" + in->plan->name() + "' rank " + std::to_string(im.tp.rank()) + " seq " +
                                       std::to_string(k.seq) + ": signal from rank " + std::to_string(source) +
                                       " for slot " + std::to_string(k.slot) + ", which no wait node uses"));
  } else {
    NodeState& ns = in->nodes[w];
    std::int32_t v = ns.sig.load(std::memory_order_acquire);
    while (v > 0 && !ns.sig.compare_exchange_weak(v, v - 1, std::memory_order_acq_rel)) {
    }
    if (v > 0 && ns.deps.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      if (im.obs != nullptr) im.obs->signal_arrived(*in, w, source, now_ns());
      im.ready_outside(in, w);
    }
  }
  im.unpin(in);
}
}  // namespace dag
}  // namespace strata
