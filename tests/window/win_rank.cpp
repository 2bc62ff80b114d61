// Window rank program, run under strata-run by test_window:
//   win_rank [--quick]        every scenario of window_scenarios.hpp; prints "win_rank: OK"
//   win_rank --death          the last rank exits (status 3) with a window open; every
//                             survivor must see its pending wait fail (peer_dead) and a
//                             put to the dead rank fail, then prints "SURVIVOR rank R ..."
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>

#include "../common/rank_check.hpp"
#include "strata/strata.hpp"
#include "window_scenarios.hpp"

namespace {

int death(strata::Engine& engine) {
  strata::Communicator& w = engine.world();
  const int me = w.rank(), n = w.size();
  rank_check::me = me;
  std::vector<double> mem(64, 0.0);
  strata::Window win = w.create_window(mem.data(), mem.size() * sizeof(double));
  // A round that works, so the failure below is the death and nothing else.
  win.put_signal((me + 1) % n, 0, mem.data(), 8, 1).get();
  win.wait(1).get();
  w.barrier().get();
  if (me == n - 1) {
    rank_check::death_gate_wait(n - 1);  // after every survivor's working round
    std::fflush(stdout);
    _exit(3);
  }
  rank_check::death_gate_pass();
  const auto t0 = std::chrono::steady_clock::now();
  strata::Future<void> never = win.wait(/*tag=*/9, 1);  // nobody sends tag 9
  std::string msg;
  if (!rank_check::fails_peer_dead([&] { never.get(); }, &msg)) return 1;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Later waits fail at once; a put to the dead rank fails, not hangs.
  bool later_fails = false, put_fails = false;
  try {
    win.wait(10).get();
  } catch (const strata::Error& e) {
    later_fails = e.errc() == strata::Errc::peer_dead;
  }
  try {
    win.put(n - 1, 0, mem.data(), 8).get();
  } catch (const strata::Error&) {
    put_fails = true;
  }
  if (!later_fails || !put_fails) {
    std::printf("rank %d: FAILED: later wait fails %d, put to the dead rank fails %d\n", me, later_fails, put_fails);
    return 1;
  }
  std::printf("SURVIVOR rank %d: wait failed after %.2f s: %s\n", me, secs, msg.c_str());
  std::fflush(stdout);
  try {
    win.free();  // the barrier fails (a member is dead): an error, not a hang
  } catch (const strata::Error&) {
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, die = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") quick = true;
    if (a == "--death") die = true;
  }
  try {
    strata::Engine engine;
    if (die) return death(engine);
    win_test::all(engine.world(), quick);
    engine.world().barrier().get();
    if (engine.rank() == 0)
      std::printf("win_rank: OK (%d ranks, %s)\n", engine.size(), engine.transport_name().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::printf("win_rank: FAILED: %s\n", e.what());
    return 1;
  }
}
