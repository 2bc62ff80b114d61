// libfabric backend: Endpoint and connection set-up: provider choice, fabric objects, the
// start-up exchange of endpoint names and keys, the warm-up hellos.
#include "fabric/fabric_backend.hpp"

#include <sys/epoll.h>
#include <unistd.h>

namespace strata::transport::detail::fabric {

namespace {
int provider_rank(const std::string& prov, const std::string& prefer) {
  // Lower is better; -1 excluded from automatic selection.
  if (!prefer.empty() && prov == prefer) return 0;
  static const char* const order[] = {"verbs;ofi_rxm", "efa", "cxi", "psm3", "opx", "tcp;ofi_rxm", "sockets", "tcp"};
  int i = 0;
  for (const char* p : order) {
    if (prov == p) return i + 1;
    ++i;
  }
  if (prov == "shm" || prov.find("ofi_rxd") != std::string::npos || prov == "udp" || prov == "net" ||
      prov.find("hook") != std::string::npos)
    return -1;
  return i + 1;
}
}  // namespace

FabricBackend::FabricBackend(Bootstrap& boot, const Hierarchy& hier, const std::vector<bool>& serve,
                             const TransportOptions& opts)
    : rank_(boot.rank()),
      size_(boot.size()),
      shm_tag_(strata::detail::rdv::shm_job_tag(boot.job().job_id, boot.job().secret.data(), boot.job().secret.size())),
      opts_(opts) {
  const bool any = select_peers(hier, serve);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  // 1. Open the fabric when some peer needs it; a failure is reported through
  //    the allgather so that every rank fails instead of hanging.
  const std::string open_error = any ? try_open() : std::string();
  const std::vector<std::byte> blob = start_blob(open_error);
  const auto all = boot.allgather(blob.data(), blob.size());
  if (!open_error.empty()) throw Error(Errc::transport_error, open_error);
  // 2. Check the peers' blobs, decide atomics, insert served peers into the AV.
  const std::vector<BlobHeader> heads = check_blobs(all);
  native_atomics_ = opened_ && !env_is("STRATA_FI_ATOMICS", "emulate");
  for (const BlobHeader& ph : heads)
    if (ph.opened != 0 && (ph.flags & kNativeAtomics) == 0) native_atomics_ = false;
  if (!opened_) return;
  for (int p = 0; p < size_; ++p)
    if (peers_[static_cast<std::size_t>(p)].served)
      connect_peer(p, heads[static_cast<std::size_t>(p)], all[static_cast<std::size_t>(p)]);
  // Deep idle sleep only when every peer that may post to this rank can ring.
  deep_ok_ = bell_.is_open();
  for (const PeerState& ps : peers_)
    if (ps.served && ps.bell_len == 0) deep_ok_ = false;
  // 3. Warm connections: one hello each way with every served peer.
  warm_up();
}

bool FabricBackend::select_peers(const Hierarchy& hier, const std::vector<bool>& serve) {
  if (static_cast<int>(serve.size()) != size_)
    throw Error(Errc::invalid_argument, "fabric backend (rank " + std::to_string(rank_) + "): serve has " +
                                            std::to_string(serve.size()) + " entries for " + std::to_string(size_) +
                                            " ranks");
  if (hier.size() != 0 && hier.size() != size_)
    throw Error(Errc::invalid_argument, "fabric backend (rank " + std::to_string(rank_) + "): hierarchy has " +
                                            std::to_string(hier.size()) + " ranks, bootstrap " + std::to_string(size_));
  peers_.resize(static_cast<std::size_t>(size_));
  bool any = false;
  for (int p = 0; p < size_; ++p) {
    peers_[static_cast<std::size_t>(p)].served = serve[static_cast<std::size_t>(p)] && p != rank_;
    if (peers_[static_cast<std::size_t>(p)].served) {
      single_peer_ = any ? -1 : p;  // the only served peer, or -1
      any = true;
    }
  }
  return any;
}

std::string FabricBackend::try_open() {
  try {
    open();
  } catch (const Error& e) {
    std::string open_error = e.what();
    const std::string suffix = ": " + e.code().message();  // added by std::system_error
    if (open_error.size() > suffix.size() &&
        open_error.compare(open_error.size() - suffix.size(), suffix.size(), suffix) == 0)
      open_error.resize(open_error.size() - suffix.size());
    close_all();
    return open_error;
  }
  return {};
}

std::vector<std::byte> FabricBackend::start_blob(const std::string& open_error) const {
  BlobHeader h;
  h.opened = (opened_ ? 1u : 0u);
  h.flags = local_flags_;
  h.landing_addr = landing_rma_addr_;
  h.landing_key = landing_key_;
  h.mbox_addr = mbox_rma_addr_;
  h.mbox_key = mbox_key_;
  h.credit_addr = credit_rma_addr_;
  h.credit_key = credit_key_;
  std::snprintf(h.provider, sizeof(h.provider), "%s", provider_.c_str());
  std::snprintf(h.error, sizeof(h.error), "%s", open_error.c_str());
  h.name_len = static_cast<std::uint32_t>(ep_name_.size());
  h.bell_len = static_cast<std::uint32_t>(bell_.address_len());
  std::memcpy(h.bell_addr.data(), &bell_.address(), std::min<std::size_t>(bell_.address_len(), h.bell_addr.size()));
  std::vector<std::byte> blob(sizeof(h) + ep_name_.size());
  std::memcpy(blob.data(), &h, sizeof(h));
  if (!ep_name_.empty()) std::memcpy(blob.data() + sizeof(h), ep_name_.data(), ep_name_.size());
  return blob;
}

std::vector<BlobHeader> FabricBackend::check_blobs(const std::vector<std::vector<std::byte>>& all) {
  std::vector<BlobHeader> heads(static_cast<std::size_t>(size_));
  for (int p = 0; p < size_; ++p) {
    const auto& b = all.at(static_cast<std::size_t>(p));
    BlobHeader& ph = heads[static_cast<std::size_t>(p)];
    if (b.size() < sizeof(BlobHeader)) fail_start(Errc::bootstrap_error, p, "sent a malformed start-up blob");
    std::memcpy(&ph, b.data(), sizeof(BlobHeader));
    ph.provider[sizeof(ph.provider) - 1] = '\0';
    ph.error[sizeof(ph.error) - 1] = '\0';
    if (ph.magic != kBlobMagic || b.size() != sizeof(BlobHeader) + ph.name_len)
      fail_start(Errc::bootstrap_error, p, "sent a malformed start-up blob");
    if (ph.error[0] != '\0') fail_start(Errc::transport_error, p, std::string("failed to open libfabric: ") + ph.error);
  }
  return heads;
}

void FabricBackend::connect_peer(int p, const BlobHeader& ph, const std::vector<std::byte>& blob) {
  PeerState& ps = peers_[static_cast<std::size_t>(p)];
  if (ph.opened == 0) fail_start(Errc::bootstrap_error, p, "did not open libfabric although this rank serves it");
  if (provider_ != ph.provider)
    fail_start(Errc::transport_error, p,
               std::string("uses provider '") + ph.provider + "', this rank '" + provider_ + "'");
  fi_addr_t a = FI_ADDR_UNSPEC;
  int rc = fi_av_insert(av_, blob.data() + sizeof(BlobHeader), 1, &a, 0, nullptr);
  if (rc != 1) fail_start(Errc::transport_error, p, "fi_av_insert failed: " + fi_err(rc));
  ps.addr = a;
  if (ph.bell_len > 0 && ph.bell_len <= ph.bell_addr.size()) {
    std::memcpy(&ps.bell, ph.bell_addr.data(), ph.bell_len);
    ps.bell_len = static_cast<socklen_t>(ph.bell_len);
  }
  ps.landing_addr = ph.landing_addr;
  ps.landing_key = ph.landing_key;
  // Mailboxes when both sides keep them; each rank's ring and credit word
  // at the peer are indexed by its world rank.
  ps.mbox = (local_flags_ & kMailboxes) != 0 && (ph.flags & kMailboxes) != 0;
  if (ps.mbox) {
    ps.mbox_addr = ph.mbox_addr + static_cast<std::uint64_t>(rank_) * kMboxEntries * sizeof(MboxEntry);
    ps.mbox_key = ph.mbox_key;
    ps.credit_addr = ph.credit_addr + static_cast<std::uint64_t>(rank_) * sizeof(std::uint64_t);
    ps.credit_key = ph.credit_key;
    mbox_peers_.push_back(p);
  }
  // Per direction: signals to p are CQ data when p can attribute them (the
  // provider is the same on both sides, so cq_data_ok_ holds there too).
  ps.cq_signals = cq_data_ok_ && (ph.flags & kCanResolveSource) != 0 && !env_is("STRATA_FI_SIGNAL", "msg");
  if (addr_to_rank_.size() <= a) addr_to_rank_.resize(static_cast<std::size_t>(a) + 1, -1);
  addr_to_rank_[static_cast<std::size_t>(a)] = p;
}

FabricBackend::~FabricBackend() {
  shutdown();
  std::lock_guard<std::mutex> lk(mu_);
  close_all();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

std::string FabricBackend::name() const {
  // "+mailboxes": small signals to some peers travel as mailbox entries.
  // "+waitfd": the CQ's wait fd is what a blocked server sleeps on.
  return "ofi:" + (provider_.empty() ? std::string("none") : provider_) + (mbox_peers_.empty() ? "" : "+mailboxes") +
         (cq_fd_ >= 0 ? "+waitfd" : "");
}

fi_info* FabricBackend::get_info(std::uint64_t caps, std::uint64_t order, const std::string& prov) {
  fi_info* hints = fi_allocinfo();
  if (hints == nullptr) throw Error(Errc::internal, "fi_allocinfo failed");
  hints->caps = caps;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->tx_attr->msg_order = order;
  hints->rx_attr->msg_order = order;
  if (!prov.empty()) hints->fabric_attr->prov_name = strdup(prov.c_str());
  fi_info* info = nullptr;
  int rc = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info);
  fi_freeinfo(hints);
  if (rc != 0) return nullptr;
  return info;
}

void FabricBackend::open() {
  info_ = pick_provider();
  read_provider();
  open_domain();
  open_endpoint();
  if ((info_->caps & FI_ATOMIC) != 0) {
    std::size_t count = 0;
    if (fi_fetch_atomicvalid(ep_, FI_UINT64, FI_SUM, &count) == 0 && count >= 1) local_flags_ |= kNativeAtomics;
  }
  open_registrations();
  post_receives();
  opened_ = true;
}

fi_info* FabricBackend::pick_provider() {
  const std::uint64_t base =
      FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_SEND | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE;
  const std::uint64_t tries[] = {base | FI_ATOMIC | FI_SOURCE, base | FI_SOURCE, base | FI_ATOMIC, base};
  const std::string& want = opts_.provider;
  // Providers report the ordering that was asked for: ask for what the
  // signal paths can use (WAW: CQ-data signals after earlier writes; SAW:
  // a signal message right behind its write; RAW: flush reads), then less.
  const std::uint64_t orders[] = {FI_ORDER_SAS | FI_ORDER_WAW | FI_ORDER_SAW | FI_ORDER_RAW, FI_ORDER_SAS};
  // Pick: the requested provider, else the best-ranked one over ALL the
  // capability tiers (a provider that lacks atomics or RAW ordering, like
  // tcp;ofi_rxm, must still beat `sockets`, which offers everything but is
  // ~4 ms per operation here); within a provider the richest tier wins, and
  // a non-loopback domain is preferred.
  fi_info* pick = nullptr;
  int best = 1 << 30;
  bool any = false;
  for (std::uint64_t order : orders) {
    for (std::uint64_t caps : tries) {
      fi_info* list = get_info(caps, order, want);
      if (list == nullptr) continue;
      any = true;
      for (fi_info* i = list; i != nullptr; i = i->next) {
        std::string prov = i->fabric_attr->prov_name != nullptr ? i->fabric_attr->prov_name : "";
        int r = want.empty() ? provider_rank(prov, opts_.prefer_provider) : 0;
        if (r < 0) continue;
        bool lo = i->domain_attr->name != nullptr && std::strcmp(i->domain_attr->name, "lo") == 0;
        r = r * 2 + (lo ? 1 : 0);
        if (r < best) {
          best = r;
          if (pick != nullptr) fi_freeinfo(pick);
          pick = fi_dupinfo(i);
        }
      }
      fi_freeinfo(list);
      if (!want.empty() && pick != nullptr) break;  // the requested provider at its richest tier
    }
    if (!want.empty() && pick != nullptr) break;
  }
  if (!any)
    throw Error(Errc::transport_error,
                "fabric backend (rank " + std::to_string(rank_) + "): no libfabric provider " +
                    (want.empty() ? std::string("with FI_RDM + FI_RMA + FI_MSG") : "'" + want + "'") +
                    " available (check STRATA_PROVIDER and fi_info)");
  if (pick == nullptr) {
    throw Error(Errc::transport_error, "fabric backend (rank " + std::to_string(rank_) +
                                           "): no suitable provider for remote peers (only shm/udp/rxd found); set "
                                           "STRATA_PROVIDER");
  }
  return pick;
}

void FabricBackend::read_provider() {
  provider_ = info_->fabric_attr->prov_name;
  strata::detail::logger().info(
      "fabric: provider {}, fabric {}, domain (interface) {}, {} remote peer(s)", provider_,
      info_->fabric_attr->name != nullptr ? info_->fabric_attr->name : "?",
      info_->domain_attr != nullptr && info_->domain_attr->name != nullptr ? info_->domain_attr->name : "?",
      std::count_if(peers_.begin(), peers_.end(), [](const auto& q) { return q.served; }));
  const std::uint64_t mr_mode = static_cast<std::uint64_t>(info_->domain_attr->mr_mode);
  virt_addr_ = (mr_mode & FI_MR_VIRT_ADDR) != 0;
  prov_key_ = (mr_mode & FI_MR_PROV_KEY) != 0;
  mr_local_ = (mr_mode & FI_MR_LOCAL) != 0;
  mr_endpoint_ = (mr_mode & FI_MR_ENDPOINT) != 0;
  max_msg_ = info_->ep_attr->max_msg_size == 0 ? (std::size_t{1} << 30) : info_->ep_attr->max_msg_size;
  max_msg_ = std::min<std::size_t>(max_msg_, std::size_t{1} << 30);
  const bool has_source = (info_->caps & FI_SOURCE) != 0;
  const bool waw = (info_->tx_attr->msg_order & FI_ORDER_WAW) != 0;
  saw_ = (info_->tx_attr->msg_order & FI_ORDER_SAW) != 0;
  raw_ = (info_->tx_attr->msg_order & FI_ORDER_RAW) != 0;
  // CQ-data signals need the source of a remote write from fi_cq_readfrom.
  // Measured with libfabric 1.17: shm reports it; tcp;ofi_rxm accepts
  // FI_SOURCE but leaves src_addr unset for remote writes, so signals to it
  // travel as messages. STRATA_FI_SIGNAL=cqdata|msg overrides.
  // A rank that serves a single fabric peer needs no source: every remote
  // CQ data entry comes from that peer (e.g. 2 ranks on 2 hosts).
  const bool source_for_rma = provider_ == "shm" || env_is("STRATA_FI_SIGNAL", "cqdata");
  cq_data_ok_ = waw && info_->domain_attr->cq_data_size >= 8;
  if (cq_data_ok_ && ((has_source && source_for_rma) || single_peer_ >= 0)) local_flags_ |= kCanResolveSource;
  // Delivery complete: requested per operation; fall back to a flushing read.
  delivery_complete_ = !env_is("STRATA_FI_DELIVERY", "flush") || !raw_;
  // Small signals and put_with_signal go out with fi_inject*: done at the
  // post, no transmit completion to reap (over tcp;ofi_rxm that completion
  // costs a poll, a pipe write and read and a CQ read: ~2.4 us measured on
  // a broadcast root's 8 B put; docs/fabric.md, "Mailboxes").
  inject_max_ = env_is("STRATA_FI_INJECT", "off") ? 0 : info_->tx_attr->inject_size;
}

void FabricBackend::check_fi(int rc, const char* what) const {
  if (rc != 0)
    throw Error(Errc::transport_error, "fabric backend (rank " + std::to_string(rank_) + ", provider " + provider_ +
                                           "): " + what + " failed: " + fi_err(rc));
}

void FabricBackend::open_domain() {
  check_fi(fi_fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
  check_fi(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_DATA;
  cq_attr.size = 0;
  // With libfabric 1.17 neither tcp;ofi_rxm nor shm wake a thread blocked on
  // the CQ fd reliably when data arrives (measured: every wait ran to its
  // timeout), so the fd is opt-in for them (STRATA_FI_WAIT=fd); the default is no
  // wait object and wait_fd() == -1: the caller polls.
  // The net provider's fd does wake a blocked server when data arrives
  // (session 19: a 1 MiB broadcast across 2 hosts overlapped 81-86% with
  // compute in 6 of 8 runs through it, 35-64% polling; same latency 8 B -
  // 1 MiB; docs/fabric.md "Progress, waiting"), so it
  // is the default there; STRATA_FI_WAIT=poll|fd overrides either way.
  const bool want_fd = env_is("STRATA_FI_WAIT", "fd") || (provider_ == "net" && !env_is("STRATA_FI_WAIT", "poll"));
  cq_attr.wait_obj = want_fd ? FI_WAIT_FD : FI_WAIT_NONE;
  if (fi_cq_open(domain_, &cq_attr, &cq_, nullptr) != 0) {
    cq_attr.wait_obj = FI_WAIT_NONE;
    check_fi(fi_cq_open(domain_, &cq_attr, &cq_, nullptr), "fi_cq_open");
  }
  if (cq_attr.wait_obj == FI_WAIT_FD) {
    int fd = -1;
    if (fi_control(&cq_->fid, FI_GETWAIT, &fd) == 0) {
      edge_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLET;
      if (edge_fd_ >= 0 && ::epoll_ctl(edge_fd_, EPOLL_CTL_ADD, fd, &ev) == 0) {
        cq_fd_ = fd;
      } else if (edge_fd_ >= 0) {
        ::close(edge_fd_);  // polled with the doorbell, as without an fd
        edge_fd_ = -1;
      }
    }
  }
}

void FabricBackend::open_endpoint() {
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  check_fi(fi_av_open(domain_, &av_attr, &av_, nullptr), "fi_av_open");
  check_fi(fi_endpoint(domain_, info_, &ep_, nullptr), "fi_endpoint");
  check_fi(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
  check_fi(fi_ep_bind(ep_, &av_->fid, 0), "fi_ep_bind(av)");
  // libfabric 1.17's tcp provider queues an RMA inject without marking it
  // one (tcpx_rma_inject_common sets no TCPX_INJECT_OP): when the
  // connection fails while one is queued it reports an error entry with no
  // context, which ofi_rxm dereferences (SIGSEGV in rxm_handle_comp_error,
  // read from a core with a debug build of 1.17.0: err ENOTCONN, context
  // null; a survivor crashed in ~1 of 100 peer-death runs across two virtual
  // hosts). ofi_rxm emulates every RMA inject through a buffer of its own
  // (a context it owns, freed on error) once the endpoint has a write
  // counter: bind one. It costs an rxm buffer copy per inject.
  if (provider_ == "tcp;ofi_rxm" && FI_VERSION_LT(fi_version(), FI_VERSION(1, 18)) &&
      !env_is("STRATA_FI_INJECT_GUARD", "off")) {
    fi_cntr_attr ca{};
    ca.events = FI_CNTR_EVENTS_COMP;
    ca.wait_obj = FI_WAIT_NONE;
    check_fi(fi_cntr_open(domain_, &ca, &wr_cntr_, nullptr), "fi_cntr_open (rxm inject guard)");
    check_fi(fi_ep_bind(ep_, &wr_cntr_->fid, FI_WRITE), "fi_ep_bind(write counter)");
  }
  if (provider_ == "shm") {
    // The shm provider names its region "<pid>:<domain>:<endpoint>" in
    // /dev/shm; a killed process leaves it behind and a later process that
    // reuses the PID fails fi_enable with EBUSY (seen in CI). A name from the
    // job tag is unique per job and rank, and strata-run's end-of-job sweep
    // of "strata-<tag>-*" removes it if this rank dies.
    std::string shm_name = "strata-" + shm_tag_ + "-fi" + std::to_string(rank_);
    check_fi(fi_setname(&ep_->fid, shm_name.data(), shm_name.size() + 1), "fi_setname");
  }
  check_fi(fi_enable(ep_), "fi_enable");
  std::array<char, 256> name{};
  std::size_t name_len = name.size();
  check_fi(fi_getname(&ep_->fid, name.data(), &name_len), "fi_getname");
  ep_name_.assign(name.data(), name.data() + name_len);
  // The doorbell, at this endpoint's IP address (tcp-like providers); none
  // for other address formats or with STRATA_FI_DOORBELL=off.
  if (!env_is("STRATA_FI_DOORBELL", "off")) bell_.open(ep_name_, sizeof(BlobHeader{}.bell_addr));
}

void FabricBackend::post_receives() {
  for (std::size_t i = 0; i < kSendSlots; ++i) free_slots_.push_back(static_cast<int>(kSendSlots - 1 - i));
  recv_ops_.resize(kRecvSlots);
  for (std::size_t i = 0; i < kRecvSlots; ++i) {
    recv_ops_[i] = std::make_unique<Op>();
    recv_ops_[i]->kind = Kind::recv;
    recv_ops_[i]->slot = static_cast<int>(i);
    int prc = post_recv(static_cast<int>(i));
    check_fi(prc, "fi_recv (pre-posting)");
  }
}

void FabricBackend::close_all() {
  bell_.close();
  if (ep_ != nullptr) fi_close(&ep_->fid);
  ep_ = nullptr;
  if (wr_cntr_ != nullptr) fi_close(&wr_cntr_->fid);
  wr_cntr_ = nullptr;
  for (Op* o : ops_) o->local_mr = nullptr;
  cache_.reset();  // closes every registration (before the domain)
  published_.clear();
  send_desc_ = recv_desc_ = nullptr;
  if (av_ != nullptr) fi_close(&av_->fid);
  av_ = nullptr;
  if (cq_ != nullptr) fi_close(&cq_->fid);
  cq_ = nullptr;
  cq_fd_ = -1;
  if (edge_fd_ >= 0) ::close(edge_fd_);
  edge_fd_ = -1;
  if (domain_ != nullptr) fi_close(&domain_->fid);
  domain_ = nullptr;
  if (fabric_ != nullptr) fi_close(&fabric_->fid);
  fabric_ = nullptr;
  if (info_ != nullptr) fi_freeinfo(info_);
  info_ = nullptr;
  ops_.clear();
  opened_ = false;
}

void FabricBackend::warm_up() {
  std::vector<int> targets;
  {
    std::lock_guard<std::mutex> lk(mu_);
    // The lower rank connects first and the higher one answers: rxm
    // resolves simultaneous connects, but measured here the pair then ran
    // one to two orders of magnitude slower than after a one-sided connect.
    for (int p = 0; p < size_; ++p) {
      if (!peers_[static_cast<std::size_t>(p)].served) continue;
      targets.push_back(p);
      if (p > rank_) send_hello(p);
    }
  }
  const auto deadline = Clock::now() + opts_.timeout;
  for (;;) {
    int missing = -1;
    bool sends_pending = false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      progress_locked(Clock::now());
      for (int p : targets) {
        const PeerState& ps = peers_[static_cast<std::size_t>(p)];
        if (!ps.dead.is_ok())
          throw Error(ps.dead.code(), "fabric backend (rank " + std::to_string(rank_) +
                                          "): warming the connection to rank " + std::to_string(p) +
                                          " failed: " + ps.dead.message());
        if (!ps.hello_seen && missing < 0) missing = p;
      }
      sends_pending = !ops_.empty();
    }
    if (missing < 0 && !sends_pending) break;
    if (Clock::now() > deadline)
      throw Error(Errc::timeout, "fabric backend (rank " + std::to_string(rank_) + "): rank " +
                                     std::to_string(missing < 0 ? targets.front() : missing) +
                                     " did not answer the start-up hello within " +
                                     std::to_string(opts_.timeout.count()) + " ms");
    wait_for_event(std::chrono::microseconds(1000));
  }
  // Events produced while warming (none owed to the user) are dropped.
  std::lock_guard<std::mutex> lk(mu_);
  events_.clear();
}

}  // namespace strata::transport::detail::fabric

namespace strata::transport::detail {

std::unique_ptr<Backend> make_fabric_backend(Bootstrap& boot, const Hierarchy& hier, const std::vector<bool>& serve,
                                             const TransportOptions& opts) {
  return std::make_unique<fabric::FabricBackend>(boot, hier, serve, opts);
}

}  // namespace strata::transport::detail
