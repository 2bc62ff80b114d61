// Allgather(v), alltoall(v), reduce-scatter (in progress).
#include "compile_common.hpp"

namespace strata::coll::cc {

std::shared_ptr<const dag::Plan> compile_allgather(const Group& g, const Call& c, int) {
  fail(Errc::unsupported, g, c, "not available yet");
}

std::shared_ptr<const dag::Plan> compile_alltoall(const Group& g, const Call& c, int) {
  fail(Errc::unsupported, g, c, "not available yet");
}

std::shared_ptr<const dag::Plan> compile_reduce_scatter(const Group& g, const Call& c, int) {
  fail(Errc::unsupported, g, c, "not available yet");
}

}  // namespace strata::coll::cc
