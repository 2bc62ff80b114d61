// The registry of STRATA_* environment variables: every variable strata's
// libraries and tools read is one row of one table (transport/src/env_registry.cpp)
// with its type, default, component and a one-line description. Code reads
// them only through the accessors below, which refuse a name that is not in the
// table (a programming error: std::logic_error). docs/environment.md and
// `strata-info --config` are generated from the table.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::detail::env {

/// @brief One registered variable.
struct Var {
  /// Name, e.g. "STRATA_TIMEOUT"; a family of names is written with a
  /// placeholder in angle brackets, e.g. "STRATA_ALGO_<COLL>" (any suffix matches).
  const char* name;
  const char* type;       ///< expected value, e.g. "integer", "bytes", "on|off", "path"
  const char* def;        ///< the default (text shown to users)
  const char* component;  ///< which part reads it: engine, collectives, transport, shm, fabric, launcher, log, tools
  const char* doc;        ///< what it does (Markdown, one paragraph)
  bool launcher = false;  ///< set by strata-run (or the PMIx bootstrap), not by hand
};

/// @brief All registered variables, in documentation order.
const std::vector<Var>& registry();

/// @brief The row for @p name (exact, or a family whose fixed prefix @p name starts with); nullptr if none.
const Var* find(std::string_view name) noexcept;

/// @brief Throws std::logic_error when @p name is not registered (a bug in strata, not a user error).
void require(std::string_view name);

/// @brief The value of registered variable @p name, nullptr when unset or empty.
const char* get(const char* name);

/// @brief get() as a string, @p def when unset or empty.
std::string get_string(const char* name, const std::string& def = {});

/// @brief A decimal integer in [lo, hi], @p def when unset or empty; otherwise throws
/// strata::Error(invalid_argument) "NAME='v': expected an integer in [lo, hi]".
long long get_int(const char* name, long long def, long long lo, long long hi);

/// @brief A switch: on|1|true|yes or off|0|false|no, @p def when unset or empty; anything
/// else throws strata::Error(invalid_argument) naming the variable and "on or off".
bool get_switch(const char* name, bool def);

/// @brief True when @p name is set to exactly @p value.
bool is(const char* name, const char* value);

/// @brief docs/environment.md: the table as Markdown, with its hand-written header and footer.
std::string markdown();

/// @brief Human-readable listing (strata-info --config): name, type, default,
/// current value when set (secrets masked), description.
std::string describe();

}  // namespace strata::detail::env
