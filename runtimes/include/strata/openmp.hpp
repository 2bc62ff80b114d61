// strata/openmp.hpp: strata collectives as detached OpenMP tasks (OpenMP 5.0
// `detach` + omp_fulfill_event; component strata::openmp, `find_package(strata
// COMPONENTS openmp)`, compiled with -fopenmp, e.g. by linking strata::openmp).
//
// A collective runs as a task created with `detach(ev)`: the task's body posts
// the collective (nonblocking) and returns at once; the task completes when
// the collective does (omp_fulfill_event from strata's completion thread), so
// tasks that depend on it (`depend`), a `taskwait` or a `taskgroup` wait for
// the data, not for the body. No OpenMP thread blocks on the network.
//
// @code
//   strata::openmp::Queue q(engine.world());        // one queue per communicator
//   #pragma omp parallel
//   #pragma omp single
//   strata::openmp::taskgroup([&] {                 // or end with #pragma omp taskwait
//     #pragma omp task depend(out: v[0])
//     produce(v);
//     const auto t = q.ticket();                    // in program order, in the creating thread
//     omp_event_handle_t ev;
//     #pragma omp task depend(inout: v[0]) detach(ev)
//     q.start(t, ev, [v, n](strata::Communicator& c) {
//       return c.allreduce(strata::in_place, v, n, strata::Datatype::float64, strata::Op::sum);
//     });
//     #pragma omp task depend(in: v[0])
//     consume(v);
//   });
// @endcode
// (Queue::task() is the same without a `depend` clause.)
//
// GCC 12 (libgomp) HANG, and the rule that avoids it: when a detached task is
// fulfilled from a thread that is not an OpenMP thread (strata's completion
// threads are not) and nothing waits for it except the implicit barrier at the
// end of `parallel` or `single`, libgomp 12 hangs in that barrier. It does not
// hang when something else waits for the task: a `taskgroup` around it, a
// `taskwait` in the task that created it, or a task that depends on it.
// Therefore: create collective tasks inside strata::openmp::taskgroup() (or an
// explicit `#pragma omp taskgroup`), or end the creating region with
// `#pragma omp taskwait`, before the end of the `single` / `parallel`.
//
// Ordering: collectives on one communicator match in issue order across
// ranks, but OpenMP runs ready tasks in any order. A Queue hands out tickets in
// the order tasks are created (call ticket() right before the task construct,
// in the creating thread, in the same order on every rank) and start() posts
// each collective only after every earlier ticket's collective was posted; a
// task whose turn has not come returns at once and its collective is posted
// later by the thread that posts its predecessor. Because `depend` only names
// earlier tasks, creation order never conflicts with the dependencies, so
// this cannot deadlock. Different queues (communicators) are independent.
//
// Threads: the collective is posted by an OpenMP thread running a collective
// task's body (its own, or a later one's). omp_fulfill_event, and writing the
// optional Status, run on the thread that completes the strata future
// (Future::on_complete: a progress server, an executor worker, a thread in
// get()/wait(), or the posting thread when it completed at once); the
// adapter does nothing blocking there.
//
// Captures: the post function may run after the task's body returned. Capture
// by value (pointers, counts), not by reference to the task's variables.
//
// Errors: an exception from the post function or a failed collective is
// stored in the Status given to start()/task() (which must stay valid until
// the task completed; read it in a dependent task or after the taskwait /
// taskgroup) and the task completes as usual. Without a Status, a failure is
// printed to stderr and std::terminate() is called (OpenMP tasks have no error
// channel, and a wrong result must not pass silently).
#pragma once

#include <omp.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "strata/detail/ordered_post.hpp"
#include "strata/strata.hpp"

namespace strata::openmp {

/// @brief Posts exactly one collective on @p comm, e.g.
/// `[v, n](strata::Communicator& c) { return c.allreduce(strata::in_place, v, n, t, op); }`.
using Post = std::function<Future<void>(Communicator& comm)>;

/// @brief Runs @p body (which creates tasks) inside `#pragma omp taskgroup`:
/// returns when every task created in it, detached collective tasks
/// included, completed; the calling thread runs tasks meanwhile. The form
/// that libgomp 12 handles (see the file comment).
template <class Body>
void taskgroup(Body&& body) {
#pragma omp taskgroup
  { body(); }
}

/// @brief Collectives on one communicator as detached OpenMP tasks, posted in
/// creation order (see the file comment). A handle: copies share the queue.
class Queue {
 public:
  /// @brief Position of a collective in the queue's order.
  using Ticket = std::uint64_t;

  /// @brief A queue for the collectives on @p comm; every rank makes one per
  /// communicator it uses from OpenMP tasks.
  explicit Queue(Communicator comm) : s_(std::make_shared<Shared>()) { s_->comm = std::move(comm); }

  /// @brief The communicator.
  [[nodiscard]] const Communicator& communicator() const noexcept { return s_->comm; }

  /// @brief The next ticket: take it right before creating the collective's
  /// task, in the creating thread, in the same order on every rank.
  Ticket ticket() { return s_->poster.ticket(); }

  /// @brief The body of a `detach(ev)` task: posts @p post's collective once
  /// every earlier ticket's was posted, and fulfils @p ev when it completed.
  /// Returns at once. Every ticket must be started exactly once. @p status,
  /// when given, receives the outcome before @p ev is fulfilled.
  void start(Ticket t, omp_event_handle_t ev, Post post, Status* status = nullptr) {
    std::shared_ptr<Shared> q = s_;
    s_->poster.ready(t, [q, ev, post = std::move(post), status]() {
      Future<void> f;
      try {
        if (!post) throw Error(Errc::invalid_argument, "strata::openmp: 'post' is empty");
        f = post(q->comm);
      } catch (const Error& e) {
        done(ev, status, Status(e.errc(), e.what()));
        return;
      } catch (const std::exception& e) {
        done(ev, status, Status(Errc::internal, std::string("post function threw: ") + e.what()));
        return;
      } catch (...) {
        done(ev, status, Status(Errc::internal, "post function threw a non-standard exception"));
        return;
      }
      if (!f.valid()) {
        done(ev, status, Status(Errc::invalid_argument, "post function returned an empty future"));
        return;
      }
      std::move(f).on_complete([ev, status](const Status& st) { done(ev, status, st); });
    });
  }

  /// @brief Creates a detached task (no `depend` clause) that runs the
  /// collective: ticket() + `#pragma omp task detach(ev)` + start(). Call it
  /// inside a taskgroup or follow it with a taskwait (file comment).
  void task(Post post, Status* status = nullptr) {
    const Ticket t = ticket();
    Queue self = *this;
    omp_event_handle_t ev;
#pragma omp task detach(ev) firstprivate(t, self, post, status)
    self.start(t, ev, std::move(post), status);
  }

 private:
  struct Shared {
    Communicator comm;
    detail::OrderedPoster poster;
  };

  static void done(omp_event_handle_t ev, Status* out, const Status& st) {
    if (out != nullptr) {
      *out = st;
    } else if (!st.is_ok()) {
      std::fprintf(stderr, "strata::openmp: collective failed: %s (no Status given to receive it)\n",
                   st.message().c_str());
      std::terminate();
    }
    omp_fulfill_event(ev);
  }

  std::shared_ptr<Shared> s_;
};

}  // namespace strata::openmp
