// strata::Future / strata::Promise: the asynchronous results of the public API.
//
// A Future is a move-only handle to a reference-counted shared state; the
// Promise side (used by the engine) fulfils it. Dropping a future never blocks
// and never cancels or leaks the operation: the state lives until both sides
// are gone. Waiting:
//  - outside any oneTBB task: blocks on a condition variable, or, when the
//    state's FutureContext has a progress hook (inline progress mode), calls
//    the hook in a loop until ready;
//  - inside a oneTBB task: suspends the task with tbb::task::suspend so the
//    worker keeps running other tasks (the one completing the future
//    included); with a progress hook or a timeout, a polling task re-enqueued
//    in the arena drives the hook and enforces the deadline.
// Continuations (then) run as tasks in the context's arena (for engine futures
// the engine's executor arena: EngineOptions::arena when given), or with the
// executor given, never inside the completing thread's call stack.
// on_complete() callbacks are the exception: they run in the completing
// thread (see there), with no task allocated.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <oneapi/tbb/task.h>
#include <oneapi/tbb/task_arena.h>

#include "strata/detail/cpu.hpp"
#include "strata/detail/tsan.hpp"
#include "strata/error.hpp"

namespace strata {

/// @brief Where a future's continuations run and how its waits make progress.
struct FutureContext {
  /// Arena for continuations and polling tasks; null = a process-wide default arena.
  tbb::task_arena* arena = nullptr;
  /// Inline progress mode: called repeatedly by waiters; returns true if it
  /// handled events. Empty = progress is driven elsewhere (progress threads).
  std::function<bool()> progress;
  /// Inline progress mode: idle progress() calls a waiter follows with a CPU
  /// pause before it yields its core once (then counts again). 0 = yield after
  /// every idle call (ranks outnumber the CPUs: the core may be another rank's).
  unsigned idle_spins = 0;
  /// Progress-server mode: a waiter outside a TBB task first calls
  /// spin(done) (which polls the transport for a bounded time and returns
  /// done()), and sleeps on the future only if that returned false.
  std::function<bool(const std::function<bool()>& done)> spin;
  /// Called with true right before a waiter blocks (on the condition variable
  /// or as a suspended oneTBB task) and with false once it runs again. It may
  /// complete the future itself (e.g. by polling); the waiter then does not
  /// block. The engine's executor uses it to learn when a parked memory-flag
  /// wait needs its owner to nudge this rank awake.
  std::function<void(bool)> park;
  /// Progress-server mode, after spin() returned false: blocks the waiter
  /// until a message may have arrived on the transport, @p fd (the waiting
  /// thread's eventfd, which the future's completion writes) is readable, or
  /// @p timeout passes; then looks at the transport once. Returns the events
  /// that look handled, or a negative value when unavailable (the waiter then
  /// sleeps on the condition variable, woken by a server). Sleeping on the
  /// transport's descriptors lets an arriving message wake the waiter itself
  /// rather than a server that then wakes it: one wake-up of an idle core
  /// instead of two (docs/reliability.md, "Idle ranks").
  std::function<long(int fd, std::chrono::microseconds timeout)> block;
  /// Null: the hooks and the arena stay valid as long as the context. Else
  /// their owner (the engine) clears it (release) when they go away; from then
  /// on the context acts as an empty one (default arena, no hooks). The fields
  /// above are never written after the context is shared, so readers need no lock.
  std::shared_ptr<const std::atomic<bool>> live;
  /// @brief True while the hooks and the arena may be used.
  [[nodiscard]] bool usable() const noexcept { return !live || live->load(std::memory_order_acquire); }
};

template <class T>
class Future;
template <class T>
class Promise;

namespace detail {

/// The calling thread's wake-up eventfd (created on first use, closed when
/// the thread ends); -1 if it cannot be made.
int thread_wake_fd() noexcept;
/// Makes @p fd readable (FutureContext::block waiters).
void wake_fd_signal(int fd) noexcept;
/// Clears @p fd.
void wake_fd_drain(int fd) noexcept;

// tsan_release / tsan_acquire / handoff (annotations of oneTBB hand-offs
// under TSan): strata/detail/tsan.hpp, shared with the executor.

/// Process-wide arena used when no FutureContext arena is given.
inline tbb::task_arena& default_arena() {
  static tbb::task_arena arena(tbb::task_arena::automatic, 1);
  return arena;
}

class StateBase : public std::enable_shared_from_this<StateBase> {
 public:
  explicit StateBase(std::shared_ptr<const FutureContext> ctx) : ctx_(std::move(ctx)) {}
  virtual ~StateBase() = default;

  [[nodiscard]] bool ready() const noexcept { return ready_.load(std::memory_order_acquire); }
  [[nodiscard]] const Status& error() const noexcept { return error_; }  // valid once ready()
  [[nodiscard]] const std::shared_ptr<const FutureContext>& context() const noexcept { return ctx_; }

  tbb::task_arena& arena() const { return ctx() && ctx_->arena ? *ctx_->arena : default_arena(); }
  /// The context while its hooks may be used (null otherwise).
  [[nodiscard]] const FutureContext* ctx() const noexcept { return ctx_ && ctx_->usable() ? ctx_.get() : nullptr; }

  /// Completes the state once: @p store runs under the lock (stores the value).
  template <class Store>
  bool complete(const Status& st, Store&& store) {
    std::function<void()> cb;
    std::vector<tbb::task::suspend_point> sps;
    // Once ready_ is set a waiter may drop the last other reference (e.g. its
    // Promise and Future) while we still unlock mu_ and notify cv_: keep the
    // state alive until we are done with it.
    std::shared_ptr<StateBase> self;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (ready_.load(std::memory_order_relaxed)) return false;
      self = shared_from_this();
      if (st.is_ok()) store();
      error_ = st;
      ready_.store(true, std::memory_order_release);
      cb.swap(cb_);
      sps.swap(suspended_);
      // Under the lock: the waiter unregisters under it before its thread
      // may end and close the descriptor.
      if (sleeper_fd_ >= 0) wake_fd_signal(sleeper_fd_);
    }
    cv_.notify_all();
    tsan_release(this);
    for (auto sp : sps) tbb::task::resume(sp);
    if (cb) cb();
    return true;
  }

  /// Runs @p cb once the state is ready (now, in this thread, if it already is).
  void on_ready(std::function<void()> cb) {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (!ready_.load(std::memory_order_relaxed)) {
        cb_ = std::move(cb);
        return;
      }
    }
    cb();
  }

  /// Waits until ready or @p deadline; true when ready.
  bool wait_until(const std::optional<std::chrono::steady_clock::time_point>& deadline) {
    if (ready()) return true;
    const FutureContext* c = ctx();
    const bool hook = c && c->progress;
    if (tbb::task::current_context() != nullptr) {
      while (!ready()) {
        if (deadline && std::chrono::steady_clock::now() >= *deadline) return false;
        std::shared_ptr<StateBase> self = shared_from_this();
        // Parked (Executor::park: flag waits ask for nudges) before the
        // suspend point is published, so that the resumed side, possibly on
        // another thread, unparks after it; a state found ready unparks at
        // once (an unmatched unpark left the count at -1: later flag waits
        // then asked for no nudge while a thread slept).
        bool did_park = false;
        tbb::task::suspend([&](tbb::task::suspend_point sp) {
          did_park = c && c->park;
          if (did_park) c->park(true);
          bool parked = false;
          {
            std::lock_guard<std::mutex> g(mu_);
            if (!ready_.load(std::memory_order_relaxed)) {
              suspended_.push_back(sp);
              parked = true;
            }
          }
          if (!parked) {
            if (did_park) c->park(false);
            did_park = false;
            tbb::task::resume(sp);  // became ready meanwhile
            return;
          }
          tsan_release(this);
          if (hook || deadline) poll(self, sp, deadline);
        });
        tsan_acquire(this);
        if (did_park) c->park(false);
      }
      return true;
    }
    if (hook) {
      unsigned idle = 0;
      while (!ready()) {
        if (deadline && std::chrono::steady_clock::now() >= *deadline) return false;
        if (ctx_->usable() && c->progress()) {
          idle = 0;
        } else if (++idle <= c->idle_spins) {
          strata::detail::cpu_relax();
        } else {
          std::this_thread::yield();
          idle = 0;
        }
      }
      return true;
    }
    // Timed waits skip the spin: its budget must not stretch a short wait_for.
    if (!deadline && c && c->spin && c->spin([this] { return ready(); })) return true;
    if (c && c->block) {
      if (const std::optional<bool> r = block_wait(*c, deadline)) return *r;
    }
    struct Parked {
      const std::function<void(bool)>* hook;
      ~Parked() {
        if (hook) (*hook)(false);
      }
    } parked{c && c->park ? &c->park : nullptr};
    if (parked.hook) (*parked.hook)(true);
    std::unique_lock<std::mutex> g(mu_);
    if (!deadline) {
      cv_.wait(g, [&] { return ready_.load(std::memory_order_relaxed); });
      return true;
    }
    return cv_.wait_until(g, *deadline, [&] { return ready_.load(std::memory_order_relaxed); });
  }

  std::atomic<int> promises{0};
  std::atomic<bool> retrieved{false};

 private:
  /// FutureContext::block: sleeps on the transport plus this thread's eventfd
  /// until ready or @p deadline. Empty result: not possible here (no eventfd,
  /// another thread already sleeps so, or the hook declined): use cv_.
  std::optional<bool> block_wait(const FutureContext& c,
                                 const std::optional<std::chrono::steady_clock::time_point>& deadline) {
    const int fd = thread_wake_fd();
    if (fd < 0) return std::nullopt;
    for (;;) {
      {
        std::lock_guard<std::mutex> g(mu_);
        if (ready_.load(std::memory_order_relaxed)) return true;
        if (sleeper_fd_ >= 0) return std::nullopt;
        sleeper_fd_ = fd;
      }
      auto left = std::chrono::microseconds(std::chrono::hours(1));
      if (deadline)
        left = std::chrono::duration_cast<std::chrono::microseconds>(*deadline - std::chrono::steady_clock::now());
      long events = -1;
      if (left.count() > 0) {
        if (c.park) c.park(true);
        events = c.block(fd, left);
        if (c.park) c.park(false);
      }
      {
        std::lock_guard<std::mutex> g(mu_);
        sleeper_fd_ = -1;
      }
      wake_fd_drain(fd);
      if (ready()) return true;
      if (left.count() <= 0 || (deadline && std::chrono::steady_clock::now() >= *deadline)) return ready();
      if (events < 0) return std::nullopt;
      // Events mean activity: poll for the spin budget before sleeping again
      // (a silent wake-up, at max_block, is followed by one look only).
      if (events > 0 && !deadline && c.spin && c.spin([this] { return ready(); })) return true;
    }
  }

  // A polling task: drives the progress hook, enforces the deadline, and
  // re-enqueues itself (yielding the worker to other tasks between polls).
  static void poll(std::shared_ptr<StateBase> s, tbb::task::suspend_point sp,
                   std::optional<std::chrono::steady_clock::time_point> deadline) {
    tbb::task_arena& a = s->arena();
    a.enqueue(handoff([s = std::move(s), sp, deadline]() {
      if (const FutureContext* c = s->ctx(); c && c->progress) c->progress();
      if (s->ready()) return;
      if (deadline && std::chrono::steady_clock::now() >= *deadline) {
        bool mine = false;
        {
          std::lock_guard<std::mutex> g(s->mu_);
          for (auto it = s->suspended_.begin(); it != s->suspended_.end(); ++it)
            if (*it == sp) {
              s->suspended_.erase(it);
              mine = true;
              break;
            }
        }
        if (mine) tbb::task::resume(sp);
        return;
      }
      poll(s, sp, deadline);
    }));
  }

  std::shared_ptr<const FutureContext> ctx_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> ready_{false};
  Status error_;
  std::function<void()> cb_;
  std::vector<tbb::task::suspend_point> suspended_;
  int sleeper_fd_ = -1;  ///< eventfd of a waiter in block_wait (under mu_)
};

template <class T>
struct Storage {
  std::optional<T> value;
};
template <>
struct Storage<void> {};

template <class T>
class State final : public StateBase, public Storage<T> {
 public:
  using StateBase::StateBase;
};

template <class T>
using StatePtr = std::shared_ptr<State<T>>;

// Freed promise-state blocks kept per thread for the next promise (a small
// call's waiting side makes one per call: malloc + free cost ~130
// instructions, a cache hit ~15). A block freed on another thread joins that
// thread's cache; the shared_ptr's reference count orders the hand-off. At
// thread exit the cache frees its blocks and later frees on that thread
// bypass it (`gone`, trivially destructible, stays readable meanwhile).
template <std::size_t Size, std::size_t Align>
struct StateBlockCache {
  static constexpr int kMax = 32;
  void* blocks[kMax];
  int n = 0;
  ~StateBlockCache() {
    gone() = true;
    while (n > 0) ::operator delete(blocks[--n], std::align_val_t(Align));
  }
  static bool& gone() noexcept {
    thread_local bool g = false;
    return g;
  }
  static StateBlockCache* get() noexcept {
    if (gone()) return nullptr;
    thread_local StateBlockCache c;
    return &c;
  }
};

template <class U>
struct StateAlloc {
  using value_type = U;
  StateAlloc() = default;
  template <class V>
  StateAlloc(const StateAlloc<V>&) noexcept {}  // NOLINT(google-explicit-constructor): allocator rebind
  U* allocate(std::size_t k) {
    using Cache = StateBlockCache<sizeof(U), alignof(U)>;
    if (k == 1)
      if (Cache* c = Cache::get(); c != nullptr && c->n > 0) return static_cast<U*>(c->blocks[--c->n]);
    return static_cast<U*>(::operator new(k * sizeof(U), std::align_val_t(alignof(U))));
  }
  void deallocate(U* p, std::size_t k) noexcept {
    using Cache = StateBlockCache<sizeof(U), alignof(U)>;
    if (k == 1)
      if (Cache* c = Cache::get(); c != nullptr && c->n < Cache::kMax) {
        c->blocks[c->n++] = p;
        return;
      }
    ::operator delete(p, std::align_val_t(alignof(U)));
  }
  template <class V>
  bool operator==(const StateAlloc<V>&) const noexcept {
    return true;
  }
  template <class V>
  bool operator!=(const StateAlloc<V>&) const noexcept {
    return false;
  }
};

/// A new state for a promise (from the per-thread block cache).
template <class T>
StatePtr<T> make_state(std::shared_ptr<const FutureContext> ctx) {
  return std::allocate_shared<State<T>>(StateAlloc<State<T>>{}, std::move(ctx));
}

/// Maps void to std::monostate (for tuples of results).
template <class T>
using ValueOr = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

template <class A, std::size_t... I, class... Fs>
void for_each_indexed(A& attach, std::index_sequence<I...>, Fs&... fs) {
  (attach(std::integral_constant<std::size_t, I>{}, fs), ...);
}

/// The context of a future joining others (when_all): one that drives
/// progress (inline mode) if any, else one that spins, else any.
inline int context_rank(const std::shared_ptr<const FutureContext>& c) noexcept {
  return !c ? 0 : c->progress ? 3 : c->spin ? 2 : 1;
}
inline std::shared_ptr<const FutureContext> join_context(std::initializer_list<const StateBase*> states) {
  std::shared_ptr<const FutureContext> best;
  for (const StateBase* s : states)
    if (s != nullptr && context_rank(s->context()) > context_rank(best)) best = s->context();
  return best;
}

inline Status status_of_current_exception(const char* what) {
  try {
    throw;
  } catch (const Error& e) {
    return {e.errc(), e.what()};
  } catch (const std::exception& e) {
    return {Errc::internal, std::string(what) + " threw: " + e.what()};
  } catch (...) {
    return {Errc::internal, std::string(what) + " threw a non-standard exception"};
  }
}

}  // namespace detail

/// @brief The asynchronous result of a strata operation; see the file comment.
///
/// @code
/// strata::Promise<int> p;
/// strata::Future<int> f = p.get_future();
/// strata::Future<int> g = std::move(f).then([](int v) { return v * 2; });
/// p.set_value(21);
/// int r = g.get();  // 42; throws strata::Error if the operation failed
/// @endcode
template <class T>
class [[nodiscard]] Future {
 public:
  using value_type = T;
  Future() noexcept = default;
  Future(Future&&) noexcept = default;
  Future& operator=(Future&&) noexcept = default;
  Future(const Future&) = delete;
  Future& operator=(const Future&) = delete;
  /// Dropping a future never blocks; the operation continues and frees itself.
  ~Future() = default;

  /// @brief True when the future refers to a state (not moved from / consumed).
  [[nodiscard]] bool valid() const noexcept { return state_ != nullptr; }
  /// @brief True once the result (value or error) is available; never blocks.
  [[nodiscard]] bool ready() const noexcept { return state_ && state_->ready(); }
  /// @brief Nonblocking test (MPI_Test): in inline progress mode it first
  /// drives progress once (what completes runs on this thread: continuations
  /// and on_complete callbacks, which must not block); then returns ready().
  /// Never blocks, never throws; get() then returns the value or throws.
  bool test() const {
    if (!state_) return false;
    if (state_->ready()) return true;
    if (const FutureContext* c = state_->ctx(); c != nullptr && c->progress) c->progress();
    return state_->ready();
  }
  /// @brief Blocks (or suspends the calling TBB task) until ready.
  void wait() const {
    check("wait");
    state_->wait_until(std::nullopt);
  }
  /// @brief Waits at most @p timeout; true when ready.
  /// @param timeout the longest time to wait
  template <class Rep, class Period>
  bool wait_for(std::chrono::duration<Rep, Period> timeout) const {
    check("wait_for");
    return state_->wait_until(std::chrono::steady_clock::now() +
                              std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout));
  }
  /// @brief Waits, then returns the value or throws strata::Error; consumes the future.
  T get() {
    check("get");
    state_->wait_until(std::nullopt);
    auto s = std::move(state_);
    throw_if_error(s->error());
    if constexpr (!std::is_void_v<T>) return std::move(*s->value);
  }
  /// @brief The failure cause (OK while pending or on success); never blocks.
  [[nodiscard]] Status status() const { return ready() ? state_->error() : Status::ok(); }

  /// @brief Runs @p f on the value as a TBB task in the context's arena once
  /// ready; the returned future carries f's result, or the first error (f is
  /// then not called). Exceptions thrown by f fail the returned future.
  /// @param f callable taking T (or nothing for Future<void>)
  template <class F>
  auto then(F&& f) && {
    check("then");
    tbb::task_arena* a = &state_->arena();
    return std::move(*this).then(*a, std::forward<F>(f));
  }
  /// @brief As then(f), running the continuation with @p ex.enqueue(callable)
  /// (a tbb::task_arena, or any type with that member).
  template <class Exec, class F>
  auto then(Exec& ex, F&& f) && {
    check("then");
    using R = std::conditional_t<std::is_void_v<T>, std::invoke_result<std::decay_t<F>>,
                                 std::invoke_result<std::decay_t<F>, T>>;
    using U = typename R::type;
    auto next = detail::make_state<U>(state_->context());
    auto src = std::move(state_);
    detail::State<T>* raw = src.get();
    auto fnp = std::make_shared<std::decay_t<F>>(std::forward<F>(f));
    raw->on_ready([src = std::move(src), next, &ex, fnp = std::move(fnp)]() mutable {
      ex.enqueue(detail::handoff([src = std::move(src), next = std::move(next), fnp = std::move(fnp)]() {
        auto& fn = *fnp;
        if (!src->error().is_ok()) {
          next->complete(src->error(), [] {});
          return;
        }
        try {
          if constexpr (std::is_void_v<U>) {
            if constexpr (std::is_void_v<T>)
              fn();
            else
              fn(std::move(*src->value));
            next->complete(Status::ok(), [] {});
          } else {
            std::optional<U> v;
            if constexpr (std::is_void_v<T>)
              v.emplace(fn());
            else
              v.emplace(fn(std::move(*src->value)));
            next->complete(Status::ok(), [&] { next->value = std::move(v); });
          }
        } catch (...) {
          next->complete(detail::status_of_current_exception("then() continuation"), [] {});
        }
      }));
    });
    return Future<U>(std::move(next));
  }

  /// @brief Runs @p cb exactly once when the future completes (value or error),
  /// without a continuation task: no task is allocated or enqueued, @p cb is
  /// called directly by the thread that completes the operation. Consumes the future.
  ///
  /// Which thread: if the future is already ready, the calling thread, before
  /// on_complete returns; otherwise the completing thread, which for engine
  /// operations is a progress-server thread, an executor worker of the engine's
  /// arena, or a thread inside get()/wait() that drives the executor's
  /// memory-flag waits (also another future's waiter). So @p cb must be short, must not
  /// block (no wait()/get() on pending futures, no locks held across
  /// collectives, no blocking collective calls: it would stall progress for
  /// every future of the engine), and must not throw (std::terminate is called).
  /// Hand longer work to your own runtime (enqueue a task, set a flag, notify).
  /// It may start new collectives (they are nonblocking).
  ///
  /// @p cb is called with the completed future (Future<T>: get() returns the
  /// value or throws without blocking) if it accepts one, else with its Status
  /// (OK or the failure cause). @p cb must be copy-constructible.
  ///
  /// @code
  ///   std::move(f).on_complete([&](const strata::Status& st) { done.store(st.is_ok() ? 1 : 2); });
  /// @endcode
  template <class F>
  void on_complete(F&& cb) && {
    check("on_complete");
    using Fn = std::decay_t<F>;
    static_assert(std::is_invocable_v<Fn&, Future<T>&&> || std::is_invocable_v<Fn&, const Status&>,
                  "on_complete: the callback must accept strata::Future<T> or const strata::Status&");
    auto src = std::move(state_);
    detail::State<T>* raw = src.get();
    raw->on_ready([src = std::move(src), fn = Fn(std::forward<F>(cb))]() mutable noexcept {
      if constexpr (std::is_invocable_v<Fn&, Future<T>&&>) {
        fn(Future<T>(std::move(src)));
      } else {
        const Status st = src->error();
        src.reset();
        fn(st);
      }
    });
  }

  /// @brief Internal: wraps a state (used by Promise and when_all).
  explicit Future(detail::StatePtr<T> s) noexcept : state_(std::move(s)) {}
  /// @brief Internal: the shared state.
  [[nodiscard]] const detail::StatePtr<T>& state() const noexcept { return state_; }

 private:
  void check(const char* what) const {
    if (!state_)
      throw Error(Errc::invalid_argument,
                  std::string("Future::") + what + ": future has no state (moved from or consumed)");
  }
  detail::StatePtr<T> state_;
};

/// @brief The producer side of a Future. Copies share the state; the first
/// set_value/set_error wins. When the last copy is destroyed unfulfilled the
/// future fails with Errc::internal ("broken promise"), so no waiter hangs.
///
/// @code
/// auto ctx = std::make_shared<strata::FutureContext>();  // engine arena / progress hook
/// strata::Promise<void> p(ctx);
/// strata::Future<void> f = p.get_future();
/// p.set_error(strata::Status(strata::Errc::peer_dead, "rank 3 died"));
/// // f.get() throws strata::Error with errc() == Errc::peer_dead
/// @endcode
template <class T>
class Promise {
 public:
  /// @param ctx arena for continuations and optional progress hook (may be null)
  explicit Promise(std::shared_ptr<const FutureContext> ctx = nullptr) : state_(detail::make_state<T>(std::move(ctx))) {
    state_->promises.store(1, std::memory_order_relaxed);  // new: no other reference yet
  }
  Promise(const Promise& o) noexcept : state_(o.state_) {
    if (state_) state_->promises.fetch_add(1, std::memory_order_relaxed);
  }
  Promise(Promise&& o) noexcept : state_(std::move(o.state_)) {}
  Promise& operator=(Promise o) noexcept {
    release();
    state_ = std::move(o.state_);
    return *this;
  }
  ~Promise() { release(); }

  /// @brief The future of this promise (callable once; throws strata::Error after).
  Future<T> get_future() {
    if (!state_ || state_->retrieved.exchange(true))
      throw Error(Errc::invalid_argument, "Promise::get_future: future already retrieved");
    return Future<T>(state_);
  }
  /// @brief Fulfils with a value; false if already completed.
  template <class V = T, std::enable_if_t<!std::is_void_v<T> && std::is_convertible_v<V, T>, int> = 0>
  bool set_value(V&& v) {
    return state_ && state_->complete(Status::ok(), [&] { state_->value.emplace(std::forward<V>(v)); });
  }
  /// @brief Fulfils a Promise<void>; false if already completed.
  template <class V = T, std::enable_if_t<std::is_void_v<V>, int> = 0>
  bool set_value() {
    return state_ && state_->complete(Status::ok(), [] {});
  }
  /// @brief Fails the future with @p why (must not be OK); false if already completed.
  bool set_error(const Status& why) {
    const Status st = why.is_ok() ? Status(Errc::internal, "Promise::set_error called with an OK status") : why;
    return state_ && state_->complete(st, [] {});
  }
  /// @brief set_value() for OK, set_error(st) otherwise (Promise<void> only).
  template <class V = T, std::enable_if_t<std::is_void_v<V>, int> = 0>
  bool set(const Status& st) {
    return st.is_ok() ? set_value() : set_error(st);
  }

 private:
  void release() noexcept {
    if (state_ && state_->promises.fetch_sub(1, std::memory_order_acq_rel) == 1 && !state_->ready())
      state_->complete(Status(Errc::internal, "broken promise: the operation was dropped without a result"), [] {});
    state_.reset();
  }
  detail::StatePtr<T> state_;
};

/// @brief A future that is already fulfilled with @p v.
template <class T>
Future<std::decay_t<T>> make_ready_future(T&& v) {
  Promise<std::decay_t<T>> p;
  p.set_value(std::forward<T>(v));
  return p.get_future();
}
/// @brief A Future<void> that is already fulfilled.
inline Future<void> make_ready_future() {
  Promise<void> p;
  p.set_value();
  return p.get_future();
}
/// @brief A future that already failed with @p why.
template <class T>
Future<T> make_error_future(const Status& why) {
  Promise<T> p;
  p.set_error(why);
  return p.get_future();
}

/// @brief Completes when every future of @p fs is ready: with all values in
/// order (Future<void> for void), or with the first error observed.
///
/// @code
/// std::vector<strata::Future<int>> fs;  // ...
/// std::vector<int> all = strata::when_all(std::move(fs)).get();
/// @endcode
template <class T>
auto when_all(std::vector<Future<T>> fs) {
  using R = std::conditional_t<std::is_void_v<T>, void, std::vector<T>>;
  std::shared_ptr<const FutureContext> ctx;
  for (auto& f : fs)
    if (f.valid() && detail::context_rank(f.state()->context()) > detail::context_rank(ctx)) ctx = f.state()->context();
  auto out = std::make_shared<detail::State<R>>(ctx);
  struct Join {
    std::mutex mu;
    std::size_t left;
    std::vector<std::optional<detail::ValueOr<T>>> vals;
  };
  auto join = std::make_shared<Join>();
  join->left = fs.size();
  join->vals.resize(fs.size());
  auto finish = [out, join]() {
    if constexpr (std::is_void_v<T>) {
      out->complete(Status::ok(), [] {});
    } else {
      out->complete(Status::ok(), [&] {
        std::vector<T> v;
        v.reserve(join->vals.size());
        for (auto& x : join->vals) v.push_back(std::move(*x));
        out->value.emplace(std::move(v));
      });
    }
  };
  if (fs.empty()) finish();
  for (std::size_t i = 0; i < fs.size(); ++i) {
    if (!fs[i].valid()) {
      out->complete(Status(Errc::invalid_argument, "when_all: future " + std::to_string(i) + " has no state"), [] {});
      continue;
    }
    auto s = fs[i].state();
    detail::State<T>* raw = s.get();
    raw->on_ready([s, i, join, out, finish]() {
      if (!s->error().is_ok()) {
        out->complete(s->error(), [] {});
      } else if constexpr (!std::is_void_v<T>) {
        std::lock_guard<std::mutex> g(join->mu);
        join->vals[i].emplace(std::move(*s->value));
      }
      bool last = false;
      {
        std::lock_guard<std::mutex> g(join->mu);
        last = --join->left == 0;
      }
      if (last) finish();
    });
  }
  return Future<R>(std::move(out));
}

/// @brief when_all over a pack: a future of the tuple of values (std::monostate for void).
///
/// @code
/// strata::Future<std::tuple<int, std::monostate>> t = strata::when_all(std::move(fi), std::move(fv));
/// @endcode
template <class... Ts>
Future<std::tuple<detail::ValueOr<Ts>...>> when_all(Future<Ts>&&... fs) {
  using Tup = std::tuple<detail::ValueOr<Ts>...>;
  // The joined future waits like its parts (regression: it had no context, so
  // get() blocked without driving progress in inline mode and hung).
  auto out = std::make_shared<detail::State<Tup>>(
      detail::join_context({(fs.valid() ? static_cast<const detail::StateBase*>(fs.state().get()) : nullptr)...}));
  struct Join {
    std::mutex mu;
    std::size_t left = sizeof...(Ts);
    std::tuple<std::optional<detail::ValueOr<Ts>>...> vals;
  };
  auto join = std::make_shared<Join>();
  auto finish = [out, join]() {
    out->complete(Status::ok(), [&] {
      out->value.emplace(std::apply([](auto&... o) { return Tup(std::move(*o)...); }, join->vals));
    });
  };
  if constexpr (sizeof...(Ts) == 0) finish();
  auto attach = [&](auto idx, auto& f) {
    constexpr std::size_t I = decltype(idx)::value;
    using V = std::tuple_element_t<I, std::tuple<Ts...>>;
    if (!f.valid()) {
      out->complete(Status(Errc::invalid_argument, "when_all: future " + std::to_string(I) + " has no state"), [] {});
      std::lock_guard<std::mutex> g(join->mu);
      --join->left;
      return;
    }
    auto s = f.state();
    detail::State<V>* raw = s.get();
    raw->on_ready([s, join, out, finish]() {
      bool last = false;
      {
        std::lock_guard<std::mutex> g(join->mu);
        if (!s->error().is_ok()) {
          out->complete(s->error(), [] {});
        } else if constexpr (std::is_void_v<V>) {
          std::get<I>(join->vals).emplace();
        } else {
          std::get<I>(join->vals).emplace(std::move(*s->value));
        }
        last = --join->left == 0;
      }
      if (last) finish();
    });
  };
  detail::for_each_indexed(attach, std::index_sequence_for<Ts...>{}, fs...);
  return Future<Tup>(std::move(out));
}

}  // namespace strata
