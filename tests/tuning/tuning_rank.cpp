// tuning_rank: one rank of the tuning integration tests (run under strata-run).
//   tuning_rank FILE_FOR_RANK_0 [FILE_FOR_THE_OTHERS]
// Sets STRATA_TUNING per rank (the second file for ranks > 0 when given), starts
// an Engine, prints "rank R: tuning SOURCE pipeline_fragment=N mapped_max_bytes=M"
// and "rank R: transport NAME",
// then checks a 1 MiB broadcast, a 64 KiB and an 8 KiB allreduce and a 64 KiB reduce against their expected values.
// Prints "tuning_rank: OK" on success.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "strata/strata.hpp"
#include "strata/transport/bootstrap.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: tuning_rank FILE [FILE_FOR_RANKS_1..]\n");
    return 2;
  }
  try {
    auto boot = strata::bootstrap_from_environment();
    const int me = boot->rank();
    setenv("STRATA_TUNING", (me > 0 && argc > 2 ? argv[2] : argv[1]), 1);
    strata::Engine engine(std::move(boot), strata::EngineOptions::from_environment());
    std::printf("rank %d: tuning %s pipeline_fragment=%llu mapped_max_bytes=%llu\n", me, engine.tuning_source().c_str(),
                static_cast<unsigned long long>(engine.tuning().pipeline_fragment),
                static_cast<unsigned long long>(engine.tuning().mapped_max_bytes));
    std::printf("rank %d: transport %s\n", me, engine.transport_name().c_str());
    std::fflush(stdout);
    strata::Communicator& w = engine.world();
    std::vector<std::uint32_t> b(1u << 18);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = me == 0 ? static_cast<std::uint32_t>(i * 2654435761u) : 0;
    w.broadcast(b.data(), b.size(), strata::Datatype::uint32, 0).get();
    int bad = 0;
    for (std::size_t i = 0; i < b.size(); ++i) bad += b[i] != static_cast<std::uint32_t>(i * 2654435761u) ? 1 : 0;
    std::vector<std::uint64_t> x(8192, static_cast<std::uint64_t>(me + 1)), y(8192, 0);
    w.allreduce(x.data(), y.data(), x.size(), strata::Datatype::uint64, strata::Op::sum).get();
    const auto n = static_cast<std::uint64_t>(w.size());
    for (std::uint64_t v : y) bad += v != n * (n + 1) / 2 ? 1 : 0;
    // 8 KiB: a mapped plan when the table's mapped_max_bytes allows it, else a window plan.
    std::vector<std::uint64_t> s(1024, static_cast<std::uint64_t>(me + 1)), t(1024, 0);
    w.allreduce(s.data(), t.data(), s.size(), strata::Datatype::uint64, strata::Op::sum).get();
    for (std::uint64_t v : t) bad += v != n * (n + 1) / 2 ? 1 : 0;
    // 64 KiB reduce to the last rank (a tree; the table may set its shape).
    std::vector<std::uint64_t> r(8192, 0);
    w.reduce(x.data(), r.data(), x.size(), strata::Datatype::uint64, strata::Op::sum, w.size() - 1).get();
    if (w.rank() == w.size() - 1)
      for (std::uint64_t v : r) bad += v != n * (n + 1) / 2 ? 1 : 0;
    if (bad != 0) {
      std::printf("rank %d: %d wrong elements\n", me, bad);
      return 1;
    }
    if (me == 0) std::printf("tuning_rank: OK\n");
  } catch (const std::exception& e) {
    std::printf("tuning_rank: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
