// The selection rules (strata/collectives/select.hpp): options and STRATA_*
// variables -> coll::Algorithm. Algorithm names are looked up in the registry
// (registry.cpp); tree shapes, fragmentation and directions are parsed here.
#include "strata/collectives/select.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>
#include <vector>

#include "strata/collectives/checks.hpp"
#include "strata/collectives/registry.hpp"
#include "strata/detail/env.hpp"

extern char** environ;  // NOLINT: POSIX

namespace strata::coll {

namespace {

std::string upper(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

std::string who_of(Kind kind, int rank) {
  return std::string(to_string(kind)) + (rank >= 0 ? " on rank " + std::to_string(rank) : std::string());
}

// The option if given, else the variable (registered STRATA_ name), else "".
std::string env_or(const Environment& env, const std::string& v, const std::string& var) {
  if (!v.empty()) return v;
  const std::string* s = env.find(var);
  return s == nullptr ? std::string() : *s;
}

// Whether a collective can pull (docs/algorithms.md): broadcast and the scatters.
bool pull_capable(Kind kind) { return kind == Kind::broadcast || kind == Kind::scatter || kind == Kind::scatterv; }

// The family name without the v / _block suffix (STRATA_ALGO_ALLGATHER also covers allgatherv).
const char* family(Kind k) {
  switch (k) {
    case Kind::allgatherv:
      return "allgather";
    case Kind::alltoallv:
      return "alltoall";
    case Kind::reduce_scatter_block:
      return "reduce_scatter";
    default:
      return to_string(k);
  }
}

// Parses a direction spec into @p a: "push" | "pull" | "auto" | "" (all levels), or
// comma-separated "level:push|pull" items, level host | package | numa | core | single.
void parse_direction(Kind kind, const std::string& spec, const std::string& from, int rank, Algorithm* a) {
  const std::string who = who_of(kind, rank);
  auto dir = [&](const std::string& v) {
    if (v == "push") return Direction::push;
    if (v == "pull") return Direction::pull;
    throw Error(Errc::invalid_argument,
                who + ": argument 'direction' = '" + spec + "' (" + from + "): '" + v +
                    "' is not push | pull (e.g. \"pull\" or \"host:pull,package:push,numa:push,core:pull\")");
  };
  if (spec.empty() || spec == "auto") return;
  if (spec.find(':') == std::string::npos) {
    a->dir_host = a->dir_package = a->dir_numa = a->dir_core = a->dir_single = dir(spec);
  } else {
    std::size_t pos = 0;
    while (pos <= spec.size()) {
      const std::size_t comma = spec.find(',', pos);
      const std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      const std::size_t colon = item.find(':');
      const std::string level = item.substr(0, colon);
      if (colon == std::string::npos)
        throw Error(Errc::invalid_argument, who + ": argument 'direction' = '" + spec + "' (" + from +
                                                "): expected push | pull or level:push|pull items");
      const Direction d = dir(item.substr(colon + 1));
      if (level == "host")
        a->dir_host = d;
      else if (level == "package")
        a->dir_package = d;
      else if (level == "numa")
        a->dir_numa = d;
      else if (level == "core")
        a->dir_core = d;
      else if (level == "single")
        a->dir_single = d;
      else
        throw Error(Errc::invalid_argument, who + ": argument 'direction' = '" + spec + "' (" + from + "): level '" +
                                                level + "' is not host | package | numa | core | single");
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  if (a->any_pull() && !pull_capable(kind))
    throw Error(Errc::invalid_argument, who + ": argument 'direction' = '" + spec + "' (" + from +
                                            "): pull applies to broadcast, scatter and " + "scatterv only; " +
                                            to_string(kind) + " moves data by push");
}

// "argument 'tree' = 'host:banana' (CollOptions::tree)" or "(STRATA_TREE_BROADCAST)".
std::string arg(const std::string& who, const char* name, const std::string& value, const std::string& given,
                const std::string& var) {
  return who + ": argument '" + name + "' = '" + value + "' (" +
         (!given.empty() ? std::string("CollOptions::") + name : var) + ")";
}

// The variable an unnamed option came from: STRATA_<WHAT>_<COLL> if set, else STRATA_<WHAT>.
std::string var_of(const Environment& env, const std::string& given, const std::string& what,
                   const std::string& cname) {
  if (!given.empty()) return std::string();
  const std::string per = "STRATA_" + what + "_" + cname;
  return env.find(per) != nullptr ? per : "STRATA_" + what;
}

// The algorithm name of a tree collective (barrier, broadcast, reduce, the
// tree allreduce, the tree gather / scatter), from the registry's rows.
void tree_name(Kind kind, const Options& o, const Environment& env, int rank, Algorithm* a) {
  const std::string cname = upper(to_string(kind));
  const std::string algo_var = o.algorithm.empty() ? "STRATA_ALGO_" + cname : std::string();
  const std::string algo = env_or(env, o.algorithm, "STRATA_ALGO_" + cname);
  // barrier, broadcast, reduce: any of their rows; allreduce, gather, scatter: the tree rows.
  const bool own = kind == Kind::barrier || kind == Kind::broadcast || kind == Kind::reduce;
  const AlgorithmRow* row = algo.empty() ? default_algorithm(kind) : find_algorithm(kind, algo);
  if (row != nullptr && (!row->selectable || (!own && !row->tree))) row = nullptr;
  if (row == nullptr) {
    std::string names;
    for (const AlgorithmRow* r : algorithms_of(kind))
      if (r->selectable && (own || r->tree)) names += (names.empty() ? "" : " | ") + r->name;
    throw Error(Errc::invalid_argument, arg(who_of(kind, rank), "algorithm", algo, o.algorithm, algo_var) +
                                            ": unknown (" + names + ")" +
                                            (kind == Kind::barrier ? "" : "; see docs/algorithms.md"));
  }
  a->name = row->name;
  if (row->tree) a->hierarchical = !row->single_level;
}

// Tree shapes: CollOptions::tree, STRATA_TREE_<COLL>, STRATA_TREE.
void parse_tree(Kind kind, const Options& o, const Environment& env, int rank, Algorithm* a) {
  const std::string cname = upper(to_string(kind));
  const std::string tree_var = var_of(env, o.tree, "TREE", cname);
  std::string tree = env_or(env, o.tree, "STRATA_TREE_" + cname);
  tree = env_or(env, tree, "STRATA_TREE");
  const std::string who = who_of(kind, rank);
  std::size_t pos = 0;
  while (pos < tree.size()) {
    const std::size_t comma = tree.find(',', pos);
    const std::string item = tree.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const std::size_t colon = item.find(':');
    if (colon == std::string::npos)
      throw Error(Errc::invalid_argument, arg(who, "tree", tree, o.tree, tree_var) + ": expected level:shape items");
    const std::string level = item.substr(0, colon);
    const Shape sh = parse_shape(item.substr(colon + 1), arg(who, "tree", tree, o.tree, tree_var));
    if (level == "host") {
      a->host = sh;
    } else if (level == "package") {
      a->package = sh;
    } else if (level == "numa") {
      a->numa = sh;
    } else if (level == "core") {
      a->core = sh;
    } else if (level == "single") {
      a->single = sh;
      a->hierarchical = false;
      a->name = "single";  // the single-level tree row (its name in every tree collective)
    } else {
      throw Error(Errc::invalid_argument, arg(who, "tree", tree, o.tree, tree_var) + ": level '" + level +
                                              "' is not host|package|numa|core|single");
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  a->tree_from_table = tree.empty();  // no tree named: the tuning table's shapes (coll::with_table)
}

// Fragmentation: CollOptions::fragment, STRATA_FRAGMENT_<COLL>, STRATA_FRAGMENT.
void parse_fragment(Kind kind, const Options& o, const Environment& env, int rank, Algorithm* a) {
  const std::string cname = upper(to_string(kind));
  const std::string frag_var = var_of(env, o.fragment, "FRAGMENT", cname);
  std::string frag = env_or(env, o.fragment, "STRATA_FRAGMENT_" + cname);
  frag = env_or(env, frag, "STRATA_FRAGMENT");
  if (frag.empty() || frag == "auto") return;
  const std::string where = arg(who_of(kind, rank), "fragment", frag, o.fragment, frag_var);
  const std::size_t colon = frag.find(':');
  const std::string mode = frag.substr(0, colon);
  long v = 0;
  if (colon != std::string::npos) {
    char* end = nullptr;
    v = std::strtol(frag.c_str() + colon + 1, &end, 10);
    if (*end != '\0' || v <= 0) throw Error(Errc::invalid_argument, where + ": bad size");
  }
  if (mode == "none") {
    a->fragment = std::size_t{1} << 40;
  } else if (mode == "fixed" && v > 0) {
    a->fragment = static_cast<std::size_t>(v);
  } else if (mode == "halves") {
    a->halves_threshold = v > 0 ? static_cast<std::size_t>(v) : 8192;
  } else {
    throw Error(Errc::invalid_argument, where + ": expected none | fixed:BYTES | halves[:BYTES]");
  }
}

// Direction: the per-call option and STRATA_DIRECTION_<COLL> apply as given
// (pull on a push-only collective is an error); the global STRATA_DIRECTION
// only reaches the collectives that can pull.
void parse_directions(Kind kind, const Options& o, const Environment& env, int rank, Algorithm* a) {
  const std::string cname = upper(to_string(kind));
  if (!o.direction.empty()) {
    parse_direction(kind, o.direction, "CollOptions::direction", rank, a);
  } else if (const std::string* v = env.find("STRATA_DIRECTION_" + cname); v != nullptr) {
    parse_direction(kind, *v, "STRATA_DIRECTION_" + cname, rank, a);
  } else if (const std::string* all = env.find("STRATA_DIRECTION"); all != nullptr && pull_capable(kind)) {
    parse_direction(kind, *all, "STRATA_DIRECTION", rank, a);
  } else {
    a->direction_from_table = true;  // no direction named: the tuning table's (coll::with_table)
  }
}

// The tree collectives' resolution: the algorithm name (tree rows; not for
// the step schedules, which name theirs after), then tree shapes,
// fragmentation and directions. Barrier parses its name only.
Algorithm choose(Kind kind, const Options& o, const Environment& env, int rank, bool named = true) {
  Algorithm a;
  if (named) tree_name(kind, o, env, rank, &a);
  if (kind == Kind::barrier) return a;
  parse_tree(kind, o, env, rank, &a);
  parse_fragment(kind, o, env, rank, &a);
  parse_directions(kind, o, env, rank, &a);
  return a;
}

// allgather(v), alltoall(v), reduce_scatter(_block): a schedule name or automatic ("auto").
Algorithm select_symmetric(const Request& r, const Environment& env) {
  const Kind kind = r.kind;
  const Options& o = r.options;
  std::string name = env_or(env, o.algorithm, "STRATA_ALGO_" + upper(to_string(kind)));
  name = env_or(env, name, "STRATA_ALGO_" + upper(family(kind)));
  if (means_automatic(kind, name)) name.clear();
  const std::string who = std::string(to_string(kind)) + " on rank " + std::to_string(r.rank);
  const AlgorithmRow* row = name.empty() ? nullptr : find_algorithm(kind, name);
  if (!name.empty() && (row == nullptr || !row->selectable))
    throw Error(Errc::invalid_argument,
                who + ": argument 'algorithm' = '" + name + "': unknown (" + algorithm_names(kind) + ")");
  // Step schedules have no tree: a tree shape asked for this call is an error,
  // not silently ignored (the global STRATA_TREE only reaches tree collectives).
  const std::string tree = env_or(env, o.tree, "STRATA_TREE_" + upper(to_string(kind)));
  if (!tree.empty())
    throw Error(Errc::invalid_argument,
                who + ": argument 'tree' = '" + tree + "' does not apply: " + family(kind) +
                    " runs a step schedule (ring, Bruck, recursive doubling, pairwise), not a tree; choose one with "
                    "'algorithm' (" +
                    algorithm_names(kind) + ")");
  Options t = o;
  t.tree.clear();
  t.algorithm.clear();
  Algorithm a = choose(kind, t, env, r.rank, false);  // tree shapes (global), fragment, direction
  a.name = name.empty() ? "auto" : name;
  return a;
}

// gather(v), scatter(v): tree rows through choose(), the direct ones (flat, ring, mapped) by name.
Algorithm select_rooted(const Request& r, const Environment& env) {
  const Kind kind = r.kind;
  const Options& o = r.options;
  const std::string cname = upper(to_string(kind));
  std::string algo = env_or(env, o.algorithm, "STRATA_ALGO_" + cname);
  const bool automatic = means_automatic(kind, algo);
  // The default: the tree; flat for the v-variants, whose tree needs the counts on every rank first.
  if (automatic) algo = default_algorithm(kind)->name;
  const AlgorithmRow* row = find_algorithm(kind, algo);
  const std::string who = std::string(to_string(kind)) + " on rank " + std::to_string(r.rank) + r.comm + ": ";
  if (row == nullptr || !row->selectable)
    throw Error(Errc::invalid_argument, who + "argument 'algorithm' = '" + algo + "': unknown (" +
                                            algorithm_names(kind) + "); see docs/algorithms.md");
  bool direct = !row->tree;
  Options rest = o;
  rest.algorithm = direct ? "tree" : algo;
  Algorithm a = choose(kind, rest, env, r.rank);
  // Pull needs the tree: an automatic choice (flat for scatterv) becomes the tree.
  if (automatic && direct && a.any_pull()) direct = false;
  if (direct) a.name = algo;
  if (direct && a.any_pull())
    throw Error(Errc::invalid_argument, who +
                                            "argument 'direction': pull needs a tree algorithm (tree | single), not '" +
                                            algo + "' (the root of flat / ring pushes every block)");
  return a;
}

// allreduce: the decision table (coll::allreduce_auto) when automatic; tree rows
// through choose(); the schedule rows keep choose()'s fragment options.
Algorithm select_allreduce(const Request& r, const Group& g, const Environment& env) {
  const Options& o = r.options;
  std::string name = env_or(env, o.algorithm, "STRATA_ALGO_ALLREDUCE");
  if (means_automatic(Kind::allreduce, name)) {
    // The measured decision table; the tree stays the choice for a
    // communicator of one rank and large non-commutative reductions.
    name = allreduce_auto(g, r.bytes, r.ordered);
    if (find_algorithm(Kind::allreduce, name) == default_algorithm(Kind::allreduce)) name.clear();
  }
  const AlgorithmRow* row = name.empty() ? default_algorithm(Kind::allreduce) : find_algorithm(Kind::allreduce, name);
  const bool tree = row != nullptr && row->tree;
  Options topts = o;
  topts.algorithm = tree && !name.empty() ? name : "tree";
  if (tree) return choose(Kind::allreduce, topts, env, r.rank);
  const std::string who = "allreduce on rank " + std::to_string(r.rank);
  if (row == nullptr || !row->selectable)
    throw Error(Errc::invalid_argument,
                who + ": argument 'algorithm' = '" + name + "': unknown (" + algorithm_names(Kind::allreduce) + ")");
  if (r.ordered) check_rank_order({"allreduce", r.rank, g.size(), -1}, Kind::allreduce, name, r.op_name);
  Algorithm a = choose(Kind::allreduce, topts, env, r.rank);
  a.name = row->name;
  return a;
}

}  // namespace

const Environment& Environment::process() {
  static const Environment env = [] {
    std::unordered_map<std::string, std::string> m;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      const std::string kv = *e;
      const std::size_t eq = kv.find('=');
      if (kv.rfind("STRATA_", 0) == 0 && eq != std::string::npos) m.emplace(kv.substr(0, eq), kv.substr(eq + 1));
    }
    return Environment(std::move(m));
  }();
  return env;
}

const std::string* Environment::find(const std::string& var) const {
  strata::detail::env::require(var);  // every STRATA_ name is in the registry (docs/environment.md)
  const auto it = vars_.find(var);
  return it == vars_.end() ? nullptr : &it->second;
}

bool Environment::algorithm_set(Kind kind) const {
  const std::string name = upper(to_string(kind));
  return vars_.count("STRATA_ALGO_" + name) > 0 || vars_.count("STRATA_ALGO_" + upper(family(kind))) > 0;
}

Shape parse_shape(const std::string& s, const std::string& what) {
  if (s == "flat") return {Shape::flat, 0};
  if (s == "binary") return {Shape::binary, 0};
  if (s == "chain") return {Shape::knomial, 1};
  if (s == "binomial") return {Shape::knomial, 2};
  char* end = nullptr;
  const long k = std::strtol(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0' || k < 1 || k > 64)
    throw Error(Errc::invalid_argument,
                what + ": tree shape '" + s + "' is not flat|binary|chain|binomial|<radix 1..64>");
  return {Shape::knomial, static_cast<int>(k)};
}

Algorithm select_algorithm(const Request& r, const Group& g, const Environment& env) {
  switch (r.kind) {
    case Kind::barrier:
    case Kind::broadcast:
    case Kind::reduce:
      return choose(r.kind, r.options, env, r.rank);
    case Kind::allreduce:
      return select_allreduce(r, g, env);
    case Kind::gather:
    case Kind::gatherv:
    case Kind::scatter:
    case Kind::scatterv:
      return select_rooted(r, env);
    default:
      return select_symmetric(r, env);
  }
}

bool automatic_call(Kind kind, const Options& o, bool strict, const Environment& env) {
  return !strict && automatic_request(o.algorithm) && o.tree.empty() && o.fragment.empty() && o.direction.empty() &&
         !env.algorithm_set(kind);
}

Call planning_call(const Group& g, Kind kind, std::uint64_t bytes, const Options& o, const Environment& env) {
  Call c;
  c.kind = kind;
  const bool reduces = kind == Kind::reduce || kind == Kind::allreduce || kind == Kind::reduce_scatter ||
                       kind == Kind::reduce_scatter_block;
  c.dtype = reduces ? dag::DataType::f32 : dag::DataType::u8;
  c.count = bytes / dag::datatype_size(c.dtype);
  const auto n = static_cast<std::size_t>(g.size());
  if (kind == Kind::gatherv || kind == Kind::scatterv || kind == Kind::allgatherv || kind == Kind::alltoallv ||
      kind == Kind::reduce_scatter) {
    c.counts.assign(n, c.count);
    for (std::size_t r = 0; r < n; ++r) c.displs.push_back(r * c.count);
    if (kind == Kind::alltoallv) {
      c.rcounts = c.counts;
      c.rdispls = c.displs;
    }
  }
  Request r;
  r.kind = kind;
  r.options = o;
  r.rank = g.rank;
  r.bytes = bytes;
  c.algo = select_algorithm(r, g, env);
  c.fast_ok = automatic_call(kind, o, false, env);
  return c;
}

void memory_plans(Group* g, bool single_copy, bool mapped) {
  if (!g->flags || g->size() < 2) return;
  // Word layout past the slots' flag words (the engine's differs in where,
  // not in what): the publication records, then the mapped area's records.
  // Multi-host groups: publication records only (same-host single copy).
  const auto credits = static_cast<std::uint32_t>(std::max(1, g->credits));
  const std::uint32_t publish = (credits + dag::kPublishWords) / dag::kPublishWords * dag::kPublishWords;
  if (single_copy) g->publish_word = publish;
  if (!mapped || g->spans_hosts()) return;
  static const Tuning kDefaults{};
  const Tuning& t = g->tuning ? *g->tuning : kDefaults;
  g->mapped_slot_bytes = mapped_slot_bytes(t.mapped_max_bytes, g->size(), g->slot_bytes);
  g->mapped_word = (publish + dag::kPublishWords * credits + 15) / 16 * 16;
  g->mapped_at = g->slot_bytes * credits + std::size_t{g->mapped_word} * 4;
  g->mapped_slots = 0;  // the credits: every instance's shift is 0
}

Group planning_group(int ranks, int hosts, const std::vector<LocalPlace>& local) {
  Group g;
  g.world_size = ranks;
  g.slot_bytes = std::size_t{1} << 20;
  g.credits = 4;
  g.flags = true;
  int first = 0;  // the first rank of the current host
  for (int r = 0; r < ranks; ++r) {
    g.world.push_back(r);
    g.host.push_back(static_cast<int>(static_cast<long long>(r) * hosts / std::max(1, ranks)));
    if (r > 0 && g.host[static_cast<std::size_t>(r)] != g.host[static_cast<std::size_t>(r - 1)]) first = r;
    const LocalPlace p = local.empty() ? LocalPlace{} : local[static_cast<std::size_t>(r - first) % local.size()];
    g.numa.push_back(p.numa);
    g.package.push_back(p.package);
  }
  g.grants = g.spans_hosts();
  memory_plans(&g, !strata::detail::env::is("STRATA_SINGLE_COPY", "off"),
               !strata::detail::env::is("STRATA_MAPPED", "off"));
  return g;
}

bool uses_tree(Kind kind, const Algorithm& a) {
  const AlgorithmRow* row = find_algorithm(kind, a.name);
  return row == nullptr || row->tree;
}

}  // namespace strata::coll
