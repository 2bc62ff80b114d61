// launcher-probe: the rank program the launcher tests start under strata-run
// (and mpirun). One mode per behaviour under test; see usage().
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "strata/transport/bootstrap.hpp"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: launcher-probe MODE ...\n"
               "  info                      print JobInfo\n"
               "  allgather ROUNDS          variable-length allgathers + barriers, verified\n"
               "  exit RANK CODE            RANK exits with CODE, the others with 0\n"
               "  hang DIR [--ignore-term] [--grandchild] [--segv RANK]\n"
               "                            write pids to DIR, barrier, rank 0 prints READY, wait forever\n"
               "  die-early RANK CODE       RANK exits at once; the others' allgather must fail\n"
               "  watch-death RANK          after a barrier RANK exits 9; the others wait for the death event\n"
               "  print                     write tagged-output test lines\n"
               "  rdv-export FIFO           rank 0 prints STRATA_RDV; rank 1 waits for a byte on FIFO\n");
  return 64;
}

void write_pid(const std::string& path, pid_t pid) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << pid << "\n";
  }
  std::rename(tmp.c_str(), path.c_str());
}

std::vector<std::byte> blob_for(int rank, int round) {
  const int len = (rank * 7 + round * 3) % 13;  // 0..12 bytes, some empty
  std::vector<std::byte> b(static_cast<std::size_t>(len));
  for (int i = 0; i < len; ++i) b[static_cast<std::size_t>(i)] = static_cast<std::byte>(rank * 31 + round * 5 + i);
  return b;
}

std::string cpu_list() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return "?";
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out += (out.empty() ? "" : ",") + std::to_string(c);
  }
  return out;
}

std::string info_line(const strata::JobInfo& j) {
  return "rank=" + std::to_string(j.rank) + " size=" + std::to_string(j.size) + " host=" + std::to_string(j.host) +
         " nhosts=" + std::to_string(j.nhosts) + " local_rank=" + std::to_string(j.local_rank) +
         " local_size=" + std::to_string(j.local_size) + " launcher=" + j.launcher + " bind=" + j.bind +
         " topology=" + j.topology;
}

[[noreturn]] void wait_forever() {
  for (;;) ::pause();
}

int mode_allgather(int rounds) {
  auto boot = strata::bootstrap_from_environment();
  const auto& j = boot->job();
  for (int k = 0; k < rounds; ++k) {
    const auto mine = blob_for(j.rank, k);
    const auto all = boot->allgather(mine.data(), mine.size());
    if (all.size() != static_cast<std::size_t>(j.size)) {
      std::printf("rank %d: round %d: got %zu blobs\n", j.rank, k, all.size());
      return 1;
    }
    for (int r = 0; r < j.size; ++r) {
      if (all[static_cast<std::size_t>(r)] != blob_for(r, k)) {
        std::printf("rank %d: round %d: blob of rank %d is wrong\n", j.rank, k, r);
        return 1;
      }
    }
    boot->barrier();
  }
  // The host ids every rank reports must agree with what each rank says.
  const int mine[2] = {j.host, j.local_rank};
  const auto hosts = boot->allgather(mine, sizeof mine);
  std::string placement;
  for (const auto& h : hosts) {
    int v[2];
    std::memcpy(v, h.data(), sizeof v);
    placement += " " + std::to_string(v[0]) + ":" + std::to_string(v[1]);
  }
  std::printf("%s allgather-ok rounds=%d placement=%s\n", info_line(j).c_str(), rounds, placement.c_str());
  return 0;
}

int mode_hang(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string dir = argv[2];
  bool ignore_term = false;
  bool grandchild = false;
  int segv_rank = -1;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--ignore-term") {
      ignore_term = true;
    } else if (a == "--grandchild") {
      grandchild = true;
    } else if (a == "--segv" && i + 1 < argc) {
      segv_rank = std::atoi(argv[++i]);
    } else {
      return usage();
    }
  }
  if (ignore_term) {
    ::signal(SIGTERM, SIG_IGN);
    ::signal(SIGINT, SIG_IGN);
  }
  auto boot = strata::bootstrap_from_environment();
  const int rank = boot->rank();
  if (grandchild) {
    const pid_t g = ::fork();
    if (g == 0) wait_forever();
    write_pid(dir + "/gpid." + std::to_string(rank), g);
  }
  write_pid(dir + "/pid." + std::to_string(rank), ::getpid());
  boot->barrier();
  if (rank == 0) {
    std::printf("READY\n");
    std::fflush(stdout);
  }
  if (rank == segv_rank) {
    rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::signal(SIGSEGV, SIG_DFL);
    ::raise(SIGSEGV);
  }
  wait_forever();
}

int mode_die_early(int victim, int code) {
  const char* r = std::getenv("STRATA_RANK");
  if (r != nullptr && std::atoi(r) == victim) return code;
  auto boot = strata::bootstrap_from_environment();
  try {
    const int x = boot->rank();
    boot->allgather(&x, sizeof x);
  } catch (const strata::Error& e) {
    std::printf("rank %d: allgather failed: %s\n", boot->rank(), e.what());
    return 7;
  }
  std::printf("rank %d: allgather unexpectedly succeeded\n", boot->rank());
  return 1;
}

int mode_watch_death(int victim) {
  auto boot = strata::bootstrap_from_environment();
  boot->barrier();
  if (boot->rank() == victim) return 9;
  if (boot->event_fd() < 0) {
    std::printf("rank %d: no event fd\n", boot->rank());
    return 1;
  }
  pollfd p{boot->event_fd(), POLLIN, 0};
  if (::poll(&p, 1, 20000) != 1) {
    std::printf("rank %d: no death event within 20 s\n", boot->rank());
    return 1;
  }
  const auto dead = boot->poll_dead_ranks();
  std::string list;
  for (int d : dead) list += " " + std::to_string(d);
  std::printf("rank %d saw dead ranks:%s\n", boot->rank(), list.c_str());
  // Once a rank is dead, collectives fail instead of hanging.
  try {
    boot->barrier();
    std::printf("rank %d: barrier after death unexpectedly succeeded\n", boot->rank());
    return 1;
  } catch (const strata::Error& e) {
    std::printf("rank %d: barrier after death failed: %s\n", boot->rank(), e.what());
  }
  return dead.size() == 1 && dead[0] == victim ? 0 : 1;
}

int mode_rdv_export(const std::string& fifo) {
  const char* r = std::getenv("STRATA_RANK");
  const int rank = r ? std::atoi(r) : 0;
  if (rank == 1) {
    // Hold back until the test has tried to impersonate rank 1.
    const int fd = ::open(fifo.c_str(), O_RDONLY);
    char c = 0;
    if (fd < 0 || ::read(fd, &c, 1) != 1) return 3;
    ::close(fd);
  }
  auto boot = strata::bootstrap_from_environment();
  if (rank == 0) {
    std::printf("RDV %s\n", std::getenv("STRATA_RDV"));
    std::fflush(stdout);
  }
  const std::string mine = "endpoint-of-rank-" + std::to_string(rank);
  const auto all = boot->allgather(mine.data(), mine.size());
  for (int q = 0; q < boot->size(); ++q) {
    const auto& b = all[static_cast<std::size_t>(q)];
    if (std::string(reinterpret_cast<const char*>(b.data()), b.size()) != "endpoint-of-rank-" + std::to_string(q)) {
      std::printf("rank %d: wrong blob from rank %d\n", rank, q);
      return 1;
    }
  }
  std::printf("rank %d: rdv-export ok\n", rank);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string mode = argv[1];
  try {
    if (mode == "info") {
      auto boot = strata::bootstrap_from_environment();
      const char* rdv = std::getenv("STRATA_RDV");
      const char* secret = std::getenv("STRATA_JOB_SECRET");
      std::printf("%s rdv=%s secret_len=%zu job_id=%s cpus=%s\n", info_line(boot->job()).c_str(), rdv ? rdv : "",
                  secret ? std::strlen(secret) : 0, boot->job().job_id.c_str(), cpu_list().c_str());
      return 0;
    }
    if (mode == "allgather" && argc == 3) return mode_allgather(std::atoi(argv[2]));
    if (mode == "exit" && argc == 4) {
      const char* r = std::getenv("STRATA_RANK");
      return (r != nullptr && std::atoi(r) == std::atoi(argv[2])) ? std::atoi(argv[3]) : 0;
    }
    if (mode == "hang") return mode_hang(argc, argv);
    if (mode == "die-early" && argc == 4) return mode_die_early(std::atoi(argv[2]), std::atoi(argv[3]));
    if (mode == "watch-death" && argc == 3) return mode_watch_death(std::atoi(argv[2]));
    if (mode == "print") {
      const char* r = std::getenv("STRATA_RANK");
      std::printf("hello from rank %s\nsecond line\n", r ? r : "?");
      std::fflush(stdout);
      std::fprintf(stderr, "err from rank %s\n", r ? r : "?");
      std::printf("tail without newline");
      return 0;
    }
    if (mode == "rdv-export" && argc == 3) return mode_rdv_export(argv[2]);
  } catch (const std::exception& e) {
    std::printf("probe error: %s\n", e.what());
    return 5;
  }
  return usage();
}
