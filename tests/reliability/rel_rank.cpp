// rel_rank: one rank of the reliability tests (tests/reliability, issue 18),
// run under strata-run. One mode per run:
//   --queue       rank 0 posts 12 nonblocking 32-byte allreduces on A, then
//                 waits on a barrier on B; rank 1 waits on B first, then posts
//                 the same 12 on A; both wait and check. Calls beyond the fast
//                 ring's 8 entries must queue, never block the caller (the
//                 program is legal under nonblocking rules). Prints
//                 "rel_rank: queue OK".
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "../common/rank_check.hpp"
#include "strata/strata.hpp"

namespace {

using rank_check::failures;
using rank_check::me;

int queue_mode(strata::Engine& engine) {
  strata::Communicator a = engine.world().dup();
  strata::Communicator b = engine.world().dup();
  const int n = a.size();
  constexpr int kCalls = 12;
  constexpr std::size_t kCount = 8;  // 32 bytes of int32
  std::vector<std::vector<std::int32_t>> send(kCalls, std::vector<std::int32_t>(kCount));
  std::vector<std::vector<std::int32_t>> recv(kCalls, std::vector<std::int32_t>(kCount, -1));
  for (int k = 0; k < kCalls; ++k)
    for (std::size_t i = 0; i < kCount; ++i) send[k][i] = me * 1000 + k * 10 + static_cast<int>(i);
  std::vector<strata::Future<void>> futs;
  auto post = [&] {
    for (int k = 0; k < kCalls; ++k)
      futs.push_back(a.allreduce(send[k].data(), recv[k].data(), kCount, strata::Datatype::int32, strata::Op::sum));
  };
  if (me == 0) {
    post();
    b.barrier().get();
  } else {
    b.barrier().get();
    post();
  }
  for (auto& f : futs) f.get();
  for (int k = 0; k < kCalls; ++k)
    for (std::size_t i = 0; i < kCount; ++i) {
      std::int32_t want = 0;
      for (int q = 0; q < n; ++q) want += q * 1000 + k * 10 + static_cast<int>(i);
      EXPECT(recv[k][i] == want, "call %d [%zu] = %d, want %d", k, i, recv[k][i], want);
    }
  if (failures == 0) std::printf("rel_rank: queue OK (rank %d)\n", me);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    strata::Engine engine;
    me = engine.rank();
    if (mode == "--queue") return queue_mode(engine);
    std::fprintf(stderr, "rel_rank: unknown mode '%s'\n", mode.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: FAILED: exception: %s\n", me, e.what());
    return 1;
  }
}
