// One rank of the region-name tests (docs/transport.md, "Mapped regions"),
// run under strata-run by test_region_names:
//   region-names-rank check  creates the world, a dup and a split (their
//                            windows are mapped regions), checks allreduce
//                            results on each, that no region name of this job
//                            is left in /dev/shm and that this rank maps the
//                            windows of its same-host members; prints "OK rank R"
//                            (REGION_NAMES_TIME_DUP=1: also the median time of world.dup())
//   region-names-rank hold   creates the same communicators, prints
//                            "READY <job prefix>" and stays alive until the
//                            test kills the launcher (bounded: 60 s)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "../common/shm_names.hpp"
#include "strata/strata.hpp"

namespace {

int g_rank = -1;

int fail(const std::string& what) {
  std::printf("FAIL rank %d: %s\n", g_rank, what.c_str());
  std::fflush(stdout);
  return 1;
}

/// allreduce(sum) of (world rank + 1) * (i % 13 + 1) over @p c; true when exact.
bool allreduce_exact(strata::Communicator& c, std::size_t count) {
  const std::int64_t me = c.world_rank(c.rank()) + 1;
  std::vector<std::int64_t> send(count), recv(count, -1);
  for (std::size_t i = 0; i < count; ++i) send[i] = me * static_cast<std::int64_t>(i % 13 + 1);
  c.allreduce(send.data(), recv.data(), count, strata::Datatype::int64, strata::Op::sum).get();
  std::int64_t members = 0;
  for (int r = 0; r < c.size(); ++r) members += c.world_rank(r) + 1;
  for (std::size_t i = 0; i < count; ++i) {
    if (recv[i] != members * static_cast<std::int64_t>(i % 13 + 1)) return false;
  }
  return true;
}

int check(strata::Engine& e) {
  strata::Communicator& world = e.world();
  strata::Communicator dup = world.dup();
  strata::Communicator half = world.split(e.rank() % 2, e.rank());
  const std::string prefix = shm_names::job_prefix();
  if (prefix.empty()) return fail("no job tag in the environment (not started by strata-run?)");
  // Sizes below and above the direct threshold and beyond one window slot.
  for (strata::Communicator* c : {&world, &dup, &half}) {
    for (std::size_t count : {std::size_t{3}, std::size_t{4096}, std::size_t{300000}}) {
      if (!allreduce_exact(*c, count))
        return fail("allreduce of " + std::to_string(count) + " on a communicator of " + std::to_string(c->size()) +
                    " is wrong");
    }
  }
  world.barrier().get();  // every rank created every communicator
  for (const std::string& n : shm_names::in_dev_shm(prefix)) {
    if (shm_names::is_region(n, prefix)) return fail("/dev/shm/" + n + " exists while the job runs");
  }
  // Each same-host member's window is mapped here: world and dup always, the
  // split when the member has this rank's color.
  const std::vector<std::string> mapped = shm_names::mapped_here(prefix);
  for (int r = 0; r < e.size(); ++r) {
    if (r == e.rank() || !e.hierarchy().same_host(e.rank(), r)) continue;
    const std::string peer = prefix + std::to_string(r) + "-m";
    const auto got = std::count_if(mapped.begin(), mapped.end(), [&](const std::string& n) {
      return n.rfind(peer, 0) == 0 && n.size() > peer.size();
    });
    const int want = 2 + (r % 2 == e.rank() % 2 ? 1 : 0);
    if (got < want)
      return fail("maps " + std::to_string(got) + " windows of rank " + std::to_string(r) + ", expected " +
                  std::to_string(want));
  }
  if (std::getenv("REGION_NAMES_TIME_DUP") != nullptr) {  // cost of creation (docs/transport.md)
    std::vector<double> us;
    for (int i = 0; i < 21; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      strata::Communicator c = world.dup();
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(us.begin(), us.end());
    if (e.rank() == 0) std::printf("rank 0: world.dup() median %.0f us\n", us[us.size() / 2]);
  }
  std::printf("OK rank %d\n", e.rank());
  return 0;
}

int hold(strata::Engine& e) {
  strata::Communicator dup = e.world().dup();
  strata::Communicator half = e.world().split(e.rank() % 2, e.rank());
  if (!allreduce_exact(half, 4096)) return fail("allreduce on the split is wrong");
  std::printf("READY %s\n", shm_names::job_prefix().c_str());
  std::fflush(stdout);
  // The test kills the launcher; strata-run's ranks die with it (PDEATHSIG).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::fflush(stdout);
  _exit(3);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "check" && mode != "hold") {
    std::fprintf(stderr, "usage: region-names-rank check|hold\n");
    return 2;
  }
  try {
    strata::Engine e;
    g_rank = e.rank();
    return mode == "check" ? check(e) : hold(e);
  } catch (const std::exception& ex) {
    return fail(std::string("exception: ") + ex.what());
  }
}
