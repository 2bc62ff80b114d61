// Communicator creation: split / dup, blocking and nonblocking.
//
// One protocol, run as a chain of internal collectives on the parent
// (docs/embedding.md, "Nonblocking communicator creation"):
//   1. every member's (color, key, tags), exchanged (an allreduce of bxor
//      over blocks, one per member);
//   2. the new communicator's id, agreed over the whole parent (ids are 16
//      bits, free on every member: IdPool), and its tag lane's when any
//      color asked for tags: rounds of propose (max) and reserve (min);
//   3. the windows opened and their keys exchanged;
//   4. the window protocol agreed on the new communicator, then on its lane.
// Each step runs as a task in the engine's arena once the step before
// completed (or right away when that call completed inside its start),
// never on the caller's thread, which split_async() leaves at once. The steps are posted one after another, so the
// creation holds its stream (its tag, or the untagged calls) on the parent while it runs (CommImpl::hold_for): calls
// posted there meanwhile wait behind it, in order, and every member sees the same order.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "checks.hpp"
#include "comm.hpp"
#include "strata/detail/tsan.hpp"
#include "strata/engine.hpp"

namespace strata {

namespace {

using detail::CommImpl;

// A new communicator of the parent ranks @p members of @p parent, id @p id,
// @p credits window slots; its window is open (the caller exchanges the keys).
std::shared_ptr<CommImpl> make_child(const CommImpl& parent, const std::vector<int>& members, std::uint32_t id,
                                     int credits, bool lane, std::size_t slot_bytes) {
  auto ni = std::make_shared<CommImpl>();
  ni->core = parent.core;
  ni->id = static_cast<std::uint16_t>(id);
  ni->lane = lane;
  ni->group.world_size = parent.group.world_size;
  ni->group.slot_bytes = slot_bytes;
  ni->group.credits = credits;
  ni->group.tuning = parent.group.tuning;
  for (std::size_t i = 0; i < members.size(); ++i) {
    const int pr = members[i];
    if (pr == parent.rank()) ni->group.rank = static_cast<int>(i);
    ni->group.world.push_back(parent.group.world[static_cast<std::size_t>(pr)]);
    ni->group.host.push_back(parent.group.host[static_cast<std::size_t>(pr)]);
    ni->group.numa.push_back(parent.group.numa[static_cast<std::size_t>(pr)]);
    ni->group.package.push_back(parent.group.package_of(pr));
  }
  return ni;
}

// Window slots of a tag lane: the next power of two >= tags (a tag owns
// slot `tag`; the sequence numbers of its calls are tag + k * slots).
int lane_credits(int tags) {
  int c = 1;
  while (c < tags) c *= 2;
  return c;
}

// One creation in flight: its inputs, the step it is at, what it decided.
class Creation : public std::enable_shared_from_this<Creation> {
 public:
  Creation(std::shared_ptr<CommImpl> parent, int color, int key, const CreateOptions& o)
      : parent_(std::move(parent)),
        color_(color),
        key_(key),
        tags_(o.tags),
        tag_(o.tag),
        promise_(parent_->core->fctx),
        who_("split on rank " + std::to_string(parent_->rank()) + " (comm " + std::to_string(parent_->id) +
             (o.tag >= 0 ? ", tag " + std::to_string(o.tag) : std::string()) + ")") {}

  Future<Communicator> future() { return promise_.get_future(); }

  // The communicator that numbers this creation's stream (CommImpl::holds).
  CommImpl& stream() { return tag_ >= 0 ? *parent_->tag_lane : *parent_; }

  // Holds the stream, then posts step 1 (now, or when the stream frees).
  void begin() {
    auto self = shared_from_this();
    stream().hold_for(tag_, [self] { self->guarded(&Creation::exchange_meta); });
  }

 private:
  using Step = void (Creation::*)();

  // Runs @p step; an exception fails the creation.
  void guarded(Step step) {
    try {
      (this->*step)();
    } catch (...) {
      fail(detail::status_of_current_exception("split"));
    }
  }

  tbb::task_arena& arena() const {
    const FutureContext* c = parent_->core->fctx.get();
    return c != nullptr && c->usable() && c->arena != nullptr ? *c->arena : detail::default_arena();
  }

  // @p next runs once @p f completed; a failure fails the creation. A call
  // that completed inside its start (a one-member communicator; the last
  // member to arrive) continues right here. Else the step runs as a task in
  // the engine's arena, never on the completing thread: steps there (a
  // progress server, an executor worker) left a later call's completion
  // unnoticed by a sleeping server (Then.ContinuationRunsWithoutAWaiter
  // failed 3 runs in 12 with 30 s server blocks), and the end may wait.
  void chain(Future<void> f, Step next) {
    if (f.ready()) {
      const Status st = f.status();
      if (st.is_ok())
        guarded(next);
      else
        fail(st);
      return;
    }
    auto self = shared_from_this();
    std::move(f).on_complete([self, next](const Status& st) {
      // handoff: the enqueue orders the task after this thread for TSan too (oneTBB is not instrumented).
      self->arena().enqueue(detail::handoff([self, next, st] {
        if (st.is_ok())
          self->guarded(next);
        else
          self->fail(st);
      }));
    });
  }

  // Posts an internal allreduce of @p n words on the parent, then @p next.
  void post(const std::uint64_t* send, std::uint64_t* recv, std::size_t n, Op op, Step next) {
    Future<void> f;
    {
      detail::Unheld pass;  // this creation holds the stream: its own steps pass
      f = detail::submit_words(parent_, send, recv, n, op, tag_);
    }
    chain(std::move(f), next);
  }

  detail::IdPool& pool() { return parent_->core->comm_ids; }

  // Step 1: (color, key, tags, affordable slot bytes) of every member.
  void exchange_meta() {
    const auto n = static_cast<std::size_t>(parent_->size());
    const auto r = static_cast<std::size_t>(parent_->rank());
    out_.assign(kMeta * n, 0);
    in_.assign(kMeta * n, 0);
    out_[kMeta * r] = static_cast<std::uint64_t>(static_cast<std::int64_t>(color_));
    out_[kMeta * r + 1] = static_cast<std::uint64_t>(static_cast<std::int64_t>(key_));
    out_[kMeta * r + 2] = static_cast<std::uint64_t>(tags_);
    out_[kMeta * r + 3] = affordable_slot();
    post(out_.data(), in_.data(), out_.size(), Op::bxor, &Creation::met);
  }

  // The largest window slot, halving from the parent's, whose windows (the
  // communicator's credits, and its lane's when this member asks for tags)
  // fit what is left of this rank's window budget; not below kMinSlot (or
  // the parent's slot when that is smaller). EngineOptions::window_budget.
  std::uint64_t affordable_slot() const {
    static constexpr std::uint64_t kMinSlot = std::uint64_t{64} << 10;
    const std::uint64_t parent_slot = parent_->group.slot_bytes;
    const std::uint64_t budget = parent_->core->opts.window_budget;
    if (budget == 0) return parent_slot;
    const std::uint64_t used = parent_->core->window_bytes.load(std::memory_order_relaxed);
    const std::uint64_t left = budget > used ? budget - used : 0;
    const auto slots = static_cast<std::uint64_t>(parent_->group.credits + (tags_ > 0 ? lane_credits(tags_) : 0));
    // What does not scale with the slot (flag words, the mapped area), as in the parent's window.
    const std::uint64_t fixed =
        parent_->window_bytes() - static_cast<std::uint64_t>(parent_->group.credits) * parent_slot;
    const std::uint64_t floor = std::min(parent_slot, kMinSlot);
    std::uint64_t slot = parent_slot;
    while (slot > floor && fixed + slots * slot > left) slot = std::max(floor, slot / 2 / 4096 * 4096);
    return slot;
  }

  // Members of my color ordered by (key, parent rank); the tags of the
  // color; whether any color wants a lane (then every member agrees on a
  // second id).
  void met() {
    slot_ = parent_->group.slot_bytes;
    for (int r = 0; r < parent_->size(); ++r) {
      const auto at = kMeta * static_cast<std::size_t>(r);
      const auto col = static_cast<std::int64_t>(in_[at]);
      const auto t = static_cast<int>(in_[at + 2]);
      any_lane_ = any_lane_ || (col >= 0 && t > 0);
      if (color_ >= 0 && col == color_) {
        mine_.emplace_back(static_cast<std::int64_t>(in_[at + 1]), r);
        my_tags_ = std::max(my_tags_, t);
        slot_ = std::min<std::size_t>(slot_, static_cast<std::size_t>(in_[at + 3]));  // every member's budget
      }
    }
    if (slot_ < parent_->group.slot_bytes)
      detail::logger().info(
          "communicator creation: window slots of {} bytes (parent's {}): the window budget of "
          "a member (STRATA_WINDOW_BUDGET) is nearly used",
          slot_, parent_->group.slot_bytes);
    std::sort(mine_.begin(), mine_.end());
    from_ = pool().start();
    propose();
  }

  // Step 2, one round: every member proposes its lowest free id from
  // from_; the maximum is the candidate.
  void propose() {
    if (++rounds_ > 2 * pool().limit()) throw Error(pool().exhausted(who_, "communicator"));
    word_out_ = pool().lowest_free(from_);
    post(&word_out_, &word_in_, 1, Op::max, &Creation::proposed);
  }

  // Reserves the candidate here when free; every member answers.
  void proposed() {
    if (word_in_ >= pool().limit()) throw Error(pool().exhausted(who_, "communicator"));
    candidate_ = static_cast<std::uint32_t>(word_in_);
    reserved_ = pool().reserve(candidate_);
    word_out_ = reserved_ ? 1 : 0;
    post(&word_out_, &word_in_, 1, Op::min, &Creation::answered);
  }

  void answered() {
    const bool agreed = word_in_ == 1;
    const bool keep = color_ >= 0 && (phase_ == 0 || my_tags_ > 0);
    pool().settle(candidate_, reserved_, agreed, keep);
    reserved_ = false;
    if (!agreed) {
      from_ = pool().after(candidate_);
      propose();
      return;
    }
    ids_[phase_] = candidate_;
    taken_[phase_] = keep;
    if (phase_ == 0 && any_lane_) {
      phase_ = 1;
      from_ = pool().start();
      propose();
      return;
    }
    open_windows();
  }

  // Step 3: the new communicator (and its lane) with open windows; their
  // keys (the communicator's, then the lane's) of every member of the parent.
  void open_windows() {
    std::vector<int> members;
    for (const auto& m : mine_) members.push_back(m.second);
    transport::RemoteKey my_key{}, my_lane_key{};
    if (color_ >= 0) {
      ni_ = make_child(*parent_, members, ids_[0], parent_->group.credits, false, slot_);
      taken_[0] = false;                            // ni_ owns it (~CommImpl releases it)
      my_key = ni_->open_window(/*settle=*/false);  // waited for at the end (keyed)
      if (my_tags_ > 0) {
        ln_ = make_child(*parent_, members, ids_[1], lane_credits(my_tags_), true, slot_);
        taken_[1] = false;
        ln_->tag_count = my_tags_;
        ln_->parent_id = static_cast<std::uint16_t>(ids_[0]);
        my_lane_key = ln_->open_window(/*settle=*/false);
      }
    }
    const std::size_t w = 2 * kKeyWords;
    const auto n = static_cast<std::size_t>(parent_->size());
    const auto r = static_cast<std::size_t>(parent_->rank());
    out_.assign(w * n, 0);
    in_.assign(w * n, 0);
    std::memcpy(out_.data() + w * r, &my_key, sizeof my_key);
    std::memcpy(out_.data() + w * r + kKeyWords, &my_lane_key, sizeof my_lane_key);
    post(out_.data(), in_.data(), out_.size(), Op::bxor, &Creation::keyed);
  }

  // Step 4: the keys in place; the new communicator's window protocol
  // agreed on it (CommImpl::enable_flags in halves: one kFlagWords-word allreduce on
  // the new communicator, then one on its lane).
  void keyed() {
    if (!ni_) {
      finish(Communicator());
      return;
    }
    auto keys_of = [&](std::size_t at) {
      std::vector<transport::RemoteKey> mk;
      for (const auto& m : mine_) {
        transport::RemoteKey k;
        std::memcpy(static_cast<void*>(&k), in_.data() + static_cast<std::size_t>(m.second) * 2 * kKeyWords + at,
                    sizeof k);
        mk.push_back(k);
      }
      return mk;
    };
    ni_->set_peer_keys(keys_of(0));
    if (ln_) ln_->set_peer_keys(keys_of(kKeyWords));
    agree_flags(*ni_, &Creation::flagged);
  }

  void agree_flags(CommImpl& c, Step next) {
    prop_ = c.flags_propose();
    for (std::size_t i = 0; i < CommImpl::kFlagWords; ++i) agreed_[i] = prop_.words[i];
    if (c.size() <= 1) {
      (this->*next)();
      return;
    }
    chain(c.agree_words(prop_.words, agreed_, CommImpl::kFlagWords), next);
  }

  void flagged() {
    ni_->flags_apply(prop_, agreed_);
    ni_->seal_bindings();
    if (!ln_) {
      done();
      return;
    }
    agree_flags(*ln_, &Creation::lane_flagged);  // its own calls, untagged, come first
  }

  void lane_flagged() {
    ln_->flags_apply(prop_, agreed_);
    ln_->seal_bindings();
    ln_->start_tags();
    detail::register_comm(*parent_->core, ln_);
    ni_->tag_lane = ln_;
    done();
  }

  void done() {
    detail::register_comm(*parent_->core, ni_);
    finish(Communicator(ni_));
  }

  // The end: the same-host members mapped the shared windows (they did,
  // mostly, during the agreements; bounded at 10 s like the blocking path),
  // the calls held behind the creation start (with STRATA_CHECK their
  // signature checks wait), the future completes.
  void finish(Communicator c) {
    for (CommImpl* w : {ni_.get(), ln_.get()})
      if (w != nullptr && !w->window_settled() && w->core->progress)
        w->core->progress->wait_until([w] { return w->window_settled(); }, std::chrono::seconds(10));
    ln_.reset();
    ni_.reset();
    stream().release_hold(tag_);
    promise_.set_value(std::move(c));
  }

  void fail(const Status& why) {
    if (reserved_) pool().settle(candidate_, true, false, false);
    reserved_ = false;
    for (int i = 0; i < 2; ++i)
      if (taken_[i]) pool().release(ids_[i]), taken_[i] = false;
    ln_.reset();
    ni_.reset();
    stream().release_hold(tag_);
    promise_.set_error(Status(why.code(), who_ + ": " + why.message()));
  }

  static constexpr std::size_t kKeyWords = sizeof(transport::RemoteKey) / 8;

  std::shared_ptr<CommImpl> parent_;
  int color_, key_, tags_, tag_;
  Promise<Communicator> promise_;
  std::string who_;
  std::vector<std::uint64_t> out_, in_;  // the step in flight's blocks
  std::uint64_t word_out_ = 0, word_in_ = 0;
  std::vector<std::pair<std::int64_t, int>> mine_;
  int my_tags_ = 0;
  bool any_lane_ = false;
  int phase_ = 0;  // the id agreed: 0 the communicator's, 1 its lane's
  std::uint32_t from_ = 0, rounds_ = 0, candidate_ = 0;
  bool reserved_ = false;
  CommImpl::FlagsProposal prop_;  // the window protocol's agreement in flight
  std::uint64_t agreed_[CommImpl::kFlagWords] = {};
  static constexpr std::size_t kMeta = 4;  // words per member in exchange_meta
  std::size_t slot_ = 0;                   // the new communicator's window slot (met: every member's minimum)
  std::uint32_t ids_[2] = {0, 0};
  bool taken_[2] = {false, false};  // taken here and not yet owned by a communicator
  std::shared_ptr<CommImpl> ni_, ln_;
};

}  // namespace

Future<Communicator> Communicator::split_async(int color, int key, const CreateOptions& opts) const {
  detail::need(impl_, "split");
  throw_if_error(impl_->core->check_alive("split"));
  const std::string on = "split on rank " + std::to_string(impl_->rank());
  if (opts.tags < 0 || opts.tags > detail::kMaxTags)
    throw Error(Errc::invalid_argument, on + ": argument 'tags' = " + std::to_string(opts.tags) +
                                            " out of range (0 .. " + std::to_string(detail::kMaxTags) + ")");
  if (opts.tag >= 0 && (!impl_->tag_lane || opts.tag >= impl_->tag_lane->tag_count))
    throw Error(Errc::invalid_argument, on + ": argument 'tag' = " + std::to_string(opts.tag) +
                                            " out of range: the communicator takes " + std::to_string(tags()) +
                                            " tags (give them to split() or dup(); docs/embedding.md)");
  if (opts.tag < -1)
    throw Error(Errc::invalid_argument, on + ": argument 'tag' = " + std::to_string(opts.tag) + " is negative");
  auto c = std::make_shared<Creation>(impl_, color, key, opts);
  Future<Communicator> f = c->future();
  c->begin();
  return f;
}

Future<Communicator> Communicator::dup_async(const CreateOptions& opts) const {
  detail::need(impl_, "dup");
  return split_async(0, rank(), opts);
}

Communicator Communicator::split(int color, int key, int tags) const {
  CreateOptions o;
  o.tags = tags;
  return split_async(color, key, o).get();
}

Communicator Communicator::dup(int tags) const { return split(0, rank(), tags); }

}  // namespace strata
