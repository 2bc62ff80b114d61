// Same-host backend: registration, SharedRegions and their mappings, single-copy CMA.
#include "shm/shm_backend.hpp"

namespace strata::transport::detail::shmem {

Status ShmBackend::register_memory(void* addr, std::size_t len, RemoteKey* key) {
  if (key == nullptr) {
    return {Errc::invalid_argument, "register_memory: key is null (rank " + std::to_string(rank_) + ")"};
  }
  if (addr == nullptr && len > 0) {
    return {Errc::invalid_argument,
            "register_memory: addr is null with len " + std::to_string(len) + " (rank " + std::to_string(rank_) + ")"};
  }
  if (shut_.load(std::memory_order_acquire)) {
    return {Errc::shutdown, "register_memory: transport of rank " + std::to_string(rank_) + " is shut down"};
  }
  // The shared-memory section needs no kernel registration: peers reach the
  // buffer through CMA (pid + address) or through the owner's progress agent.
  key->owner = rank_;
  key->flags |= RemoteKey::kShm;
  key->addr = reinterpret_cast<std::uintptr_t>(addr);
  key->len = len;
  key->shm_pid = ::getpid();
  key->shm_token = next_token_.fetch_add(1, std::memory_order_relaxed);
  key->reserved = 0;
  (void)in_region(addr, len, key);
  return {};
}

bool ShmBackend::in_region(const void* addr, std::size_t len, RemoteKey* key) const {
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  std::lock_guard<std::mutex> g(regions_->mu);
  for (const RegionTable::Entry& e : regions_->live) {
    if (a >= e.base && len <= e.len && a - e.base <= e.len - len) {
      key->flags |= RemoteKey::kShmMapped;
      key->shm_token = e.id;
      key->reserved = e.base;
      return true;
    }
  }
  return false;
}

bool ShmBackend::shared_key(const void* addr, std::size_t len, RemoteKey* key) {
  if (key == nullptr || addr == nullptr) return false;
  RemoteKey k;
  k.owner = rank_;
  k.flags = RemoteKey::kShm;
  k.addr = reinterpret_cast<std::uintptr_t>(addr);
  k.len = len;
  k.shm_pid = ::getpid();
  if (!in_region(addr, len, &k)) return false;
  *key = k;
  return true;
}

std::unique_ptr<SharedRegion> ShmBackend::allocate_shared(std::size_t len, const std::vector<int>& peers) {
  // The same-host peers among @p peers: they map the region at once.
  std::vector<int> mappers;
  for (int r : peers) {
    if (r == rank_ || r < 0 || r >= size_ || peers_[static_cast<std::size_t>(r)] == nullptr) continue;
    if (std::find(mappers.begin(), mappers.end(), r) == mappers.end()) mappers.push_back(r);
  }
  if (mappers.empty() || len == 0 || shut_.load(std::memory_order_acquire)) return nullptr;
  const std::uint64_t id = next_region_.fetch_add(1, std::memory_order_relaxed);
  const std::string name = region_name(rank_, id);
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    strata::detail::logger().warn("strata: rank {}: shm_open({}) for a shared region failed ({}); using private memory",
                                  rank_, name, std::strerror(errno));
    return nullptr;
  }
  void* m = ::ftruncate(fd, static_cast<off_t>(len)) == 0
                ? ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                : MAP_FAILED;
  ::close(fd);
  if (m == MAP_FAILED) {
    strata::detail::logger().warn(
        "strata: rank {}: sizing/mapping the shared region {} failed ({}); using private memory", rank_, name,
        std::strerror(errno));
    ::shm_unlink(name.c_str());
    return nullptr;
  }
  const auto base = reinterpret_cast<std::uintptr_t>(m);
  {
    // In the table before the first map-now record goes out: answers find it.
    std::lock_guard<std::mutex> g(regions_->mu);
    regions_->live.push_back({id, base, len, name, mappers, true, mappers});
  }
  // Map-now records: each peer maps the region from its progress and answers;
  // the last answer (or the peer's death) removes the name. A post fails only
  // when the peer is already dead: nothing to wait for then.
  for (int r : mappers) {
    OutOp o;
    o.type = RecType::region_map;
    o.user = false;
    o.addr = base;
    o.a = id;
    o.c = len;
    if (!post(*peers_[static_cast<std::size_t>(r)], o)) regions_->answered(r, id);
  }
  auto region = std::make_unique<SharedRegion>();
  region->addr = m;
  region->len = len;
  // Both functions may run after the backend is gone; its destructor removed the names then.
  region->settled = [table = std::weak_ptr<RegionTable>(regions_), id] {
    const auto t = table.lock();
    if (!t) return true;
    std::lock_guard<std::mutex> g(t->mu);
    for (const RegionTable::Entry& e : t->live) {
      if (e.id == id) return !e.named;
    }
    return true;
  };
  // Runs in the region's destructor: `self` is still valid there.
  region->release = [table = std::weak_ptr<RegionTable>(regions_), id, m, len, self = region.get()] {
    if (const auto t = table.lock()) {
      std::lock_guard<std::mutex> g(t->mu);
      for (RegionTable::Entry& e : t->live) {
        if (e.id != id) continue;
        e.waiting.clear();
        RegionTable::unlink_if_done(e);
        // The peers' mappings go too (else every allocate/free grows them).
        if (self->notify_peers && t->send_unmap)
          for (int r : e.mappers) t->send_unmap(r, id);
      }
      t->live.erase(
          std::remove_if(t->live.begin(), t->live.end(), [id](const RegionTable::Entry& e) { return e.id == id; }),
          t->live.end());
    }
    ::munmap(m, len);
  };
  return region;
}

const Peer::Mapped& ShmBackend::map_region(Peer& p, std::uint64_t id, std::uint64_t base) {
  for (const Peer::Mapped& m : p.mapped) {
    if (m.id == id) return m;
  }
  Peer::Mapped nm{id, base, nullptr, 0};
  const std::string name = region_name(p.rank, id);
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd >= 0) {
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_size > 0) {
      void* m = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (m != MAP_FAILED) {
        nm.local = static_cast<std::byte*>(m);
        nm.len = static_cast<std::size_t>(st.st_size);
      }
    }
    ::close(fd);
  }
  if (nm.local == nullptr)
    strata::detail::logger().debug("strata: rank {}: cannot map region {} of rank {}; puts to it use the ring", rank_,
                                   name, p.rank);
  p.mapped.push_back(nm);
  return p.mapped.back();
}

void ShmBackend::drop_mapping(Peer& p, std::uint64_t id, std::uint64_t base) {
  std::lock_guard<std::mutex> g(p.map_mu);
  for (auto it = p.mapped.begin(); it != p.mapped.end(); ++it) {
    if (it->id != id || (base != 0 && it->remote_base != base)) continue;
    if (it->local != nullptr) ::munmap(it->local, it->len);
    p.mapped.erase(it);
    return;
  }
}

void ShmBackend::unmap_peer(int peer, const RemoteKey& key) {
  if (peer < 0 || peer >= size_ || peer == rank_ || !peers_[static_cast<std::size_t>(peer)]) return;
  if ((key.flags & RemoteKey::kShmMapped) == 0) return;
  drop_mapping(*peers_[static_cast<std::size_t>(peer)], key.shm_token, key.reserved);
}

void ShmBackend::on_region_map(Peer& p, std::uint64_t id, std::uint64_t base) {
  bool ok = false;
  {
    std::lock_guard<std::mutex> g(p.map_mu);
    const Peer::Mapped& m = map_region(p, id, base);
    ok = m.local != nullptr && m.remote_base == base;
  }
  OutOp o;
  o.type = RecType::region_ack;
  o.user = false;
  o.a = id;
  o.b = ok ? 1 : 0;
  (void)post(p, o);  // dropped only when the owner is dead
}

void* ShmBackend::map_peer(int peer, const RemoteKey& key, std::uint64_t offset, std::size_t len) {
  if (peer < 0 || peer >= size_ || !peers_[static_cast<std::size_t>(peer)]) return nullptr;
  return map_range(*peers_[static_cast<std::size_t>(peer)], key, offset, len);
}

Status ShmBackend::deregister_memory(void* /*addr*/, std::size_t /*len*/) { return {}; }

// The pointer is used after the lock: the caller's protocol keeps the owner's
// buffer (and so its region) alive until every reader finished; region ids are
// never reused, so a handle never names a freed region's successor.
const void* ShmBackend::mapped_peer(int peer, std::uint64_t handle, std::size_t len) {
  if ((handle & kRegionHandleBit) == 0 || peer < 0 || peer >= size_ || peer == rank_ ||
      !peers_[static_cast<std::size_t>(peer)])
    return nullptr;
  const std::uint64_t id = (handle & ~kRegionHandleBit) >> kRegionOffsetBits;
  const std::uint64_t off = handle & ((std::uint64_t{1} << kRegionOffsetBits) - 1);
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  std::lock_guard<std::mutex> g(p.map_mu);
  for (const Peer::Mapped& m : p.mapped)
    if (m.id == id && m.local != nullptr && off <= m.len && len <= m.len - off) return m.local + off;
  return nullptr;
}

Status ShmBackend::read_peer(int peer, void* dst, std::uint64_t addr, std::size_t len) {
  Status s = check_peer("read_peer", peer);
  if (!s) return s;
  if (len == 0) return {};
  if (dst == nullptr || addr == 0) {
    return {Errc::invalid_argument, "read_peer: null " + std::string(dst == nullptr ? "destination" : "source") +
                                        " with length " + std::to_string(len) + " (rank " + std::to_string(rank_) +
                                        ", peer " + std::to_string(peer) + ")"};
  }
  if ((addr & kRegionHandleBit) != 0) {
    // A region handle (region_handle): one memcpy out of this process's
    // mapping of the peer's region, no system call.
    const void* from = mapped_peer(peer, addr, len);
    if (from == nullptr)
      return {Errc::unsupported, "read_peer: region " +
                                     std::to_string((addr & ~kRegionHandleBit) >> kRegionOffsetBits) + " of rank " +
                                     std::to_string(peer) + " is not mapped by rank " + std::to_string(rank_)};
    std::memcpy(dst, from, len);
    return {};
  }
  if (peer == rank_) {
    std::memcpy(dst, reinterpret_cast<const void*>(addr), len);
    return {};
  }
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  if (!p.cma.load(std::memory_order_relaxed)) {
    return {Errc::unsupported, "read_peer: no CMA path from rank " + std::to_string(rank_) + " to rank " +
                                   std::to_string(peer) + " (process_vm_readv refused at start-up)"};
  }
  Status r = cma(p, false, dst, addr, len);
  if (r.code() == Errc::peer_dead) fail_peer(peer, r);
  return r;
}

Status ShmBackend::write_peer(int peer, const void* src, std::uint64_t addr, std::size_t len) {
  Status s = check_peer("write_peer", peer);
  if (!s) return s;
  if (len == 0) return {};
  if (src == nullptr || addr == 0 || (addr & kRegionHandleBit) != 0) {
    return {Errc::invalid_argument, "write_peer: " +
                                        std::string(src == nullptr ? "null source"
                                                    : addr == 0    ? "null destination"
                                                                   : "a region handle as destination") +
                                        " with length " + std::to_string(len) + " (rank " + std::to_string(rank_) +
                                        ", peer " + std::to_string(peer) + ")"};
  }
  if (peer == rank_) {
    std::memcpy(reinterpret_cast<void*>(addr), src, len);
    return {};
  }
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  if (!p.cma.load(std::memory_order_relaxed)) {
    return {Errc::unsupported, "write_peer: no CMA path from rank " + std::to_string(rank_) + " to rank " +
                                   std::to_string(peer) + " (process_vm_readv refused at start-up)"};
  }
  // process_vm_writev only reads the local side.
  Status r = cma(p, true, const_cast<void*>(src), addr, len);
  if (r.code() == Errc::peer_dead) fail_peer(peer, r);
  return r;
}

Status ShmBackend::cma(Peer& p, bool write, void* local, std::uint64_t remote, std::size_t len) {
  std::size_t done = 0;
  while (done < len) {
    iovec l{static_cast<std::byte*>(local) + done, len - done};
    iovec r{reinterpret_cast<void*>(remote + done), len - done};
    const ssize_t n = write ? ::process_vm_writev(p.pid, &l, 1, &r, 1, 0) : ::process_vm_readv(p.pid, &l, 1, &r, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      if (err == EPERM) return {Errc::unsupported, "EPERM"};
      if (err == ESRCH) {
        return {Errc::peer_dead, "peer rank " + std::to_string(p.rank) + " (pid " + std::to_string(p.pid) +
                                     ") no longer exists (seen by rank " + std::to_string(rank_) + ")"};
      }
      return {Errc::transport_error, std::string(write ? "process_vm_writev" : "process_vm_readv") + " to peer rank " +
                                         std::to_string(p.rank) + " failed: " + std::strerror(err) + " (rank " +
                                         std::to_string(rank_) + ")"};
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}

void ShmBackend::disable_cma(Peer& p, int err) {
  p.cma.store(false, std::memory_order_relaxed);
  std::call_once(cma_log_once_, [&] {
    strata::detail::logger().warn(
        "strata: rank {}: single-copy CMA to rank {} refused ({}); same-host transfers use the two-copy segment "
        "path",
        rank_, p.rank, std::strerror(err));
  });
}

}  // namespace strata::transport::detail::shmem
