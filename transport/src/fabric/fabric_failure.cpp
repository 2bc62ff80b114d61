// libfabric backend: Failure handling: completion errors, dead peers, deadlines, shutdown.
#include "fabric/fabric_backend.hpp"

namespace strata::transport::detail::fabric {

Status FabricBackend::peer_status(int peer) const {
  if (peer < 0 || peer >= size_)
    return Status(Errc::unknown_peer, "fabric (rank " + std::to_string(rank_) + "): peer " + std::to_string(peer) +
                                          " outside [0, " + std::to_string(size_) + ")");
  std::lock_guard<std::mutex> lk(mu_);
  return peers_[static_cast<std::size_t>(peer)].dead;
}

void FabricBackend::shutdown() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (shut_) return;
    shut_ = true;
    Status why(Errc::shutdown, "fabric (rank " + std::to_string(rank_) + "): transport shut down");
    for (Op* o : ops_) finish_user(*o, why);
    for (Op* o : retry_) o->queued = false;
    retry_.clear();
    reap();
  }
  dispatch();
}

void FabricBackend::fail_peer(int peer, const Status& why) {
  if (peer < 0 || peer >= size_) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    fail_peer_locked(peer, why);
  }
  dispatch();
}

void FabricBackend::handle_cq_error() {
  fi_cq_err_entry ee{};
  if (fi_cq_readerr(cq_, &ee, 0) < 0) return;
  std::array<char, 256> buf{};
  const char* msg = fi_cq_strerror(cq_, ee.prov_errno, ee.err_data, buf.data(), buf.size());
  std::string pmsg = msg != nullptr ? msg : fi_strerror(ee.err);
  if (ee.op_context == nullptr) return;
  Op& op = *static_cast<Op*>(ee.op_context);
  if (op.kind == Kind::recv) {
    if (ee.err != FI_ECANCELED && opened_ && !shut_) post_recv(op.slot);
    return;
  }
  --op.outstanding;
  mark(op);
  // strata never cancels operations: a cancelled transmit means the
  // provider dropped the connection (rxm: ENOTCONN once the peer died).
  // Such an op fails as peer_dead, like every other op to that peer.
  const bool lost = connection_lost(ee.err) || (ee.err == FI_ECANCELED && !shut_);
  Status why(lost ? Errc::peer_dead : Errc::transport_error,
             "fabric (rank " + std::to_string(rank_) + "): " + kind_name(op.kind) + " to rank " +
                 std::to_string(op.peer) + " failed: " + pmsg + " (" + fi_strerror(ee.err) + ")");
  finish_user(op, why);
  if (lost) fail_peer_locked(op.peer, why);
}

void FabricBackend::fail_peer_locked(int peer, const Status& why) {
  PeerState& ps = peers_[static_cast<std::size_t>(peer)];
  if (!ps.dead.is_ok()) return;
  ps.dead = why.is_ok() ? Status(Errc::peer_dead, "rank " + std::to_string(peer) + " failed") : why;
  for (Op* o : ops_) {
    Op& op = *o;
    if (op.peer != peer || op.user_done) continue;
    finish_user(op, ps.dead);
  }
  for (Op* o : retry_)
    if (o->peer == peer) o->queued = false;
  retry_.erase(std::remove_if(retry_.begin(), retry_.end(), [peer](Op* o) { return o->peer == peer; }), retry_.end());
  Event ev;
  ev.type = Event::peer_failed;
  ev.source = peer;
  ev.status = ps.dead;
  events_.push_back(std::move(ev));
}

/// Fails the peer of every user operation past its deadline; progress_locked()
/// calls it at most every millisecond. Under mu_.
void FabricBackend::check_deadlines(Clock::time_point now) {
  next_deadline_check_ = now + std::chrono::milliseconds(1);
  for (Op* o : ops_) {
    Op& op = *o;
    if (op.user_done || op.internal || now < op.deadline) continue;
    Status why(Errc::timeout, "fabric (rank " + std::to_string(rank_) + "): " + kind_name(op.kind) + " to rank " +
                                  std::to_string(op.peer) + " did not complete within " +
                                  std::to_string(opts_.timeout.count()) + " ms");
    fail_peer_locked(op.peer, why);
  }
}

}  // namespace strata::transport::detail::fabric
