// The plan-cache key of a call (engine internals, not installed): every field
// of coll::Call that changes the compiled plan, as raw bytes. CommImpl::submit
// looks plans up by it (its window-slot memos, then the cache).
//
// The fields are listed once, in for_each_key_field(), through structured
// bindings of coll::Call, coll::Algorithm and coll::Shape: a field added to
// one of them makes the binding fail to compile here until it is listed,
// either in the key or as excluded with its reason. A missed field would
// silently let two different calls share one plan.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "strata/collectives/compile.hpp"

namespace strata::detail {

/// The bytes of one key. On the stack when they fit (no v-collective counts,
/// a short algorithm name: the loop case), else in a per-thread string: no
/// allocation per call (ten appends into a fresh string cost ~1,500
/// instructions, callgrind). Valid until the next key built on this thread.
struct CacheKeyBuffer {
  std::array<char, 192> fixed;
  std::size_t n = 0;
};

namespace key_detail {

/// Calls @p scalar(v) for every fixed-size field of @p c in the key, then
/// @p vec(v) for every per-rank vector, then @p name(s) for the algorithm
/// name (the key's variable-length tail). Returns false (no key: the plan is
/// not cached) for calls whose plan cannot be shared.
template <class Scalar, class Vec, class Name>
bool for_each_key_field(const coll::Call& c, Scalar&& scalar, Vec&& vec, Name&& name) {
  const auto& [kind, count, dtype, op, user_op, root, in_place, entry_all, exit_all, counts, displs, rcounts, rdispls,
               direct, on_block, compute, algo, fast_ok, shared_buffers, checked, tag] = c;
  // Not cached: a user reduction is code in the plan. The on_block and
  // compute callables are bound per start (Bindings::compute): only whether
  // the call has them shapes the plan.
  if (user_op) return false;
  // Not in the key: the tag only routes the call to its communicator's tag
  // lane (CommImpl::submit_tagged), whose plans do not depend on it.
  (void)tag;
  // Not in the key: whether the engine checked the arguments (the plan does not depend on it).
  (void)checked;
  const auto& [algo_name, hierarchical, host, numa, core, package, single, fragment, halves_threshold, dir_host,
               dir_numa, dir_core, dir_single, dir_package, max_outstanding, tree_from_table, direction_from_table] =
      algo;
  scalar(kind);
  scalar(count);
  scalar(dtype);
  scalar(op);
  scalar(root);
  // fast_ok is not compiled, but the engine runs memory-protocol plans only
  // for such calls, so it keeps them apart.
  scalar(static_cast<std::uint8_t>(in_place | entry_all << 1 | exit_all << 2 | direct << 3 | hierarchical << 4 |
                                   fast_ok << 5 | tree_from_table << 6 | direction_from_table << 7));
  scalar(static_cast<std::uint8_t>(shared_buffers));  // single-copy plans read through the mappings
  scalar(static_cast<std::uint8_t>(static_cast<bool>(on_block) | static_cast<bool>(compute) << 1));
  for (const coll::Shape* sh : {&host, &package, &numa, &core, &single}) {
    const auto& [shape_kind, radix] = *sh;
    scalar(shape_kind);
    scalar(radix);
  }
  scalar(fragment);
  scalar(halves_threshold);
  scalar(static_cast<std::uint8_t>(static_cast<unsigned>(dir_host) | static_cast<unsigned>(dir_numa) << 1 |
                                   static_cast<unsigned>(dir_core) << 2 | static_cast<unsigned>(dir_single) << 3 |
                                   static_cast<unsigned>(dir_package) << 4));
  scalar(max_outstanding);
  for (const std::vector<std::size_t>* v : {&counts, &displs, &rcounts, &rdispls}) vec(*v);
  name(algo_name);
  return true;
}

}  // namespace key_detail

/// @brief The key of @p c in @p buf; empty when @p c is not cached (a user
/// reduction or an on_block callback). The window slot is not in it: each
/// slot remembers its last plan, and the cache's key adds the slot.
inline std::string_view cache_key(const coll::Call& c, CacheKeyBuffer& buf) {
  thread_local std::string long_key;
  buf.n = 0;
  bool vectors = false;
  const auto scalar = [&buf](auto v) {
    static_assert(std::is_trivially_copyable_v<decltype(v)> && sizeof v <= 16, "key field");
    std::memcpy(buf.fixed.data() + buf.n, &v, sizeof v);
    buf.n += sizeof v;
  };
  // The fixed fields and the vectors' sizes (which delimit them); the
  // vectors' elements and the name follow.
  std::array<const std::vector<std::size_t>*, 8> vecs{};
  std::size_t nvecs = 0;
  const auto sizes = [&](const std::vector<std::size_t>& v) {
    scalar(v.size());
    vectors = vectors || !v.empty();
    vecs.at(nvecs++) = &v;
  };
  std::string_view algo_name;
  if (!key_detail::for_each_key_field(c, scalar, sizes, [&](const std::string& s) { algo_name = s; })) return {};
  if (!vectors && buf.n + algo_name.size() <= buf.fixed.size()) {
    std::memcpy(buf.fixed.data() + buf.n, algo_name.data(), algo_name.size());
    return {buf.fixed.data(), buf.n + algo_name.size()};
  }
  long_key.assign(buf.fixed.data(), buf.n);
  for (std::size_t i = 0; i < nvecs; ++i)
    long_key.append(reinterpret_cast<const char*>(vecs[i]->data()), vecs[i]->size() * sizeof(std::size_t));
  long_key += algo_name;
  return long_key;
}

}  // namespace strata::detail
