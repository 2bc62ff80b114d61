// The algorithm registry (strata/collectives/registry.hpp): one row per
// collective x algorithm. To add an algorithm, add its row here (name, when it
// applies, cost, tuning keys) and its compile function (docs/algorithms.md,
// "Adding an algorithm").
#include "strata/collectives/registry.hpp"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "compile_common.hpp"
#include "strata/collectives/select.hpp"
#include "strata/collectives/tuning.hpp"

namespace strata::coll {

namespace {

using cc::fail;
using Plan = std::shared_ptr<const dag::Plan>;

std::uint64_t elem(const Call& c) { return c.user_op ? c.user_op->elem_size : dag::datatype_size(c.dtype); }

std::string single_copy_unavailable() {
  return "algorithm 'single-copy' needs a communicator whose members share this host, window flags and a CMA path "
         "to every member (process_vm_readv; not under STRATA_SINGLE_COPY=off), and no on_block callback or "
         "persistent plan";
}

// ---------------------------------------------------------------- when rows apply unnamed
bool always(const Group&, const Call&) { return true; }
bool automatic(const Group&, const Call& c) { return means_automatic(c.kind, c.algo.name); }
bool mapped_applies(const Group& g, const Call& c) { return cc::mapped_plan(g, c); }
bool bcast_sc_applies(const Group& g, const Call& c) { return cc::single_copy(g, c, c.count * elem(c)); }
bool allreduce_sc_applies(const Group& g, const Call& c) { return cc::single_copy_allreduce(g, c); }
bool allreduce_host_sc_applies(const Group& g, const Call& c) { return cc::host_single_copy_allreduce(g, c); }
bool rooted_sc_applies(const Group& g, const Call& c) { return cc::shared_single_copy(g, c); }
bool rs_sc_applies(const Group& g, const Call& c) { return cc::single_copy_reduce_scatter(g, c); }

// allgather(v): the mean block decides (allgatherv's blocks may differ).
std::uint64_t allgather_mean_block(const Group& g, const Call& c) {
  std::uint64_t total = 0;
  const std::size_t es = dag::datatype_size(c.dtype);
  if (c.kind == Kind::allgatherv && c.counts.size() == static_cast<std::size_t>(g.size()) &&
      c.displs.size() == c.counts.size()) {
    for (std::size_t cnt : c.counts) total += cnt * es;
  } else {
    total = c.count * es * static_cast<std::uint64_t>(g.size());
  }
  return total / static_cast<std::uint64_t>(std::max(1, g.size()));
}
bool allgather_sc_applies(const Group& g, const Call& c) { return cc::single_copy(g, c, allgather_mean_block(g, c)); }
bool allgather_host_sc_applies(const Group& g, const Call& c) {
  return cc::host_single_copy_allgather(g, c, allgather_mean_block(g, c));
}

// allgather(v): Bruck for small results (log2 n messages), the ring for large ones and n <= 2.
bool allgather_small(const Group& g, const Call& c) {
  const std::size_t es = dag::datatype_size(c.dtype);
  std::uint64_t recv_total = 0;
  const auto n = static_cast<std::size_t>(g.size());
  for (std::size_t r = 0; r < n; ++r) {
    const bool v = c.kind == Kind::allgatherv && c.counts.size() == n && c.displs.size() == n;
    const std::uint64_t at = (v ? c.displs[r] : r * c.count) * es;
    recv_total = std::max<std::uint64_t>(recv_total, at + (v ? c.counts[r] : c.count) * es);
  }
  return g.size() > 2 && recv_total <= cc::tuning(g).allgather_bruck_max_bytes;
}
bool allgather_ring_applies(const Group& g, const Call& c) { return automatic(g, c) && !allgather_small(g, c); }
bool allgather_bruck_applies(const Group& g, const Call& c) { return automatic(g, c) && allgather_small(g, c); }

// alltoall: Bruck for small blocks and enough ranks (log2 n messages instead of n - 1).
bool alltoall_small(const Group& g, const Call& c) {
  return c.kind == Kind::alltoall && static_cast<std::uint64_t>(g.size()) >= cc::tuning(g).alltoall_bruck_min_ranks &&
         c.count * dag::datatype_size(c.dtype) <= cc::tuning(g).alltoall_bruck_max_block;
}
bool alltoall_sc_applies(const Group& g, const Call& c) {
  return c.kind == Kind::alltoall && !c.in_place && cc::single_copy(g, c, c.count * dag::datatype_size(c.dtype));
}
bool alltoall_pairwise_applies(const Group& g, const Call& c) { return automatic(g, c) && !alltoall_small(g, c); }
bool alltoall_bruck_applies(const Group& g, const Call& c) { return automatic(g, c) && alltoall_small(g, c); }

// reduce_scatter: the ring for commutative operators, the rank-ordered pairwise exchange otherwise.
bool ordered(const Call& c) { return c.user_op && !c.user_op->commutative; }
bool rs_ring_applies(const Group& g, const Call& c) { return automatic(g, c) && !ordered(c); }
bool rs_pairwise_applies(const Group& g, const Call& c) { return automatic(g, c) && ordered(c); }

// ---------------------------------------------------------------- compile functions of the memory-protocol rows
// Run because the row applies (automatic) or because the call names it: a
// named row that cannot run the call explains what it needs.
Plan bcast_sc(const Group& g, const Call& c, int slot, const AlgorithmRow&) {
  if (!cc::single_copy_possible(g, c)) fail(Errc::unsupported, g, c, single_copy_unavailable());
  return cc::compile_broadcast_single(g, c, slot);
}
Plan allreduce_sc(const Group& g, const Call& c, int slot, const AlgorithmRow&) {
  if (!cc::single_copy_possible(g, c)) fail(Errc::unsupported, g, c, single_copy_unavailable());
  return cc::compile_allreduce_single(g, c, slot);
}
Plan allgather_sc(const Group& g, const Call& c, int slot, const AlgorithmRow&) {
  if (!cc::single_copy_possible(g, c)) fail(Errc::unsupported, g, c, single_copy_unavailable());
  return cc::compile_allgather_single(g, c, slot);
}
// alltoall, reduce_scatter_block: when named, the plan explains what it needs.
Plan alltoall_sc(const Group& g, const Call& c, int slot, const AlgorithmRow&) {
  if (!cc::single_copy_possible(g, c)) fail(Errc::unsupported, g, c, single_copy_unavailable());
  return cc::compile_alltoall_single(g, c, slot);
}
Plan rs_sc(const Group& g, const Call& c, int slot, const AlgorithmRow&) {
  if (!cc::single_copy_possible(g, c)) fail(Errc::unsupported, g, c, single_copy_unavailable());
  return cc::compile_reduce_scatter_single(g, c, slot);
}
// gather / scatter: single copy with shared buffers (or named and possible), else the tree.
Plan gather_sc(const Group& g, const Call& c, int slot, const AlgorithmRow& r) {
  return cc::single_copy_possible(g, c) ? cc::compile_gather_single(g, c, slot) : cc::compile_gather(g, c, slot, r);
}
Plan scatter_sc(const Group& g, const Call& c, int slot, const AlgorithmRow& r) {
  return cc::single_copy_possible(g, c) ? cc::compile_scatter_single(g, c, slot) : cc::compile_scatter(g, c, slot, r);
}

// ---------------------------------------------------------------- the table
const char* const kTreeCost = "h + ceil(m/f) - 1 fragment steps; m x children sent";

AlgorithmRow row(Kind k, std::string name, std::string schedule, std::string cost, std::string chosen,
                 std::vector<std::string> keys, bool (*applies)(const Group&, const Call&), CompileFn compile,
                 Variant variant = Variant::tree) {
  AlgorithmRow r;
  r.variant = variant;
  r.kind = k;
  r.name = std::move(name);
  r.schedule = std::move(schedule);
  r.cost = std::move(cost);
  r.chosen = std::move(chosen);
  r.tuning_keys = std::move(keys);
  r.applies = applies;
  r.compile = compile;
  return r;
}

AlgorithmRow mapped_row(Kind k) {
  return row(k, "mapped",
             "each rank copies its contribution into its own mapped slot; readers copy or fold straight out of it",
             "one copy in, n - 1 reads per rank; no messages", "one host, mapped windows, loose, fits mapped_max_bytes",
             {"mapped_max_bytes", "mapped_rs_max_bytes", "shared_mapped_max_bytes", "mapped_slots"}, mapped_applies,
             cc::compile_mapped, Variant::mapped);
}

AlgorithmRow sc_row(Kind k, std::string chosen, std::vector<std::string> keys,
                    bool (*applies)(const Group&, const Call&), CompileFn compile) {
  return row(k, "single-copy", "each block read straight out of its owner's user buffer (CMA or shared mapping)",
             "one copy per block; 2 flag waits per block", std::move(chosen), std::move(keys), applies, compile,
             Variant::single_copy);
}

// The tree rows of a tree collective: the single-level tree, then the multilevel tree (the default).
void tree_rows(std::vector<AlgorithmRow>* t, Kind k, const std::string& schedule, const std::string& cost,
               bool (*tree_applies)(const Group&, const Call&), CompileFn compile, std::vector<std::string> keys) {
  AlgorithmRow single = row(k, "single", "one k-nomial tree over all ranks, ignoring hosts and NUMA (tree: single:K)",
                            cost, "", keys, nullptr, compile);
  single.aliases = {"flat-tree"};
  single.tree = single.single_level = true;
  t->push_back(single);
  AlgorithmRow tree = row(k, "tree", schedule, cost, "default", std::move(keys), tree_applies, compile);
  tree.aliases = {"hierarchical"};
  tree.tree = true;
  t->push_back(tree);
}

void rooted_rows(std::vector<AlgorithmRow>* t, Kind k, bool gather) {
  t->push_back(mapped_row(k));
  const bool v = k == Kind::gatherv || k == Kind::scatterv;
  const CompileFn rooted = gather ? cc::compile_gather : cc::compile_scatter;
  if (!v) {
    AlgorithmRow sc = sc_row(k, "one host, shared buffers (CollOptions::shared_buffers)", {}, rooted_sc_applies,
                             gather ? gather_sc : scatter_sc);
    sc.selectable = false;
    t->push_back(sc);
  }
  const std::string cost = "h steps; a subtree's blocks per edge";
  AlgorithmRow single =
      row(k, "single", "one k-nomial tree over all ranks (tree: single:K)", cost, "", {}, nullptr, rooted);
  single.aliases = {"flat-tree"};
  single.tree = single.single_level = true;
  t->push_back(single);
  t->push_back(row(k, "flat", "the root exchanges every block with every rank directly", "n - 1 messages at the root",
                   v ? "default (a tree needs the counts on every rank first)" : "", {}, nullptr, rooted,
                   Variant::flat));
  t->push_back(
      row(k, "ring", "blocks pass along the ring of ranks", "n - 1 steps", "", {}, nullptr, rooted, Variant::ring));
  // The tree row comes last: compile() runs it for any other name.
  AlgorithmRow tree = row(k, "tree", "multilevel tree; blocks travel packed along it", cost,
                          v ? "a pull direction asked for" : "default", {}, always, rooted);
  tree.aliases = {"hierarchical"};
  tree.tree = true;
  t->push_back(tree);
}

const AlgorithmRow& find_row(const std::vector<AlgorithmRow>& t, Kind k, const std::string& name) {
  return *std::find_if(t.begin(), t.end(), [&](const AlgorithmRow& r) { return r.kind == k && r.named(name); });
}

void allreduce_rows(std::vector<AlgorithmRow>* t) {
  const Kind k = Kind::allreduce;
  t->push_back(mapped_row(k));
  t->push_back(sc_row(k, "one host, not in place, allreduce_single_copy_min_bytes .. allreduce_single_copy_max_bytes",
                      {"allreduce_single_copy_min_bytes", "allreduce_single_copy_max_bytes"}, allreduce_sc_applies,
                      allreduce_sc));
  AlgorithmRow hsc =
      row(k, "hier-single-copy",
          "per host: member i folds chunk i out of the host's send buffers, the i-th members of all "
          "hosts allreduce it (rd or rabenseifner), member i writes it into the host's outputs",
          "(L-1) m/L read + folded + written per rank (L per host); the chunk's allreduce over H hosts",
          "across hosts, L >= 2 per host on every host, not in place, commutative, "
          "allreduce_single_copy_min_bytes .. allreduce_single_copy_max_bytes",
          {"allreduce_single_copy_min_bytes", "allreduce_single_copy_max_bytes", "allreduce_hier_rd_max_bytes"},
          allreduce_host_sc_applies, cc::compile_allreduce_host_single, Variant::single_copy);
  hsc.keeps_order = false;
  t->push_back(hsc);
  tree_rows(t, k, "reduce to rank 0 + broadcast down the same tree, fragment-pipelined",
            "2h + ceil(m/f) - 1 fragment steps", automatic, cc::allreduce_tree_plan,
            {"allreduce_tree_host", "allreduce_tree_package", "allreduce_tree_numa", "allreduce_tree_core",
             "pipeline_fragment"});
  t->back().chosen = "one rank, or non-commutative operators above allreduce_rd_max_bytes";
  AlgorithmRow rd =
      row(k, "rd", "recursive doubling", "log2 n steps of m bytes",
          "up to allreduce_rd_max_bytes (allreduce_net_rd_max_bytes across hosts)",
          {"allreduce_rd_max_bytes", "allreduce_net_rd_max_bytes"}, nullptr, cc::compile_allreduce, Variant::rd);
  rd.aliases = {"recursive-doubling"};
  t->push_back(rd);
  AlgorithmRow rab = row(k, "rabenseifner", "recursive-halving reduce-scatter + recursive-doubling allgather",
                         "2 log2 n steps; 2 m (n-1)/n bytes", "above rd, below allreduce_ring_min_bytes",
                         {"allreduce_rd_max_bytes", "allreduce_net_rd_max_bytes", "allreduce_ring_min_bytes"}, nullptr,
                         cc::compile_allreduce, Variant::rabenseifner);
  rab.keeps_order = false;
  t->push_back(rab);
  AlgorithmRow ring =
      row(k, "ring", "ring reduce-scatter + ring allgather", "2 (n-1) steps; 2 m (n-1)/n bytes",
          "from allreduce_ring_min_bytes", {"allreduce_ring_min_bytes"}, nullptr, cc::compile_allreduce, Variant::ring);
  ring.keeps_order = false;
  t->push_back(ring);
  const char* hs = "binomial reduce to the host leaders, an inter-host algorithm among them, binomial broadcast";
  t->push_back(row(k, "hier", hs, "intra-host 2 log2 ppn + the leaders' algorithm", "", {"allreduce_hier_rd_max_bytes"},
                   nullptr, cc::compile_allreduce, Variant::hier));
  const std::pair<const char*, Variant> inters[] = {
      {"rd", Variant::hier_rd}, {"rabenseifner", Variant::hier_rabenseifner}, {"ring", Variant::hier_ring}};
  for (const auto& [inter, variant] : inters) {
    AlgorithmRow h =
        row(k, std::string("hier:") + inter, hs, "intra-host 2 log2 ppn + the leaders' " + std::string(inter), "", {},
            nullptr, cc::compile_allreduce, variant);
    h.keeps_order = find_row(*t, k, inter).keeps_order;  // the leaders' algorithm's
    t->push_back(h);
  }
}

void allgather_rows(std::vector<AlgorithmRow>* t, Kind k) {
  t->push_back(mapped_row(k));
  t->push_back(
      sc_row(k,
             "one host, loose, mean block in sym_single_copy_min_bytes .. sym_single_copy_max_bytes (any with shared "
             "buffers)",
             {"sym_single_copy_min_bytes", "sym_single_copy_max_bytes"}, allgather_sc_applies, allgather_sc));
  t->push_back(row(k, "hier-single-copy",
                   "the i-th members of all hosts ring-allgather their blocks over the windows (straight to their "
                   "offsets in recv); each member reads the blocks its host's other members hold out of their send "
                   "and receive buffers",
                   "H - 1 steps of m bytes between hosts; (L-1) H m read per rank (H hosts of L); no same-host "
                   "window copy",
                   "across hosts, L >= 2 per host on every host, loose, mean block in sym_single_copy_min_bytes .. "
                   "sym_single_copy_max_bytes",
                   {"sym_single_copy_min_bytes", "sym_single_copy_max_bytes"}, allgather_host_sc_applies,
                   cc::compile_allgather_host_single, Variant::single_copy));
  const std::vector<std::string> large = {"sym_large_message", "sym_large_fragment", "sym_stream_min_bytes"};
  t->push_back(row(k, "ring", "ring allgather", "n - 1 steps of m bytes", "above allgather_bruck_max_bytes or n <= 2",
                   {"allgather_bruck_max_bytes"}, allgather_ring_applies, cc::compile_allgather, Variant::ring));
  t->push_back(row(k, "rd", "recursive doubling", "log2 n steps; (n-1) m bytes", "", large, nullptr,
                   cc::compile_allgather, Variant::rd));
  t->push_back(row(k, "bruck", "Bruck's allgather", "ceil(log2 n) steps; (n-1) m bytes",
                   "whole result up to allgather_bruck_max_bytes and n > 2", {"allgather_bruck_max_bytes"},
                   allgather_bruck_applies, cc::compile_allgather, Variant::bruck));
  t->push_back(row(k, "hier", "binomial gather to the host leaders, ring among them, binomial broadcast",
                   "intra-host log2 ppn + hosts - 1 steps", "", large, nullptr, cc::compile_allgather, Variant::hier));
  t->push_back(row(k, "numa-ring", "ring ordered host by host, NUMA region by NUMA region", "n - 1 steps of m bytes",
                   "", large, nullptr, cc::compile_allgather, Variant::numa_ring));
}

void alltoall_rows(std::vector<AlgorithmRow>* t, Kind k) {
  const bool v = k == Kind::alltoallv;
  if (!v) {
    t->push_back(mapped_row(k));
    t->push_back(
        sc_row(k, "one host, not in place, loose, block in sym_single_copy_min_bytes .. sym_single_copy_max_bytes",
               {"sym_single_copy_min_bytes", "sym_single_copy_max_bytes"}, alltoall_sc_applies, alltoall_sc));
  }
  t->push_back(row(k, "pairwise", "rotated pairwise exchange (push)", "n - 1 steps of one block",
                   v ? "default" : "blocks above alltoall_bruck_max_block or n < alltoall_bruck_min_ranks",
                   {"sym_large_message", "sym_large_fragment"}, alltoall_pairwise_applies, cc::compile_alltoall,
                   Variant::pairwise));
  if (!v)
    t->push_back(row(k, "bruck", "Bruck's alltoall", "ceil(log2 n) steps; n/2 blocks each",
                     "n >= alltoall_bruck_min_ranks and blocks up to alltoall_bruck_max_block",
                     {"alltoall_bruck_min_ranks", "alltoall_bruck_max_block"}, alltoall_bruck_applies,
                     cc::compile_alltoall, Variant::bruck));
  t->push_back(row(k, "pull", "rotated pairwise exchange, receivers get each block", "n - 1 steps of one block", "", {},
                   nullptr, cc::compile_alltoall, Variant::pull));
}

void reduce_scatter_rows(std::vector<AlgorithmRow>* t, Kind k) {
  t->push_back(mapped_row(k));
  if (k == Kind::reduce_scatter_block)
    t->push_back(sc_row(k,
                        "one host, not in place, loose, vector in rs_single_copy_min_bytes .. rs_single_copy_max_bytes",
                        {"rs_single_copy_min_bytes", "rs_single_copy_max_bytes"}, rs_sc_applies, rs_sc));
  t->push_back(row(k, "ring", "ring reduce-scatter", "n - 1 steps of one block", "commutative operators", {},
                   rs_ring_applies, cc::compile_reduce_scatter, Variant::ring));
  AlgorithmRow rh = row(k, "rh", "recursive halving", "log2 n steps; (n-1)/n of the vector", "", {}, nullptr,
                        cc::compile_reduce_scatter, Variant::halving);
  rh.aliases = {"rd", "halving"};
  t->push_back(rh);
  t->push_back(row(k, "pairwise", "pairwise exchange, folded in rank order", "n - 1 steps of one block",
                   "non-commutative operators", {}, rs_pairwise_applies, cc::compile_reduce_scatter,
                   Variant::pairwise));
  // Of the schedules only pairwise folds in rank order; the mapped and single-copy plans fold 0 op 1 op 2 ...
  for (AlgorithmRow& r : *t)
    if (r.kind == k)
      r.keeps_order =
          r.variant == Variant::pairwise || r.variant == Variant::mapped || r.variant == Variant::single_copy;
}

std::vector<AlgorithmRow> build_table() {
  std::vector<AlgorithmRow> t;
  t.push_back(mapped_row(Kind::barrier));
  AlgorithmRow dis = row(Kind::barrier, "dissemination", "dissemination barrier", "ceil(log2 n) rounds of signals",
                         "default", {}, always, cc::barrier_plan);
  dis.aliases = {"tree", "single"};  // tree names are accepted (options are often shared between calls)
  t.push_back(dis);
  t.push_back(mapped_row(Kind::broadcast));
  t.push_back(
      sc_row(Kind::broadcast,
             "one host, loose, bcast_single_copy_min_bytes .. bcast_single_copy_max_bytes (any with shared buffers)",
             {"bcast_single_copy_min_bytes", "bcast_single_copy_max_bytes", "bcast_single_copy_split_min_bytes"},
             bcast_sc_applies, bcast_sc));
  tree_rows(&t, Kind::broadcast,
            "multilevel tree (host / package / NUMA / core), push or pull per level, fragment-pipelined", kTreeCost,
            always, cc::broadcast_plan,
            {"broadcast_tree_host", "broadcast_tree_package", "broadcast_tree_numa", "broadcast_tree_core",
             "broadcast_pull_host", "broadcast_pull_package", "broadcast_pull_numa", "broadcast_pull_core",
             "pipeline_fragment", "bcast_host_single_copy_min_bytes"});
  t.push_back(mapped_row(Kind::reduce));
  tree_rows(&t, Kind::reduce, "multilevel tree, push up with RTR, rank-ordered fold for non-commutative ops",
            "h + ceil(m/f) - 1 fragment steps; m sent", always, cc::reduce_plan,
            {"reduce_tree_host", "reduce_tree_package", "reduce_tree_numa", "reduce_tree_core", "pipeline_fragment"});
  allreduce_rows(&t);
  rooted_rows(&t, Kind::gather, true);
  rooted_rows(&t, Kind::gatherv, true);
  rooted_rows(&t, Kind::scatter, false);
  rooted_rows(&t, Kind::scatterv, false);
  allgather_rows(&t, Kind::allgather);
  allgather_rows(&t, Kind::allgatherv);
  alltoall_rows(&t, Kind::alltoall);
  alltoall_rows(&t, Kind::alltoallv);
  reduce_scatter_rows(&t, Kind::reduce_scatter);
  reduce_scatter_rows(&t, Kind::reduce_scatter_block);
  return t;
}

}  // namespace

bool AlgorithmRow::named(const std::string& n) const {
  return n == name || std::find(aliases.begin(), aliases.end(), n) != aliases.end();
}

const std::vector<AlgorithmRow>& algorithm_table() {
  static const std::vector<AlgorithmRow> t = build_table();
  return t;
}

std::vector<const AlgorithmRow*> algorithms_of(Kind kind) {
  std::vector<const AlgorithmRow*> out;
  for (const AlgorithmRow& r : algorithm_table())
    if (r.kind == kind) out.push_back(&r);
  return out;
}

const AlgorithmRow* find_algorithm(Kind kind, const std::string& name) {
  for (const AlgorithmRow& r : algorithm_table())
    if (r.kind == kind && r.named(name)) return &r;
  return nullptr;
}

const AlgorithmRow* default_algorithm(Kind kind) {
  switch (kind) {
    case Kind::barrier:
      return find_algorithm(kind, "dissemination");
    case Kind::gatherv:
    case Kind::scatterv:
      return find_algorithm(kind, "flat");
    case Kind::broadcast:
    case Kind::reduce:
    case Kind::allreduce:
    case Kind::gather:
    case Kind::scatter:
      return find_algorithm(kind, "tree");
    default:
      return nullptr;
  }
}

bool means_automatic(Kind kind, const std::string& name) {
  if (name.empty() || name == "auto") return true;
  const bool steps = kind == Kind::allgather || kind == Kind::allgatherv || kind == Kind::alltoall ||
                     kind == Kind::alltoallv || kind == Kind::reduce_scatter || kind == Kind::reduce_scatter_block;
  return steps && (name == "tree" || name == "single" || name == "hierarchical");
}

bool automatic_request(const std::string& algorithm) noexcept { return algorithm.empty() || algorithm == "auto"; }

std::string algorithm_names(Kind kind) {
  std::string s;
  for (const AlgorithmRow* r : algorithms_of(kind))
    if (r->selectable) s += (s.empty() ? "" : " | ") + r->name;
  return s;
}

const AlgorithmRow* planned_algorithm(const Group& g, const Call& c) {
  for (const AlgorithmRow* r : algorithms_of(c.kind))
    if (r->named(c.algo.name) || (r->applies != nullptr && r->applies(g, c))) return r;
  return nullptr;
}

namespace {

// A tuning-table value in words: sizes in KiB / MiB / TiB where exact, counts as numbers.
std::string value_text(const std::string& key, std::uint64_t v) {
  const bool size = key.find("bytes") != std::string::npos || key.find("block") != std::string::npos ||
                    key.find("fragment") != std::string::npos || key.find("message") != std::string::npos;
  if (!size) return std::to_string(v);
  if (v >= (std::uint64_t{1} << 40) && v % (std::uint64_t{1} << 40) == 0) return std::to_string(v >> 40) + " TiB";
  if (v >= (std::uint64_t{1} << 20) && v % (std::uint64_t{1} << 20) == 0) return std::to_string(v >> 20) + " MiB";
  if (v >= 1024 && v % 1024 == 0) return std::to_string(v >> 10) + " KiB";
  return std::to_string(v) + " B";
}

// @p text with every tuning-table key in it replaced by its value in @p t.
std::string with_values(const std::string& text, const Tuning& t) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    const auto word = [&](std::size_t j) {
      const char ch = text[j];
      return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_';
    };
    if (!word(i)) {
      out += text[i++];
      continue;
    }
    std::size_t j = i;
    while (j < text.size() && word(j)) ++j;
    const std::string token = text.substr(i, j - i);
    const TuningField* f = tuning_field(token);
    out += f != nullptr ? value_text(token, t.*(f->member)) : token;
    i = j;
  }
  return out;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> selection_rules() { return selection_rules(Tuning{}); }

std::vector<std::pair<std::string, std::string>> selection_rules(const Tuning& t) {
  std::vector<std::pair<std::string, std::string>> out;
  for (int k = 0; k <= static_cast<int>(Kind::reduce_scatter_block); ++k) {
    const auto kind = static_cast<Kind>(k);
    std::string rule;
    for (const AlgorithmRow* r : algorithms_of(kind))
      if (!r->chosen.empty()) rule += (rule.empty() ? "" : "; ") + r->name + ": " + with_values(r->chosen, t);
    out.emplace_back(to_string(kind), rule);
  }
  return out;
}

std::string algorithm_table_markdown() {
  std::ostringstream o;
  o << "| collective | algorithm | schedule | cost (critical path) | chosen automatically | tuning keys |\n";
  o << "|---|---|---|---|---|---|\n";
  for (const AlgorithmRow& r : algorithm_table()) {
    std::string name = "`" + r.name + "`";
    for (const std::string& a : r.aliases) name += " (`" + a + "`)";
    if (!r.selectable) name += " (automatic only)";
    std::string keys;
    for (const std::string& k : r.tuning_keys) keys += (keys.empty() ? "`" : ", `") + k + "`";
    o << "| " << to_string(r.kind) << " | " << name << " | " << r.schedule << " | " << r.cost << " | "
      << (r.chosen.empty() ? "when named" : r.chosen) << " | " << keys << " |\n";
  }
  return o.str();
}

}  // namespace strata::coll
