// strata-handoff-probe [--size BYTES] [--iters N] [--slots K] [--mode memcpy|nt|cma]
//
// Two processes pinned to CPUs 0 and 1 (when the machine has them). Per
// iteration the writer fills slot i % K of a shared mapping from its private
// buffer (memcpy, or non-temporal stores: transport::stream_copy) and raises
// a flag; the reader copies the slot into its private buffer and answers.
// With --mode cma the reader instead reads the writer's private buffer with
// one process_vm_readv (no shared slot). Prints the median hand-off time and
// the median of the writer's own copy, in microseconds: on the 2-vCPU KVM
// guests of docs/transport.md a 64 KiB memcpy hand-off takes about 9 us in
// the fast placement and about 35 us in the slow one.
#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "strata/transport/copy.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  (void)sched_setaffinity(0, sizeof s, &s);  // best effort: one CPU machines run both on CPU 0
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "strata-handoff-probe: %s\nusage: strata-handoff-probe [--size BYTES] [--iters N] [--slots K] "
               "[--mode memcpy|nt|cma]\n",
               why);
  std::exit(2);
}

}  // namespace

// Over ~80 lines: a straight measurement script, not library code.
int main(int argc, char** argv) {
  std::size_t size = 65536;
  long iters = 5000;
  long slots = 8;
  std::string mode = "memcpy";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    char* end = nullptr;
    if (a == "--size") {
      size = std::strtoull(v, &end, 10);
      if (*end != '\0' || size == 0 || size > (std::size_t{1} << 30)) usage("--size: expected 1..2^30 bytes");
    } else if (a == "--iters") {
      iters = std::strtol(v, &end, 10);
      if (*end != '\0' || iters < 1 || iters > 100000000) usage("--iters: expected 1..1e8");
    } else if (a == "--slots") {
      slots = std::strtol(v, &end, 10);
      if (*end != '\0' || slots < 1 || slots > 1024) usage("--slots: expected 1..1024");
    } else if (a == "--mode") {
      mode = v;
      if (mode != "memcpy" && mode != "nt" && mode != "cma") usage("--mode: expected memcpy, nt or cma");
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  const std::size_t region = static_cast<std::size_t>(slots) * size + 4096;
  void* m = ::mmap(nullptr, region, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    std::perror("strata-handoff-probe: mmap");
    return 1;
  }
  auto* base = static_cast<unsigned char*>(m);
  std::memset(base, 0, region);
  auto* flag = new (base) std::atomic<long>(0);
  auto* ack = new (base + 64) std::atomic<long>(0);
  auto* where = new (base + 128) std::atomic<unsigned long>(0);
  unsigned char* data = base + 4096;
  const pid_t writer_pid = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) {
    std::perror("strata-handoff-probe: fork");
    return 1;
  }
  const bool writer = child != 0;
  pin(writer ? 0 : 1);
  std::vector<unsigned char> priv(size, writer ? 0x5A : 0);
  if (writer) where->store(reinterpret_cast<unsigned long>(priv.data()), std::memory_order_release);
  std::vector<double> total, copy;
  total.reserve(static_cast<std::size_t>(iters));
  copy.reserve(static_cast<std::size_t>(iters));
  int rc = 0;
  for (long i = 0; i < iters; ++i) {
    unsigned char* slot = data + static_cast<std::size_t>(i % slots) * size;
    if (writer) {
      const Clock::time_point t0 = Clock::now();
      if (mode == "memcpy") std::memcpy(slot, priv.data(), size);
      if (mode == "nt") strata::transport::stream_copy(slot, priv.data(), size);
      const Clock::time_point t1 = Clock::now();
      flag->store(i + 1, std::memory_order_release);
      while (ack->load(std::memory_order_acquire) != i + 1) {
      }
      copy.push_back(us(t1 - t0));
      total.push_back(us(Clock::now() - t0));
    } else {
      while (flag->load(std::memory_order_acquire) != i + 1) {
      }
      if (mode == "cma") {
        iovec l{priv.data(), size};
        iovec r{reinterpret_cast<void*>(where->load(std::memory_order_acquire)), size};
        if (::process_vm_readv(writer_pid, &l, 1, &r, 1, 0) != static_cast<ssize_t>(size)) {
          std::perror("strata-handoff-probe: process_vm_readv");
          rc = 1;
        }
      } else {
        std::memcpy(priv.data(), slot, size);
      }
      if (priv[size - 1] != 0x5A) rc = 1;  // the hand-off must carry the bytes
      ack->store(i + 1, std::memory_order_release);
      if (rc != 0) break;
    }
  }
  if (!writer) std::_Exit(rc);
  int st = 0;
  (void)::waitpid(child, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    std::fprintf(stderr, "strata-handoff-probe: the reader failed (bytes not carried or CMA refused)\n");
    return 1;
  }
  std::printf("handoff mode %s size %zu slots %ld: median %.2f us, writer's copy %.2f us\n", mode.c_str(), size, slots,
              median(total), mode == "cma" ? 0.0 : median(copy));
  return 0;
}
