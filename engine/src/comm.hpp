// Engine internals (not installed): one communicator on this rank, CommImpl:
// its window (credit slots, flag words, publication records, mapped slots),
// the credit slots' queues, the plan lookup and submit(), which starts a
// compiled plan instance on the executor. Bodies: comm.cpp.
#pragma once

#include <array>
#include <map>

#include "core.hpp"
#include "strata/detail/spinlock.hpp"

namespace strata::detail {

struct CommImpl;
struct ShrinkState;  // shrink.cpp
// Persistent plans of any collective (Communicator::plan): while a capture is
// active on this thread, CommImpl::submit records the call (checked and
// resolved exactly as a one-shot call) instead of starting it.
struct Capture {
  int count = 0;  // collectives posted under the capture
  const CommImpl* comm = nullptr;
  coll::Call call;
  const void* send = nullptr;
  void* recv = nullptr;
};
inline thread_local Capture* tls_capture = nullptr;

// Set while a nonblocking creation posts its own steps (create.cpp): they
// pass the hold that creation keeps on its stream (CommImpl::holds).
inline thread_local bool tls_unheld = false;
struct Unheld {
  bool was = tls_unheld;
  Unheld() { tls_unheld = true; }
  ~Unheld() { tls_unheld = was; }
  Unheld(const Unheld&) = delete;
  Unheld& operator=(const Unheld&) = delete;
};

using CommLock = strata::detail::SpinLock;

// Tags a communicator may take (Communicator::split, CollOptions::tag): a tag
// owns one window slot of the communicator's lane (grant words are 4 bits).
inline constexpr int kMaxTags = 16;

// One communicator on this rank.
// A process-wide serial per communicator object: ids and addresses are
// reused after free, memo keys (resolve_allreduce) must not be.
inline std::uint64_t next_comm_serial() {
  static std::atomic<std::uint64_t> n{0};
  return n.fetch_add(1, std::memory_order_relaxed) + 1;
}

// @p x modulo @p m (m >= 1) for the slot arithmetic of every call: queues,
// window slots and mapped slots are powers of two in practice, so a mask
// replaces the 64-bit division (three to five per call on the start path).
inline std::size_t mod_slots(std::size_t x, std::size_t m) noexcept { return (m & (m - 1)) == 0 ? x & (m - 1) : x % m; }

struct CommImpl : std::enable_shared_from_this<CommImpl> {
  std::shared_ptr<EngineCore> core;
  const std::uint64_t serial = next_comm_serial();
  std::uint16_t id = 0;
  coll::Group group;
  std::unique_ptr<WindowMem> window;
  std::vector<dag::PeerKey> peers;

  // Guards the slots, the memos and the stash: a spin lock (short
  // sections, taken twice per call: strata/detail/spinlock.hpp).
  CommLock mu;
  std::uint32_t next_seq = 0;
  // The last calls posted here, by sequence number modulo 8 (under mu): a
  // hang report names what this rank ran where another rank still waits.
  struct Recent {
    std::uint32_t seq = ~0u;
    coll::Kind kind{};
    std::uint64_t count = 0;
  };
  std::array<Recent, 8> recent{};
  // Per queue: whether an instance holds it, the instances queued behind it
  // (each start returns true when the instance started, false when it failed
  // at once), and the state of the drain loop of release(). Call seq goes to
  // queue seq % queues and window slot seq % group.credits: with `queues`
  // equal to credits a call waits for the previous user of its window slot;
  // with credits / 2 (vouching, below) for the call credits / 2 before it.
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
    // Lazy promise: the holder live_seq started without one (submit makes it
    // only when the instance did not complete inside the start); its end
    // goes to settle_lazy() instead.
    bool lazy = false;
    // The communicator, held while the slot's instance runs (its completion
    // callback takes it: the callback's own capture stays small enough for
    // std::function to keep it without an allocation). A plain call's lazy
    // start sets it only if the instance still runs when the start returns
    // (until then the caller's handle holds the communicator).
    std::shared_ptr<CommImpl> keep;
  };
  std::vector<Slot> slots;  // `queues` entries
  // Vouching (docs/algorithms.md, "Vouching: data signals carry the grants"):
  // on a communicator whose members span hosts, at most credits / 2 calls run
  // at once (queues = credits / 2, credits a power of two >= 2), so a call's
  // start proves that the call credits / 2 before it finished here, and its
  // signals vouch for that to the peers (Executor::bind_flags, `vouch`).
  // Otherwise queues = credits. STRATA_VOUCH=off keeps credits queues.
  std::size_t queues = 0;
  // The plan of each window slot's last call and its key: a loop that repeats
  // one call finds it here without a cache lookup (cleared by enable_flags).
  // What decides a plain call's plan beyond the communicator: a call with
  // default CollOptions and a built-in operator (submit_plain()).
  struct PlainSig {
    coll::Kind kind{};
    std::uint64_t count = 0;
    dag::DataType dtype{};
    dag::ReduceOp op{};
    int root = 0;
    bool in_place = false;
    static PlainSig make(coll::Kind k, std::uint64_t n, dag::DataType t, bool inplace = false,
                         dag::ReduceOp o = dag::ReduceOp{}, int r = 0) noexcept {
      return PlainSig{k, n, t, o, r, inplace};
    }
    [[nodiscard]] bool same(const PlainSig& o) const noexcept {
      return kind == o.kind && count == o.count && dtype == o.dtype && op == o.op && root == o.root &&
             in_place == o.in_place;
    }
  };
  struct Memo {
    std::string key;
    std::shared_ptr<const dag::Plan> plan;
    PlainSig sig;         // the plain call that has this key, when sig_ok
    bool sig_ok = false;  // (cleared when the memo changes)
  };
  std::vector<Memo> memos;  // group.credits entries

  // Tagged collectives (docs/embedding.md, "Tagged collectives"): a
  // communicator made with tags > 0 has a lane, a hidden communicator of the
  // same members with its own id and window of lane_credits(tags) slots,
  // where tag t owns window slot t and its k-th call has sequence number
  // tag_next[t] after k calls (t, t + slots, t + 2 slots, ... past the
  // lane's own set-up calls), so a call's slot, sequence number and plan
  // are the same on every member whatever the order of the tags' calls.
  // No vouching (queues = credits) and no grants on a lane: both assume
  // calls in sequence order.
  bool lane = false;
  int tag_count = 0;                    // on the lane
  std::uint16_t parent_id = 0;          // on the lane: the id of the communicator it serves
  std::shared_ptr<CommImpl> tag_lane;   // on the communicator the user holds
  std::vector<std::uint32_t> tag_next;  // on the lane, under mu
  // After the lane's set-up calls (enable_flags): each tag's first sequence number.
  void start_tags();

  // Nonblocking communicator creation (Communicator::split_async,
  // create.cpp) posts its steps one after another, each when the one before
  // completed, so it holds its stream (key: the tag, -1 for untagged calls)
  // on the communicator that numbers the stream's calls (this one for
  // untagged calls, the lane for a tag): calls and creations posted there
  // meanwhile wait behind it, in order, and start when it ends. So its steps
  // keep their place in the issue order on every member. `held_streams`
  // counts the held streams (submit reads it without mu); `holds` is under mu.
  std::atomic<int> held_streams{0};
  std::map<int, std::deque<std::function<bool()>>> holds;  // waiting items: true = a creation (it holds next)
  // A creation on stream @p key: runs @p start now when the stream is free
  // (the creation holds it from then on), else queues it.
  void hold_for(int key, std::function<void()> start);
  // The creation holding @p key ended: starts what waited behind it, in
  // order, up to and including the next creation (which holds it then).
  void release_hold(int key);
  // submit()'s side: the call waits behind a creation when its stream is held.
  std::optional<Future<void>> defer_if_held(const coll::Call& c, const void* send, void* recv,
                                            const std::shared_ptr<const std::vector<dag::PeerKey>>& peer_keys);

  // Revocation and shrink (shrink.cpp): made on first use, under mu.
  std::shared_ptr<ShrinkState> shrink_state;

  // Set (under mu) when a member died or the communicator was revoked: every unfinished, queued and later
  // plan-path call fails with it (a survivor may wait for a live member that
  // stopped because of the death, so its own plan never sees the dead peer).
  Status broken;

  // Ends of lazily promised calls that completed on another thread before
  // their submit made the promise (under mu; submit takes its entry).
  std::vector<std::pair<std::uint32_t, Status>> stash;
  // The first fail_all() reason (under mu): a lazily promised call whose
  // promise is made after it fails with it.
  Status all_failed;
  // Slot @p sl's lazy holder @p seq ended with @p st (mu held): recorded for
  // its submit (the calling thread's record when the end came inside that
  // submit's start, else the stash).
  void settle_lazy(Slot& sl, std::uint32_t seq, const Status& st);
  // The instance of @p seq in queue slot @p slot completed without failing
  // inside its Executor::start (no DoneFn ran): finished(slot, seq, OK)
  // without its general machinery when it was a lazy start on this thread.
  void ended_inline(std::size_t slot, std::uint32_t seq);

  // A member (world rank @p world_rank) died: fails what is unfinished or
  // queued and everything later.
  void member_died(int world_rank, const Status& why);

  // Engine shutdown: fails every queued and unfinished call with @p why.
  void fail_all(const Status& why);

  // Test seam (tests/reliability, DeathDuringCompile): when set, submit()
  // calls it after compiling a call's plan and before the call holds or
  // queues on its slot, the window in which a member's death used to leave
  // the call unfailed. Null outside that test.
  static std::atomic<void (*)(CommImpl&)> after_compile_hook;

  ~CommImpl() {
    if (core) core->plans.drop(serial);  // its cached plans can never be looked up again
    if (window && core && core->transport) core->transport->deregister_memory(window->p, window->len);
    // This rank's mappings of the members' windows (mapped plans read through them).
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
  // @p settle: first wait (at most 10 s) until the same-host members mapped
  // a shared window (window_settled()); false leaves that to the caller.
  transport::RemoteKey open_window(bool settle = true);
  // True once a shared window's name is gone (every same-host member mapped it).
  [[nodiscard]] bool window_settled() const { return !window || !window->shared || window->shared->is_settled(); }

  // Window layout: credits x slot_bytes, then the flag words (one per credit
  // slot: seq + 1 of the last instance that finished with that slot here;
  // docs/algorithms.md, "Window flags"). Same offsets on every member.
  [[nodiscard]] std::size_t flags_at() const { return group.slot_bytes * static_cast<std::size_t>(group.credits); }
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
  // Then, on one-host communicators, the mapped plans' area (Group::mapped_at):
  // credits slots of mapped_slot_bytes() each.
  [[nodiscard]] bool one_host() const {
    for (int h : group.host)
      if (h != group.host[static_cast<std::size_t>(group.rank)]) return false;
    return true;
  }
  [[nodiscard]] std::size_t mapped_slot_bytes() const {
    if (!one_host()) return 0;
    return coll::mapped_slot_bytes(core->tuning ? core->tuning->mapped_max_bytes : 0, size(), group.slot_bytes);
  }
  // Slots of the mapped area (Group::mapped_slots, Tuning::mapped_slots): a
  // power of two, at least the credits, at most kMappedAreaMaxBytes of area
  // (more when the credits alone need more).
  static constexpr std::size_t kMappedAreaMaxBytes = std::size_t{4} << 20;
  [[nodiscard]] int mapped_slots() const {
    const std::size_t each = mapped_slot_bytes();
    if (each == 0) return 0;
    std::uint64_t want = core->tuning ? core->tuning->mapped_slots : 0;
    want = std::min<std::uint64_t>(want, kMappedAreaMaxBytes / each);
    std::uint64_t n = static_cast<std::uint64_t>(group.credits);
    while (n * 2 <= want) n *= 2;
    return static_cast<int>(n);
  }
  [[nodiscard]] std::size_t mapped_at() const { return flags_at() + flag_area_bytes(); }
  // Group::mapped_word: the mapped area's first word, counted from the flag words.
  [[nodiscard]] std::uint32_t mapped_word() const { return static_cast<std::uint32_t>(flag_area_bytes() / 4); }
  /// Window slots (the credits): call seq uses slot seq % slots_per_window().
  [[nodiscard]] std::size_t slots_per_window() const { return static_cast<std::size_t>(group.credits); }
  [[nodiscard]] std::size_t window_bytes() const {
    return mapped_at() + mapped_slot_bytes() * static_cast<std::size_t>(mapped_slots());
  }

  // flag_table[w]: world rank w's flag words as mapped here (own included),
  // nullptr for ranks that are not same-host members (Bindings::flags).
  std::vector<std::atomic<std::uint32_t>*> flag_table;
  // Copies of the flag words of members on other hosts (Group::grants):
  // one word per credit slot each, updated by their grants.
  std::vector<std::unique_ptr<std::atomic<std::uint32_t>[]>> grant_copies;
  // shadow_table[w]: this rank's copies of same-host member w's slot flags
  // (Bindings::flag_shadows; credits entries each), nullptr elsewhere.
  std::vector<std::atomic<std::uint64_t>*> shadow_table;
  std::unique_ptr<std::atomic<std::uint64_t>[]> shadow_store;
  bool grants_bound = false;

  // After set_peer_keys, on every member (collective): maps the flag words of
  // every same-host member and agrees (one allreduce) that all members could,
  // so that every pair takes the same protocol (memory flags instead of the
  // first ready-to-receive of each window region, collectives/ "flag edges").
  // STRATA_WINDOW_FLAGS=off keeps the signal protocol.
  void enable_flags();
  // enable_flags() in two halves around its agreement, for callers that
  // must not wait (Communicator::split_async): flags_propose() maps the
  // peers' flag words and returns this member's two words (flags/grants/
  // single copy; mapped plans), agree_words() posts their minimum over the
  // members (an internal allreduce on this communicator, an agreement: 0
  // anywhere makes it 0 everywhere; not checked by STRATA_CHECK), flags_apply()
  // takes the agreed words.
  // Words of the flags agreement (flags_propose; each agreed as the minimum).
  static constexpr std::size_t kFlagWords = 3;
  struct FlagsProposal {
    std::uint64_t words[kFlagWords] = {};
    bool remote = false;      // a member on another host
    std::vector<void*> wins;  // the same-host members' windows, mapped
  };
  FlagsProposal flags_propose();
  Future<void> agree_words(const std::uint64_t* mine, std::uint64_t* all, std::size_t n);
  void flags_apply(const FlagsProposal& p, const std::uint64_t* agreed);

  void set_peer_keys(const std::vector<transport::RemoteKey>& keys);

  // Bindings::stamp of this communicator's plan starts: 0 (resolve every
  // start) until seal_bindings(), called once the peer table, the flag table
  // and the shadows are final (after enable_flags); then unique to this
  // communicator object (its serial).
  std::uint64_t bind_stamp = 0;
  void seal_bindings() { bind_stamp = serial; }

  // STRATA_CHECK=1: every member compares the call's signature (collective,
  // root, datatype, op, and count for the non-v collectives) with an allreduce
  // of (sig, ~sig) under max before the call; a mismatch fails on every rank
  // (a rank with sig < max sees max(sig) != sig, the one with the max sees
  // max(~sig) != ~sig). This serializes calls: a debugging aid.
  void check_signature(const coll::Call& c);

  // STRATA_CHECK=1, alltoallv: rank i's send_counts[j] must equal rank j's
  // recv_counts[i]. Each rank adds h(i, j, send_counts[j]) and subtracts
  // h(j, i, recv_counts[j]) for every j; one sum-allreduce of that word is 0
  // on every rank when all pairs agree (h: a 64-bit mix, so a mismatch cancels
  // out with probability ~2^-64), and nonzero on every rank otherwise.
  void check_pairwise_counts(const coll::Call& c);

  // Frees a slot: starts the next queued instance for it, if any.
  void release(std::size_t slot);
  // Same, with mu held by @p lk (released while a queued start runs, held on return).
  void release(std::size_t slot, std::unique_lock<CommLock>& lk);

  // The slot's instance @p seq finished with @p st (the executor's done
  // callback): frees the slot, then fulfils the call's future.
  void finished(std::size_t slot, std::uint32_t seq, const Status& st);

  // The slot's holder @p seq leaves it (mu held): its promise (empty when
  // fail_all failed it already, or when @p seq no longer holds the slot) and,
  // through @p keep, the communicator's handle.
  std::optional<Promise<void>> vacate(Slot& sl, std::uint32_t seq, std::shared_ptr<CommImpl>& keep);

  // Starts the instance the caller just made the holder of queue @p slot (its
  // promise and `keep` are there) in window slot seq % credits; false when it
  // failed at once (the promise then holds the error). @p plan goes to the
  // executor's instance (a moved handle costs no reference count).
  // @p keys_stamp: the Bindings::stamp of a start with @p peer_keys (a
  // persistent plan's fixed key table; 0: resolve them at every start).
  bool launch(std::size_t slot, std::uint32_t seq, std::shared_ptr<const dag::Plan> plan, const void* send, void* recv,
              const std::vector<dag::PeerKey>* peer_keys, std::uint64_t keys_stamp = 0,
              std::shared_ptr<const dag::BoundComputeFn> bound = nullptr);

  // The plan of call @p c in window slot @p slot: from the engine's plan
  // cache under @p key (this communicator's entries: its serial), else
  // compiled and cached (uncached when @p key is empty).
  std::shared_ptr<const dag::Plan> plan_for(const coll::Call& c, int slot, const std::string& key);

  // A persistent plan's (Plan::start) compiled plans, one per window slot
  // (a plan is compiled for its slot), filled by its first start in each
  // slot (through submit()); read and written under mu. `stamp`: the
  // Bindings::stamp of its starts with its own key table (direct mode).
  struct Persistent {
    std::vector<std::shared_ptr<const dag::Plan>> plans;
    std::uint64_t stamp = 0;
  };

  // Starts one instance (or queues it behind the instance holding its slot).
  // @p peer_keys overrides the window keys (persistent plans add receive-buffer keys).
  // @p internal: the STRATA_CHECK allreduce itself (not checked again).
  // @p plain: the call's PlainSig when it has default options (the memo then
  // remembers it for submit_plain()).
  // @p remember: a persistent plan's table, given the plan this start used (Plan::start).
  Future<void> submit(const coll::Call& c, const void* send, void* recv,
                      std::shared_ptr<const std::vector<dag::PeerKey>> peer_keys = nullptr, bool internal = false,
                      const PlainSig* plain = nullptr, Persistent* remember = nullptr);

  // Starts a persistent plan's call of @p kind and @p count (checked and
  // resolved when the plan was made) from the plan its table remembers for
  // the next sequence number's window slot, when that slot's queue is free:
  // no argument check, key or signature comparison (docs/algorithms.md,
  // "Persistent plans"); empty when it cannot (the caller then submits).
  std::optional<Future<void>> start_persistent(Persistent& ps, coll::Kind kind, std::size_t count, const void* send,
                                               void* recv, const std::vector<dag::PeerKey>* peer_keys);

  // A tagged call (c.tag >= 0) on the communicator the user holds: checks
  // the tag and submits it to the lane.
  Future<void> submit_tagged(const coll::Call& c, const void* send, void* recv,
                             std::shared_ptr<const std::vector<dag::PeerKey>> peer_keys);

  // A plain call whose window slot remembers its plan and whose queue is free
  // starts here without building a Call, a key or a selection (the caller
  // checked the arguments); empty when it cannot (the caller then submits).
  // docs/algorithms.md, "Per-call cost of the plan path".
  std::optional<Future<void>> submit_plain(const PlainSig& s, const void* send, void* recv);

  // Starts the cached plan of the call @p seq that holds queue @p slot
  // lazily (no promise yet): the engine's completed future when it ends
  // inside the start, else a promise made now.
  Future<void> start_lazy(std::size_t slot, std::uint32_t seq, std::shared_ptr<const dag::Plan> plan, const void* send,
                          void* recv, const std::vector<dag::PeerKey>* peer_keys, coll::Kind kind,
                          std::uint64_t keys_stamp = 0, std::shared_ptr<const dag::BoundComputeFn> bound = nullptr);
};

// An internal allreduce of @p n words over @p impl (the tree algorithm),
// with @p tag (-1: untagged), not signature-checked (engine.cpp): the steps
// of split_async.
Future<void> submit_words(const std::shared_ptr<CommImpl>& impl, const std::uint64_t* send, std::uint64_t* recv,
                          std::size_t n, Op op, int tag);

}  // namespace strata::detail
