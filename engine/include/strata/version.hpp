// strata version information.
#pragma once

namespace strata {
/// @brief Library version as "major.minor.patch".
const char* version() noexcept;
}  // namespace strata
