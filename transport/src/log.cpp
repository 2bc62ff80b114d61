#include "strata/detail/log.hpp"

#include <unistd.h>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "strata/detail/env.hpp"

namespace strata::detail {
namespace {

spdlog::level::level_enum level_from_env() {
  const char* v = env::get("STRATA_LOG_LEVEL");
  if (v == nullptr) return spdlog::level::warn;
  const auto lvl = spdlog::level::from_str(v);
  // from_str maps unknown names to "off"; say so once rather than going silent.
  if (lvl == spdlog::level::off && std::string(v) != "off") {
    std::fprintf(stderr, "strata: STRATA_LOG_LEVEL='%s' is not a level (trace|debug|info|warn|error|critical|off)\n",
                 v);
    return spdlog::level::warn;
  }
  return lvl;
}

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "?";
  std::string h;
  for (const char* p = buf; *p != '\0'; ++p) {
    if (*p == '%') h += '%';  // the name goes into an spdlog pattern
    h += *p;
  }
  return h;
}

// Forwards formatted lines to a callback (EngineOptions::log_sink).
class CallbackSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit CallbackSink(LogCallback cb) : cb_(std::move(cb)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t buf;
    formatter_->format(msg, buf);
    std::string line(buf.data(), buf.size());
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    cb_(msg.level, line);
  }
  void flush_() override {}

 private:
  LogCallback cb_;
};

struct State {
  std::mutex mu;
  std::shared_ptr<spdlog::sinks::dist_sink_mt> out;  // stderr or the file
  std::shared_ptr<spdlog::sinks::sink> primary;      // the current child of out
  std::shared_ptr<spdlog::logger> log;
  std::string file;  // STRATA_LOG_FILE
  int rank = -1;     // the rank in the pattern (-1: not known yet)
  std::string pattern;
  std::map<int, std::shared_ptr<spdlog::sinks::sink>> extra;
  int next_handle = 1;
};

std::string pattern_for(const std::string& rank) {
  return "[%Y-%m-%d %H:%M:%S.%e] [" + hostname() + " rank " + rank + " pid %P] [%l] %v";
}

std::shared_ptr<spdlog::sinks::sink> open_file(const std::string& path) {
  try {
    return std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, false);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata: STRATA_LOG_FILE='%s': cannot open (%s); logging to stderr\n", path.c_str(), e.what());
    return std::make_shared<spdlog::sinks::stderr_sink_mt>();
  }
}

State& state() {
  static State* s = [] {
    auto* st = new State;  // never destroyed: logging from static destructors stays safe
    st->file = env::get_string("STRATA_LOG_FILE");
    st->out = std::make_shared<spdlog::sinks::dist_sink_mt>();
    if (!st->file.empty() && st->file.find("%r") == std::string::npos) {
      st->primary = open_file(st->file);
    } else {
      st->primary = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    }
    st->out->add_sink(st->primary);
    st->log = std::make_shared<spdlog::logger>("strata", st->out);
    st->log->set_level(level_from_env());
    st->log->flush_on(spdlog::level::trace);  // the state is never destroyed: flush every line
    st->pattern = pattern_for("-");
    st->log->set_pattern(st->pattern);
    return st;
  }();
  return *s;
}

}  // namespace

spdlog::logger& logger() { return *state().log; }

void set_log_rank(int rank) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  if (rank == s.rank) return;  // the same rank again (a second engine): keep the file open
  s.rank = rank;
  s.pattern = pattern_for(std::to_string(rank));
  const std::size_t at = s.file.find("%r");
  if (at != std::string::npos) {
    std::string path = s.file;
    path.replace(at, 2, std::to_string(rank));
    auto file = open_file(path);
    s.out->remove_sink(s.primary);
    s.primary = file;
    s.out->add_sink(s.primary);
  }
  s.log->set_pattern(s.pattern);  // every sink, the new file and the callbacks included
}

int add_log_sink(LogCallback cb) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  auto sink = std::make_shared<CallbackSink>(std::move(cb));
  sink->set_pattern(s.pattern);
  const int h = s.next_handle++;
  s.extra.emplace(h, sink);
  s.out->add_sink(sink);
  return h;
}

void remove_log_sink(int handle) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  const auto it = s.extra.find(handle);
  if (it == s.extra.end()) return;
  s.out->remove_sink(it->second);
  s.extra.erase(it);
}

}  // namespace strata::detail
