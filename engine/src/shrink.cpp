// Communicator::revoke(), shrink() and failed_members() (docs/reliability.md,
// "Revoke and shrink").
//
// Messages are transport signals with tag dag::kShrinkComm, sent from and
// handled on the progress context:
//   bits 63..48 tag, 47..32 the parent communicator's id, 31..29 the type,
//   28..24 a chunk index, 23..0 data (24 bits).
// Types:
//   revoke    the sender revoked the communicator (each member forwards the
//             first one it gets to every other member, so the revocation
//             reaches everybody even when its origin dies while sending).
//   probe     the coordinator (the lowest member this rank believes alive)
//             asks for a report; data = the base b of a window of 24
//             communicator ids.
//   report    chunks 0..k-1: the sender's view of the dead members (24 per
//             chunk); chunk k: which ids of [b, b + 24) are free on it.
//   decision  chunks 0..k-1: the members excluded; chunk k: the new
//             communicator's id. From the coordinator to every survivor, and
//             from a member that had decided back to a probing coordinator
//             (which then adopts it: once any survivor may have returned from
//             shrink with a decision, every later coordinator repeats it).
//   key       chunks 0..21: the sender's window key of the new communicator
//             (64 bytes, 24 bits a chunk), to every other survivor.
// Every member answers probes from its progress context, also before it
// calls shrink and after it returned, so a coordinator that takes over after
// the previous one died hears from every live member. The agreement assumes
// that a member declared dead stays dead (strata-run fences the ranks it
// declares dead; docs/reliability.md) and that signals between two ranks
// arrive in the order they were sent.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>

#include "comm.hpp"
#include "hooks.hpp"

namespace strata::detail {

namespace {

enum class Msg : std::uint32_t { revoke = 0, probe = 1, report = 2, decision = 3, key = 4 };
constexpr std::uint32_t kChunkBits = 24;
constexpr std::uint32_t kChunkMask = (1u << kChunkBits) - 1;
constexpr std::uint32_t kMaxChunks = 32;
constexpr std::uint32_t kKeyChunks = (sizeof(transport::RemoteKey) * 8 + kChunkBits - 1) / kChunkBits;  // 22
static_assert(kKeyChunks <= kMaxChunks, "a window key must fit in the chunk index");

constexpr std::uint64_t encode(std::uint16_t comm, Msg type, std::uint32_t chunk, std::uint32_t data) noexcept {
  return (std::uint64_t{dag::kShrinkComm} << 48) | (std::uint64_t{comm} << 32) |
         (std::uint64_t{static_cast<std::uint32_t>(type) & 7u} << 29) | (std::uint64_t{chunk & 31u} << 24) |
         std::uint64_t{data & kChunkMask};
}

// The chunks of a bitmap over @p n members (24 members a chunk).
std::uint32_t bitmap_chunks(std::size_t n) { return static_cast<std::uint32_t>((n + kChunkBits - 1) / kChunkBits); }

std::uint32_t bitmap_chunk(const std::vector<bool>& bits, std::uint32_t chunk) {
  std::uint32_t v = 0;
  for (std::uint32_t b = 0; b < kChunkBits; ++b) {
    const std::size_t i = std::size_t{chunk} * kChunkBits + b;
    if (i < bits.size() && bits[i]) v |= 1u << b;
  }
  return v;
}

void set_bitmap_chunk(std::vector<bool>& bits, std::uint32_t chunk, std::uint32_t v) {
  for (std::uint32_t b = 0; b < kChunkBits; ++b) {
    const std::size_t i = std::size_t{chunk} * kChunkBits + b;
    if (i < bits.size() && ((v >> b) & 1u) != 0) bits[i] = true;
  }
}

}  // namespace

// One communicator's revocation and shrink (CommImpl::shrink_state).
struct ShrinkState {
  std::mutex mu;
  std::condition_variable cv;
  bool revoked = false;
  // The agreement.
  bool decided = false;
  std::vector<bool> excluded;  // members not in the new communicator
  std::uint32_t new_id = 0;
  bool shrunk = false;     // shrink() returned here (a second call is refused)
  std::uint32_t base = 0;  // of the last probe this rank answered
  // Coordinator side: the current probe.
  bool probing = false;
  std::uint32_t probe_base = 0;
  std::vector<std::uint32_t> got;        // chunks received from each member
  std::vector<bool> reported_dead;       // union of the reports
  std::vector<std::uint32_t> free_bits;  // free ids of [base, base + 24) per member
  std::vector<bool> adopt_excluded;      // a decision a member reported
  std::vector<std::uint32_t> adopt_got;  // its chunks, per member
  std::optional<std::uint32_t> adopt_id;
  // Keys of the new communicator's windows, per member of the parent.
  std::vector<std::array<std::uint32_t, kMaxChunks>> keys;
  std::vector<std::uint32_t> key_got;
};

namespace {

std::shared_ptr<ShrinkState> state_of(CommImpl& c) {
  std::lock_guard<CommLock> lk(c.mu);
  if (!c.shrink_state) {
    auto s = std::make_shared<ShrinkState>();
    const auto n = static_cast<std::size_t>(c.size());
    s->excluded.assign(n, false);
    s->got.assign(n, 0);
    s->reported_dead.assign(n, false);
    s->free_bits.assign(n, 0);
    s->adopt_excluded.assign(n, false);
    s->adopt_got.assign(n, 0);
    s->keys.assign(n, {});
    s->key_got.assign(n, 0);
    c.shrink_state = std::move(s);
  }
  return c.shrink_state;
}

bool member_alive(const CommImpl& c, int r) {
  if (r == c.rank()) return true;
  return c.core->transport->peer_status(c.group.world[static_cast<std::size_t>(r)]).is_ok();
}

void send(const CommImpl& c, int r, std::uint64_t payload) {
  if (r == c.rank() || !member_alive(c, r)) return;
  (void)c.core->transport->signal(c.group.world[static_cast<std::size_t>(r)], payload, nudge_context());
}

// A report or decision to member @p r: @p bits in chunks, then @p last.
void send_bitmap(const CommImpl& c, int r, Msg type, const std::vector<bool>& bits, std::uint32_t last) {
  const std::uint32_t k = bitmap_chunks(bits.size());
  for (std::uint32_t i = 0; i < k; ++i) send(c, r, encode(c.id, type, i, bitmap_chunk(bits, i)));
  send(c, r, encode(c.id, type, k, last));
}

// Fails what is queued or in flight here with @p why, once; false when the
// communicator was revoked already.
bool revoke_here(CommImpl& c, const Status& why) {
  auto st = state_of(c);
  {
    std::lock_guard<std::mutex> lk(st->mu);
    if (st->revoked) return false;
    st->revoked = true;
  }
  std::vector<std::uint32_t> running;
  {
    std::lock_guard<CommLock> lk(c.mu);
    if (c.broken.is_ok()) c.broken = why;
    for (const auto& sl : c.slots)
      if (sl.busy) running.push_back(sl.live_seq);
  }
  c.fail_all(why);
  if (c.tag_lane) revoke_here(*c.tag_lane, why);
  // The executor's instances stop launching nodes and finish once what they
  // posted completed (their futures already hold the error).
  for (std::uint32_t seq : running) (void)c.core->exec->cancel(c.id, seq);
  return true;
}

void send_report(CommImpl& c, ShrinkState& st, int coordinator) {
  const auto n = static_cast<std::size_t>(c.size());
  std::vector<bool> dead(n, false);
  for (int r = 0; r < c.size(); ++r) dead[static_cast<std::size_t>(r)] = !member_alive(c, r);
  bool decided = false;
  std::vector<bool> excluded;
  std::uint32_t id = 0;
  std::uint32_t base = 0;
  {
    std::lock_guard<std::mutex> lk(st.mu);
    decided = st.decided;
    excluded = st.excluded;
    id = st.new_id;
    base = st.base;
  }
  if (decided) {  // the coordinator adopts it
    send_bitmap(c, coordinator, Msg::decision, excluded, id);
    return;
  }
  std::uint32_t free_bits = 0;
  for (std::uint32_t b = 0; b < kChunkBits; ++b)
    if (c.core->comm_ids.is_free(base + b)) free_bits |= 1u << b;
  send_bitmap(c, coordinator, Msg::report, dead, free_bits);
}

// Coordinator: a complete decision (adopted or computed) goes to every survivor.
void announce(CommImpl& c, ShrinkState& st) {
  std::vector<bool> excluded;
  std::uint32_t id = 0;
  {
    std::lock_guard<std::mutex> lk(st.mu);
    excluded = st.excluded;
    id = st.new_id;
  }
  for (int r = 0; r < c.size(); ++r)
    if (!excluded[static_cast<std::size_t>(r)]) send_bitmap(c, r, Msg::decision, excluded, id);
}

// A decision chunk arrived (from the coordinator, or a member's adopted one).
void on_decision(CommImpl& c, ShrinkState& st, int from, std::uint32_t chunk, std::uint32_t data) {
  const std::uint32_t k = bitmap_chunks(static_cast<std::size_t>(c.size()));
  std::lock_guard<std::mutex> lk(st.mu);
  if (st.decided) return;
  const auto f = static_cast<std::size_t>(from);
  if (chunk < k) {
    set_bitmap_chunk(st.adopt_excluded, chunk, data);
  } else {
    st.adopt_id = data;
  }
  if (++st.adopt_got[f] < k + 1 || !st.adopt_id) return;
  st.excluded = st.adopt_excluded;
  st.new_id = *st.adopt_id;
  st.decided = true;
  st.cv.notify_all();
}

void on_report(CommImpl& c, ShrinkState& st, int from, std::uint32_t chunk, std::uint32_t data) {
  const std::uint32_t k = bitmap_chunks(static_cast<std::size_t>(c.size()));
  std::lock_guard<std::mutex> lk(st.mu);
  if (!st.probing) return;
  const auto f = static_cast<std::size_t>(from);
  if (chunk < k)
    set_bitmap_chunk(st.reported_dead, chunk, data);
  else
    st.free_bits[f] = data;
  ++st.got[f];
  st.cv.notify_all();
}

void on_key(CommImpl& c, ShrinkState& st, int from, std::uint32_t chunk, std::uint32_t data) {
  (void)c;
  std::lock_guard<std::mutex> lk(st.mu);
  const auto f = static_cast<std::size_t>(from);
  if (chunk >= kKeyChunks) return;
  st.keys[f][chunk] = data;
  ++st.key_got[f];
  st.cv.notify_all();
}

// The communicator @p id, or null (after keeping the message when its
// communicator is still being made here).
std::shared_ptr<CommImpl> find_comm(EngineCore& core, std::uint16_t id, int source, std::uint64_t payload) {
  std::lock_guard<std::mutex> lk(core.id_mu);
  for (auto& w : core.comms)
    if (auto c = w.lock())
      if (c->id == id) return c;
  // Kept only while the id is taken here (a split or shrink that took it has
  // not registered its communicator yet); a message for a freed id is dropped.
  if (core.comm_ids.is_free(id)) return nullptr;
  if (core.early_shrink.size() >= EngineCore::kEarlyShrinkMax) core.early_shrink.erase(core.early_shrink.begin());
  core.early_shrink.emplace_back(source, payload);
  return nullptr;
}

Status revoked_status(const CommImpl& c, int origin) {
  return {Errc::revoked, "communicator " + std::to_string(c.id) + " on rank " + std::to_string(c.rank()) +
                             ": revoked by member rank " + std::to_string(origin) +
                             " (shrink it to go on with the survivors)"};
}

void forward_revoke(CommImpl& c) {
  for (int r = 0; r < c.size(); ++r) send(c, r, encode(c.id, Msg::revoke, 0, 0));
}

}  // namespace

void register_comm(EngineCore& core, const std::shared_ptr<CommImpl>& c) {
  std::vector<std::pair<int, std::uint64_t>> early;
  {
    std::lock_guard<std::mutex> lk(core.id_mu);
    // Bounded by the live communicators (make_shared: an expired entry would
    // keep the whole CommImpl's memory).
    core.comms.erase(std::remove_if(core.comms.begin(), core.comms.end(), [](const auto& w) { return w.expired(); }),
                     core.comms.end());
    core.comms.push_back(c);
    auto& e = core.early_shrink;
    for (auto it = e.begin(); it != e.end();) {
      if (static_cast<std::uint16_t>(it->second >> 32) == c->id) {
        early.push_back(*it);
        it = e.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& m : early) shrink_signal(core, m.first, m.second);
}

void shrink_signal(EngineCore& core, int source, std::uint64_t payload) {
  const auto id = static_cast<std::uint16_t>(payload >> 32);
  auto c = find_comm(core, id, source, payload);
  if (!c) return;  // kept until the communicator is registered here
  const auto& w = c->group.world;
  const auto it = std::find(w.begin(), w.end(), source);
  if (it == w.end()) return;
  const int from = static_cast<int>(it - w.begin());
  const auto type = static_cast<Msg>((payload >> 29) & 7u);
  const auto chunk = static_cast<std::uint32_t>((payload >> 24) & 31u);
  const auto data = static_cast<std::uint32_t>(payload & kChunkMask);
  auto st = state_of(*c);
  switch (type) {
    case Msg::revoke:
      if (revoke_here(*c, revoked_status(*c, from))) forward_revoke(*c);
      break;
    case Msg::probe: {
      {
        std::lock_guard<std::mutex> lk(st->mu);
        st->base = data;
      }
      send_report(*c, *st, from);
      break;
    }
    case Msg::report:
      on_report(*c, *st, from, chunk, data);
      break;
    case Msg::decision:
      on_decision(*c, *st, from, chunk, data);
      break;
    case Msg::key:
      on_key(*c, *st, from, chunk, data);
      break;
  }
}

namespace {

// The coordinator's step: starts a probe, or ends one whose reports are all
// in. Returns with st.decided set when it decided.
void coordinate(CommImpl& c, ShrinkState& st, std::uint32_t& next_base) {
  const auto n = static_cast<std::size_t>(c.size());
  const std::uint32_t k = bitmap_chunks(n);
  std::unique_lock<std::mutex> lk(st.mu);
  if (st.decided) return;
  if (!st.probing) {
    st.probing = true;
    st.probe_base = next_base;
    std::fill(st.got.begin(), st.got.end(), 0);
    std::fill(st.reported_dead.begin(), st.reported_dead.end(), false);
    std::fill(st.free_bits.begin(), st.free_bits.end(), 0);
    const std::uint32_t base = st.probe_base;
    lk.unlock();
    for (int r = 0; r < c.size(); ++r) send(c, r, encode(c.id, Msg::probe, 0, base));
    return;
  }
  // Done when every member this rank believes alive answered in full.
  std::vector<bool> dead = st.reported_dead;
  for (std::size_t r = 0; r < n; ++r) {
    const int ri = static_cast<int>(r);
    if (ri == c.rank()) continue;
    if (!member_alive(c, ri)) {
      dead[r] = true;
      continue;
    }
    if (st.got[r] < k + 1) return;  // still waiting (or adopting a decision)
  }
  if (st.decided) return;
  dead[static_cast<std::size_t>(c.rank())] = false;
  std::uint32_t common = kChunkMask;
  for (std::uint32_t b = 0; b < kChunkBits; ++b)
    if (!c.core->comm_ids.is_free(st.probe_base + b)) common &= ~(1u << b);
  for (std::size_t r = 0; r < n; ++r)
    if (!dead[r] && static_cast<int>(r) != c.rank()) common &= st.free_bits[r];
  st.probing = false;
  if (common == 0) {  // no id of this window is free everywhere: the next one
    next_base = st.probe_base + kChunkBits >= dag::kFirstSignalTag ? 1 : st.probe_base + kChunkBits;
    return;
  }
  std::uint32_t b = 0;
  while (((common >> b) & 1u) == 0) ++b;
  st.excluded = dead;
  st.new_id = st.probe_base + b;
  st.decided = true;
  st.cv.notify_all();
  lk.unlock();
  announce(c, st);
}

// Waits for the agreement (this rank coordinates while it is the lowest
// member it believes alive).
void agree(CommImpl& c, ShrinkState& st) {
  std::uint32_t next_base = c.core->comm_ids.lowest_free(1);
  int coordinator = -1;
  for (;;) {
    int lowest = 0;
    while (lowest < c.rank() && !member_alive(c, lowest)) ++lowest;
    if (lowest != coordinator) {  // the coordinator changed: a new probe (or this rank answers the new one)
      coordinator = lowest;
      std::lock_guard<std::mutex> lk(st.mu);
      st.probing = false;
    }
    if (coordinator == c.rank()) coordinate(c, st, next_base);
    std::unique_lock<std::mutex> lk(st.mu);
    if (!st.decided) st.cv.wait_for(lk, std::chrono::milliseconds(20));
    if (st.decided) {
      lk.unlock();
      // A coordinator that adopted a member's decision repeats it to everyone.
      if (coordinator == c.rank()) announce(c, st);
      return;
    }
    if (!c.core->alive.load(std::memory_order_acquire)) throw Error(c.core->check_alive("Communicator::shrink"));
  }
}

}  // namespace
}  // namespace strata::detail

namespace strata {

using namespace detail;  // NOLINT: the revoke and shrink machinery above

void Communicator::revoke() {
  if (!impl_) throw Error(Errc::invalid_argument, "revoke: the communicator handle is empty");
  CommImpl& c = *impl_;
  if (revoke_here(c, Status(Errc::revoked, "communicator " + std::to_string(c.id) + " on rank " +
                                               std::to_string(c.rank()) + ": revoked here")))
    forward_revoke(c);
}

std::vector<int> Communicator::failed_members() const {
  std::vector<int> out;
  if (!impl_) return out;
  for (int r = 0; r < impl_->size(); ++r)
    if (!detail::member_alive(*impl_, r)) out.push_back(r);
  return out;
}

// Over ~80 lines: the shrink protocol's steps in order (agreement, survivors, new communicator).
Communicator Communicator::shrink() {
  if (!impl_) throw Error(Errc::invalid_argument, "shrink: the communicator handle is empty");
  CommImpl& c = *impl_;
  const std::string who = "shrink on rank " + std::to_string(c.rank()) + " (communicator " + std::to_string(c.id) + ")";
  throw_if_error(c.core->check_alive("shrink"));
  if (bitmap_chunks(static_cast<std::size_t>(c.size())) + 1 > kMaxChunks)
    throw Error(Errc::unsupported, who + ": at most " + std::to_string((kMaxChunks - 1) * kChunkBits) +
                                       " members (the communicator has " + std::to_string(c.size()) + ")");
  auto st = state_of(c);
  {
    std::lock_guard<std::mutex> lk(st->mu);
    if (st->shrunk) throw Error(Errc::unsupported, who + ": already shrunk once; shrink the communicator it returned");
  }
  revoke();
  agree(c, *st);
  std::vector<bool> excluded;
  std::uint32_t id = 0;
  {
    std::lock_guard<std::mutex> lk(st->mu);
    excluded = st->excluded;
    id = st->new_id;
    st->shrunk = true;
  }
  if (excluded[static_cast<std::size_t>(c.rank())])
    throw Error(Errc::peer_dead, who + ": the survivors excluded this rank (it was declared dead)");
  if (!c.core->comm_ids.take(id))
    throw Error(Errc::internal, who + ": the agreed communicator id " + std::to_string(id) +
                                    " is no longer free here (a split or dup ran at the same time)");
  // The survivors, in the order of the parent.
  auto ni = std::make_shared<CommImpl>();
  ni->core = c.core;
  ni->id = static_cast<std::uint16_t>(id);
  ni->group.world_size = c.group.world_size;
  ni->group.slot_bytes = c.group.slot_bytes;
  ni->group.credits = c.group.credits;
  ni->group.tuning = c.group.tuning;
  std::vector<int> members;
  for (int r = 0; r < c.size(); ++r) {
    const auto ur = static_cast<std::size_t>(r);
    if (excluded[ur]) continue;
    if (r == c.rank()) ni->group.rank = static_cast<int>(members.size());
    members.push_back(r);
    ni->group.world.push_back(c.group.world[ur]);
    ni->group.host.push_back(c.group.host[ur]);
    ni->group.numa.push_back(c.group.numa[ur]);
    ni->group.package.push_back(c.group.package_of(r));
  }
  const transport::RemoteKey my_key = ni->open_window();
  std::array<std::uint32_t, kMaxChunks> mine{};
  {
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(&my_key);
    for (std::size_t bit = 0; bit < sizeof my_key * 8; ++bit)
      if (((bytes[bit / 8] >> (bit % 8)) & 1u) != 0) mine[bit / kChunkBits] |= 1u << (bit % kChunkBits);
  }
  for (int r : members)
    for (std::uint32_t i = 0; i < kKeyChunks; ++i) send(c, r, encode(c.id, Msg::key, i, mine[i]));
  // Every survivor's key, or its death (it then has no key and the new
  // communicator starts with that member dead: ULFM's shrink too may return
  // a communicator with a failed member).
  std::vector<transport::RemoteKey> keys(members.size());
  std::vector<int> died;
  for (;;) {
    bool done = true;
    {
      std::unique_lock<std::mutex> lk(st->mu);
      for (int r : members)
        if (r != c.rank() && st->key_got[static_cast<std::size_t>(r)] < kKeyChunks && member_alive(c, r)) done = false;
      if (!done) st->cv.wait_for(lk, std::chrono::milliseconds(20));
    }
    if (done) break;
    throw_if_error(c.core->check_alive("shrink"));
  }
  {
    std::lock_guard<std::mutex> lk(st->mu);
    for (std::size_t i = 0; i < members.size(); ++i) {
      const auto r = static_cast<std::size_t>(members[i]);
      if (members[i] == c.rank()) {
        keys[i] = my_key;
        continue;
      }
      if (st->key_got[r] < kKeyChunks) {
        keys[i] = transport::RemoteKey{};  // owner -1: no key
        died.push_back(c.group.world[r]);
        continue;
      }
      auto* bytes = reinterpret_cast<std::uint8_t*>(&keys[i]);
      std::memset(bytes, 0, sizeof keys[i]);
      for (std::size_t bit = 0; bit < sizeof keys[i] * 8; ++bit)
        if (((st->keys[r][bit / kChunkBits] >> (bit % kChunkBits)) & 1u) != 0)
          bytes[bit / 8] = static_cast<std::uint8_t>(bytes[bit / 8] | (1u << (bit % 8)));
    }
  }
  ni->set_peer_keys(keys);
  for (int w : died) ni->member_died(w, Status(Errc::peer_dead, "died during shrink"));
  try {
    ni->enable_flags();  // one allreduce on the new communicator
  } catch (const Error& e) {
    // A survivor died after the agreement: the new communicator is broken
    // (its calls fail naming the member); shrink it in turn.
    std::lock_guard<CommLock> lk(ni->mu);
    if (ni->broken.is_ok()) ni->broken = Status(e.errc(), e.what());
  }
  ni->seal_bindings();
  register_comm(*c.core, ni);
  return Communicator(ni);
}

}  // namespace strata
