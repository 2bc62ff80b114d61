// libfabric backend: Completion and progress: the CQ, incoming messages and mailboxes, the
// dispatcher that runs user handlers, and the poll pacing (PollHint).
#include "fabric/fabric_backend.hpp"

#include <sys/epoll.h>

namespace strata::transport::detail::fabric {

std::size_t FabricBackend::progress() {
  std::size_t n = 0;
  bool events = false;
  Clock::time_point t0;
  Clock::time_point t1;
  Clock::duration extra{0};
  {
    std::lock_guard<std::mutex> lk(mu_);
    t0 = Clock::now();
    n = progress_locked(t0);
    t1 = Clock::now();
    // What an empty call costs on this machine: the lowest recent duration
    // (drifting up slowly so that it follows the machine).
    const Clock::duration d = t1 - t0;
    if (d < empty_call_)
      empty_call_ = d;
    else
      empty_call_ += (d - empty_call_) / 1024;
    extra = d - empty_call_;
    live_ops_.store(ops_.size(), std::memory_order_relaxed);
    events = !events_.empty();
  }
  // A passive RMA target sees no CQ entry for incoming writes, but the
  // provider moves their bytes inside this call: long calls mean data is
  // streaming in, so keep the short poll interval (poll_interval()) as if
  // an event had arrived. "Long" is measured against what an empty call
  // costs here (on this KVM guest 1.7-2 us, more when the machine is
  // loaded), and one long call is only a probe (poll every kBusyPoll for
  // kProbeWindow); a second one within it confirms the stream. A call that
  // was merely descheduled is long too: against a fixed 2 us and without
  // the confirmation, such calls kept an idle rank polling without pause
  // (27-42% of a core, strata-bench --idle).
  const auto now = t1.time_since_epoch().count();
  bool confirmed = false;
  if (extra > kStreamCall) {
    const auto prev = last_long_.exchange(now, std::memory_order_relaxed);
    confirmed = now - prev < std::chrono::duration_cast<Clock::duration>(kProbeWindow).count();
  }
  if (n > 0 || (confirmed && extra > kBusyCall)) last_activity_.store(now, std::memory_order_relaxed);
  if (confirmed) last_stream_.store(now, std::memory_order_relaxed);
  // Nothing to hand out: skip the dispatcher (two locks) on empty polls.
  if (events || held_pending_.load(std::memory_order_acquire)) dispatch();
  return n;
}

std::chrono::microseconds FabricBackend::poll_interval() const {
  if (cq_fd_ >= 0) return std::chrono::microseconds(1000);
  if (stream_poll_ && bulk_ops_.load(std::memory_order_relaxed) > 0) return std::chrono::microseconds(0);
  const auto now = Clock::now().time_since_epoch().count();
  if (stream_poll_ && now - last_stream_.load(std::memory_order_relaxed) <
                          std::chrono::duration_cast<Clock::duration>(kStreamWindow).count())
    return std::chrono::microseconds(0);
  if (stream_poll_ && now - last_long_.load(std::memory_order_relaxed) <
                          std::chrono::duration_cast<Clock::duration>(kProbeWindow).count())
    return kBusyPoll;  // one long call: look again soon (a second confirms a stream)
  if (live_ops_.load(std::memory_order_relaxed) > 0) return kBusyPoll;
  const auto since = now - last_activity_.load(std::memory_order_relaxed);
  if (since < std::chrono::duration_cast<Clock::duration>(kHotWindow).count()) return kBusyPoll;
  // With a doorbell, every peer rings before its first post after a pause
  // of kBellGap (ring()), so a rank idle for kDeepAfter > kBellGap + transit
  // can sleep long: the bell wakes it. kDeepPoll only bounds a lost bell.
  if (deep_ok_ && since >= std::chrono::duration_cast<Clock::duration>(kDeepAfter).count()) return kDeepPoll;
  if (since < std::chrono::duration_cast<Clock::duration>(kWarmWindow).count()) return kWarmPoll;
  return std::chrono::microseconds(1000);
}

void FabricBackend::wait_for_event(std::chrono::microseconds timeout) {
  std::chrono::microseconds limit = std::max(timeout, std::chrono::microseconds(0));
  std::array<pollfd, 2> fds{};
  nfds_t nfds = 0;
  fds[nfds++] = pollfd{wake_fd_, POLLIN, 0};
  if (cq_fd_ >= 0 && prepare_wait()) {
    fds[nfds++] = pollfd{edge_fd_, POLLIN, 0};
  } else if (cq_fd_ >= 0) {
    return;  // work pending
  } else if (opened_) {
    // No fd: poll again at the PollHint interval (20 us while busy), with
    // microsecond resolution (poll()'s milliseconds made every blocking
    // ping-pong hop of fabric_rank and the start-up hello ~0.5-1 ms).
    limit = std::min(limit, poll_interval());
  }
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(limit.count() / 1000000);
  ts.tv_nsec = static_cast<long>((limit.count() % 1000000) * 1000);
  if (::ppoll(fds.data(), nfds, &ts, nullptr) > 0 && (fds[0].revents & POLLIN) != 0) {
    std::uint64_t v = 0;
    ssize_t r = ::read(wake_fd_, &v, sizeof(v));
    (void)r;
  }
}

void FabricBackend::wait_fd_ready() {
  if (cq_fd_ >= 0 || !bell_.is_open()) return;
  bell_.drain();
  // A doorbell announces work: poll at the busy interval (kHotWindow).
  last_activity_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
}

bool FabricBackend::prepare_wait() {
  std::lock_guard<std::mutex> lk(mu_);
  if (!opened_ || cq_fd_ < 0) return true;
  if (!retry_.empty() || !events_.empty()) return false;
  fid* fids[1] = {&cq_->fid};
  if (fi_trywait(fabric_, fids, 1) != FI_SUCCESS) return false;
  // Consume the edges since the last look: any means activity after our
  // last progress() may be unhandled (poll again); none means the next one
  // will wake the sleeper (the entry is edge-triggered, see edge_fd_).
  epoll_event ev{};
  return ::epoll_wait(edge_fd_, &ev, 1, 0) <= 0;
}

std::size_t FabricBackend::scan_mailboxes() {
  std::size_t n = 0;
  for (int p : mbox_peers_) {
    PeerState& ps = peers_[static_cast<std::size_t>(p)];
    MboxEntry* ring = &mbox_[static_cast<std::size_t>(p) * kMboxEntries];
    for (;;) {
      MboxEntry& e = ring[ps.mbox_got % kMboxEntries];
      if (__atomic_load_n(&e.seq, __ATOMIC_ACQUIRE) != ps.mbox_got + 1) break;
      // Signals with lower indices came by CQ data or message: they were
      // placed before this entry (one connection, in order), but their CQ
      // entries may not be read yet; then this entry waits.
      while (ps.sig_got + 1 != e.index && !ps.pending.empty()) pop_pending(p, ps);
      if (ps.sig_got + 1 != e.index) break;
      bool deliver = true;
      if (e.len > 0) {
        std::byte* local = e.len <= kMboxInline ? resolve_local(e.rkey, e.raddr, e.len) : nullptr;
        if (local != nullptr) {
          std::memcpy(local, e.data.data(), e.len);
        } else {
          deliver = false;  // no signal without its data
          if (!warned_bad_inline_) {
            warned_bad_inline_ = true;
            strata::detail::logger().warn(
                "fabric rank {}: dropped a put_with_signal of {} bytes from rank {}: the target range is not "
                "registered here (deregistered while peers still write to it?)",
                rank_, e.len, p);
          }
        }
      }
      if (deliver) push_signal(p, e.signal);
      ++ps.sig_got;
      ++ps.mbox_got;
      ++n;
    }
    // What is left came after every entry placed so far.
    while (!ps.pending.empty()) pop_pending(p, ps);
    if (ps.mbox_got - ps.mbox_reported >= kMboxCreditEvery && ps.dead.is_ok()) {
      const std::uint64_t got = ps.mbox_got;
      if (fi_inject_write(ep_, &got, sizeof got, ps.addr, ps.credit_addr, ps.credit_key) == 0) ps.mbox_reported = got;
    }
  }
  return n;
}

void FabricBackend::pop_pending(int p, PeerState& ps) {
  const auto [payload, deliver] = ps.pending.front();
  ps.pending.pop_front();
  if (deliver) push_signal(p, payload);
  ++ps.sig_got;
}

void FabricBackend::signal_from(int src, std::uint64_t payload, bool deliver) {
  if (src >= 0 && src < size_ && peers_[static_cast<std::size_t>(src)].mbox) {
    peers_[static_cast<std::size_t>(src)].pending.emplace_back(payload, deliver);
    return;
  }
  if (deliver) push_signal(src, payload);
}

std::size_t FabricBackend::progress_locked(Clock::time_point now) {
  if (!opened_) return 0;
  std::size_t n = 0;
  std::array<fi_cq_data_entry, 32> ent{};
  std::array<fi_addr_t, 32> src{};
  src.fill(FI_ADDR_NOTAVAIL);
  for (int round = 0; round < 8; ++round) {
    ssize_t got = fi_cq_readfrom(cq_, ent.data(), ent.size(), src.data());
    if (got == -FI_EAGAIN) break;
    if (got == -FI_EAVAIL) {
      handle_cq_error();
      ++n;
      continue;
    }
    if (got < 0) {
      if (debug_)
        strata::detail::logger().info("fabric rank {}: fi_cq_readfrom: {}", rank_, fi_err(static_cast<int>(got)));
      break;
    }
    for (ssize_t i = 0; i < got; ++i) handle_cqe(ent[static_cast<std::size_t>(i)], src[static_cast<std::size_t>(i)]);
    n += static_cast<std::size_t>(got);
    if (static_cast<std::size_t>(got) < ent.size()) break;
  }
  if (!mbox_peers_.empty()) n += scan_mailboxes();
  // Retry queued posts in order.
  bool progressed = false;
  while (!retry_.empty()) {
    Op* op = retry_.front();
    if (!advance(*op)) break;
    retry_.pop_front();
    op->queued = false;
    mark(*op);
    progressed = true;
  }
  for (std::size_t i = 0; i < repost_.size();) {
    if (post_recv(repost_[i]) == -FI_EAGAIN) {
      ++i;
    } else {
      repost_[i] = repost_.back();
      repost_.pop_back();
    }
  }
  // Deadlines, at most every millisecond (the test stays here: no call per poll).
  if (now >= next_deadline_check_) check_deadlines(now);
  if (progressed || n > 0 || !reap_list_.empty()) reap();
  return n + events_.size();
}

void FabricBackend::handle_cqe(const fi_cq_data_entry& e, fi_addr_t from) {
  if (debug_)
    strata::detail::logger().info("fabric rank {}: cqe flags {:#x} len {} from {} ctx {}", rank_,
                                  static_cast<unsigned long long>(e.flags), e.len,
                                  static_cast<unsigned long long>(from), e.op_context);
  if ((e.flags & FI_REMOTE_CQ_DATA) != 0 && (e.flags & FI_RECV) == 0) {
    // Remote write with data: a signal from 'from'.
    int src = single_peer_ >= 0                                           ? single_peer_
              : (from != FI_ADDR_NOTAVAIL && from < addr_to_rank_.size()) ? addr_to_rank_[from]
                                                                          : -1;
    signal_from(src, e.data, true);
    return;
  }
  if (e.op_context == nullptr) return;
  Op& op = *static_cast<Op*>(e.op_context);
  if (op.kind == Kind::recv) {
    handle_msg(op.slot, e.len);
    return;
  }
  --op.outstanding;
  mark(op);
  if (op.kind == Kind::fetch_add && native_atomics_ && op.outstanding == 0 && op.step == op.nsteps && !op.user_done) {
    *op.fetched = send_slab_[static_cast<std::size_t>(op.slot)].hdr.b;
  }
  if (op.outstanding == 0 && op.step == op.nsteps && !op.awaiting_resp) finish_user(op, Status::ok());
  // freed by reap()
}

void FabricBackend::handle_msg(int slot, std::size_t len) {
  const Slot& in = recv_slab_[static_cast<std::size_t>(slot)];
  Msg m = in.hdr;
  if (m.src >= 0 && m.src < size_)
    peers_[static_cast<std::size_t>(m.src)].last_heard = Clock::now().time_since_epoch().count();
  // Inline data is copied out before the slot is reposted; its signal is
  // queued after the copy, so the handler sees the data.
  if (static_cast<MsgType>(m.type) == MsgType::put_signal && m.src >= 0 && m.src < size_) {
    std::byte* local = len >= sizeof(Msg) && m.d <= len - sizeof(Msg) ? resolve_local(m.c, m.b, m.d) : nullptr;
    if (local != nullptr) {
      std::memcpy(local, in.data.data(), m.d);
    } else {
      m.type = 0;  // dropped: no signal without its data (its index still counts)
      signal_from(m.src, m.a, false);
      if (!warned_bad_inline_) {
        warned_bad_inline_ = true;
        strata::detail::logger().warn(
            "fabric rank {}: dropped a put_with_signal of {} bytes from rank {}: the target range is not registered "
            "here (deregistered while peers still write to it?)",
            rank_, static_cast<unsigned long long>(m.d), m.src);
      }
    }
  }
  if (!shut_ && post_recv(slot) == -FI_EAGAIN) repost_.push_back(slot);
  if (m.src < 0 || m.src >= size_) return;
  switch (static_cast<MsgType>(m.type)) {
    case MsgType::hello: {
      PeerState& ps = peers_[static_cast<std::size_t>(m.src)];
      if (!ps.hello_seen && m.src < rank_ && ps.served) send_hello(m.src);
      ps.hello_seen = true;
      break;
    }
    case MsgType::signal:
    case MsgType::put_signal:
      signal_from(m.src, m.a, true);
      break;
    case MsgType::atomic_req:
      serve_atomic(m);
      break;
    case MsgType::atomic_resp: {
      auto it = atomic_reqs_.find(m.a);
      if (it == atomic_reqs_.end()) break;
      Op& op = *it->second;
      op.awaiting_resp = false;
      if (m.c == 0) {
        *op.fetched = m.b;
        if (op.outstanding == 0)
          finish_user(op, Status::ok());
        else
          atomic_reqs_.erase(it);  // completes when the request send completes
      } else {
        finish_user(op, err(static_cast<Errc>(m.c), "fetch_add to rank " + std::to_string(op.peer) +
                                                        ": the target rejected the address (not registered)"));
      }
      break;
    }
  }
}

void FabricBackend::push_signal(int src, std::uint64_t payload) {
  if (src >= 0 && src < size_)
    peers_[static_cast<std::size_t>(src)].last_heard = Clock::now().time_since_epoch().count();
  Event ev;
  ev.type = Event::signal;
  ev.source = src;
  ev.payload = payload;
  events_.push_back(std::move(ev));
}

void FabricBackend::dispatch() {
  std::unique_lock<std::mutex> lk(mu_);
  if (dispatching_) return;
  dispatching_ = true;
  for (;;) {
    std::deque<Event>& batch = batch_;  // only the dispatcher uses it: keeps its nodes
    batch.swap(events_);
    lk.unlock();
    {
      std::lock_guard<std::mutex> hk(handler_mu_);
      if (on_signal_) {
        while (!held_.empty()) {
          Event h = std::move(held_.front());
          held_.pop_front();
          on_signal_(h.source, h.payload);
        }
      }
      for (auto& ev : batch) {
        switch (ev.type) {
          case Event::completion:
            if (on_complete_) on_complete_(ev.ctx, ev.status);
            break;
          case Event::signal:
            if (on_signal_ && held_.empty())
              on_signal_(ev.source, ev.payload);
            else
              held_.push_back(std::move(ev));
            break;
          case Event::peer_failed:
            if (on_peer_failed_) on_peer_failed_(ev.source, ev.status);
            break;
        }
      }
      held_pending_.store(!held_.empty(), std::memory_order_release);
    }
    batch.clear();
    lk.lock();
    if (events_.empty()) break;
  }
  dispatching_ = false;
}

}  // namespace strata::transport::detail::fabric
