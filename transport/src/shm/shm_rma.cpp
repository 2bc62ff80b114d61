// Same-host backend: posting puts, gets, signals and fetch_add as ring records (or a direct
// copy into a mapped region, or CMA). The post path (put_impl -> post ->
// inject, direct -> map_range, copy_to_peer) stays in this file so that it
// inlines as before the split.
#include "shm/shm_backend.hpp"

namespace strata::transport::detail::shmem {

Status ShmBackend::check_peer(const char* op, int peer) const {
  if (shut_.load(std::memory_order_acquire)) {
    return {Errc::shutdown, std::string(op) + ": transport of rank " + std::to_string(rank_) + " is shut down"};
  }
  if (peer < 0 || peer >= size_) {
    return {Errc::unknown_peer, std::string(op) + ": peer " + std::to_string(peer) + " outside [0, " +
                                    std::to_string(size_) + ") (rank " + std::to_string(rank_) + ")"};
  }
  const Peer* p = peers_[static_cast<std::size_t>(peer)].get();
  if (p == nullptr) {
    return {Errc::unknown_peer, std::string(op) + ": peer " + std::to_string(peer) +
                                    " is not served by the shm backend of rank " + std::to_string(rank_) +
                                    " (not on the same host)"};
  }
  if (p->dead.load(std::memory_order_acquire)) return dead_status(*p);
  return {};
}

Status ShmBackend::check_key(const char* op, int peer, const RemoteKey& key, std::uint64_t offset,
                             std::uint64_t len) const {
  if (!key.valid() || (key.flags & RemoteKey::kShm) == 0) {
    return {Errc::invalid_argument, std::string(op) + ": remote key for peer " + std::to_string(peer) +
                                        " has no shared-memory section (rank " + std::to_string(rank_) + ")"};
  }
  if (key.owner != peer) {
    return {Errc::invalid_argument, std::string(op) + ": remote key registered by rank " + std::to_string(key.owner) +
                                        " used with peer " + std::to_string(peer) + " (rank " + std::to_string(rank_) +
                                        ")"};
  }
  if (offset > key.len || len > key.len - offset) {
    return {Errc::out_of_range, std::string(op) + " to peer " + std::to_string(peer) + ": offset " +
                                    std::to_string(offset) + " + length " + std::to_string(len) +
                                    " exceeds the registered length " + std::to_string(key.len) + " (rank " +
                                    std::to_string(rank_) + ")"};
  }
  return {};
}

std::byte* ShmBackend::direct(Peer& p, const RemoteKey& key, std::uint64_t offset, std::uint64_t len) {
  return len < direct_min_ ? nullptr : map_range(p, key, offset, len);
}

std::byte* ShmBackend::map_range(Peer& p, const RemoteKey& key, std::uint64_t offset, std::uint64_t len) {
  if ((key.flags & RemoteKey::kShmMapped) == 0 || len == 0) return nullptr;
  const std::uint64_t at = key.addr + offset - key.reserved;  // offset inside the region
  if (p.rank == rank_) return reinterpret_cast<std::byte*>(key.reserved) + at;
  std::lock_guard<std::mutex> g(p.map_mu);
  // Normally mapped by the owner's map-now record; a rank the owner did not
  // name maps it here while the name exists, and uses the ring afterwards.
  const Peer::Mapped& m = map_region(p, key.shm_token, key.reserved);
  if (m.local == nullptr || m.remote_base != key.reserved || at > m.len || len > m.len - at) return nullptr;
  return m.local + at;
}

void ShmBackend::copy_to_peer(Peer& p, std::byte* to, const void* src, std::size_t len) {
  if (nt_mode_ == NtMode::off || len < kNtMin) {
    std::memcpy(to, src, len);
    return;
  }
  const int left = p.nt_left.load(std::memory_order_relaxed);
  if (nt_mode_ == NtMode::on || left > 0) {
    if (left > 0) p.nt_left.store(left - 1, std::memory_order_relaxed);
    stream_copy(to, src, len);
    return;
  }
  const Clock::time_point t0 = Clock::now();
  std::memcpy(to, src, len);
  const double ns =
      static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  if (static_cast<double>(len) < nt_gbps_ * ns) {  // bytes / ns = GB/s
    p.nt_left.store(kNtRun, std::memory_order_relaxed);
    strata::detail::logger().debug(
        "strata: rank {}: puts to rank {}: non-temporal stores for the next {} ({} bytes copied at {:.1f} GB/s < {} "
        "GB/s, STRATA_SHM_NT_GBPS)",
        rank_, p.rank, kNtRun, len, static_cast<double>(len) / ns, nt_gbps_);
  }
}

Status ShmBackend::put_impl(const char* op, int peer, const void* src, std::size_t len, const RemoteKey& dst,
                            std::uint64_t dst_offset, bool with_signal, std::uint64_t payload, void* context) {
  Status s = check_peer(op, peer);
  if (!s) return s;
  s = check_key(op, peer, dst, dst_offset, len);
  if (!s) return s;
  if (src == nullptr && len > 0) {
    return {Errc::invalid_argument, std::string(op) + ": src is null with length " + std::to_string(len) + " (rank " +
                                        std::to_string(rank_) + ", peer " + std::to_string(peer) + ")"};
  }
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  const std::uint64_t raddr = dst.addr + dst_offset;
  if (std::byte* to = direct(p, dst, dst_offset, len)) {
    // Single copy into the peer's mapped region; the signal record published
    // after it (release) makes the data visible before the signal.
    copy_to_peer(p, to, src, len);
    STRATA_TSAN_RELEASE(&p);
    if (!with_signal) {
      push_completion(context, {});
      return {};
    }
    OutOp sig;
    sig.type = RecType::signal;
    sig.a = payload;
    sig.context = context;
    sig.eager = true;  // the data is in place: done once the signal is published
    return post(p, sig);
  }
  if (len >= cma_threshold_ && len > 0 && (peer == rank_ || p.cma.load(std::memory_order_relaxed))) {
    Status r;
    if (peer == rank_) {
      std::memcpy(reinterpret_cast<void*>(raddr), src, len);
    } else {
      r = cma(p, true, const_cast<void*>(src), raddr, len);
    }
    if (r.code() == Errc::unsupported) {
      disable_cma(p, EPERM);  // fall through to the segment path
    } else if (!r) {
      if (r.code() == Errc::peer_dead) fail_peer(peer, r);
      push_completion(context, std::move(r));
      return {};
    } else if (!with_signal) {
      push_completion(context, {});
      return {};
    } else {
      OutOp sig;
      sig.type = RecType::signal;
      sig.a = payload;
      sig.context = context;
      sig.eager = true;
      return post(p, sig);
    }
  }
  OutOp o;
  o.type = RecType::put;
  o.with_signal = with_signal;
  o.src = static_cast<const std::byte*>(src);
  o.len = len;
  o.addr = raddr;
  o.a = payload;
  o.context = context;
  return post(p, o);
}

Status ShmBackend::get(int peer, void* dst, std::size_t len, const RemoteKey& src, std::uint64_t src_offset,
                       void* context) {
  Status s = check_peer("get", peer);
  if (!s) return s;
  s = check_key("get", peer, src, src_offset, len);
  if (!s) return s;
  if (dst == nullptr && len > 0) {
    return {Errc::invalid_argument, "get: dst is null with length " + std::to_string(len) + " (rank " +
                                        std::to_string(rank_) + ", peer " + std::to_string(peer) + ")"};
  }
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  const std::uint64_t raddr = src.addr + src_offset;
  if (const std::byte* from = direct(p, src, src_offset, len)) {
    std::memcpy(dst, from, len);
    push_completion(context, {});
    return {};
  }
  if (len >= cma_threshold_ && len > 0 && (peer == rank_ || p.cma.load(std::memory_order_relaxed))) {
    Status r;
    if (peer == rank_) {
      std::memcpy(dst, reinterpret_cast<const void*>(raddr), len);
    } else {
      r = cma(p, false, dst, raddr, len);
    }
    if (r.code() == Errc::unsupported) {
      disable_cma(p, EPERM);
    } else {
      if (r.code() == Errc::peer_dead) fail_peer(peer, r);
      push_completion(context, std::move(r));
      return {};
    }
  }
  OutOp o;
  o.type = RecType::get_req;
  o.user = false;  // completes when the last get_data record arrives
  o.addr = raddr;
  o.a = reinterpret_cast<std::uintptr_t>(dst);
  o.c = len;
  o.context = context;
  return post(p, o);
}

Status ShmBackend::signal(int peer, std::uint64_t payload, void* context) {
  Status s = check_peer("signal", peer);
  if (!s) return s;
  OutOp o;
  o.type = RecType::signal;
  o.a = payload;
  o.context = context;
  o.eager = true;
  return post(*peers_[static_cast<std::size_t>(peer)], o);
}

Status ShmBackend::fetch_add(int peer, const RemoteKey& dst, std::uint64_t dst_offset, std::uint64_t addend,
                             std::uint64_t* fetched, void* context) {
  Status s = check_peer("fetch_add", peer);
  if (!s) return s;
  s = check_key("fetch_add", peer, dst, dst_offset, sizeof(std::uint64_t));
  if (!s) return s;
  const std::uint64_t raddr = dst.addr + dst_offset;
  if (raddr % alignof(std::uint64_t) != 0) {
    return {Errc::invalid_argument, "fetch_add: target word at offset " + std::to_string(dst_offset) +
                                        " is not 8-byte aligned (rank " + std::to_string(rank_) + ", peer " +
                                        std::to_string(peer) + ")"};
  }
  OutOp o;
  o.type = RecType::fadd_req;
  o.user = false;
  o.addr = raddr;
  o.a = addend;
  o.c = reinterpret_cast<std::uintptr_t>(fetched);
  o.context = context;
  return post(*peers_[static_cast<std::size_t>(peer)], o);
}

}  // namespace strata::transport::detail::shmem
