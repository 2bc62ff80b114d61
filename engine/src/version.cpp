#include "strata/version.hpp"

namespace strata {
const char* version() noexcept { return "0.1.0"; }
}  // namespace strata
