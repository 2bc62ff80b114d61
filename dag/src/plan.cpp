// PlanBuilder: the nodes of a plan and its build (validation: plan_validate.cpp;
// DOT export: plan_dot.cpp).
#include <algorithm>
#include <map>
#include <sstream>
#include <utility>

#include "plan_text.hpp"
#include "strata/dag/plan.hpp"

namespace strata {
namespace dag {

const char* to_string(NodeKind k) noexcept {
  switch (k) {
    case NodeKind::nop:
      return "nop";
    case NodeKind::copy:
      return "copy";
    case NodeKind::reduce:
      return "reduce";
    case NodeKind::put:
      return "put";
    case NodeKind::get:
      return "get";
    case NodeKind::put_with_signal:
      return "put_with_signal";
    case NodeKind::signal:
      return "signal";
    case NodeKind::wait:
      return "wait";
    case NodeKind::compute:
      return "compute";
    case NodeKind::flag_wait:
      return "flag_wait";
    case NodeKind::flag_set:
      return "flag_set";
    case NodeKind::publish:
      return "publish";
    case NodeKind::read_peer:
      return "read_peer";
    case NodeKind::write_peer:
      return "write_peer";
  }
  return "?";
}

Plan::~Plan() {
  // Allocated by the executor (instance blocks are 64-byte aligned).
  if (void* b = spare_block_.load(std::memory_order_acquire); b != nullptr)
    ::operator delete(b, std::align_val_t(kInstanceAlign));
}

std::int64_t Plan::buffer_size(const BufferRef& ref) const noexcept {
  for (const auto& d : buffers_)
    if (same_buffer(d.ref, ref)) return static_cast<std::int64_t>(d.size);
  return -1;
}

bool Plan::involves(int p) const noexcept { return std::binary_search(peers_.begin(), peers_.end(), p); }
bool Plan::signals(int p) const noexcept { return std::binary_search(signalled_.begin(), signalled_.end(), p); }

namespace {
// Heap bytes of a string: 0 while it fits the small-string buffer.
std::size_t heap_bytes(const std::string& s) noexcept {
  return s.capacity() > std::string().capacity() ? s.capacity() + 1 : 0;
}
template <class T>
std::size_t heap_bytes(const std::vector<T>& v) noexcept {
  return v.capacity() * sizeof(T);
}
}  // namespace

std::size_t Plan::footprint_bytes() const noexcept {
  std::size_t n = sizeof(Plan) + heap_bytes(name_) + heap_bytes(algorithm_);
  n += heap_bytes(nodes_);
  for (const Node& nd : nodes_)
    n += heap_bytes(nd.grants) + heap_bytes(nd.refresh) + heap_bytes(nd.label) + heap_bytes(nd.deps);
  n += heap_bytes(succ_off_) + heap_bytes(succ_) + heap_bytes(buffers_);
  n += heap_bytes(slot_node_) + heap_bytes(slot_sparse_) + heap_bytes(waits_) + heap_bytes(mapped_reads_) +
       heap_bytes(user_bufs_);
  n += heap_bytes(flag_peers_) + heap_bytes(initial_) + heap_bytes(roots_) + heap_bytes(straight_preds_);
  n += heap_bytes(nbuf_) + heap_bytes(peers_) + heap_bytes(members_) + heap_bytes(signalled_);
  n += heap_bytes(compute_) + heap_bytes(user_ops_);
  for (const UserReduce& u : user_ops_) n += heap_bytes(u.name);
  return n;
}

NodeId Plan::sparse_wait_node(std::uint32_t slot) const noexcept {
  auto it = std::lower_bound(slot_sparse_.begin(), slot_sparse_.end(), std::make_pair(slot, NodeId{0}));
  return it != slot_sparse_.end() && it->first == slot ? it->second : kNoNode;
}

std::string Plan::describe(NodeId id) const {
  std::ostringstream os;
  os << "plan '" << name_ << "' rank " << rank_ << " node " << id;
  if (id < nodes_.size()) {
    os << " (" << to_string(nodes_[id].kind);
    if (!nodes_[id].label.empty()) os << " '" << nodes_[id].label << "'";
    if (nodes_[id].peer >= 0) os << " peer " << nodes_[id].peer;
    os << ")";
  }
  return os.str();
}

// ------------------------------------------------------------------ builder

PlanBuilder::PlanBuilder(std::string name, int rank, int nranks) : plan_(std::make_shared<Plan>()) {
  plan_->name_ = std::move(name);
  plan_->rank_ = rank;
  plan_->nranks_ = nranks;
}

PlanBuilder& PlanBuilder::algorithm(std::string name) {
  plan_->algorithm_ = std::move(name);
  return *this;
}

const std::string& PlanBuilder::algorithm() const noexcept { return plan_->algorithm_; }

PlanBuilder& PlanBuilder::members(std::vector<int> world_ranks) {
  plan_->members_ = std::move(world_ranks);
  return *this;
}

namespace {
void declare(std::vector<BufferDecl>& v, BufferRef ref, std::uint64_t size) {
  for (auto& d : v)
    if (same_buffer(d.ref, ref)) {
      d.size = size;
      return;
    }
  v.push_back({ref, size});
}
}  // namespace

PlanBuilder& PlanBuilder::input(std::uint32_t id, std::uint64_t size) {
  declare(plan_->buffers_, {BufferKind::input, id, -1}, size);
  return *this;
}
PlanBuilder& PlanBuilder::output(std::uint32_t id, std::uint64_t size) {
  declare(plan_->buffers_, {BufferKind::output, id, -1}, size);
  return *this;
}
PlanBuilder& PlanBuilder::scratch(std::uint32_t id, std::uint64_t size) {
  declare(plan_->buffers_, {BufferKind::scratch, id, -1}, size);
  return *this;
}
PlanBuilder& PlanBuilder::peer_buffer(int rank, std::uint32_t id, std::uint64_t size) {
  declare(plan_->buffers_, {BufferKind::peer, id, rank}, size);
  return *this;
}
std::int32_t PlanBuilder::add_user_op(UserReduce op) {
  plan_->user_ops_.push_back(std::move(op));
  return static_cast<std::int32_t>(plan_->user_ops_.size() - 1);
}

NodeId PlanBuilder::add(Node n) {
  plan_->nodes_.push_back(std::move(n));
  return static_cast<NodeId>(plan_->nodes_.size() - 1);
}

NodeId PlanBuilder::nop(std::vector<NodeId> deps) {
  Node n;
  n.deps = std::move(deps);
  return add(std::move(n));
}
NodeId PlanBuilder::copy(const Region& src, const Region& dst, std::vector<NodeId> deps) {
  Node n;
  n.kind = NodeKind::copy;
  n.src = src;
  n.dst = dst;
  n.deps = std::move(deps);
  return add(std::move(n));
}
PlanBuilder& PlanBuilder::streaming(NodeId id) {
  if (id < plan_->nodes_.size() && plan_->nodes_[id].kind == NodeKind::copy) plan_->nodes_[id].streaming = true;
  return *this;
}
NodeId PlanBuilder::reduce(const Region& a, const Region& b, const Region& dst, ReduceOp op, DataType t,
                           std::vector<NodeId> deps) {
  Node n;
  n.kind = NodeKind::reduce;
  n.src = a;
  n.src2 = b;
  n.dst = dst;
  n.op = op;
  n.dtype = t;
  n.deps = std::move(deps);
  return add(std::move(n));
}
NodeId PlanBuilder::reduce(const Region& a, const Region& b, const Region& dst, std::int32_t user_op,
                           std::vector<NodeId> deps) {
  Node n;
  n.kind = NodeKind::reduce;
  n.src = a;
  n.src2 = b;
  n.dst = dst;
  n.user_op = user_op;
  n.deps = std::move(deps);
  return add(std::move(n));
}
NodeId PlanBuilder::put(int p, const Region& src, const Region& dst, std::vector<NodeId> deps) {
  Node n;
  n.kind = NodeKind::put;
  n.peer = p;
  n.src = src;
  n.dst = dst;
  n.deps = std::move(deps);
  return add(std::move(n));
}
NodeId PlanBuilder::get(int p, const Region& src, const Region& dst, std::vector<NodeId> deps) {
  Node n;
  n.kind = NodeKind::get;
  n.peer = p;
  n.src = src;
  n.dst = dst;
  n.deps = std::move(deps);
  return add(std::move(n));
}
NodeId PlanBuilder::put_with_signal(int p, const Region& src, const Region& dst, std::uint32_t slot,
                                    std::vector<NodeId> deps) {
  Node n;
  n.kind = NodeKind::put_with_signal;
  n.peer = p;
  n.src = src;
  n.dst = dst;
  n.slot = slot;
  n.deps = std::move(deps);
  return add(std::move(n));
}
NodeId PlanBuilder::signal(int p, std::uint32_t slot, std::vector<NodeId> deps) {
  Node n;
  n.kind = NodeKind::signal;
  n.peer = p;
  n.slot = slot;
  n.deps = std::move(deps);
  return add(std::move(n));
}
NodeId PlanBuilder::wait(std::uint32_t slot, std::uint32_t count, std::vector<NodeId> deps, const Region* guards) {
  Node n;
  n.kind = NodeKind::wait;
  n.slot = slot;
  n.count = count;
  if (guards != nullptr) n.src = *guards;
  n.deps = std::move(deps);
  return add(std::move(n));
}
NodeId PlanBuilder::flag_wait(int p, std::uint32_t flag, std::uint32_t lag, std::vector<NodeId> deps, bool granted) {
  Node n;
  n.kind = NodeKind::flag_wait;
  n.peer = p;
  n.slot = flag;
  n.count = lag;
  n.granted = granted;
  n.deps = std::move(deps);
  return add(std::move(n));
}
NodeId PlanBuilder::flag_set(std::uint32_t flag, std::vector<NodeId> deps, std::vector<std::int32_t> grant_to,
                             std::vector<std::uint32_t> refresh) {
  Node n;
  n.kind = NodeKind::flag_set;
  n.slot = flag;
  n.grants = std::move(grant_to);
  n.refresh = std::move(refresh);
  n.deps = std::move(deps);
  return add(std::move(n));
}
NodeId PlanBuilder::publish(std::uint32_t flag, const Region& a, const Region& b, std::vector<NodeId> deps) {
  Node n;
  n.kind = NodeKind::publish;
  n.slot = flag;
  n.src = a;
  n.src2 = b;
  n.deps = std::move(deps);
  return add(std::move(n));
}
NodeId PlanBuilder::read_peer(int peer, std::uint32_t flag, std::uint32_t which, std::uint64_t offset,
                              const Region& dst, std::vector<NodeId> deps) {
  Node n;
  n.kind = NodeKind::read_peer;
  n.peer = peer;
  n.slot = flag;
  n.src = dag::peer(peer, which, offset, dst.len);
  n.dst = dst;
  n.deps = std::move(deps);
  return add(std::move(n));
}
NodeId PlanBuilder::write_peer(int peer, std::uint32_t flag, std::uint32_t which, std::uint64_t offset,
                               const Region& src, std::vector<NodeId> deps) {
  Node n;
  n.kind = NodeKind::write_peer;
  n.peer = peer;
  n.slot = flag;
  n.src = src;
  n.dst = dag::peer(peer, which, offset, src.len);
  n.deps = std::move(deps);
  return add(std::move(n));
}
NodeId PlanBuilder::read_peer_fold(int peer, std::uint32_t flag, std::uint32_t which, std::uint64_t offset,
                                   const Region& dst, ReduceOp op, DataType t, std::vector<NodeId> deps) {
  const NodeId id = read_peer(peer, flag, which, offset, dst, std::move(deps));
  Node& n = plan_->nodes_[id];
  n.fold = true;
  n.op = op;
  n.dtype = t;
  return id;
}
NodeId PlanBuilder::read_peer_fold(int peer, std::uint32_t flag, std::uint32_t which, std::uint64_t offset,
                                   const Region& dst, std::int32_t user_op, std::vector<NodeId> deps) {
  const NodeId id = read_peer(peer, flag, which, offset, dst, std::move(deps));
  Node& n = plan_->nodes_[id];
  n.fold = true;
  n.user_op = user_op;
  return id;
}
NodeId PlanBuilder::compute(ComputeFn fn, const Region& region, std::vector<NodeId> deps) {
  Node n;
  n.kind = NodeKind::compute;
  n.src = region;
  n.compute = static_cast<std::int32_t>(plan_->compute_.size());
  plan_->compute_.push_back(std::move(fn));
  n.deps = std::move(deps);
  return add(std::move(n));
}
NodeId PlanBuilder::compute_bound(std::uint32_t k, const Region& region, std::vector<NodeId> deps) {
  Node n;
  n.kind = NodeKind::compute;
  n.src = region;
  n.compute = kBoundCompute - static_cast<std::int32_t>(k);
  n.deps = std::move(deps);
  return add(std::move(n));
}
namespace {
// The nodes already in @p nodes that write an overlapping part of @p region.
std::vector<NodeId> writers_of(const std::vector<Node>& nodes, const Region& region) {
  std::vector<NodeId> deps;
  for (NodeId i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    const bool writes = ((n.kind == NodeKind::copy || n.kind == NodeKind::reduce || n.kind == NodeKind::get) &&
                         overlaps(n.dst, region)) ||
                        (n.kind == NodeKind::wait && n.src.len > 0 && overlaps(n.src, region));
    if (writes) deps.push_back(i);
  }
  return deps;
}
}  // namespace
NodeId PlanBuilder::on_fragment(const Region& region, ComputeFn fn) {
  return compute(std::move(fn), region, writers_of(plan_->nodes_, region));
}
NodeId PlanBuilder::on_fragment_bound(const Region& region, std::uint32_t k) {
  return compute_bound(k, region, writers_of(plan_->nodes_, region));
}
PlanBuilder& PlanBuilder::depend(NodeId after, NodeId before) {
  if (after < plan_->nodes_.size()) plan_->nodes_[after].deps.push_back(before);
  // an out-of-range `after` is reported by build(): remember it as a bogus node dependency
  else
    extra_peers_.push_back(-1 - static_cast<int>(after));
  return *this;
}
PlanBuilder& PlanBuilder::label(NodeId id, std::string text) {
  if (id < plan_->nodes_.size()) plan_->nodes_[id].label = std::move(text);
  return *this;
}
PlanBuilder& PlanBuilder::relative(NodeId id, std::uint8_t bits) {
  if (id < plan_->nodes_.size())
    plan_->nodes_[id].relative = static_cast<std::uint8_t>(plan_->nodes_[id].relative | bits);
  return *this;
}
PlanBuilder& PlanBuilder::expect_signals_from(int rank) {
  extra_peers_.push_back(rank);
  return *this;
}
PlanBuilder& PlanBuilder::require_output_coverage(bool on) {
  coverage_ = on;
  return *this;
}

// Over ~80 lines: the freeze of a plan: its derived tables are computed in one pass, in order.
Status PlanBuilder::try_build(std::shared_ptr<const Plan>* out) {
  if (!plan_) return {Errc::invalid_argument, "PlanBuilder: build() already called"};
  Plan& p = *plan_;
  for (int e : extra_peers_) {
    if (e < 0)
      return {Errc::invalid_argument, "plan '" + p.name_ + "': depend() on unknown node " + std::to_string(-1 - e)};
    if (e >= p.nranks_)
      return {Errc::invalid_argument, "plan '" + p.name_ + "': expect_signals_from rank " + std::to_string(e) +
                                          " outside [0, " + std::to_string(p.nranks_) + ")"};
  }
  Status st = validate(p, coverage_);
  if (!st) return st;
  // CSR successors, slot table, peers.
  const std::size_t n = p.nodes_.size();
  p.succ_off_.assign(n + 1, 0);
  for (const Node& nd : p.nodes_)
    for (NodeId d : nd.deps) ++p.succ_off_[d + 1];
  for (std::size_t i = 0; i < n; ++i) p.succ_off_[i + 1] += p.succ_off_[i];
  p.succ_.resize(p.succ_off_[n]);
  std::vector<std::uint32_t> fill(p.succ_off_.begin(), p.succ_off_.end() - 1);
  for (NodeId i = 0; i < n; ++i)
    for (NodeId d : p.nodes_[i].deps) p.succ_[fill[d]++] = i;
  auto index_of = [&](const Region& r) -> std::uint32_t {
    if (r.len == 0 && r.offset == 0 && p.buffer_size(r.buf) < 0) return kNoNode;
    for (std::uint32_t j = 0; j < p.buffers_.size(); ++j)
      if (same_buffer(p.buffers_[j].ref, r.buf)) return j;
    return kNoNode;
  };
  p.nbuf_.assign(3 * n, kNoNode);
  for (NodeId i = 0; i < n; ++i) {
    const Node& nd = p.nodes_[i];
    p.nbuf_[3 * i] = index_of(nd.src);
    p.nbuf_[3 * i + 1] = index_of(nd.src2);
    p.nbuf_[3 * i + 2] = index_of(nd.dst);
    if (nd.kind == NodeKind::wait) {
      p.waits_.push_back(i);
      if (nd.slot < Plan::kDenseSlots) {
        if (p.slot_node_.size() <= nd.slot) p.slot_node_.resize(nd.slot + 1, kNoNode);
        p.slot_node_[nd.slot] = i;
      } else {
        p.slot_sparse_.emplace_back(nd.slot, i);
      }
    }
    if (nd.peer >= 0 && nd.peer != p.rank_) p.peers_.push_back(nd.peer);
    if ((nd.kind == NodeKind::put_with_signal || nd.kind == NodeKind::signal) && nd.peer >= 0 && nd.peer != p.rank_)
      p.signalled_.push_back(nd.peer);
    if (nd.kind == NodeKind::flag_wait || nd.kind == NodeKind::flag_set)
      p.flag_words_ = std::max(p.flag_words_, nd.slot + 1);
    for (const std::uint32_t w : nd.refresh) p.flag_words_ = std::max(p.flag_words_, w + 1);
    const bool single = nd.kind == NodeKind::read_peer || nd.kind == NodeKind::write_peer;
    if (nd.kind == NodeKind::publish || single) p.flag_words_ = std::max(p.flag_words_, nd.slot + kPublishWords);
    if (nd.kind == NodeKind::flag_wait || single) p.flag_peers_.push_back(nd.peer);
    if (nd.kind == NodeKind::copy || nd.kind == NodeKind::reduce)
      for (int which = 0; which < 2; ++which) {
        const std::uint32_t j = p.nbuf_[3 * i + static_cast<std::uint32_t>(which)];
        if (j != kNoNode && p.buffers_[j].ref.kind == BufferKind::peer &&
            std::find(p.mapped_reads_.begin(), p.mapped_reads_.end(), j) == p.mapped_reads_.end())
          p.mapped_reads_.push_back(j);
      }
  }
  p.has_compute_ =
      std::any_of(p.nodes_.begin(), p.nodes_.end(), [](const Node& nd) { return nd.kind == NodeKind::compute; });
  for (std::uint32_t j = 0; j < p.buffers_.size(); ++j)
    if (p.buffers_[j].ref.kind == BufferKind::input || p.buffers_[j].ref.kind == BufferKind::output)
      p.user_bufs_.push_back(j);
  std::sort(p.slot_sparse_.begin(), p.slot_sparse_.end());
  std::sort(p.flag_peers_.begin(), p.flag_peers_.end());
  p.flag_peers_.erase(std::unique(p.flag_peers_.begin(), p.flag_peers_.end()), p.flag_peers_.end());
  for (int e : extra_peers_)
    if (e != p.rank_) p.peers_.push_back(e);
  std::sort(p.peers_.begin(), p.peers_.end());
  p.peers_.erase(std::unique(p.peers_.begin(), p.peers_.end()), p.peers_.end());
  std::sort(p.signalled_.begin(), p.signalled_.end());
  p.signalled_.erase(std::unique(p.signalled_.begin(), p.signalled_.end()), p.signalled_.end());
  // What every start needs of each node, in two small arrays (a start then
  // reads no Node: they are large and their lines would be touched per call).
  p.initial_.resize(p.nodes_.size());
  p.roots_.clear();
  for (NodeId i = 0; i < p.nodes_.size(); ++i) {
    const Node& nd = p.nodes_[i];
    const auto sig = nd.kind == NodeKind::wait ? static_cast<std::int32_t>(nd.count) : 0;
    p.initial_[i] = {static_cast<std::int32_t>(nd.deps.size()) + sig, sig};
    if (nd.deps.empty() && nd.kind != NodeKind::wait) p.roots_.push_back(i);
  }
  // Straight plans (Plan::straight_preds).
  bool straight = n > 0 && n <= 64;
  std::uint64_t bytes = 0;
  std::vector<std::uint64_t> preds(straight ? n : 0, 0);
  for (NodeId i = 0; straight && i < n; ++i) {
    const Node& nd = p.nodes_[i];
    switch (nd.kind) {
      case NodeKind::copy:
      case NodeKind::reduce:
      case NodeKind::read_peer:
      case NodeKind::write_peer:
        bytes = std::max<std::uint64_t>(bytes, nd.dst.len);
        break;
      case NodeKind::nop:
      case NodeKind::flag_set:
      case NodeKind::flag_wait:
      case NodeKind::publish:
        break;
      default:
        straight = false;
        break;
    }
    for (NodeId d : nd.deps) {
      if (d >= i) straight = false;
      if (straight) preds[i] |= std::uint64_t{1} << d;
    }
  }
  if (straight) {
    p.straight_preds_ = std::move(preds);
    p.straight_bytes_ = bytes;
  }
  *out = std::move(plan_);
  return Status::ok();
}

std::shared_ptr<const Plan> PlanBuilder::build() {
  std::shared_ptr<const Plan> out;
  throw_if_error(try_build(&out));
  return out;
}

}  // namespace dag
}  // namespace strata
