// DOT export of a plan or a set of slices (to_dot).
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "plan_text.hpp"
#include "strata/dag/plan.hpp"

namespace strata {
namespace dag {

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
