// Same-host backend: failure handling: dead peers, draining their operations, shutdown.
#include "shm/shm_backend.hpp"

namespace strata::transport::detail::shmem {

void ShmBackend::drain(Peer& p, const Status& why, std::vector<Completion>& out) {
  for (auto& f : p.inflight) out.push_back({f.context, why});
  for (auto& o : p.pending) {
    if (o.user) out.push_back({o.context, why});
  }
  for (auto& r : p.requests) out.push_back({r.context, why});
  p.inflight.clear();
  p.pending.clear();
  p.requests.clear();
  p.busy.store(false, std::memory_order_relaxed);
  p.was_busy = false;
}

void ShmBackend::fail_peer(int peer, const Status& why) {
  if (peer < 0 || peer >= size_ || peers_[static_cast<std::size_t>(peer)] == nullptr) return;
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  const Status st = why.is_ok() ? Status(Errc::peer_dead, "peer rank " + std::to_string(peer) + " failed") : why;
  std::vector<Completion> out;
  {
    std::lock_guard<SpinLock> g(p.prod_mu);
    if (p.dead.load(std::memory_order_relaxed)) return;
    {
      std::lock_guard<std::mutex> s(p.status_mu);
      p.status = st;
    }
    p.dead.store(true, std::memory_order_release);
    drain(p, st, out);
  }
  for (auto& c : out) push_completion(c.context, std::move(c.status));
  regions_->answered(peer, 0);  // a dead peer maps nothing: its regions' names may go
  if (const PeerFailureHandler* h = failure_.get()) (*h)(peer, st);
}

Status ShmBackend::peer_status(int peer) const {
  if (peer < 0 || peer >= size_ || peers_[static_cast<std::size_t>(peer)] == nullptr) {
    return {Errc::unknown_peer, "peer_status: peer " + std::to_string(peer) +
                                    " is not served by the shm backend of rank " + std::to_string(rank_)};
  }
  const Peer& p = *peers_[static_cast<std::size_t>(peer)];
  if (p.dead.load(std::memory_order_acquire)) return dead_status(p);
  return {};
}

void ShmBackend::shutdown() {
  if (shut_.exchange(true)) return;
  const Status why(Errc::shutdown, "transport of rank " + std::to_string(rank_) + " shut down");
  for (int r : served_) {
    Peer& p = *peers_[static_cast<std::size_t>(r)];
    std::vector<Completion> out;
    {
      std::lock_guard<SpinLock> g(p.prod_mu);
      // Keep internal replies (peers' gets and fetch_adds) flowing; fail ours.
      std::deque<OutOp> keep;
      for (auto& o : p.pending) {
        if (o.user) {
          out.push_back({o.context, why});
        } else if (o.type != RecType::get_req && o.type != RecType::fadd_req) {
          keep.push_back(o);
        }
      }
      p.pending.swap(keep);
      for (auto& f : p.inflight) out.push_back({f.context, why});
      for (auto& q : p.requests) out.push_back({q.context, why});
      p.inflight.clear();
      p.requests.clear();
    }
    for (auto& c : out) push_completion(c.context, std::move(c.status));
  }
}

}  // namespace strata::transport::detail::shmem
