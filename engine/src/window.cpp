// strata::Window: one-sided put / put_signal / signal with counted waits.
//
// Routing. The transport has one handler of each kind; the engine installs
// the ones below over the executor's (install_window_routing). Window
// signals carry the reserved communicator id kWindowSignalComm (0xFFFF, never
// given to a communicator) in bits 63..48, the window id in bits 47..32 and
// the user tag in bits 31..0; everything else goes to the executor unchanged.
// Completions of window operations carry their context pointer with bit 0
// set (executor contexts are aligned node states, bit 0 clear).
//
// Window ids are agreed like communicator ids (engine/src/ids.hpp: free on
// every member) and reused after free round-robin: a late signal of a freed
// window is dropped unless ~65,000 windows were created since.
#include "strata/window.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "checks.hpp"
#include "comm.hpp"
#include "ids.hpp"
#include "select.hpp"
#include "strata/detail/log.hpp"
#include "strata/engine.hpp"

namespace strata {
namespace detail {

struct WindowState;

// The windows of one engine, for signal routing and failure propagation.
struct WindowTable {
  std::mutex mu;
  std::unordered_map<std::uint16_t, std::weak_ptr<WindowState>> live;
  IdPool ids{0, 0x10000};                // window ids in use here (16 bits on the wire: reused after free)
  std::unordered_map<int, Status> dead;  // world rank -> cause
  Status shut;                           // set at engine shutdown
};

// One posted operation (owned by its window's ops set until it completes).
struct WinOp {
  std::shared_ptr<WindowState> win;
  Promise<void> promise;
  int target = -1;
  const char* what = "";
};

struct WindowState : std::enable_shared_from_this<WindowState> {
  std::shared_ptr<CommImpl> comm;
  std::shared_ptr<EngineCore> core;
  std::shared_ptr<WindowTable> table;
  std::uint16_t id = 0;
  void* base = nullptr;
  std::size_t len = 0;
  bool registered = false;
  std::vector<transport::RemoteKey> keys;  // per communicator rank
  std::vector<std::size_t> sizes;          // per communicator rank

  struct Tag {
    std::uint64_t avail = 0;
    std::uint64_t total = 0;
    std::deque<std::pair<std::uint64_t, Promise<void>>> waiters;
  };
  mutable std::mutex mu;
  std::condition_variable ops_cv;
  std::unordered_map<std::uint32_t, Tag> tags;
  std::unordered_set<WinOp*> ops;
  Status failed;  // waits that cannot be satisfied now fail with this
  bool freed = false;

  [[nodiscard]] int rank() const { return comm->rank(); }
  [[nodiscard]] int size() const { return comm->size(); }

  [[noreturn]] void bad(const char* op, const std::string& what) const {
    throw Error(Errc::invalid_argument, std::string("Window::") + op + " on rank " + std::to_string(rank()) +
                                            " (window " + std::to_string(id) + "): " + what);
  }

  // Use after free / shutdown.
  void check_usable(const char* op) const {
    {
      std::lock_guard<std::mutex> lk(mu);
      if (freed) bad(op, "the window was freed");
    }
    const Status st = core->check_alive((std::string("Window::") + op).c_str());
    if (!st.is_ok()) throw Error(st);
  }

  void check_target(const char* op, int target) const {
    if (target < 0 || target >= size())
      bad(op, "argument 'target' = " + std::to_string(target) + " outside [0, " + std::to_string(size()) + ")");
  }

  static std::uint64_t payload(std::uint16_t win, std::uint32_t tag) {
    return (std::uint64_t{kWindowSignalComm} << 48) | (std::uint64_t{win} << 32) | tag;
  }

  // Posts one operation; @p post gets the tagged context.
  template <class Post>
  Future<void> post(const char* what, int target, Post&& do_post) {
    auto* op = new WinOp{shared_from_this(), Promise<void>(core->fctx), target, what};
    Future<void> fut = op->promise.get_future();
    {
      std::lock_guard<std::mutex> lk(mu);
      ops.insert(op);
    }
    void* ctx = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(op) | 1u);
    const Status st = do_post(ctx);
    if (!st.is_ok()) {  // rejected: no completion follows
      {
        std::lock_guard<std::mutex> lk(mu);
        ops.erase(op);
      }
      ops_cv.notify_all();
      op->promise.set_error(Status(st.code(), std::string("Window::") + what + " on rank " + std::to_string(rank()) +
                                                  " (window " + std::to_string(id) + ") to rank " +
                                                  std::to_string(target) + ": " + st.message()));
      delete op;
    }
    return fut;
  }

  // A signal of @p tag arrived (from the routing handler).
  void deliver(std::uint32_t tag) {
    std::vector<Promise<void>> ready;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (freed) return;
      Tag& t = tags[tag];
      ++t.total;
      ++t.avail;
      while (!t.waiters.empty() && t.waiters.front().first <= t.avail) {
        t.avail -= t.waiters.front().first;
        ready.push_back(std::move(t.waiters.front().second));
        t.waiters.pop_front();
      }
    }
    for (auto& p : ready) p.set_value();
  }

  // Fails every pending wait with @p why (and the later ones that cannot be satisfied at once).
  void fail_waits(const Status& why) {
    std::vector<Promise<void>> hit;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (failed.is_ok()) failed = why;
      for (auto& kv : tags) {
        for (auto& w : kv.second.waiters) hit.push_back(std::move(w.second));
        kv.second.waiters.clear();
      }
    }
    for (auto& p : hit) p.set_error(why);
  }

  // Waits until this rank's own operations completed (bounded by the transport's failure handling).
  void wait_ops() {
    std::unique_lock<std::mutex> lk(mu);
    while (!ops.empty()) {
      if (core->fctx && core->fctx->progress) {  // inline progress mode: drive it ourselves
        lk.unlock();
        if (!core->fctx->progress()) std::this_thread::yield();
        lk.lock();
      } else {
        ops_cv.wait_for(lk, std::chrono::milliseconds(1));
      }
    }
  }

  // Local part of free(): no more routing, memory deregistered, waits cancelled.
  void release_local(const Status& why) {
    {
      std::lock_guard<std::mutex> lk(table->mu);
      const auto it = table->live.find(id);
      if (it != table->live.end() && it->second.lock().get() == this) table->live.erase(it);
    }
    std::vector<Promise<void>> hit;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (freed) return;
      freed = true;
      table->ids.release(id);  // every member freed it too (free is collective)
      for (auto& kv : tags)
        for (auto& w : kv.second.waiters) hit.push_back(std::move(w.second));
      tags.clear();
    }
    for (auto& p : hit) p.set_error(why);
    if (registered && core->transport) {
      const Status st = core->transport->deregister_memory(base, len);
      if (!st.is_ok()) logger().warn("window {}: deregistering its memory failed: {}", id, st.message());
      registered = false;
    }
  }

  void free_collective() {
    {
      std::lock_guard<std::mutex> lk(mu);
      if (freed) bad("free", "the window was already freed");
    }
    const Status cancelled(Errc::cancelled, "Window::wait on rank " + std::to_string(rank()) + " (window " +
                                                std::to_string(id) + "): the window was freed");
    if (!core->alive.load(std::memory_order_acquire)) {
      release_local(cancelled);
      return;
    }
    wait_ops();
    try {
      CollOptions o;
      Communicator(comm).barrier(o).get();
    } catch (...) {
      release_local(cancelled);
      throw;
    }
    release_local(cancelled);
  }
};

// The handle's target: frees the window (collectively) when the last handle goes.
struct WindowImpl {
  std::shared_ptr<WindowState> s;
  ~WindowImpl();
};

WindowImpl::~WindowImpl() {
  if (!s) return;
  WindowState& w = *s;
  bool freed_already = false;
  {
    std::lock_guard<std::mutex> lk(w.mu);
    freed_already = w.freed;
  }
  if (freed_already) return;
  try {
    w.free_collective();
  } catch (const std::exception& e) {
    logger().warn("window {} on rank {}: implicit free failed: {}", w.id, w.rank(), e.what());
    w.release_local(Status(Errc::cancelled, "window freed"));
  }
}

namespace {

std::shared_ptr<WindowState> find_window(WindowTable& t, std::uint16_t id) {
  std::lock_guard<std::mutex> lk(t.mu);
  const auto it = t.live.find(id);
  return it == t.live.end() ? nullptr : it->second.lock();
}

void complete_op(WinOp* op, const Status& s) {
  WindowState& w = *op->win;
  {
    std::lock_guard<std::mutex> lk(w.mu);
    w.ops.erase(op);
  }
  w.ops_cv.notify_all();
  if (s.is_ok()) {
    op->promise.set_value();
  } else {
    op->promise.set_error(Status(s.code(), std::string("Window::") + op->what + " on rank " + std::to_string(w.rank()) +
                                               " (window " + std::to_string(w.id) + ") to rank " +
                                               std::to_string(op->target) + ": " + s.message()));
  }
  delete op;
}

}  // namespace

void install_window_routing(EngineCore& core) {
  auto table = std::make_shared<WindowTable>();
  core.windows = table;
  dag::Executor* ex = core.exec.get();  // valid until its destructor clears the handlers
  transport::Transport& tp = *core.transport;
  tp.set_completion_handler([ex](void* ctx, const Status& s) {
    const auto v = reinterpret_cast<std::uintptr_t>(ctx);
    if (ctx == nudge_context()) return;  // a flag-wait nudge was sent (hooks.hpp)
    if ((v & 1u) != 0) {
      complete_op(reinterpret_cast<WinOp*>(v & ~std::uintptr_t{1}), s);
      return;
    }
    ex->handle_completion(ctx, s);
  });
  tp.set_signal_handler([ex, table, core = &core](int source, std::uint64_t p) {
    if ((p >> 48) == kNudgeComm) return;         // wakes the progress servers: their progress hook polls the flag waits
    if ((p >> 48) == dag::kReportRequestComm) {  // another rank's watchdog asks for this rank's hang report
      request_report();
      return;
    }
    if ((p >> 48) == dag::kHeartbeatComm) {  // a rank on another host is alive (report.cpp)
      heard_from(*core, source);
      return;
    }
    if ((p >> 48) == dag::kShrinkComm) {  // revoke / shrink between a communicator's members
      shrink_signal(*core, source, p);
      return;
    }
    if ((p >> 48) != kWindowSignalComm) {
      ex->handle_signal(source, p);
      return;
    }
    const auto id = static_cast<std::uint16_t>(p >> 32);
    if (auto w = find_window(*table, id)) {
      w->deliver(static_cast<std::uint32_t>(p));
    } else {
      logger().debug("window signal from rank {} for window {} dropped (not live here)", source, id);
    }
  });
  tp.set_peer_failure_handler([ex, table, core = &core](int peer, const Status& why) {
    ex->handle_peer_failure(peer, why);
    // Every communicator with the dead member fails its unfinished calls (the
    // transport stops before the core goes, so `core` is valid here).
    std::vector<std::shared_ptr<CommImpl>> comms;
    {
      std::lock_guard<std::mutex> lk(core->id_mu);
      for (auto& wc : core->comms)
        if (auto c = wc.lock()) comms.push_back(std::move(c));
    }
    for (auto& c : comms) c->member_died(peer, why);
    std::vector<std::shared_ptr<WindowState>> hit;
    {
      std::lock_guard<std::mutex> lk(table->mu);
      table->dead.emplace(peer, why);
      for (auto& kv : table->live)
        if (auto w = kv.second.lock()) hit.push_back(std::move(w));
    }
    for (auto& w : hit) {
      const auto& members = w->comm->group.world;
      const auto it = std::find(members.begin(), members.end(), peer);
      if (it == members.end()) continue;
      w->fail_waits(Status(Errc::peer_dead, "Window::wait on rank " + std::to_string(w->rank()) + " (window " +
                                                std::to_string(w->id) + "): member rank " +
                                                std::to_string(it - members.begin()) + " died: " + why.message()));
    }
  });
}

void shutdown_windows(EngineCore& core) {
  if (!core.windows) return;
  std::vector<std::shared_ptr<WindowState>> hit;
  {
    std::lock_guard<std::mutex> lk(core.windows->mu);
    core.windows->shut = Status(Errc::shutdown, "the engine shut down");
    for (auto& kv : core.windows->live)
      if (auto w = kv.second.lock()) hit.push_back(std::move(w));
  }
  for (auto& w : hit) {
    const Status why(Errc::shutdown, "window " + std::to_string(w->id) + " on rank " + std::to_string(w->rank()) +
                                         ": the engine shut down before the operation finished");
    w->fail_waits(why);
    // The transport's handlers are gone: operations still listed will never complete.
    std::vector<WinOp*> ops;
    {
      std::lock_guard<std::mutex> lk(w->mu);
      ops.assign(w->ops.begin(), w->ops.end());
      w->ops.clear();
    }
    w->ops_cv.notify_all();
    for (WinOp* op : ops) {
      op->promise.set_error(why);
      delete op;
    }
  }
}

}  // namespace detail

// ---------------------------------------------------------------- Window

Window::Window(std::shared_ptr<detail::WindowImpl> impl) : impl_(std::move(impl)) {}

namespace {
detail::WindowState& need(const std::shared_ptr<detail::WindowImpl>& w, const char* op) {
  if (!w || !w->s)
    throw Error(Errc::invalid_argument, std::string("Window::") + op + ": invalid (default-constructed) window");
  return *w->s;
}
}  // namespace

int Window::rank() const { return impl_ ? impl_->s->rank() : -1; }
int Window::size() const { return impl_ ? impl_->s->size() : 0; }
void* Window::base() const { return impl_ ? impl_->s->base : nullptr; }
std::uint16_t Window::id() const { return impl_ ? impl_->s->id : 0; }

std::size_t Window::bytes(int r) const {
  detail::WindowState& w = need(impl_, "bytes");
  w.check_target("bytes", r);
  return w.sizes[static_cast<std::size_t>(r)];
}

Future<void> Window::put(int target, std::size_t target_offset, const void* src, std::size_t bytes) {
  detail::WindowState& w = need(impl_, "put");
  w.check_usable("put");
  w.check_target("put", target);
  if (bytes > 0 && src == nullptr) w.bad("put", "argument 'src' is null with 'bytes' = " + std::to_string(bytes));
  const std::size_t tsize = w.sizes[static_cast<std::size_t>(target)];
  if (target_offset > tsize || bytes > tsize - target_offset)
    w.bad("put", "arguments 'target_offset' + 'bytes' = " + std::to_string(target_offset) + " + " +
                     std::to_string(bytes) + " are beyond rank " + std::to_string(target) + "'s window (" +
                     std::to_string(tsize) + " bytes)");
  if (bytes == 0) return make_ready_future();
  const int peer = w.comm->group.world[static_cast<std::size_t>(target)];
  const transport::RemoteKey& key = w.keys[static_cast<std::size_t>(target)];
  transport::Transport& tp = *w.core->transport;
  return w.post("put", target, [&](void* ctx) {
    return tp.put(peer, src, bytes, key, static_cast<std::uint64_t>(target_offset), ctx);
  });
}

Future<void> Window::put_signal(int target, std::size_t target_offset, const void* src, std::size_t bytes,
                                std::uint32_t tag) {
  detail::WindowState& w = need(impl_, "put_signal");
  w.check_usable("put_signal");
  w.check_target("put_signal", target);
  if (bytes > 0 && src == nullptr)
    w.bad("put_signal", "argument 'src' is null with 'bytes' = " + std::to_string(bytes));
  const std::size_t tsize = w.sizes[static_cast<std::size_t>(target)];
  if (target_offset > tsize || bytes > tsize - target_offset)
    w.bad("put_signal", "arguments 'target_offset' + 'bytes' = " + std::to_string(target_offset) + " + " +
                            std::to_string(bytes) + " are beyond rank " + std::to_string(target) + "'s window (" +
                            std::to_string(tsize) + " bytes)");
  const int peer = w.comm->group.world[static_cast<std::size_t>(target)];
  const std::uint64_t payload = detail::WindowState::payload(w.id, tag);
  transport::Transport& tp = *w.core->transport;
  if (bytes == 0) return w.post("put_signal", target, [&](void* ctx) { return tp.signal(peer, payload, ctx); });
  const transport::RemoteKey& key = w.keys[static_cast<std::size_t>(target)];
  return w.post("put_signal", target, [&](void* ctx) {
    return tp.put_with_signal(peer, src, bytes, key, static_cast<std::uint64_t>(target_offset), payload, ctx);
  });
}

Future<void> Window::signal(int target, std::uint32_t tag) {
  detail::WindowState& w = need(impl_, "signal");
  w.check_usable("signal");
  w.check_target("signal", target);
  const int peer = w.comm->group.world[static_cast<std::size_t>(target)];
  const std::uint64_t payload = detail::WindowState::payload(w.id, tag);
  transport::Transport& tp = *w.core->transport;
  return w.post("signal", target, [&](void* ctx) { return tp.signal(peer, payload, ctx); });
}

Future<void> Window::wait(std::uint32_t tag, std::uint64_t count) {
  detail::WindowState& w = need(impl_, "wait");
  w.check_usable("wait");
  Promise<void> p(w.core->fctx);
  Future<void> f = p.get_future();
  Status fail;
  {
    std::lock_guard<std::mutex> lk(w.mu);
    detail::WindowState::Tag& t = w.tags[tag];
    if (t.waiters.empty() && t.avail >= count) {
      t.avail -= count;
    } else if (!w.failed.is_ok()) {
      fail = w.failed;
    } else {
      t.waiters.emplace_back(count, std::move(p));
      return f;
    }
  }
  p.set(fail);
  return f;
}

std::uint64_t Window::arrived(std::uint32_t tag) const {
  detail::WindowState& w = need(impl_, "arrived");
  std::lock_guard<std::mutex> lk(w.mu);
  const auto it = w.tags.find(tag);
  return it == w.tags.end() ? 0 : it->second.total;
}

void Window::free() {
  detail::WindowState& w = need(impl_, "free");
  w.free_collective();
}

// ---------------------------------------------------------------- creation

// Over ~80 lines: the creation protocol's steps in order (register, exchange keys, map).
Window Communicator::create_window(void* base, std::size_t bytes) {
  if (!impl_) throw Error(Errc::invalid_argument, "create_window: invalid communicator handle");
  detail::CommImpl& c = *impl_;
  throw_if_error(c.core->check_alive("create_window"));
  const std::string who = "create_window on rank " + std::to_string(c.rank()) + " (comm " + std::to_string(c.id) + ")";
  if (bytes > 0 && base == nullptr)
    throw Error(Errc::invalid_argument, who + ": argument 'base' is null with 'bytes' = " + std::to_string(bytes));
  if (bytes > (std::size_t{1} << 47))
    throw Error(Errc::invalid_argument,
                who + ": argument 'bytes' = " + std::to_string(bytes) + " is too large (negative or overflowed?)");
  const std::shared_ptr<detail::WindowTable> table = c.core->windows;
  if (!table) throw Error(Errc::internal, who + ": window routing is not installed");
  // The id: free on every member (agreed with allreduces; ids are reused after free).
  auto word = [this](std::uint64_t x, Op op) {
    std::uint64_t out = 0;
    CollOptions o;
    o.algorithm = "tree";
    allreduce(&x, &out, 1, Datatype::uint64, op, o).get();
    return out;
  };
  const std::uint32_t agreed = table->ids.agree([&](std::uint64_t x) { return word(x, Op::max); },
                                                [&](std::uint64_t x) { return word(x, Op::min); }, true, who, "window");
  auto w = std::make_shared<detail::WindowState>();
  w->comm = impl_;
  w->core = c.core;
  w->table = table;
  w->id = static_cast<std::uint16_t>(agreed);
  w->base = base;
  w->len = bytes;
  transport::RemoteKey key{};
  // Registration and routing before the keys go out: a peer can put or
  // signal only after it has this rank's key.
  Status reg = Status::ok();
  if (bytes > 0) {
    reg = c.core->transport->register_memory(base, bytes, &key);
    w->registered = reg.is_ok();
  }
  {
    std::lock_guard<std::mutex> lk(table->mu);
    table->live[w->id] = w;
  }
  // Round 2: (key, size, ok) of every member. A failed registration still
  // takes part (the others must not hang) and fails the creation everywhere.
  constexpr std::size_t kw = sizeof(transport::RemoteKey) / 8 + 2;
  const auto n = static_cast<std::size_t>(c.size());
  std::vector<std::uint64_t> send(kw * n, 0), recv(kw * n, 0);
  std::uint64_t* my = send.data() + kw * static_cast<std::size_t>(c.rank());
  std::memcpy(my, &key, sizeof key);
  my[kw - 2] = bytes;
  my[kw - 1] = reg.is_ok() ? 0 : 1;
  try {
    CollOptions o;
    o.algorithm = "tree";
    allreduce(send.data(), recv.data(), send.size(), Datatype::uint64, Op::bxor, o).get();
  } catch (...) {
    w->release_local(Status(Errc::cancelled, "window creation failed"));
    throw;
  }
  w->keys.resize(n);
  w->sizes.resize(n);
  std::vector<int> failed;
  for (std::size_t r = 0; r < n; ++r) {
    std::memcpy(static_cast<void*>(&w->keys[r]), recv.data() + kw * r, sizeof(transport::RemoteKey));
    w->sizes[r] = static_cast<std::size_t>(recv[kw * r + kw - 2]);
    if (recv[kw * r + kw - 1] != 0) failed.push_back(static_cast<int>(r));
  }
  if (!failed.empty()) {
    w->release_local(Status(Errc::cancelled, "window creation failed"));
    throw Error(reg.is_ok() ? Errc::transport_error : reg.code(),
                who + ": registering the window memory failed on rank " + std::to_string(failed.front()) +
                    (reg.is_ok() ? std::string() : ": " + reg.message()));
  }
  // A member that died before the window existed fails its waits from the start.
  {
    std::lock_guard<std::mutex> lk(table->mu);
    for (const auto& kv : table->dead) {
      const auto& members = c.group.world;
      if (std::find(members.begin(), members.end(), kv.first) != members.end()) {
        std::lock_guard<std::mutex> wl(w->mu);
        w->failed = Status(Errc::peer_dead, "Window::wait on rank " + std::to_string(c.rank()) + " (window " +
                                                std::to_string(w->id) + "): a member died: " + kv.second.message());
      }
    }
  }
  detail::logger().debug("window {} created on comm {}: {} bytes here", w->id, c.id, bytes);
  auto owner = std::make_shared<detail::WindowImpl>();
  owner->s = std::move(w);
  return Window(std::move(owner));
}

}  // namespace strata
