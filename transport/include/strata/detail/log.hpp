// Logging: one spdlog logger per process, named "strata", writing to stderr
// with the rank in every line. Level from STRATA_LOG_LEVEL (trace, debug,
// info, warn (default), error, critical, off).
#pragma once

#include <memory>

#include <spdlog/spdlog.h>

namespace strata::detail {

/// @brief The process's strata logger (created on first use).
spdlog::logger& logger();

/// @brief Tags subsequent log lines with "[rank R]" (called once the rank is known).
void set_log_rank(int rank);

}  // namespace strata::detail
