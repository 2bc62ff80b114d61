// The overlap a collective can reach on this machine (docs/performance.md,
// "Overlap across hosts"). With one core per rank, the kernel's TCP work of a
// transfer (system time of the sending and receiving calls, and the softirq
// work of the network stack that lands on the rank's core) runs on the same
// core as the application's compute; so does the reduction of an allreduce.
// That CPU time cannot overlap with compute on that core whatever the library
// does: with OSU's method (compute as long as t_pure),
//   overlap <= 1 - cpu / t_pure.
// Measured here with plain blocking TCP sockets between the two ranks (no
// library, no polling: a blocked recv costs no CPU), moving the bytes the
// collective must move at the least for 2 ranks:
//   allreduce  each rank sends and receives B (reduce-scatter + allgather
//              halves) and sums B/2 floats;
//   alltoall   each rank sends and receives its block B;
//   bcast      the root sends B, the other rank receives it.
// cpu = the busy time of the rank's core over the repetitions (/proc/stat;
// the rank is bound to one core), per repetition; the process's own user and
// system time are reported beside it.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "strata_bench/bench.hpp"

namespace strata::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The first IPv4 address of an interface that is up and not loopback (the
// virtual host's link), else 127.0.0.1 (ranks on one host).
std::uint32_t own_ipv4() {
  ifaddrs* list = nullptr;
  std::uint32_t ip = htonl(INADDR_LOOPBACK);
  if (::getifaddrs(&list) != 0) return ip;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if ((a->ifa_flags & IFF_UP) == 0 || (a->ifa_flags & IFF_LOOPBACK) != 0) continue;
    sockaddr_in sin{};
    std::memcpy(&sin, a->ifa_addr, sizeof(sin));
    ip = sin.sin_addr.s_addr;
    break;
  }
  ::freeifaddrs(list);
  return ip;
}

bool send_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

bool recv_all(int fd, char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

// A connected TCP socket between ranks 0 and 1 (-1 on failure).
int connect_pair(Communicator& world) {
  const int me = world.rank();
  int lfd = -1;
  std::int32_t mine[2] = {0, 0};
  if (me == 0) {
    lfd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof(a);
    if (lfd < 0 || ::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(lfd, 1) != 0 ||
        ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      if (lfd >= 0) ::close(lfd);
      lfd = -1;
    } else {
      const std::uint32_t ip = own_ipv4();
      std::memcpy(&mine[0], &ip, sizeof(ip));
      mine[1] = ntohs(a.sin_port);
    }
  }
  std::vector<std::int32_t> all(4, 0);
  world.allgather(mine, 2, all.data(), Datatype::int32).get();
  if (all[1] == 0) return -1;  // rank 0 could not listen
  int fd = -1;
  if (me == 0) {
    fd = ::accept(lfd, nullptr, nullptr);
    ::close(lfd);
  } else {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    std::memcpy(&a.sin_addr.s_addr, &all[0], sizeof(std::uint32_t));
    a.sin_port = htons(static_cast<std::uint16_t>(all[1]));
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  if (fd >= 0) {
    const int one = 1;
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

}  // namespace

// Busy time of CPU @p cpu (/proc/stat: user, nice, system, irq, softirq,
// steal; not idle or iowait), in seconds. Everything that ran on the rank's
// core, the kernel's network work in or outside our system calls included
// (ticks in softirq are charged to the running task's system time too, so
// adding the process's times to the core's softirq would count them twice).
double core_busy_seconds(int cpu) {
  std::ifstream f("/proc/stat");
  const std::string want = "cpu" + std::to_string(cpu);
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string name;
    in >> name;
    if (name != want) continue;
    unsigned long long user = 0, nice = 0, sys = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    in >> user >> nice >> sys >> idle >> iowait >> irq >> softirq >> steal;
    return static_cast<double>(user + nice + sys + irq + softirq + steal) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }
  return 0.0;
}

double process_seconds(bool user) {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  const timeval& tv = user ? ru.ru_utime : ru.ru_stime;
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

OverlapFloor overlap_floor(Communicator& world, const std::string& coll, std::size_t bytes, double t_pure_us) {
  OverlapFloor f;
  if (world.size() != 2 || (coll != "allreduce" && coll != "alltoall" && coll != "bcast")) {
    f.why = "measured for allreduce, alltoall and bcast on 2 ranks";
    return f;
  }
  const int me = world.rank();
  const int fd = connect_pair(world);
  std::int32_t ok = fd >= 0 ? 1 : 0, all_ok = 0;
  world.allreduce(&ok, &all_ok, 1, Datatype::int32, Op::min).get();
  if (all_ok == 0) {
    if (fd >= 0) ::close(fd);
    f.why = "no TCP connection between the ranks";
    return f;
  }
  const bool sends = coll != "bcast" || me == 0;
  const bool receives = coll != "bcast" || me == 1;
  std::vector<char> out(std::max<std::size_t>(bytes, 1), 1), in(std::max<std::size_t>(bytes, 1));
  const std::size_t nred = coll == "allreduce" ? bytes / sizeof(float) / 2 : 0;
  std::vector<float> acc(std::max<std::size_t>(nred, 1), 1.0f), src(std::max<std::size_t>(nred, 1), 2.0f);
  const int cpu = ::sched_getcpu();
  bool good = true;
  auto one_rep = [&] {
    // The sender runs in its own thread so that both directions move at once.
    std::thread tx;
    bool sent = true;  // written by tx only, read after the join
    if (sends && receives) tx = std::thread([&] { sent = send_all(fd, out.data(), bytes); });
    if (sends && !receives) good = send_all(fd, out.data(), bytes) && good;
    if (receives) good = recv_all(fd, in.data(), bytes) && good;
    if (tx.joinable()) tx.join();
    good = good && sent;
    for (std::size_t i = 0; i < nred; ++i) acc[i] += src[i];
    // bcast: a one-byte answer keeps the two ranks in step.
    char b = 0;
    if (coll == "bcast") good = (me == 1 ? send_all(fd, &b, 1) : recv_all(fd, &b, 1)) && good;
  };
  // Warm-up (connection, buffers); it also sizes the repetitions: enough
  // for the 10 ms clock ticks of /proc/stat, about 0.5 s in all.
  const auto w0 = Clock::now();
  one_rep();
  one_rep();
  double warm_us = std::chrono::duration<double, std::micro>(Clock::now() - w0).count() / 2, slowest = 0;
  warm_us = std::max({warm_us, t_pure_us, 1.0});
  world.allreduce(&warm_us, &slowest, 1, Datatype::float64, Op::max).get();
  const int reps = std::clamp(static_cast<int>(500000.0 / slowest), 8, 4000);
  const double u0 = process_seconds(true), s0 = process_seconds(false), q0 = core_busy_seconds(cpu);
  const auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i) one_rep();
  const double wall = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  f.user_us = (process_seconds(true) - u0) * 1e6 / reps;
  f.sys_us = (process_seconds(false) - s0) * 1e6 / reps;
  f.core_us = (core_busy_seconds(cpu) - q0) * 1e6 / reps;
  f.t_raw_us = wall / reps;
  f.reps = reps;
  ::close(fd);
  std::int32_t g = good ? 1 : 0, all_good = 0;
  world.allreduce(&g, &all_good, 1, Datatype::int32, Op::min).get();
  if (all_good == 0) {
    f.why = "the raw TCP transfer failed";
    return f;
  }
  f.measured = true;
  if (acc[0] < 0) std::printf("%g", static_cast<double>(acc[0]));  // keep the sums
  return f;
}

}  // namespace strata::bench
