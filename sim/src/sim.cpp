// The discrete-event simulator of compiled plans (sim.hpp, docs/simulator.md).
#include "strata/sim/sim.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <queue>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "strata/dag/executor.hpp"

namespace strata::sim {

namespace {

[[noreturn]] void bad(const std::string& what) { throw Error(Errc::invalid_argument, "strata-sim: " + what); }

double parse_double(const std::string& key, const std::string& value) {
  if (value == "inf" || value == "infinite") return 0;  // bandwidths: 0 means infinite
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || end == value.c_str() || *end != '\0' || !std::isfinite(v) || v < 0)
    bad("parameter '" + key + "' = '" + value + "' is not a non-negative number");
  return v;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// Seconds per byte for a bandwidth (0 = infinite).
double per_byte(double bw) { return bw > 0 ? 1.0 / bw : 0.0; }

}  // namespace

// ---------------------------------------------------------------- CostModel
CostModel CostModel::pure_network(double bw, double lat) {
  CostModel c;
  c.nic_bw = bw;
  c.nic_lat = lat;
  c.msg_bytes = 0;
  c.shm_lat = 0;
  c.copy_bw = c.copy_bw_numa = c.copy_bw_package = c.numa_mem_bw = c.reduce_bw = 0;
  c.node_cpu = 0;
  c.progress_service = 0;
  c.workers = 1;
  return c;
}

void CostModel::set(const std::string& key, const std::string& value) {
  const double v = key == "workers" || key == "msg_bytes" ? 0 : parse_double(key, value);
  if (key == "nic_gbit") {
    nic_bw = v * 1e9 / 8;
  } else if (key == "nic_gbs") {
    nic_bw = v * 1e9;
  } else if (key == "nic_lat_us") {
    nic_lat = v * 1e-6;
  } else if (key == "shm_lat_us") {
    shm_lat = v * 1e-6;
  } else if (key == "copy_gbs") {
    copy_bw = v * 1e9;
  } else if (key == "copy_numa_gbs") {
    copy_bw_numa = v * 1e9;
  } else if (key == "copy_package_gbs") {
    copy_bw_package = v * 1e9;
  } else if (key == "numa_mem_gbs") {
    numa_mem_bw = v * 1e9;
  } else if (key == "reduce_gbs") {
    reduce_bw = v * 1e9;
  } else if (key == "handoff_write_gbs") {
    handoff_write_bw = v * 1e9;
  } else if (key == "handoff_read_gbs") {
    handoff_read_bw = v * 1e9;
  } else if (key == "node_us") {
    node_cpu = v * 1e-6;
  } else if (key == "progress_us") {
    progress_service = v * 1e-6;
  } else if (key == "workers" || key == "msg_bytes") {
    char* end = nullptr;
    const long long x = std::strtoll(value.c_str(), &end, 10);
    const long long lo = key == "workers" ? 1 : 0;
    if (value.empty() || *end != '\0' || x < lo || x > (1LL << 20))
      bad("parameter '" + key + "' = '" + value + "' is not an integer in [" + std::to_string(lo) + ", 2^20]");
    if (key == "workers")
      workers = static_cast<int>(x);
    else
      msg_bytes = static_cast<std::uint64_t>(x);
  } else {
    bad("unknown parameter '" + key +
        "' (nic_gbit nic_gbs nic_lat_us msg_bytes shm_lat_us copy_gbs copy_numa_gbs copy_package_gbs numa_mem_gbs "
        "reduce_gbs handoff_write_gbs handoff_read_gbs node_us progress_us workers)");
  }
}

std::string CostModel::describe() const {
  std::ostringstream o;
  auto gbs = [](double bw) { return bw > 0 ? std::to_string(bw / 1e9) : std::string("inf"); };
  o << "nic_gbs = " << gbs(nic_bw) << "\n"
    << "nic_lat_us = " << nic_lat * 1e6 << "\n"
    << "msg_bytes = " << msg_bytes << "\n"
    << "shm_lat_us = " << shm_lat * 1e6 << "\n"
    << "copy_gbs = " << gbs(copy_bw) << "\n"
    << "copy_numa_gbs = " << gbs(copy_bw_numa) << "\n"
    << "copy_package_gbs = " << gbs(copy_bw_package) << "\n"
    << "numa_mem_gbs = " << gbs(numa_mem_bw) << "\n"
    << "reduce_gbs = " << gbs(reduce_bw) << "\n"
    << "handoff_write_gbs = " << handoff_write_bw / 1e9 << "\n"  // 0: unset (copy_gbs)
    << "handoff_read_gbs = " << handoff_read_bw / 1e9 << "\n"
    << "node_us = " << node_cpu * 1e6 << "\n"
    << "progress_us = " << progress_service * 1e6 << "\n"
    << "workers = " << workers << "\n";
  return o.str();
}

// ---------------------------------------------------------------- machine
std::vector<RankPlace> place_ranks(const MachineSpec& m) {
  if (m.hosts < 1) bad("hosts = " + std::to_string(m.hosts) + " must be >= 1");
  if (m.ranks_per_host < 0) bad("ranks_per_host = " + std::to_string(m.ranks_per_host) + " must be >= 0");
  std::unique_ptr<Machine> loaded;
  try {
    loaded = std::make_unique<Machine>(m.topology);
  } catch (const Error& e) {
    bad("topology '" + m.topology + "': " + e.what());
  }
  const Machine& machine = *loaded;
  const int ppn = m.ranks_per_host > 0 ? m.ranks_per_host : machine.num_cores();
  if (static_cast<long long>(ppn) * m.hosts > (1LL << 22))
    bad("hosts x ranks_per_host = " + std::to_string(static_cast<long long>(ppn) * m.hosts) + " ranks is too many");
  std::vector<RankPlace> local(static_cast<std::size_t>(ppn));
  for (int i = 0; i < ppn; ++i) local[static_cast<std::size_t>(i)] = machine.place_local(i);
  std::vector<RankPlace> out;
  out.reserve(static_cast<std::size_t>(ppn) * static_cast<std::size_t>(m.hosts));
  for (int h = 0; h < m.hosts; ++h) {
    for (int i = 0; i < ppn; ++i) {
      RankPlace p = local[static_cast<std::size_t>(i)];
      p.rank = static_cast<int>(out.size());
      p.host = h;
      out.push_back(p);
    }
  }
  return out;
}

void load_machine_file(const std::string& path, MachineSpec* m, CostModel* cost) {
  std::ifstream in(path);
  if (!in) bad("machine file '" + path + "' cannot be read");
  std::string line;
  int no = 0;
  while (std::getline(in, line)) {
    ++no;
    const auto hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    line = trim(line);
    if (line.empty()) continue;
    const auto eq = line.find('=');
    const std::string where = "machine file '" + path + "' line " + std::to_string(no);
    if (eq == std::string::npos) bad(where + ": expected 'key = value', got '" + line + "'");
    const std::string key = trim(line.substr(0, eq));
    const std::string value = trim(line.substr(eq + 1));
    try {
      if (key == "hosts" || key == "ranks_per_host") {
        char* end = nullptr;
        const long x = std::strtol(value.c_str(), &end, 10);
        if (value.empty() || *end != '\0' || x < (key == "hosts" ? 1 : 0) || x > (1L << 20))
          bad("'" + key + "' = '" + value + "' is not a valid count");
        (key == "hosts" ? m->hosts : m->ranks_per_host) = static_cast<int>(x);
      } else if (key == "topology") {
        m->topology = value;
      } else {
        cost->set(key, value);
      }
    } catch (const Error& e) {
      bad(where + ": " + e.what());
    }
  }
}

coll::Group world_group(const std::vector<RankPlace>& places, std::size_t slot_bytes, int credits, bool flags) {
  coll::Group g;
  const int n = static_cast<int>(places.size());
  g.world_size = n;
  g.slot_bytes = slot_bytes;
  g.credits = credits;
  g.flags = flags;
  // As the engine: peers on other hosts read copies of each other's flags
  // (grants; the grant itself travels after the instance, off the critical
  // path, and is not modelled as a message).
  g.grants = flags && credits <= static_cast<int>(dag::kMaxGrantSlots);
  g.world.resize(places.size());
  g.host.resize(places.size());
  g.numa.resize(places.size());
  g.package.resize(places.size());
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    g.world[ur] = r;
    g.host[ur] = places[ur].host;
    g.numa[ur] = places[ur].numa;
    g.package[ur] = places[ur].package;
  }
  return g;
}

// ---------------------------------------------------------------- Result
double Result::max_finish() const { return finish.empty() ? 0 : *std::max_element(finish.begin(), finish.end()); }
double Result::min_finish() const { return finish.empty() ? 0 : *std::min_element(finish.begin(), finish.end()); }
double Result::median_finish() const {
  if (finish.empty()) return 0;
  std::vector<double> v = finish;
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  return v[mid];
}

// ---------------------------------------------------------------- the simulator
namespace {

using dag::NodeKind;
constexpr std::uint32_t kNone = ~std::uint32_t{0};

// A node in compact form (the Plan itself is released after conversion).
struct CNode {
  NodeKind kind = NodeKind::nop;
  std::int32_t peer = -1;
  std::uint32_t slot = 0;
  std::uint32_t count = 0;
  std::uint64_t bytes = 0;
  std::uint32_t ndeps = 0;
  bool from_window = false;  // copy / reduce reading this rank's window (a peer's data: a hand-off)
};

enum class Ev : std::uint8_t {
  done,        // node finished
  net_arrive,  // network message of a put / signal / get request reached the destination NIC
  get_back,    // a get's data reached the requester's NIC
  signal,      // a signal reached the target rank's progress server
  sig_served,  // the target's progress server handed the signal to its wait node
};

struct Event {
  double t;
  std::uint64_t seq;
  std::uint32_t node;
  Ev type;
  bool operator>(const Event& o) const noexcept { return t > o.t || (t == o.t && seq > o.seq); }
};

class Engine {
 public:
  // @p instances copies of every rank's slice; instance i of a rank may start
  // when instance i - gap of the same rank finished (gap = 1: a blocking loop;
  // gap = credits: a nonblocking stream under the engine's window rule).
  Engine(const std::vector<RankPlace>& places, const CostModel& cost, int instances, int gap)
      : places_(places), c_(cost), n_(places.size()), instances_(instances), gap_(gap) {
    const std::size_t n = places.size();
    const std::size_t blocks = n * static_cast<std::size_t>(instances);
    base_.assign(blocks + 1, 0);
    wait_off_.assign(blocks + 1, 0);
    block_left_.assign(blocks, 0);
    block_end_.assign(blocks, -1);
    flag_waiters_.resize(blocks);
    int max_host = 0;
    int max_numa = 0;
    for (const RankPlace& p : places) {
      max_host = std::max(max_host, p.host);
      max_numa = std::max(max_numa, p.numa);
    }
    numa_per_host_ = max_numa + 1;
    nic_tx_.assign(static_cast<std::size_t>(max_host) + 1, 0);
    nic_rx_.assign(static_cast<std::size_t>(max_host) + 1, 0);
    mem_.assign((static_cast<std::size_t>(max_host) + 1) * static_cast<std::size_t>(numa_per_host_), 0);
    prog_.assign(n, 0);
    workers_.assign(n * static_cast<std::size_t>(std::max(1, c_.workers)), 0);
  }

  // Appends rank r's plan for instance `inst` (instances in order, ranks in order within one).
  void add(int r, const dag::Plan& p, int inst = 0) {
    if (p.rank() != r || p.nranks() != static_cast<int>(places_.size()))
      throw Error(Errc::invalid_argument, "strata-sim: plan for rank " + std::to_string(r) + " names rank " +
                                              std::to_string(p.rank()) + " of " + std::to_string(p.nranks()) +
                                              ", the machine has " + std::to_string(places_.size()) + " ranks");
    const std::size_t ur = static_cast<std::size_t>(inst) * n_ + static_cast<std::size_t>(r);
    const auto first = static_cast<std::uint32_t>(nodes_.size());
    if (nodes_.size() + p.size() >= kNone) throw Error(Errc::unsupported, "strata-sim: more than 2^32 nodes");
    base_[ur] = first;
    // The slot's flag word: the one every slice's closing flag_set raises.
    const std::uint32_t close =
        p.size() > 0 && p.node(p.size() - 1).kind == NodeKind::flag_set ? p.node(p.size() - 1).slot : kNone;
    for (dag::NodeId i = 0; i < p.size(); ++i) {
      const dag::Node& nd = p.node(i);
      CNode cn;
      cn.kind = nd.kind;
      cn.peer = nd.peer;
      cn.slot = nd.slot;
      cn.count = nd.count;
      switch (nd.kind) {
        case NodeKind::copy:
        case NodeKind::reduce:
        case NodeKind::put:
        case NodeKind::put_with_signal:
          cn.bytes = nd.src.len;
          // The compilers' window is output 1 (compile_common.hpp, my_win).
          cn.from_window =
              (nd.kind == NodeKind::copy || nd.kind == NodeKind::reduce) &&
              ((nd.src.buf.kind == dag::BufferKind::output && nd.src.buf.id == 1) ||
               (nd.kind == NodeKind::reduce && nd.src2.buf.kind == dag::BufferKind::output && nd.src2.buf.id == 1));
          break;
        case NodeKind::get:
        case NodeKind::read_peer:
        case NodeKind::write_peer:
          cn.bytes = nd.dst.len;
          break;
        default:
          break;
      }
      // A copy or reduction reading a peer's mapped slot or shared buffer: a same-host copy from that peer.
      if ((nd.kind == NodeKind::copy || nd.kind == NodeKind::reduce) && nd.src.buf.kind == dag::BufferKind::peer)
        cn.peer = nd.src.buf.peer;
      if (nd.kind == NodeKind::reduce && nd.src2.buf.kind == dag::BufferKind::peer) cn.peer = nd.src2.buf.peer;
      cn.ndeps = static_cast<std::uint32_t>(nd.deps.size());
      nodes_.push_back(cn);
      succ_off_.push_back(static_cast<std::uint32_t>(succ_.size()));
      for (const dag::NodeId* s = p.succ_begin(i); s != p.succ_end(i); ++s) succ_.push_back(first + *s);
      if (nd.kind == NodeKind::wait) waits_.emplace_back(nd.slot, first + i);
      // flag_wait on the slot's flag word: the peer's instance inst - lag must
      // have finished (its closing flag_set); on another word (a mapped
      // record, a publication, reads done): the peer's flag_set or publish of
      // that word in instance inst - lag (matched in run()).
      if (nd.kind == NodeKind::flag_wait && inst - static_cast<int>(nd.count) >= 0 && nd.peer >= 0 &&
          static_cast<std::size_t>(nd.peer) < n_) {
        const std::size_t pb =
            static_cast<std::size_t>(inst - static_cast<int>(nd.count)) * n_ + static_cast<std::size_t>(nd.peer);
        if (nd.slot == close)
          flag_waiters_[pb].push_back(first + i);
        else
          word_waits_.push_back({first + i, word_key(pb, nd.slot)});
      }
      if ((nd.kind == NodeKind::flag_set || nd.kind == NodeKind::publish) && nd.slot != close)
        setters_.emplace(word_key(ur, nd.slot), first + i);  // the first store of the word releases its waiters
      node_block_.push_back(static_cast<std::uint32_t>(ur));
    }
    base_[ur + 1] = static_cast<std::uint32_t>(nodes_.size());
    block_left_[ur] = static_cast<std::uint32_t>(p.size());
    std::sort(waits_.begin() + static_cast<std::ptrdiff_t>(wait_off_[ur]), waits_.end());
    wait_off_[ur + 1] = waits_.size();
  }

  void run() {
    succ_off_.push_back(static_cast<std::uint32_t>(succ_.size()));
    const std::size_t nn = nodes_.size();
    deps_left_.resize(nn);
    sig_left_.resize(nn);
    dep_time_.assign(nn, 0);
    sig_time_.assign(nn, 0);
    pred_dep_.assign(nn, kNone);
    pred_sig_.assign(nn, kNone);
    ready_.assign(nn, -1);
    start_.assign(nn, -1);
    end_.assign(nn, -1);
    for (std::size_t i = 0; i < nn; ++i) {
      deps_left_[i] = nodes_[i].ndeps;
      sig_left_[i] = nodes_[i].kind == NodeKind::wait ? nodes_[i].count : 0;
      // Roots of a gated instance wait for the instance gap_ before on the same rank.
      if (nodes_[i].ndeps == 0 && node_block_[i] >= static_cast<std::uint32_t>(gap_) * n_) ++deps_left_[i];
    }
    // A word wait follows the peer's store of the word; with none in that
    // instance, the peer's whole instance (as on the slot's flag word).
    for (const auto& [w, key] : word_waits_) {
      const auto it = setters_.find(key);
      if (it != setters_.end())
        word_waiters_[it->second].push_back(w);
      else
        flag_waiters_[static_cast<std::size_t>(key >> 32)].push_back(w);
      if (it != setters_.end()) ++deps_left_[w];
    }
    for (const auto& ws : flag_waiters_)
      for (std::uint32_t w : ws) ++deps_left_[w];
    for (std::uint32_t i = 0; i < nn; ++i)
      if (deps_left_[i] == 0 && sig_left_[i] == 0) dispatch(i, 0, false);
    while (!q_.empty()) {
      const Event e = q_.top();
      q_.pop();
      ++events_;
      handle(e);
    }
    for (std::size_t i = 0; i < nn; ++i) {
      if (end_[i] < 0) {
        const int r = rank_of(static_cast<std::uint32_t>(i));
        throw Error(Errc::internal, "strata-sim: rank " + std::to_string(r) + " instance " +
                                        std::to_string(node_block_[i] / n_) + " node " +
                                        std::to_string(i - base_[node_block_[i]]) + " never completed (" +
                                        std::to_string(deps_left_[i]) + " dependencies and " +
                                        std::to_string(sig_left_[i]) + " signals missing): the plans do not match");
      }
    }
  }

  void results(Result* res, std::size_t steps,
               const std::function<std::string(int, int, dag::NodeId)>& describe) const {
    const std::size_t n = places_.size();
    res->finish.assign(n, 0);
    res->instance_finish.assign(static_cast<std::size_t>(instances_), 0);
    std::uint32_t last = kNone;
    for (std::size_t b = 0; b < block_end_.size(); ++b) {
      res->finish[b % n_] = std::max(res->finish[b % n_], block_end_[b]);
      res->instance_finish[b / n_] = std::max(res->instance_finish[b / n_], block_end_[b]);
      for (std::uint32_t i = base_[b]; i < base_[b + 1]; ++i)
        if (last == kNone || end_[i] > end_[last]) last = i;
    }
    res->nodes = nodes_.size();
    res->events = events_;
    double cap = std::numeric_limits<double>::infinity();  // the signal time when reached through a signal
    for (std::uint32_t g = last; g != kNone && res->critical_path.size() < steps;) {
      PathStep s;
      s.rank = rank_of(g);
      s.instance = static_cast<int>(node_block_[g] / n_);
      s.node = g - base_[node_block_[g]];
      s.kind = nodes_[g].kind;
      s.ready = ready_[g];
      s.start = start_[g];
      s.end = std::min(end_[g], cap);
      s.bytes = nodes_[g].bytes;
      const bool by_signal = pred_sig_[g] != kNone && sig_time_[g] >= dep_time_[g];
      const std::uint32_t next = by_signal ? pred_sig_[g] : pred_dep_[g];
      if (next == kNone)
        s.via = "start";
      else if (by_signal)
        s.via = "signal from rank " + std::to_string(rank_of(next));
      else if (node_block_[next] != node_block_[g])
        s.via = node_block_[next] % n_ == node_block_[g] % n_ ? "instance gate"
                                                              : "flag of rank " + std::to_string(rank_of(next));
      else
        s.via = "dep";
      if (describe) s.what = describe(s.rank, s.instance, s.node);
      cap = by_signal ? s.ready : std::numeric_limits<double>::infinity();
      res->critical_path.push_back(std::move(s));
      g = next;
    }
  }

 private:
  void push(double t, Ev type, std::uint32_t node) { q_.push(Event{t, seq_++, node, type}); }

  [[nodiscard]] const RankPlace& place(std::uint32_t g) const { return places_[static_cast<std::size_t>(rank_of(g))]; }
  [[nodiscard]] std::size_t mem_index(const RankPlace& p) const {
    return static_cast<std::size_t>(p.host) * static_cast<std::size_t>(numa_per_host_) +
           static_cast<std::size_t>(p.numa);
  }

  // Earliest-free worker of rank r (lowest index on ties).
  double* worker(int r) {
    const auto w = static_cast<std::size_t>(std::max(1, c_.workers));
    double* b = &workers_[static_cast<std::size_t>(r) * w];
    return std::min_element(b, b + w);
  }

  // A memcpy / reduction on a worker of the rank: fixed cost + bytes at the
  // stream bandwidth, and `traffic` bytes through each NUMA region's memory
  // (FIFO token bucket of numa_mem_bw, in memcpy bytes: a copy inside one
  // region charges its bytes once, a copy across regions charges each region).
  // Returns the end time.
  double cpu_op(int r, double t, double bw, std::uint64_t bytes, const RankPlace* a, std::uint64_t ta,
                const RankPlace* b, std::uint64_t tb, double* start) {
    double* w = worker(r);
    const double s = std::max(t, *w);
    double end = s + c_.node_cpu + static_cast<double>(bytes) * per_byte(bw);
    const double mpb = per_byte(c_.numa_mem_bw);
    if (mpb > 0) {
      for (auto [p, traffic] : {std::pair<const RankPlace*, std::uint64_t>{a, ta}, {b, tb}}) {
        if (p == nullptr || traffic == 0) continue;
        double& m = mem_[mem_index(*p)];
        const double ms = std::max(s, m);
        m = ms + static_cast<double>(traffic) * mpb;
        end = std::max(end, m);
      }
    }
    *w = end;
    *start = s;
    return end;
  }

  // A hand-off's bandwidth: the slower of the hand-off rate and the plain
  // one (@p plain: the copy or kernel at this size, memory-bound when large);
  // 0 means unset / infinite for either.
  static double handoff(double rate, double plain) {
    if (rate <= 0) return plain;
    return plain > 0 ? std::min(rate, plain) : rate;
  }
  [[nodiscard]] double level_bw(const RankPlace& a, const RankPlace& b) const {
    if (a.numa == b.numa) return c_.copy_bw;
    if (a.package == b.package) return c_.copy_bw_numa;
    return c_.copy_bw_package;
  }

  // Progress server of rank r: FIFO, progress_service per operation.
  double serve(int r, double t) {
    double& p = prog_[static_cast<std::size_t>(r)];
    p = std::max(t, p) + c_.progress_service;
    return p;
  }

  // Sending NIC of host h: returns the transmission start.
  double tx(int h, double t, std::uint64_t wire) {
    double& f = nic_tx_[static_cast<std::size_t>(h)];
    const double s = std::max(t, f);
    f = s + static_cast<double>(wire) * per_byte(c_.nic_bw);
    return s;
  }
  // Receiving NIC of host h, first bit at t: returns the delivery time.
  double rx(int h, double t, std::uint64_t wire) {
    double& f = nic_rx_[static_cast<std::size_t>(h)];
    f = std::max(t, f) + static_cast<double>(wire) * per_byte(c_.nic_bw);
    return f;
  }

  void finish_at(std::uint32_t g, double t) { push(t, Ev::done, g); }

  [[nodiscard]] int rank_of(std::uint32_t g) const { return static_cast<int>(node_block_[g] % n_); }

  // The same-host peer whose memory a local node reads or writes (a mapped
  // slot, a shared buffer, a CMA read / write); null for this rank's own.
  [[nodiscard]] const RankPlace* peer_place(const CNode& nd) const {
    if (nd.kind == NodeKind::flag_wait || nd.peer < 0 || static_cast<std::size_t>(nd.peer) >= places_.size())
      return nullptr;
    return &places_[static_cast<std::size_t>(nd.peer)];
  }
  // A flag word of one rank's instance (block) in setters_ / word_waits_.
  static std::uint64_t word_key(std::size_t block, std::uint32_t word) {
    return static_cast<std::uint64_t>(block) << 32 | word;
  }

  // One dependency of node s was satisfied at t by node g.
  void release(std::uint32_t s, std::uint32_t g, double t) {
    if (t >= dep_time_[s] || pred_dep_[s] == kNone) {
      dep_time_[s] = std::max(dep_time_[s], t);
      pred_dep_[s] = g;
    }
    if (--deps_left_[s] == 0 && sig_left_[s] == 0) dispatch(s, std::max(t, sig_time_[s]), true);
  }

  void dispatch(std::uint32_t g, double t, bool /*from_event*/) {
    ready_[g] = t;
    const CNode& nd = nodes_[g];
    const int r = rank_of(g);
    const RankPlace& me = place(g);
    switch (nd.kind) {
      case NodeKind::nop:
      case NodeKind::wait:
        start_[g] = t;
        finish_at(g, t);
        return;
      case NodeKind::copy:
      case NodeKind::compute:
      case NodeKind::flag_wait:
      case NodeKind::flag_set:
      case NodeKind::publish:
      case NodeKind::read_peer:     // a CMA read: one copy on this rank's core (the engine's single-copy plans)
      case NodeKind::write_peer: {  // a CMA write: the same, the other way
        double s = 0;
        const double bw = nd.from_window ? handoff(c_.handoff_read_bw, c_.copy_bw) : c_.copy_bw;
        const RankPlace* other = peer_place(nd);
        // Out of (or into) a same-host peer's memory: a copy at the level the two cross (as a same-host put).
        const double e = other == nullptr ? cpu_op(r, t, bw, nd.bytes, &me, nd.bytes, nullptr, 0, &s)
                         : other->numa == me.numa
                             ? cpu_op(r, t, level_bw(me, *other), nd.bytes, &me, nd.bytes, nullptr, 0, &s)
                             : cpu_op(r, t, level_bw(me, *other), nd.bytes, &me, nd.bytes, other, nd.bytes, &s);
        start_[g] = s;
        finish_at(g, e);
        return;
      }
      case NodeKind::reduce: {
        double s = 0;
        // A window operand streams in at the hand-off rate: the slower of the two limits the kernel.
        double bw = nd.from_window ? handoff(c_.handoff_read_bw, c_.reduce_bw) : c_.reduce_bw;
        const RankPlace* other = peer_place(nd);  // an operand in a peer's mapped slot
        if (other != nullptr && other->numa != me.numa) bw = handoff(level_bw(me, *other), bw);
        const double e = cpu_op(r, t, bw, nd.bytes, &me, nd.bytes,
                                other != nullptr && other->numa != me.numa ? other : nullptr, nd.bytes, &s);
        start_[g] = s;
        finish_at(g, e);
        return;
      }
      case NodeKind::put:
      case NodeKind::put_with_signal:
      case NodeKind::get:
      case NodeKind::signal:
        break;
    }
    if (nd.peer < 0 || static_cast<std::size_t>(nd.peer) >= places_.size())
      throw Error(Errc::invalid_argument, "strata-sim: rank " + std::to_string(r) + " node " +
                                              std::to_string(g - base_[node_block_[g]]) + " targets rank " +
                                              std::to_string(nd.peer) + " outside the machine");
    const RankPlace& pe = places_[static_cast<std::size_t>(nd.peer)];
    if (pe.host == me.host) {
      // Same host: one memcpy by the initiator (shm mapped path), signal visible shm_lat later.
      double s = 0;
      double e = 0;
      if (nd.kind == NodeKind::signal) {
        e = cpu_op(r, t, 0, 0, nullptr, 0, nullptr, 0, &s);
      } else if (pe.numa == me.numa) {
        const double bw = nd.kind != NodeKind::get ? handoff(c_.handoff_write_bw, level_bw(me, pe)) : level_bw(me, pe);
        e = cpu_op(r, t, bw, nd.bytes, &me, nd.bytes, nullptr, 0, &s);
      } else {
        e = cpu_op(r, t, level_bw(me, pe), nd.bytes, &me, nd.bytes, &pe, nd.bytes, &s);
      }
      start_[g] = s;
      if (nd.kind == NodeKind::signal || nd.kind == NodeKind::put_with_signal) push(e + c_.shm_lat, Ev::signal, g);
      finish_at(g, e);
      return;
    }
    // Network: post on the progress server, then the sending NIC.
    const double posted = serve(r, t);
    start_[g] = posted - c_.progress_service;
    const std::uint64_t wire = (nd.kind == NodeKind::get || nd.kind == NodeKind::signal ? 0 : nd.bytes) + c_.msg_bytes;
    const double ts = tx(me.host, posted, wire);
    push(ts + c_.nic_lat, Ev::net_arrive, g);
    if (nd.kind == NodeKind::signal) finish_at(g, ts + static_cast<double>(wire) * per_byte(c_.nic_bw));
  }

  void handle(const Event& e) {
    const std::uint32_t g = e.node;
    const CNode& nd = nodes_[g];
    switch (e.type) {
      case Ev::done: {
        end_[g] = e.t;
        for (std::uint32_t k = succ_off_[g]; k < succ_off_[g + 1]; ++k) release(succ_[k], g, e.t);
        if (const auto it = word_waiters_.find(g); it != word_waiters_.end())
          for (std::uint32_t w : it->second) release(w, g, e.t);  // the word is visible: a same-host load
        const std::uint32_t b = node_block_[g];
        if (--block_left_[b] == 0) {
          // This rank's instance finished: open the gated instance, release flag waiters.
          block_end_[b] = e.t;
          const std::size_t next = static_cast<std::size_t>(b) + static_cast<std::size_t>(gap_) * n_;
          if (next < block_left_.size())
            for (std::uint32_t i = base_[next]; i < base_[next + 1]; ++i)
              if (nodes_[i].ndeps == 0) release(i, g, e.t);
          for (std::uint32_t w : flag_waiters_[b]) release(w, g, e.t);
        }
        return;
      }
      case Ev::net_arrive: {
        const RankPlace& pe = places_[static_cast<std::size_t>(nd.peer)];
        if (nd.kind == NodeKind::get) {
          // Request at the peer: its NIC sends the data back.
          const double req = rx(pe.host, e.t, c_.msg_bytes);
          const double ts = tx(pe.host, req, nd.bytes + c_.msg_bytes);
          push(ts + c_.nic_lat, Ev::get_back, g);
          return;
        }
        const std::uint64_t wire = (nd.kind == NodeKind::signal ? 0 : nd.bytes) + c_.msg_bytes;
        const double delivered = rx(pe.host, e.t, wire);
        if (nd.kind != NodeKind::put) push(delivered, Ev::signal, g);
        if (nd.kind != NodeKind::signal) finish_at(g, delivered + c_.nic_lat);  // completion: acknowledged
        return;
      }
      case Ev::get_back: {
        const double delivered = rx(place(g).host, e.t, nd.bytes + c_.msg_bytes);
        finish_at(g, serve(rank_of(g), delivered));
        return;
      }
      case Ev::signal: {
        push(serve(nd.peer, e.t), Ev::sig_served, g);
        return;
      }
      case Ev::sig_served: {
        // The wait node of the same instance on the target rank.
        const std::size_t up = (node_block_[g] / n_) * n_ + static_cast<std::size_t>(nd.peer);
        const auto b = waits_.begin() + static_cast<std::ptrdiff_t>(wait_off_[up]);
        const auto en = waits_.begin() + static_cast<std::ptrdiff_t>(wait_off_[up + 1]);
        const auto it = std::lower_bound(b, en, std::pair<std::uint32_t, std::uint32_t>{nd.slot, 0});
        if (it == en || it->first != nd.slot)
          throw Error(Errc::invalid_argument, "strata-sim: rank " + std::to_string(rank_of(g)) + " signals slot " +
                                                  std::to_string(nd.slot) + " of rank " + std::to_string(nd.peer) +
                                                  ", which has no wait node for it");
        const std::uint32_t w = it->second;
        if (sig_left_[w] == 0)
          throw Error(Errc::invalid_argument, "strata-sim: rank " + std::to_string(nd.peer) + " slot " +
                                                  std::to_string(nd.slot) + " receives more signals than it waits for");
        sig_time_[w] = std::max(sig_time_[w], e.t);
        pred_sig_[w] = g;
        if (--sig_left_[w] == 0 && deps_left_[w] == 0) dispatch(w, std::max(e.t, dep_time_[w]), true);
        return;
      }
    }
  }

  const std::vector<RankPlace>& places_;
  CostModel c_;
  std::size_t n_ = 0;
  int instances_ = 1;
  int gap_ = 1;
  std::vector<std::uint32_t> node_block_;  // instance * n + rank
  std::vector<std::uint32_t> block_left_;
  std::vector<double> block_end_;
  std::vector<std::vector<std::uint32_t>> flag_waiters_;
  // Flag words other than the slot's (mapped records, publications, reads done):
  // the first store of each word per block, the waits to match, and what each store releases.
  std::unordered_map<std::uint64_t, std::uint32_t> setters_;
  std::vector<std::pair<std::uint32_t, std::uint64_t>> word_waits_;
  std::unordered_map<std::uint32_t, std::vector<std::uint32_t>> word_waiters_;
  int numa_per_host_ = 1;
  std::vector<CNode> nodes_;
  std::vector<std::uint32_t> base_;
  std::vector<std::uint32_t> succ_off_, succ_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> waits_;  // (slot, global node), sorted per rank
  std::vector<std::size_t> wait_off_;
  std::vector<std::uint32_t> deps_left_, sig_left_, pred_dep_, pred_sig_;
  std::vector<double> dep_time_, sig_time_, ready_, start_, end_;
  std::vector<double> nic_tx_, nic_rx_, mem_, prog_, workers_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> q_;
  std::uint64_t seq_ = 0;
  std::uint64_t events_ = 0;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Result simulate(const coll::Group& group, const coll::Call& call, const std::vector<RankPlace>& places,
                const CostModel& cost, std::size_t critical_steps, const Stream& stream) {
  if (group.size() != static_cast<int>(places.size()))
    bad("the group has " + std::to_string(group.size()) + " ranks, the machine " + std::to_string(places.size()));
  if (stream.instances < 1 || stream.instances > 4096)
    bad("instances = " + std::to_string(stream.instances) + " is outside [1, 4096]");
  Result res;
  Engine eng(places, cost, stream.instances, stream.blocking ? 1 : std::max(1, group.credits));
  auto t0 = std::chrono::steady_clock::now();
  coll::Group each = group;
  for (int i = 0; i < stream.instances; ++i) {
    for (int r = 0; r < group.size(); ++r) {
      each.rank = r;
      const auto plan = coll::compile(each, call, i % std::max(1, group.credits));
      eng.add(r, *plan, i);
    }
  }
  res.compile_seconds = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  eng.run();
  res.simulate_seconds = seconds_since(t0);
  // The critical path names its nodes from the plans, compiled again (once per rank and slot on the path).
  std::map<std::pair<int, int>, std::shared_ptr<const dag::Plan>> again;
  eng.results(&res, critical_steps, [&](int r, int inst, dag::NodeId id) {
    const int slot = inst % std::max(1, group.credits);
    auto& plan = again[{r, slot}];
    if (!plan) {
      coll::Group one = group;
      one.rank = r;
      plan = coll::compile(one, call, slot);
    }
    return plan->describe(id);
  });
  return res;
}

Result simulate_plans(const std::vector<std::shared_ptr<const dag::Plan>>& plans, const std::vector<RankPlace>& places,
                      const CostModel& cost, std::size_t critical_steps) {
  if (plans.size() != places.size())
    bad(std::to_string(plans.size()) + " plans for a machine of " + std::to_string(places.size()) + " ranks");
  Result res;
  Engine eng(places, cost, 1, 1);
  for (std::size_t r = 0; r < plans.size(); ++r) {
    if (!plans[r]) bad("plan of rank " + std::to_string(r) + " is null");
    eng.add(static_cast<int>(r), *plans[r]);
  }
  const auto t0 = std::chrono::steady_clock::now();
  eng.run();
  res.simulate_seconds = seconds_since(t0);
  eng.results(&res, critical_steps,
              [&](int r, int, dag::NodeId id) { return plans[static_cast<std::size_t>(r)]->describe(id); });
  return res;
}

}  // namespace strata::sim
