#include "strata/version.hpp"

namespace strata {
const char* version() noexcept { return STRATA_VERSION_STRING; }
}  // namespace strata
