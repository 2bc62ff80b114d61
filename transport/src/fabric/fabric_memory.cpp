// libfabric backend: Memory registration: the MrCache over fi_mr_reg, registered slabs, the
// keys handed to peers and their resolution for incoming inline data.
#include "fabric/fabric_backend.hpp"

namespace strata::transport::detail::fabric {

Status FabricBackend::register_memory(void* addr, std::size_t len, RemoteKey* key) {
  if (key == nullptr) return err(Errc::invalid_argument, "register_memory: key is null");
  if (addr == nullptr || len == 0) return err(Errc::invalid_argument, "register_memory: empty range (addr or len 0)");
  std::lock_guard<std::mutex> lk(mu_);
  if (shut_) return err(Errc::shutdown, "register_memory after shutdown");
  key->owner = rank_;
  key->addr = reinterpret_cast<std::uintptr_t>(addr);
  key->len = len;
  if (!opened_) return Status::ok();  // no fabric peer: nothing to register
  auto a = reinterpret_cast<std::uintptr_t>(addr);
  // Held: peers get the key, so the entry stays until deregister_memory().
  const MrCache::Entry* e = nullptr;
  if (Status s = cache_->hold(addr, len, &e); !s) return err(s.code(), "register_memory: " + s.message());
  const std::uint64_t k = fi_mr_key(mr_of(e));
  published_[k] = HeldRange{e->base, e->len};
  key->flags |= RemoteKey::kFabric;
  key->fi_key = k;
  // RMA address of byte 0 of the range = fi_base (+ offset at use).
  key->fi_base = virt_addr_ ? a : a - e->base;
  return Status::ok();
}

Status FabricBackend::deregister_memory(void* addr, std::size_t len) {
  if (addr == nullptr || len == 0) return err(Errc::invalid_argument, "deregister_memory: empty range");
  std::lock_guard<std::mutex> lk(mu_);
  if (!opened_) return Status::ok();
  // Forget the keys of every overlapping registration (the rule of
  // MrCache::invalidate) before the cache drops the entries.
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  const std::uintptr_t end = a + len < a ? UINTPTR_MAX : a + len;
  for (auto it = published_.begin(); it != published_.end();) {
    if (it->second.base < end && it->second.base + it->second.len > a)
      it = published_.erase(it);
    else
      ++it;
  }
  cache_->invalidate(addr, len);
  return Status::ok();
}

int FabricBackend::reg_mr(void* addr, std::size_t len, fid_mr** out) {
  std::uint64_t requested = prov_key_ ? 0 : next_key_++;
  fid_mr* mr = nullptr;
  int rc = fi_mr_reg(domain_, addr, len, kMrAccess, 0, requested, 0, &mr, nullptr);
  if (rc != 0) return rc;
  if (mr_endpoint_) {
    rc = fi_mr_bind(mr, &ep_->fid, 0);
    if (rc == 0) rc = fi_mr_enable(mr);
    if (rc != 0) {
      fi_close(&mr->fid);
      return rc;
    }
  }
  *out = mr;
  return 0;
}

std::byte* FabricBackend::resolve_local(std::uint64_t key, std::uint64_t raddr, std::uint64_t len) const {
  auto it = published_.find(key);
  if (it == published_.end()) return nullptr;
  const HeldRange& r = it->second;
  // Offset from the start of the registration: the RMA address is virtual
  // with FI_MR_VIRT_ADDR, else already an offset (RemoteKey::fi_base).
  std::uint64_t off = raddr;
  if (virt_addr_) {
    if (raddr < r.base) return nullptr;
    off = raddr - r.base;
  }
  if (off > r.len || len > r.len - off) return nullptr;
  return reinterpret_cast<std::byte*>(r.base + off);
}

void FabricBackend::open_registrations() {
  // The registration cache (transport/src/mr_cache.hpp): user registrations
  // and the slabs below are held, local descriptors of operations pinned.
  cache_ = std::make_unique<MrCache>(
      opts_.mr_cache_entries,
      [this](void* addr, std::size_t len, std::uint64_t* handle) -> Status {
        fid_mr* mr = nullptr;
        if (int rc = reg_mr(addr, len, &mr); rc != 0)
          return Status(Errc::transport_error, "fi_mr_reg of " + std::to_string(len) + " bytes failed: " + fi_err(rc));
        *handle = reinterpret_cast<std::uintptr_t>(mr);
        return Status::ok();
      },
      [](std::uint64_t handle, void*, std::size_t) { fi_close(&reinterpret_cast<fid_mr*>(handle)->fid); });
  // Registered slabs: send slots, receive slots, signal landing region.
  send_slab_.resize(kSendSlots);
  recv_slab_.resize(kRecvSlots);
  landing_.resize(1);
  auto hold = [this](void* addr, std::size_t len, const char* what) {
    const MrCache::Entry* e = nullptr;
    Status s = cache_->hold(addr, len, &e);
    if (!s)
      throw Error(Errc::transport_error, "fabric backend (rank " + std::to_string(rank_) + ", provider " + provider_ +
                                             "): registering the " + what + ": " + s.message());
    return e;
  };
  send_desc_ = fi_mr_desc(mr_of(hold(send_slab_.data(), kSendSlots * kSlotSize, "send slots")));
  recv_desc_ = fi_mr_desc(mr_of(hold(recv_slab_.data(), kRecvSlots * kSlotSize, "receive slots")));
  landing_key_ = fi_mr_key(mr_of(hold(landing_.data(), kMsgSize, "signal landing region")));
  landing_rma_addr_ = virt_addr_ ? reinterpret_cast<std::uintptr_t>(landing_.data()) : 0;
  // Mailboxes: only where the provider places incoming data inside this
  // rank's own progress calls (manual data progress, a socket provider), so
  // that an entry whose last word shows its sequence number was placed
  // whole before progress_locked() reads it; and where a 64-byte entry is
  // one inject behind earlier writes (WAW).
  const bool socket_prov = provider_.rfind("tcp", 0) == 0 || provider_.rfind("sockets", 0) == 0;
  if (socket_prov && info_->domain_attr->data_progress == FI_PROGRESS_MANUAL &&
      info_->tx_attr->inject_size >= sizeof(MboxEntry) && (info_->tx_attr->msg_order & FI_ORDER_WAW) != 0 &&
      !env_is("STRATA_FI_MAILBOX", "off")) {
    mbox_.resize(static_cast<std::size_t>(size_) * kMboxEntries);
    mbox_credit_.assign(static_cast<std::size_t>(size_), 0);
    mbox_key_ = fi_mr_key(mr_of(hold(mbox_.data(), mbox_.size() * sizeof(MboxEntry), "mailboxes")));
    credit_key_ = fi_mr_key(
        mr_of(hold(mbox_credit_.data(), mbox_credit_.size() * sizeof(std::uint64_t), "mailbox credit words")));
    mbox_rma_addr_ = virt_addr_ ? reinterpret_cast<std::uintptr_t>(mbox_.data()) : 0;
    credit_rma_addr_ = virt_addr_ ? reinterpret_cast<std::uintptr_t>(mbox_credit_.data()) : 0;
    local_flags_ |= kMailboxes;
  }
}

}  // namespace strata::transport::detail::fabric
