#include "strata/detail/log.hpp"

#include <spdlog/sinks/stdout_sinks.h>

#include <cstdlib>
#include <mutex>
#include <string>

namespace strata::detail {
namespace {

spdlog::level::level_enum level_from_env() {
  const char* v = std::getenv("STRATA_LOG_LEVEL");
  if (v == nullptr || *v == '\0') return spdlog::level::warn;
  const auto lvl = spdlog::level::from_str(v);
  // from_str maps unknown names to "off"; say so once rather than going silent.
  if (lvl == spdlog::level::off && std::string(v) != "off") {
    std::fprintf(stderr, "strata: STRATA_LOG_LEVEL='%s' is not a level (trace|debug|info|warn|error|critical|off)\n",
                 v);
    return spdlog::level::warn;
  }
  return lvl;
}

std::shared_ptr<spdlog::logger> make() {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto log = std::make_shared<spdlog::logger>("strata", sink);
  log->set_level(level_from_env());
  log->set_pattern("strata[%l] %v");
  return log;
}

std::shared_ptr<spdlog::logger>& instance() {
  static std::shared_ptr<spdlog::logger> log = make();
  return log;
}

}  // namespace

spdlog::logger& logger() { return *instance(); }

void set_log_rank(int rank) { instance()->set_pattern("strata[rank " + std::to_string(rank) + "][%l] %v"); }

}  // namespace strata::detail
