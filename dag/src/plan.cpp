// PlanBuilder, validation and DOT export.
#include <algorithm>
#include <map>
#include <sstream>
#include <utility>

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

namespace {
const char* to_string(BufferKind k) noexcept {
  switch (k) {
    case BufferKind::input:
      return "in";
    case BufferKind::output:
      return "out";
    case BufferKind::scratch:
      return "scratch";
    case BufferKind::peer:
      return "peer";
  }
  return "?";
}

std::string region_str(const Region& r) {
  std::ostringstream os;
  os << to_string(r.buf.kind);
  if (r.buf.kind == BufferKind::peer) os << r.buf.peer << ":";
  os << r.buf.id << "[" << r.offset << "+" << r.len << "]";
  return os.str();
}

bool same_buffer(const BufferRef& a, const BufferRef& b) {
  return a.kind == b.kind && a.id == b.id && (a.kind != BufferKind::peer || a.peer == b.peer);
}
bool overlaps(const Region& a, const Region& b) {
  return same_buffer(a.buf, b.buf) && a.offset < b.offset + b.len && b.offset < a.offset + a.len;
}
}  // namespace

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
NodeId PlanBuilder::on_fragment(const Region& region, ComputeFn fn) {
  std::vector<NodeId> deps;
  for (NodeId i = 0; i < plan_->nodes_.size(); ++i) {
    const Node& n = plan_->nodes_[i];
    const bool writes = ((n.kind == NodeKind::copy || n.kind == NodeKind::reduce || n.kind == NodeKind::get) &&
                         overlaps(n.dst, region)) ||
                        (n.kind == NodeKind::wait && n.src.len > 0 && overlaps(n.src, region));
    if (writes) deps.push_back(i);
  }
  return compute(std::move(fn), region, std::move(deps));
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

// ------------------------------------------------------------------ validation

namespace {
Status bad(const Plan& p, NodeId id, const std::string& what) {
  return {Errc::invalid_argument, p.describe(id) + ": " + what};
}

Status check_region(const Plan& p, NodeId id, const Region& r, const char* role, bool want_local) {
  if (want_local && !r.buf.is_local())
    return bad(p, id, std::string(role) + " " + region_str(r) + " must be a local buffer");
  if (!want_local && r.buf.is_local())
    return bad(p, id, std::string(role) + " " + region_str(r) + " must be a peer buffer");
  const std::int64_t size = p.buffer_size(r.buf);
  if (size < 0) return bad(p, id, std::string(role) + " " + region_str(r) + " uses an undeclared buffer");
  const auto usize = static_cast<std::uint64_t>(size);
  if (r.offset > usize || r.len > usize - r.offset)
    return bad(p, id,
               std::string(role) + " " + region_str(r) + " exceeds the buffer's " + std::to_string(size) + " bytes");
  return Status::ok();
}

// read_peer / write_peer: whether a dependency is the flag_wait (lag 0) on the peer's publication.
bool waits_for_publication(const std::vector<Node>& nodes, const Node& nd) {
  for (NodeId d : nd.deps)
    if (nodes[d].kind == NodeKind::flag_wait && nodes[d].peer == nd.peer && nodes[d].slot == nd.slot &&
        nodes[d].count == 0)
      return true;
  return false;
}

// A copy / reduce source: local, or a peer region read through a mapping
// (declared, in bounds, and the node waits directly on a flag of that peer).
Status check_source(const Plan& p, NodeId id, const Region& r, const char* role) {
  if (r.buf.is_local()) return check_region(p, id, r, role, true);
  Status st = check_region(p, id, r, role, false);
  if (!st) return st;
  if (r.buf.peer == p.rank()) return bad(p, id, std::string(role) + " " + region_str(r) + " is this rank's own");
  for (NodeId d : p.nodes()[id].deps)
    if (d < p.size() && p.nodes()[d].kind == NodeKind::flag_wait && p.nodes()[d].peer == r.buf.peer &&
        !p.nodes()[d].granted)
      return Status::ok();
  return bad(p, id,
             std::string(role) + " " + region_str(r) + " is read through a mapping but the node does not depend on a " +
                 "flag_wait on rank " + std::to_string(r.buf.peer));
}
}  // namespace

Status validate(const Plan& p, bool require_output_coverage) {
  if (p.nranks() < 1) return {Errc::invalid_argument, "plan '" + p.name() + "': nranks must be >= 1"};
  if (p.rank() < 0 || p.rank() >= p.nranks())
    return {Errc::invalid_argument, "plan '" + p.name() + "': rank " + std::to_string(p.rank()) + " outside [0, " +
                                        std::to_string(p.nranks()) + ")"};
  const auto& nodes = p.nodes();
  const std::size_t n = nodes.size();
  std::vector<NodeId> slot_owner;
  for (NodeId i = 0; i < n; ++i) {
    const Node& nd = nodes[i];
    for (NodeId d : nd.deps) {
      if (d >= n) return bad(p, i, "depends on unknown node " + std::to_string(d));
      if (d == i) return bad(p, i, "depends on itself");
    }
    const bool remote = nd.kind == NodeKind::put || nd.kind == NodeKind::get || nd.kind == NodeKind::put_with_signal ||
                        nd.kind == NodeKind::signal || nd.kind == NodeKind::flag_wait ||
                        nd.kind == NodeKind::read_peer || nd.kind == NodeKind::write_peer;
    if (remote && (nd.peer < 0 || nd.peer >= p.nranks()))
      return bad(p, i, "peer " + std::to_string(nd.peer) + " outside [0, " + std::to_string(p.nranks()) + ")");
    if ((nd.kind == NodeKind::signal || nd.kind == NodeKind::put_with_signal || nd.kind == NodeKind::wait) &&
        nd.slot > kMaxSlot)
      return bad(p, i, "slot " + std::to_string(nd.slot) + " exceeds " + std::to_string(kMaxSlot));
    Status st;
    switch (nd.kind) {
      case NodeKind::nop:
      case NodeKind::signal:
        break;
      case NodeKind::copy:
        if (!(st = check_source(p, i, nd.src, "source"))) return st;
        if (!(st = check_region(p, i, nd.dst, "destination", true))) return st;
        if (nd.src.len != nd.dst.len) return bad(p, i, "source and destination lengths differ");
        break;
      case NodeKind::reduce: {
        if (!(st = check_source(p, i, nd.src, "left operand"))) return st;
        if (!(st = check_source(p, i, nd.src2, "right operand"))) return st;
        if (!(st = check_region(p, i, nd.dst, "destination", true))) return st;
        if (nd.src.len != nd.dst.len || nd.src2.len != nd.dst.len) return bad(p, i, "operand lengths differ");
        std::size_t esize = 0;
        if (nd.user_op >= 0) {
          if (static_cast<std::size_t>(nd.user_op) >= p.user_ops().size() || !p.user_ops()[nd.user_op].fn)
            return bad(p, i, "unknown user reduction " + std::to_string(nd.user_op));
          esize = p.user_ops()[nd.user_op].elem_size;
        } else {
          if (reduce_kernel(nd.op, nd.dtype) == nullptr)
            return {Errc::unsupported, p.describe(i) + ": reduction " + to_string(nd.op) + " on " +
                                           to_string(nd.dtype) + " is not supported"};
          esize = datatype_size(nd.dtype);
        }
        if (esize == 0 || nd.dst.len % esize != 0)
          return bad(p, i,
                     "length " + std::to_string(nd.dst.len) + " is not a multiple of the element size " +
                         std::to_string(esize));
        break;
      }
      case NodeKind::put:
      case NodeKind::put_with_signal:
        if (!(st = check_region(p, i, nd.src, "source", true))) return st;
        if (!(st = check_region(p, i, nd.dst, "destination", false))) return st;
        if (nd.dst.buf.peer != nd.peer)
          return bad(p, i, "destination belongs to rank " + std::to_string(nd.dst.buf.peer));
        if (nd.src.len != nd.dst.len) return bad(p, i, "source and destination lengths differ");
        break;
      case NodeKind::get:
        if (!(st = check_region(p, i, nd.src, "source", false))) return st;
        if (!(st = check_region(p, i, nd.dst, "destination", true))) return st;
        if (nd.src.buf.peer != nd.peer) return bad(p, i, "source belongs to rank " + std::to_string(nd.src.buf.peer));
        if (nd.src.len != nd.dst.len) return bad(p, i, "source and destination lengths differ");
        break;
      case NodeKind::wait:
        if (nd.count == 0) return bad(p, i, "waits for 0 signals");
        if (nd.src.len > 0 && !(st = check_region(p, i, nd.src, "guarded region", true))) return st;
        if (slot_owner.size() <= nd.slot) slot_owner.resize(nd.slot + 1, kNoNode);
        if (slot_owner[nd.slot] != kNoNode)
          return bad(
              p, i,
              "slot " + std::to_string(nd.slot) + " already waited by node " + std::to_string(slot_owner[nd.slot]));
        slot_owner[nd.slot] = i;
        break;
      case NodeKind::flag_wait:
        // Lag 0 waits for the peer's same instance (a publication or a
        // reads-done flag of the single-copy protocol).
        if (nd.peer == p.rank()) return bad(p, i, "waits on its own flag");
        break;
      case NodeKind::publish:
        if (nd.src.len > 0 && !(st = check_region(p, i, nd.src, "first published region", true))) return st;
        if (nd.src2.len > 0 && !(st = check_region(p, i, nd.src2, "second published region", true))) return st;
        break;
      case NodeKind::read_peer: {
        if (nd.peer == p.rank()) return bad(p, i, "reads its own memory");
        if (nd.src.buf.kind != BufferKind::peer || nd.src.buf.peer != nd.peer || nd.src.buf.id > 1)
          return bad(
              p, i,
              "source " + region_str(nd.src) + " is not region 0 or 1 published by rank " + std::to_string(nd.peer));
        if (!(st = check_region(p, i, nd.dst, "destination", true))) return st;
        if (nd.src.len != nd.dst.len) return bad(p, i, "source and destination lengths differ");
        if (!waits_for_publication(nodes, nd))
          return bad(p, i, "does not depend on a flag_wait (lag 0) on the peer's publication");
        if (nd.fold) {
          std::size_t es = 0;
          if (nd.user_op >= 0) {
            if (static_cast<std::size_t>(nd.user_op) >= p.user_ops().size() ||
                !p.user_ops()[static_cast<std::size_t>(nd.user_op)].fn)
              return bad(p, i, "folds with an unknown user operator");
            es = p.user_ops()[static_cast<std::size_t>(nd.user_op)].elem_size;
          } else {
            if (reduce_kernel(nd.op, nd.dtype) == nullptr)
              return bad(
                  p, i,
                  std::string("folds with ") + to_string(nd.op) + ", which is not defined on " + to_string(nd.dtype));
            es = datatype_size(nd.dtype);
          }
          if (es == 0 || nd.dst.len % es != 0)
            return bad(p, i, "folds " + std::to_string(nd.dst.len) + " bytes, not a whole number of elements");
        }
        break;
      }
      case NodeKind::write_peer: {
        if (nd.peer == p.rank()) return bad(p, i, "writes its own memory");
        if (nd.dst.buf.kind != BufferKind::peer || nd.dst.buf.peer != nd.peer || nd.dst.buf.id > 1)
          return bad(p, i,
                     "destination " + region_str(nd.dst) + " is not region 0 or 1 published by rank " +
                         std::to_string(nd.peer));
        if (!(st = check_region(p, i, nd.src, "source", true))) return st;
        if (nd.src.len != nd.dst.len) return bad(p, i, "source and destination lengths differ");
        if (!waits_for_publication(nodes, nd))
          return bad(p, i, "does not depend on a flag_wait (lag 0) on the peer's publication");
        break;
      }
      case NodeKind::flag_set:
        for (std::int32_t r : nd.grants)
          if (r < 0 || r >= p.nranks() || r == p.rank())
            return bad(p, i, "grants its flag to rank " + std::to_string(r));
        break;
      case NodeKind::compute:
        if (nd.compute < 0 || static_cast<std::size_t>(nd.compute) >= p.compute_fns().size() ||
            !p.compute_fns()[nd.compute])
          return bad(p, i, "has no callable");
        if (nd.src.len > 0 && !(st = check_region(p, i, nd.src, "region", true))) return st;
        break;
    }
    if (nd.relative != 0) {
      // Node::relative: only what the executor moves by Bindings::shift.
      std::uint8_t allowed = 0;
      if (nd.kind == NodeKind::copy || nd.kind == NodeKind::reduce) allowed = kRelPeerRegions;
      if (nd.kind == NodeKind::flag_wait) allowed = kRelFlagWord;
      if (nd.kind == NodeKind::flag_set) allowed = nd.refresh.empty() ? kRelFlagWord : kRelFlagWord | kRelRefreshFirst;
      if ((nd.relative & ~allowed) != 0)
        return bad(p, i,
                   "marks relative (bits " + std::to_string(nd.relative) + ") what a " + to_string(nd.kind) +
                       " node cannot move");
    }
    if ((nd.kind == NodeKind::copy || nd.kind == NodeKind::reduce || nd.kind == NodeKind::get ||
         nd.kind == NodeKind::read_peer) &&
        nd.dst.buf.kind == BufferKind::input)
      return bad(p, i, "writes to user input " + region_str(nd.dst));
  }
  // Acyclic (Kahn).
  std::vector<std::uint32_t> indeg(n, 0);
  std::vector<std::vector<NodeId>> succ(n);
  for (NodeId i = 0; i < n; ++i)
    for (NodeId d : nodes[i].deps) {
      ++indeg[i];
      succ[d].push_back(i);
    }
  std::vector<NodeId> stack;
  for (NodeId i = 0; i < n; ++i)
    if (indeg[i] == 0) stack.push_back(i);
  std::size_t seen = 0;
  while (!stack.empty()) {
    const NodeId v = stack.back();
    stack.pop_back();
    ++seen;
    for (NodeId s : succ[v])
      if (--indeg[s] == 0) stack.push_back(s);
  }
  if (seen != n) {
    for (NodeId i = 0; i < n; ++i)
      if (indeg[i] != 0) return bad(p, i, "is on a dependency cycle");
  }
  // Output coverage: local writes and guarded regions.
  if (require_output_coverage) {
    for (const BufferDecl& d : p.buffers()) {
      if (d.ref.kind != BufferKind::output || d.size == 0) continue;
      std::vector<std::pair<std::uint64_t, std::uint64_t>> iv;
      for (const Node& nd : nodes) {
        const Region* w = nullptr;
        if (nd.kind == NodeKind::copy || nd.kind == NodeKind::reduce || nd.kind == NodeKind::get ||
            nd.kind == NodeKind::read_peer)
          w = &nd.dst;
        if (nd.kind == NodeKind::wait && nd.src.len > 0) w = &nd.src;
        if (w != nullptr && same_buffer(w->buf, d.ref)) iv.emplace_back(w->offset, w->offset + w->len);
      }
      std::sort(iv.begin(), iv.end());
      std::uint64_t covered = 0;
      for (const auto& [a, b] : iv) {
        if (a > covered) break;
        covered = std::max(covered, b);
      }
      if (covered < d.size)
        return {Errc::invalid_argument, "plan '" + p.name() + "' rank " + std::to_string(p.rank()) + ": output " +
                                            std::to_string(d.ref.id) + " bytes [" + std::to_string(covered) + ", " +
                                            std::to_string(d.size) +
                                            ") are written by no node (no copy/reduce/get or guarded wait)"};
    }
  }
  return Status::ok();
}

Status validate(const std::vector<const Plan*>& slices) {
  const int n = static_cast<int>(slices.size());
  std::map<std::pair<int, std::uint32_t>, std::vector<std::pair<int, NodeId>>> sent;  // (target, slot) -> senders
  for (int r = 0; r < n; ++r) {
    const Plan* p = slices[static_cast<std::size_t>(r)];
    if (p == nullptr) return {Errc::invalid_argument, "validate: slice " + std::to_string(r) + " is null"};
    if (p->rank() != r || p->nranks() != n)
      return {Errc::invalid_argument, "validate: slice " + std::to_string(r) + " of plan '" + p->name() +
                                          "' says rank " + std::to_string(p->rank()) + " of " +
                                          std::to_string(p->nranks()) + ", expected rank " + std::to_string(r) +
                                          " of " + std::to_string(n)};
    for (NodeId i = 0; i < p->size(); ++i) {
      const Node& nd = p->nodes()[i];
      if (nd.kind == NodeKind::signal || nd.kind == NodeKind::put_with_signal)
        sent[{nd.peer, nd.slot}].emplace_back(r, i);
    }
  }
  for (const auto& [key, senders] : sent) {
    const Plan& tp = *slices[static_cast<std::size_t>(key.first)];
    const NodeId w = tp.wait_node(key.second);
    if (w == kNoNode) {
      const Plan& sp = *slices[static_cast<std::size_t>(senders.front().first)];
      return {Errc::invalid_argument, sp.describe(senders.front().second) + ": signals slot " +
                                          std::to_string(key.second) + " of rank " + std::to_string(key.first) +
                                          ", which has no wait node on that slot"};
    }
    if (tp.nodes()[w].count != senders.size())
      return {Errc::invalid_argument, tp.describe(w) + ": waits for " + std::to_string(tp.nodes()[w].count) +
                                          " signals on slot " + std::to_string(key.second) + " but the slices send " +
                                          std::to_string(senders.size())};
  }
  for (int r = 0; r < n; ++r) {
    const Plan& p = *slices[static_cast<std::size_t>(r)];
    for (NodeId i = 0; i < p.size(); ++i) {
      const Node& nd = p.nodes()[i];
      if (nd.kind == NodeKind::wait && sent.find({r, nd.slot}) == sent.end())
        return {Errc::invalid_argument, p.describe(i) + ": no slice signals slot " + std::to_string(nd.slot)};
    }
  }
  return Status::ok();
}

// ------------------------------------------------------------------ DOT

namespace {
std::string dot_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

void dot_nodes(std::ostream& os, const Plan& p, const std::string& prefix) {
  for (NodeId i = 0; i < p.size(); ++i) {
    const Node& nd = p.nodes()[i];
    std::string text = std::to_string(i) + ": " + to_string(nd.kind);
    if (!nd.label.empty()) text += " " + nd.label;
    switch (nd.kind) {
      case NodeKind::copy:
      case NodeKind::put:
      case NodeKind::get:
      case NodeKind::put_with_signal:
      case NodeKind::read_peer:
        text += "\\n" + region_str(nd.src) + (nd.fold ? " folded into " : " -> ") + region_str(nd.dst);
        break;
      case NodeKind::reduce:
        text += "\\n" + region_str(nd.dst) + " = " + region_str(nd.src) + " " +
                (nd.user_op >= 0 ? p.user_ops()[static_cast<std::size_t>(nd.user_op)].name
                                 : std::string(to_string(nd.op)) + "/" + to_string(nd.dtype)) +
                " " + region_str(nd.src2);
        break;
      default:
        break;
    }
    if (nd.kind == NodeKind::signal || nd.kind == NodeKind::put_with_signal)
      text += "\\nslot " + std::to_string(nd.slot) + " -> rank " + std::to_string(nd.peer);
    if (nd.kind == NodeKind::wait) text += "\\nslot " + std::to_string(nd.slot) + " x" + std::to_string(nd.count);
    if (nd.kind == NodeKind::flag_wait)
      text += "\\nflag " + std::to_string(nd.slot) + " of rank " + std::to_string(nd.peer) + " >= seq-" +
              std::to_string(nd.count) + "+1" + (nd.granted ? " (granted)" : "");
    if (nd.kind == NodeKind::flag_set) {
      text += "\\nflag " + std::to_string(nd.slot) + " = seq+1";
      for (std::int32_t r : nd.grants) text += ", grant -> rank " + std::to_string(r);
    }
    const bool remote = nd.peer >= 0;
    os << "    " << prefix << i << " [label=\"" << dot_escape(text) << "\""
       << (remote ? ", shape=box" : (nd.kind == NodeKind::wait ? ", shape=diamond" : "")) << "];\n";
  }
  for (NodeId i = 0; i < p.size(); ++i)
    for (NodeId d : p.nodes()[i].deps) os << "    " << prefix << d << " -> " << prefix << i << ";\n";
}
}  // namespace

std::string to_dot(const Plan& p) {
  std::ostringstream os;
  os << "digraph \"" << dot_escape(p.name()) << "_r" << p.rank() << "\" {\n  node [fontsize=10];\n";
  dot_nodes(os, p, "n");
  os << "}\n";
  return os.str();
}

std::string to_dot(const std::vector<const Plan*>& slices) {
  std::ostringstream os;
  const std::string name = slices.empty() || slices[0] == nullptr ? "plan" : slices[0]->name();
  os << "digraph \"" << dot_escape(name) << "\" {\n  node [fontsize=10];\n";
  for (std::size_t r = 0; r < slices.size(); ++r) {
    if (slices[r] == nullptr) continue;
    os << "  subgraph cluster_r" << r << " {\n    label=\"rank " << r << "\";\n";
    dot_nodes(os, *slices[r], "r" + std::to_string(r) + "_");
    os << "  }\n";
  }
  for (std::size_t r = 0; r < slices.size(); ++r) {
    if (slices[r] == nullptr) continue;
    const Plan& p = *slices[r];
    for (NodeId i = 0; i < p.size(); ++i) {
      const Node& nd = p.nodes()[i];
      if ((nd.kind != NodeKind::signal && nd.kind != NodeKind::put_with_signal) || nd.peer < 0 ||
          static_cast<std::size_t>(nd.peer) >= slices.size() || slices[static_cast<std::size_t>(nd.peer)] == nullptr)
        continue;
      const NodeId w = slices[static_cast<std::size_t>(nd.peer)]->wait_node(nd.slot);
      if (w == kNoNode) continue;
      os << "  r" << r << "_" << i << " -> r" << nd.peer << "_" << w << " [style=dashed, color=blue];\n";
    }
  }
  os << "}\n";
  return os.str();
}

}  // namespace dag
}  // namespace strata
