// Engine internals (not installed): the algorithm of one call, from the
// per-call CollOptions, the STRATA_ALGO_* / STRATA_TREE* / STRATA_FRAGMENT* /
// STRATA_DIRECTION* variables and the defaults (docs/algorithms.md,
// "Selection"), memoized per thread; synchronization and the automatic plans' eligibility.
#pragma once

#include <string>
#include <unordered_map>

#include "comm.hpp"

namespace strata::old_sel {
using namespace strata::detail;

inline coll::Shape parse_shape(const std::string& s, const std::string& what) {
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

// The STRATA_* selection variables, read once (first use) instead of a
// getenv per call; changing them after the first collective has no effect.
inline const std::unordered_map<std::string, std::string>& strata_env() {
  static const std::unordered_map<std::string, std::string> env = [] {
    std::unordered_map<std::string, std::string> m;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      const std::string kv = *e;
      const std::size_t eq = kv.find('=');
      if (kv.rfind("STRATA_", 0) == 0 && eq != std::string::npos) m.emplace(kv.substr(0, eq), kv.substr(eq + 1));
    }
    return m;
  }();
  return env;
}

inline std::string env_or(const std::string& v, const std::string& var) {
  if (!v.empty()) return v;
  strata::detail::env::require(var);  // every STRATA_ name is in the registry (docs/environment.md)
  const auto& env = strata_env();
  const auto it = env.find(var);
  return it == env.end() ? std::string() : it->second;
}

inline std::string upper(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

// Whether a collective can pull (docs/algorithms.md): broadcast and the scatters.
inline bool pull_capable(coll::Kind kind) {
  return kind == coll::Kind::broadcast || kind == coll::Kind::scatter || kind == coll::Kind::scatterv;
}

// Parses a direction spec into @p a: "push" | "pull" | "auto" | "" (all levels), or
// comma-separated "level:push|pull" items, level host | numa | core | single.
// Throws strata::Error naming the argument 'direction', the collective and the rank.
inline void parse_direction(coll::Kind kind, const std::string& spec, const std::string& from, int rank,
                            coll::Algorithm* a) {
  const std::string who =
      std::string(coll::to_string(kind)) + (rank >= 0 ? " on rank " + std::to_string(rank) : std::string());
  auto dir = [&](const std::string& v) {
    if (v == "push") return coll::Direction::push;
    if (v == "pull") return coll::Direction::pull;
    throw Error(Errc::invalid_argument,
                who + ": argument 'direction' = '" + spec + "' (" + from + "): '" + v +
                    "' is not push | pull (e.g. \"pull\" or \"host:pull,numa:push,core:pull\")");
  };
  if (spec.empty() || spec == "auto") return;
  if (spec.find(':') == std::string::npos) {
    a->dir_host = a->dir_numa = a->dir_core = a->dir_single = dir(spec);
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
      const coll::Direction d = dir(item.substr(colon + 1));
      if (level == "host")
        a->dir_host = d;
      else if (level == "numa")
        a->dir_numa = d;
      else if (level == "core")
        a->dir_core = d;
      else if (level == "single")
        a->dir_single = d;
      else
        throw Error(Errc::invalid_argument, who + ": argument 'direction' = '" + spec + "' (" + from + "): level '" +
                                                level + "' is not host | numa | core | single");
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  if (a->any_pull() && !pull_capable(kind))
    throw Error(Errc::invalid_argument, who + ": argument 'direction' = '" + spec + "' (" + from +
                                            "): pull applies to broadcast, scatter and " + "scatterv only; " +
                                            coll::to_string(kind) + " moves data by push");
}

// Resolves the algorithm of one call: per-call options, then STRATA_ALGO_<COLL>,
// STRATA_TREE_<COLL>/STRATA_TREE, STRATA_FRAGMENT_<COLL>/STRATA_FRAGMENT,
// STRATA_DIRECTION_<COLL>/STRATA_DIRECTION (the latter only for the collectives
// that can pull), then defaults. @p rank (the caller's communicator rank, -1 if
// unknown) is named in errors.
inline coll::Algorithm choose_uncached(coll::Kind kind, const CollOptions& o, int rank) {
  const std::string cname = upper(coll::to_string(kind));
  const std::string who =
      std::string(coll::to_string(kind)) + (rank >= 0 ? " on rank " + std::to_string(rank) : std::string());
  // "argument 'tree' = 'host:banana' (CollOptions::tree)" or "(STRATA_TREE_BROADCAST)".
  auto arg = [&](const char* name, const std::string& value, const std::string& given, const std::string& var) {
    return who + ": argument '" + name + "' = '" + value + "' (" +
           (!given.empty() ? std::string("CollOptions::") + name : var) + ")";
  };
  coll::Algorithm a;
  const std::string algo_var = o.algorithm.empty() ? "STRATA_ALGO_" + cname : std::string();
  const std::string algo = env_or(o.algorithm, "STRATA_ALGO_" + cname);
  if (kind == coll::Kind::barrier) {
    a.name = "dissemination";
    // Tree algorithm names are accepted (options are often shared between calls).
    if (algo == "mapped")
      a.name = "mapped";  // docs/algorithms.md, "Mapped plans"
    else if (!algo.empty() && algo != "dissemination" && algo != "tree" && algo != "single")
      throw Error(Errc::invalid_argument,
                  arg("algorithm", algo, o.algorithm, algo_var) + ": unknown (dissemination | mapped)");
    return a;
  }
  if (algo.empty() || algo == "tree" || algo == "hierarchical") {
    a.name = "tree";
    a.hierarchical = true;
  } else if (algo == "single" || algo == "flat-tree") {
    a.name = "single";
    a.hierarchical = false;
  } else if (algo == "single-copy" && kind == coll::Kind::broadcast) {
    a.name = "single-copy";  // docs/algorithms.md, "Single copy"
  } else if (algo == "mapped") {
    a.name = "mapped";  // docs/algorithms.md, "Mapped plans"
  } else {
    throw Error(Errc::invalid_argument,
                arg("algorithm", algo, o.algorithm, algo_var) + ": unknown (tree | single | mapped" +
                    (kind == coll::Kind::broadcast ? " | single-copy" : "") + "); see docs/algorithms.md");
  }
  std::string tree = env_or(o.tree, "STRATA_TREE_" + cname);
  const std::string tree_var = !o.tree.empty()                                   ? std::string()
                               : strata_env().count("STRATA_TREE_" + cname) != 0 ? "STRATA_TREE_" + cname
                                                                                 : "STRATA_TREE";
  tree = env_or(tree, "STRATA_TREE");
  std::size_t pos = 0;
  while (pos < tree.size()) {
    const std::size_t comma = tree.find(',', pos);
    const std::string item = tree.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const std::size_t colon = item.find(':');
    if (colon == std::string::npos)
      throw Error(Errc::invalid_argument, arg("tree", tree, o.tree, tree_var) + ": expected level:shape items");
    const std::string level = item.substr(0, colon);
    const coll::Shape sh = parse_shape(item.substr(colon + 1), arg("tree", tree, o.tree, tree_var));
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
                  arg("tree", tree, o.tree, tree_var) + ": level '" + level + "' is not host|numa|core|single");
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  a.tree_from_table = tree.empty();  // no tree named: the tuning table's shapes (coll::with_table)
  std::string frag = env_or(o.fragment, "STRATA_FRAGMENT_" + cname);
  const std::string frag_var = !o.fragment.empty()                                   ? std::string()
                               : strata_env().count("STRATA_FRAGMENT_" + cname) != 0 ? "STRATA_FRAGMENT_" + cname
                                                                                     : "STRATA_FRAGMENT";
  frag = env_or(frag, "STRATA_FRAGMENT");
  if (!frag.empty() && frag != "auto") {
    const std::size_t colon = frag.find(':');
    const std::string mode = frag.substr(0, colon);
    long v = 0;
    if (colon != std::string::npos) {
      char* end = nullptr;
      v = std::strtol(frag.c_str() + colon + 1, &end, 10);
      if (*end != '\0' || v <= 0)
        throw Error(Errc::invalid_argument, arg("fragment", frag, o.fragment, frag_var) + ": bad size");
    }
    if (mode == "none") {
      a.fragment = std::size_t{1} << 40;
    } else if (mode == "fixed" && v > 0) {
      a.fragment = static_cast<std::size_t>(v);
    } else if (mode == "halves") {
      a.halves_threshold = v > 0 ? static_cast<std::size_t>(v) : 8192;
    } else {
      throw Error(Errc::invalid_argument,
                  arg("fragment", frag, o.fragment, frag_var) + ": expected none | fixed:BYTES | halves[:BYTES]");
    }
  }
  // Direction: the per-call option and STRATA_DIRECTION_<COLL> apply as given
  // (pull on a push-only collective is an error); the global STRATA_DIRECTION
  // only reaches the collectives that can pull.
  const auto& env = strata_env();
  if (!o.direction.empty()) {
    parse_direction(kind, o.direction, "CollOptions::direction", rank, &a);
  } else if (const auto it = env.find("STRATA_DIRECTION_" + cname); it != env.end()) {
    parse_direction(kind, it->second, "STRATA_DIRECTION_" + cname, rank, &a);
  } else if (const auto all = env.find("STRATA_DIRECTION"); all != env.end() && pull_capable(kind)) {
    parse_direction(kind, all->second, "STRATA_DIRECTION", rank, &a);
  } else {
    a.direction_from_table = true;  // no direction named: the tuning table's (coll::with_table)
  }
  return a;
}

// A small per-thread memo of algorithm resolutions: the environment is read
// once per process, so (kind, the four option strings, rank) determine the
// result of @p uncached. Resolving by parsing on every call cost 0.3-1 us of
// a small collective (string building and registry lookups, perf). Each
// distinct @p F (one lambda per call site) has its own memo. Errors are not
// memoized (they throw again).
template <class F>
coll::Algorithm memo_algorithm(coll::Kind kind, const CollOptions& o, int rank, F&& uncached) {
  struct Entry {
    coll::Kind kind;
    int rank;
    std::string algorithm, tree, fragment, direction;
    coll::Algorithm result;
  };
  constexpr std::size_t kEntries = 16;
  thread_local std::vector<Entry> memo;
  thread_local std::size_t next = 0;
  for (const Entry& e : memo)
    if (e.kind == kind && e.rank == rank && e.algorithm == o.algorithm && e.tree == o.tree &&
        e.fragment == o.fragment && e.direction == o.direction)
      return e.result;
  coll::Algorithm a = uncached();
  Entry e{kind, rank, o.algorithm, o.tree, o.fragment, o.direction, a};
  if (memo.size() < kEntries) {
    memo.push_back(std::move(e));
  } else {
    memo[next] = std::move(e);
    next = (next + 1) % kEntries;
  }
  return a;
}

// choose_uncached() through the memo.
inline coll::Algorithm choose(coll::Kind kind, const CollOptions& o, int rank = -1) {
  return memo_algorithm(kind, o, rank, [&] { return choose_uncached(kind, o, rank); });
}

// Whether STRATA_ALGO_<COLL> or STRATA_ALGO_<FAMILY> names an algorithm for @p kind (read once).
inline bool algo_env_set(coll::Kind kind) {
  static const std::vector<bool> set = [] {
    std::vector<bool> v;
    const auto& env = strata_env();
    for (int k = 0; k <= static_cast<int>(coll::Kind::reduce_scatter_block); ++k) {
      const std::string name = upper(coll::to_string(static_cast<coll::Kind>(k)));
      std::string fam = name;
      for (const char* suffix : {"V", "_BLOCK"}) {
        const std::string sx = suffix;
        if (fam.size() > sx.size() && fam.compare(fam.size() - sx.size(), sx.size(), sx) == 0 && fam != "ALLREDUCE")
          fam.resize(fam.size() - sx.size());
      }
      v.push_back(env.count("STRATA_ALGO_" + name) > 0 || env.count("STRATA_ALGO_" + fam) > 0);
    }
    return v;
  }();
  const auto i = static_cast<std::size_t>(kind);
  return i < set.size() && set[i];
}

// Default options: the call's plan depends only on its PlainSig (the
// selection reads the communicator, the tuning table and the environment,
// fixed for the engine's life), so a window slot's memo can start it
// (CommImpl::submit_plain). "auto" counts as an explicit algorithm here.
inline bool plain_options(const CollOptions& o) noexcept {
  return o.algorithm.empty() && o.sync.entry == SyncMode::mine && o.sync.exit == SyncMode::mine && o.tree.empty() &&
         o.fragment.empty() && o.direction.empty() && !o.shared_buffers && !o.on_block;
}

// Strict synchronization and the automatic memory-protocol plans' eligibility (an automatic
// algorithm, no per-call tree / fragment / direction, loose).
inline void apply_sync(coll::Call& c, const CollOptions& o) {
  c.entry_all = o.sync.entry == SyncMode::all;
  c.exit_all = o.sync.exit == SyncMode::all;
  c.fast_ok = !c.entry_all && !c.exit_all && (o.algorithm.empty() || o.algorithm == "auto") && o.tree.empty() &&
              o.fragment.empty() && o.direction.empty() && !o.on_block && !algo_env_set(c.kind);
  c.shared_buffers = o.shared_buffers;
}

}  // namespace strata::old_sel
