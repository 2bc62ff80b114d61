// Engine internals (not installed): argument checks of the public calls. Each
// throws strata::Error (invalid_argument) naming the collective, the argument,
// the rank and the communicator.
#pragma once

#include <memory>
#include <string>

#include "comm.hpp"

namespace strata::detail {

[[noreturn]] inline void bad(const char* coll, const CommImpl& c, const std::string& what) {
  throw Error(Errc::invalid_argument, std::string(coll) + " on rank " + std::to_string(c.rank()) + " (comm " +
                                          std::to_string(c.id) + "): " + what);
}

inline void check_buffer(const char* coll, const CommImpl& c, const char* name, const void* p, std::size_t bytes) {
  if (bytes > 0 && p == nullptr) bad(coll, c, std::string("argument '") + name + "' is null with a nonzero count");
}

inline void check_count(const char* coll, const CommImpl& c, std::size_t count, std::size_t esize) {
  if (esize != 0 && count > (std::size_t{1} << 40) / esize)
    bad(coll, c, "argument 'count' = " + std::to_string(count) + " is too large (negative or overflowed?)");
}

inline void check_root(const char* coll, const CommImpl& c, int root) {
  if (root < 0 || root >= c.size())
    bad(coll, c, "argument 'root' = " + std::to_string(root) + " outside [0, " + std::to_string(c.size()) + ")");
}

inline void check_overlap(const char* coll, const CommImpl& c, const void* a, std::size_t alen, const void* b,
                          std::size_t blen) {
  if (a == nullptr || b == nullptr || alen == 0 || blen == 0) return;
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  const auto y = reinterpret_cast<std::uintptr_t>(b);
  if (x < y + blen && y < x + alen)
    bad(coll, c, "arguments 'send' and 'recv' overlap (use strata::in_place for an in-place call)");
}

inline std::shared_ptr<const dag::UserReduce> wrap(const UserOp& op, const char* coll, const CommImpl& c) {
  if (!op.fn) bad(coll, c, "argument 'op': user op has no function");
  if (op.elem_size == 0) bad(coll, c, "argument 'op': user op elem_size is 0");
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
