// The oneTBB executor: the pending-call report (Executor::pending_report),
// what each call in flight still waits for (hang forensics).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "executor_impl.hpp"
#include "strata/detail/clock.hpp"

namespace strata {
namespace dag {

// Executor::pending_report: what each in-flight instance still waits for.
std::vector<PendingCall> Executor::Impl::pending(std::int64_t older_than_ms) {
  std::vector<PendingCall> out;
  const std::int64_t now = strata::detail::coarse_ms();
  std::vector<Instance*> ins;
  for (Shard& sh : shards) {
    std::lock_guard<strata::detail::SpinLock> g(sh.mu);
    sh.each([&](Instance* in) {
      std::int64_t seen = 0;  // first sight: now; else the failed exchange loaded it
      if (in->seen_ms.compare_exchange_strong(seen, now, std::memory_order_relaxed)) seen = now;
      if (now - seen >= older_than_ms && pin(in)) ins.push_back(in);
    });
  }
  std::vector<std::pair<Instance*, NodeId>> flags;
  {
    std::lock_guard<strata::detail::SpinLock> g(flag_mu);
    flags = flag_pending;
  }
  // A poll that found the lock held by this copy left its scan to the
  // holder (poll_pending_flags): hand it to a progress server, which polls
  // the flag waits when woken, rather than completing calls on this thread.
  if (flag_repoll.load(std::memory_order_seq_cst) && nflag_pending.load(std::memory_order_acquire) > 0) tp.wake();
  for (Instance* in : ins) {
    const Plan& p = *in->plan;
    PendingCall c;
    c.comm = in->comm;
    c.seq = in->seq;
    c.collective = p.name();
    c.bytes = call_bytes(p);
    c.age_ms = now - in->seen_ms.load(std::memory_order_relaxed);
    c.failed = in->failed.load(std::memory_order_acquire);
    for (NodeId w : p.wait_nodes()) {
      const std::int32_t left = in->nodes[w].sig.load(std::memory_order_acquire);
      if (left <= 0) continue;
      std::string from;
      for (int r : p.peers()) from += (from.empty() ? "" : ",") + std::to_string(r);
      c.waiting.push_back("node " + std::to_string(w) + " wait(slot " + std::to_string(p.nodes()[w].slot) +
                          "): " + std::to_string(left) + " signal(s) missing, from ranks among {" + from + "}");
      c.peers.insert(c.peers.end(), p.peers().begin(), p.peers().end());
    }
    for (const auto& [fi, id] : flags) {
      if (fi != in) continue;
      const Node& nd = p.nodes()[id];
      const std::uint32_t need = (in->seq - nd.count + 1) & kSeqMask;
      const std::uint32_t word = flag_word(in, nd);
      const std::uint32_t have =
          in->flags != nullptr && in->flags[nd.peer] != nullptr ? in->flags[nd.peer][word].load() : 0;
      // Whether this rank's request for a nudge (want_nudge) still sits in
      // the owner's wake words: it is cleared when the owner answers it.
      std::string nudge;
      if (!nd.granted && in->flags != nullptr && in->flags[nd.peer] != nullptr && in->flag_wake != 0) {
        const std::atomic<std::uint32_t>* blk = in->flags[nd.peer];
        const bool asked = blk[in->flag_wake + 1 + static_cast<std::uint32_t>(my_rank)].load() != 0;
        nudge = std::string("; nudge ") + (asked ? "requested, not yet sent" : "not requested or already sent") +
                ", threads parked here: " + std::to_string(parked.load());
      }
      c.waiting.push_back("node " + std::to_string(id) + " flag_wait(rank " + std::to_string(nd.peer) + ", word " +
                          std::to_string(word) + "): needs " + std::to_string(need) + ", has " + std::to_string(have) +
                          (nd.granted ? " (a grant from another host)" : "") + nudge);
      c.peers.push_back(nd.peer);
    }
    if (c.waiting.empty())
      c.waiting.push_back(std::to_string(in->remaining.load(std::memory_order_acquire) - 1) +
                          " node(s) unfinished: transfers posted and not completed, or running");
    std::sort(c.peers.begin(), c.peers.end());
    c.peers.erase(std::unique(c.peers.begin(), c.peers.end()), c.peers.end());
    unpin(in);
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const PendingCall& a, const PendingCall& b) {
    return a.comm != b.comm ? a.comm < b.comm : a.seq < b.seq;
  });
  return out;
}

std::vector<PendingCall> Executor::pending_report(std::int64_t older_than_ms) { return impl_->pending(older_than_ms); }
}  // namespace dag
}  // namespace strata
