// Same-host backend: options, segments and the two start-up exchanges, teardown.
#include "shm/shm_backend.hpp"

namespace strata::transport::detail::shmem {

namespace {

std::string job_tag(const JobInfo& job) {
  return strata::detail::rdv::shm_job_tag(job.job_id, job.secret.data(), job.secret.size());
}

std::uint64_t ring_bytes_from_env() {
  const char* v = strata::detail::env::get("STRATA_SHM_RING_BYTES");
  if (v == nullptr) return kDefaultRingBytes;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || n < 4096 || n > (1ULL << 30) || (n & (n - 1)) != 0) {
    throw Error(Errc::invalid_argument,
                std::string("STRATA_SHM_RING_BYTES='") + v + "': expected a power of two in [4096, 2^30]");
  }
  return n;
}

std::size_t direct_min_from_env() {
  const char* v = strata::detail::env::get("STRATA_SHM_DIRECT");
  if (v == nullptr) return kDefaultDirectMin;
  if (std::strcmp(v, "off") == 0) return SIZE_MAX;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0') {
    throw Error(Errc::invalid_argument, std::string("STRATA_SHM_DIRECT='") + v + "': expected a byte count or 'off'");
  }
  return static_cast<std::size_t>(n);
}

NtMode nt_mode_from_env() {
  const char* v = strata::detail::env::get("STRATA_SHM_NT");
  if (v == nullptr || std::strcmp(v, "auto") == 0) return NtMode::automatic;
  if (std::strcmp(v, "on") == 0) return NtMode::on;
  if (std::strcmp(v, "off") == 0) return NtMode::off;
  throw Error(Errc::invalid_argument, std::string("STRATA_SHM_NT='") + v + "': expected auto, on or off");
}

double nt_gbps_from_env() {
  const char* v = strata::detail::env::get("STRATA_SHM_NT_GBPS");
  if (v == nullptr) return kDefaultNtGbps;
  char* end = nullptr;
  errno = 0;
  const double g = std::strtod(v, &end);
  if (errno != 0 || end == v || *end != '\0' || !(g > 0.0) || g > 1e6) {
    throw Error(Errc::invalid_argument, std::string("STRATA_SHM_NT_GBPS='") + v + "': expected GB/s in (0, 1e6]");
  }
  return g;
}

/// Position of rank @p r among this host's ranks @p locals, or -1.
int local_index(const std::vector<int>& locals, int r) {
  auto it = std::find(locals.begin(), locals.end(), r);
  return it == locals.end() ? -1 : static_cast<int>(it - locals.begin());
}

}  // namespace

// ----------------------------------------------------------------- set-up
// The constructor runs these steps in order; every rank takes part in both
// exchanges even when a step failed, so that all ranks fail together.

ShmBackend::ShmBackend(Bootstrap& boot, const Hierarchy& hier, const std::vector<bool>& serve,
                       const TransportOptions& opts)
    : rank_(boot.rank()), size_(boot.size()), timeout_(opts.timeout) {
  const std::string who = "shm backend (rank " + std::to_string(rank_) + ")";
  read_options(hier, serve, opts, who);
  const std::vector<int> locals = hier.host_ranks(rank_);
  select_peers(hier, serve, locals, who);
  tag_ = job_tag(boot.job());

  Hello mine{};
  mine.magic = kMagic;
  mine.pid = ::getpid();
  mine.host = hier.place(rank_).host;
  mine.ok = 1;
  const bool created = !served_.empty() && create_segment(locals.size(), mine);

  // Exchange 1: everyone's segment exists (or the reason it does not).
  const std::vector<std::vector<std::byte>> hellos = exchange(boot, &mine, sizeof(mine), created);
  std::string problem = mine.ok ? std::string() : std::string(mine.error);
  for (int r : served_) {
    Peer& p = *(peers_[static_cast<std::size_t>(r)] = std::make_unique<Peer>());
    p.rank = r;
    p.served = true;
    if (problem.empty()) problem = attach_peer(p, hellos.at(static_cast<std::size_t>(r)), locals);
  }
  frag_ = Ring(nullptr, nullptr, ring_bytes_).max_payload();

  // Exchange 2: everyone mapped everything; the names can go.
  const std::int32_t ok = problem.empty() ? 1 : 0;
  const std::vector<std::vector<std::byte>> oks = exchange(boot, &ok, sizeof(ok), created);
  if (created) ::shm_unlink(seg_name(rank_).c_str());
  for (int r : served_) {
    std::int32_t v = 0;
    const auto& blob = oks.at(static_cast<std::size_t>(r));
    if (blob.size() == sizeof(v)) std::memcpy(&v, blob.data(), sizeof(v));
    if (v == 0 && problem.empty()) problem = "peer rank " + std::to_string(r) + " failed to map the segments";
  }
  if (!problem.empty()) {
    for (auto& m : maps_) ::munmap(m.first, m.second);
    maps_.clear();
    if (seg_ != nullptr) ::munmap(seg_, seg_bytes_);
    seg_ = nullptr;
    if (sock_ >= 0) ::close(sock_);
    sock_ = -1;
    throw Error(Errc::transport_error, who + ": " + problem);
  }
  install_region_unmap();
}

void ShmBackend::read_options(const Hierarchy& hier, const std::vector<bool>& serve, const TransportOptions& opts,
                              const std::string& who) {
  if (serve.size() != static_cast<std::size_t>(size_)) {
    throw Error(Errc::invalid_argument, who + ": serve mask has " + std::to_string(serve.size()) +
                                            " entries for a job of " + std::to_string(size_) + " ranks");
  }
  if (hier.size() != size_) {
    throw Error(Errc::invalid_argument,
                who + ": hierarchy has " + std::to_string(hier.size()) + " ranks, job has " + std::to_string(size_));
  }
  if (timeout_.count() <= 0) throw Error(Errc::invalid_argument, who + ": timeout must be positive");
  if (opts.cma_threshold != 0) cma_threshold_ = opts.cma_threshold;
  ring_bytes_ = ring_bytes_from_env();
  direct_min_ = direct_min_from_env();
  nt_mode_ = nt_mode_from_env();
  nt_gbps_ = nt_gbps_from_env();
}

void ShmBackend::select_peers(const Hierarchy& hier, const std::vector<bool>& serve, const std::vector<int>& locals,
                              const std::string& who) {
  peers_.resize(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    if (!serve[static_cast<std::size_t>(r)]) continue;
    if (local_index(locals, r) < 0) {
      throw Error(Errc::invalid_argument, who + ": asked to serve rank " + std::to_string(r) + ", which is on host " +
                                              std::to_string(hier.place(r).host) + ", not this rank's host " +
                                              std::to_string(hier.place(rank_).host));
    }
    served_.push_back(r);
  }
}

std::string ShmBackend::seg_name(int r) const { return "/strata-" + tag_ + "-" + std::to_string(r); }

void ShmBackend::wake_address(int r, sockaddr_un* a, socklen_t* l) const {
  const std::string n = "strata-" + tag_ + "-w" + std::to_string(r);
  std::memset(a, 0, sizeof(*a));
  a->sun_family = AF_UNIX;
  std::memcpy(a->sun_path + 1, n.data(), n.size());  // abstract namespace: sun_path[0] == 0
  *l = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n.size());
}

bool ShmBackend::create_segment(std::size_t nlocal, Hello& mine) {
  auto fail_local = [&mine](const std::string& what) {
    mine.ok = 0;
    std::snprintf(mine.error, sizeof(mine.error), "%s", what.c_str());
  };
  // Lets peers use CMA on us under Yama ptrace_scope=1 (EINVAL without Yama: ignored).
  (void)::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  sock_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  wake_address(rank_, &self_addr_, &self_len_);
  if (sock_ < 0 || ::bind(sock_, reinterpret_cast<const sockaddr*>(&self_addr_), self_len_) != 0) {
    fail_local(std::string("wake socket: ") + std::strerror(errno));
  }
  seg_bytes_ = sizeof(SegHeader) + nlocal * (sizeof(RingCtl) + ring_bytes_);
  const std::string name = seg_name(rank_);
  const int fd = mine.ok ? ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600) : -1;
  if (mine.ok && fd < 0) fail_local("shm_open(" + name + "): " + std::strerror(errno));
  if (fd < 0) return false;
  if (::ftruncate(fd, static_cast<off_t>(seg_bytes_)) != 0) {
    fail_local("ftruncate(" + name + "): " + std::strerror(errno));
  } else {
    void* m = ::mmap(nullptr, seg_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      fail_local("mmap(" + name + "): " + std::strerror(errno));
    } else {
      seg_ = m;
      hdr_ = new (seg_) SegHeader{};
      hdr_->magic = kMagic;
      hdr_->pid = mine.pid;
      hdr_->nlocal = nlocal;
      hdr_->ring_bytes = ring_bytes_;
      hdr_->sleeping.store(0, std::memory_order_relaxed);
      auto* base = static_cast<std::byte*>(seg_) + sizeof(SegHeader);
      for (std::uint64_t i = 0; i < nlocal; ++i) new (base + i * (sizeof(RingCtl) + ring_bytes_)) RingCtl{};
      mine.seg_addr = reinterpret_cast<std::uintptr_t>(seg_);
      mine.seg_bytes = seg_bytes_;
    }
  }
  ::close(fd);
  return true;  // created: unlinked after the second exchange
}

std::vector<std::vector<std::byte>> ShmBackend::exchange(Bootstrap& boot, const void* data, std::size_t len,
                                                         bool created) {
  try {
    return boot.allgather(data, len);
  } catch (...) {
    if (created) ::shm_unlink(seg_name(rank_).c_str());
    throw;
  }
}

Ring ShmBackend::ring_at(void* seg, int idx) const {
  auto* b = static_cast<std::byte*>(seg) + sizeof(SegHeader) +
            static_cast<std::uint64_t>(idx) * (sizeof(RingCtl) + ring_bytes_);
  return Ring(reinterpret_cast<RingCtl*>(b), b + sizeof(RingCtl), ring_bytes_);
}

std::string ShmBackend::attach_peer(Peer& p, const std::vector<std::byte>& blob, const std::vector<int>& locals) {
  const int r = p.rank;
  Hello h{};
  if (blob.size() == sizeof(Hello)) std::memcpy(&h, blob.data(), sizeof(Hello));
  if (h.magic != kMagic || h.ok == 0) {
    return "peer rank " + std::to_string(r) + " could not create its segment: " +
           (h.magic == kMagic ? std::string(h.error, strnlen(h.error, sizeof(h.error))) : "bad hello");
  }
  p.pid = static_cast<pid_t>(h.pid);
  wake_address(r, &p.wake_addr, &p.wake_len);
  void* m = seg_;
  if (r != rank_) {
    const std::string name = seg_name(r);
    const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) return "shm_open(" + name + ") of peer rank " + std::to_string(r) + ": " + std::strerror(errno);
    struct stat st {};
    m = (::fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_size) == h.seg_bytes)
            ? ::mmap(nullptr, h.seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
            : MAP_FAILED;
    ::close(fd);
    if (m == MAP_FAILED) return "mapping the segment of peer rank " + std::to_string(r) + " failed";
    maps_.emplace_back(m, h.seg_bytes);
  }
  p.hdr = static_cast<SegHeader*>(m);
  if (p.hdr->magic != kMagic || p.hdr->ring_bytes != ring_bytes_ || p.hdr->nlocal != locals.size())
    return "segment of peer rank " + std::to_string(r) + " has a different layout (STRATA_SHM_RING_BYTES differs?)";
  p.out = ring_at(m, local_index(locals, rank_));  // my ring inside the peer's segment
  p.in = ring_at(seg_, local_index(locals, r));    // the peer's ring inside mine
  if (r != rank_) probe_cma(p, h.seg_addr);
  return {};
}

void ShmBackend::probe_cma(Peer& p, std::uint64_t seg_addr) {
  // Read the peer's magic through process_vm_readv.
  std::uint64_t probe = 0;
  iovec l{&probe, sizeof(probe)};
  iovec rv{reinterpret_cast<void*>(seg_addr), sizeof(probe)};
  const ssize_t n = ::process_vm_readv(p.pid, &l, 1, &rv, 1, 0);
  if (n == static_cast<ssize_t>(sizeof(probe)) && probe == kMagic) {
    p.cma.store(true, std::memory_order_relaxed);
    cma_any_ = true;
  } else {
    disable_cma(p, n < 0 ? errno : EIO);
  }
}

void ShmBackend::install_region_unmap() {
  // Freed regions (notify_peers) tell the peers named at allocation to unmap them.
  std::lock_guard<std::mutex> g(regions_->mu);
  regions_->send_unmap = [this](int r, std::uint64_t id) {
    if (r < 0 || r >= size_ || !peers_[static_cast<std::size_t>(r)] || shut_.load(std::memory_order_acquire)) return;
    OutOp o;
    o.type = RecType::region_unmap;
    o.user = false;
    o.a = id;
    (void)post(*peers_[static_cast<std::size_t>(r)], o);  // dropped only when the peer is dead
  };
}

ShmBackend::~ShmBackend() {
  shut_.store(true, std::memory_order_release);
  {
    // Regions that outlive the transport keep their memory, not their names.
    std::lock_guard<std::mutex> g(regions_->mu);
    regions_->send_unmap = nullptr;
    for (RegionTable::Entry& e : regions_->live) {
      e.waiting.clear();
      RegionTable::unlink_if_done(e);
    }
  }
  for (auto& m : maps_) ::munmap(m.first, m.second);
  for (auto& p : peers_) {
    if (!p) continue;
    for (const Peer::Mapped& m : p->mapped)
      if (m.local != nullptr) ::munmap(m.local, m.len);
  }
  if (seg_ != nullptr) ::munmap(seg_, seg_bytes_);
  if (sock_ >= 0) ::close(sock_);
}

}  // namespace strata::transport::detail::shmem

namespace strata::transport::detail {

std::unique_ptr<Backend> make_shm_backend(Bootstrap& boot, const Hierarchy& hier, const std::vector<bool>& serve,
                                          const TransportOptions& opts) {
  return std::make_unique<shmem::ShmBackend>(boot, hier, serve, opts);
}

}  // namespace strata::transport::detail
