// strata-demo: the README's main job until the collectives land.
//
// Each rank bootstraps, discovers the hierarchy, opens the routed transport
// (shared memory to same-host peers, libfabric to the others) and takes part in
// a round of messages: every rank puts a block into its right neighbour's
// buffer with a signal, then answers a ping from its left neighbour. Rank 0
// prints the topology and a summary; every rank checks what it received.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "strata/transport/bootstrap.hpp"
#include "strata/transport/topology.hpp"
#include "strata/transport/transport.hpp"

namespace {

struct Round {
  std::atomic<int> completions{0};
  std::atomic<int> signals{0};
  std::atomic<int> errors{0};
  std::atomic<std::uint64_t> last_payload{0};
  std::atomic<int> last_source{-1};
};

bool spin_until(strata::transport::Transport& t, const std::atomic<int>& counter, int target) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (counter.load(std::memory_order_acquire) < target) {
    if (t.progress() == 0) t.wait_for_event(std::chrono::microseconds(200));
    if (std::chrono::steady_clock::now() > deadline) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t bytes = 1 << 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--bytes") == 0 && i + 1 < argc) {
      bytes = std::stoull(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: strata-demo [--bytes N]\n");
      return 2;
    }
  }
  try {
    auto boot = strata::bootstrap_from_environment();
    const int rank = boot->rank();
    const int size = boot->size();
    const strata::Hierarchy hier = strata::discover_hierarchy(*boot);
    if (rank == 0) {
      std::printf("strata-demo: %d ranks on %d virtual host(s)\n%s", size, hier.num_hosts(), hier.describe().c_str());
      std::fflush(stdout);
    }
    boot->barrier();

    auto transport = strata::transport::make_transport(*boot, hier);
    Round round;
    transport->set_completion_handler([&](void*, const strata::Status& s) {
      if (!s.is_ok()) {
        std::fprintf(stderr, "rank %d: operation failed: %s\n", rank, s.message().c_str());
        round.errors.fetch_add(1);
      }
      round.completions.fetch_add(1, std::memory_order_release);
    });
    transport->set_signal_handler([&](int source, std::uint64_t payload) {
      round.last_source.store(source);
      round.last_payload.store(payload);
      round.signals.fetch_add(1, std::memory_order_release);
    });
    transport->set_peer_failure_handler([&](int peer, const strata::Status& why) {
      std::fprintf(stderr, "rank %d: peer %d failed: %s\n", rank, peer, why.message().c_str());
      round.errors.fetch_add(1);
    });

    // Each rank exposes an inbox; keys travel through the bootstrap.
    std::vector<std::uint8_t> inbox(bytes, 0), outbox(bytes);
    for (std::size_t i = 0; i < bytes; ++i)
      outbox[i] = static_cast<std::uint8_t>((i * 131u + static_cast<unsigned>(rank)) & 0xff);
    strata::transport::RemoteKey mine;
    strata::throw_if_error(transport->register_memory(inbox.data(), inbox.size(), &mine));
    auto keys = boot->allgather(&mine, sizeof mine);

    const int right = (rank + 1) % size;
    const int left = (rank + size - 1) % size;
    strata::transport::RemoteKey right_key;
    std::memcpy(&right_key, keys[static_cast<std::size_t>(right)].data(), sizeof right_key);

    const auto t0 = std::chrono::steady_clock::now();
    strata::throw_if_error(transport->put_with_signal(right, outbox.data(), bytes, right_key, 0,
                                                      0xC0FFEE00u + static_cast<std::uint64_t>(rank), nullptr));
    if (!spin_until(*transport, round.signals, 1) || !spin_until(*transport, round.completions, 1)) {
      std::fprintf(stderr, "rank %d: round of messages timed out\n", rank);
      return 1;
    }
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();

    bool ok =
        round.last_source.load() == left && round.last_payload.load() == 0xC0FFEE00u + static_cast<std::uint64_t>(left);
    for (std::size_t i = 0; ok && i < bytes; ++i)
      ok = inbox[i] == static_cast<std::uint8_t>((i * 131u + static_cast<unsigned>(left)) & 0xff);
    boot->barrier();

    struct Report {
      int ok;
      int same_host;
      double us;
    } me{ok ? 1 : 0, hier.same_host(rank, right) ? 1 : 0, us};
    auto reports = boot->allgather(&me, sizeof me);
    if (rank == 0) {
      std::printf("strata-demo: transport %s\n", transport->name().c_str());
      int good = 0;
      for (int r = 0; r < size; ++r) {
        Report rep;
        std::memcpy(&rep, reports[static_cast<std::size_t>(r)].data(), sizeof rep);
        good += rep.ok;
        std::printf("  rank %d -> rank %d: %zu bytes + signal via %s, %.1f us, %s\n", r, (r + 1) % size, bytes,
                    rep.same_host ? "shared memory" : "libfabric", rep.us, rep.ok ? "verified" : "WRONG DATA");
      }
      std::printf("strata-demo: %d/%d ranks verified their message\n", good, size);
    }
    transport->deregister_memory(inbox.data(), inbox.size());
    boot->barrier();
    transport->shutdown();
    return ok && round.errors.load() == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-demo: %s\n", e.what());
    return 1;
  }
}
