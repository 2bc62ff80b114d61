// strata-net: an emulated cluster for programs that launch themselves, such as
// mpirun / mpiexec, so that MPI baselines run over the same links as
// `strata-run --net` (docs/cluster.md, bench/README.md "MPI on the emulated cluster").
//
//   strata-net --hosts H [--rate RATE|none] [--slots S] [--timeout S] -- COMMAND ARGS...
//
// Builds H virtual hosts (engine/tools/net/netcluster.hpp), writes a hostfile
// for Open MPI, a host list for MPICH's hydra and an rsh-style agent that
// enters a virtual host, runs COMMAND inside host 0 and removes everything
// when COMMAND ends (or strata-net is interrupted or killed).
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "net/netcluster.hpp"

namespace {

const char* const kUsage =
    "usage: strata-net --hosts H [options] -- COMMAND [ARGS...]\n"
    "  --hosts H          virtual hosts (network + UTS namespaces joined by a bridge), 1..200\n"
    "  --rate RATE|none   shape every link in both directions to RATE (tc units: 10gbit; default none)\n"
    "  --slots S          slots per host written to the hostfiles (default 1)\n"
    "  --timeout S        kill COMMAND after S seconds (exit status 124)\n"
    "  --check            print whether the emulated cluster can be built here (exit 0) or why not (exit 1)\n"
    "COMMAND runs inside host 0 with these variables set:\n"
    "  STRATA_NET_HOSTFILE     Open MPI hostfile (one 'ADDRESS slots=S' line per host)\n"
    "  STRATA_NET_MPICH_HOSTS  MPICH hydra host file ('ADDRESS:S' lines)\n"
    "  STRATA_NET_RSH          agent: $STRATA_NET_RSH [-opts] ADDRESS CMD... runs CMD inside that host\n"
    "  STRATA_NET_HOSTS        the addresses, comma separated\n"
    "  STRATA_NET_RATE_BPS     the link rate in bit/s (0 = unshaped)\n"
    "On exit each host's link byte counters are printed (the proof that data crossed the links).\n";

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "strata-net: error: %s (see strata-net --help)\n", msg.c_str());
  std::exit(2);
}

int parse_count(const std::string& opt, const std::string& v, int lo, int hi) {
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || errno != 0 || *end != '\0' || x < lo || x > hi)
    usage_error(opt + " expects an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + v +
                "'");
  return static_cast<int>(x);
}

}  // namespace

int main(int argc, char** argv) {
  namespace net = strata::tools::net;
  int hosts = 0, slots = 1;
  double rate = 0, timeout = 0;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.empty() || a[0] != '-') break;
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error("option " + a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--check") {
      const std::string why = net::Cluster::unavailable_reason();
      std::printf("%s\n", why.empty() ? "strata-net: available" : ("strata-net: unavailable: " + why).c_str());
      return why.empty() ? 0 : 1;
    } else if (a == "--hosts") {
      hosts = parse_count(a, value(), 1, 200);
    } else if (a == "--slots") {
      slots = parse_count(a, value(), 1, 4096);
    } else if (a == "--rate") {
      try {
        rate = net::parse_rate(value(), "--rate");
      } catch (const std::exception& e) {
        usage_error(e.what());
      }
    } else if (a == "--timeout") {
      timeout = parse_count(a, value(), 1, 86400);
    } else {
      usage_error("unknown option '" + a + "'");
    }
  }
  if (hosts == 0) usage_error("missing --hosts H");
  if (i >= argc) usage_error("missing COMMAND");

  sigset_t handled, orig;
  sigemptyset(&handled);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&handled, s);
  sigprocmask(SIG_BLOCK, &handled, &orig);

  char dir_tmpl[] = "/tmp/strata-net.XXXXXX";
  if (::mkdtemp(dir_tmpl) == nullptr) {
    std::fprintf(stderr, "strata-net: mkdtemp failed: %s\n", std::strerror(errno));
    return 1;
  }
  const std::string dir = dir_tmpl;
  int rc = 1;
  try {
    net::Cluster cl(hosts, rate);
    std::string list;
    {
      std::ofstream hf(dir + "/hostfile"), mh(dir + "/mpich_hosts"), rsh(dir + "/rsh");
      rsh << "#!/bin/sh\n# strata-net agent: [options] ADDRESS COMMAND... runs COMMAND inside that virtual host\n"
          << "while [ $# -gt 0 ]; do case \"$1\" in -*) shift ;; *) break ;; esac; done\n"
          << "host=$1; shift\ncase \"$host\" in\n";
      for (int h = 0; h < hosts; ++h) {
        const std::string ad = net::Cluster::address(h);
        hf << ad << " slots=" << slots << "\n";
        mh << ad << ":" << slots << "\n";
        list += (h ? "," : "") + ad;
        rsh << "  " << ad << "|" << net::Cluster::hostname(h) << ") pid=" << cl.holder(h) << " ;;\n";
      }
      rsh << "  *) echo \"strata-net agent: unknown host '$host'\" >&2; exit 255 ;;\nesac\n"
          << "exec nsenter --net=/proc/$pid/ns/net --uts=/proc/$pid/ns/uts -- sh -c \"$*\"\n";
    }
    ::chmod((dir + "/rsh").c_str(), 0755);
    char bps[32];
    std::snprintf(bps, sizeof bps, "%.0f", rate);
    ::setenv("STRATA_NET_HOSTFILE", (dir + "/hostfile").c_str(), 1);
    ::setenv("STRATA_NET_MPICH_HOSTS", (dir + "/mpich_hosts").c_str(), 1);
    ::setenv("STRATA_NET_RSH", (dir + "/rsh").c_str(), 1);
    ::setenv("STRATA_NET_HOSTS", list.c_str(), 1);
    ::setenv("STRATA_NET_RATE_BPS", bps, 1);

    const pid_t self = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
      if (::getppid() != self || !cl.enter(0)) _exit(127);
      ::sigprocmask(SIG_SETMASK, &orig, nullptr);
      ::execvp(argv[i], argv + i);
      std::fprintf(stderr, "strata-net: cannot run %s: %s\n", argv[i], std::strerror(errno));
      _exit(127);
    }
    ::setpgid(pid, pid);
    const auto t0 = std::chrono::steady_clock::now();
    bool timed_out = false;
    int status = 0;
    for (;;) {
      const pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) break;
      timespec ts{0, 100 * 1000 * 1000};
      siginfo_t si{};
      const int sig = ::sigtimedwait(&handled, &si, &ts);
      if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) ::kill(-pid, sig);
      if (timeout > 0 && !timed_out && std::chrono::steady_clock::now() - t0 > std::chrono::duration<double>(timeout)) {
        std::fprintf(stderr, "strata-net: timed out after %g s; killing the command\n", timeout);
        ::kill(-pid, SIGKILL);
        timed_out = true;
      }
    }
    ::kill(-pid, SIGKILL);  // whatever the command left in its process group
    std::fputs(cl.link_report("strata-net").c_str(), stderr);
    rc = timed_out ? 124 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-net: unavailable: %s\n", e.what());
  }
  for (const char* f : {"/hostfile", "/mpich_hosts", "/rsh"}) ::unlink((dir + f).c_str());
  ::rmdir(dir.c_str());
  return rc;
}
