// Deterministic in-process fake transport (see strata/transport/fake.hpp).
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <utility>

#include "strata/transport/fake.hpp"

namespace strata {
namespace transport {

const char* to_string(FakeOpKind k) noexcept {
  switch (k) {
    case FakeOpKind::put:
      return "put";
    case FakeOpKind::get:
      return "get";
    case FakeOpKind::put_with_signal:
      return "put_with_signal";
    case FakeOpKind::signal:
      return "signal";
    case FakeOpKind::fetch_add:
      return "fetch_add";
  }
  return "?";
}

namespace {

struct Op {
  FakeOpInfo info;
  const void* src = nullptr;
  void* dst = nullptr;
  RemoteKey key;
  std::uint64_t offset = 0;
  std::uint64_t addend = 0;
  std::uint64_t* fetched = nullptr;
  std::uint64_t signal_seq = 0;  // per (source, target) order of signal-bearing ops
  [[nodiscard]] bool carries_signal() const noexcept {
    return info.kind == FakeOpKind::signal || info.kind == FakeOpKind::put_with_signal;
  }
};

struct Event {
  enum class Type : std::uint8_t { completion, signal, failure } type = Type::completion;
  void* context = nullptr;
  Status status;
  int source = -1;
  std::uint64_t payload = 0;
};

}  // namespace

class FakeEndpoint;

struct FakeWorld::Impl {
  mutable std::mutex mu;
  std::condition_variable cv;
  FakeMode mode;
  std::mt19937_64 rng;
  std::vector<std::unique_ptr<FakeEndpoint>> eps;
  std::deque<Op> queue;
  std::uint64_t next_id = 1;
  std::vector<std::pair<std::function<bool(const FakeOpInfo&)>, Status>> fail_rules;

  Impl(FakeMode m, std::uint64_t seed) : mode(m), rng(seed) {}

  // All below: called with mu held.
  void perform(Op& op);
  void complete(const Op& op, const Status& st, bool deliver_signal);
  void push_signal(int target, int source, std::uint64_t seq, bool present, std::uint64_t payload);
  bool release_at(std::size_t index);
};

class FakeEndpoint final : public Transport {
 public:
  FakeEndpoint(FakeWorld::Impl* w, int rank, int size)
      : w_(w), rank_(rank), next_out_(static_cast<std::size_t>(size), 0), next_in_(static_cast<std::size_t>(size), 0) {}

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return static_cast<int>(next_out_.size()); }
  std::string name() const override { return "fake(" + std::to_string(size()) + ")"; }

  void set_completion_handler(CompletionHandler h) override {
    std::lock_guard<std::mutex> g(deliver_mu_);
    on_completion_ = std::move(h);
  }
  void set_signal_handler(SignalHandler h) override {
    std::lock_guard<std::mutex> g(deliver_mu_);
    on_signal_ = std::move(h);
  }
  void set_peer_failure_handler(PeerFailureHandler h) override {
    std::lock_guard<std::mutex> g(deliver_mu_);
    on_failure_ = std::move(h);
  }

  Status register_memory(void* addr, std::size_t len, RemoteKey* key) override {
    if (key == nullptr) return {Errc::invalid_argument, "fake register_memory: key is null (rank " + rn() + ")"};
    if (addr == nullptr && len > 0)
      return {Errc::invalid_argument, "fake register_memory: addr is null (rank " + rn() + ")"};
    std::lock_guard<std::mutex> g(w_->mu);
    const auto a = reinterpret_cast<std::uintptr_t>(addr);
    regs_.emplace_back(a, len);
    *key = RemoteKey{};
    key->owner = rank_;
    key->flags = RemoteKey::kShm;
    key->addr = a;
    key->len = len;
    key->shm_token = regs_.size();
    return Status::ok();
  }
  Status deregister_memory(void* addr, std::size_t len) override {
    std::lock_guard<std::mutex> g(w_->mu);
    const auto a = reinterpret_cast<std::uintptr_t>(addr);
    regs_.erase(std::remove_if(regs_.begin(), regs_.end(),
                               [&](const auto& r) { return r.first < a + len && a < r.first + r.second; }),
                regs_.end());
    return Status::ok();
  }

  // Every fake rank lives in this process: a peer's memory is this memory.
  bool can_read_peer(int peer) const override { return peer >= 0 && peer < size(); }
  Status read_peer(int peer, void* dst, std::uint64_t addr, std::size_t len) override {
    if (peer < 0 || peer >= size())
      return {Errc::unknown_peer, "fake read_peer: peer " + std::to_string(peer) + " (rank " + rn() + ")"};
    if (len > 0 && (dst == nullptr || addr == 0))
      return {Errc::invalid_argument, "fake read_peer: null address (rank " + rn() + ")"};
    if (len > 0) std::memcpy(dst, reinterpret_cast<const void*>(addr), len);
    return Status::ok();
  }
  Status write_peer(int peer, const void* src, std::uint64_t addr, std::size_t len) override {
    if (peer < 0 || peer >= size())
      return {Errc::unknown_peer, "fake write_peer: peer " + std::to_string(peer) + " (rank " + rn() + ")"};
    if (len > 0 && (src == nullptr || addr == 0))
      return {Errc::invalid_argument, "fake write_peer: null address (rank " + rn() + ")"};
    if (len > 0) std::memcpy(reinterpret_cast<void*>(addr), src, len);
    return Status::ok();
  }

  Status put(int peer, const void* src, std::size_t len, const RemoteKey& dst, std::uint64_t off, void* ctx) override {
    Op op = make(FakeOpKind::put, peer, len, ctx);
    op.src = src;
    op.key = dst;
    op.offset = off;
    return post(std::move(op));
  }
  Status get(int peer, void* dst, std::size_t len, const RemoteKey& src, std::uint64_t off, void* ctx) override {
    Op op = make(FakeOpKind::get, peer, len, ctx);
    op.dst = dst;
    op.key = src;
    op.offset = off;
    return post(std::move(op));
  }
  Status put_with_signal(int peer, const void* src, std::size_t len, const RemoteKey& dst, std::uint64_t off,
                         std::uint64_t signal, void* ctx) override {
    Op op = make(FakeOpKind::put_with_signal, peer, len, ctx);
    op.src = src;
    op.key = dst;
    op.offset = off;
    op.info.payload = signal;
    return post(std::move(op));
  }
  Status signal(int peer, std::uint64_t payload, void* ctx) override {
    Op op = make(FakeOpKind::signal, peer, 0, ctx);
    op.info.payload = payload;
    return post(std::move(op));
  }
  Status fetch_add(int peer, const RemoteKey& dst, std::uint64_t off, std::uint64_t addend, std::uint64_t* fetched,
                   void* ctx) override {
    Op op = make(FakeOpKind::fetch_add, peer, sizeof(std::uint64_t), ctx);
    op.key = dst;
    op.offset = off;
    op.addend = addend;
    op.fetched = fetched;
    return post(std::move(op));
  }

  std::size_t progress() override {
    {
      std::unique_lock<std::mutex> g(w_->mu);
      if (dead_) return 0;
      if (w_->mode == FakeMode::auto_complete) {
        // Release the operations this rank has queued so far, FIFO.
        std::vector<std::uint64_t> mine;
        for (const Op& op : w_->queue)
          if (op.info.source == rank_) mine.push_back(op.info.id);
        for (std::uint64_t id : mine) {
          for (std::size_t i = 0; i < w_->queue.size(); ++i)
            if (w_->queue[i].info.id == id) {
              w_->release_at(i);
              break;
            }
        }
      }
    }
    std::unique_lock<std::mutex> dl(deliver_mu_, std::try_to_lock);
    if (!dl.owns_lock()) return 0;  // another thread is delivering (keeps per-pair order)
    std::size_t n = 0;
    for (;;) {
      Event ev;
      {
        std::lock_guard<std::mutex> g(w_->mu);
        if (inbox_.empty() || dead_) break;
        ev = std::move(inbox_.front());
        inbox_.pop_front();
      }
      ++n;
      switch (ev.type) {
        case Event::Type::completion:
          if (on_completion_) on_completion_(ev.context, ev.status);
          break;
        case Event::Type::signal:
          if (on_signal_) on_signal_(ev.source, ev.payload);
          break;
        case Event::Type::failure:
          if (on_failure_) on_failure_(ev.source, ev.status);
          break;
      }
    }
    return n;
  }

  void wait_for_event(std::chrono::microseconds timeout) override {
    std::unique_lock<std::mutex> g(w_->mu);
    w_->cv.wait_for(g, timeout, [&] { return woken_ || !inbox_.empty() || has_auto_work(); });
    woken_ = false;
  }
  void wake() override {
    {
      std::lock_guard<std::mutex> g(w_->mu);
      woken_ = true;
    }
    w_->cv.notify_all();
  }

  Status peer_status(int peer) const override {
    if (peer < 0 || peer >= size())
      return {Errc::unknown_peer, "fake: peer " + std::to_string(peer) + " outside [0, " + std::to_string(size()) +
                                      ") (rank " + rn() + ")"};
    std::lock_guard<std::mutex> g(w_->mu);
    if (w_->eps[static_cast<std::size_t>(peer)]->dead_)
      return {Errc::peer_dead, "fake: rank " + std::to_string(peer) + " was killed"};
    return Status::ok();
  }

  void shutdown() override {
    std::lock_guard<std::mutex> g(w_->mu);
    shut_ = true;
    for (std::size_t i = 0; i < w_->queue.size();) {
      if (w_->queue[i].info.source == rank_) {
        Op op = std::move(w_->queue[i]);
        w_->queue.erase(w_->queue.begin() + static_cast<std::ptrdiff_t>(i));
        w_->complete(op, Status(Errc::shutdown, "fake: rank " + rn() + " shut down"), false);
      } else {
        ++i;
      }
    }
  }

  // ---- world-side state, guarded by w_->mu unless noted
  FakeWorld::Impl* w_;
  int rank_;
  bool dead_ = false;
  bool shut_ = false;
  bool woken_ = false;
  std::deque<Event> inbox_;
  std::vector<std::pair<std::uintptr_t, std::size_t>> regs_;
  std::vector<std::uint64_t> next_out_;  // per target: next signal sequence to assign
  std::vector<std::uint64_t> next_in_;   // per source: next signal sequence to deliver
  std::map<std::pair<int, std::uint64_t>, std::pair<bool, std::uint64_t>> held_;  // (source, seq) -> (present, payload)
  // guarded by deliver_mu_
  std::mutex deliver_mu_;
  CompletionHandler on_completion_;
  SignalHandler on_signal_;
  PeerFailureHandler on_failure_;

  [[nodiscard]] bool has_auto_work() const {
    if (w_->mode != FakeMode::auto_complete) return false;
    return std::any_of(w_->queue.begin(), w_->queue.end(), [&](const Op& op) { return op.info.source == rank_; });
  }
  [[nodiscard]] bool covers(std::uintptr_t a, std::size_t len) const {
    return std::any_of(regs_.begin(), regs_.end(),
                       [&](const auto& r) { return a >= r.first && a + len <= r.first + r.second; });
  }

 private:
  [[nodiscard]] std::string rn() const { return std::to_string(rank_); }

  Op make(FakeOpKind k, int peer, std::size_t len, void* ctx) const {
    Op op;
    op.info.kind = k;
    op.info.source = rank_;
    op.info.target = peer;
    op.info.len = len;
    op.info.context = ctx;
    return op;
  }

  Status post(Op op) {
    const std::string what = std::string("fake ") + to_string(op.info.kind) + " from rank " + rn() + " to peer " +
                             std::to_string(op.info.target);
    if (op.info.target < 0 || op.info.target >= size())
      return {Errc::unknown_peer, what + ": peer outside [0, " + std::to_string(size()) + ")"};
    std::unique_lock<std::mutex> g(w_->mu);
    if (shut_ || dead_) return {Errc::shutdown, what + ": transport shut down"};
    FakeEndpoint& peer = *w_->eps[static_cast<std::size_t>(op.info.target)];
    const bool remote_mem = op.info.kind != FakeOpKind::signal;
    if (remote_mem) {
      if (!op.key.valid() || op.key.owner != op.info.target)
        return {Errc::invalid_argument, what + ": remote key owned by rank " + std::to_string(op.key.owner)};
      if (op.offset > op.key.len || op.info.len > op.key.len - op.offset)
        return {Errc::out_of_range, what + ": [" + std::to_string(op.offset) + ", +" + std::to_string(op.info.len) +
                                        ") outside registration of " + std::to_string(op.key.len) + " bytes"};
      if (op.info.kind == FakeOpKind::fetch_add && (op.key.addr + op.offset) % 8 != 0)
        return {Errc::invalid_argument, what + ": fetch_add word not 8-byte aligned"};
      if (!peer.dead_ && !peer.covers(static_cast<std::uintptr_t>(op.key.addr + op.offset), op.info.len))
        return {Errc::not_registered, what + ": range not registered at the target"};
    }
    if (op.info.len > 0 &&
        ((op.info.kind == FakeOpKind::get && op.dst == nullptr) ||
         ((op.info.kind == FakeOpKind::put || op.info.kind == FakeOpKind::put_with_signal) && op.src == nullptr)))
      return {Errc::invalid_argument, what + ": local buffer is null"};
    if (op.info.kind == FakeOpKind::fetch_add && op.fetched == nullptr)
      return {Errc::invalid_argument, what + ": fetched is null"};
    if (op.carries_signal()) op.signal_seq = next_out_[static_cast<std::size_t>(op.info.target)]++;
    op.info.id = w_->next_id++;
    w_->queue.push_back(std::move(op));
    g.unlock();
    w_->cv.notify_all();
    return Status::ok();
  }
};

void FakeWorld::Impl::push_signal(int target, int source, std::uint64_t seq, bool present, std::uint64_t payload) {
  FakeEndpoint& t = *eps[static_cast<std::size_t>(target)];
  t.held_[{source, seq}] = {present, payload};
  auto& next = t.next_in_[static_cast<std::size_t>(source)];
  for (auto it = t.held_.find({source, next}); it != t.held_.end(); it = t.held_.find({source, next})) {
    if (it->second.first && !t.dead_) {
      Event ev;
      ev.type = Event::Type::signal;
      ev.source = source;
      ev.payload = it->second.second;
      t.inbox_.push_back(std::move(ev));
    }
    t.held_.erase(it);
    ++next;
  }
}

void FakeWorld::Impl::complete(const Op& op, const Status& st, bool deliver_signal) {
  if (op.carries_signal()) push_signal(op.info.target, op.info.source, op.signal_seq, deliver_signal, op.info.payload);
  FakeEndpoint& src = *eps[static_cast<std::size_t>(op.info.source)];
  if (src.dead_) return;
  Event ev;
  ev.type = Event::Type::completion;
  ev.context = op.info.context;
  ev.status = st;
  src.inbox_.push_back(std::move(ev));
}

void FakeWorld::Impl::perform(Op& op) {
  FakeEndpoint& tgt = *eps[static_cast<std::size_t>(op.info.target)];
  for (auto it = fail_rules.begin(); it != fail_rules.end(); ++it) {
    if (it->first(op.info)) {
      Status why = it->second;
      fail_rules.erase(it);
      complete(op, why, false);
      return;
    }
  }
  if (tgt.dead_) {
    complete(op, Status(Errc::peer_dead, "fake: peer " + std::to_string(op.info.target) + " is dead"), false);
    return;
  }
  auto* remote = reinterpret_cast<unsigned char*>(static_cast<std::uintptr_t>(op.key.addr + op.offset));
  switch (op.info.kind) {
    case FakeOpKind::put:
    case FakeOpKind::put_with_signal:
      if (op.info.len > 0) std::memmove(remote, op.src, op.info.len);
      break;
    case FakeOpKind::get:
      if (op.info.len > 0) std::memmove(op.dst, remote, op.info.len);
      break;
    case FakeOpKind::fetch_add: {
      std::uint64_t old = 0;
      std::memcpy(&old, remote, sizeof old);
      const std::uint64_t v = old + op.addend;
      std::memcpy(remote, &v, sizeof v);
      *op.fetched = old;
      break;
    }
    case FakeOpKind::signal:
      break;
  }
  complete(op, Status::ok(), true);
}

bool FakeWorld::Impl::release_at(std::size_t index) {
  if (index >= queue.size()) return false;
  Op op = std::move(queue[index]);
  queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(index));
  perform(op);
  return true;
}

FakeWorld::FakeWorld(int nranks, FakeMode mode, std::uint64_t seed) {
  if (nranks < 1) throw Error(Errc::invalid_argument, "FakeWorld: nranks must be >= 1, got " + std::to_string(nranks));
  impl_ = std::make_unique<Impl>(mode, seed);
  for (int r = 0; r < nranks; ++r) impl_->eps.push_back(std::make_unique<FakeEndpoint>(impl_.get(), r, nranks));
}

FakeWorld::~FakeWorld() = default;

int FakeWorld::size() const noexcept { return static_cast<int>(impl_->eps.size()); }

Transport& FakeWorld::endpoint(int r) {
  if (r < 0 || r >= size())
    throw Error(Errc::unknown_peer,
                "FakeWorld::endpoint: rank " + std::to_string(r) + " outside [0, " + std::to_string(size()) + ")");
  return *impl_->eps[static_cast<std::size_t>(r)];
}

void FakeWorld::set_mode(FakeMode mode) {
  {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->mode = mode;
  }
  impl_->cv.notify_all();
}

std::vector<FakeOpInfo> FakeWorld::pending() const {
  std::lock_guard<std::mutex> g(impl_->mu);
  std::vector<FakeOpInfo> out;
  out.reserve(impl_->queue.size());
  for (const Op& op : impl_->queue) out.push_back(op.info);
  return out;
}

std::size_t FakeWorld::pending_count() const {
  std::lock_guard<std::mutex> g(impl_->mu);
  return impl_->queue.size();
}

bool FakeWorld::release_next() {
  std::lock_guard<std::mutex> g(impl_->mu);
  return impl_->release_at(0);
}

bool FakeWorld::release_random() {
  std::lock_guard<std::mutex> g(impl_->mu);
  if (impl_->queue.empty()) return false;
  std::uniform_int_distribution<std::size_t> d(0, impl_->queue.size() - 1);
  return impl_->release_at(d(impl_->rng));
}

bool FakeWorld::release(std::uint64_t id) {
  std::lock_guard<std::mutex> g(impl_->mu);
  for (std::size_t i = 0; i < impl_->queue.size(); ++i)
    if (impl_->queue[i].info.id == id) return impl_->release_at(i);
  return false;
}

std::size_t FakeWorld::release_all(FakeOrder order) {
  std::lock_guard<std::mutex> g(impl_->mu);
  std::vector<std::uint64_t> ids;
  for (const Op& op : impl_->queue) ids.push_back(op.info.id);
  if (order == FakeOrder::lifo) std::reverse(ids.begin(), ids.end());
  if (order == FakeOrder::random) std::shuffle(ids.begin(), ids.end(), impl_->rng);
  std::size_t n = 0;
  for (std::uint64_t id : ids) {
    for (std::size_t i = 0; i < impl_->queue.size(); ++i)
      if (impl_->queue[i].info.id == id) {
        impl_->release_at(i);
        ++n;
        break;
      }
  }
  return n;
}

bool FakeWorld::fail(std::uint64_t id, const Status& why) {
  std::lock_guard<std::mutex> g(impl_->mu);
  for (std::size_t i = 0; i < impl_->queue.size(); ++i) {
    if (impl_->queue[i].info.id != id) continue;
    Op op = std::move(impl_->queue[i]);
    impl_->queue.erase(impl_->queue.begin() + static_cast<std::ptrdiff_t>(i));
    impl_->complete(op, why, false);
    return true;
  }
  return false;
}

void FakeWorld::fail_next(std::function<bool(const FakeOpInfo&)> pred, const Status& why) {
  std::lock_guard<std::mutex> g(impl_->mu);
  impl_->fail_rules.emplace_back(std::move(pred), why);
}

void FakeWorld::kill(int r) {
  if (r < 0 || r >= size())
    throw Error(Errc::unknown_peer,
                "FakeWorld::kill: rank " + std::to_string(r) + " outside [0, " + std::to_string(size()) + ")");
  {
    std::lock_guard<std::mutex> g(impl_->mu);
    FakeEndpoint& dead = *impl_->eps[static_cast<std::size_t>(r)];
    if (dead.dead_) return;
    dead.dead_ = true;
    dead.inbox_.clear();
    const Status why(Errc::peer_dead, "fake: rank " + std::to_string(r) + " was killed");
    for (std::size_t i = 0; i < impl_->queue.size();) {
      Op& op = impl_->queue[i];
      if (op.info.source == r || op.info.target == r) {
        Op taken = std::move(op);
        impl_->queue.erase(impl_->queue.begin() + static_cast<std::ptrdiff_t>(i));
        impl_->complete(taken, why, false);  // no event for the dead source
      } else {
        ++i;
      }
    }
    for (auto& ep : impl_->eps) {
      if (ep->dead_) continue;
      Event ev;
      ev.type = Event::Type::failure;
      ev.source = r;
      ev.status = why;
      ep->inbox_.push_back(std::move(ev));
    }
  }
  impl_->cv.notify_all();
}

std::size_t FakeWorld::progress_all() {
  std::size_t n = 0;
  for (auto& ep : impl_->eps) n += ep->progress();
  return n;
}

std::size_t FakeWorld::undelivered() const {
  std::lock_guard<std::mutex> g(impl_->mu);
  std::size_t n = 0;
  for (const auto& ep : impl_->eps) n += ep->inbox_.size();
  return n;
}

std::size_t FakeWorld::drain(FakeOrder order, std::size_t max_rounds) {
  std::size_t rounds = 0;
  while (rounds < max_rounds) {
    ++rounds;
    const std::size_t released = release_all(order);
    const std::size_t delivered = progress_all();
    if (released == 0 && delivered == 0 && pending_count() == 0 && undelivered() == 0) break;
  }
  return rounds;
}

}  // namespace transport
}  // namespace strata
