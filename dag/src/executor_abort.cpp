// The oneTBB executor: failed calls. A call that fails softly (a user
// operator or callable threw) on one member fails on every member: the
// origin announces it (kAbortNoticeComm), each member marks its instance
// failed and acknowledges (kAbortAckComm), then the origin tells them all to
// settle (kAbortSettleComm): raise the instance's flags and finish. Dead
// peers (Executor::handle_peer_failure) end the wait for them.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "executor_impl.hpp"

namespace strata {
namespace dag {

// A failure that leaves every member alive (a user operator or callable
// threw): announced to the members, who fail their instance of the call too.
void Executor::Impl::fail_soft(Instance* in, const Status& why) {
  if (mark_failed(in, why, true)) announce(in);
}

void Executor::Impl::remember(std::uint64_t key) {
  abort_order.push_back(key);
  while (abort_order.size() > 4096) {
    doomed.erase(abort_order.front());
    settled.erase(abort_order.front());
    abort_order.pop_front();
  }
}

// The size a report names for a call: its largest input or first output buffer.
std::uint64_t Executor::Impl::call_bytes(const Plan& p) {
  std::uint64_t bytes = 0;
  for (const BufferDecl& d : p.buffers())
    if (d.ref.kind == BufferKind::input || (d.ref.kind == BufferKind::output && d.ref.id == 0))
      bytes = std::max<std::uint64_t>(bytes, d.size);
  return bytes;
}

// The error of a member whose instance failed because rank @p origin's did.
Status Executor::Impl::remote_failure(const Plan& p, std::uint16_t comm, std::uint32_t seq, int origin,
                                      Errc code) const {
  const std::uint64_t bytes = call_bytes(p);
  return Status(code, p.name() + " (communicator " + std::to_string(comm) + ", call #" + std::to_string(seq) + ", " +
                          std::to_string(bytes) + " B) on rank " + std::to_string(tp.rank()) + ": failed on rank " +
                          std::to_string(origin) + " (" + make_error_code(code).message() +
                          "); the call fails on every member; rank " + std::to_string(origin) +
                          "'s error has the cause");
}

// The origin: tells every other member of the plan's communicator.
void Executor::Impl::announce(Instance* in) {
  const std::vector<int>& members = in->plan->members();
  std::vector<int> others;
  for (int m : members)
    if (m != tp.rank() && m >= 0 && m < nranks && !dead[static_cast<std::size_t>(m)].load()) others.push_back(m);
  const Errc code = in->error.code();  // set before (mark_failed), never changed after
  {
    std::lock_guard<std::mutex> g(abort_mu);
    if (others.empty()) {
      settled.insert(in->key);  // nobody to wait for
      remember(in->key);
    } else {
      if (awaiting.count(in->key) != 0) return;
      awaiting[in->key] = Announced{others, others};
    }
    count_abort();
  }
  for (int m : others) (void)tp.signal(m, encode_abort(kAbortNoticeComm, in->comm, in->seq, code), &grant_ctx);
}

void Executor::Impl::on_abort(int source, std::uint64_t payload) {
  const AbortKey k = decode_abort(payload);
  const std::uint64_t key = make_key(k.comm, k.seq);
  if (k.tag == kAbortNoticeComm) {
    // Remembered first, then looked up: a start that publishes its instance
    // between the two finds the entry (start() looks after publishing).
    {
      std::lock_guard<std::mutex> g(abort_mu);
      if (doomed.emplace(key, Doom{source, k.code}).second) remember(key);
      count_abort();
    }
    Instance* in = nullptr;
    {
      Shard& sh = shard(key);
      std::lock_guard<strata::detail::SpinLock> g(sh.mu);
      in = sh.find(key);
      if (in != nullptr && !pin(in)) in = nullptr;  // completing: complete() looks at `doomed`
    }
    if (in != nullptr) {
      (void)mark_failed(in, remote_failure(*in->plan, k.comm, k.seq, source, k.code), true);
      unpin(in);
    }
    (void)tp.signal(source, encode_abort(kAbortAckComm, k.comm, k.seq, Errc::ok), &grant_ctx);
    return;
  }
  if (k.tag == kAbortAckComm) {
    acked(key, source);
    return;
  }
  if (k.tag == kAbortSettleComm) settle(key);
}

// Member @p who marked the announced instance @p key failed (or died).
void Executor::Impl::acked(std::uint64_t key, int who) {
  std::vector<int> all;
  {
    std::lock_guard<std::mutex> g(abort_mu);
    const auto it = awaiting.find(key);
    if (it == awaiting.end()) return;
    auto& w = it->second.missing;
    w.erase(std::remove(w.begin(), w.end(), who), w.end());
    if (!w.empty()) return;
    all = std::move(it->second.told);
    awaiting.erase(it);
    count_abort();
  }
  for (int m : all)
    if (!dead[static_cast<std::size_t>(m)].load())
      (void)tp.signal(m, encode_abort(kAbortSettleComm, key_comm(key), key_seq(key), Errc::ok), &grant_ctx);
  settle(key);
}

// Every member marked instance @p key failed: it may raise its flags and finish.
void Executor::Impl::settle(std::uint64_t key) {
  Instance* in = nullptr;
  {
    std::lock_guard<std::mutex> g(abort_mu);
    const auto it = settling.find(key);
    if (it == settling.end()) {
      if (settled.insert(key).second) remember(key);
    } else {
      in = it->second;
      settling.erase(it);
    }
    count_abort();
  }
  if (in == nullptr) return;
  raise_flags(in);
  finish(in);
}

// The flag words a finished instance leaves (raised, never lowered): what the
// window slot's next users and the peers' credit checks wait for.
void Executor::Impl::raise_flags(Instance* in) {
  for (const Node& nd : in->plan->nodes())
    if (nd.kind == NodeKind::flag_set || nd.kind == NodeKind::publish) set_flag(in, nd, true);
}

// A member died: announcements stop waiting for it, and instances waiting
// to settle whose communicator it belongs to finish now (that communicator
// has failed as a whole).
void Executor::Impl::abort_peer_died(int peer) {
  if (nabort.load(std::memory_order_acquire) == 0) return;
  std::vector<std::uint64_t> keys;
  std::vector<Instance*> hit;
  {
    std::lock_guard<std::mutex> g(abort_mu);
    for (auto& [k, a] : awaiting)
      if (std::find(a.missing.begin(), a.missing.end(), peer) != a.missing.end()) keys.push_back(k);
    for (auto it = settling.begin(); it != settling.end();) {
      const auto& m = it->second->plan->members();
      if (std::find(m.begin(), m.end(), peer) != m.end()) {
        hit.push_back(it->second);
        it = settling.erase(it);
      } else {
        ++it;
      }
    }
    count_abort();
  }
  for (std::uint64_t k : keys) acked(k, peer);
  for (Instance* in : hit) finish(in);
}

// Instance @p in starts (or completes) here after a member announced its
// failure: it fails the same way. Returns whether it did.
bool Executor::Impl::apply_doom(Instance* in, bool release) {
  Doom d;
  {
    std::lock_guard<std::mutex> g(abort_mu);
    const auto it = doomed.find(in->key);
    if (it == doomed.end()) return false;
    d = it->second;
  }
  const Status st = remote_failure(*in->plan, in->comm, in->seq, d.origin, d.code);
  if (release) return mark_failed(in, st, true);
  std::lock_guard<std::mutex> g(in->err_mu);
  if (in->failed.load(std::memory_order_relaxed)) return false;
  in->error = st;
  in->soft = true;
  in->failed.store(true, std::memory_order_release);
  return true;
}

// Shutdown: instances waiting to settle finish with their error now.
std::size_t Executor::Impl::flush_settling() {
  if (nabort.load(std::memory_order_acquire) == 0) return 0;
  std::vector<Instance*> left;
  {
    std::lock_guard<std::mutex> g(abort_mu);
    for (auto& [k, in] : settling) left.push_back(in);
    settling.clear();
    count_abort();
  }
  for (Instance* in : left) finish(in);
  return left.size();
}

// Forget what is known of communicator @p comm's calls (a new communicator takes its id).
void Executor::Impl::forget_comm(std::uint16_t comm) {
  std::lock_guard<std::mutex> g(abort_mu);
  for (auto it = doomed.begin(); it != doomed.end();) it = key_comm(it->first) == comm ? doomed.erase(it) : ++it;
  for (auto it = settled.begin(); it != settled.end();) it = key_comm(*it) == comm ? settled.erase(it) : ++it;
  count_abort();
}

bool Executor::Impl::settle_failed(Instance* in) {
  bool soft = false;
  {
    std::lock_guard<std::mutex> g(in->err_mu);
    soft = in->soft;
  }
  if (!soft) return true;
  {
    std::lock_guard<std::mutex> g(abort_mu);
    doomed.erase(in->key);
    if (settled.erase(in->key) == 0) {
      settling[in->key] = in;  // settle() finishes it
      count_abort();
      return false;
    }
    count_abort();
  }
  raise_flags(in);
  return true;
}

void Executor::handle_peer_failure(int peer, const Status& why) {
  Impl& im = *impl_;
  if (peer < 0 || peer >= im.nranks) return;
  if (!im.dead[static_cast<std::size_t>(peer)].exchange(true)) im.ndead.fetch_add(1, std::memory_order_acq_rel);
  std::vector<Instance*> hit;
  for (Shard& sh : im.shards) {
    std::lock_guard<strata::detail::SpinLock> g(sh.mu);
    sh.each([&](Instance* in) {
      if (in->plan->involves(peer) && im.pin(in)) hit.push_back(in);
    });
  }
  for (Instance* in : hit) {
    im.fail(in, Status(Errc::peer_dead, "plan '" + in->plan->name() + "' rank " + std::to_string(im.tp.rank()) +
                                            " seq " + std::to_string(in->seq) + ": peer " + std::to_string(peer) +
                                            " died: " + why.message()));
    im.unpin(in);
  }
  im.abort_peer_died(peer);
}

}  // namespace dag
}  // namespace strata
