// Hang forensics (docs/reliability.md, "Hang reports"): Engine::pending_report,
// the report watchdog (a thread of strata's own: STRATA_TIMEOUT and SIGUSR2)
// and the merge of several ranks' reports into one summary.
#include "strata/report.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "comm.hpp"
#include "core.hpp"
#include "hooks.hpp"
#include "strata/detail/clock.hpp"
#include "strata/detail/env.hpp"
#include "strata/engine.hpp"

namespace strata {

namespace report {

std::string rank_list(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

namespace {

struct CallSeen {
  std::string collective;
  std::string bytes;
  std::string waits;
};

// "key=value" out of a report line ("" when absent).
std::string field(const std::string& line, const std::string& key) {
  const std::string k = " " + key + "=";
  const std::size_t at = line.find(k);
  if (at == std::string::npos) return "";
  const std::size_t from = at + k.size();
  const std::size_t end = line.find(' ', from);
  return line.substr(from, end == std::string::npos ? std::string::npos : end - from);
}

}  // namespace

// Over ~80 lines: one pass over the reports building the merged tables.
std::string merge(const std::vector<std::string>& reports, int nranks) {
  std::set<int> reporting;
  // comm -> rank -> next sequence number posted there
  std::map<long, std::map<int, long>> next;
  // (comm, seq) -> rank -> what it waits in
  std::map<std::pair<long, long>, std::map<int, CallSeen>> pending;
  // (comm, seq) -> rank -> the collective it posted there (its last few calls)
  std::map<std::pair<long, long>, std::map<int, std::string>> posted;
  // Tag lanes: lane comm -> (the communicator it serves, window slots), and
  // (lane, tag) -> rank -> the tag's next sequence number there.
  std::map<long, std::pair<long, long>> lanes;
  std::map<std::pair<long, long>, std::map<int, long>> tag_next;
  for (const std::string& text : reports) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("strata-report rank ", 0) != 0) continue;
      const int rank = std::atoi(line.c_str() + 19);
      reporting.insert(rank);
      const std::string comm = field(line, "comm");
      if (comm.empty()) continue;
      const long c = std::atol(comm.c_str());
      const std::string nx = field(line, "next");
      if (!nx.empty()) next[c][rank] = std::atol(nx.c_str());
      const std::string lane_of = field(line, "lane_of");
      if (!lane_of.empty()) lanes[c] = {std::atol(lane_of.c_str()), std::atol(field(line, "slots").c_str())};
      const std::string tn = field(line, "tagnext");
      if (!tn.empty()) tag_next[{c, std::atol(field(line, "tag").c_str())}][rank] = std::atol(tn.c_str());
      const std::string ps = field(line, "posted");
      if (!ps.empty()) posted[{c, std::atol(ps.c_str())}][rank] = field(line, "collective");
      const std::string call = field(line, "call");
      if (call.empty()) continue;
      CallSeen s;
      s.collective = field(line, "collective");
      s.bytes = field(line, "bytes");
      const std::size_t w = line.find(" waits: ");
      s.waits = w == std::string::npos ? "" : line.substr(w + 8);
      const std::size_t bar = s.waits.find(" | ");
      if (bar != std::string::npos) s.waits = s.waits.substr(0, bar) + " | ...";
      pending[{c, std::atol(call.c_str())}][rank] = s;
    }
  }
  std::ostringstream out;
  out << "strata hang report: " << reporting.size() << " rank(s) reported";
  if (nranks > 0) {
    std::vector<int> silent;
    for (int r = 0; r < nranks; ++r)
      if (reporting.count(r) == 0) silent.push_back(r);
    if (!silent.empty()) out << "; no report from rank(s) " << rank_list(silent);
  }
  out << "\n";
  if (pending.empty()) out << "  no rank waits in a call\n";
  for (const auto& [key, by_rank] : pending) {
    const auto [c, seq] = key;
    // Ranks grouped by what they run at this sequence number.
    std::map<std::pair<std::string, std::string>, std::vector<int>> kinds;
    for (const auto& [r, s] : by_rank) kinds[{s.collective, s.bytes}].push_back(r);
    // Ranks that ran something else at this sequence number (and are done with it).
    if (const auto pit = posted.find(key); pit != posted.end())
      for (const auto& [r, coll] : pit->second)
        if (by_rank.count(r) == 0 && coll != by_rank.begin()->second.collective) kinds[{coll, "?"}].push_back(r);
    const CallSeen& first = by_rank.begin()->second;
    // A tagged call: named by its communicator and tag; "never posted" compares
    // with the tag's next sequence number on each rank.
    const auto lane = lanes.find(c);
    const std::map<int, long>* nexts = nullptr;
    if (lane != lanes.end() && lane->second.second > 0) {
      const long tag = seq % lane->second.second;
      out << "  communicator " << lane->second.first << " tag " << tag << " call #" << seq << " (lane " << c << ")";
      if (const auto tn = tag_next.find({c, tag}); tn != tag_next.end()) nexts = &tn->second;
    } else {
      out << "  communicator " << c << " call #" << seq;
      if (const auto it = next.find(c); it != next.end()) nexts = &it->second;
    }
    if (kinds.size() > 1) {
      out << ": MISMATCH:";
      bool sep = false;
      for (const auto& [k, rs] : kinds) {
        out << (sep ? ";" : "") << " rank(s) " << rank_list(rs) << " " << k.first;
        if (k.second != "?")
          out << " " << k.second << " B (waiting)";
        else
          out << " (posted, not waiting)";
        sep = true;
      }
      out << "\n";
      continue;
    }
    std::vector<int> waiting;
    for (const auto& [r, s] : by_rank) waiting.push_back(r);
    out << " " << first.collective << " " << first.bytes << " B: rank(s) " << rank_list(waiting) << " wait ("
        << first.waits << ")";
    std::vector<int> never, done;
    if (nexts != nullptr)
      for (const auto& [r, nx] : *nexts) {
        if (by_rank.count(r) != 0) continue;
        (nx <= seq ? never : done).push_back(r);
      }
    if (!never.empty()) {
      long lowest = seq;
      for (int r : never) lowest = std::min(lowest, nexts->at(r));
      out << "; rank(s) " << rank_list(never) << " never posted it (next call there: #" << lowest << ")";
    }
    if (!done.empty()) out << "; rank(s) " << rank_list(done) << " finished their part";
    out << "\n";
  }
  return out.str();
}

}  // namespace report

namespace detail {
namespace {

std::atomic<unsigned> g_report_requests{0};

void on_sigusr2(int) { g_report_requests.fetch_add(1, std::memory_order_relaxed); }  // async-signal-safe

// Installs the SIGUSR2 handler once per process, unless the application has its own.
bool install_sigusr2() {
  static const bool ok = [] {
    struct sigaction cur {};
    if (::sigaction(SIGUSR2, nullptr, &cur) != 0) return false;
    if (cur.sa_handler != SIG_DFL) return false;  // the application's: leave it
    struct sigaction sa {};
    sa.sa_handler = on_sigusr2;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    return ::sigaction(SIGUSR2, &sa, nullptr) == 0;
  }();
  return ok;
}

std::string read_file(const std::string& path) {
  std::string out;
  if (std::FILE* f = std::fopen(path.c_str(), "r")) {
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

long timeout_ms() {
  const char* v = strata::detail::env::get("STRATA_TIMEOUT");
  const long ms = v != nullptr ? std::atol(v) : 0;
  return ms > 0 ? ms : 30000;
}

}  // namespace

void request_report() noexcept { g_report_requests.fetch_add(1, std::memory_order_relaxed); }

void heard_from(EngineCore& core, int source) noexcept {
  if (core.heard && source >= 0 && source < core.boot->size())
    core.heard[static_cast<std::size_t>(source)].store(coarse_ms(), std::memory_order_relaxed);
}

std::string report_dir(const EngineCore& core) {
  if (const char* d = strata::detail::env::get("STRATA_REPORT_DIR"); d != nullptr && *d != '\0') return d;
  if (const char* j = strata::detail::env::get("STRATA_JOB_DIR"); j != nullptr && *j != '\0')
    return std::string(j) + "/reports";
  std::string id = core.boot->job().job_id;
  for (char& ch : id)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_') ch = '_';
  return "/tmp/strata-report-" + id;
}

std::string pending_text(EngineCore& core) {
  const int me = core.boot->rank();
  std::ostringstream out;
  const std::string head = "strata-report rank " + std::to_string(me);
  out << head << " size=" << core.boot->size() << " launcher=" << core.boot->job().launcher << "\n";
  std::vector<std::shared_ptr<CommImpl>> comms;
  {
    std::lock_guard<std::mutex> lk(core.id_mu);
    for (auto& w : core.comms)
      if (auto c = w.lock()) comms.push_back(std::move(c));
  }
  std::sort(comms.begin(), comms.end(), [](const auto& a, const auto& b) { return a->id < b->id; });
  for (const auto& c : comms) {
    std::uint32_t nx = 0;
    std::size_t queued = 0;
    std::array<CommImpl::Recent, 8> recent{};
    std::vector<std::uint32_t> tags;
    {
      std::lock_guard<CommLock> lk(c->mu);
      nx = c->next_seq;
      for (const auto& sl : c->slots) queued += sl.pending.size();
      recent = c->recent;
      tags = c->tag_next;
    }
    out << head << " comm=" << c->id << " size=" << c->size() << " comm_rank=" << c->rank() << " next=" << nx
        << " queued=" << queued;
    if (c->lane) out << " lane_of=" << c->parent_id << " slots=" << c->group.credits;
    out << "\n";
    for (std::size_t t = 0; t < tags.size() && static_cast<int>(t) < c->tag_count; ++t)
      out << head << " comm=" << c->id << " tag=" << t << " tagnext=" << tags[t] << "\n";
    for (const CommImpl::Recent& r : recent)
      if (r.seq != ~0u)
        out << head << " comm=" << c->id << " posted=" << r.seq << " collective=" << coll::to_string(r.kind)
            << " count=" << r.count << "\n";
  }
  if (core.exec) {
    for (const dag::PendingCall& p : core.exec->pending_report(0)) {
      out << head << " comm=" << p.comm << " call=" << p.seq << " collective=" << p.collective << " bytes=" << p.bytes
          << " age_ms=" << p.age_ms << (p.failed ? " failed=1" : "") << " waits: ";
      for (std::size_t i = 0; i < p.waiting.size(); ++i) out << (i ? " | " : "") << p.waiting[i];
      out << "\n";
    }
  }
  return out.str();
}

// The watchdog: a thread of strata's own that sleeps in 200 ms steps. It
// ends the process when its launcher is gone (Bootstrap::launcher_gone), and it
// writes this rank's report (stderr and STRATA_REPORT_DIR/report.RANK) when a
// call has been pending for STRATA_TIMEOUT, once per call, and when the
// process gets SIGUSR2 (strata-run sends it to every rank; mpirun forwards
// it); under a launcher other than strata-run, rank 0 then merges every
// rank's file into the summary (strata-run merges itself).
class ReportWatchdog {
 public:
  ReportWatchdog(EngineCore& core, bool reports)
      : core_(core), limit_ms_(timeout_ms()), reports_(reports), dir_(report_dir(core)) {
    if (reports_) install_sigusr2();
    seen_requests_ = g_report_requests.load();
    thread_ = std::thread([this] { loop(); });
  }
  ~ReportWatchdog() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  ReportWatchdog(const ReportWatchdog&) = delete;
  ReportWatchdog& operator=(const ReportWatchdog&) = delete;

 private:
  void loop() {
    int tick = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(mu_);
        if (cv_.wait_for(lk, std::chrono::milliseconds(200), [this] { return stop_; })) return;
      }
      if (core_.boot->launcher_gone()) {
        // Nothing would ever report a dead peer or end the job: a rank waiting
        // in a collective would wait forever (and its progress thread spin).
        std::fprintf(stderr, "strata: rank %d: the launcher (%s) that started this process is gone; exiting\n",
                     core_.boot->rank(), core_.boot->job().launcher.c_str());
        std::fflush(stderr);
        ::_exit(70);
      }
      heartbeats();
      if (!reports_) continue;
      const unsigned req = g_report_requests.load(std::memory_order_relaxed);
      if (req != seen_requests_) {
        seen_requests_ = req;
        write();
        continue;
      }
      if (++tick % 5 != 0 || !core_.exec) continue;  // the stale-call check: once a second
      bool fresh = false;
      for (const dag::PendingCall& p : core_.exec->pending_report(limit_ms_)) {
        const std::uint64_t key = (std::uint64_t{p.comm} << 32) | p.seq;
        if (reported_.insert(key).second) fresh = true;
      }
      if (reported_.size() > 4096) reported_.clear();
      if (fresh) {
        ask_others();  // their reports too: the rank that never posted is not waiting in anything
        write();
      }
    }
  }

  // Heartbeats between hosts (a thread of strata's own, so a rank that only
  // computes, in inline mode too, keeps beating): every STRATA_TIMEOUT / 4
  // (at most every 5 s, at least every 100 ms) a signal to every rank on
  // another host, then one progress call (a manual-progress provider moves
  // it, and the peers' beats, only then). A rank on another host not heard
  // from for STRATA_TIMEOUT while calls are in flight here is declared dead:
  // stopped, or its host unreachable. Same-host peers are watched through
  // /proc by the shared-memory backend instead.
  void heartbeats() {
    transport::Transport* tp = core_.transport.get();
    if (tp == nullptr || !core_.heard || core_.hier.num_hosts() <= 1) return;
    const std::int64_t now = coarse_ms();
    const int me = core_.boot->rank();
    const int n = core_.boot->size();
    const std::int64_t period = std::clamp<std::int64_t>(limit_ms_ / 4, 100, 5000);
    if (now - last_beat_ >= period) {
      last_beat_ = now;
      for (int r = 0; r < n; ++r)
        if (r != me && !core_.hier.same_host(me, r) && declared_.count(r) == 0)
          (void)tp->signal(r, std::uint64_t{dag::kHeartbeatComm} << 48, nudge_context());
      // As a poller: a bare progress() would disarm a sleeping server's
      // wake-ups (the shared-memory backend's flag, the provider's fd) and
      // leave it asleep through the next arrivals, up to its max_block.
      if (core_.progress)
        (void)core_.progress->poll_once();
      else
        (void)tp->progress();
    }
    if (!core_.exec || core_.exec->in_flight() == 0) return;
    for (int r = 0; r < n; ++r) {
      if (r == me || core_.hier.same_host(me, r) || declared_.count(r) != 0) continue;
      const std::int64_t silent = now - core_.heard[static_cast<std::size_t>(r)].load(std::memory_order_relaxed);
      if (silent <= limit_ms_ || !tp->peer_status(r).is_ok()) continue;
      declared_.insert(r);
      tp->declare_dead(
          r, Status(Errc::timeout, "peer rank " + std::to_string(r) + " on another host sent no heartbeat for " +
                                       std::to_string(silent) + " ms (STRATA_TIMEOUT=" + std::to_string(limit_ms_) +
                                       "; stopped, or its host unreachable); declared dead (seen by rank " +
                                       std::to_string(me) + ")"));
    }
  }

  // A report request to every other rank of the job, over strata's own
  // transport (a signal its engine routes to request_report()).
  void ask_others() {
    transport::Transport* tp = core_.transport.get();
    if (tp == nullptr) return;
    const int me = core_.boot->rank();
    for (int r = 0; r < core_.boot->size(); ++r)
      if (r != me) (void)tp->signal(r, std::uint64_t{dag::kReportRequestComm} << 48, nudge_context());
  }

  void write() {
    const std::string text = pending_text(core_);
    std::fprintf(stderr, "%s", text.c_str());
    std::fflush(stderr);
    const std::string& dir = dir_;  // read once: no environment lookup here (statics may be going at exit)
    ::mkdir(dir.c_str(), 0700);
    const int me = core_.boot->rank();
    const std::string path = dir + "/report." + std::to_string(me);
    {
      std::ofstream f(path + ".tmp", std::ios::trunc);
      f << text;
    }
    std::rename((path + ".tmp").c_str(), path.c_str());
    if (me != 0) return;
    // Once per burst: a stale call and the other ranks' requests arrive together.
    const auto now = std::chrono::steady_clock::now();
    if (merged_once_ && now - last_merge_ < std::chrono::seconds(5)) return;
    merged_once_ = true;
    last_merge_ = now;
    // Rank 0 merges what the ranks wrote for this request (files written
    // since; bounded wait). strata-run also merges when it is asked (SIGUSR2)
    // and at its --timeout.
    const auto since = std::chrono::system_clock::now() - std::chrono::milliseconds(500);
    const int n = core_.boot->size();
    std::vector<std::string> texts;
    for (int waited = 0; waited < 30; ++waited) {
      texts.clear();
      for (int r = 0; r < n; ++r) {
        const std::string p = dir + "/report." + std::to_string(r);
        struct stat st {};
        if (::stat(p.c_str(), &st) != 0) continue;
        if (std::chrono::system_clock::from_time_t(st.st_mtime) + std::chrono::seconds(1) < since) continue;
        texts.push_back(read_file(p));
      }
      if (static_cast<int>(texts.size()) == n) break;
      std::unique_lock<std::mutex> lk(mu_);
      if (cv_.wait_for(lk, std::chrono::milliseconds(100), [this] { return stop_; })) break;
    }
    const std::string summary = report::merge(texts, n);
    std::fprintf(stderr, "%s", summary.c_str());
    std::fflush(stderr);
  }

  EngineCore& core_;
  const long limit_ms_;
  const bool reports_;
  const std::string dir_;
  unsigned seen_requests_ = 0;
  std::set<std::uint64_t> reported_;
  bool merged_once_ = false;
  std::int64_t last_beat_ = 0;
  std::set<int> declared_;  // ranks this watchdog declared dead
  std::chrono::steady_clock::time_point last_merge_{};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

std::shared_ptr<void> start_report_watchdog(EngineCore& core) {
  return std::make_shared<ReportWatchdog>(core, !strata::detail::env::is("STRATA_REPORT", "off"));
}

}  // namespace detail

std::string Engine::pending_report() const { return detail::pending_text(*core_); }

}  // namespace strata
