// Plan validation: one slice (validate(const Plan&)) and a set of slices
// (validate(const std::vector<const Plan*>&)).
#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "plan_text.hpp"
#include "strata/dag/plan.hpp"

namespace strata {
namespace dag {

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

// Over ~80 lines: one switch of per-node-kind rules over the same local state (split, it would pass it all around).
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
        if (nd.compute > kBoundCompute &&
            (nd.compute < 0 || static_cast<std::size_t>(nd.compute) >= p.compute_fns().size() ||
             !p.compute_fns()[static_cast<std::size_t>(nd.compute)]))
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

}  // namespace dag
}  // namespace strata
