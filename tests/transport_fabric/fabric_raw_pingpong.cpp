// Raw libfabric measurement, no strata backend: fi_writedata ping-pong latency
// (8 bytes, CQ data as the signal) and fi_write bandwidth (FI_DELIVERY_COMPLETE
// like the backend's put), with the same provider selection the backend uses,
// so the backend can be compared with the raw provider. Two ranks, started
// like fabric_rank:
//
//   fabric_raw_pingpong <rendezvous-socket> <rank> 2 <provider> [bytes]
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <sched.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "test_bootstrap.hpp"

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const char* what, long rc) {
  std::fprintf(stderr, "fabric_raw_pingpong: %s failed: %s (%ld)\n", what, fi_strerror(static_cast<int>(-rc)), rc);
  std::exit(1);
}

void check(long rc, const char* what) {
  if (rc != 0) fail(what, rc);
}

struct Raw {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_ep* ep = nullptr;
  fid_mr* mr = nullptr;
  fi_addr_t peer = FI_ADDR_UNSPEC;
  std::uint64_t peer_addr = 0;
  std::uint64_t peer_key = 0;

  /// Reads one completion (spinning); returns its flags and data.
  /// RAW_YIELD=1: sched_yield() after every 256 empty polls, like the
  /// backend's waiters (a pure spinner measures the scheduler on a loaded
  /// machine, not the provider).
  bool yield = std::getenv("RAW_YIELD") != nullptr;

  fi_cq_data_entry wait_one() {
    fi_cq_data_entry e{};
    for (unsigned idle = 1;; ++idle) {
      ssize_t n = fi_cq_read(cq, &e, 1);
      if (n == 1) return e;
      if (yield && (idle & 255U) == 0) sched_yield();
      if (n == -FI_EAVAIL) {
        fi_cq_err_entry ee{};
        fi_cq_readerr(cq, &ee, 0);
        fail("completion", -ee.err);
      }
      if (n != -FI_EAGAIN) fail("fi_cq_read", n);
    }
  }

  template <typename F>
  void post(F&& f, const char* what) {
    for (;;) {
      ssize_t rc = f();
      if (rc == 0) return;
      if (rc != -FI_EAGAIN) fail(what, rc);
      fi_cq_data_entry e{};
      (void)fi_cq_read(cq, &e, 0);  // progress
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s <socket> <rank> 2 <provider> [bytes]\n", argv[0]);
    return 2;
  }
  const int rank = std::atoi(argv[2]);
  const std::string prov = argv[4];
  const std::size_t bw_size = argc > 5 ? std::strtoull(argv[5], nullptr, 10) : (std::size_t{4} << 20);
  strata::fabric_test::SocketBootstrap boot(argv[1], rank, 2);

  Raw r;
  // The backend's hints: the richest capability tier and ordering the
  // provider accepts (transport/src/fabric/fabric_setup.cpp, open()), so the
  // provider runs in the same configuration. RAW_PLAIN=1: minimal hints
  // (FI_MSG | FI_RMA, the provider's default ordering) instead.
  const bool plain = std::getenv("RAW_PLAIN") != nullptr;
  const std::uint64_t base = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  const std::uint64_t tiers[] = {base | FI_ATOMIC | FI_SOURCE, base | FI_SOURCE, base | FI_ATOMIC, base};
  const std::uint64_t orders[] = {FI_ORDER_SAS | FI_ORDER_WAW | FI_ORDER_SAW | FI_ORDER_RAW, FI_ORDER_SAS};
  int rc_info = -FI_ENODATA;
  for (std::uint64_t order : orders) {
    for (std::uint64_t caps : tiers) {
      if (plain && (caps != base || order != orders[0])) continue;
      fi_info* hints = fi_allocinfo();
      hints->caps = caps;
      if (!plain) {
        hints->tx_attr->msg_order = order;
        hints->rx_attr->msg_order = order;
      }
      hints->mode = FI_CONTEXT | FI_CONTEXT2;
      hints->ep_attr->type = FI_EP_RDM;
      hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
      hints->domain_attr->threading = FI_THREAD_DOMAIN;
      hints->fabric_attr->prov_name = strdup(prov.c_str());
      rc_info = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &r.info);
      fi_freeinfo(hints);
      if (rc_info == 0) break;
    }
    if (rc_info == 0) break;
  }
  check(rc_info, "fi_getinfo");
  // same choice as the backend: first non-loopback domain
  fi_info* pick = r.info;
  for (fi_info* i = r.info; i != nullptr; i = i->next) {
    if (i->domain_attr->name == nullptr || std::strcmp(i->domain_attr->name, "lo") != 0) {
      pick = i;
      break;
    }
  }
  const auto mr_mode = static_cast<std::uint64_t>(pick->domain_attr->mr_mode);
  check(fi_fabric(pick->fabric_attr, &r.fabric, nullptr), "fi_fabric");
  check(fi_domain(r.fabric, pick, &r.domain, nullptr), "fi_domain");
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_DATA;
  cq_attr.wait_obj = FI_WAIT_NONE;
  check(fi_cq_open(r.domain, &cq_attr, &r.cq, nullptr), "fi_cq_open");
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  check(fi_av_open(r.domain, &av_attr, &r.av, nullptr), "fi_av_open");
  check(fi_endpoint(r.domain, pick, &r.ep, nullptr), "fi_endpoint");
  check(fi_ep_bind(r.ep, &r.cq->fid, FI_TRANSMIT | FI_RECV), "bind cq");
  check(fi_ep_bind(r.ep, &r.av->fid, 0), "bind av");
  check(fi_enable(r.ep), "fi_enable");

  std::vector<std::uint8_t> buf(bw_size + 64, 1);
  check(fi_mr_reg(r.domain, buf.data(), buf.size(), FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 1, 0,
                  &r.mr, nullptr),
        "fi_mr_reg");
  if ((mr_mode & FI_MR_ENDPOINT) != 0) {
    check(fi_mr_bind(r.mr, &r.ep->fid, 0), "fi_mr_bind");
    check(fi_mr_enable(r.mr), "fi_mr_enable");
  }
  void* desc = fi_mr_desc(r.mr);

  struct Blob {
    std::uint64_t addr;
    std::uint64_t key;
    std::size_t name_len;
    std::array<char, 256> name;
  } me{};
  me.addr = (mr_mode & FI_MR_VIRT_ADDR) != 0 ? reinterpret_cast<std::uintptr_t>(buf.data()) : 0;
  me.key = fi_mr_key(r.mr);
  me.name_len = me.name.size();
  check(fi_getname(&r.ep->fid, me.name.data(), &me.name_len), "fi_getname");
  auto all = boot.allgather(&me, sizeof(me));
  Blob other{};
  std::memcpy(&other, all[static_cast<std::size_t>(1 - rank)].data(), sizeof(other));
  if (fi_av_insert(r.av, other.name.data(), 1, &r.peer, 0, nullptr) != 1) fail("fi_av_insert", -FI_EINVAL);
  r.peer_addr = other.addr;
  r.peer_key = other.key;

  fi_context2 ctx{};
  // RAW_MSG=1: the ping-pong uses 64-byte fi_send / fi_recv instead of
  // fi_writedata; RAW_MSG=2: an 8-byte fi_write, then the fi_send (what the
  // backend's message path does for put_with_signal).
  const char* raw_msg = std::getenv("RAW_MSG");
  const bool msg_mode = raw_msg != nullptr;
  const bool write_then_msg = msg_mode && std::strcmp(raw_msg, "2") == 0;
  int extra_completions = 0;  // local completions of the writes of RAW_MSG=2
  fi_context2 rctx{};
  std::uint8_t* rbuf = buf.data() + bw_size;  // the 64 bytes past the bandwidth buffer
  auto post_recv = [&] { r.post([&] { return fi_recv(r.ep, rbuf, 64, desc, FI_ADDR_UNSPEC, &rctx); }, "fi_recv"); };
  if (msg_mode) post_recv();
  boot.barrier();  // receives are posted before the first message
  auto writedata = [&](std::uint64_t data) {
    if (msg_mode) {
      if (write_then_msg) {
        // RAW_MORE=1: FI_MORE on the write (the provider may hold it for the message).
        iovec iov{buf.data() + 8, 8};
        fi_rma_iov riov{r.peer_addr + 8, 8, r.peer_key};
        fi_msg_rma m{};
        m.msg_iov = &iov;
        m.desc = &desc;
        m.iov_count = 1;
        m.addr = r.peer;
        m.rma_iov = &riov;
        m.rma_iov_count = 1;
        m.context = &ctx;
        const std::uint64_t more = std::getenv("RAW_MORE") != nullptr ? FI_MORE : 0;
        r.post([&] { return fi_writemsg(r.ep, &m, FI_COMPLETION | more); }, "fi_writemsg");
        ++extra_completions;
      }
      std::memcpy(buf.data(), &data, sizeof(data));
      r.post([&] { return fi_send(r.ep, buf.data(), 64, desc, r.peer, &ctx); }, "fi_send");
      return;
    }
    if (std::getenv("RAW_WRITEMSG") != nullptr) {
      iovec iov{buf.data(), 8};
      fi_rma_iov riov{r.peer_addr, 8, r.peer_key};
      fi_msg_rma m{};
      m.msg_iov = &iov;
      m.desc = &desc;
      m.iov_count = 1;
      m.addr = r.peer;
      m.rma_iov = &riov;
      m.rma_iov_count = 1;
      m.context = &ctx;
      m.data = data;
      const std::uint64_t dc = std::getenv("RAW_DC") != nullptr ? FI_DELIVERY_COMPLETE : 0;
      r.post([&] { return fi_writemsg(r.ep, &m, FI_COMPLETION | FI_REMOTE_CQ_DATA | dc); }, "fi_writemsg");
      return;
    }
    r.post([&] { return fi_writedata(r.ep, buf.data(), 8, desc, data, r.peer, r.peer_addr, r.peer_key, &ctx); },
           "fi_writedata");
  };
  // Waits for the remote CQ data entry; local write completions are counted on the side.
  int local_pending = 0;
  auto wait_remote = [&] {
    for (;;) {
      fi_cq_data_entry e = r.wait_one();
      if ((e.flags & FI_REMOTE_CQ_DATA) != 0) return;
      if (msg_mode && (e.flags & FI_RECV) != 0) {
        post_recv();
        return;
      }
      --local_pending;
    }
  };
  // warm-up: also opens the rxm connection both ways
  const int iters = 5000;
  const int warm = 100;
  double lat_us = 0;
  // Rank 0 also times every round trip: the median is the statistic
  // strata-bench reports (a mean on a shared machine mostly measures how often
  // a rank was descheduled).
  std::vector<double> half_rtt;
  half_rtt.reserve(iters);
  for (int i = 0; i < iters + warm; ++i) {
    static Clock::time_point t0;
    if (i == warm) t0 = Clock::now();
    if (rank == 0) {
      const auto s0 = Clock::now();
      writedata(static_cast<std::uint64_t>(i));
      ++local_pending;
      wait_remote();
      if (i >= warm) half_rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s0).count() / 2);
    } else {
      wait_remote();
      writedata(static_cast<std::uint64_t>(i));
      ++local_pending;
    }
    if (i == iters + warm - 1)
      lat_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters / 2;
  }
  local_pending += std::exchange(extra_completions, 0);
  while (local_pending > 0) {
    r.wait_one();
    --local_pending;
  }
  boot.barrier();
  // Bandwidth as strata-bench --transport measures a put: windows of 8
  // FI_DELIVERY_COMPLETE writes, each window posted and then waited for
  // entirely; time per write, median over the windows (repetitions sized to
  // the message as there), rank 0 writes first, then rank 1; the slower
  // writer's median counts. The passive rank polls its CQ meanwhile.
  const int window = 8;
  const int reps = bw_size <= 8192 ? 1000 : bw_size <= (std::size_t{1} << 20) ? 200 : bw_size <= (8u << 20) ? 40 : 20;
  const int windows = std::max(3, reps / window);
  const int warm_windows = std::max(1, std::max(2, reps / 10) / window);
  auto post_write = [&](std::uint64_t flags) {
    iovec iov{buf.data(), bw_size};
    fi_rma_iov riov{r.peer_addr, bw_size, r.peer_key};
    fi_msg_rma m{};
    m.msg_iov = &iov;
    m.desc = &desc;
    m.iov_count = 1;
    m.addr = r.peer;
    m.rma_iov = &riov;
    m.rma_iov_count = 1;
    m.context = &ctx;
    r.post([&] { return fi_writemsg(r.ep, &m, flags); }, "fi_writemsg");
  };
  std::vector<double> per_put;  // this rank's samples, us per write
  for (int writer = 0; writer < 2; ++writer) {
    boot.barrier();
    if (rank == writer) {
      for (int w = 0; w < warm_windows + windows; ++w) {
        const auto t0 = Clock::now();
        for (int j = 0; j < window; ++j) post_write(FI_COMPLETION | FI_DELIVERY_COMPLETE);
        for (int j = 0; j < window; ++j) r.wait_one();
        if (w >= warm_windows)
          per_put.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / window);
      }
      writedata(1);  // stop
      ++local_pending;
      local_pending += std::exchange(extra_completions, 0);
      while (local_pending > 0) {
        r.wait_one();
        --local_pending;
      }
    } else {
      wait_remote();
    }
  }
  std::sort(per_put.begin(), per_put.end());
  double my_median = per_put.empty() ? 0.0 : per_put[per_put.size() / 2];
  auto medians = boot.allgather(&my_median, sizeof(my_median));
  double m0 = 0;
  double m1 = 0;
  std::memcpy(&m0, medians[0].data(), sizeof(double));
  std::memcpy(&m1, medians[1].data(), sizeof(double));
  const double window_mbs = static_cast<double>(bw_size) / std::max(m0, m1);
  boot.barrier();
  // The former measure, for reference: rank 0 keeps 8 writes in flight
  // (a sliding window, never drained) over 64 writes, one timing.
  const int rounds = 64;
  double mbs = 0;
  if (rank == 0) {
    int inflight = 0;
    auto t0 = Clock::now();
    for (int i = 0; i < rounds; ++i) {
      while (inflight >= 8) {
        r.wait_one();
        --inflight;
      }
      iovec iov{buf.data(), bw_size};
      fi_rma_iov riov{r.peer_addr, bw_size, r.peer_key};
      fi_msg_rma m{};
      m.msg_iov = &iov;
      m.desc = &desc;
      m.iov_count = 1;
      m.addr = r.peer;
      m.rma_iov = &riov;
      m.rma_iov_count = 1;
      m.context = &ctx;
      r.post([&] { return fi_writemsg(r.ep, &m, FI_COMPLETION | FI_DELIVERY_COMPLETE); }, "fi_writemsg");
      ++inflight;
    }
    while (inflight > 0) {
      r.wait_one();
      --inflight;
    }
    mbs = static_cast<double>(bw_size) * rounds / std::chrono::duration<double>(Clock::now() - t0).count() / 1e6;
    writedata(1);  // stop
    ++local_pending;
    local_pending += std::exchange(extra_completions, 0);
    while (local_pending > 0) {
      r.wait_one();
      --local_pending;
    }
  } else {
    wait_remote();
  }
  if (rank == 0) {
    std::sort(half_rtt.begin(), half_rtt.end());
    std::printf("raw %s provider configuration: %s hints, FI_SOURCE %s, FI_ATOMIC %s, tx msg_order %#llx\n",
                prov.c_str(), plain ? "minimal (RAW_PLAIN)" : "the backend's", (pick->caps & FI_SOURCE) ? "on" : "off",
                (pick->caps & FI_ATOMIC) ? "on" : "off", static_cast<unsigned long long>(pick->tx_attr->msg_order));
    std::printf("raw %s %s one-way latency (polling): %.2f us (median of half round trips %.2f us)\n", prov.c_str(),
                msg_mode ? "fi_send 64 B" : "fi_writedata 8 B", lat_us, half_rtt[half_rtt.size() / 2]);
    std::printf(
        "raw %s fi_write bandwidth %zu B: %.1f MB/s (windows of %d as strata-bench: %d windows per "
        "writer, median us per write rank 0 %.2f, rank 1 %.2f, the slower counts)\n",
        prov.c_str(), bw_size, window_mbs, window, windows, m0, m1);
    std::printf("raw %s fi_write sliding-window bandwidth %zu B: %.1f MB/s (%d writes, 8 in flight)\n", prov.c_str(),
                bw_size, mbs, rounds);
  }
  boot.barrier();
  fi_close(&r.ep->fid);
  fi_close(&r.mr->fid);
  fi_close(&r.av->fid);
  fi_close(&r.cq->fid);
  fi_close(&r.domain->fid);
  fi_close(&r.fabric->fid);
  fi_freeinfo(r.info);
  return 0;
}
