// Engine and Communicator: bootstrap -> hierarchy -> transport -> executor ->
// progress servers, and the per-communicator windows, credits and plan cache.
// Over ~800 lines: the engine's set-up and communicator management; to be split by concern next.
#include "strata/engine.hpp"
#include "strata/detail/clock.hpp"
#include "strata/detail/cpu.hpp"
#include "strata/detail/env.hpp"

#include "checks.hpp"
#include "comm.hpp"
#include "select.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "strata/collectives/compile.hpp"
#include "strata/dag/executor.hpp"
#include "strata/dag/reduce.hpp"
#include "strata/detail/log.hpp"
#include "strata/transport/bootstrap.hpp"
#include "strata/transport/progress.hpp"
#include "strata/transport/transport.hpp"

namespace strata {

namespace {
const int in_place_marker = 0;
}  // namespace
const void* const in_place = &in_place_marker;

// ---------------------------------------------------------------- options
namespace {

/// Flag scans between two transport polls of a waiter's spin (Engine::Engine).
constexpr int kFlagRounds = 8;

/// STRATA_WAITER_BLOCK: transport (default) | cv. Where a waiter sleeps after
/// its spin when progress servers run (FutureContext::block).
bool waiter_blocks_on_transport() {
  const char* v = strata::detail::env::get("STRATA_WAITER_BLOCK");
  if (v == nullptr || std::string(v) == "transport") return true;
  if (std::string(v) == "cv") return false;
  throw Error(Errc::invalid_argument, std::string("STRATA_WAITER_BLOCK='") + v + "': expected transport or cv");
}

long env_long(const char* name, long def, long lo, long hi) {
  const char* v = strata::detail::env::get(name);
  if (v == nullptr) return def;
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi)
    throw Error(Errc::invalid_argument, std::string(name) + "='" + v + "' is not an integer in [" + std::to_string(lo) +
                                            ", " + std::to_string(hi) + "]");
  return x;
}

}  // namespace

EngineOptions EngineOptions::from_environment() {
  EngineOptions o;
  o.progress_threads = static_cast<int>(env_long("STRATA_PROGRESS_THREADS", o.progress_threads, 0, 64));
  o.worker_threads = static_cast<int>(env_long("STRATA_THREADS", o.worker_threads, 0, 4096));
  o.slot_bytes =
      static_cast<std::size_t>(env_long("STRATA_SLOT_BYTES", static_cast<long>(o.slot_bytes), 4096, 1L << 32));
  o.credits = static_cast<int>(env_long("STRATA_CREDITS", o.credits, 1, 64));
  if ((o.credits & (o.credits - 1)) != 0)
    throw Error(Errc::invalid_argument, "STRATA_CREDITS='" + std::to_string(o.credits) +
                                            "' is not a power of two in [1, 64] (1, 2, 4, 8, 16, 32 or 64)");
  o.check = env_long("STRATA_CHECK", 0, 0, 1) == 1;
  o.inline_bytes =
      static_cast<std::size_t>(env_long("STRATA_INLINE_BYTES", static_cast<long>(o.inline_bytes), 0, 1L << 30));
  o.plan_cache_bytes =
      static_cast<std::size_t>(env_long("STRATA_PLAN_CACHE_BYTES", static_cast<long>(o.plan_cache_bytes), 0, 1L << 48));
  o.window_budget =
      static_cast<std::size_t>(env_long("STRATA_WINDOW_BUDGET", static_cast<long>(o.window_budget), 0, 1L << 48));
  return o;
}

std::size_t size_of(Datatype t) noexcept {
  switch (t) {
    case Datatype::int8:
    case Datatype::uint8:
      return 1;
    case Datatype::int16:
    case Datatype::uint16:
      return 2;
    case Datatype::int32:
    case Datatype::uint32:
    case Datatype::float32:
      return 4;
    case Datatype::int64:
    case Datatype::uint64:
    case Datatype::float64:
      return 8;
  }
  return 1;
}

const char* to_string(Datatype t) noexcept {
  static const char* const names[] = {"int8",   "int16",  "int32",  "int64",   "uint8",
                                      "uint16", "uint32", "uint64", "float32", "float64"};
  const auto i = static_cast<std::size_t>(t);
  return i < 10 ? names[i] : "?";
}

const char* to_string(Op op) noexcept {
  static const char* const names[] = {"sum", "prod", "min", "max", "band", "bor", "bxor"};
  const auto i = static_cast<std::size_t>(op);
  return i < 7 ? names[i] : "?";
}

// ---------------------------------------------------------------- argument checks and algorithm choice
namespace {

using namespace detail;  // NOLINT: argument checks and algorithm choice (checks.hpp, select.hpp)

// Exchanges fixed-size blobs over a communicator with an allreduce (each rank
// fills its own block, zeros elsewhere, bxor): used for split/dup metadata.
std::vector<std::uint64_t> exchange_words(Communicator& comm, const std::vector<std::uint64_t>& mine) {
  const std::size_t w = mine.size();
  const auto n = static_cast<std::size_t>(comm.size());
  std::vector<std::uint64_t> send(w * n, 0), recv(w * n, 0);
  std::copy(mine.begin(), mine.end(),
            send.begin() + static_cast<std::ptrdiff_t>(w * static_cast<std::size_t>(comm.rank())));
  CollOptions o;
  o.algorithm = "tree";
  comm.allreduce(send.data(), recv.data(), w * n, Datatype::uint64, Op::bxor, o).get();
  return recv;
}

}  // namespace

// ---------------------------------------------------------------- Communicator
int Communicator::rank() const { return impl_ ? impl_->rank() : -1; }
int Communicator::size() const { return impl_ ? impl_->size() : 0; }
int Communicator::world_rank(int r) const {
  if (!impl_ || r < 0 || r >= impl_->size())
    throw Error(Errc::invalid_argument,
                "Communicator::world_rank: argument 'r' = " + std::to_string(r) + " out of range");
  return impl_->group.world[static_cast<std::size_t>(r)];
}
std::uint16_t Communicator::id() const { return impl_ ? impl_->id : 0; }

namespace detail {
// Allreduce algorithm names (engine/src/api_symmetric.cpp).
coll::Algorithm resolve_allreduce(const CollOptions& o, const CommImpl& impl, const dag::UserReduce* user_op,
                                  std::uint64_t bytes);
}  // namespace detail

namespace {

// A checked call, ready to submit (one-shot) or to keep (persistent plan).
struct Prepared {
  coll::Call call;
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t recv_bytes = 0;  // this rank's receive buffer (direct-mode registration)
};

Prepared prep_barrier(const std::shared_ptr<detail::CommImpl>& impl, const CollOptions& opts) {
  need(impl, "barrier");
  Prepared p;
  p.call.kind = coll::Kind::barrier;
  p.call.checked = true;  // no arguments
  p.call.algo = choose(p.call.kind, opts, impl->rank());
  apply_sync(p.call, opts);
  return p;
}

// The argument checks of broadcast (throw naming the argument and the rank).
void check_broadcast(const std::shared_ptr<detail::CommImpl>& impl, const void* buf, std::size_t count, Datatype type,
                     int root) {
  const char* n = "broadcast";
  need(impl, n);
  coll::check_count(site(n, *impl), count, size_of(type));
  coll::check_root(site(n, *impl), root);
  check_buffer(n, *impl, "buf", buf, count * size_of(type));
}

// The call of a broadcast; @p checked: the caller ran check_broadcast() already.
Prepared prep_broadcast(const std::shared_ptr<detail::CommImpl>& impl, void* buf, std::size_t count, Datatype type,
                        int root, const CollOptions& opts, bool checked = false) {
  if (!checked) check_broadcast(impl, buf, count, type, root);
  Prepared p;
  p.call.kind = coll::Kind::broadcast;
  p.call.checked = true;
  p.call.count = count;
  p.call.dtype = detail::to_dag(type);
  p.call.root = root;
  apply_sync(p.call, opts);
  p.call.algo = choose(p.call.kind, opts, impl->rank());
  const bool is_root = impl->rank() == root;
  p.send = is_root ? buf : nullptr;
  p.recv = is_root ? nullptr : buf;
  p.recv_bytes = is_root ? 0 : count * size_of(type);
  return p;
}

// The argument checks of reduce / allreduce (throw naming the argument and the rank).
void check_reduce(const std::shared_ptr<detail::CommImpl>& impl, bool all, const void* send, const void* recv,
                  std::size_t count, std::size_t esize, int root) {
  const char* n = all ? "allreduce" : "reduce";
  need(impl, n);
  coll::check_count(site(n, *impl), count, esize);
  if (!all) coll::check_root(site(n, *impl), root);
  const bool receives = all || impl->rank() == root;
  const bool inplace = send == in_place;
  if (inplace && !receives) bad(n, *impl, "argument 'send' is strata::in_place on a rank that is not the root");
  if (!inplace) check_buffer(n, *impl, "send", send, count * esize);
  if (receives) check_buffer(n, *impl, "recv", recv, count * esize);
  if (!inplace && receives) check_overlap(n, *impl, send, count * esize, recv, count * esize);
}

// The call of a reduce / allreduce; @p checked: the caller ran check_reduce() already.
Prepared prep_reduce(const std::shared_ptr<detail::CommImpl>& impl, bool all, const void* send, void* recv,
                     std::size_t count, dag::DataType dt, dag::ReduceOp op, std::shared_ptr<const dag::UserReduce> u,
                     std::size_t esize, int root, const CollOptions& opts, bool checked = false) {
  const char* n = all ? "allreduce" : "reduce";
  if (!checked) check_reduce(impl, all, send, recv, count, esize, root);
  const bool receives = all || impl->rank() == root;
  const bool inplace = send == in_place;
  Prepared p;
  coll::Call& c = p.call;
  c.kind = all ? coll::Kind::allreduce : coll::Kind::reduce;
  c.count = count;
  c.dtype = dt;
  c.op = op;
  c.user_op = std::move(u);
  c.root = all ? 0 : root;
  c.in_place = inplace;
  apply_sync(c, opts);
  c.algo = all ? resolve_allreduce(opts, *impl, c.user_op.get(), static_cast<std::uint64_t>(count) * esize)
               : choose(c.kind, opts, impl->rank());
  if (!c.user_op) coll::check_op(site(n, *impl), op, dt);  // a user op: wrap() checked it
  c.checked = true;
  p.send = inplace ? nullptr : send;
  p.recv = receives ? recv : nullptr;
  p.recv_bytes = receives ? count * esize : 0;
  return p;
}

}  // namespace

namespace detail {
Future<void> submit_words(const std::shared_ptr<CommImpl>& impl, const std::uint64_t* send, std::uint64_t* recv,
                          std::size_t n, Op op, int tag) {
  CollOptions o;
  o.algorithm = "tree";
  o.tag = tag;
  const Prepared p = prep_reduce(impl, true, send, recv, n, dag::DataType::u64, to_dag(op), nullptr, 8, 0, o);
  return impl->submit(p.call, p.send, p.recv, nullptr, /*internal=*/true);
}
}  // namespace detail

Future<void> Communicator::barrier(const CollOptions& opts) {
  if (plain_options(opts)) {
    need(impl_, "barrier");
    const auto sig = detail::CommImpl::PlainSig::make(coll::Kind::barrier, 0, dag::DataType{});
    if (auto f = impl_->submit_plain(sig, nullptr, nullptr)) return std::move(*f);
    const Prepared p = prep_barrier(impl_, opts);
    return impl_->submit(p.call, p.send, p.recv, nullptr, false, &sig);
  }
  const Prepared p = prep_barrier(impl_, opts);
  return impl_->submit(p.call, p.send, p.recv);
}

Future<void> Communicator::broadcast(void* buf, std::size_t count, Datatype type, int root, const CollOptions& opts) {
  if (plain_options(opts)) {
    check_broadcast(impl_, buf, count, type, root);
    const auto sig = detail::CommImpl::PlainSig::make(coll::Kind::broadcast, count, detail::to_dag(type), false,
                                                      dag::ReduceOp{}, root);
    const bool is_root = impl_->rank() == root;
    if (auto f = impl_->submit_plain(sig, is_root ? buf : nullptr, is_root ? nullptr : buf)) return std::move(*f);
    const Prepared p = prep_broadcast(impl_, buf, count, type, root, opts, /*checked=*/true);
    return impl_->submit(p.call, p.send, p.recv, nullptr, false, &sig);
  }
  const Prepared p = prep_broadcast(impl_, buf, count, type, root, opts);
  return impl_->submit(p.call, p.send, p.recv);
}

Future<void> Communicator::reduce(const void* send, void* recv, std::size_t count, Datatype type, Op op, int root,
                                  const CollOptions& opts) {
  const dag::DataType dt = detail::to_dag(type);
  const dag::ReduceOp o = detail::to_dag(op);
  if (plain_options(opts) && dag::reduce_kernel(o, dt) != nullptr) {
    check_reduce(impl_, false, send, recv, count, size_of(type), root);
    const auto sig = detail::CommImpl::PlainSig::make(coll::Kind::reduce, count, dt, send == in_place, o, root);
    const bool receives = impl_->rank() == root;
    if (auto f = impl_->submit_plain(sig, sig.in_place ? nullptr : send, receives ? recv : nullptr))
      return std::move(*f);
    const Prepared p =
        prep_reduce(impl_, false, send, recv, count, dt, o, nullptr, size_of(type), root, opts, /*checked=*/true);
    return impl_->submit(p.call, p.send, p.recv, nullptr, false, &sig);
  }
  const Prepared p = prep_reduce(impl_, false, send, recv, count, dt, o, nullptr, size_of(type), root, opts);
  return impl_->submit(p.call, p.send, p.recv);
}
Future<void> Communicator::reduce(const void* send, void* recv, std::size_t count, const UserOp& op, int root,
                                  const CollOptions& opts) {
  need(impl_, "reduce");
  const Prepared p = prep_reduce(impl_, false, send, recv, count, dag::DataType::u8, dag::ReduceOp::sum,
                                 wrap(op, "reduce", *impl_), op.elem_size, root, opts);
  return impl_->submit(p.call, p.send, p.recv);
}
Future<void> Communicator::allreduce(const void* send, void* recv, std::size_t count, Datatype type, Op op,
                                     const CollOptions& opts) {
  const dag::DataType dt = detail::to_dag(type);
  const dag::ReduceOp o = detail::to_dag(op);
  if (plain_options(opts)) {
    check_reduce(impl_, true, send, recv, count, size_of(type), 0);
    if (dag::reduce_kernel(o, dt) != nullptr) {
      const auto sig = detail::CommImpl::PlainSig::make(coll::Kind::allreduce, count, dt, send == in_place, o);
      if (auto f = impl_->submit_plain(sig, sig.in_place ? nullptr : send, recv)) return std::move(*f);
      const Prepared p =
          prep_reduce(impl_, true, send, recv, count, dt, o, nullptr, size_of(type), 0, opts, /*checked=*/true);
      return impl_->submit(p.call, p.send, p.recv, nullptr, false, &sig);
    }
    // An op the datatype does not define: prep_reduce() refuses it.
    const Prepared p =
        prep_reduce(impl_, true, send, recv, count, dt, o, nullptr, size_of(type), 0, opts, /*checked=*/true);
    return impl_->submit(p.call, p.send, p.recv);
  }
  const Prepared p = prep_reduce(impl_, true, send, recv, count, dt, o, nullptr, size_of(type), 0, opts);
  return impl_->submit(p.call, p.send, p.recv);
}
Future<void> Communicator::allreduce(const void* send, void* recv, std::size_t count, const UserOp& op,
                                     const CollOptions& opts) {
  need(impl_, "allreduce");
  const Prepared p = prep_reduce(impl_, true, send, recv, count, dag::DataType::u8, dag::ReduceOp::sum,
                                 wrap(op, "allreduce", *impl_), op.elem_size, 0, opts);
  return impl_->submit(p.call, p.send, p.recv);
}

// ---------------------------------------------------------------- persistent plans
namespace detail {
struct PlanImpl {
  std::shared_ptr<CommImpl> comm;
  Prepared prep;
  std::shared_ptr<const std::vector<dag::PeerKey>> peers;  // window keys + receive-buffer keys (direct)
  CommImpl::Persistent persist;                            // the compiled plan of each window slot (start_persistent)
  ~PlanImpl() {
    if (prep.call.direct && prep.recv && comm && comm->core->transport)
      comm->core->transport->deregister_memory(prep.recv, prep.recv_bytes);
  }
};
}  // namespace detail

namespace {

// Collective: registers this rank's receive buffer and exchanges the keys
// (direct mode), so every start() writes straight into the receivers' buffers.
// Direct mode only from the tuning table's persistent_direct_min_bytes (the
// same on every member: the tables agree at start-up, the sizes are the call's).
Plan make_plan(const std::shared_ptr<detail::CommImpl>& impl, Prepared prep, bool direct) {
  auto pi = std::make_shared<detail::PlanImpl>();
  pi->comm = impl;
  const std::uint64_t from = impl->core->tuning->persistent_direct_min_bytes;
  const std::uint64_t bytes = std::uint64_t{prep.call.count} * dag::datatype_size(prep.call.dtype);
  direct = direct && from != 0 && bytes >= from;
  detail::logger().debug("persistent {} plan of {} bytes on comm {}: {}", coll::to_string(prep.call.kind), bytes,
                         impl->id, direct ? "direct mode" : "window path");
  if (direct) {
    transport::RemoteKey key{};
    if (prep.recv && prep.recv_bytes > 0)
      throw_if_error(impl->core->transport->register_memory(prep.recv, prep.recv_bytes, &key));
    std::vector<std::uint64_t> kw(sizeof(transport::RemoteKey) / 8);
    std::memcpy(kw.data(), &key, sizeof key);
    Communicator self(impl);
    const auto all = exchange_words(self, kw);
    auto peers = std::make_shared<std::vector<dag::PeerKey>>(impl->peers);
    for (int r = 0; r < impl->size(); ++r) {
      dag::PeerKey pk;
      pk.rank = impl->group.world[static_cast<std::size_t>(r)];
      pk.id = 1;
      std::memcpy(static_cast<void*>(&pk.key), all.data() + static_cast<std::size_t>(r) * kw.size(), sizeof pk.key);
      peers->push_back(pk);
    }
    pi->peers = std::move(peers);
    // Its key table never changes: a stamp of its own lets a start reuse the
    // resolved bindings of its last instance (Bindings::stamp; unique per
    // process, as the communicators' serials are).
    pi->persist.stamp = impl->bind_stamp != 0 ? detail::next_comm_serial() : 0;
    prep.call.direct = true;
  }
  pi->prep = std::move(prep);
  return Plan(pi);
}

}  // namespace

Future<void> Plan::start() {
  if (!impl_) throw Error(Errc::invalid_argument, "Plan::start: invalid (default-constructed) plan");
  detail::PlanImpl& pi = *impl_;
  // Checked and resolved when the plan was made: from the second start in
  // each window slot, straight to the remembered plan (docs/algorithms.md,
  // "Persistent plans"). A tagged plan goes through its lane (submit).
  // (Calls with on_block / compute callables bind them per start: submit.)
  if (pi.prep.call.tag < 0 && !pi.prep.call.on_block && !pi.prep.call.compute)
    if (auto f = pi.comm->start_persistent(pi.persist, pi.prep.call.kind, pi.prep.call.count, pi.prep.send,
                                           pi.prep.recv, pi.peers.get()))
      return std::move(*f);
  return pi.comm->submit(pi.prep.call, pi.prep.send, pi.prep.recv, pi.peers, false, nullptr,
                         pi.prep.call.tag < 0 ? &pi.persist : nullptr);
}

Plan Communicator::plan(const std::function<Future<void>(Communicator&)>& post) {
  need(impl_, "plan");
  if (!post)
    throw Error(Errc::invalid_argument, "plan on rank " + std::to_string(impl_->rank()) + ": argument 'post' is empty");
  detail::Capture cap;
  struct Scope {
    detail::Capture* saved = detail::tls_capture;
    explicit Scope(detail::Capture* c) { detail::tls_capture = c; }
    ~Scope() { detail::tls_capture = saved; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
  };
  {
    Scope scope(&cap);
    Communicator self(impl_);
    (void)post(self);  // checks every argument and resolves the algorithm, as the one-shot call does
  }
  if (cap.count != 1 || cap.comm != impl_.get())
    throw Error(Errc::invalid_argument,
                "plan on rank " + std::to_string(impl_->rank()) + " (comm " + std::to_string(impl_->id) +
                    "): argument 'post' must post exactly one collective on this communicator (it posted " +
                    std::to_string(cap.count) + (cap.count == 1 ? ", on another communicator)" : ")"));
  auto pi = std::make_shared<detail::PlanImpl>();
  pi->comm = impl_;
  pi->prep.call = std::move(cap.call);
  pi->prep.send = cap.send;
  pi->prep.recv = cap.recv;
  return Plan(pi);
}

Plan Communicator::plan_barrier(const CollOptions& opts) { return make_plan(impl_, prep_barrier(impl_, opts), false); }

Plan Communicator::plan_broadcast(void* buf, std::size_t count, Datatype type, int root, const CollOptions& opts) {
  return make_plan(impl_, prep_broadcast(impl_, buf, count, type, root, opts), true);
}

Plan Communicator::plan_reduce(const void* send, void* recv, std::size_t count, Datatype type, Op op, int root,
                               const CollOptions& opts) {
  return make_plan(impl_,
                   prep_reduce(impl_, false, send, recv, count, detail::to_dag(type), detail::to_dag(op), nullptr,
                               size_of(type), root, opts),
                   false);
}

Plan Communicator::plan_allreduce(const void* send, void* recv, std::size_t count, Datatype type, Op op,
                                  const CollOptions& opts) {
  return make_plan(impl_,
                   prep_reduce(impl_, true, send, recv, count, detail::to_dag(type), detail::to_dag(op), nullptr,
                               size_of(type), 0, opts),
                   true);
}

int Communicator::tags() const { return impl_ && impl_->tag_lane ? impl_->tag_lane->tag_count : 0; }

// ---------------------------------------------------------------- Engine
namespace {
// Loads the tuning table (docs/tuning.md) and agrees on it: plans must be
// compiled from the same decisions on every rank, so when the ranks' tables
// differ (hosts with different files), every rank uses the built-in defaults.
void init_tuning(detail::EngineCore& core) {
  coll::TuningChoice c = coll::load_tuning();  // throws naming the file and field when malformed
  const std::uint64_t h = c.table.hash();
  const auto blobs = core.boot->allgather(&h, sizeof h);
  int differs = -1;
  for (std::size_t r = 0; r < blobs.size() && differs < 0; ++r) {
    std::uint64_t o = 0;
    if (blobs[r].size() != sizeof o)
      throw Error(Errc::bootstrap_error, "engine start-up: rank " + std::to_string(r) + " sent a malformed table hash");
    std::memcpy(&o, blobs[r].data(), sizeof o);
    if (o != h) differs = static_cast<int>(r);
  }
  const bool rank0 = core.boot->rank() == 0;
  if (differs >= 0) {
    if (rank0)
      detail::logger().warn("tuning: ranks 0 and {} have different tables ({}); every rank uses the built-in defaults",
                            differs, c.path.empty() ? "built-in here" : c.path);
    const std::string from = c.path;
    c = coll::TuningChoice{};
    c.origin = "built-in";
    c.note = "the ranks' tables differ (rank " + std::to_string(differs) + "'s is not " +
             (from.empty() ? std::string("the built-in one") : from) + ")";
  } else if (c.path.empty()) {
    if (rank0) detail::logger().info("tuning: built-in defaults ({})", c.note);
  } else {
    detail::logger().debug("tuning: table from {} ({})", c.path, c.origin);
  }
  coll::Tuning table = c.table;
  // STRATA_SINGLE_COPY=always wins over the table's single-copy windows (every
  // rank reads the same job environment; =off is applied per communicator).
  if (strata::detail::env::is("STRATA_SINGLE_COPY", "always")) {
    table.bcast_single_copy_min_bytes = table.sym_single_copy_min_bytes = 0;
    table.bcast_host_single_copy_min_bytes = 0;
    table.bcast_single_copy_max_bytes = table.sym_single_copy_max_bytes = std::uint64_t{1} << 40;
    table.allreduce_single_copy_min_bytes = 0;
    table.rs_single_copy_min_bytes = 0;
    table.rs_single_copy_max_bytes = std::uint64_t{1} << 40;
    table.allreduce_single_copy_max_bytes = std::uint64_t{1} << 40;
  }
  core.tuning = std::make_shared<const coll::Tuning>(table);
  core.tuning_choice = std::move(c);
}

std::shared_ptr<detail::CommImpl> make_world(const std::shared_ptr<detail::EngineCore>& core) {
  auto w = std::make_shared<detail::CommImpl>();
  w->core = core;
  w->id = 0;
  const int n = core->boot->size();
  w->group.rank = core->boot->rank();
  w->group.world_size = n;
  w->group.slot_bytes = core->opts.slot_bytes;
  w->group.credits = core->opts.credits;
  w->group.tuning = core->tuning;
  for (int r = 0; r < n; ++r) {
    w->group.world.push_back(r);
    w->group.host.push_back(core->hier.place(r).host);
    w->group.numa.push_back(core->hier.place(r).numa);
    w->group.package.push_back(core->hier.place(r).package);
  }
  const transport::RemoteKey key = w->open_window();
  const auto blobs = core->boot->allgather(&key, sizeof key);
  std::vector<transport::RemoteKey> keys(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    if (blobs[static_cast<std::size_t>(r)].size() != sizeof(transport::RemoteKey))
      throw Error(Errc::bootstrap_error, "engine start-up: rank " + std::to_string(r) + " sent a malformed window key");
    std::memcpy(&keys[static_cast<std::size_t>(r)], blobs[static_cast<std::size_t>(r)].data(),
                sizeof(transport::RemoteKey));
  }
  w->set_peer_keys(keys);
  w->enable_flags();
  w->seal_bindings();
  {
    std::lock_guard<std::mutex> lk(core->id_mu);
    core->comms.push_back(w);
  }
  return w;
}
}  // namespace

Engine::Engine(EngineOptions opts) : Engine(bootstrap_from_environment(), opts) {}

// Over ~80 lines: the engine's start-up sequence, whose order matters (options, transport, executor, agreement).
Engine::Engine(std::unique_ptr<Bootstrap> boot, EngineOptions opts) : core_(std::make_shared<detail::EngineCore>()) {
  if (!boot) throw Error(Errc::invalid_argument, "Engine: argument 'boot' is null");
  {
    // Options given in code get the checks STRATA_* values get (from_environment).
    const std::string at = " (rank " + std::to_string(boot->rank()) + ")";
    auto bad = [&](const char* field, const std::string& value, const char* want) {
      return Error(Errc::invalid_argument,
                   std::string("Engine: argument 'opts.") + field + "' = " + value + ": " + want + at);
    };
    if (opts.progress_threads < 0 || opts.progress_threads > 64)
      throw bad("progress_threads", std::to_string(opts.progress_threads), "expected 0 .. 64");
    if (opts.worker_threads < 0 || opts.worker_threads > 4096)
      throw bad("worker_threads", std::to_string(opts.worker_threads), "expected 0 .. 4096");
    if (opts.slot_bytes < 4096 || opts.slot_bytes > (std::size_t{1} << 32))
      throw bad("slot_bytes", std::to_string(opts.slot_bytes), "expected 4096 .. 2^32");
    // Slot = seq % credits must stay consistent when the 28-bit instance
    // numbers and the 32-bit call numbers wrap: credits must divide 2^28.
    if (opts.credits < 1 || opts.credits > 64 || (opts.credits & (opts.credits - 1)) != 0)
      throw bad("credits", std::to_string(opts.credits), "expected a power of two in [1, 64]");
  }
  core_->opts = opts;
  core_->plans.set_budget(opts.plan_cache_bytes);
  core_->boot = std::move(boot);
  detail::set_log_rank(core_->boot->rank());
  if (opts.log_sink) {
    core_->log_sink.handle =
        detail::add_log_sink([sink = opts.log_sink](spdlog::level::level_enum lvl, const std::string& line) {
          const auto l = static_cast<int>(lvl);
          sink(static_cast<LogLevel>(l < 0 ? 0 : l > 5 ? 5 : l), line);
        });
  }
  {
    const JobInfo& job = core_->boot->job();
    detail::logger().info("bootstrap: {}, rank {} of {} on {} host(s) (host {}, local rank {} of {}), job {}",
                          job.launcher, job.rank, job.size, job.nhosts, job.host, job.local_rank, job.local_size,
                          job.job_id);
  }
  core_->hier = discover_hierarchy(*core_->boot);
  init_tuning(*core_);
  {
    transport::TransportOptions to = transport::TransportOptions::from_environment();
    if (to.provider.empty() && core_->tuning->fabric_prefer_net != 0) to.prefer_provider = "net";
    core_->transport = transport::make_transport(*core_->boot, core_->hier, to);
  }
  detail::logger().info("transport: {}", core_->transport->name());
  dag::ExecutorOptions eo;
  eo.threads = opts.worker_threads;
  eo.arena = opts.arena;  // the application's arena when given (EngineOptions::arena)
  eo.inline_bytes = opts.inline_bytes;
  // The table's start_spins unless STRATA_START_SPINS says otherwise.
  eo.start_spins = static_cast<int>(
      env_long("STRATA_START_SPINS", static_cast<long>(std::min<std::uint64_t>(core_->tuning->start_spins, 1 << 20)), 0,
               1 << 20));
  eo.inline_compute = env_long("STRATA_INLINE_COMPUTE", 1, 0, 1) != 0;
  // The table's inline_bytes replaces the built-in default, never an explicit value.
  if (opts.inline_bytes == EngineOptions{}.inline_bytes && strata::detail::env::get("STRATA_INLINE_BYTES") == nullptr)
    eo.inline_bytes = static_cast<std::size_t>(core_->tuning->inline_bytes);
  // A rank whose flag wait parked while its threads block is woken by a nudge.
  eo.nudge_payload = std::uint64_t{detail::kNudgeComm} << 48;
  eo.nudge_context = detail::nudge_context();
  core_->exec = std::make_unique<dag::Executor>(*core_->transport, eo);
  core_->polled_exec.store(core_->exec.get(), std::memory_order_release);
  // Every progress() call (servers, waiters, inline mode) also completes
  // the executor's memory-flag waits.
  core_->transport->set_progress_hook([core = core_.get()]() -> std::size_t {
    if (dag::Executor* ex = core->polled_exec.load(std::memory_order_acquire)) return ex->poll();
    return 0;
  });
  // Heartbeats (report.cpp): every rank counts as heard at start.
  core_->heard.reset(new std::atomic<std::int64_t>[static_cast<std::size_t>(std::max(1, core_->boot->size()))]);
  for (int r = 0; r < core_->boot->size(); ++r) core_->heard[static_cast<std::size_t>(r)].store(detail::coarse_ms());
  detail::install_window_routing(*core_);  // window events beside the executor's (window.cpp)
  transport::ProgressOptions po = transport::ProgressOptions::from_environment();
  po.threads = opts.progress_threads;
  bool oversubscribed = false;
  {
    // More ranks on this machine than CPUs: a waiter that polls for long
    // takes the core from another rank's thread (2 hosts x 2 ranks on 2
    // cores: 7 ms per 8 B collective with 2 ms of polling). Poll briefly
    // there, unless STRATA_PROGRESS_WAIT_SPIN says otherwise.
    const JobInfo& job = core_->boot->job();
    const long here = job.launcher == "pmix" || job.launcher == "mpi" ? job.local_size : job.size;
    const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
    const char* set = strata::detail::env::get("STRATA_PROGRESS_WAIT_SPIN");
    oversubscribed = cpus > 0 && here > cpus;
    if ((set == nullptr || *set == '\0') && oversubscribed)
      po.wait_spin = std::min(po.wait_spin, transport::ProgressOptions::kOversubscribedWaitSpin);
  }
  // The executor's flag waits ask their owners for nudges only while a thread
  // of this rank blocks (Executor::park): servers here, waiters below.
  po.on_block = [ex = core_->exec.get()](bool parking) { ex->park(parking); };
  core_->progress = std::make_unique<transport::ProgressServer>(*core_->transport, po);
  auto ctx = std::make_shared<FutureContext>();
  ctx->arena = &core_->exec->arena();
  // The fields are never written again; shutdown clears `live` instead
  // (regression: the destructor wrote them while waiters read them).
  ctx->live = std::shared_ptr<const std::atomic<bool>>(core_->hooks, &core_->hooks->live);
  ctx->park = [ex = core_->exec.get(), g = core_->hooks](bool parking) {
    g->run(
        [&] {
          ex->park(parking);
          return 0;
        },
        0);
  };
  if (po.threads == 0) {
    // Inline mode: the waiter is the only progress. Between two transport
    // polls it scans the executor's flag waits
    // (kFlagRounds - 1 lean calls per full one, as the server-mode spin
    // does), and an idle call is followed by a pause, not a sched_yield:
    // 8 B allreduce on one host 0.51-0.88 us -> 0.31-0.39 (the yield was a
    // system call per idle poll; docs/performance.md, "Across hosts").
    transport::Transport* t = core_->transport.get();
    ctx->progress = [t, g = core_->hooks, core = core_.get()] {
      return g->run(
          [&] {
            thread_local unsigned round = 0;
            dag::Executor* ex = core->polled_exec.load(std::memory_order_acquire);
            // A waiter's thread: compute nodes that become ready in its poll run
            // here after it (ExecutorOptions::inline_compute), not on a worker.
            dag::WaiterScope scope(ex);
            const bool any = ++round % kFlagRounds != 0 ? ex != nullptr && ex->poll() > 0 : t->progress() > 0;
            return scope.run() > 0 || any;
          },
          false);
    };
    ctx->idle_spins =
        oversubscribed || po.wait_spin.count() == 0 ? 0 : static_cast<unsigned>(po.spin_polls) * kFlagRounds;
  } else {
    // Poll for a bounded time before sleeping: an imminent answer costs no
    // thread hand-off (ProgressServer::spin_until re-arms the servers).
    transport::ProgressServer* ps = core_->progress.get();
    // Between two transport polls the waiter looks at the executor's flag
    // waits up to kFlagRounds times: the flag plans (mapped plans, window
    // flags) complete there, and a full transport poll (every backend, every
    // peer's ring) costs several times one flag scan, so a flag set by a peer
    // is seen within one scan, not one transport round (8 B mapped allreduce:
    // docs/algorithms.md, "Per-call cost of the plan path").
    // The spin ends early (the waiter then sleeps) while the executor's long
    // nodes occupy every CPU the rank has (Executor::cores_busy): polling
    // would take the core from them.
    ctx->spin = [ps, g = core_->hooks, core = core_.get()](const std::function<bool()>& done) {
      return g->run(
                 [&] {
                   bool yielded = false;
                   const auto lean = [&] {
                     dag::Executor* ex = core->polled_exec.load(std::memory_order_acquire);
                     for (int i = 0; i < kFlagRounds && ex != nullptr; ++i) {
                       if (done()) return true;
                       if (ex->poll() == 0) strata::detail::cpu_relax();
                     }
                     if (ex != nullptr && ex->cores_busy()) {
                       yielded = true;  // ends spin_until; the caller sleeps
                       return true;
                     }
                     return done();
                   };
                   // This thread waits: compute nodes that become ready in its
                   // polls (an on_block whose block landed) are kept and run
                   // here between two spins, outside the polls (the servers
                   // may run meanwhile), instead of waking the arena's worker
                   // for this core (ExecutorOptions::inline_compute).
                   dag::WaiterScope scope(core->polled_exec.load(std::memory_order_acquire));
                   for (;;) {
                     yielded = false;
                     const bool got =
                         ps->spin_until([&] { return scope.pending() || lean(); }, ps->options().wait_spin);
                     if (scope.pending()) {
                       (void)scope.run();
                       if (done()) return true;
                       continue;
                     }
                     return yielded ? done() : got;
                   }
                 },
                 false) ||
             done();
    };
    // Then sleep on the transport's descriptors (one wake-up when a message
    // arrives, not a server's and then ours); off with STRATA_WAITER_BLOCK=cv.
    if (waiter_blocks_on_transport()) {
      ctx->block = [ps, g = core_->hooks](int fd, std::chrono::microseconds timeout) {
        return g->run([&]() -> long { return ps->block_waiter(fd, timeout); }, -1L);
      };
    }
  }
  core_->fctx = ctx;
  world_ = Communicator(make_world(core_));
  core_->watchdog = detail::start_report_watchdog(*core_);
}

Engine::~Engine() {
  if (!core_) return;
  // No peer may still need this rank's windows: a barrier of every rank,
  // unless one is known dead (its launcher's fence would then wait for it:
  // PMIx under mpirun --enable-recovery never returns), as after a shrink.
  int dead = -1;
  for (int r = 0; r < core_->boot->size() && dead < 0; ++r)
    if (r != core_->boot->rank() && core_->transport && !core_->transport->peer_status(r).is_ok()) dead = r;
  if (dead >= 0) {
    detail::logger().warn("engine shutdown: no barrier (rank {} is dead: {})", dead,
                          core_->transport->peer_status(dead).message());
  } else {
    try {
      core_->boot->barrier();
    } catch (const std::exception& e) {
      detail::logger().warn("engine shutdown: barrier failed: {}", e.what());
    }
  }
  // After the barrier (heartbeats go on while a slower peer finishes), before
  // the executor and the communicators go (the watchdog reads them): joins it.
  core_->watchdog.reset();
  core_->alive.store(false, std::memory_order_release);
  // Servers first (joins them: no transport callback runs after this), then
  // the executor (drains its tasks), then the communicators and the transport.
  core_->progress->stop();
  // Futures may outlive the engine: from now on their continuations run on the
  // process-wide default arena and their waits do not spin on freed servers.
  // Hook calls still inside end first.
  core_->hooks->close();
  // Every peer has entered shutdown (barrier above): what is still posted
  // completes now with Errc::shutdown instead of waiting for peers that will
  // not answer, so the executor's drain is quick.
  core_->transport->shutdown();
  core_->polled_exec.store(nullptr, std::memory_order_release);  // the executor's drain polls its flags itself
  core_->exec.reset();
  // Whatever the executor could not drain (peers already gone) ends with an
  // error: no future of this engine stays pending forever.
  std::vector<std::shared_ptr<detail::CommImpl>> comms;
  {
    std::lock_guard<std::mutex> lk(core_->id_mu);
    for (auto& w : core_->comms)
      if (auto c = w.lock()) comms.push_back(std::move(c));
  }
  for (auto& c : comms)
    c->fail_all(Status(Errc::shutdown, "communicator " + std::to_string(c->id) + " on rank " +
                                           std::to_string(c->rank()) +
                                           ": the engine shut down before the call finished"));
  comms.clear();
  detail::shutdown_windows(*core_);
  world_ = Communicator();
  core_->log_sink.reset();  // the application's sink is not called after the engine is gone
}

int Engine::rank() const noexcept { return core_->boot->rank(); }

bool Engine::progress() {
  return core_->hooks->run(
      [&] {
        bool any = false;
        if (dag::Executor* ex = core_->polled_exec.load(std::memory_order_acquire)) any = ex->poll() > 0;
        if (core_->fctx && core_->fctx->progress) any = core_->transport->progress() > 0 || any;
        return any;
      },
      false);
}
Engine::ProgressStats Engine::progress_stats() const noexcept {
  ProgressStats out;
  if (core_->progress == nullptr) return out;
  const transport::ProgressServer::Stats s = core_->progress->stats();
  out.loops = s.polls;
  out.sleeps = s.blocks;
  out.events = s.events;
  return out;
}
Engine::PlanCacheStats Engine::plan_cache_stats() const { return core_->plans.stats(); }
Engine::WindowStats Engine::window_stats() const noexcept {
  return {static_cast<std::size_t>(core_->window_bytes.load(std::memory_order_relaxed)), core_->opts.window_budget};
}
int Engine::size() const noexcept { return core_->boot->size(); }
Communicator& Engine::world() noexcept { return world_; }
const Hierarchy& Engine::hierarchy() const noexcept { return core_->hier; }
std::string Engine::transport_name() const { return core_->transport->name(); }
const coll::Tuning& Engine::tuning() const noexcept { return *core_->tuning; }
std::string Engine::tuning_source() const {
  const coll::TuningChoice& c = core_->tuning_choice;
  return c.path.empty() ? "built-in defaults (" + c.note + ")" : c.path + " (" + c.origin + ")";
}
std::shared_ptr<const FutureContext> Engine::future_context() const noexcept { return core_->fctx; }

SharedMemory Engine::allocate(std::size_t bytes) {
  const std::string who = "Engine::allocate on rank " + std::to_string(rank());
  if (bytes == 0) throw Error(Errc::invalid_argument, who + ": argument 'bytes' is 0");
  throw_if_error(core_->check_alive("Engine::allocate"));
  // Every other rank of this host maps it (any communicator may pass it).
  std::vector<int> peers;
  const int host = core_->hier.place(rank()).host;
  for (int r = 0; r < size(); ++r)
    if (r != rank() && core_->hier.place(r).host == host) peers.push_back(r);
  std::shared_ptr<transport::SharedRegion> region;
  if (!peers.empty()) region = core_->transport->allocate_shared(bytes, peers);
  if (region) {
    region->notify_peers = true;  // the peers unmap it when it is freed (no lasting pointers there)
    void* p = region->addr;
    return SharedMemory(std::shared_ptr<void>(region, p), p, bytes, true);
  }
  // No same-host peer (or shared memory refused): private, page-aligned, zeroed.
  constexpr std::size_t kPage = 4096;
  const std::size_t len = (bytes + kPage - 1) / kPage * kPage;
  if (len < bytes)
    throw Error(Errc::invalid_argument, who + ": argument 'bytes' is too large (" + std::to_string(bytes) + ")");
  void* p = std::aligned_alloc(kPage, len);
  if (p == nullptr)
    throw Error(Errc::invalid_argument,
                who + ": cannot allocate " + std::to_string(bytes) + " bytes (argument 'bytes')");
  std::memset(p, 0, len);
  return SharedMemory(std::shared_ptr<void>(p, [](void* q) { std::free(q); }), p, bytes, false);
}

}  // namespace strata
