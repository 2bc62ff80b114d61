// The Chrome-trace writer (trace.hpp): an ExecutorObserver that keeps one
// event buffer per thread and appends them, one JSON object per line, to
// <trace path>.<rank>.json on flush (chrome://tracing, Perfetto,
// strata-trace-merge).
#include <atomic>
#include <fstream>
#include <mutex>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

#include <oneapi/tbb/enumerable_thread_specific.h>

#include "executor_impl.hpp"
#include "trace.hpp"

namespace strata {
namespace dag {
namespace exec {

namespace {

// node: a DAG node ran (or, zero-length, completed); span: an event named by
// the caller (fast-path calls, transport events); flow_start / flow_end: the
// ends of a Chrome trace flow arrow (a signal's arrival -> the node it released).
enum class TraceType : std::uint8_t { node, span, flow_start, flow_end };

struct TraceEvent {
  std::uint64_t start_ns;
  std::uint64_t end_ns;
  std::uint32_t name;  // interned: the plan's name (node) or the event's name
  std::uint32_t seq;
  std::uint32_t node;
  NodeKind kind;
  TraceType type = TraceType::node;
  std::uint32_t cat = 0;    // interned category (span)
  std::uint64_t id = 0;     // flow id (flow_*)
  std::int64_t arg = -1;    // span: peer / source rank (-1: none); node: the peer of a remote or single-copy node
  std::uint64_t bytes = 0;  // node (when it ran): bytes it moved (copy, reduce, put, get, read_peer, write_peer)
};

// Bytes node @p n moves when it runs, and its peer (-1: local): what
// strata-trace-merge --bytes adds up per rank.
std::uint64_t moved_bytes(const Node& n) {
  switch (n.kind) {
    case NodeKind::copy:
    case NodeKind::reduce:
    case NodeKind::get:
    case NodeKind::read_peer:
      return n.dst.len;
    case NodeKind::put:
    case NodeKind::put_with_signal:
    case NodeKind::write_peer:
      return n.src.len;
    default:
      return 0;
  }
}

// JSON string contents: quotes, backslashes and control characters escaped.
void write_escaped(std::ostream& f, const std::string& s) {
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      f << '\\' << ch;
    } else if (c < 0x20) {
      static const char* hex = "0123456789abcdef";
      f << "\\u00" << hex[c >> 4] << hex[c & 15];
    } else {
      f << ch;
    }
  }
}

void write_us(std::ostream& f, std::uint64_t ns) { f << (ns / 1000) << "." << (ns % 1000 / 100); }

class ChromeTrace final : public ExecutorObserver {
 public:
  ChromeTrace(std::string file, int rank) : file_(std::move(file)), rank_(rank) {
    // A new run starts a new file (flushes append to it; so may the application).
    std::ofstream truncate(file_, std::ios::trunc);
    (void)intern("dag");
    cat_transport_ = intern("transport");
    name_signal_ = intern("signal arrived");
    name_completion_ = intern("completion");
  }

  void instance_start(Instance& in) override { in.trace_name = intern(in.plan->name()); }
  void instance_end(const Instance&) override {}
  void node(const Instance& in, NodeId id, std::uint64_t t0) override { record(in, id, t0, true); }
  void transport_completion(const Instance& in, NodeId id, std::uint64_t t) override {
    span(cat_transport_, name_completion_, t, t, in.plan->nodes()[id].peer, in.seq);
    record(in, id, t, false);
  }
  void signal_arrived(const Instance& in, NodeId id, int source, std::uint64_t t) override {
    signal_flow(in, id, source, t);
  }
  void event(const std::string& cat, const std::string& name, std::uint64_t t0, std::uint64_t t1, std::uint32_t seq,
             std::int64_t peer) override {
    span(intern(cat), intern(name), t0, t1, peer, seq);
  }
  void flush() override;

 private:
  void record(const Instance& in, NodeId id, std::uint64_t t0, bool ran);
  void span(std::uint32_t cat, std::uint32_t name, std::uint64_t t0, std::uint64_t t1, std::int64_t arg,
            std::uint32_t seq);
  void signal_flow(const Instance& in, NodeId id, int source, std::uint64_t t0);
  std::uint32_t intern(const std::string& name);

  std::string file_;
  int rank_ = 0;
  std::uint32_t cat_transport_ = 0, name_signal_ = 0, name_completion_ = 0;
  // Flow arrows: the node state a traced signal released -> the arrow's id.
  std::mutex flow_mu_;
  std::unordered_map<const NodeState*, std::uint64_t> flows_;
  std::atomic<std::size_t> nflows_{0};
  std::atomic<std::uint64_t> next_flow_{1};
  tbb::enumerable_thread_specific<std::vector<TraceEvent>> trace_;
  std::mutex names_mu_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, std::uint32_t> name_ids_;
};

void ChromeTrace::record(const Instance& in, NodeId id, std::uint64_t t0, bool ran) {
  auto& buf = trace_.local();
  if (nflows_.load(std::memory_order_acquire) > 0) {
    // The node a signal released: the flow arrow from the signal ends here.
    std::uint64_t flow = 0;
    {
      std::lock_guard<std::mutex> g(flow_mu_);
      auto it = flows_.find(&in.nodes[id]);
      if (it != flows_.end()) {
        flow = it->second;
        flows_.erase(it);
        nflows_.fetch_sub(1, std::memory_order_release);
      }
    }
    if (flow != 0) {
      TraceEvent f{t0, t0, name_signal_, in.seq, id, in.plan->nodes()[id].kind};  // name and cat as the start
      f.type = TraceType::flow_end;
      f.id = flow;
      buf.push_back(f);
    }
  }
  const Node& n = in.plan->nodes()[id];
  TraceEvent e{t0, now_ns(), in.trace_name, in.seq, id, n.kind};
  if (ran) {
    e.bytes = moved_bytes(n);
    const bool local = n.kind == NodeKind::copy || n.kind == NodeKind::reduce;
    if (e.bytes > 0) e.arg = !local ? n.peer : n.src.buf.is_local() ? -1 : n.src.buf.peer;  // mapped reads: the owner
  }
  buf.push_back(e);
}

// An event named by the caller (category and name interned).
void ChromeTrace::span(std::uint32_t cat, std::uint32_t name, std::uint64_t t0, std::uint64_t t1, std::int64_t arg,
                       std::uint32_t seq) {
  TraceEvent e{t0, t1, name, seq, 0, NodeKind::nop};
  e.type = TraceType::span;
  e.cat = cat;
  e.arg = arg;
  trace_.local().push_back(e);
}

// A signal arrived at @p t0 and released @p in's node @p id: a transport
// event on this thread and the start of a flow arrow to that node's event.
void ChromeTrace::signal_flow(const Instance& in, NodeId id, int source, std::uint64_t t0) {
  const std::uint64_t flow = next_flow_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> g(flow_mu_);
    if (flows_.emplace(&in.nodes[id], flow).second) nflows_.fetch_add(1, std::memory_order_release);
  }
  auto& buf = trace_.local();
  TraceEvent s{t0, t0, name_signal_, in.seq, id, NodeKind::signal};
  s.type = TraceType::flow_start;
  s.id = flow;
  buf.push_back(s);
  span(cat_transport_, name_signal_, t0, now_ns(), source, in.seq);
}

std::uint32_t ChromeTrace::intern(const std::string& name) {
  std::lock_guard<std::mutex> g(names_mu_);
  auto it = name_ids_.find(name);
  if (it != name_ids_.end()) return it->second;
  names_.push_back(name);
  return name_ids_[name] = static_cast<std::uint32_t>(names_.size() - 1);
}

// One line of JSON.
void write_event(std::ostream& f, const TraceEvent& e, const std::vector<std::string>& names, int rank,
                 std::size_t tid) {
  f << "{\"name\":\"";
  write_escaped(f, names[e.name]);
  if (e.type == TraceType::node) f << "#" << e.seq << " " << to_string(e.kind);
  f << "\",\"cat\":\"";
  write_escaped(f, e.type == TraceType::span ? names[e.cat] : std::string("dag"));
  f << "\",\"pid\":" << rank << ",\"tid\":" << tid << ",\"ts\":";
  write_us(f, e.start_ns);
  switch (e.type) {
    case TraceType::node:
      f << ",\"ph\":\"X\",\"dur\":";
      write_us(f, e.end_ns - e.start_ns);
      f << ",\"args\":{\"node\":" << e.node;
      if (e.bytes > 0) f << ",\"bytes\":" << e.bytes;
      if (e.bytes > 0 && e.arg >= 0) f << ",\"peer\":" << e.arg;
      f << "}}\n";
      break;
    case TraceType::span:
      f << ",\"ph\":\"X\",\"dur\":";
      write_us(f, e.end_ns - e.start_ns);
      f << ",\"args\":{\"seq\":" << e.seq;
      if (e.arg >= 0) f << ",\"peer\":" << e.arg;
      f << "}}\n";
      break;
    case TraceType::flow_start:
      f << ",\"ph\":\"s\",\"id\":" << e.id << "}\n";
      break;
    case TraceType::flow_end:
      f << ",\"ph\":\"f\",\"bp\":\"e\",\"id\":" << e.id << "}\n";
      break;
  }
}

void ChromeTrace::flush() {
  std::ofstream f(file_, std::ios::app);
  if (!f) return;
  std::lock_guard<std::mutex> g(names_mu_);
  std::size_t tid = 0;
  for (auto& buf : trace_) {
    for (const TraceEvent& e : buf) write_event(f, e, names_, rank_, tid);
    buf.clear();
    ++tid;
  }
}

}  // namespace

std::unique_ptr<ExecutorObserver> make_chrome_trace(const std::string& path, int rank) {
  return std::make_unique<ChromeTrace>(path + "." + std::to_string(rank) + ".json", rank);
}

}  // namespace exec
}  // namespace dag
}  // namespace strata
