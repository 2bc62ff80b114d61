// The argument checks of the collectives: the one place where a call's
// arguments are validated (docs/algorithms.md, "Argument checks"). The engine
// runs them on the way in, before a call takes a sequence number, and marks
// the call Call::checked; compile() runs check_call() for a call that is not
// so marked (strata-sim, tests and tools compiling directly), so every
// argument is checked once on every path. Each check throws strata::Error
// (invalid_argument, or unsupported for an operator that cannot run) naming
// the argument, the collective and the rank.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "strata/collectives/compile.hpp"
#include "strata/dag/reduce.hpp"
#include "strata/error.hpp"

namespace strata::coll {

/// @brief Where a check runs, for its messages: "<coll> on rank <rank>: ..."
/// or, with a communicator id (the engine's), "<coll> on rank <rank> (comm <id>): ...".
struct CheckSite {
  const char* coll = "";  ///< the collective's name (to_string(Kind))
  int rank = 0;           ///< the caller's communicator rank
  int size = 1;           ///< ranks in the communicator
  int comm = -1;          ///< the communicator's id; -1 = none in the message
};

/// @brief Throws strata::Error(@p code) "<coll> on rank <rank>[ (comm <id>)]: @p what".
[[noreturn]] void fail_argument(const CheckSite& s, Errc code, const std::string& what);

/// @brief Elements per rank above which a count is refused: 2^40 bytes of @p esize-byte elements.
[[nodiscard]] constexpr std::size_t max_elements(std::size_t esize) noexcept {
  return esize == 0 ? ~std::size_t{0} : (std::size_t{1} << 40) / esize;
}

namespace check_detail {
[[noreturn]] void bad_count(const CheckSite& s, const char* name, std::size_t count);
[[noreturn]] void bad_root(const CheckSite& s, int root);
[[noreturn]] void bad_user_op(const CheckSite& s, bool has_fn);
[[noreturn]] void bad_op(const CheckSite& s, dag::ReduceOp op, dag::DataType dt);
}  // namespace check_detail

/// @brief Argument @p name (an element count; "count" by default) is at most
/// max_elements(@p esize) (a negative count converted to size_t is not).
inline void check_count(const CheckSite& s, std::size_t count, std::size_t esize, const char* name = "count") {
  if (count > max_elements(esize)) check_detail::bad_count(s, name, count);
}

/// @brief Argument 'root' is a rank of the communicator.
inline void check_root(const CheckSite& s, int root) {
  if (root < 0 || root >= s.size) check_detail::bad_root(s, root);
}

/// @brief Argument 'op', a user operator: it has a function and a nonzero element size.
inline void check_user_op(const CheckSite& s, bool has_fn, std::size_t elem_size) {
  if (!has_fn || elem_size == 0) check_detail::bad_user_op(s, has_fn);
}

/// @brief Argument 'op', a built-in operator: defined on @p dt (else unsupported).
inline void check_op(const CheckSite& s, dag::ReduceOp op, dag::DataType dt) {
  if (dag::reduce_kernel(op, dt) == nullptr) check_detail::bad_op(s, op, dt);
}

/// @brief Per-rank argument @p name has one entry per rank of the communicator.
void check_entries(const CheckSite& s, const char* name, const std::vector<std::size_t>& v);

/// @brief Blocks [displs[r], displs[r] + counts[r]) of one buffer (elements of
/// @p esize bytes): one count and displacement per rank, none too large, and
/// unless @p allow_overlap no two nonempty blocks overlap (they are written).
/// @p cname / @p dname name the arguments, @p buffer the buffer. Returns the
/// extent in elements.
std::size_t check_blocks(const CheckSite& s, const char* cname, const char* dname, const char* buffer,
                         const std::vector<std::size_t>& counts, const std::vector<std::size_t>& displs,
                         std::size_t esize, bool allow_overlap);

/// @brief reduce_scatter's 'counts': one per rank, none and not their sum too
/// large. Returns the sum.
std::size_t check_reduce_counts(const CheckSite& s, const std::vector<std::size_t>& counts, std::size_t esize);

/// @brief alltoallv: this rank's block to itself has as many elements in
/// 'send_counts' as in 'recv_counts'.
void check_self_block(const CheckSite& s, const std::vector<std::size_t>& send_counts,
                      const std::vector<std::size_t>& recv_counts);

/// @brief A non-commutative operator (named @p op_name) on @p kind: throws
/// strata::Error(unsupported) when @p algorithm (a name) does not fold in
/// rank order (the registry's AlgorithmRow::keeps_order; an automatic choice
/// always does).
void check_rank_order(const CheckSite& s, Kind kind, const std::string& algorithm, const std::string& op_name);

/// @brief Every argument check above that applies to @p c on @p g: 'root',
/// 'op' (the user operator, or the built-in one against the datatype),
/// 'direction' (pull only where it applies; the engine's selection refuses
/// it from the options, strata/collectives/select.hpp), the
/// v-variants' counts and displacements (gatherv / scatterv at the root,
/// allgatherv, alltoallv, reduce_scatter) and the rank order of a
/// non-commutative operator. compile() runs it for a call not marked
/// Call::checked; the engine runs the same checks on its own arguments.
void check_call(const Group& g, const Call& c);

}  // namespace strata::coll
