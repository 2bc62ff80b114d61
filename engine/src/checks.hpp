// Engine internals (not installed): the argument checks of the public calls
// that only the engine can make (buffers, in_place, the handle), and the site
// of the checks shared with the compiler (strata/collectives/checks.hpp: root,
// counts, user op, op vs datatype, v-variant layouts, rank order), which the
// engine runs on the way in before it marks the call coll::Call::checked.
// Each throws strata::Error (invalid_argument) naming the collective, the
// argument, the rank and the communicator.
#pragma once

#include <memory>
#include <string>

#include "comm.hpp"
#include "strata/collectives/checks.hpp"

namespace strata::detail {

/// The site of a check of collective @p n on @p c (messages "<coll> on rank R (comm C): ...").
inline coll::CheckSite site(const char* n, const CommImpl& c) { return {n, c.rank(), c.size(), c.id}; }

[[noreturn]] inline void bad(const char* n, const CommImpl& c, const std::string& what) {
  coll::fail_argument(site(n, c), Errc::invalid_argument, what);
}

inline void check_buffer(const char* coll, const CommImpl& c, const char* name, const void* p, std::size_t bytes) {
  if (bytes > 0 && p == nullptr) bad(coll, c, std::string("argument '") + name + "' is null with a nonzero count");
}

inline void check_overlap(const char* coll, const CommImpl& c, const void* a, std::size_t alen, const void* b,
                          std::size_t blen) {
  if (a == nullptr || b == nullptr || alen == 0 || blen == 0) return;
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  const auto y = reinterpret_cast<std::uintptr_t>(b);
  if (x < y + blen && y < x + alen)
    bad(coll, c, "arguments 'send' and 'recv' overlap (use strata::in_place for an in-place call)");
}

inline std::shared_ptr<const dag::UserReduce> wrap(const UserOp& op, const char* n, const CommImpl& c) {
  coll::check_user_op(site(n, c), static_cast<bool>(op.fn), op.elem_size);
  auto u = std::make_shared<dag::UserReduce>();
  u->fn = op.fn;
  u->elem_size = op.elem_size;
  u->commutative = op.commutative;
  u->name = op.name;
  return u;
}

inline void need(const std::shared_ptr<CommImpl>& p, const char* what) {
  if (!p) throw Error(Errc::invalid_argument, std::string(what) + ": invalid communicator handle");
}

}  // namespace strata::detail
