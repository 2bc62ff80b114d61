// Going on after a rank dies: a loop of verified allreduces that, when a call
// fails because a member died, revokes the communicator, shrinks it to the
// survivors and redoes the iteration with them (docs/reliability.md, "Revoke
// and shrink").
//   strata-run -n 4 --on-failure continue -- ./survive --kill 3 --at 20
//   mpirun --enable-recovery -n 4 ./survive --kill 3 --at 20
// Without --kill nothing dies and it is a plain loop. Each survivor ends with
//   "survive: rank R done: 60 iterations verified, 3 members, 1 shrink(s)".
// --kill-in-shrink R: rank R dies right before its first shrink (the
// agreement then goes on without it; with R = 0, the coordinator).
#include <signal.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <strata/strata.hpp>

namespace {

struct Args {
  int iters = 60;
  int kill = -1;
  int at = 20;
  int kill_in_shrink = -1;
  std::size_t count = 1000;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const long v = std::strtol(argv[i + 1], nullptr, 10);
    if (k == "--iters")
      a.iters = static_cast<int>(v);
    else if (k == "--kill")
      a.kill = static_cast<int>(v);
    else if (k == "--at")
      a.at = static_cast<int>(v);
    else if (k == "--kill-in-shrink")
      a.kill_in_shrink = static_cast<int>(v);
    else if (k == "--count")
      a.count = static_cast<std::size_t>(v);
    else {
      std::fprintf(stderr, "survive: unknown option '%s'\n", argv[i]);
      std::exit(2);
    }
  }
  return a;
}

// Rank w's contribution to iteration it, element i.
double value(int w, int it, std::size_t i) { return (w + 1.0) * (it + 1.0) + static_cast<double>(i % 7); }

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  strata::Engine engine;
  const int me = engine.rank();
  strata::Communicator comm = engine.world();
  std::vector<double> send(a.count), recv(a.count);
  int shrinks = 0;
  for (int it = 0; it < a.iters; ++it) {
    if (me == a.kill && it == a.at) ::raise(SIGKILL);
    for (std::size_t i = 0; i < a.count; ++i) send[i] = value(me, it, i);
    try {
      comm.allreduce(send.data(), recv.data(), a.count, strata::Datatype::float64, strata::Op::sum).get();
    } catch (const strata::Error& e) {
      if (e.errc() != strata::Errc::peer_dead && e.errc() != strata::Errc::revoked) throw;
      std::printf("survive: rank %d: iteration %d failed (%s); shrinking\n", me, it, e.what());
      std::fflush(stdout);
      if (me == a.kill_in_shrink && shrinks == 0) ::raise(SIGKILL);
      comm = comm.shrink();
      ++shrinks;
      // Some survivors may have finished iteration `it` before they saw the
      // death: all redo the lowest iteration any of them still needs.
      std::int64_t mine = it, lowest = 0;
      try {
        comm.allreduce(&mine, &lowest, 1, strata::Datatype::int64, strata::Op::min).get();
      } catch (const strata::Error& e2) {
        if (e2.errc() != strata::Errc::peer_dead && e2.errc() != strata::Errc::revoked) throw;
        comm = comm.shrink();  // another member died meanwhile
        ++shrinks;
        comm.allreduce(&mine, &lowest, 1, strata::Datatype::int64, strata::Op::min).get();
      }
      it = static_cast<int>(lowest) - 1;
      continue;
    }
    for (std::size_t i = 0; i < a.count; ++i) {
      double want = 0;
      for (int r = 0; r < comm.size(); ++r) want += value(comm.world_rank(r), it, i);
      if (recv[i] != want) {
        std::fprintf(stderr, "survive: rank %d: iteration %d element %zu: got %g, expected %g (%d members)\n", me, it,
                     i, recv[i], want, comm.size());
        return 1;
      }
    }
  }
  std::printf("survive: rank %d done: %d iterations verified, %d members, %d shrink(s)\n", me, a.iters, comm.size(),
              shrinks);
  return 0;
}
