// Logging: one spdlog logger per process, named "strata". Every line carries the
// time, the host, the rank and the pid:
//   [2026-11-26 04:01:02.123] [host rank 1 pid 1234] [info] ...
// Level from STRATA_LOG_LEVEL (trace, debug, info, warn (default), error,
// critical, off); output to stderr, or to STRATA_LOG_FILE (`%r` in the name is
// replaced by the rank: one file per rank). Further sinks (EngineOptions::log_sink)
// receive the same lines.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace strata::detail {

/// @brief The process's strata logger (created on first use).
spdlog::logger& logger();

/// @brief Tags subsequent log lines with the rank and, when STRATA_LOG_FILE
/// contains `%r`, opens the per-rank file (lines before it go to stderr).
void set_log_rank(int rank);

/// @brief Receives every formatted line (without the trailing newline) and its spdlog level.
using LogCallback = std::function<void(spdlog::level::level_enum level, const std::string& line)>;

/// @brief Adds a sink that receives every line the logger writes; returns a handle for remove_log_sink.
int add_log_sink(LogCallback cb);

/// @brief Removes a sink added by add_log_sink (no-op for an unknown handle).
void remove_log_sink(int handle);

}  // namespace strata::detail
