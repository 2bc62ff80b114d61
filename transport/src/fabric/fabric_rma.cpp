// libfabric backend: Posting: RMA writes and reads, signals (CQ data, messages, mailbox
// entries), fetch_add (native or emulated) and control messages. The whole
// post path (post_rma -> submit -> advance -> post_step) lives in this file
// so the compiler can inline it as before the split.
#include "fabric/fabric_backend.hpp"

namespace strata::transport::detail::fabric {

Status FabricBackend::put(int peer, const void* src, std::size_t len, const RemoteKey& dst, std::uint64_t dst_offset,
                          void* context) {
  return post_rma(Kind::put, peer, src, nullptr, len, dst, dst_offset, 0, context);
}

Status FabricBackend::get(int peer, void* dst, std::size_t len, const RemoteKey& src, std::uint64_t src_offset,
                          void* context) {
  return post_rma(Kind::get, peer, nullptr, dst, len, src, src_offset, 0, context);
}

Status FabricBackend::put_with_signal(int peer, const void* src, std::size_t len, const RemoteKey& dst,
                                      std::uint64_t dst_offset, std::uint64_t signal, void* context) {
  return post_rma(Kind::put_signal, peer, src, nullptr, len, dst, dst_offset, signal, context);
}

Status FabricBackend::signal(int peer, std::uint64_t payload, void* context) {
  std::unique_lock<std::mutex> lk(mu_);
  if (Status s = check_peer("signal", peer); !s) return s;
  Op* op = new_op(Kind::signal, peer, context);
  op->data = payload;
  const PeerState& ps = peers_[static_cast<std::size_t>(peer)];
  op->mbox = ps.mbox;
  if (ps.mbox) {
    // one mailbox entry (post_mbox)
  } else if (ps.cq_signals) {
    op->raddr = ps.landing_addr;
    op->rkey = ps.landing_key;
  } else {
    op->msg.type = static_cast<std::uint32_t>(MsgType::signal);
    op->msg.a = payload;
  }
  if (submit(op)) {
    lk.unlock();
    dispatch();
  }
  return Status::ok();
}

Status FabricBackend::fetch_add(int peer, const RemoteKey& dst, std::uint64_t dst_offset, std::uint64_t addend,
                                std::uint64_t* fetched, void* context) {
  std::unique_lock<std::mutex> lk(mu_);
  if (Status s = check_peer("fetch_add", peer); !s) return s;
  if (fetched == nullptr)
    return err(Errc::invalid_argument, "fetch_add to rank " + std::to_string(peer) + ": fetched is null");
  if (Status s = check_key("fetch_add", peer, dst, dst_offset, sizeof(std::uint64_t)); !s) return s;
  if ((dst.addr + dst_offset) % alignof(std::uint64_t) != 0)
    return err(Errc::invalid_argument, "fetch_add to rank " + std::to_string(peer) + ": dst_offset " +
                                           std::to_string(dst_offset) + " gives a misaligned 64-bit word");
  Op* op = new_op(Kind::fetch_add, peer, context);
  op->raddr = dst.fi_base + dst_offset;
  op->rkey = dst.fi_key;
  op->data = addend;
  op->fetched = fetched;
  if (!native_atomics_) {
    op->msg.type = static_cast<std::uint32_t>(MsgType::atomic_req);
    op->msg.a = op->raddr;
    op->msg.b = op->rkey;
    op->msg.c = addend;
    op->msg.d = next_req_id_;
    op->awaiting_resp = true;
    atomic_reqs_[next_req_id_++] = op;
  }
  submit(op);
  return Status::ok();
}

Status FabricBackend::check_peer(const char* what, int peer) const {
  if (shut_) return err(Errc::shutdown, std::string(what) + " after shutdown");
  if (peer < 0 || peer >= size_)
    return err(Errc::unknown_peer,
               std::string(what) + ": peer " + std::to_string(peer) + " outside [0, " + std::to_string(size_) + ")");
  const PeerState& ps = peers_[static_cast<std::size_t>(peer)];
  if (!ps.served || !opened_)
    return err(Errc::unknown_peer,
               std::string(what) + ": peer " + std::to_string(peer) + " is not served by the libfabric backend");
  if (!ps.dead.is_ok()) return ps.dead;
  return Status::ok();
}

Status FabricBackend::check_key(const char* what, int peer, const RemoteKey& key, std::uint64_t offset,
                                std::size_t len) const {
  const std::string who = std::string(what) + " to rank " + std::to_string(peer);
  if (!key.valid() || (key.flags & RemoteKey::kFabric) == 0)
    return err(Errc::invalid_argument, who + ": remote key has no libfabric registration");
  if (key.owner != peer)
    return err(Errc::invalid_argument, who + ": remote key belongs to rank " + std::to_string(key.owner));
  if (offset > key.len || len > key.len - offset)
    return err(Errc::out_of_range, who + ": offset " + std::to_string(offset) + " + length " + std::to_string(len) +
                                       " exceeds the registration of " + std::to_string(key.len) + " bytes");
  return Status::ok();
}

Status FabricBackend::post_rma(Kind kind, int peer, const void* src, void* dst, std::size_t len, const RemoteKey& key,
                               std::uint64_t offset, std::uint64_t signal_value, void* context) {
  const char* what = kind_name(kind);
  std::unique_lock<std::mutex> lk(mu_);
  if (Status s = check_peer(what, peer); !s) return s;
  if (len > 0 && src == nullptr && kind != Kind::get)
    return err(Errc::invalid_argument, std::string(what) + " to rank " + std::to_string(peer) + ": src is null");
  if (len > 0 && dst == nullptr && kind == Kind::get)
    return err(Errc::invalid_argument, std::string(what) + " from rank " + std::to_string(peer) + ": dst is null");
  if (Status s = check_key(what, peer, key, offset, len); !s) return s;
  const PeerState& ps = peers_[static_cast<std::size_t>(peer)];
  // Small put_with_signal on the message path: the data is copied into the
  // signal message (one message; the target copies it out before the signal).
  // Up to kMboxInline bytes ride in a mailbox entry (one inject, nothing to
  // complete on either side); larger data keeps one write carrying the
  // signal (or the message path), ordered with the entries by signal index.
  const bool mbox = kind == Kind::put_signal && ps.mbox && len <= kMboxInline;
  const bool inline_data = !mbox && kind == Kind::put_signal && !ps.cq_signals && len > 0 && len <= inline_max_;
  const MrCache::Entry* local_mr = nullptr;
  if (len > 0 && mr_local_ && !inline_data && !mbox) {
    void* a = kind == Kind::get ? dst : const_cast<void*>(src);
    if (Status s = cache_->acquire(a, len, &local_mr); !s)
      return err(Errc::not_registered, std::string(what) + ": registering the local buffer failed: " + s.message());
  }
  Op* op = new_op(kind, peer, context);
  op->src = static_cast<const std::byte*>(src);
  op->dst = static_cast<std::byte*>(dst);
  op->len = len;
  op->raddr = key.fi_base + offset;
  op->rkey = key.fi_key;
  op->data = signal_value;
  op->local_mr = local_mr;
  op->inline_data = inline_data;
  op->mbox = mbox;
  if (len >= kStreamBytes) {
    op->bulk = true;
    bulk_ops_.fetch_add(1, std::memory_order_relaxed);
  }
  plan_steps(*op, ps);
  if (op->nsteps == 0) {  // zero-length put/get: nothing to move
    link(op);
    finish_user(*op, Status::ok());
    reap();
    lk.unlock();
    dispatch();
    return Status::ok();
  }
  if (submit(op)) {
    lk.unlock();
    dispatch();
  }
  return Status::ok();
}

/// Splits @p op into the steps advance() posts: chunks of at most max_msg_,
/// plus the signal message or flushing read the path needs.
void FabricBackend::plan_steps(Op& op, const PeerState& ps) const {
  std::size_t chunks = op.len == 0 ? 0 : (op.len + max_msg_ - 1) / max_msg_;
  if (op.mbox) {
    op.nsteps = 1;
  } else if (op.inline_data) {
    op.nsteps = 1;
    op.msg.type = static_cast<std::uint32_t>(MsgType::put_signal);
    op.msg.a = op.data;
    op.msg.b = op.raddr;
    op.msg.c = op.rkey;
    op.msg.d = op.len;
  } else if (op.kind == Kind::put_signal) {
    if (ps.cq_signals) {
      // chunks-1 plain writes, the last one carries the signal as CQ data.
      op.nsteps = static_cast<int>(std::max<std::size_t>(chunks, 1));
      if (op.len == 0) {
        op.raddr = ps.landing_addr;
        op.rkey = ps.landing_key;
      }
    } else {
      op.nsteps = static_cast<int>(chunks) + 1;  // writes, then the signal message (FI_ORDER_SAW or flushed)
      op.msg.type = static_cast<std::uint32_t>(MsgType::signal);
      op.msg.a = op.data;
    }
  } else {
    op.nsteps = static_cast<int>(chunks);
    // Without FI_DELIVERY_COMPLETE a read that follows the writes
    // (FI_ORDER_RAW) completes only once they are visible at the target.
    if (op.kind == Kind::put && chunks > 0 && !delivery_complete_) op.nsteps += 1;
  }
}

bool FabricBackend::submit(Op* raw) {
  link(raw);
  live_ops_.store(ops_.size(), std::memory_order_relaxed);
  // new_op() read the clock for the deadline: reuse it (one read per post).
  const auto posted = (raw->deadline - opts_.timeout).time_since_epoch().count();
  last_activity_.store(posted, std::memory_order_relaxed);
  // Post first, ring after: the peer, woken 60-150 us later (an idle core),
  // then finds the bytes already on its socket instead of polling for them.
  if (!retry_.empty() || !advance(*raw)) {
    raw->queued = true;
    retry_.push_back(raw);
    ring(raw->peer, posted);
    return false;
  }
  ring(raw->peer, posted);
  const bool finished = raw->user_done;
  mark(*raw);
  reap();  // may recycle raw
  return finished;
}

void FabricBackend::ring(int peer, std::int64_t now) {
  PeerState& ps = peers_[static_cast<std::size_t>(peer)];
  if (ps.bell_len == 0 || !bell_.is_open()) return;
  const std::int64_t gap = std::chrono::duration_cast<Clock::duration>(kBellGap).count();
  if (now - std::max(ps.last_bell, ps.last_heard) < gap) return;
  ps.last_bell = now;
  bell_.ring(ps.bell, ps.bell_len);
}

/// One RMA step of @p op: bytes [off, off + n) of its buffer, written or read,
/// carrying the signal as remote CQ data when @p with_data (injected when
/// small enough, see injectable()).
int FabricBackend::rma_step(Op& op, const PeerState& ps, bool write, std::size_t off, std::size_t n, bool with_data,
                            std::uint64_t flags) {
  void* ctx = &op.fictx;
  void* ldesc = op.local_mr != nullptr ? fi_mr_desc(mr_of(op.local_mr)) : nullptr;
  iovec iov{};
  iov.iov_base = write ? static_cast<void*>(const_cast<std::byte*>(op.src + off)) : static_cast<void*>(op.dst + off);
  iov.iov_len = n;
  fi_rma_iov riov{};
  riov.addr = op.raddr + off;
  riov.len = n;
  riov.key = op.rkey;
  fi_msg_rma m{};
  m.msg_iov = n > 0 ? &iov : nullptr;
  m.desc = n > 0 ? &ldesc : nullptr;
  m.iov_count = n > 0 ? 1 : 0;
  m.addr = ps.addr;
  m.rma_iov = &riov;
  m.rma_iov_count = 1;
  m.context = ctx;
  m.data = with_data ? op.data : 0;
  if (write && injectable(op, n)) {
    // Copied by the provider at the post, no completion owed: the op's
    // step is done here (no CQ entry to reap, no wake of the provider's
    // completion signal).
    const ssize_t rc = with_data ? fi_inject_writedata(ep_, iov.iov_base, n, op.data, ps.addr, riov.addr, riov.key)
                                 : fi_inject_write(ep_, iov.iov_base, n, ps.addr, riov.addr, riov.key);
    return rc == 0 ? kInjected : static_cast<int>(rc);
  }
  flags |= FI_COMPLETION | (with_data ? FI_REMOTE_CQ_DATA : 0);
  return static_cast<int>(write ? fi_writemsg(ep_, &m, flags) : fi_readmsg(ep_, &m, flags));
}

/// A native fetch_add (fi_fetch_atomicmsg): operand and result live in the
/// op's send slot.
int FabricBackend::post_atomic(Op& op, const PeerState& ps) {
  void* ctx = &op.fictx;
  if (int rc = acquire_slot(op); rc != 0) return rc;
  Msg& s = send_slab_[static_cast<std::size_t>(op.slot)].hdr;
  s.a = op.data;
  s.b = 0;
  fi_ioc ioc{&s.a, 1};
  fi_ioc res{&s.b, 1};
  fi_rma_ioc rioc{op.raddr, 1, op.rkey};
  void* d = send_desc_;
  fi_msg_atomic m{};
  m.msg_iov = &ioc;
  m.desc = &d;
  m.iov_count = 1;
  m.addr = ps.addr;
  m.rma_iov = &rioc;
  m.rma_iov_count = 1;
  m.datatype = FI_UINT64;
  m.op = FI_SUM;
  m.context = ctx;
  return static_cast<int>(fi_fetch_atomicmsg(ep_, &m, &res, &d, 1, FI_COMPLETION));
}

int FabricBackend::post_step(Op& op, int step) {
  const PeerState& ps = peers_[static_cast<std::size_t>(op.peer)];
  void* ctx = &op.fictx;
  const std::uint64_t dc = delivery_complete_ ? FI_DELIVERY_COMPLETE : 0;
  auto chunk = [&](int i, std::size_t* off, std::size_t* n) {
    *off = static_cast<std::size_t>(i) * max_msg_;
    *n = std::min(max_msg_, op.len - *off);
  };
  std::size_t off = 0;
  std::size_t n = 0;
  if (op.mbox) return post_mbox(op);
  switch (op.kind) {
    case Kind::put:
      if (!delivery_complete_ && step == op.nsteps - 1) {
        if (int rc = acquire_slot(op); rc != 0) return rc;
        Msg& s = send_slab_[static_cast<std::size_t>(op.slot)].hdr;
        void* d = send_desc_;
        return static_cast<int>(
            fi_read(ep_, &s, sizeof(std::uint64_t), d, ps.addr, ps.landing_addr, ps.landing_key, ctx));
      }
      chunk(step, &off, &n);
      return rma_step(op, ps, true, off, n, false, dc);
    case Kind::get:
      chunk(step, &off, &n);
      return rma_step(op, ps, false, off, n, false, 0);
    case Kind::put_signal:
      if (op.inline_data) return send_msg(op);
      if (ps.cq_signals) {
        // A bare signal needs no delivery-complete (nothing to make visible;
        // shm never completes a 0-byte FI_DELIVERY_COMPLETE write).
        if (op.len == 0) return rma_step(op, ps, true, 0, 0, true, 0);
        // Remote CQ data is written only after the data is placed, so the
        // signal needs no delivery-complete round trip.
        chunk(step, &off, &n);
        return rma_step(op, ps, true, off, n, step == op.nsteps - 1, 0);
      }
      if (step < op.nsteps - 1) {
        // With FI_ORDER_SAW the signal message is processed at the target
        // after these writes were placed, so they need no delivery-complete
        // acknowledgement (one message less per put_with_signal); without
        // SAW the message waits for their (delivery) completion.
        chunk(step, &off, &n);
        return rma_step(op, ps, true, off, n, false, saw_ ? 0 : dc);
      }
      return send_msg(op);
    case Kind::signal:
      if (ps.cq_signals) return rma_step(op, ps, true, 0, 0, true, 0);
      return send_msg(op);
    case Kind::fetch_add:
      if (native_atomics_) return post_atomic(op, ps);
      return send_msg(op);
    case Kind::internal_send:
      return send_msg(op);
    case Kind::recv:
      break;
  }
  return -FI_EINVAL;
}

int FabricBackend::post_mbox(Op& op) {
  PeerState& ps = peers_[static_cast<std::size_t>(op.peer)];
  const std::uint64_t consumed = __atomic_load_n(&mbox_credit_[static_cast<std::size_t>(op.peer)], __ATOMIC_ACQUIRE);
  if (ps.mbox_sent - consumed >= kMboxEntries) return -FI_EAGAIN;
  MboxEntry e;
  e.signal = op.data;
  e.index = ps.sig_sent + 1;
  if (op.kind == Kind::put_signal && op.len > 0) {
    e.raddr = op.raddr;
    e.rkey = op.rkey;
    e.len = static_cast<std::uint32_t>(op.len);
    std::memcpy(e.data.data(), op.src, op.len);
  }
  e.seq = ps.mbox_sent + 1;
  const std::uint64_t at = ps.mbox_addr + (ps.mbox_sent % kMboxEntries) * sizeof(MboxEntry);
  const ssize_t rc = fi_inject_write(ep_, &e, sizeof e, ps.addr, at, ps.mbox_key);
  if (rc != 0) return static_cast<int>(rc);
  ++ps.mbox_sent;
  return kInjected;
}

int FabricBackend::send_msg(Op& op) {
  if (int rc = acquire_slot(op); rc != 0) return rc;
  Slot& s = send_slab_[static_cast<std::size_t>(op.slot)];
  s.hdr = op.msg;
  s.hdr.src = rank_;
  std::size_t bytes = sizeof(Msg);
  if (op.inline_data) {
    std::memcpy(s.data.data(), op.src, op.len);
    bytes += op.len;
  }
  const PeerState& ps = peers_[static_cast<std::size_t>(op.peer)];
  if (injectable(op, bytes)) {
    const ssize_t rc = fi_inject(ep_, &s, bytes, ps.addr);
    return rc == 0 ? kInjected : static_cast<int>(rc);
  }
  return static_cast<int>(fi_send(ep_, &s, bytes, send_desc_, ps.addr, &op.fictx));
}

void FabricBackend::send_hello(int peer) {
  Op* op = new_op(Kind::internal_send, peer, nullptr);
  op->internal = true;
  op->msg.type = static_cast<std::uint32_t>(MsgType::hello);
  submit(op);
}

void FabricBackend::serve_atomic(const Msg& m) {
  Op* op = new_op(Kind::internal_send, m.src, nullptr);
  op->internal = true;
  op->msg.type = static_cast<std::uint32_t>(MsgType::atomic_resp);
  op->msg.a = m.d;
  std::byte* local = resolve_local(m.b, m.a, sizeof(std::uint64_t));
  if (local != nullptr && reinterpret_cast<std::uintptr_t>(local) % alignof(std::uint64_t) == 0) {
    auto* word = reinterpret_cast<std::uint64_t*>(local);
    op->msg.b = __atomic_fetch_add(word, m.c, __ATOMIC_SEQ_CST);
    op->msg.c = 0;
  } else {
    op->msg.c = static_cast<std::uint64_t>(Errc::out_of_range);
  }
  PeerState& ps = peers_[static_cast<std::size_t>(m.src)];
  if (!ps.served || !ps.dead.is_ok()) {
    recycle(op);
    return;
  }
  op->step = 0;
  op->nsteps = 1;
  submit(op);
}

}  // namespace strata::transport::detail::fabric
