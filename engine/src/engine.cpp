// Engine and Communicator: bootstrap -> hierarchy -> transport -> executor ->
// progress servers, and the per-communicator windows, credits and plan cache.
#include "strata/engine.hpp"

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

long env_long(const char* name, long def, long lo, long hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return def;
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
  o.check = env_long("STRATA_CHECK", 0, 0, 1) == 1;
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

namespace detail {

namespace {

dag::DataType to_dag(Datatype t) {
  switch (t) {
    case Datatype::int8:
      return dag::DataType::i8;
    case Datatype::int16:
      return dag::DataType::i16;
    case Datatype::int32:
      return dag::DataType::i32;
    case Datatype::int64:
      return dag::DataType::i64;
    case Datatype::uint8:
      return dag::DataType::u8;
    case Datatype::uint16:
      return dag::DataType::u16;
    case Datatype::uint32:
      return dag::DataType::u32;
    case Datatype::uint64:
      return dag::DataType::u64;
    case Datatype::float32:
      return dag::DataType::f32;
    case Datatype::float64:
      return dag::DataType::f64;
  }
  return dag::DataType::u8;
}

dag::ReduceOp to_dag(Op op) {
  switch (op) {
    case Op::sum:
      return dag::ReduceOp::sum;
    case Op::prod:
      return dag::ReduceOp::prod;
    case Op::min:
      return dag::ReduceOp::min;
    case Op::max:
      return dag::ReduceOp::max;
    case Op::band:
      return dag::ReduceOp::band;
    case Op::bor:
      return dag::ReduceOp::bor;
    case Op::bxor:
      return dag::ReduceOp::bxor;
  }
  return dag::ReduceOp::sum;
}

// Page-aligned, zeroed window memory.
struct WindowMem {
  void* p = nullptr;
  std::size_t len = 0;
  explicit WindowMem(std::size_t n) : len(n) {
    if (posix_memalign(&p, 4096, n) != 0)
      throw Error(Errc::internal, "cannot allocate a window of " + std::to_string(n) + " bytes");
    std::memset(p, 0, n);
  }
  ~WindowMem() { std::free(p); }
  WindowMem(const WindowMem&) = delete;
  WindowMem& operator=(const WindowMem&) = delete;
};

}  // namespace

// Everything a rank's engine owns; communicators keep it alive.
struct EngineCore {
  EngineOptions opts;
  std::unique_ptr<Bootstrap> boot;
  Hierarchy hier;
  std::unique_ptr<transport::Transport> transport;
  std::unique_ptr<dag::Executor> exec;
  std::unique_ptr<transport::ProgressServer> progress;
  std::shared_ptr<FutureContext> fctx;
  std::atomic<bool> alive{true};
  std::mutex id_mu;
  int next_comm_id = 1;  // 0 is the world

  Status check_alive(const char* what) const {
    if (alive.load(std::memory_order_acquire)) return Status::ok();
    return {Errc::shutdown,
            std::string(what) + " on rank " + std::to_string(boot ? boot->rank() : -1) + ": the engine has shut down"};
  }
};

// One communicator on this rank.
struct CommImpl {
  std::shared_ptr<EngineCore> core;
  std::uint16_t id = 0;
  coll::Group group;
  std::unique_ptr<WindowMem> window;
  std::vector<dag::PeerKey> peers;

  std::mutex mu;
  std::uint32_t next_seq = 0;
  std::vector<bool> slot_busy;
  std::vector<std::deque<std::function<void()>>> pending;
  std::unordered_map<std::string, std::shared_ptr<const dag::Plan>> cache;

  ~CommImpl() {
    if (window && core && core->transport) core->transport->deregister_memory(window->p, window->len);
  }

  int rank() const { return group.rank; }
  int size() const { return group.size(); }

  // Registers the window; returns its key (the caller exchanges keys).
  transport::RemoteKey open_window() {
    const std::size_t bytes = group.slot_bytes * static_cast<std::size_t>(group.credits);
    window = std::make_unique<WindowMem>(bytes);
    transport::RemoteKey key;
    throw_if_error(core->transport->register_memory(window->p, bytes, &key));
    slot_busy.assign(static_cast<std::size_t>(group.credits), false);
    pending.resize(static_cast<std::size_t>(group.credits));
    return key;
  }

  void set_peer_keys(const std::vector<transport::RemoteKey>& keys) {
    peers.clear();
    for (int r = 0; r < size(); ++r) {
      dag::PeerKey pk;
      pk.rank = group.world[static_cast<std::size_t>(r)];
      pk.id = 0;
      pk.key = keys[static_cast<std::size_t>(r)];
      peers.push_back(pk);
    }
  }

  // Frees a slot: starts the next queued instance for it, if any.
  void release(std::size_t slot) {
    std::function<void()> next;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (pending[slot].empty()) {
        slot_busy[slot] = false;
        return;
      }
      next = std::move(pending[slot].front());
      pending[slot].pop_front();
    }
    next();
  }

  std::shared_ptr<const dag::Plan> plan_for(const coll::Call& c, int slot, const std::string& key) {
    if (!key.empty()) {
      std::lock_guard<std::mutex> lk(mu);
      auto it = cache.find(key);
      if (it != cache.end()) return it->second;
    }
    auto plan = coll::compile(group, c, slot);
    if (!key.empty()) {
      std::lock_guard<std::mutex> lk(mu);
      cache.emplace(key, plan);
    }
    return plan;
  }

  // Starts one instance (or queues it behind the instance holding its slot).
  Future<void> submit(const coll::Call& c, const void* send, void* recv) {
    throw_if_error(core->check_alive(coll::to_string(c.kind)));
    std::uint32_t seq = 0;
    {
      std::lock_guard<std::mutex> lk(mu);
      seq = next_seq++;
    }
    const int slot = static_cast<int>(seq % static_cast<std::uint32_t>(group.credits));
    std::string key;
    if (!c.user_op) {
      std::ostringstream k;
      k << static_cast<int>(c.kind) << '/' << c.count << '/' << static_cast<int>(c.dtype) << '/'
        << static_cast<int>(c.op) << '/' << c.root << '/' << c.in_place << c.entry_all << c.exit_all << '/'
        << c.algo.name << c.algo.hierarchical << '/' << c.algo.host.kind << c.algo.host.radix << c.algo.numa.kind
        << c.algo.numa.radix << c.algo.core.kind << c.algo.core.radix << c.algo.single.kind << c.algo.single.radix
        << '/' << c.algo.fragment << '/' << c.algo.halves_threshold << '/' << slot;
      key = k.str();
    }
    auto plan = plan_for(c, slot, key);
    Promise<void> promise(core->fctx);
    Future<void> fut = promise.get_future();
    char* slot_base = static_cast<char*>(window->p) + static_cast<std::size_t>(slot) * group.slot_bytes;
    auto start = [this, plan, send, recv, slot_base, seq, slot, promise]() mutable {
      dag::Bindings b;
      b.inputs = {send};
      b.outputs = {recv, slot_base};
      b.peers = peers;
      const Status st = core->exec->start(plan, b, id, seq, [this, slot, promise](const Status& s) mutable {
        promise.set(s);
        release(static_cast<std::size_t>(slot));
      });
      if (!st.is_ok()) {
        promise.set_error(st);
        release(static_cast<std::size_t>(slot));
      }
    };
    bool run_now = false;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (!slot_busy[static_cast<std::size_t>(slot)]) {
        slot_busy[static_cast<std::size_t>(slot)] = true;
        run_now = true;
      } else {
        pending[static_cast<std::size_t>(slot)].push_back(std::move(start));
      }
    }
    if (run_now) start();
    detail::logger().debug("{} #{} on comm {}: algorithm {} ({} nodes)", coll::to_string(c.kind), seq, id, c.algo.name,
                           plan->size());
    return fut;
  }
};

}  // namespace detail

// ---------------------------------------------------------------- argument checks and algorithm choice
namespace {

using detail::CommImpl;

[[noreturn]] void bad(const char* coll, const CommImpl& c, const std::string& what) {
  throw Error(Errc::invalid_argument, std::string(coll) + " on rank " + std::to_string(c.rank()) + " (comm " +
                                          std::to_string(c.id) + "): " + what);
}

void check_buffer(const char* coll, const CommImpl& c, const char* name, const void* p, std::size_t bytes) {
  if (bytes > 0 && p == nullptr) bad(coll, c, std::string("argument '") + name + "' is null with a nonzero count");
}

void check_count(const char* coll, const CommImpl& c, std::size_t count, std::size_t esize) {
  if (esize != 0 && count > (std::size_t{1} << 40) / esize)
    bad(coll, c, "argument 'count' = " + std::to_string(count) + " is too large (negative or overflowed?)");
}

void check_root(const char* coll, const CommImpl& c, int root) {
  if (root < 0 || root >= c.size())
    bad(coll, c, "argument 'root' = " + std::to_string(root) + " outside [0, " + std::to_string(c.size()) + ")");
}

void check_overlap(const char* coll, const CommImpl& c, const void* a, std::size_t alen, const void* b,
                   std::size_t blen) {
  if (a == nullptr || b == nullptr || alen == 0 || blen == 0) return;
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  const auto y = reinterpret_cast<std::uintptr_t>(b);
  if (x < y + blen && y < x + alen)
    bad(coll, c, "arguments 'send' and 'recv' overlap (use strata::in_place for an in-place call)");
}

coll::Shape parse_shape(const std::string& s, const std::string& what) {
  if (s == "flat") return {coll::Shape::flat, 0};
  if (s == "binary") return {coll::Shape::binary, 0};
  if (s == "chain") return {coll::Shape::knomial, 1};
  if (s == "binomial") return {coll::Shape::knomial, 2};
  char* end = nullptr;
  const long k = std::strtol(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0' || k < 1 || k > 64)
    throw Error(Errc::invalid_argument,
                what + ": tree shape '" + s + "' is not flat|binary|chain|binomial|<radix 1..64>");
  return {coll::Shape::knomial, static_cast<int>(k)};
}

std::string env_or(const std::string& v, const std::string& var) {
  if (!v.empty()) return v;
  const char* e = std::getenv(var.c_str());
  return e ? std::string(e) : std::string();
}

std::string upper(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

// Resolves the algorithm of one call: per-call options, then STRATA_ALGO_<COLL>,
// STRATA_TREE_<COLL>/STRATA_TREE, STRATA_FRAGMENT_<COLL>/STRATA_FRAGMENT, then defaults.
coll::Algorithm choose(coll::Kind kind, const CollOptions& o) {
  const std::string cname = upper(coll::to_string(kind));
  coll::Algorithm a;
  const std::string algo = env_or(o.algorithm, "STRATA_ALGO_" + cname);
  if (kind == coll::Kind::barrier) {
    a.name = "dissemination";
    // Tree algorithm names are accepted (options are often shared between calls).
    if (!algo.empty() && algo != "dissemination" && algo != "tree" && algo != "single")
      throw Error(Errc::invalid_argument, "barrier: algorithm '" + algo + "' unknown (dissemination)");
    return a;
  }
  if (algo.empty() || algo == "tree" || algo == "hierarchical") {
    a.name = "tree";
    a.hierarchical = true;
  } else if (algo == "single" || algo == "flat-tree") {
    a.name = "single";
    a.hierarchical = false;
  } else {
    throw Error(Errc::invalid_argument, std::string(coll::to_string(kind)) + ": algorithm '" + algo +
                                            "' unknown (tree | single); see docs/algorithms.md");
  }
  std::string tree = env_or(o.tree, "STRATA_TREE_" + cname);
  tree = env_or(tree, "STRATA_TREE");
  std::size_t pos = 0;
  while (pos < tree.size()) {
    const std::size_t comma = tree.find(',', pos);
    const std::string item = tree.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const std::size_t colon = item.find(':');
    if (colon == std::string::npos)
      throw Error(Errc::invalid_argument, "tree option '" + tree + "': expected level:shape items");
    const std::string level = item.substr(0, colon);
    const coll::Shape sh = parse_shape(item.substr(colon + 1), "tree option '" + tree + "'");
    if (level == "host")
      a.host = sh;
    else if (level == "numa")
      a.numa = sh;
    else if (level == "core")
      a.core = sh;
    else if (level == "single") {
      a.single = sh;
      a.hierarchical = false;
      a.name = "single";
    } else
      throw Error(Errc::invalid_argument,
                  "tree option '" + tree + "': level '" + level + "' is not host|numa|core|single");
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  std::string frag = env_or(o.fragment, "STRATA_FRAGMENT_" + cname);
  frag = env_or(frag, "STRATA_FRAGMENT");
  if (!frag.empty() && frag != "auto") {
    const std::size_t colon = frag.find(':');
    const std::string mode = frag.substr(0, colon);
    long v = 0;
    if (colon != std::string::npos) {
      char* end = nullptr;
      v = std::strtol(frag.c_str() + colon + 1, &end, 10);
      if (*end != '\0' || v <= 0) throw Error(Errc::invalid_argument, "fragment option '" + frag + "': bad size");
    }
    if (mode == "none") {
      a.fragment = std::size_t{1} << 40;
    } else if (mode == "fixed" && v > 0) {
      a.fragment = static_cast<std::size_t>(v);
    } else if (mode == "halves") {
      a.halves_threshold = v > 0 ? static_cast<std::size_t>(v) : 8192;
    } else {
      throw Error(Errc::invalid_argument,
                  "fragment option '" + frag + "': expected none | fixed:BYTES | halves[:BYTES]");
    }
  }
  return a;
}

void apply_sync(coll::Call& c, const CollOptions& o) {
  c.entry_all = o.sync.entry == SyncMode::all;
  c.exit_all = o.sync.exit == SyncMode::all;
}

std::shared_ptr<const dag::UserReduce> wrap(const UserOp& op, const char* coll, const CommImpl& c) {
  if (!op.fn) bad(coll, c, "argument 'op': user op has no function");
  if (op.elem_size == 0) bad(coll, c, "argument 'op': user op elem_size is 0");
  auto u = std::make_shared<dag::UserReduce>();
  u->fn = op.fn;
  u->elem_size = op.elem_size;
  u->commutative = op.commutative;
  u->name = op.name;
  return u;
}

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

namespace {
void need(const std::shared_ptr<detail::CommImpl>& p, const char* what) {
  if (!p) throw Error(Errc::invalid_argument, std::string(what) + ": invalid communicator handle");
}
}  // namespace

Future<void> Communicator::barrier(const CollOptions& opts) {
  need(impl_, "barrier");
  coll::Call c;
  c.kind = coll::Kind::barrier;
  c.algo = choose(c.kind, opts);
  apply_sync(c, opts);
  return impl_->submit(c, nullptr, nullptr);
}

Future<void> Communicator::broadcast(void* buf, std::size_t count, Datatype type, int root, const CollOptions& opts) {
  need(impl_, "broadcast");
  const char* n = "broadcast";
  check_count(n, *impl_, count, size_of(type));
  check_root(n, *impl_, root);
  check_buffer(n, *impl_, "buf", buf, count * size_of(type));
  coll::Call c;
  c.kind = coll::Kind::broadcast;
  c.count = count;
  c.dtype = detail::to_dag(type);
  c.root = root;
  c.algo = choose(c.kind, opts);
  apply_sync(c, opts);
  const bool is_root = impl_->rank() == root;
  return impl_->submit(c, is_root ? buf : nullptr, is_root ? nullptr : buf);
}

namespace {
Future<void> do_reduce(const std::shared_ptr<detail::CommImpl>& impl, bool all, const void* send, void* recv,
                       std::size_t count, dag::DataType dt, dag::ReduceOp op, std::shared_ptr<const dag::UserReduce> u,
                       std::size_t esize, int root, const CollOptions& opts) {
  const char* n = all ? "allreduce" : "reduce";
  need(impl, n);
  check_count(n, *impl, count, esize);
  if (!all) check_root(n, *impl, root);
  const bool receives = all || impl->rank() == root;
  const bool inplace = send == in_place;
  if (inplace && !receives) bad(n, *impl, "argument 'send' is strata::in_place on a rank that is not the root");
  if (!inplace) check_buffer(n, *impl, "send", send, count * esize);
  if (receives) check_buffer(n, *impl, "recv", recv, count * esize);
  if (!inplace && receives) check_overlap(n, *impl, send, count * esize, recv, count * esize);
  coll::Call c;
  c.kind = all ? coll::Kind::allreduce : coll::Kind::reduce;
  c.count = count;
  c.dtype = dt;
  c.op = op;
  c.user_op = std::move(u);
  c.root = all ? 0 : root;
  c.in_place = inplace;
  c.algo = choose(c.kind, opts);
  apply_sync(c, opts);
  if (!c.user_op && dag::reduce_kernel(op, dt) == nullptr)
    throw Error(Errc::unsupported, std::string(n) + " on rank " + std::to_string(impl->rank()) + ": argument 'op' " +
                                       dag::to_string(op) + " is not defined on " + dag::to_string(dt));
  return impl->submit(c, inplace ? nullptr : send, receives ? recv : nullptr);
}
}  // namespace

Future<void> Communicator::reduce(const void* send, void* recv, std::size_t count, Datatype type, Op op, int root,
                                  const CollOptions& opts) {
  return do_reduce(impl_, false, send, recv, count, detail::to_dag(type), detail::to_dag(op), nullptr, size_of(type),
                   root, opts);
}
Future<void> Communicator::reduce(const void* send, void* recv, std::size_t count, const UserOp& op, int root,
                                  const CollOptions& opts) {
  need(impl_, "reduce");
  return do_reduce(impl_, false, send, recv, count, dag::DataType::u8, dag::ReduceOp::sum, wrap(op, "reduce", *impl_),
                   op.elem_size, root, opts);
}
Future<void> Communicator::allreduce(const void* send, void* recv, std::size_t count, Datatype type, Op op,
                                     const CollOptions& opts) {
  return do_reduce(impl_, true, send, recv, count, detail::to_dag(type), detail::to_dag(op), nullptr, size_of(type), 0,
                   opts);
}
Future<void> Communicator::allreduce(const void* send, void* recv, std::size_t count, const UserOp& op,
                                     const CollOptions& opts) {
  need(impl_, "allreduce");
  return do_reduce(impl_, true, send, recv, count, dag::DataType::u8, dag::ReduceOp::sum, wrap(op, "allreduce", *impl_),
                   op.elem_size, 0, opts);
}

Communicator Communicator::split(int color, int key) const {
  need(impl_, "split");
  detail::EngineCore& core = *impl_->core;
  throw_if_error(core.check_alive("split"));
  int next_id = 0;
  {
    std::lock_guard<std::mutex> lk(core.id_mu);
    next_id = core.next_comm_id;
  }
  Communicator self(impl_);
  // Round 1: (color, key, next id) of every member.
  const auto meta = exchange_words(
      self, {static_cast<std::uint64_t>(static_cast<std::int64_t>(color)),
             static_cast<std::uint64_t>(static_cast<std::int64_t>(key)), static_cast<std::uint64_t>(next_id)});
  const int n = impl_->size();
  int new_id = 0;
  for (int r = 0; r < n; ++r) new_id = std::max(new_id, static_cast<int>(meta[static_cast<std::size_t>(3 * r + 2)]));
  if (new_id > 0xFFFF)
    throw Error(Errc::unsupported, "split on rank " + std::to_string(impl_->rank()) + ": out of communicator ids");
  {
    std::lock_guard<std::mutex> lk(core.id_mu);
    core.next_comm_id = std::max(core.next_comm_id, new_id + 1);
  }
  // Members of my color ordered by (key, parent rank).
  std::vector<std::pair<std::int64_t, int>> mine;
  for (int r = 0; r < n; ++r) {
    const auto col = static_cast<std::int64_t>(meta[static_cast<std::size_t>(3 * r)]);
    if (color >= 0 && col == color)
      mine.emplace_back(static_cast<std::int64_t>(meta[static_cast<std::size_t>(3 * r + 1)]), r);
  }
  std::sort(mine.begin(), mine.end());
  std::shared_ptr<detail::CommImpl> ni;
  transport::RemoteKey my_key{};
  if (color >= 0) {
    ni = std::make_shared<detail::CommImpl>();
    ni->core = impl_->core;
    ni->id = static_cast<std::uint16_t>(new_id);
    ni->group.world_size = impl_->group.world_size;
    ni->group.slot_bytes = impl_->group.slot_bytes;
    ni->group.credits = impl_->group.credits;
    for (std::size_t i = 0; i < mine.size(); ++i) {
      const int pr = mine[i].second;
      if (pr == impl_->rank()) ni->group.rank = static_cast<int>(i);
      ni->group.world.push_back(impl_->group.world[static_cast<std::size_t>(pr)]);
      ni->group.host.push_back(impl_->group.host[static_cast<std::size_t>(pr)]);
      ni->group.numa.push_back(impl_->group.numa[static_cast<std::size_t>(pr)]);
    }
    my_key = ni->open_window();
  }
  // Round 2: window keys (8 words each) of every member of the parent.
  std::vector<std::uint64_t> kw(sizeof(transport::RemoteKey) / 8);
  std::memcpy(kw.data(), &my_key, sizeof my_key);
  const auto keys = exchange_words(self, kw);
  if (!ni) return Communicator();
  std::vector<transport::RemoteKey> mk;
  for (const auto& m : mine) {
    transport::RemoteKey k;
    std::memcpy(static_cast<void*>(&k), keys.data() + static_cast<std::size_t>(m.second) * kw.size(), sizeof k);
    mk.push_back(k);
  }
  ni->set_peer_keys(mk);
  return Communicator(ni);
}

Communicator Communicator::dup() const { return split(0, rank()); }

// ---------------------------------------------------------------- Engine
namespace {
std::shared_ptr<detail::CommImpl> make_world(const std::shared_ptr<detail::EngineCore>& core) {
  auto w = std::make_shared<detail::CommImpl>();
  w->core = core;
  w->id = 0;
  const int n = core->boot->size();
  w->group.rank = core->boot->rank();
  w->group.world_size = n;
  w->group.slot_bytes = core->opts.slot_bytes;
  w->group.credits = core->opts.credits;
  for (int r = 0; r < n; ++r) {
    w->group.world.push_back(r);
    w->group.host.push_back(core->hier.place(r).host);
    w->group.numa.push_back(core->hier.place(r).numa);
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
  return w;
}
}  // namespace

Engine::Engine(EngineOptions opts) : Engine(bootstrap_from_environment(), opts) {}

Engine::Engine(std::unique_ptr<Bootstrap> boot, EngineOptions opts) : core_(std::make_shared<detail::EngineCore>()) {
  if (!boot) throw Error(Errc::invalid_argument, "Engine: argument 'boot' is null");
  core_->opts = opts;
  core_->boot = std::move(boot);
  detail::set_log_rank(core_->boot->rank());
  core_->hier = discover_hierarchy(*core_->boot);
  core_->transport = transport::make_transport(*core_->boot, core_->hier);
  dag::ExecutorOptions eo;
  eo.threads = opts.worker_threads;
  core_->exec = std::make_unique<dag::Executor>(*core_->transport, eo);
  transport::ProgressOptions po = transport::ProgressOptions::from_environment();
  po.threads = opts.progress_threads;
  core_->progress = std::make_unique<transport::ProgressServer>(*core_->transport, po);
  auto ctx = std::make_shared<FutureContext>();
  ctx->arena = &core_->exec->arena();
  if (po.threads == 0) {
    transport::Transport* t = core_->transport.get();
    ctx->progress = [t] { return t->progress() > 0; };
  }
  core_->fctx = ctx;
  world_ = Communicator(make_world(core_));
}

Engine::~Engine() {
  if (!core_) return;
  try {
    core_->boot->barrier();  // no peer may still need this rank's windows
  } catch (const std::exception& e) {
    detail::logger().warn("engine shutdown: barrier failed: {}", e.what());
  }
  core_->alive.store(false, std::memory_order_release);
  world_ = Communicator();
  core_->progress->stop();
  core_->exec.reset();
  core_->transport->shutdown();
}

int Engine::rank() const noexcept { return core_->boot->rank(); }
int Engine::size() const noexcept { return core_->boot->size(); }
Communicator& Engine::world() noexcept { return world_; }
const Hierarchy& Engine::hierarchy() const noexcept { return core_->hier; }
std::string Engine::transport_name() const { return core_->transport->name(); }
std::shared_ptr<const FutureContext> Engine::future_context() const noexcept { return core_->fctx; }

}  // namespace strata
