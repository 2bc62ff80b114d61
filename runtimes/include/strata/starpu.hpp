// strata/starpu.hpp: strata collectives as StarPU tasks on data handles
// (StarPU 1.3; component strata::starpu, `find_package(strata COMPONENTS starpu)`).
//
// @code
//   starpu_init(nullptr);
//   strata::Engine engine;
//   strata::starpu::Queue q(engine.world());     // one queue per communicator
//   starpu_data_handle_t h;                      // a vector of n doubles
//   starpu_vector_data_register(&h, STARPU_MAIN_RAM, reinterpret_cast<uintptr_t>(v), n, sizeof(double));
//   starpu_task_insert(&produce, STARPU_W, h, 0); // ordinary StarPU tasks before and after
//   q.allreduce(h, strata::Datatype::float64, strata::Op::sum);
//   starpu_task_insert(&consume, STARPU_R, h, 0); // runs once the allreduce completed
//   starpu_task_wait_for_all();                  // also waits for the collectives
//   starpu_data_unregister(h);
//   // destroy the Engine after the last collective completed, then starpu_shutdown()
// @endcode
//
// How a submission works (Queue::submit), and why:
//  1. In the submitting thread, in program order: a ticket for the queue's
//     communicator, one StarPU task T (no data, one CPU function), and for
//     every handle starpu_data_acquire_cb_sequential_consistency(handle, mode,
//     cb, arg, 1). The acquisition enters StarPU's implicit dependencies like
//     a task accessing the handle in that mode: it is granted after the
//     earlier tasks on the handle, and later tasks on the handle wait for it.
//  2. When every handle is granted (callback, in a StarPU thread or the
//     submitting one) and every earlier ticket of the queue was posted, the
//     collective is posted on the handles' main-memory pointers. StarPU grants
//     acquisitions in whatever order the data becomes ready, which differs
//     from rank to rank; the ticket order keeps the collectives on one
//     communicator in the same order on every rank (strata's matching rule).
//     A waiting collective blocks no thread.
//  3. When the collective completes (strata's completion thread: see below)
//     every handle is released (starpu_data_release), TaskOptions::on_done
//     runs, and T's end dependency is released (starpu_task_end_dep_release).
//
// Why acquisitions and not the task's own buffers: StarPU releases a task's
// data access when its function returns (driver_cpu.c, the task's output is
// pushed then), not when the task ends. A task that started the collective on
// its buffers and returned would leave them to StarPU's coherency protocol
// while the collective still reads or writes them: only sequential
// consistency would order later tasks after the end, and a prefetch, an
// eviction or a handle with sequential consistency disabled could move or
// read the replica in the meantime. An acquisition holds the access (the
// replica stays in main memory, valid and locked in the requested mode) until
// starpu_data_release, i.e. until the collective completed. This is the
// pattern StarPU-MPI uses for its detached requests.
//
// Why the task T: it makes the collective visible to StarPU as a task.
// starpu_task_wait_for_all() waits for it; with TaskOptions::tag, other tasks
// can depend on it (starpu_tag_declare_deps) and starpu_tag_wait() waits for
// it. T terminates only after the collective completed: its function calls
// starpu_task_end_dep_add(T, 1) (unless the collective is already complete)
// and the completion calls starpu_task_end_dep_release(T). T's function
// needs a CPU worker (STARPU_NCPU >= 1).
//
// Threads. The collective is posted from an acquisition callback (a StarPU
// worker or driver thread, or the submitting thread when the data is ready at
// once), or by the thread that posts the queue's previous collective.
// Completion runs on the thread that completes the strata future
// (Future::on_complete): a strata progress server, an executor worker, a
// thread waiting in get()/wait(), or the posting thread when the collective
// completed at once (a one-rank communicator). starpu_task_end_dep_release
// runs T's termination on that thread: T's callback and the release of its
// successors. So that strata's completion thread stays non-blocking:
//  - on_done must be short and must not block (no starpu_task_wait*,
//    starpu_data_acquire, starpu_tag_wait, no waiting on strata futures);
//  - StarPU task callbacks of tasks released there run on it too, under the
//    same rule (submitting tasks is fine: it does not block).
//
// Rules:
//  - Submit on a Queue from one thread at a time, in the same order on every
//    rank (program order). Collectives of different queues (communicators)
//    are independent. Submitting from StarPU task callbacks is allowed when
//    the order stays the same on every rank.
//  - Each handle at most once per submission, with mode STARPU_R, STARPU_W or
//    STARPU_RW, registered with a main-memory interface that has contiguous
//    memory (vector, variable, or a matrix without padding).
//  - A handle whose sequential consistency is disabled
//    (starpu_data_set_sequential_consistency_flag) is not ordered against
//    other tasks by StarPU; the acquisition still holds it, in its mode,
//    until the collective completed.
//  - The Engine must outlive every collective: call starpu_task_wait_for_all()
//    (or wait for the tags) before destroying it; starpu_shutdown() after.
//  - Errors: an argument error thrown by the post function, a failed
//    acquisition or a failed collective completes the call with that Status:
//    on_done receives it, the handles are released and T ends as usual (StarPU
//    tasks have no error channel). Without on_done a failure is printed to
//    stderr and std::terminate() is called, so that no wrong result passes
//    silently. After a failure on one rank the communicator's sequence differs
//    between ranks: treat it as fatal for the communicator.
#pragma once

#include <starpu.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "strata/detail/ordered_post.hpp"
#include "strata/strata.hpp"

namespace strata::starpu {

/// @brief One data handle of a collective and how the collective uses it.
struct Access {
  starpu_data_handle_t handle = nullptr;
  /// STARPU_R (only read), STARPU_W (only written) or STARPU_RW.
  starpu_data_access_mode mode = STARPU_RW;
};

/// @brief Posts exactly one collective on @p comm, on @p ptrs (the handles'
/// main-memory pointers, in the order of the Access list); e.g.
/// `[n](strata::Communicator& c, void* const* p) { return c.allreduce(strata::in_place, p[0], n, t, op); }`.
using Post = std::function<Future<void>(Communicator& comm, void* const* ptrs)>;

/// @brief StarPU-side options of a collective's task.
struct TaskOptions {
  /// Name of the task (traces, statistics); must outlive the task.
  const char* name = "strata_collective";
  /// When true, the task carries @p tag: other tasks can depend on it with
  /// starpu_tag_declare_deps() and starpu_tag_wait() waits for it.
  bool use_tag = false;
  starpu_tag_t tag = 0;
  /// Priority of the task.
  int priority = STARPU_DEFAULT_PRIO;
  /// Called once with the outcome when the collective completed (or failed),
  /// after the handles were released and before the task ends, on strata's
  /// completion thread: must be short, must not block and must not throw.
  std::function<void(const Status&)> on_done;
};

/// @brief Collectives on one communicator as StarPU tasks on data handles
/// (see the file comment). A handle: copies share the queue.
class Queue {
 public:
  /// @brief A queue for the collectives on @p comm. Every rank makes one per
  /// communicator it uses from StarPU (a communicator used through two
  /// queues would lose the ordering guarantee).
  explicit Queue(Communicator comm) : s_(std::make_shared<Shared>()) { s_->comm = std::move(comm); }

  /// @brief The communicator.
  [[nodiscard]] const Communicator& communicator() const noexcept { return s_->comm; }

  /// @brief Submits a collective on @p data: @p post runs once every handle is
  /// acquired in its mode and every earlier collective of this queue was
  /// posted. Returns once submitted (never waits for data or peers). Throws
  /// strata::Error (invalid_argument) for a null or repeated handle, an
  /// unsupported mode, or a post function that is empty; (internal) when
  /// StarPU refuses the task (no CPU worker, StarPU not initialized).
  void submit(std::vector<Access> data, Post post, TaskOptions opts = {}) {
    if (!post) throw Error(Errc::invalid_argument, "strata::starpu::Queue::submit: 'post' is empty");
    for (std::size_t i = 0; i < data.size(); ++i) {
      const Access& a = data[i];
      if (a.handle == nullptr)
        throw Error(Errc::invalid_argument,
                    "strata::starpu::Queue::submit: handle " + std::to_string(i) + " of 'data' is null");
      if (a.mode != STARPU_R && a.mode != STARPU_W && a.mode != STARPU_RW)
        throw Error(Errc::invalid_argument, "strata::starpu::Queue::submit: mode of handle " + std::to_string(i) +
                                                " must be STARPU_R, STARPU_W or STARPU_RW");
      for (std::size_t j = 0; j < i; ++j)
        if (data[j].handle == a.handle)
          throw Error(Errc::invalid_argument, "strata::starpu::Queue::submit: handle " + std::to_string(i) +
                                                  " of 'data' repeats handle " + std::to_string(j));
    }
    auto call = std::make_shared<Call>();
    call->queue = s_;
    call->data = std::move(data);
    call->acquired.assign(call->data.size(), false);
    call->ptrs.assign(call->data.size(), nullptr);
    call->post = std::move(post);
    call->on_done = std::move(opts.on_done);

    starpu_task* t = starpu_task_create();
    t->cl = &codelet();
    t->cl_arg = new std::shared_ptr<Call>(call);
    t->name = opts.name;
    t->priority = opts.priority;
    if (opts.use_tag) {
      t->use_tag = 1;
      t->tag_id = opts.tag;
    }
    call->task = t;
    // The ticket and the task come before any acquisition: a refused task
    // leaves no handle acquired.
    const std::uint64_t ticket = s_->poster.ticket();
    const int rc = starpu_task_submit(t);
    if (rc != 0) {
      delete static_cast<std::shared_ptr<Call>*>(t->cl_arg);
      t->cl_arg = nullptr;
      starpu_task_destroy(t);
      // The ticket is consumed: post nothing for it so that later tickets proceed.
      s_->poster.ready(ticket, [] {});
      throw Error(Errc::internal, "strata::starpu::Queue::submit: starpu_task_submit returned " + std::to_string(rc) +
                                      " (no CPU worker, or StarPU not initialized?)");
    }
    call->ticket = ticket;
    // One count per handle plus one for this loop, so that the last callback
    // cannot fire before every acquisition was requested.
    call->pending.store(call->data.size() + 1, std::memory_order_relaxed);
    for (std::size_t i = 0; i < call->data.size(); ++i) {
      auto* arg = new Acquired{call, i};
      const int arc = starpu_data_acquire_cb_sequential_consistency(call->data[i].handle, call->data[i].mode,
                                                                    &Queue::on_acquired, arg, 1);
      if (arc != 0) {
        delete arg;
        call->fail(Status(Errc::internal, "starpu_data_acquire_cb of handle " + std::to_string(i) + " returned " +
                                              std::to_string(arc)));
        arrive(call);
      }
    }
    arrive(call);
  }

  /// @brief In-place allreduce of the handle's contents (size / size_of(type)
  /// elements of @p type; the handle is accessed STARPU_RW).
  void allreduce(starpu_data_handle_t h, Datatype type, Op op, TaskOptions opts = {}) {
    const std::size_t n = count_of(h, type, "allreduce");
    submit(
        {{h, STARPU_RW}},
        [n, type, op](Communicator& c, void* const* p) { return c.allreduce(in_place, p[0], n, type, op); },
        std::move(opts));
  }

  /// @brief Broadcast of the handle's contents from @p root (STARPU_R at the
  /// root, STARPU_W elsewhere).
  void broadcast(starpu_data_handle_t h, Datatype type, int root, TaskOptions opts = {}) {
    const std::size_t n = count_of(h, type, "broadcast");
    const starpu_data_access_mode m = s_->comm.rank() == root ? STARPU_R : STARPU_W;
    submit(
        {{h, m}}, [n, type, root](Communicator& c, void* const* p) { return c.broadcast(p[0], n, type, root); },
        std::move(opts));
  }

  /// @brief A barrier as a task without data (orders nothing in StarPU by
  /// itself: use a tag to make tasks depend on it).
  void barrier(TaskOptions opts = {}) {
    submit(
        {}, [](Communicator& c, void* const*) { return c.barrier(); }, std::move(opts));
  }

 private:
  struct Shared {
    Communicator comm;
    detail::OrderedPoster poster;
  };

  struct Call {
    std::shared_ptr<Shared> queue;
    std::vector<Access> data;
    std::vector<bool> acquired;  ///< written by the acquisition callbacks (distinct elements: guarded by mu)
    std::vector<void*> ptrs;
    Post post;
    std::function<void(const Status&)> on_done;
    starpu_task* task = nullptr;
    std::uint64_t ticket = 0;
    std::atomic<std::size_t> pending{0};
    std::mutex mu;
    Status failure;          ///< under mu: first failure before posting
    bool fn_ran = false;     ///< under mu: T's function added the end dependency
    bool completed = false;  ///< under mu: the collective completed

    void fail(Status st) {
      std::lock_guard<std::mutex> g(mu);
      if (failure.is_ok()) failure = std::move(st);
    }
  };

  struct Acquired {
    std::shared_ptr<Call> call;
    std::size_t index;
  };

  static std::size_t count_of(starpu_data_handle_t h, Datatype type, const char* what) {
    if (h == nullptr) throw Error(Errc::invalid_argument, std::string("strata::starpu::") + what + ": handle is null");
    const std::size_t bytes = starpu_data_get_size(h);
    const std::size_t es = size_of(type);
    if (bytes % es != 0)
      throw Error(Errc::invalid_argument, std::string("strata::starpu::") + what + ": the handle's " +
                                              std::to_string(bytes) + " bytes are not a whole number of " +
                                              to_string(type) + " elements");
    return bytes / es;
  }

  // T's CPU function: holds T's end until the collective completed.
  static void task_fn(void** /*buffers*/, void* arg) {
    auto* sp = static_cast<std::shared_ptr<Call>*>(arg);
    std::shared_ptr<Call> call = std::move(*sp);
    delete sp;
    std::lock_guard<std::mutex> g(call->mu);
    if (call->completed) return;  // already done: T ends when this returns
    starpu_task_end_dep_add(call->task, 1);
    call->fn_ran = true;
  }

  static starpu_codelet& codelet() {
    static starpu_codelet cl = [] {
      starpu_codelet c;
      starpu_codelet_init(&c);
      c.where = STARPU_CPU;
      c.cpu_funcs[0] = &Queue::task_fn;
      c.nbuffers = 0;
      c.name = "strata_collective";
      return c;
    }();
    return cl;
  }

  static void on_acquired(void* arg) {
    auto* a = static_cast<Acquired*>(arg);
    std::shared_ptr<Call> call = std::move(a->call);
    const std::size_t i = a->index;
    delete a;
    void* p = starpu_data_handle_to_pointer(call->data[i].handle, STARPU_MAIN_RAM);
    {
      std::lock_guard<std::mutex> g(call->mu);
      call->acquired[i] = true;
      call->ptrs[i] = p;
      if (p == nullptr && call->failure.is_ok())
        call->failure = Status(Errc::invalid_argument, "handle " + std::to_string(i) +
                                                           " has no pointer in main memory (its interface must "
                                                           "support starpu_data_handle_to_pointer)");
    }
    arrive(call);
  }

  // One acquisition (or the submit loop) is done; the last one hands the
  // call to the queue's sequencer.
  static void arrive(const std::shared_ptr<Call>& call) {
    if (call->pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    std::shared_ptr<Shared> q = call->queue;
    q->poster.ready(call->ticket, [call] { start(call); });
  }

  // Posts the collective (its turn in the queue came); never throws.
  static void start(const std::shared_ptr<Call>& call) {
    Status failed;
    {
      std::lock_guard<std::mutex> g(call->mu);
      failed = call->failure;
    }
    if (!failed.is_ok()) {
      finish(call, failed);
      return;
    }
    Future<void> f;
    try {
      f = call->post(call->queue->comm, call->ptrs.data());
    } catch (const Error& e) {
      finish(call, Status(e.errc(), e.what()));
      return;
    } catch (const std::exception& e) {
      finish(call, Status(Errc::internal, std::string("post function threw: ") + e.what()));
      return;
    } catch (...) {
      finish(call, Status(Errc::internal, "post function threw a non-standard exception"));
      return;
    }
    if (!f.valid()) {
      finish(call, Status(Errc::invalid_argument, "post function returned an empty future"));
      return;
    }
    std::move(f).on_complete([call](const Status& st) { finish(call, st); });
  }

  // The collective completed (or never started): release the data, report,
  // end T. Runs on strata's completion thread; nothing here blocks.
  static void finish(const std::shared_ptr<Call>& call, const Status& st) {
    for (std::size_t i = 0; i < call->data.size(); ++i) {
      bool held = false;
      {
        std::lock_guard<std::mutex> g(call->mu);
        held = call->acquired[i];
      }
      if (held) starpu_data_release(call->data[i].handle);
    }
    if (call->on_done) {
      call->on_done(st);
    } else if (!st.is_ok()) {
      std::fprintf(stderr, "strata::starpu: collective failed: %s (no TaskOptions::on_done to receive it)\n",
                   st.message().c_str());
      std::terminate();
    }
    bool release = false;
    {
      std::lock_guard<std::mutex> g(call->mu);
      call->completed = true;
      release = call->fn_ran;
    }
    if (release) starpu_task_end_dep_release(call->task);  // T may be freed from here on
  }

  std::shared_ptr<Shared> s_;
};

}  // namespace strata::starpu
