// strata-run: launches N ranks of a program on this machine, serves their
// rendezvous, and supervises them (see docs/launcher.md).
//
//   strata-run -n N [--hosts H] [--bind core|numa|none] [--timeout S] [--grace S]
//              [--tag-output] [--topology SPEC] [--on-failure kill|continue]
//              [--net RATE|none [--net-cc NAME|host]] -- PROGRAM ARGS...
//
// One single-threaded poll loop watches a signalfd (SIGCHLD, SIGINT, SIGTERM,
// SIGHUP), the rendezvous sockets and, with --tag-output, the ranks' output
// pipes. Each rank runs in its own process group so that terminating a rank
// also terminates what it spawned; the launcher is a child subreaper, so it
// reaps orphaned grandchildren too and leaves no process behind.
// Over ~800 lines: the launcher's options, modes and process supervision share its state.
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <hwloc.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "net/netcluster.hpp"
#include "strata/detail/env.hpp"
#include "strata/detail/rendezvous.hpp"
#include "strata/report.hpp"
#include "strata_cli.hpp"

extern char** environ;

namespace {

namespace rdv = strata::detail::rdv;
using Clock = std::chrono::steady_clock;

constexpr int kExitTimeout = 124;

[[noreturn]] void usage_error(const std::string& msg) { strata::cli::fail("strata-run", msg); }

struct Options {
  int n = 0;
  int hosts = 1;
  std::string bind = "auto";
  double timeout = 0;
  double grace = 3;
  bool tag_output = false;
  std::optional<std::string> topology;
  bool kill_on_failure = true;
  std::optional<double> net_bps;  // --net: link rate in bit/s (0 = unshaped)
  bool net_stats = false;
  std::string net_cc = strata::tools::net::kDefaultCongestionControl;  // --net-cc
  std::vector<std::string> argv;                                       // PROGRAM ARGS...
  std::string program;                                                 // resolved path
};

int parse_int(const std::string& opt, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || errno != 0 || *end != '\0' || x < -1000000000L || x > 1000000000L)
    usage_error(opt + " expects an integer, got '" + v + "'");
  return static_cast<int>(x);
}

double parse_seconds(const std::string& opt, const std::string& v, bool allow_zero) {
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || errno != 0 || *end != '\0' || !(x >= 0) || x > 1e7 || (!allow_zero && x == 0))
    usage_error(opt + " expects a number of seconds " + (allow_zero ? ">= 0" : "> 0") + ", got '" + v + "'");
  return x;
}

/// Finds @p prog like execvp would; exits with a usage error if it cannot run.
std::string resolve_program(const std::string& prog) {
  auto check = [](const std::string& path, std::string& why) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      why = std::strerror(errno);
      return false;
    }
    if (S_ISDIR(st.st_mode)) {
      why = "is a directory";
      return false;
    }
    if (::access(path.c_str(), X_OK) != 0) {
      why = "is not executable";
      return false;
    }
    return true;
  };
  std::string why;
  if (prog.find('/') != std::string::npos) {
    if (!check(prog, why)) usage_error("program '" + prog + "': " + why);
    return prog;
  }
  const char* path_env = std::getenv("PATH");
  std::string path = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  std::string not_exec;
  std::size_t start = 0;
  for (;;) {
    const std::size_t colon = path.find(':', start);
    std::string dir = path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (dir.empty()) dir = ".";
    const std::string cand = dir + "/" + prog;
    if (check(cand, why)) return cand;
    if (why != std::strerror(ENOENT) && not_exec.empty()) not_exec = cand + " " + why;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (!not_exec.empty()) usage_error("program '" + prog + "' cannot be run: " + not_exec);
  usage_error("program '" + prog + "' not found in PATH");
}

Options parse_args(int argc, char** argv) {
  Options o;
  // CLI11 reads the syntax (--opt V, --opt=V, -h); the values are checked below with messages naming the option.
  std::string n, hosts, bind, timeout, grace, net, on_failure;
  CLI::App app{
      "Launches N ranks of PROGRAM on this machine (one process each) and waits for them:\n"
      "  strata-run -n N [options] [--] PROGRAM [ARGS...]",
      "strata-run"};
  app.get_formatter()->column_width(30);
  app.add_option("-n,--np", n, "number of ranks (>= 1)")->type_name("N");
  app.add_option("--hosts", hosts, "split the ranks into H virtual hosts, block placement (1 <= H <= N; default 1)")
      ->type_name("H");
  app.add_option("--bind", bind,
                 "pin each rank to a core / NUMA node, round-robin (default: core if N <= cores, "
                 "else none)")
      ->type_name("core|numa|none");
  app.add_option("--timeout", timeout, "terminate the job after S seconds (exit status 124)")->type_name("S");
  app.add_option("--grace", grace, "seconds between SIGTERM and SIGKILL when terminating (default 3)")->type_name("S");
  app.add_option("--on-failure", on_failure,
                 "when a rank fails: terminate the others (kill, the default) or let them run on (continue)")
      ->type_name("kill|continue");
  app.add_flag("--tag-output", o.tag_output, "prefix every line of output with [rank]");
  std::string topology;
  app.add_option("--topology", topology, "hwloc synthetic description or XML file, exported as STRATA_TOPOLOGY")
      ->type_name("SPEC");
  app.add_option("--net", net,
                 "emulated cluster: each virtual host in its own network and UTS namespace, linked through a "
                 "bridge, every link shaped to RATE in both directions (tc units: 10gbit, 25gbit; none = "
                 "unshaped); needs root (docs/cluster.md)")
      ->type_name("RATE|none");
  app.add_flag("--net-stats", o.net_stats, "with --net: print the bytes each host's link carried at the end");
  app.add_option("--net-cc", o.net_cc,
                 "with --net: TCP congestion control of every virtual host (default cubic, Linux's default; "
                 "host = inherit this machine's; docs/cluster.md)")
      ->type_name("NAME|host");
  app.add_flag_callback(
      "--net-check",
      [] {
        const std::string why = strata::tools::net::Cluster::unavailable_reason();
        std::printf("%s\n",
                    why.empty() ? "strata-run: --net is available" : ("strata-run: --net unavailable: " + why).c_str());
        std::exit(why.empty() ? 0 : 1);
      },
      "print whether --net can work here (exit 0) or why not (exit 1)");
  o.argv = strata::cli::parse_prefix(app, argc, argv);
  if (app.count("--topology") > 0) o.topology = topology;

  if (n.empty()) usage_error("missing -n N (number of ranks)");
  o.n = parse_int("-n", n);
  if (!hosts.empty()) o.hosts = parse_int("--hosts", hosts);
  if (!bind.empty()) {
    o.bind = bind;
    if (o.bind != "core" && o.bind != "numa" && o.bind != "none")
      usage_error("--bind expects core, numa or none, got '" + o.bind + "'");
  }
  if (!timeout.empty()) o.timeout = parse_seconds("--timeout", timeout, false);
  if (!grace.empty()) o.grace = parse_seconds("--grace", grace, true);
  if (!net.empty()) {
    try {
      o.net_bps = strata::tools::net::parse_rate(net, "--net");
    } catch (const std::exception& e) {
      usage_error(e.what());
    }
  }
  if (!on_failure.empty()) {
    if (on_failure != "kill" && on_failure != "continue")
      usage_error("--on-failure expects kill or continue, got '" + on_failure + "'");
    o.kill_on_failure = on_failure == "kill";
  }
  if (o.n < 1) usage_error("-n must be >= 1, got " + std::to_string(o.n));
  if (o.hosts < 1 || o.hosts > o.n)
    usage_error("--hosts must be in [1, n=" + std::to_string(o.n) + "], got " + std::to_string(o.hosts));
  if (o.argv.empty()) usage_error("missing program to run (strata-run -n N -- PROGRAM ARGS...)");
  o.program = resolve_program(o.argv[0]);
  return o;
}

// ------------------------------------------------------------------ binding

/// Cpusets to bind rank r to (index r % size), empty for no binding.
std::vector<cpu_set_t> binding_sets(const Options& o, std::string& applied) {
  std::vector<cpu_set_t> sets;
  applied = "none";
  if (o.bind == "none") return sets;
  hwloc_topology_t topo = nullptr;
  if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0) {
    std::fprintf(stderr, "strata-run: warning: hwloc cannot load the topology; ranks are not bound\n");
    if (topo) hwloc_topology_destroy(topo);
    return sets;
  }
  hwloc_bitmap_t allowed = hwloc_bitmap_alloc();
  if (hwloc_get_cpubind(topo, allowed, HWLOC_CPUBIND_PROCESS) != 0)
    hwloc_bitmap_copy(allowed, hwloc_topology_get_allowed_cpuset(topo));
  const bool numa = o.bind == "numa";
  const hwloc_obj_type_t type = numa ? HWLOC_OBJ_NUMANODE : HWLOC_OBJ_CORE;
  const int count = hwloc_get_nbobjs_by_type(topo, type);
  hwloc_bitmap_t s = hwloc_bitmap_alloc();
  for (int k = 0; k < count; ++k) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(topo, type, static_cast<unsigned>(k));
    if (obj == nullptr || obj->cpuset == nullptr) continue;
    hwloc_bitmap_and(s, obj->cpuset, allowed);
    if (hwloc_bitmap_iszero(s)) continue;
    cpu_set_t cs;
    CPU_ZERO(&cs);
    for (int b = hwloc_bitmap_first(s); b != -1; b = hwloc_bitmap_next(s, b)) {
      if (b < CPU_SETSIZE) CPU_SET(b, &cs);
    }
    sets.push_back(cs);
  }
  hwloc_bitmap_free(s);
  hwloc_bitmap_free(allowed);
  hwloc_topology_destroy(topo);
  if (o.bind == "auto" && (sets.empty() || static_cast<std::size_t>(o.n) > sets.size())) {
    sets.clear();  // oversubscribed: leave placement to the kernel
    return sets;
  }
  if (sets.empty()) {
    std::fprintf(stderr, "strata-run: warning: no %s with allowed CPUs found; ranks are not bound\n",
                 numa ? "NUMA node" : "core");
    return sets;
  }
  applied = numa ? "numa" : "core";
  return sets;
}

// ------------------------------------------------------------------ job state

struct Rank {
  pid_t pid = -1;
  bool alive = false;
  int status = 0;
  std::optional<Clock::time_point> stopped_since;  // stopped by a signal (SIGSTOP, SIGTSTP, ...)
  int stop_signal = 0;
  bool stop_reported = false;  // reported dead to the others after STRATA_TIMEOUT stopped
};

struct OutPipe {
  int fd = -1;
  int rank = 0;
  int dest = 1;  // 1 = stdout, 2 = stderr
  std::string partial;
};

void write_fd(int fd, const std::string& s) {
  const char* p = s.data();
  std::size_t left = s.size();
  while (left > 0) {
    const ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // stdout closed: drop the output, keep supervising
    p += w;
    left -= static_cast<std::size_t>(w);
  }
}

void emit_lines(OutPipe& p, bool final) {
  std::string out;
  std::size_t start = 0;
  const std::string tag = "[" + std::to_string(p.rank) + "] ";
  for (;;) {
    const std::size_t nl = p.partial.find('\n', start);
    if (nl == std::string::npos) break;
    out += tag;
    out.append(p.partial, start, nl - start + 1);
    start = nl + 1;
  }
  p.partial.erase(0, start);
  if ((final && !p.partial.empty()) || p.partial.size() > 65536) {
    out += tag + p.partial + "\n";
    p.partial.clear();
  }
  if (!out.empty()) write_fd(p.dest, out);
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

int remove_entry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

/// Pids of live processes whose parent is this process (orphans we adopted).
std::vector<pid_t> adopted_children() {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  const pid_t self = ::getpid();
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream f(std::string("/proc/") + e->d_name + "/stat");
    std::string line;
    if (!std::getline(f, line)) continue;
    const auto rp = line.rfind(')');
    if (rp == std::string::npos) continue;
    std::istringstream rest(line.substr(rp + 1));
    char state = 0;
    long ppid = 0;
    rest >> state >> ppid;
    if (ppid == self) out.push_back(static_cast<pid_t>(std::atol(e->d_name)));
  }
  ::closedir(d);
  return out;
}

class Launcher {
 public:
  explicit Launcher(Options o) : opt_(std::move(o)), ranks_(static_cast<std::size_t>(opt_.n)) {}

  int run() {
    setup_signals();
    setup_rendezvous();
    if (opt_.net_bps) {
      try {
        net_ = std::make_unique<strata::tools::net::Cluster>(opt_.hosts, *opt_.net_bps, opt_.net_cc);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "strata-run: --net unavailable: %s\n", e.what());
        cleanup();
        return 1;
      }
    }
    std::string applied;
    const auto sets = binding_sets(opt_, applied);
    spawn_all(sets, applied);
    loop();
    cleanup();
    return exit_code_;
  }

 private:
  void setup_signals() {
    sigemptyset(&handled_);
    for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR2}) sigaddset(&handled_, s);
    if (sigprocmask(SIG_BLOCK, &handled_, &orig_mask_) != 0) fatal("sigprocmask");
    sfd_ = ::signalfd(-1, &handled_, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sfd_ < 0) fatal("signalfd");
    ::signal(SIGPIPE, SIG_IGN);
    // Orphaned grandchildren are re-parented to us, so we can reap them.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  }

  [[noreturn]] void fatal(const char* what) {
    std::fprintf(stderr, "strata-run: %s failed: %s\n", what, std::strerror(errno));
    remove_dir();
    std::exit(1);
  }

  void setup_rendezvous() {
    rdv::random_bytes(secret_.data(), secret_.size());
    job_id_ = "strata-" + rdv::random_hex(8);
    std::string base = "/tmp";
    if (const char* t = std::getenv("TMPDIR"); t != nullptr && *t == '/' && std::strlen(t) < 60) base = t;
    std::string tmpl = base + "/strata-run.XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) fatal("mkdtemp");  // mode 0700
    dir_ = buf.data();
    sock_path_ = dir_ + "/rdv.sock";
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (sock_path_.size() >= sizeof addr.sun_path) {
      errno = ENAMETOOLONG;
      fatal("rendezvous socket path");
    }
    std::memcpy(addr.sun_path, sock_path_.c_str(), sock_path_.size() + 1);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) fatal("socket");
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) fatal("bind");
    ::chmod(sock_path_.c_str(), 0600);
    if (::listen(fd, 256) != 0) fatal("listen");
    server_ = std::make_unique<rdv::Server>(fd, opt_.n, secret_);
  }

  std::vector<std::string> rank_env(int r, const std::string& applied) const {
    static const char* const ours[] = {rdv::env::kRank,   rdv::env::kSize,      rdv::env::kHost,
                                       rdv::env::kNHosts, rdv::env::kLocalRank, rdv::env::kLocalSize,
                                       rdv::env::kJobId,  rdv::env::kSecret,    rdv::env::kRdv,
                                       rdv::env::kJobDir, rdv::env::kBind,      rdv::env::kTopology};
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string kv = *e;
      const std::string key = kv.substr(0, kv.find('='));
      const bool replaced = std::any_of(std::begin(ours), std::end(ours), [&](const char* k) {
        return key == k && (key != rdv::env::kTopology || opt_.topology.has_value());
      });
      if (!replaced) env.push_back(kv);
    }
    const auto p = rdv::block_placement(r, opt_.n, opt_.hosts);
    auto set = [&](const char* k, const std::string& v) { env.push_back(std::string(k) + "=" + v); };
    set(rdv::env::kRank, std::to_string(r));
    set(rdv::env::kSize, std::to_string(opt_.n));
    set(rdv::env::kHost, std::to_string(p.host));
    set(rdv::env::kNHosts, std::to_string(opt_.hosts));
    set(rdv::env::kLocalRank, std::to_string(p.local_rank));
    set(rdv::env::kLocalSize, std::to_string(p.local_size));
    set(rdv::env::kJobId, job_id_);
    set(rdv::env::kSecret, rdv::secret_to_hex(secret_));
    set(rdv::env::kRdv, sock_path_);
    set(rdv::env::kJobDir, dir_);
    set(rdv::env::kBind, applied);
    if (opt_.net_bps) {  // for benchmarks that report the link bound (docs/cluster.md)
      char bps[32];
      std::snprintf(bps, sizeof bps, "%.0f", *opt_.net_bps);
      set("STRATA_NET_RATE_BPS", bps);
    }
    if (opt_.topology) set(rdv::env::kTopology, *opt_.topology);
    return env;
  }

  void spawn_all(const std::vector<cpu_set_t>& sets, const std::string& applied) {
    const pid_t self = ::getpid();
    const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    std::vector<char*> argv;
    for (auto& a : opt_.argv) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (int r = 0; r < opt_.n; ++r) {
      std::vector<std::string> env = rank_env(r, applied);
      std::vector<char*> envp;
      for (auto& e : env) envp.push_back(e.data());
      envp.push_back(nullptr);
      int out[2] = {-1, -1};
      int err[2] = {-1, -1};
      if (opt_.tag_output && (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)) {
        std::fprintf(stderr, "strata-run: pipe failed: %s\n", std::strerror(errno));
        start_termination(SIGTERM);
        exit_code_ = 1;
        break;
      }
      const cpu_set_t* cpus = sets.empty() ? nullptr : &sets[static_cast<std::size_t>(r) % sets.size()];
      const int host = rdv::block_placement(r, opt_.n, opt_.hosts).host;
      const pid_t pid = ::fork();
      if (pid == 0) {
        // Child: only async-signal-safe calls until exec.
        ::setpgid(0, 0);
        ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (::getppid() != self) _exit(127);
        if (net_ && !net_->enter(host)) {
          const char* msg = "strata-run: cannot enter the rank's virtual host namespaces\n";
          [[maybe_unused]] ssize_t w = ::write(2, msg, std::strlen(msg));
          _exit(127);
        }
        if (devnull >= 0) ::dup2(devnull, 0);
        if (opt_.tag_output) {
          ::dup2(out[1], 1);
          ::dup2(err[1], 2);
        }
        if (cpus != nullptr) ::sched_setaffinity(0, sizeof(cpu_set_t), cpus);
        ::signal(SIGPIPE, SIG_DFL);
        ::sigprocmask(SIG_SETMASK, &orig_mask_, nullptr);
        ::execve(opt_.program.c_str(), argv.data(), envp.data());
        const int e = errno;
        const char* msg = "strata-run: exec failed: ";
        [[maybe_unused]] ssize_t w = ::write(2, msg, std::strlen(msg));
        w = ::write(2, std::strerror(e), std::strlen(std::strerror(e)));
        w = ::write(2, "\n", 1);
        _exit(127);
      }
      if (pid < 0) {
        std::fprintf(stderr, "strata-run: fork for rank %d failed: %s\n", r, std::strerror(errno));
        if (opt_.tag_output) {
          for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
        }
        for (int q = r; q < opt_.n; ++q) server_->rank_exited(q, true, "could not be started (fork failed)");
        start_termination(SIGTERM);
        exit_code_ = 1;
        break;
      }
      ::setpgid(pid, pid);  // also in the parent, so kill(-pid) works at once
      auto& rk = ranks_[static_cast<std::size_t>(r)];
      rk.pid = pid;
      rk.alive = true;
      ++alive_;
      by_pid_[pid] = r;
      if (opt_.tag_output) {
        ::close(out[1]);
        ::close(err[1]);
        ::fcntl(out[0], F_SETFL, O_NONBLOCK);
        ::fcntl(err[0], F_SETFL, O_NONBLOCK);
        pipes_.push_back(OutPipe{out[0], r, 1, {}});
        pipes_.push_back(OutPipe{err[0], r, 2, {}});
      }
    }
    if (devnull >= 0) ::close(devnull);
    if (opt_.timeout > 0)
      job_deadline_ =
          Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt_.timeout));
  }

  void signal_rank(Rank& rk, int sig) {
    if (!rk.alive) return;
    if (::kill(-rk.pid, sig) != 0) ::kill(rk.pid, sig);
  }

  // Hang report on demand (SIGUSR2 to strata-run): forwarded to the ranks,
  // whose engines' watchdogs write their pending calls to the job's report
  // directory; merged into one summary (strata::report::merge) once all are
  // in or after 2 s.
  void request_report() {
    if (report_deadline_) return;  // one at a time
    const std::string rdir = dir_ + "/reports";
    ::mkdir(rdir.c_str(), 0700);
    for (int r = 0; r < opt_.n; ++r) ::unlink((rdir + "/report." + std::to_string(r)).c_str());
    for (auto& rk : ranks_)
      if (rk.alive && ::kill(rk.pid, SIGUSR2) != 0) ::kill(-rk.pid, SIGUSR2);
    report_deadline_ = Clock::now() + std::chrono::seconds(2);
  }
  int reports_in() const {
    int n = 0;
    for (int r = 0; r < opt_.n; ++r) {
      struct stat st {};
      if (::stat((dir_ + "/reports/report." + std::to_string(r)).c_str(), &st) == 0) ++n;
    }
    return n;
  }
  void finish_report() {
    report_deadline_.reset();
    std::vector<std::string> texts;
    for (int r = 0; r < opt_.n; ++r) {
      std::ifstream f(dir_ + "/reports/report." + std::to_string(r));
      if (!f) continue;
      std::ostringstream ss;
      ss << f.rdbuf();
      texts.push_back(ss.str());
    }
    const std::string summary = strata::report::merge(texts, opt_.n);
    std::fprintf(stderr, "%s", summary.c_str());
    std::fflush(stderr);
  }

  void start_termination(int sig) {
    if (terminating_) return;
    terminating_ = true;
    for (auto& rk : ranks_) signal_rank(rk, sig);
    kill_deadline_ =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt_.grace));
  }

  void kill_all() {
    for (auto& rk : ranks_) signal_rank(rk, SIGKILL);
    kill_deadline_.reset();
  }

  void on_exit(int r, int status) {
    auto& rk = ranks_[static_cast<std::size_t>(r)];
    rk.alive = false;
    rk.status = status;
    --alive_;
    std::string why;
    int code = 0;
    if (WIFEXITED(status)) {
      code = WEXITSTATUS(status);
      why = "exited with status " + std::to_string(code);
    } else if (WIFSIGNALED(status)) {
      code = 128 + WTERMSIG(status);
      why = "killed by signal " + signal_name(WTERMSIG(status));
    } else {
      return;
    }
    const bool failed = code != 0;
    if (rk.stop_reported) {  // reported dead while stopped, then fenced (check_stopped): say how it ended
      std::fprintf(stderr, "strata-run: rank %d (pid %d) %s\n", r, static_cast<int>(rk.pid), why.c_str());
      return;
    }
    server_->rank_exited(r, failed, why);
    if (!failed) return;
    if (terminating_) {
      ++terminated_;
      return;  // an expected consequence of the termination already under way
    }
    std::fprintf(stderr, "strata-run: rank %d (pid %d) %s\n", r, static_cast<int>(rk.pid), why.c_str());
    if (exit_code_ == 0) exit_code_ = code > 255 ? 255 : code;
    if (opt_.kill_on_failure && alive_ > 0) {
      std::fprintf(stderr, "strata-run: terminating the other %d rank(s)\n", alive_);
      start_termination(SIGTERM);
    }
  }

  void reap() {
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG | WUNTRACED | WCONTINUED);
      if (pid <= 0) return;
      const auto it = by_pid_.find(pid);
      if (WIFSTOPPED(status) || WIFCONTINUED(status)) {
        if (it == by_pid_.end()) continue;  // an adopted orphan: nothing to do
        Rank& rk = ranks_[static_cast<std::size_t>(it->second)];
        if (WIFSTOPPED(status)) {
          if (!rk.stopped_since) rk.stopped_since = Clock::now();
          rk.stop_signal = WSTOPSIG(status);
        } else {
          rk.stopped_since.reset();
        }
        continue;
      }
      if (it != by_pid_.end()) {
        on_exit(it->second, status);
        by_pid_.erase(it);
      }  // else: an adopted orphan, now reaped
    }
  }

  /// STRATA_TIMEOUT (ms) of the ranks, as they read it from the environment
  /// they inherit (default 30000; a malformed value is the ranks' error).
  static long stop_limit_ms() {
    const char* v = strata::detail::env::get("STRATA_TIMEOUT");
    if (v == nullptr) return 30000;
    char* end = nullptr;
    const long ms = std::strtol(v, &end, 10);
    return end != nullptr && *end == '\0' && ms > 0 ? ms : 30000;
  }

  /// A rank stopped by a signal for longer than STRATA_TIMEOUT answers nobody:
  /// its peers would wait for it (a stopped process is neither dead nor
  /// silent to the transport when nothing is in flight to it). Report it like
  /// a failed rank: the others get a death event and fail what needs it.
  /// Returns the milliseconds until the next such deadline (-1: none).
  int check_stopped(Clock::time_point now) {
    int next = -1;
    const long limit = stop_limit_ms();
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      Rank& rk = ranks_[r];
      if (!rk.alive || !rk.stopped_since || rk.stop_reported) continue;
      const auto due = *rk.stopped_since + std::chrono::milliseconds(limit);
      if (now < due) {
        const int t = ms_until(due, now);
        if (next < 0 || t < next) next = t;
        continue;
      }
      rk.stop_reported = true;
      const std::string why = "was stopped by signal " + signal_name(rk.stop_signal) +
                              " for more than STRATA_TIMEOUT=" + std::to_string(limit) + " ms";
      std::fprintf(stderr, "strata-run: rank %zu (pid %d) %s; reporting it dead to the other ranks and killing it\n", r,
                   static_cast<int>(rk.pid), why.c_str());
      server_->rank_exited(static_cast<int>(r), true, why);
      // Fencing, in every --on-failure mode: a rank declared dead must not
      // come back (continued, it would rejoin calls its peers already failed).
      // SIGKILL works on a stopped process; reap() then sees it exit.
      ::kill(rk.pid, SIGKILL);
      if (terminating_) continue;
      if (exit_code_ == 0) exit_code_ = 128 + rk.stop_signal;
      if (opt_.kill_on_failure && alive_ > 0) {
        std::fprintf(stderr, "strata-run: terminating the other %d rank(s)\n", alive_ - 1);
        start_termination(SIGTERM);
      }
    }
    return next;
  }

  void on_signals() {
    signalfd_siginfo si{};
    while (::read(sfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      const int sig = static_cast<int>(si.ssi_signo);
      if (sig == SIGCHLD) continue;  // reap() runs every iteration
      if (sig == SIGUSR2) {          // a hang report, on demand (docs/reliability.md)
        request_report();
        continue;
      }
      if (got_signal_) {
        std::fprintf(stderr, "strata-run: received %s again; killing the ranks\n", signal_name(sig).c_str());
        kill_all();
        continue;
      }
      got_signal_ = true;
      std::fprintf(stderr, "strata-run: received %s; forwarding it to %d rank(s)\n", signal_name(sig).c_str(), alive_);
      if (exit_code_ == 0) exit_code_ = 128 + sig;
      terminating_ = false;  // forward this signal even if a termination is under way
      start_termination(sig);
    }
  }

  void on_pipe(OutPipe& p) {
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(p.fd, buf, sizeof buf);
      if (n > 0) {
        p.partial.append(buf, static_cast<std::size_t>(n));
        emit_lines(p, false);
        if (static_cast<std::size_t>(n) < sizeof buf) return;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      emit_lines(p, true);  // EOF or error
      ::close(p.fd);
      p.fd = -1;
      return;
    }
  }

  static int ms_until(std::optional<Clock::time_point> t, Clock::time_point now) {
    if (!t) return -1;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*t - now).count() + 1;
    return static_cast<int>(std::clamp<long long>(ms, 0, 60000));
  }

  void loop() {
    std::optional<Clock::time_point> drain_deadline;
    std::vector<pollfd> fds;
    for (;;) {
      reap();
      if (alive_ == 0 && !drain_deadline) {
        // The link counters now, while the namespace holders live:
        // kill_leftovers() ends every child, the holders too (they used to
        // read as -1: "received -0.0 MB").
        if (net_ && opt_.net_stats) link_text_ = net_->link_report("strata-run");
        kill_leftovers();
        drain_deadline = Clock::now() + std::chrono::seconds(2);
      }
      const auto now = Clock::now();
      const bool pipes_open = std::any_of(pipes_.begin(), pipes_.end(), [](const OutPipe& p) { return p.fd >= 0; });
      if (alive_ == 0 && (!pipes_open || now >= *drain_deadline)) break;
      if (job_deadline_ && now >= *job_deadline_) {
        job_deadline_.reset();
        std::fprintf(stderr, "strata-run: job timed out after %g s; terminating %d rank(s)\n", opt_.timeout, alive_);
        if (exit_code_ == 0) exit_code_ = kExitTimeout;
        // The reports the ranks wrote by themselves (a call pending for
        // STRATA_TIMEOUT makes every rank write one), merged; no signal to
        // the ranks (a program that does not use strata would die of it).
        if (reports_in() > 0) finish_report();
        start_termination(SIGTERM);
      }
      if (report_deadline_ && (now >= *report_deadline_ || reports_in() >= alive_)) finish_report();
      if (kill_deadline_ && now >= *kill_deadline_) {
        if (alive_ > 0)
          std::fprintf(stderr, "strata-run: %d rank(s) still running %g s after SIGTERM; sending SIGKILL\n", alive_,
                       opt_.grace);
        kill_all();
      }
      fds.clear();
      fds.push_back(pollfd{sfd_, POLLIN, 0});
      const std::size_t server_first = fds.size();
      server_->fill_pollfds(fds);
      const std::size_t pipes_first = fds.size();
      std::vector<OutPipe*> polled;
      for (auto& p : pipes_) {
        if (p.fd < 0) continue;
        fds.push_back(pollfd{p.fd, POLLIN, 0});
        polled.push_back(&p);
      }
      const int stop_t = check_stopped(now);
      int timeout = server_->timeout_ms();
      const int report_t = report_deadline_ ? std::min(ms_until(report_deadline_, now), 50) : -1;
      for (int t : {stop_t, report_t, ms_until(job_deadline_, now), ms_until(kill_deadline_, now),
                    alive_ == 0 ? ms_until(drain_deadline, now) : -1}) {
        if (t >= 0 && (timeout < 0 || t < timeout)) timeout = t;
      }
      const int rc = ::poll(fds.data(), fds.size(), timeout);
      if (rc < 0) {
        if (errno == EINTR) continue;
        fatal("poll");
      }
      if (fds[0].revents & POLLIN) on_signals();
      server_->handle(fds, server_first);
      for (const std::string& v : server_->take_violations())
        std::fprintf(stderr, "strata-run: %s; disconnected it\n", v.c_str());
      for (std::size_t k = 0; k < polled.size(); ++k) {
        if (fds[pipes_first + k].revents != 0) on_pipe(*polled[k]);
      }
    }
  }

  /// Kills what the ranks left behind (their process groups, orphans adopted
  /// by this subreaper) and reaps it, within a bounded time.
  void kill_leftovers() {
    for (const auto& rk : ranks_) {
      if (rk.pid > 0) ::kill(-rk.pid, SIGKILL);
    }
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    for (;;) {
      for (pid_t p : adopted_children()) ::kill(p, SIGKILL);
      int status = 0;
      pid_t pid = 0;
      while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      }
      if (pid < 0 && errno == ECHILD) return;  // nothing left
      const auto now = Clock::now();
      if (now >= deadline) {
        std::fprintf(stderr, "strata-run: warning: some processes started by the ranks did not exit\n");
        return;
      }
      pollfd p{sfd_, POLLIN, 0};  // SIGCHLD
      ::poll(&p, 1, ms_until(deadline, now));
      signalfd_siginfo si{};
      while (::read(sfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      }
    }
  }

  void remove_dir() {
    if (dir_.empty()) return;
    ::nftw(dir_.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    dir_.clear();
  }

  void cleanup() {
    for (auto& p : pipes_) {
      if (p.fd >= 0) {
        emit_lines(p, true);
        ::close(p.fd);
        p.fd = -1;
      }
    }
    if (server_->rejected() > 0)
      std::fprintf(stderr, "strata-run: refused %d rendezvous connection(s) that failed authentication\n",
                   server_->rejected());
    server_.reset();
    if (net_ && opt_.net_stats)
      std::fputs((link_text_.empty() ? net_->link_report("strata-run") : link_text_).c_str(), stderr);
    net_.reset();  // the namespaces go with their last process
    remove_dir();
    // Remove shared-memory objects a crashed rank left behind: names carrying
    // the job id, and the shm backend's segments ("strata-<tag>-<rank>").
    const std::string seg_prefix = "strata-" + rdv::shm_job_tag(job_id_, secret_.data(), secret_.size()) + "-";
    if (DIR* d = ::opendir("/dev/shm")) {
      while (dirent* e = ::readdir(d)) {
        if (std::strstr(e->d_name, job_id_.c_str()) != nullptr ||
            std::strncmp(e->d_name, seg_prefix.c_str(), seg_prefix.size()) == 0)
          ::unlinkat(::dirfd(d), e->d_name, 0);
      }
      ::closedir(d);
    }
    if (terminated_ > 0 && opt_.kill_on_failure)
      std::fprintf(stderr, "strata-run: %d rank(s) were terminated\n", terminated_);
    ::close(sfd_);
  }

  Options opt_;
  std::vector<Rank> ranks_;
  std::map<pid_t, int> by_pid_;
  std::vector<OutPipe> pipes_;
  int alive_ = 0;
  int terminated_ = 0;
  int exit_code_ = 0;
  bool terminating_ = false;
  bool got_signal_ = false;
  std::optional<Clock::time_point> job_deadline_;
  std::optional<Clock::time_point> report_deadline_;  // a hang report is being collected
  std::string link_text_;                             // --net-stats, read before the holders end
  std::optional<Clock::time_point> kill_deadline_;
  sigset_t handled_{};
  sigset_t orig_mask_{};
  int sfd_ = -1;
  rdv::Secret secret_{};
  std::string job_id_;
  std::string dir_;
  std::string sock_path_;
  std::unique_ptr<rdv::Server> server_;
  std::unique_ptr<strata::tools::net::Cluster> net_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o = parse_args(argc, argv);
  try {
    return Launcher(std::move(o)).run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-run: %s\n", e.what());
    return 1;
  }
}
