// An emulated cluster on one machine (docs/cluster.md, "The emulated cluster"):
// each virtual host is a network + UTS namespace with its own host name and
// one veth link to a bridge; every link is shaped in both directions with tbf.
//
// Nothing is named in the file system (no `ip netns add`): every namespace is
// held by a small holder process that the launcher forks (PR_SET_PDEATHSIG
// SIGKILL), and the bridge lives in a namespace of its own. When the holders
// and the ranks are gone the kernel frees the namespaces, and with them every
// veth and the bridge: a SIGKILL of the launcher itself leaves nothing behind.
//
//   switch namespace: br0 --- vh0 ==veth== eth0 [host 0: 10.213.0.1/24, "strata-h0"]
//                         \-- vh1 ==veth== eth0 [host 1: 10.213.0.2/24, "strata-h1"] ...
//
// tbf on vh<h> shapes the traffic towards host h, tbf on host h's eth0 the
// traffic it sends. This kernel has tbf and htb but not netem: no delay is
// added, so the links have the (microsecond) latency of veth + bridge.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace strata::tools::net {

/// Link rate in bits per second parsed from tc-style text ("10gbit", "2500mbit",
/// "1e9"); 0 for "" / "none" (unshaped). Throws std::invalid_argument naming @p what.
inline double parse_rate(const std::string& v, const std::string& what) {
  if (v.empty() || v == "none" || v == "off") return 0;
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v.c_str(), &end);
  const std::string unit = end != nullptr ? std::string(end) : std::string();
  double mult = 0;
  if (unit.empty() || unit == "bit")
    mult = 1;
  else if (unit == "kbit")
    mult = 1e3;
  else if (unit == "mbit")
    mult = 1e6;
  else if (unit == "gbit")
    mult = 1e9;
  if (errno != 0 || end == v.c_str() || mult == 0 || !(x > 0) || x * mult < 1e6 || x * mult > 4e11)
    throw std::invalid_argument(what + " expects a rate from 1mbit to 400gbit such as 10gbit or 25gbit, got '" + v +
                                "'");
  return x * mult;
}

/// Runs @p argv (execvp) inside the network namespace @p netns_fd (-1: this
/// one); returns "" on success, else the command and its error output.
inline std::string run_in(int netns_fd, const std::vector<std::string>& argv) {
  int err[2];
  if (::pipe2(err, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(err[1], 1);
    ::dup2(err[1], 2);
    if (netns_fd >= 0 && ::setns(netns_fd, CLONE_NEWNET) != 0) _exit(126);
    ::execvp(args[0], args.data());
    _exit(127);
  }
  ::close(err[1]);
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = ::read(err[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) out.append(buf, static_cast<std::size_t>(n));
  ::close(err[0]);
  if (pid < 0) return std::string("fork: ") + std::strerror(errno);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return "";
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
    return "'" + cmd + "': cannot run " + argv[0] + " (is iproute2 installed?)";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return "'" + cmd + "' failed" + (out.empty() ? std::string() : ": " + out);
}

/// Writes @p value to the file @p path (a /proc/sys entry) as seen from inside
/// the network namespace @p netns_fd: this thread enters it for the open and
/// comes back (/proc/sys/net resolves against the opening thread's namespace).
/// Returns "" on success, else why not; throws if it cannot come back.
inline std::string write_in(int netns_fd, const std::string& path, const std::string& value) {
  const int own = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (own < 0) return std::string("open /proc/thread-self/ns/net: ") + std::strerror(errno);
  if (::setns(netns_fd, CLONE_NEWNET) != 0) {
    const int e = errno;
    ::close(own);
    return std::string("setns: ") + std::strerror(e);
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  int e = fd < 0 ? errno : 0;
  if (fd >= 0) {
    if (::write(fd, value.data(), value.size()) != static_cast<ssize_t>(value.size())) e = errno;
    ::close(fd);
  }
  const bool back = ::setns(own, CLONE_NEWNET) == 0;
  ::close(own);
  if (!back) throw std::runtime_error("emulated cluster set-up: cannot return to the launcher's network namespace");
  return e == 0 ? std::string() : "writing '" + value + "' to " + path + ": " + std::strerror(e);
}

/// The TCP congestion control of every virtual host unless told otherwise:
/// Linux's default. The host's own default may differ (this VM image sets
/// bbr): with bbr and no fq qdisc, a socket that pauses between bursts (a
/// halo exchange every few milliseconds) sat 50-110 ms with its bytes unsent
/// and an open window (docs/cluster.md, "Congestion control").
inline constexpr const char* kDefaultCongestionControl = "cubic";

/// First line of a /proc file, trailing blanks removed ("" if unreadable).
inline std::string read_line(const char* path) {
  std::string v;
  if (std::FILE* f = std::fopen(path, "r")) {
    char buf[512] = {};
    if (std::fgets(buf, sizeof buf, f) != nullptr) v = buf;
    std::fclose(f);
  }
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
  return v;
}
inline bool has_word(const std::string& list, const std::string& w) {
  std::size_t at = 0;
  while (at < list.size()) {
    std::size_t end = list.find(' ', at);
    if (end == std::string::npos) end = list.size();
    if (list.compare(at, end - at, w) == 0) return true;
    at = end + 1;
  }
  return false;
}

/// Makes congestion control @p cc usable inside network namespaces. A
/// namespace may only pick an algorithm of the initial namespace's allowed
/// list (tcp_allowed_congestion_control; some kernels allow "reno bbr" only).
/// If @p cc is available but not allowed, root adds it to that list (which
/// this process, still in the initial namespace, can write). Returns what the
/// hosts will use: @p cc, or, for the default (cubic) when it cannot be
/// allowed, the first allowed algorithm of reno, cubic, bbr (and *note says
/// so in one line; docs/cluster.md). A name the user gave is never replaced.
inline std::string allow_congestion_control(const std::string& cc, std::string* note) {
  const char* allowed_path = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";
  std::string allowed = read_line(allowed_path);
  if (allowed.empty() || has_word(allowed, cc)) return cc;
  const std::string avail = read_line("/proc/sys/net/ipv4/tcp_available_congestion_control");
  if (has_word(avail, cc)) {
    if (std::FILE* f = std::fopen(allowed_path, "w")) {
      const std::string v = allowed + " " + cc + "\n";
      const bool ok = std::fputs(v.c_str(), f) >= 0;
      const bool closed = std::fclose(f) == 0;
      if (ok && closed && has_word(read_line(allowed_path), cc)) {
        if (note != nullptr)
          *note = "TCP congestion control '" + cc + "' added to this machine's allowed list (was: " + allowed + ")";
        return cc;
      }
    }
  }
  // Only the default falls back; a congestion control the user named is used or refused.
  if (cc != kDefaultCongestionControl) return cc;
  allowed = read_line(allowed_path);
  for (const char* alt : {"reno", "cubic", "bbr"})
    if (has_word(allowed, alt)) {
      if (note != nullptr)
        *note = "TCP congestion control '" + cc + "' is not allowed in network namespaces here (allowed: " + allowed +
                "; available: " + avail + ") and cannot be added; the virtual hosts use '" + alt + "'";
      return alt;
    }
  return cc;
}

class Cluster {
 public:
  /// Builds @p hosts virtual hosts joined by a bridge, each link shaped to
  /// @p rate_bps bits/s (0: unshaped), TCP congestion control @p cc in every
  /// host ("host": the namespaces keep what they inherit). Throws
  /// std::runtime_error with one line saying why when namespaces cannot be
  /// made (not root, no support, no ip) or @p cc is not available.
  Cluster(int hosts, double rate_bps, std::string cc = kDefaultCongestionControl)
      : hosts_(hosts), rate_(rate_bps), cc_(std::move(cc)) {
    try {
      sw_ = spawn_holder(-1);
      for (int h = 0; h < hosts; ++h) holders_.push_back(spawn_holder(h));
      configure();
    } catch (...) {
      shutdown();
      throw;
    }
  }
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;
  ~Cluster() { shutdown(); }

  /// "" if this process can build an emulated cluster, else the reason.
  static std::string unavailable_reason() {
    if (::geteuid() != 0) return "needs root (network namespaces, veth and tc)";
    try {
      Cluster probe(1, 0);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }

  int hosts() const { return hosts_; }
  double rate_bps() const { return rate_; }
  /// The TCP congestion control the hosts use ("host": inherited).
  const std::string& congestion_control() const { return cc_; }
  static std::string address(int h) { return "10.213." + std::to_string(h / 250) + "." + std::to_string(h % 250 + 1); }
  static std::string hostname(int h) { return "strata-h" + std::to_string(h); }
  static const char* interface() { return "eth0"; }
  pid_t holder(int h) const { return holders_[static_cast<std::size_t>(h)].pid; }
  /// Namespace file descriptors of host @p h (close-on-exec), for setns().
  int net_fd(int h) const { return holders_[static_cast<std::size_t>(h)].net_fd; }
  int uts_fd(int h) const { return holders_[static_cast<std::size_t>(h)].uts_fd; }

  /// Enters host @p h's namespaces; async-signal-safe (for a forked child).
  bool enter(int h) const { return ::setns(net_fd(h), CLONE_NEWNET) == 0 && ::setns(uts_fd(h), CLONE_NEWUTS) == 0; }

  /// Bytes host @p h's link received and sent so far ({-1, -1} if unknown),
  /// from the namespace's /proc/PID/net/dev.
  std::pair<long long, long long> link_bytes(int h) const {
    std::FILE* f = std::fopen(("/proc/" + std::to_string(holder(h)) + "/net/dev").c_str(), "r");
    std::pair<long long, long long> out{-1, -1};
    if (f == nullptr) return out;
    char line[512];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      const char* p = line;
      while (*p == ' ') ++p;
      if (std::strncmp(p, "eth0:", 5) != 0) continue;
      long long v[9] = {};
      if (std::sscanf(p + 5, "%lld %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                      &v[6], &v[7], &v[8]) == 9)
        out = {v[0], v[8]};
    }
    std::fclose(f);
    return out;
  }

  /// One line per host: the bytes its link carried (the proof that a run's
  /// data crossed the emulated network).
  std::string link_report(const char* who) const {
    std::string out;
    for (int h = 0; h < hosts_; ++h) {
      const auto [rx, tx] = link_bytes(h);
      char line[160];
      std::snprintf(line, sizeof line, "%s: host %d (%s) link: received %.1f MB, sent %.1f MB\n", who, h,
                    address(h).c_str(), static_cast<double>(rx) / 1e6, static_cast<double>(tx) / 1e6);
      out += line;
    }
    return out;
  }

  /// Ends the holders; the namespaces go when the last process in them exits.
  void shutdown() {
    auto close_fds = [](Holder& x) {
      for (int* fd : {&x.ctl_fd, &x.net_fd, &x.uts_fd}) {
        if (*fd >= 0) ::close(*fd);
        *fd = -1;
      }
    };
    auto end = [](Holder& x) {
      if (x.pid > 0) {
        ::kill(x.pid, SIGKILL);
        while (::waitpid(x.pid, nullptr, 0) < 0 && errno == EINTR) {
        }
        x.pid = -1;
      }
    };
    // Closing ctl ends a holder after its sweep; SIGKILL if it takes long.
    auto reap = [](Holder& x) {
      for (int i = 0; i < 200 && x.pid > 0; ++i) {
        if (::waitpid(x.pid, nullptr, WNOHANG) != 0) x.pid = -1;
        if (x.pid > 0) ::usleep(10000);
      }
    };
    for (auto& x : holders_) close_fds(x);
    close_fds(sw_);
    for (auto& x : holders_) reap(x);
    reap(sw_);
    for (auto& x : holders_) end(x);
    end(sw_);
  }

 private:
  struct Holder {
    pid_t pid = -1;
    int ctl_fd = -1;  // write end: the holder exits when it sees EOF
    int net_fd = -1;
    int uts_fd = -1;
  };

  /// Forks a process that unshares a network (and for a host, UTS) namespace
  /// and waits; h < 0 is the switch.
  Holder spawn_holder(int h) {
    int ready[2], ctl[2];
    if (::pipe2(ready, O_CLOEXEC) != 0 || ::pipe2(ctl, O_CLOEXEC) != 0)
      throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    const std::string name = h < 0 ? std::string() : hostname(h);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {
      // The launcher's death (even SIGKILL) reaches us as SIGUSR1: we then
      // kill whatever still runs in our namespace (children of ranks that
      // outlived them), so that the namespace and its links go too.
      // Only our own pipe ends stay open: an inherited write end of another
      // holder's ctl pipe would keep that holder alive.
      for (int fd = 3; fd < 4096; ++fd)
        if (fd != ctl[0] && fd != ready[1]) ::close(fd);
      sigset_t usr1;
      sigemptyset(&usr1);
      sigaddset(&usr1, SIGUSR1);
      ::sigprocmask(SIG_BLOCK, &usr1, nullptr);
      const int sfd = ::signalfd(-1, &usr1, SFD_CLOEXEC);
      ::prctl(PR_SET_PDEATHSIG, SIGUSR1, 0, 0, 0);
      if (::getppid() != parent) _exit(1);
      int e = 0;
      if (::unshare(CLONE_NEWNET | (h < 0 ? 0 : CLONE_NEWUTS)) != 0)
        e = errno;
      else if (h >= 0 && ::sethostname(name.c_str(), name.size()) != 0)
        e = errno;
      [[maybe_unused]] ssize_t w = ::write(ready[1], &e, sizeof e);
      if (e != 0) _exit(1);
      pollfd fds[2] = {{ctl[0], POLLIN, 0}, {sfd, POLLIN, 0}};
      while (::poll(fds, sfd >= 0 ? 2 : 1, -1) < 0 && errno == EINTR) {
      }  // until the launcher closes ctl (or dies)
      sweep_namespace();
      _exit(0);
    }
    ::close(ready[1]);
    ::close(ctl[0]);
    Holder x;
    x.pid = pid;
    x.ctl_fd = ctl[1];
    if (pid < 0) {
      ::close(ready[0]);
      ::close(ctl[1]);
      throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    }
    int e = -1;
    ssize_t n;
    while ((n = ::read(ready[0], &e, sizeof e)) < 0 && errno == EINTR) {
    }
    ::close(ready[0]);
    if (n != static_cast<ssize_t>(sizeof e) || e != 0) {
      ::close(x.ctl_fd);
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      throw std::runtime_error(std::string("cannot create a network namespace (unshare: ") +
                               std::strerror(e > 0 ? e : EPERM) + "); needs root and namespace support");
    }
    const std::string p = "/proc/" + std::to_string(pid) + "/ns/";
    x.net_fd = ::open((p + "net").c_str(), O_RDONLY | O_CLOEXEC);
    x.uts_fd = ::open((p + "uts").c_str(), O_RDONLY | O_CLOEXEC);
    if (x.net_fd < 0 || x.uts_fd < 0) {
      const std::string why = "cannot open " + p + ": " + std::strerror(errno);
      for (int fd : {x.ctl_fd, x.net_fd, x.uts_fd})
        if (fd >= 0) ::close(fd);
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      throw std::runtime_error(why);
    }
    return x;
  }

  /// Kills every other process in this process's network namespace, until
  /// none is left (a bounded number of rounds).
  static void sweep_namespace() {
    char own[64] = {};
    if (::readlink("/proc/self/ns/net", own, sizeof own - 1) <= 0) return;
    const pid_t self = ::getpid();
    for (int round = 0; round < 50; ++round) {
      int found = 0;
      DIR* d = ::opendir("/proc");
      if (d == nullptr) return;
      while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        const pid_t pid = static_cast<pid_t>(std::atol(e->d_name));
        if (pid == self) continue;
        char link[64] = {}, path[64];
        std::snprintf(path, sizeof path, "/proc/%d/ns/net", static_cast<int>(pid));
        if (::readlink(path, link, sizeof link - 1) <= 0 || std::strcmp(link, own) != 0) continue;
        ::kill(pid, SIGKILL);
        ++found;
      }
      ::closedir(d);
      if (found == 0) return;
      ::usleep(2000);  // let the killed processes exit before looking again
    }
  }

  void must(int netns_fd, const std::vector<std::string>& argv) {
    const std::string e = run_in(netns_fd, argv);
    if (!e.empty()) throw std::runtime_error("emulated cluster set-up: " + e);
  }

  /// tbf arguments for the link rate: the bucket holds 1 ms at the rate (at
  /// least 256 KiB, so a 64 KiB GSO segment always fits) and the queue 10 ms.
  std::vector<std::string> tbf(const std::string& dev) const {
    const double bytes_per_s = rate_ / 8;
    const long burst = std::max(256L << 10, std::lround(bytes_per_s / 1000));
    char rate[64];
    std::snprintf(rate, sizeof rate, "%.0fbit", rate_);
    return {"tc",      "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst", std::to_string(burst),
            "latency", "10ms"};
  }

  void configure() {
    const int sw = sw_.net_fd;
    must(sw, {"ip", "link", "add", "br0", "type", "bridge"});
    must(sw, {"ip", "link", "set", "br0", "up"});
    for (int h = 0; h < hosts_; ++h) {
      const std::string vh = "vh" + std::to_string(h);
      must(sw,
           {"ip", "link", "add", vh, "type", "veth", "peer", "name", interface(), "netns", std::to_string(holder(h))});
      must(sw, {"ip", "link", "set", vh, "master", "br0"});
      must(sw, {"ip", "link", "set", vh, "up"});
      const int hn = net_fd(h);
      must(hn, {"ip", "link", "set", "lo", "up"});
      must(hn, {"ip", "addr", "add", address(h) + "/16", "dev", interface()});
      must(hn, {"ip", "link", "set", interface(), "up"});
      if (rate_ > 0) {
        must(sw, tbf(vh));
        must(hn, tbf(interface()));
      }
      if (cc_ != "host") {
        if (h == 0) {
          std::string note;
          cc_ = allow_congestion_control(cc_, &note);
          if (!note.empty()) std::fprintf(stderr, "strata: emulated cluster: %s\n", note.c_str());
        }
        const std::string e = write_in(hn, "/proc/sys/net/ipv4/tcp_congestion_control", cc_);
        if (!e.empty()) {
          std::string avail;
          if (std::FILE* f = std::fopen("/proc/sys/net/ipv4/tcp_available_congestion_control", "r")) {
            char buf[256] = {};
            if (std::fgets(buf, sizeof buf, f) != nullptr) avail = buf;
            std::fclose(f);
            while (!avail.empty() && (avail.back() == '\n' || avail.back() == ' ')) avail.pop_back();
          }
          throw std::runtime_error("emulated cluster set-up: TCP congestion control '" + cc_ + "' cannot be set (" + e +
                                   "); available here: " + (avail.empty() ? std::string("unknown") : avail) +
                                   ", or 'host'");
        }
      }
    }
  }

  int hosts_;
  double rate_;
  std::string cc_;
  Holder sw_;
  std::vector<Holder> holders_;
};

}  // namespace strata::tools::net
