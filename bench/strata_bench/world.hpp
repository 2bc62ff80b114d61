// One rank of a strata-bench job at the transport level: bootstrap (strata-run
// rendezvous), hierarchy, routed transport and progress servers, with handlers
// that count completions and signals, plus small out-of-band reductions.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/transport/bootstrap.hpp"
#include "strata/transport/progress.hpp"
#include "strata/transport/topology.hpp"
#include "strata/transport/transport.hpp"
#include "strata_bench/bench.hpp"

namespace strata::bench {

/// Signal payloads of the benchmark protocol.
constexpr std::uint64_t kSigPing = 1;  ///< one leg of a ping-pong
constexpr std::uint64_t kSigDone = 2;  ///< "the active side finished this phase"

/// @brief Rank-level state of a transport benchmark.
class World {
 public:
  /// Bootstraps, discovers the hierarchy, creates the transport with
  /// STRATA_* overridden by --backend / --provider and starts the progress
  /// servers (--progress-threads, else STRATA_PROGRESS_THREADS). Collective.
  explicit World(const Options& o);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] int size() const { return size_; }
  [[nodiscard]] transport::Transport& t() { return *t_; }
  [[nodiscard]] transport::ProgressServer& servers() { return *servers_; }
  [[nodiscard]] const Hierarchy& hierarchy() const { return hier_; }
  [[nodiscard]] Bootstrap& boot() { return *boot_; }
  [[nodiscard]] const transport::TransportOptions& transport_options() const { return topts_; }

  /// "shm", "fabric:<provider>" or "remote:<provider>" for the 0 <-> 1 pair,
  /// then "/server" or "/inline".
  [[nodiscard]] std::string label() const;

  std::atomic<std::uint64_t> completions{0};  ///< every completion (OK or not)
  std::atomic<std::uint64_t> errors{0};       ///< completions with an error status
  std::atomic<std::uint64_t> pings{0};        ///< kSigPing signals received
  std::atomic<std::uint64_t> dones{0};        ///< kSigDone signals received
  std::atomic<std::int64_t> last_ping_ns{0};  ///< steady-clock ns at which the last kSigPing arrived

  /// Waits (driving progress in inline mode) until @p cond or a 60 s bound;
  /// on timeout prints what was awaited and exits with status 1.
  void wait(const std::function<bool()>& cond, const char* what);
  /// Waits until @p n completions were counted (OK or error).
  void wait_completions(std::uint64_t n, const char* what);

  /// Exchanges a key; result indexed by rank.
  std::vector<transport::RemoteKey> exchange(const transport::RemoteKey& k);
  /// Gathers one double per rank, indexed by rank.
  std::vector<double> gather(double v);
  void barrier() { boot_->barrier(); }

  /// Prints "strata-bench: rank R: what: status" and exits with status 1.
  [[noreturn]] void fail(const std::string& what, const Status& s = {});

 private:
  std::unique_ptr<Bootstrap> boot_;
  Hierarchy hier_;
  transport::TransportOptions topts_;
  std::unique_ptr<transport::Transport> t_;
  std::unique_ptr<transport::ProgressServer> servers_;
  int rank_ = 0, size_ = 1;
};

}  // namespace strata::bench
