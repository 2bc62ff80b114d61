// strata-net: an emulated cluster for programs that launch themselves, such as
// mpirun / mpiexec, so that MPI baselines run over the same links as
// `strata-run --net` (docs/cluster.md, bench/README.md "MPI on the emulated cluster").
//
//   strata-net --hosts H [--rate RATE|none] [--slots S] [--timeout S] -- COMMAND ARGS...
//
// Builds H virtual hosts (tools/net/netcluster.hpp), writes a hostfile
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
#include "strata_cli.hpp"

namespace {

[[noreturn]] void usage_error(const std::string& msg) { strata::cli::fail("strata-net", msg); }

}  // namespace

// Over ~80 lines: the CLI11 option declarations and one straight run.
int main(int argc, char** argv) {
  namespace net = strata::tools::net;
  int hosts = 0, slots = 1;
  double rate = 0, timeout = 0;
  CLI::App app{
      "Runs COMMAND in an emulated cluster of H virtual hosts:\n"
      "  strata-net --hosts H [options] -- COMMAND [ARGS...]\n"
      "COMMAND runs inside host 0 with these variables set:\n"
      "  STRATA_NET_HOSTFILE     Open MPI hostfile (one 'ADDRESS slots=S' line per host)\n"
      "  STRATA_NET_MPICH_HOSTS  MPICH hydra host file ('ADDRESS:S' lines)\n"
      "  STRATA_NET_RSH          agent: $STRATA_NET_RSH [-opts] ADDRESS CMD... runs CMD inside that host\n"
      "  STRATA_NET_HOSTS        the addresses, comma separated\n"
      "  STRATA_NET_RATE_BPS     the link rate in bit/s (0 = unshaped)\n"
      "On exit each host's link byte counters are printed (the proof that data crossed the links).",
      "strata-net"};
  std::string rate_text;
  app.add_option("--hosts", hosts, "virtual hosts (network + UTS namespaces joined by a bridge)")
      ->check(strata::cli::integer(1, 200));
  app.add_option("--rate", rate_text, "shape every link in both directions to RATE (tc units: 10gbit; default none)")
      ->type_name("RATE|none");
  std::string cc = net::kDefaultCongestionControl;
  app.add_option("--cc", cc,
                 "TCP congestion control of every virtual host (default cubic, Linux's default; host = inherit "
                 "this machine's; docs/cluster.md)")
      ->type_name("NAME|host");
  app.add_option("--slots", slots, "slots per host written to the hostfiles (default 1)")
      ->check(strata::cli::integer(1, 4096));
  int timeout_s = 0;
  app.add_option("--timeout", timeout_s, "kill COMMAND after S seconds (exit status 124)")
      ->check(strata::cli::integer(1, 86400));
  app.add_flag_callback(
      "--check",
      [] {
        const std::string why = net::Cluster::unavailable_reason();
        std::printf("%s\n", why.empty() ? "strata-net: available" : ("strata-net: unavailable: " + why).c_str());
        std::exit(why.empty() ? 0 : 1);
      },
      "print whether the emulated cluster can be built here (exit 0) or why not (exit 1)");
  std::vector<std::string> command = strata::cli::parse_prefix(app, argc, argv);
  timeout = timeout_s;
  if (!rate_text.empty()) {
    try {
      rate = net::parse_rate(rate_text, "--rate");
    } catch (const std::exception& e) {
      usage_error(e.what());
    }
  }
  if (hosts == 0) usage_error("missing --hosts H");
  if (command.empty()) usage_error("missing COMMAND");
  std::vector<char*> command_argv;
  for (auto& w : command) command_argv.push_back(w.data());
  command_argv.push_back(nullptr);

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
    net::Cluster cl(hosts, rate, cc);
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
      ::execvp(command_argv[0], command_argv.data());
      std::fprintf(stderr, "strata-net: cannot run %s: %s\n", command_argv[0], std::strerror(errno));
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
