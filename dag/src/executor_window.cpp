// The oneTBB executor: the window protocol. Flag waits that were late
// (parked, polled, nudged), grants and grant requests between hosts, drain
// watermarks, vouching, and Executor::bind_flags, which sets them up. The
// fast paths (a flag already set, nothing pending, no drain bound) stay
// inline in executor_impl.hpp.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "executor_impl.hpp"
#include "trace.hpp"

namespace strata {
namespace dag {

using exec::now_ns;
using exec::raise_to;

void Executor::Impl::park(bool parking) {
  if (!parking) {
    parked.fetch_sub(1, std::memory_order_seq_cst);
    return;
  }
  parked.fetch_add(1, std::memory_order_seq_cst);
  if (owed_any.load(std::memory_order_acquire)) send_all_owed();
  if (nflag_pending.load(std::memory_order_seq_cst) == 0) return;
  {
    std::lock_guard<strata::detail::SpinLock> g(flag_mu);
    for (auto& [in, id] : flag_pending) {
      const Node& nd = in->plan->nodes()[id];
      if (!nd.granted && !in->failed.load(std::memory_order_acquire)) want_nudge(in, nd);
    }
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  poll_flags();  // a flag set before the owner could see the wake words
}

// Sends the watermarks @p d owes, except to the peers @p skip signals (its
// drained signals carry them).
void Executor::Impl::send_owed(Drain* d, const Plan* skip) {
  if (!d->any_owed.exchange(false, std::memory_order_acq_rel)) return;
  const bool active = d->active.load(std::memory_order_acquire);
  for (std::size_t r = 0; r < d->copies.size(); ++r) {
    if (d->owed[r].load(std::memory_order_relaxed) == 0) continue;
    if (active && skip != nullptr && skip->signals(static_cast<int>(r))) {
      d->any_owed.store(true, std::memory_order_release);
      continue;
    }
    const std::uint32_t v = d->owed[r].exchange(0, std::memory_order_acq_rel);
    if (v != 0 && active)
      (void)tp.signal(static_cast<int>(r), encode_grant(kWatermarkComm, d->comm, 0, v & kSeqMask), &grant_ctx);
  }
}

// Every owed watermark (a thread of this rank is about to block).
void Executor::Impl::send_all_owed() {
  if (!owed_any.exchange(false, std::memory_order_acq_rel)) return;
  std::vector<Drain*> ds;
  {
    std::lock_guard<std::mutex> g(grant_mu);
    for (const auto& d : drain_store)
      if (d->any_owed.load(std::memory_order_acquire)) ds.push_back(d.get());
  }
  for (Drain* d : ds) send_owed(d, nullptr);
}

// Sends a grant for each recorded request whose need this rank's flag now meets.
void Executor::Impl::answer_requests() {
  std::vector<std::pair<int, std::uint64_t>> out;
  {
    std::lock_guard<std::mutex> g(grant_mu);
    std::size_t keep = 0;
    for (const GrantRequest& q : grant_requests) {
      const auto it = grant_tables.find(q.comm);
      std::atomic<std::uint32_t>* own = nullptr;
      if (it != grant_tables.end() && static_cast<std::size_t>(tp.rank()) < it->second.second)
        own = it->second.first[tp.rank()];
      if (own == nullptr) continue;  // communicator gone: drop
      const std::uint32_t have = own[q.slot].load(std::memory_order_acquire);
      Drain* const d = drain_of(q.comm);
      const auto from = static_cast<std::size_t>(q.from);
      if (d != nullptr && d->was_sent(from, q.slot, q.need)) continue;  // a grant that meets it is on its way
      if (reached(have, q.need)) {
        if (d == nullptr || d->note_sent(from, q.slot, have))
          out.emplace_back(q.from, encode_grant(kGrantComm, q.comm, q.slot, have));
      } else {
        grant_requests[keep++] = q;
      }
    }
    grant_requests.resize(keep);
    ngrant_requests.store(keep, std::memory_order_seq_cst);
  }
  for (const auto& [to, payload] : out) (void)tp.signal(to, payload, &grant_ctx);
}

// A grant or a request for one (payload tag kGrantComm / kGrantRequestComm).
void Executor::Impl::handle_grant(int source, std::uint64_t payload) {
  const GrantKey k = decode_grant(payload);
  if (source < 0 || source >= nranks || k.slot >= kMaxGrantSlots) return;
  if (k.tag == kGrantComm) {
    {
      std::lock_guard<std::mutex> g(grant_mu);
      const auto it = grant_tables.find(k.comm);
      if (it == grant_tables.end() || static_cast<std::size_t>(source) >= it->second.second) return;
      std::atomic<std::uint32_t>* copy = it->second.first[source];
      if (copy == nullptr) return;
      raise_to(copy[k.slot], k.value);
    }
    poll_flags();
    return;
  }
  {
    std::lock_guard<std::mutex> g(grant_mu);
    grant_requests.push_back({k.comm, k.slot, k.value, source});
    ngrant_requests.store(grant_requests.size(), std::memory_order_seq_cst);
  }
  answer_requests();  // already met, or a flag_set raced with the push
}

// Never blocks: a caller that finds flag_mu held leaves a re-poll request
// that the holder honours once it lets go (so a flag or grant published while
// a scan runs is never missed). Every holder does: a scan looks again, and
// the sections that do not scan (wait_flag's push, park's nudge requests, the
// pending report's copy) poll or wake a server afterwards when they find the
// request (before, a nudge consumed while such a section held the lock left
// its call waiting for the server's next wake-up unless something else
// scanned).
std::size_t Executor::Impl::poll_pending_flags() {
  std::size_t total = 0;
  for (;;) {
    flag_repoll.store(true, std::memory_order_seq_cst);
    // The released waits: on the stack up to kSmall (no allocation per
    // released flag; this runs once per small call), beyond in `more`.
    constexpr std::size_t kSmall = 16;
    std::pair<Instance*, NodeId> small[kSmall];
    std::size_t nready = 0;
    std::vector<std::pair<Instance*, NodeId>> more;
    {
      std::unique_lock<strata::detail::SpinLock> g(flag_mu, std::try_to_lock);
      if (!g.owns_lock()) return total;  // the holder scans again
      flag_repoll.store(false, std::memory_order_seq_cst);
      std::size_t keep = 0;
      for (auto& e : flag_pending) {
        if (e.first->failed.load(std::memory_order_acquire) || flag_ready(e.first, e.first->plan->nodes()[e.second])) {
          if (nready < kSmall)
            small[nready] = e;
          else
            more.push_back(e);
          ++nready;
        } else {
          flag_pending[keep++] = e;
        }
      }
      flag_pending.resize(keep);
      nflag_pending.fetch_sub(nready, std::memory_order_release);
    }
    const bool in_arena = tls_in_task == this;
    for (std::size_t i = 0; i < nready; ++i) {
      const auto [in, id] = i < kSmall ? small[i] : more[i - kSmall];
      if (obs != nullptr) obs->node(*in, id, now_ns());
      completed(in, id, in_arena);
    }
    total += nready;
    if (!flag_repoll.load(std::memory_order_seq_cst) || nflag_pending.load(std::memory_order_acquire) == 0)
      return total;
  }
}

// A flag_wait whose flag was not there when it became ready.
void Executor::Impl::wait_flag(Instance* in, NodeId id, const Node& nd) {
  if (nd.granted) {
    // Park first, then ask: the grant may arrive (and poll) at once.
    {
      std::lock_guard<strata::detail::SpinLock> g(flag_mu);
      flag_pending.emplace_back(in, id);
      nflag_pending.fetch_add(1, std::memory_order_release);
    }
    (void)tp.signal(nd.peer, encode_grant(kGrantRequestComm, in->comm, nd.slot, (in->seq - nd.count + 1) & kSeqMask),
                    &grant_ctx);
    poll_flags();
    return;
  }
  {
    // Park it; while a thread of this rank blocks (park), ask the owner
    // for a nudge and look again. A park(true) that comes later sees
    // the entry and asks itself (the pending entry, then `parked`, on
    // this side; `parked`, then the entries, on park's).
    {
      std::lock_guard<strata::detail::SpinLock> g(flag_mu);
      flag_pending.emplace_back(in, id);
      nflag_pending.fetch_add(1, std::memory_order_seq_cst);
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (parked.load(std::memory_order_seq_cst) > 0) {
      want_nudge(in, nd);
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    // Set meanwhile: release it now; or a poll found the lock held by our
    // push and left its scan to us (poll_pending_flags).
    if (flag_ready(in, nd) || flag_repoll.load(std::memory_order_seq_cst)) poll_flags();
  }
}

// Vouching: a signal of @p source's instance @p seq of @p comm, whose peers
// vouch (Drain::vouch = V): @p source finished its instance seq - V, the
// previous user of window slot (seq - V) % credits for a call seq - V +
// credits: that word of the copy is at least seq - V + 1.
void Executor::Impl::vouch(Drain* d, int source, std::uint16_t comm, std::uint32_t seq) {
  const std::uint32_t done = (seq - d->vouch) & kSeqMask;
  // Only instances from the bind on (earlier ones wrap to "behind" anyway).
  if (((done - d->first) & kSeqMask) >= (kSeqMask >> 1)) return;
  // credits is a power of two dividing 2^28: seq mod 2^28 keeps the slot.
  raise_copy(source, comm,
             [&](std::atomic<std::uint32_t>* copy) { raise_to(copy[done % d->credits], (done + 1) & kSeqMask); });
}

// A signal from @p source said it finished every instance of @p comm before
// @p seq: each of its flag words in the copy is at least seq (a flag word
// w is read as "finished every instance up to w - 1 that used the slot";
// finishing all of them says more), which also keeps every word fresh.
void Executor::Impl::raise_watermark(Drain* d, int source, std::uint16_t comm, std::uint32_t seq) {
  raise_copy(source, comm, [&](std::atomic<std::uint32_t>* copy) {
    for (std::uint32_t s = 0; s < d->credits && s < kMaxGrantSlots; ++s) raise_to(copy[s], seq);
  });
}

template <class F>
void Executor::Impl::raise_copy(int source, std::uint16_t comm, F raise) {
  {
    std::lock_guard<std::mutex> g(grant_mu);
    const auto it = grant_tables.find(comm);
    if (it == grant_tables.end() || static_cast<std::size_t>(source) >= it->second.second) return;
    std::atomic<std::uint32_t>* copy = it->second.first[source];
    if (copy == nullptr) return;
    raise(copy);
  }
  poll_flags();
}

void Executor::Impl::send_grants(const Plan& plan, const Node& nd, Drain* d, std::uint16_t comm, std::uint32_t value,
                                 bool drained, bool batch_due) {
  for (std::int32_t r : nd.grants) {
    // Vouching: this instance's successor `vouch` calls later signals r
    // again when the pattern repeats (a peer that needs it earlier asks).
    if (d != nullptr && d->vouch > 0 && plan.signals(r)) continue;
    if (!drained) {
      // Not twice: an answer to the peer's request may have said as much already.
      if (d == nullptr || d->note_sent(static_cast<std::size_t>(r), nd.slot, value))
        (void)tp.signal(r, encode_grant(kGrantComm, comm, nd.slot, value), &grant_ctx);
    } else if (!plan.signals(r) && batch_due) {
      d->owe(static_cast<std::size_t>(r), value);  // sent later, if at all (Drain::owed)
      owed_any.store(true, std::memory_order_release);
    }
  }
}

void Executor::bind_flags(std::uint16_t comm, std::atomic<std::uint32_t>* const* table, std::size_t n) {
  bind_flags(comm, table, n, {}, 0, 0, 0);
}

void Executor::bind_flags(std::uint16_t comm, std::atomic<std::uint32_t>* const* table, std::size_t n,
                          std::vector<std::uint8_t> copies, std::uint32_t credits, std::uint32_t next_seq,
                          std::uint32_t vouch) {
  Impl& im = *impl_;
  im.forget_comm(comm);  // a new communicator with this id, or none: earlier failure notices are not its own
  std::lock_guard<std::mutex> g(im.grant_mu);
  if (std::atomic<std::atomic<Drain*>*>& at = im.drains_at; at.load(std::memory_order_relaxed) != nullptr)
    if (Drain* d = at.load(std::memory_order_relaxed)[comm].load(std::memory_order_relaxed); d != nullptr)
      d->active.store(false, std::memory_order_release);
  if (table == nullptr) {
    im.grant_tables.erase(comm);
    return;
  }
  im.grant_tables[comm] = {table, n};
  if (copies.empty()) return;
  if (im.drains == nullptr) {
    im.drains.reset(new std::atomic<Drain*>[std::size_t{1} << 16]());
    im.drains_at.store(im.drains.get(), std::memory_order_release);
  }
  im.drain_store.push_back(std::make_unique<Drain>());
  Drain* d = im.drain_store.back().get();
  d->wm.store(next_seq & kSeqMask, std::memory_order_relaxed);
  d->credits = credits;
  // Vouching needs the window slot of a 28-bit sequence number: credits a power of two.
  d->vouch = vouch > 0 && vouch < credits && credits <= kMaxGrantSlots && (credits & (credits - 1)) == 0 ? vouch : 0;
  d->first = next_seq & kSeqMask;
  d->copies = std::move(copies);
  d->sent.reset(new std::atomic<std::uint32_t>[d->copies.size() * kMaxGrantSlots]());
  d->owed.reset(new std::atomic<std::uint32_t>[d->copies.size()]());
  d->comm = comm;
  im.drains[comm].store(d, std::memory_order_release);
  d->active.store(true, std::memory_order_release);
}
}  // namespace dag
}  // namespace strata
