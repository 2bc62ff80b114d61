// strata::detail::OrderedPoster: the per-communicator sequencer of the
// runtime adapters (strata/starpu.hpp, strata/openmp.hpp).
//
// Collectives on one communicator match in issue order across ranks. A task
// runtime starts tasks in whatever order their inputs become ready, and that
// order differs from rank to rank. The adapters therefore take a ticket when
// the application submits a collective (program order, the same on every
// rank) and post the collective only when every ticket before it was posted:
// a collective whose inputs are ready early waits, without blocking any
// thread, in a map until its turn comes; the thread that posts its
// predecessor then posts it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <utility>

namespace strata::detail {

/// Posts callables in ticket order; thread-safe and reentrant (a post may
/// call ready() again, e.g. when a completion runs inline and makes the next
/// collective ready: the call is queued and the running drain posts it).
class OrderedPoster {
 public:
  /// The next ticket. Tickets must be taken in the same order on every rank.
  std::uint64_t ticket() {
    std::lock_guard<std::mutex> g(mu_);
    return next_ticket_++;
  }

  /// Ticket @p t may be posted: runs @p post now if every earlier ticket was
  /// posted (and then any queued successors), else queues it. One thread at a
  /// time posts; @p post runs without the lock held and must not throw.
  void ready(std::uint64_t t, std::function<void()> post) {
    std::unique_lock<std::mutex> g(mu_);
    ready_.emplace(t, std::move(post));
    if (draining_) return;  // the draining thread will post it when its turn comes
    draining_ = true;
    for (;;) {
      auto it = ready_.find(next_post_);
      if (it == ready_.end()) break;
      std::function<void()> p = std::move(it->second);
      ready_.erase(it);
      ++next_post_;
      g.unlock();
      p();
      g.lock();
    }
    draining_ = false;  // under the lock with the last find: no ready() is missed
  }

 private:
  std::mutex mu_;
  std::uint64_t next_ticket_ = 0;
  std::uint64_t next_post_ = 0;
  bool draining_ = false;
  std::map<std::uint64_t, std::function<void()>> ready_;
};

}  // namespace strata::detail
