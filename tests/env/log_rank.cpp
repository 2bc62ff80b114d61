// log_rank: one rank of the logging integration test (run under strata-run).
// Starts an Engine with an EngineOptions::log_sink, runs a 64 KiB allreduce
// (a window plan, not a mapped one) and an allgather, checks their results
// and that the sink saw this rank's plan lines. Prints
// "log_rank: rank R pid P sink N lines" and, on rank 0, "log_rank: OK".
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "strata/strata.hpp"

int main() {
  std::mutex mu;
  std::vector<std::string> lines;
  try {
    strata::EngineOptions o = strata::EngineOptions::from_environment();
    o.log_sink = [&](strata::LogLevel level, const std::string& line) {
      if (level < strata::LogLevel::info) return;
      std::lock_guard<std::mutex> lk(mu);
      lines.push_back(line);
    };
    int bad = 0;
    int me = -1;
    {
      strata::Engine engine(o);
      me = engine.rank();
      strata::Communicator& w = engine.world();
      const auto n = static_cast<std::uint64_t>(w.size());
      std::vector<std::uint64_t> x(8192, static_cast<std::uint64_t>(me + 1)), y(8192, 0);
      w.allreduce(x.data(), y.data(), x.size(), strata::Datatype::uint64, strata::Op::sum).get();
      for (std::uint64_t v : y) bad += v != n * (n + 1) / 2 ? 1 : 0;
      std::vector<std::uint32_t> g(static_cast<std::size_t>(n) * 4096, 0), mine(4096, static_cast<std::uint32_t>(me));
      w.allgather(mine.data(), mine.size(), g.data(), strata::Datatype::uint32).get();
      for (std::size_t i = 0; i < g.size(); ++i) bad += g[i] != i / 4096 ? 1 : 0;
    }
    std::lock_guard<std::mutex> lk(mu);
    bool plan = false;
    for (const std::string& l : lines) plan = plan || l.find("plan: allreduce") != std::string::npos;
    std::printf("log_rank: rank %d pid %ld sink %zu lines\n", me, static_cast<long>(::getpid()), lines.size());
    if (bad != 0 || !plan) {
      std::printf("log_rank: rank %d: %d wrong elements, plan line in the sink: %s\n", me, bad, plan ? "yes" : "no");
      return 1;
    }
    if (me == 0) std::printf("log_rank: OK\n");
  } catch (const std::exception& e) {
    std::printf("log_rank: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
