// Gather, scatter and their v-variants (in progress).
#include "compile_common.hpp"

namespace strata::coll::cc {

std::shared_ptr<const dag::Plan> compile_gather(const Group& g, const Call& c, int) {
  fail(Errc::unsupported, g, c, "not available yet");
}

std::shared_ptr<const dag::Plan> compile_scatter(const Group& g, const Call& c, int) {
  fail(Errc::unsupported, g, c, "not available yet");
}

}  // namespace strata::coll::cc
