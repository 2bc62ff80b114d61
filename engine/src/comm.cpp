// CommImpl (comm.hpp): window set-up, flag agreement,
// STRATA_CHECK signatures, slot release, the plan cache and submit().
#include "comm.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <string_view>

#include "cache_key.hpp"

namespace strata::detail {

std::atomic<void (*)(CommImpl&)> CommImpl::after_compile_hook{nullptr};

void CommImpl::member_died(int world_rank, const Status& why) {
  const auto& w = group.world;
  const auto it = std::find(w.begin(), w.end(), world_rank);
  if (it == w.end()) return;
  const Status st(Errc::peer_dead, "communicator " + std::to_string(id) + " on rank " + std::to_string(rank()) +
                                       ": member rank " + std::to_string(it - w.begin()) + " (world rank " +
                                       std::to_string(world_rank) + ") died: " + why.message());
  {
    std::lock_guard<CommLock> lk(mu);
    if (!broken.is_ok()) return;
    broken = st;
  }
  fail_all(st);
}

void CommImpl::fail_all(const Status& why) {
  std::vector<std::function<bool()>> queued;
  std::vector<Promise<void>> live;
  {
    std::lock_guard<CommLock> lk(mu);
    if (all_failed.is_ok()) all_failed = why;
    for (Slot& sl : slots) {
      for (auto& f : sl.pending) queued.push_back(std::move(f));
      sl.pending.clear();
      if (sl.live) live.push_back(std::move(*sl.live));
      sl.live.reset();
    }
  }
  for (auto& f : queued) f();  // the engine is no longer alive: each fails its promise
  for (auto& p : live) p.set_error(why);
}

transport::RemoteKey CommImpl::open_window(bool settle) {
  const std::size_t bytes = window_bytes();
  window = std::make_unique<WindowMem>(*core->transport, bytes, group.world, &core->window_bytes);
  // Until the members mapped the region its name is in /dev/shm, where a job
  // killed with its launcher would leave it (docs/transport.md, "Mapped
  // regions"). Every member creates its window in this same collective call
  // and answers from its progress; bounded all the same (a name left over
  // goes when the window is destroyed).
  if (settle && window->shared && core->progress)
    core->progress->wait_until([this] { return window->shared->is_settled(); }, std::chrono::seconds(10));
  transport::RemoteKey key;
  throw_if_error(core->transport->register_memory(window->p, bytes, &key));
  // Vouching needs the same queue count on every member: decided from what
  // all of them know (the hosts of the group, the credits), not from the
  // grants agreement (which runs on this communicator).
  static const bool vouch_on = [] { return !strata::detail::env::is("STRATA_VOUCH", "off"); }();
  const auto credits = static_cast<std::size_t>(group.credits);
  queues = vouch_on && !lane && group.spans_hosts() && credits >= 2 && (credits & (credits - 1)) == 0 ? credits / 2
                                                                                                      : credits;
  slots.assign(queues, Slot{});
  memos.assign(credits, Memo{});
  // Own flag block, bound from the first call on: every slice's final
  // flag_set keeps it current (enable_flags maps the same-host peers' later).
  flag_table.assign(static_cast<std::size_t>(group.world_size), nullptr);
  flag_table[static_cast<std::size_t>(group.world[static_cast<std::size_t>(rank())])] =
      reinterpret_cast<std::atomic<std::uint32_t>*>(static_cast<std::byte*>(window->p) + flags_at());
  return key;
}

void CommImpl::enable_flags() {
  FlagsProposal p = flags_propose();
  std::uint64_t agreed[kFlagWords] = {p.words[0], p.words[1], p.words[2]};
  if (size() > 1) agree_words(p.words, agreed, kFlagWords).get();
  flags_apply(p, agreed);
}

Future<void> CommImpl::agree_words(const std::uint64_t* mine, std::uint64_t* all, std::size_t n) {
  coll::Call k;
  k.kind = coll::Kind::allreduce;
  k.count = n;
  k.dtype = dag::DataType::u64;
  k.op = dag::ReduceOp::min;
  return submit(k, mine, all, nullptr, /*internal=*/true);
}

// The proposal of enable_flags(): flags, grants, single copy, mapped plans.
CommImpl::FlagsProposal CommImpl::flags_propose() {
  static const bool on = [] { return !strata::detail::env::is("STRATA_WINDOW_FLAGS", "off"); }();
  static const bool grants_on = [] { return !strata::detail::env::is("STRATA_GRANTS", "off"); }();
  const std::size_t at = flags_at();
  const std::size_t len = flag_area_bytes();
  std::uint64_t ok = on ? 1 : 0;
  const int myhost = group.host[static_cast<std::size_t>(rank())];
  bool remote = false;
  // Mapped plans (Group::mapped_word) read the same-host members' windows through these mappings.
  const std::size_t win_len = window_bytes();
  FlagsProposal prop;
  std::vector<void*>& wins = prop.wins;
  wins.assign(static_cast<std::size_t>(size()), nullptr);
  std::uint64_t wins_ok = 1;
  for (int r = 0; r < size(); ++r)
    if (group.host[static_cast<std::size_t>(r)] != myhost) remote = true;
  for (int r = 0; r < size() && ok != 0; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    if (r == rank() || group.host[ur] != myhost) continue;
    if (!peers[ur].key.valid()) {  // a member that died during shrink (shrink.cpp): no window to map
      ok = 0;
      break;
    }
    void* p = core->transport->map_peer(peers[ur].rank, peers[ur].key, at, len);
    if (p == nullptr) ok = 0;
    flag_table[static_cast<std::size_t>(group.world[ur])] = static_cast<std::atomic<std::uint32_t>*>(p);
    if (!remote) {
      wins[ur] = core->transport->map_peer(peers[ur].rank, peers[ur].key, 0, win_len);
      if (wins[ur] == nullptr) wins_ok = 0;
    }
  }
  // Grants (Group::grants) for members on other hosts: local copies of
  // their flag words, bound before the agreement (a grant that arrives
  // earlier is dropped; the copy's reader then asks for one).
  if (ok != 0 && remote && grants_on && !lane && group.credits <= static_cast<int>(dag::kMaxGrantSlots)) {
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
      std::lock_guard<CommLock> lk(mu);
      first = next_seq;
    }
    core->exec->bind_flags(id, flag_table.data(), flag_table.size(), std::move(copies),
                           static_cast<std::uint32_t>(group.credits), first,
                           static_cast<std::uint32_t>(queues < slots_per_window() ? queues : 0));
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
  // Every same-host member readable from here (all of them on one host).
  bool readable = ok != 0 && single_on && size() > 1;
  for (int r = 0; r < size() && readable; ++r)
    readable = r == rank() || group.host[static_cast<std::size_t>(r)] != myhost ||
               core->transport->can_read_peer(group.world[static_cast<std::size_t>(r)]);
  if (ok == 1 && !remote && readable) ok = 3;
  // One agreement for all (flags_apply): word 0: 0 = no flags, 1 = flags,
  // 2 = flags and grants (members on other hosts), 3 = flags and single copy
  // (one host); word 1: every window mapped everywhere, for mapped plans;
  // word 2: every member reads its same-host members' memory (single copy
  // inside a multi-host communicator: Group::publish_word there).
  // STRATA_MAPPED=off keeps them off.
  static const bool mapped_on = [] { return !strata::detail::env::is("STRATA_MAPPED", "off"); }();
  prop.words[0] = ok;
  prop.words[1] = mapped_on && mapped_slot_bytes() > 0 ? wins_ok : 0;
  prop.words[2] = readable ? 1 : 0;
  prop.remote = remote;
  return prop;
}

// Over ~80 lines: the agreed protocol applied (flags, grants, single copy, mapped, shadows) in one place.
void CommImpl::flags_apply(const FlagsProposal& prop, const std::uint64_t* agreed) {
  const std::uint64_t ok = agreed[0];
  const bool remote = prop.remote;
  const std::vector<void*>& wins = prop.wins;
  const std::size_t at = flags_at();
  const int myhost = group.host[static_cast<std::size_t>(rank())];
  // Mapped plans: flags on, every member on this host, every window mapped
  // everywhere (every member takes them or none: ok and remote are the same on all of them).
  const bool mapped = ok != 0 && !remote && size() > 1 && agreed[1] != 0;
  std::lock_guard<CommLock> lk(mu);
  group.flags = ok != 0;
  group.grants = ok == 2;
  group.publish_word = ok == 3 || (ok != 0 && remote && agreed[2] != 0) ? publish_word() : 0;
  group.mapped_word = mapped ? mapped_word() : 0;
  group.mapped_at = mapped ? mapped_at() : 0;
  group.mapped_slot_bytes = mapped ? mapped_slot_bytes() : 0;
  group.mapped_slots = mapped ? mapped_slots() : 0;
  if (mapped) {
    // Fault the mapped area's pages in now (own and every peer's mapping):
    // else each of the first mapped_slots calls pays a page fault per page
    // it touches, on each side (~2 us per call with 32 slots in a 20-call
    // loop, session 23). Reads only: the words are zero until the first
    // call, and a read fault maps a shared page writable.
    const std::size_t page = 4096;
    const std::size_t lo = group.mapped_at / page * page;
    const std::size_t hi = group.mapped_at + group.mapped_slot_bytes * static_cast<std::size_t>(group.mapped_slots);
    auto touch = [&](const void* base) {
      const volatile unsigned char* b = static_cast<const volatile unsigned char*>(base);
      unsigned sink = 0;
      for (std::size_t o = lo; o < hi; o += page) sink += b[o];
      (void)sink;
    };
    touch(window->p);
    for (void* w : wins)
      if (w != nullptr) touch(w);
  }
  if (mapped)
    for (int r = 0; r < size(); ++r) {
      if (r == rank()) continue;
      const auto ur = static_cast<std::size_t>(r);
      peers[ur].mapped = wins[ur];
      // The record words live in the mapped area, past the flag area: bind
      // the flag words inside the whole window's mapping (Group::mapped_word).
      flag_table[static_cast<std::size_t>(group.world[ur])] =
          reinterpret_cast<std::atomic<std::uint32_t>*>(static_cast<std::byte*>(wins[ur]) + at);
    }
  // Shadows of the same-host members' slot flags (their credit checks in a
  // loop then read this rank's own memory; Bindings::flag_shadows).
  // STRATA_FLAG_SHADOWS=off reads the owners' words every time.
  static const bool shadows_on = [] { return !strata::detail::env::is("STRATA_FLAG_SHADOWS", "off"); }();
  if (group.flags && shadows_on) {
    const auto credits = static_cast<std::size_t>(group.credits);
    shadow_store.reset(new std::atomic<std::uint64_t>[static_cast<std::size_t>(size()) * credits]());
    shadow_table.assign(static_cast<std::size_t>(group.world_size), nullptr);
    for (int r = 0; r < size(); ++r)
      if (r != rank() && group.host[static_cast<std::size_t>(r)] == myhost)
        shadow_table[static_cast<std::size_t>(group.world[static_cast<std::size_t>(r)])] =
            shadow_store.get() + static_cast<std::size_t>(r) * credits;
  }
  core->plans.drop(serial);  // plans compiled before (the agreement itself) use signals only
  for (Memo& m : memos) {
    m.key.clear();
    m.plan.reset();
    m.sig_ok = false;
  }
  detail::logger().debug("comm {}: window flags {}, grants {}, single copy {}, mapped plans {}", id,
                         group.flags ? "on" : "off", group.grants ? "on" : "off",
                         group.publish_word != 0 ? "on" : "off", mapped ? "on" : "off");
}

void CommImpl::set_peer_keys(const std::vector<transport::RemoteKey>& keys) {
  peers.clear();
  for (int r = 0; r < size(); ++r) {
    dag::PeerKey pk;
    pk.rank = group.world[static_cast<std::size_t>(r)];
    pk.id = 0;
    pk.key = keys[static_cast<std::size_t>(r)];
    peers.push_back(pk);
  }
}

void CommImpl::check_signature(const coll::Call& c) {
  const bool v = c.kind == coll::Kind::gatherv || c.kind == coll::Kind::scatterv || c.kind == coll::Kind::allgatherv ||
                 c.kind == coll::Kind::alltoallv || c.kind == coll::Kind::reduce_scatter;
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

void CommImpl::check_pairwise_counts(const coll::Call& c) {
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

void CommImpl::finished(std::size_t slot, std::uint32_t seq, const Status& st) {
  // Frees the slot before it fulfils the future (a waiter woken by the future
  // may drop the last handle at once: regression, heap corruption at exit, 1
  // run in ~30); `keep` holds the communicator until this function returns.
  std::shared_ptr<CommImpl> keep;
  std::optional<Promise<void>> promise;
  Status end = st;
  {
    std::unique_lock<CommLock> lk(mu);
    // An instance that revoke() cancelled (shrink.cpp) ends with the
    // revocation, also when its promise was not made yet (lazy start).
    if (st.code() == Errc::cancelled && !broken.is_ok()) end = broken;
    Slot& sl = slots[slot];
    settle_lazy(sl, seq, end);
    promise = vacate(sl, seq, keep);
    release(slot, lk);
  }
  if (promise) promise->set(end);
}

namespace {
// The submit on this thread whose lazily promised start is running (nested
// submits save and restore it): an end inside that start lands here.
struct LazyEnd {
  const CommImpl* comm = nullptr;
  std::uint32_t seq = 0;
  bool done = false;
  Status st;
};
thread_local LazyEnd* tls_lazy = nullptr;
}  // namespace

void CommImpl::ended_inline(std::size_t slot, std::uint32_t seq) {
  {
    std::unique_lock<CommLock> lk(mu);
    Slot& sl = slots[slot];
    // The common case, a lazy start (start_lazy) that completed inside its
    // own start on this thread: no promise and no handle to give up (they
    // are made only after the start returns), so finished() reduces to
    // recording the end for the submit and freeing the slot.
    if (sl.lazy && sl.live_seq == seq && !sl.live && !sl.keep && tls_lazy != nullptr && tls_lazy->comm == this &&
        tls_lazy->seq == seq) {
      sl.lazy = false;
      tls_lazy->done = true;
      release(slot, lk);
      return;
    }
  }
  finished(slot, seq, Status::ok());
}

void CommImpl::settle_lazy(Slot& sl, std::uint32_t seq, const Status& st) {
  if (!sl.lazy || sl.live_seq != seq) return;
  sl.lazy = false;
  if (tls_lazy != nullptr && tls_lazy->comm == this && tls_lazy->seq == seq) {
    tls_lazy->done = true;
    tls_lazy->st = st;
    return;
  }
  stash.emplace_back(seq, st);
}

std::optional<Promise<void>> CommImpl::vacate(Slot& sl, std::uint32_t seq, std::shared_ptr<CommImpl>& keep) {
  std::optional<Promise<void>> promise;
  if (sl.live_seq != seq) return promise;
  keep = std::move(sl.keep);
  promise = std::move(sl.live);  // empty when fail_all failed it already
  sl.live.reset();
  return promise;
}

bool CommImpl::launch(std::size_t slot, std::uint32_t seq, std::shared_ptr<const dag::Plan> plan, const void* send,
                      void* recv, const std::vector<dag::PeerKey>* peer_keys, std::uint64_t keys_stamp,
                      std::shared_ptr<const dag::BoundComputeFn> bound) {
  // Queued starts may run while the engine shuts down (the executor's drain
  // completes the instance ahead of them): fail them, never start.
  Status st = core->alive.load(std::memory_order_acquire) ? Status::ok() : core->check_alive(plan->name().c_str());
  if (st.is_ok()) {
    // Per thread, reused: no allocation per call. Executor::start reads the
    // bindings before it runs any node, so a start nested in it (the slot's
    // next instance, launched by a completion on this thread) may overwrite them.
    thread_local dag::Bindings b;
    const std::size_t w = mod_slots(seq, slots_per_window());  // the window slot (`slot` is the queue)
    b.inputs.resize(1);                                        // sized once per thread: stores only from then on
    b.outputs.resize(3);
    b.inputs[0] = send;
    b.outputs[0] = recv;
    b.outputs[1] = static_cast<char*>(window->p) + w * group.slot_bytes;
    // The mapped slot: seq % mapped_slots (Group::mapped_slots); the plan,
    // compiled for the credit slot w, reads its peers' slot and raises its
    // record word at the shift (Bindings::shift: a multiple of credits slots).
    const std::size_t ms =
        group.mapped_slots > group.credits ? mod_slots(seq, static_cast<std::size_t>(group.mapped_slots)) : w;
    b.outputs[2] = group.mapped_slot_bytes == 0
                       ? nullptr
                       : static_cast<char*>(window->p) + group.mapped_at + ms * group.mapped_slot_bytes;
    b.shift = (ms - w) * group.mapped_slot_bytes;
    b.peer_table = peer_keys != nullptr ? peer_keys : &peers;
    b.flags = flag_table.data();
    b.nflags = flag_table.size();
    b.flag_wake = flag_wake_word();
    b.flag_shadows = shadow_table.empty() ? nullptr : shadow_table.data();
    b.shadow_words = static_cast<std::uint32_t>(group.credits);
    // The window's peer table and flag words never change once sealed: a
    // cached plan's next start reuses its resolved bindings (pre-built instance).
    b.stamp = peer_keys == nullptr ? bind_stamp : keys_stamp;
    b.compute = bound.get();  // on_block / compute callables (the instance's done callback keeps them)
    // Sequence numbers travel modulo 2^28 (the executor's and the signals' width).
    // The callback captures 16 trivially copyable bytes: std::function keeps
    // them inline (no allocation); the slot holds the promise and `keep`.
    const auto slot32 = static_cast<std::uint32_t>(slot);
    bool ended = false;  // completed inside the start: no callback ran, it ends here
    if (bound)
      st = core->exec->start(
          std::move(plan), b, id, seq & dag::kSeqMask,
          [this, slot32, seq, bound = std::move(bound)](const Status& s) { finished(slot32, seq, s); }, &ended);
    else
      st = core->exec->start(
          std::move(plan), b, id, seq & dag::kSeqMask,
          [this, slot32, seq](const Status& s) { finished(slot32, seq, s); }, &ended);
    if (ended) ended_inline(slot, seq);
  }
  if (st.is_ok()) return true;
  std::shared_ptr<CommImpl> keep;
  std::optional<Promise<void>> promise;
  {
    std::lock_guard<CommLock> lk(mu);
    settle_lazy(slots[slot], seq, st);
    promise = vacate(slots[slot], seq, keep);
  }
  if (promise) promise->set_error(st);
  return false;
}

void CommImpl::release(std::size_t slot) {
  std::unique_lock<CommLock> lk(mu);
  release(slot, lk);
}

void CommImpl::release(std::size_t slot, std::unique_lock<CommLock>& lk) {
  // Iterative: an instance that completes (or fails) inside its own start
  // releases the slot again from the same stack; the active loop picks that
  // up instead of recursing (a long queue failing at once must not overflow).
  Slot& sl = slots[slot];
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

std::shared_ptr<const dag::Plan> CommImpl::plan_for(const coll::Call& c, int slot, const std::string& key) {
  if (!key.empty())
    if (auto hit = core->plans.find(serial, key)) return hit;
  auto plan = coll::compile(group, c, slot);
  // One line per compiled plan (cached plans are not logged again): the concrete algorithm.
  detail::logger().info("plan: {} of {} elements on comm {} ({} ranks): algorithm {} ({} nodes)",
                        coll::to_string(c.kind), c.count, id, size(),
                        plan->algorithm().empty() ? c.algo.name : plan->algorithm(), plan->size());
  // Bounded by the engine's budget (least recently used plans go first); an
  // evicted plan stays alive while instances, memos or persistent plans use it.
  if (!key.empty()) return core->plans.insert(serial, key, std::move(plan));
  return plan;
}

namespace {
// submit_plain() and start_persistent(): the engine-state checks (a
// remembered plan skips only the call's own), then under the lock the next
// sequence number's plan (@p pick:
// window slot -> plan, null when there is none) and its queue slot, held
// lazily as submit() does on a memo hit; empty when either is not there (the
// caller then submits).
template <class Pick>
std::optional<Future<void>> start_remembered(CommImpl& c, coll::Kind kind, std::uint64_t count, const void* send,
                                             void* recv, const std::vector<dag::PeerKey>* peer_keys,
                                             std::uint64_t keys_stamp, Pick&& pick) {
  if (c.core->opts.check || tls_capture != nullptr || c.held_streams.load(std::memory_order_acquire) != 0 ||
      !c.core->alive.load(std::memory_order_acquire))
    return std::nullopt;
  std::shared_ptr<const dag::Plan> plan;
  std::uint32_t seq = 0;
  std::size_t slot = 0;
  {
    std::lock_guard<CommLock> lk(c.mu);
    if (!c.broken.is_ok()) return std::nullopt;
    const std::shared_ptr<const dag::Plan>* p = pick(mod_slots(c.next_seq, c.slots_per_window()));
    if (p == nullptr || !*p) return std::nullopt;
    slot = mod_slots(c.next_seq, c.queues);
    CommImpl::Slot& sl = c.slots[slot];
    if (sl.busy) return std::nullopt;
    seq = c.next_seq++;
    c.recent[seq % c.recent.size()] = {seq, kind, count};
    plan = *p;
    sl.busy = true;
    sl.live.reset();
    sl.lazy = true;
    sl.live_seq = seq;
    // No handle yet (`keep`): the caller's holds the communicator while the
    // start runs; start_lazy() takes one only for a call still running when
    // the start returns (a weak-to-strong handle and its release cost ~4% of
    // an 8 B call: alternating rounds, docs/performance.md "Session 22").
  }
  return c.start_lazy(slot, seq, std::move(plan), send, recv, peer_keys, kind, keys_stamp);
}
}  // namespace

std::optional<Future<void>> CommImpl::submit_plain(const PlainSig& s, const void* send, void* recv) {
  return start_remembered(*this, s.kind, s.count, send, recv, nullptr, 0,
                          [this, &s](std::size_t w) -> const std::shared_ptr<const dag::Plan>* {
                            const Memo& m = memos[w];
                            return m.sig_ok && m.sig.same(s) ? &m.plan : nullptr;
                          });
}

std::optional<Future<void>> CommImpl::start_persistent(Persistent& ps, coll::Kind kind, std::size_t count,
                                                       const void* send, void* recv,
                                                       const std::vector<dag::PeerKey>* peer_keys) {
  return start_remembered(*this, kind, count, send, recv, peer_keys, ps.stamp,
                          [&ps](std::size_t w) { return w < ps.plans.size() ? &ps.plans[w] : nullptr; });
}

Future<void> CommImpl::start_lazy(std::size_t slot, std::uint32_t seq, std::shared_ptr<const dag::Plan> plan,
                                  const void* send, void* recv, const std::vector<dag::PeerKey>* peer_keys,
                                  coll::Kind kind, std::uint64_t keys_stamp,
                                  std::shared_ptr<const dag::BoundComputeFn> bound) {
  // The cached plan starts before any promise exists: a call that completes
  // inside its start (a 1-rank communicator; the last member to arrive at
  // a mapped plan) returns the engine's completed future, with no promise
  // state allocated, locked or signalled (docs/algorithms.md, "Session 17
  // cuts").
  LazyEnd rec;
  rec.comm = this;
  rec.seq = seq;
  LazyEnd* const outer = tls_lazy;
  tls_lazy = &rec;
  const bool started = launch(slot, seq, std::move(plan), send, recv, peer_keys, keys_stamp, std::move(bound));
  tls_lazy = outer;
  if (!started) release(slot);
  if (rec.done) return rec.st.is_ok() ? Future<void>(completed_state()) : make_error_future<void>(rec.st);
  Promise<void> p(core->fctx);
  Future<void> fut = p.get_future();
  Status st, why;
  bool ended = false;
  {
    std::lock_guard<CommLock> lk(mu);
    const auto it = std::find_if(stash.begin(), stash.end(), [&](const auto& e) { return e.first == seq; });
    if (it != stash.end()) {
      // It completed on another thread before this point.
      ended = true;
      st = std::move(it->second);
      stash.erase(it);
    } else {
      // Still running: finished() has not seen it (it would have stashed it).
      why = !broken.is_ok() ? broken : all_failed;
      Slot& sl = slots[slot];
      if (why.is_ok() && sl.live_seq == seq && sl.lazy) {
        sl.lazy = false;
        sl.live = std::move(p);
        if (!sl.keep) sl.keep = shared_from_this();  // submit_plain() left it to here
      } else {
        // A member died or the engine shut down meanwhile (their fail_all
        // found no promise to fail): fail it here, as they would have.
        sl.lazy = false;
        ended = true;
        st = why.is_ok() ? Status(Errc::internal, "lazy promise: the call's slot changed hands") : why;
      }
    }
  }
  if (ended) p.set(st);
  // (The plan went to the executor; its algorithm is in the "plan:" line logged when it was compiled.)
  detail::logger().debug("{} #{} on comm {}: started from the slot's memo", coll::to_string(kind), seq, id);
  return fut;
}

void CommImpl::start_tags() {
  std::lock_guard<CommLock> lk(mu);
  const auto slots_n = static_cast<std::uint32_t>(group.credits);
  tag_next.assign(static_cast<std::size_t>(slots_n), 0);
  // Sequence numbers 0 .. next_seq - 1 went to the set-up calls: each slot's
  // next user is the first number at or after next_seq in its residue class.
  for (std::uint32_t t = 0; t < slots_n; ++t) {
    std::uint32_t s = next_seq - next_seq % slots_n + t;
    if (s < next_seq) s += slots_n;
    tag_next[t] = s & dag::kSeqMask;
  }
}

void CommImpl::hold_for(int key, std::function<void()> start) {
  {
    std::lock_guard<CommLock> lk(mu);
    auto [it, fresh] = holds.try_emplace(key);
    if (!fresh) {
      it->second.push_back([start = std::move(start)] {
        start();
        return true;
      });
      return;
    }
    held_streams.fetch_add(1, std::memory_order_acq_rel);
  }
  start();
}

void CommImpl::release_hold(int key) {
  for (;;) {
    std::function<bool()> next;
    {
      std::lock_guard<CommLock> lk(mu);
      auto it = holds.find(key);
      if (it == holds.end()) return;
      if (it->second.empty()) {
        holds.erase(it);
        held_streams.fetch_sub(1, std::memory_order_acq_rel);
        return;
      }
      next = std::move(it->second.front());
      it->second.pop_front();
    }
    if (next()) return;  // a creation: it holds the stream now
  }
}

std::optional<Future<void>> CommImpl::defer_if_held(const coll::Call& c, const void* send, void* recv,
                                                    const std::shared_ptr<const std::vector<dag::PeerKey>>& peer_keys) {
  Promise<void> p(core->fctx);
  Future<void> f = p.get_future();
  {
    std::lock_guard<CommLock> lk(mu);
    auto it = holds.find(c.tag);
    if (it == holds.end()) return std::nullopt;
    it->second.push_back([self = shared_from_this(), c, send, recv, peer_keys, p]() mutable {
      Unheld pass;  // its turn has come: the stream's order is kept by the queue
      try {
        self->submit(c, send, recv, peer_keys).on_complete([p](const Status& st) mutable { p.set(st); });
      } catch (...) {
        p.set_error(detail::status_of_current_exception(coll::to_string(c.kind)));
      }
      return false;
    });
  }
  return f;
}

Future<void> CommImpl::submit_tagged(const coll::Call& c, const void* send, void* recv,
                                     std::shared_ptr<const std::vector<dag::PeerKey>> peer_keys) {
  if (!tag_lane || c.tag >= tag_lane->tag_count)
    throw Error(Errc::invalid_argument,
                std::string(coll::to_string(c.kind)) + " on rank " + std::to_string(rank()) +
                    ": argument 'tag' = " + std::to_string(c.tag) + " out of range: the communicator takes " +
                    std::to_string(tag_lane ? tag_lane->tag_count : 0) +
                    " tags (give them to split() or dup(); docs/embedding.md, \"Tagged collectives\")");
  if (peer_keys) {  // a persistent plan's receive-buffer keys, with the lane's window keys
    auto keys = std::make_shared<std::vector<dag::PeerKey>>(tag_lane->peers);
    for (const auto& k : *peer_keys)
      if (k.id != 0) keys->push_back(k);
    peer_keys = std::move(keys);
  }
  return tag_lane->submit(c, send, recv, std::move(peer_keys));
}

// Over ~80 lines: the call path (cache lookup, start, errors) shares its state; splitting it waits for a bench run.
Future<void> CommImpl::submit(const coll::Call& c, const void* send, void* recv,
                              std::shared_ptr<const std::vector<dag::PeerKey>> peer_keys, bool internal,
                              const PlainSig* plain, Persistent* remember) {
  throw_if_error(core->check_alive(coll::to_string(c.kind)));
  if (tls_capture != nullptr && !internal) {  // Communicator::plan: record, do not start
    Capture& cap = *tls_capture;
    ++cap.count;
    cap.comm = this;
    cap.call = c;
    cap.send = send;
    cap.recv = recv;
    return make_ready_future();
  }
  if (c.tag >= 0 && !lane) return submit_tagged(c, send, recv, std::move(peer_keys));
  if (held_streams.load(std::memory_order_acquire) != 0 && !tls_unheld && !internal)
    if (auto f = defer_if_held(c, send, recv, peer_keys)) return std::move(*f);
  // STRATA_CHECK: not for tagged calls (the check is an untagged allreduce).
  if (core->opts.check && !internal && c.tag < 0) check_signature(c);
  // The plan-cache key (cache_key.hpp): every field of the call that changes
  // the plan, as raw bytes, without allocating. The slot is not in it: each
  // window slot remembers its last plan (memos), and the cache's key adds the
  // window slot.
  CacheKeyBuffer key_buf;
  const std::string_view key = cache_key(c, key_buf);
  std::shared_ptr<const dag::Plan> plan;
  std::uint32_t seq = 0;
  std::size_t slot = 0;   // the queue
  std::size_t wslot = 0;  // the window slot
  bool run_now = false;
  bool lazy = false;
  std::optional<Promise<void>> promise;
  // The caller becomes the slot's holder (under mu): its promise (none yet
  // when lazy) and the communicator's handle go into the slot for finished().
  auto hold = [&](Slot& sl) {
    sl.busy = true;
    sl.live = std::move(promise);
    sl.lazy = !sl.live.has_value();
    sl.live_seq = seq;
    sl.keep = shared_from_this();
    run_now = true;
  };
  Status dead;
  {
    // One lock in the common case: a member's death, the sequence number,
    // the slot's remembered plan and whether the slot is free.
    std::lock_guard<CommLock> lk(mu);
    dead = broken;
    if (dead.is_ok()) {
      if (c.tag >= 0) {  // on a lane: the tag's next call
        seq = tag_next[static_cast<std::size_t>(c.tag)];
        tag_next[static_cast<std::size_t>(c.tag)] = (seq + static_cast<std::uint32_t>(group.credits)) & dag::kSeqMask;
      } else {
        seq = next_seq++;
      }
      recent[seq % recent.size()] = {seq, c.kind, c.count};
      slot = mod_slots(seq, queues);
      wslot = mod_slots(seq, slots_per_window());
      Slot& sl = slots[slot];
      Memo& m = memos[wslot];
      if (!key.empty() && m.plan && std::string_view(m.key) == key) {
        plan = m.plan;
        if (plain != nullptr && !m.sig_ok) {
          m.sig = *plain;  // the same key: this plain call's plan
          m.sig_ok = true;
        }
        if (!sl.busy) {
          hold(sl);  // lazily: the promise is made only if the start does not complete the call
          lazy = true;
        }
      }
    }
  }
  if (!dead.is_ok()) {
    // A member died: fail at once. Queued behind a window slot, the call
    // would wait for an instance that member_died() failed but that still
    // holds the slot (it waits for a survivor that gave up): forever.
    return make_error_future<void>(dead);
  }
  // The call's on_block / compute callables, bound per start (the plan has none).
  std::shared_ptr<const dag::BoundComputeFn> bound;
  if (c.on_block || c.compute) bound = std::make_shared<const dag::BoundComputeFn>(coll::bound_compute(c));
  // A persistent plan remembers the plan of this window slot for its next starts there.
  const auto keep_for = [&] {
    if (remember == nullptr) return;
    std::lock_guard<CommLock> lk(mu);
    if (remember->plans.size() != slots_per_window()) remember->plans.resize(slots_per_window());
    remember->plans[wslot] = plan;
  };
  if (lazy) {
    keep_for();
    return start_lazy(slot, seq, std::move(plan), send, recv, peer_keys.get(), c.kind,
                      remember != nullptr ? remember->stamp : 0, std::move(bound));
  }
  promise.emplace(core->fctx);
  Future<void> fut = promise->get_future();
  const bool memo_hit = plan != nullptr;
  // A call that cannot be compiled (an algorithm that does not apply, ...)
  // has taken its sequence number and window slot already: it still runs, as
  // the skipped plan (no data, the slot's flag only), so that the slot's next
  // user does not wait forever for this rank to finish it; then the error is
  // thrown. Every member fails the same call alike (the decision depends on
  // the call's arguments and the communicator only).
  std::exception_ptr failed;
  if (!memo_hit) {
    std::string full;
    if (!key.empty()) {
      full = key;
      full.append(reinterpret_cast<const char*>(&wslot), sizeof wslot);
    }
    try {
      plan = plan_for(c, static_cast<int>(wslot), full);
    } catch (...) {
      failed = std::current_exception();
      plan = coll::compile_skipped(group, c.kind, static_cast<int>(wslot));
    }
    if (auto* hook = after_compile_hook.load(std::memory_order_acquire)) hook(*this);
  }
  if (!failed) keep_for();
  // Behind the slot's holder: the start waits in the slot's queue.
  auto queue = [&](Slot& sl) {
    sl.pending.emplace_back(
        [this, plan, send, recv, seq, promise = std::move(*promise), peer_keys, bound]() mutable -> bool {
          const auto slot_index = mod_slots(seq, queues);
          Status st;
          {
            // A member's death (broken), and the promise parked in the slot for
            // fail_all (the slot is this call's until it releases it).
            std::lock_guard<CommLock> lk(mu);
            st = broken;
            if (st.is_ok()) {
              Slot& held = slots[slot_index];
              held.live = std::move(promise);
              held.live_seq = seq;
              held.keep = shared_from_this();
            }
          }
          if (!st.is_ok()) {
            promise.set_error(st);
            return false;
          }
          return launch(slot_index, seq, plan, send, recv, peer_keys.get(), 0, bound);
        });
  };
  Status late;  // a member died (or the engine shut down) while this call compiled
  if (!memo_hit || !run_now) {
    std::lock_guard<CommLock> lk(mu);
    Slot& sl = slots[slot];
    if (!key.empty() && !memo_hit && !failed) {
      Memo& m = memos[wslot];
      m.key = key;
      m.plan = plan;
      m.sig_ok = plain != nullptr;
      if (plain != nullptr) m.sig = *plain;
    }
    // fail_all() ran between the first lock and this one: it found neither
    // this call's promise nor its queue entry, and a survivor's plan may wait
    // for a live member that stopped because of the death. Fail it now
    // rather than hold or queue (regression: a 2 x 2 host allreduce hung on
    // the rank whose compile overlapped the death report, 1 in ~50 runs).
    late = !broken.is_ok() ? broken : all_failed;
    if (late.is_ok() && !run_now) {
      if (!sl.busy)
        hold(sl);
      else
        queue(sl);
    }
  }
  if (!late.is_ok()) {
    if (failed) std::rethrow_exception(failed);
    promise->set_error(late);
    return fut;
  }
  if (run_now && !launch(slot, seq, plan, send, recv, peer_keys.get(), 0, std::move(bound))) release(slot);
  if (failed) std::rethrow_exception(failed);
  detail::logger().debug("{} #{} on comm {}: algorithm {} ({} nodes)", coll::to_string(c.kind), seq, id, c.algo.name,
                         plan->size());
  return fut;
}

}  // namespace strata::detail
