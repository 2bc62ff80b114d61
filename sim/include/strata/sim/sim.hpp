// strata-sim: a discrete-event simulation of the real compiled plans on a
// synthetic machine (docs/simulator.md).
//
// A synthetic machine is `hosts` copies of one hwloc synthetic topology
// ("package:2 numa:2 core:8 pu:1"), ranks placed host-major (block, as
// strata-run --hosts does) and round-robin over each host's cores. Every
// rank's plan comes from coll::compile (the same compiler the engine runs);
// the simulator turns each node into timed events under a CostModel:
//  - local nodes (copy, reduce, compute, flag_wait, flag_set) run on the
//    rank's worker pool for node_cpu + bytes / bandwidth, and also occupy the
//    memory bandwidth of the NUMA regions they touch (a FIFO token bucket);
//  - remote nodes to another host are posted by the rank's progress server
//    (progress_service each), serialized on the sending host's NIC
//    (FIFO, bytes / nic_bw), arrive nic_lat later, serialized on the
//    receiving host's NIC; the receiver's progress server spends
//    progress_service per signal before the wait counts it;
//  - remote nodes on the same host are one memcpy by the initiator (the shm
//    transport's mapped path) at the bandwidth of the level they cross (same
//    NUMA region / same package / across packages), then the signal becomes
//    visible shm_lat later and is served by the receiver's progress server;
//  - hand-offs (CostModel::handoff_*): a same-NUMA put writes at
//    handoff_write_bw, a copy or reduction reading the window (data a peer
//    put there) reads at handoff_read_bw, when set;
//  - wait nodes complete when their local dependencies are done and `count`
//    signals were served; a flag_wait on the slot's flag word when the
//    peer's instance seq - lag finished (none before the first: satisfied at
//    once), on another word (a mapped record, a publication, reads done)
//    when the peer's flag_set / publish of that word in that instance
//    completed (a same-host load, no message);
//  - memory-protocol nodes (mapped and single-copy plans): a copy or
//    reduction out of a peer's mapped slot or shared buffer, and a CMA
//    read_peer / write_peer, cost as a same-host copy at the level the two
//    ranks cross (memory traffic charged to both NUMA regions).
// Events are processed in (time, sequence) order, so a run is deterministic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/collectives/compile.hpp"
#include "strata/dag/plan.hpp"
#include "strata/error.hpp"
#include "strata/transport/topology.hpp"

namespace strata::sim {

/// @brief Cost model parameters (seconds, bytes per second). A bandwidth of
/// 0 means infinite (no time per byte).
struct CostModel {
  double nic_bw = 25e9;          ///< per host NIC, each direction (200 Gbit/s)
  double nic_lat = 2e-6;         ///< one-way network latency
  std::uint64_t msg_bytes = 64;  ///< header bytes every network message carries (signals: only this)
  double shm_lat = 0.4e-6;       ///< same-host signal visibility latency
  double copy_bw = 10e9;         ///< one core's memcpy inside one NUMA region
  double copy_bw_numa = 8e9;     ///< memcpy between NUMA regions of one package
  double copy_bw_package = 6e9;  ///< memcpy between packages
  double numa_mem_bw = 40e9;     ///< aggregate memory bandwidth of one NUMA region (contention)
  double reduce_bw = 5e9;        ///< element-wise reduction, bytes of one operand per second
  /// Hand-off bandwidths (docs/simulator.md, "Hand-offs"): a same-NUMA put's
  /// copy into a peer's window (its lines held by the peer's core), and a
  /// copy or reduction reading this rank's window (lines a peer just wrote).
  /// 0: the plain copy_bw / reduce_bw (a hot copy inside one core's caches).
  double handoff_write_bw = 0;
  double handoff_read_bw = 0;
  double node_cpu = 0.2e-6;          ///< fixed cost of every local node and every posted remote node
  double progress_service = 0.3e-6;  ///< progress-server time per posted network op and per served signal
  int workers = 1;                   ///< executor threads per rank running local nodes
  /// @brief A model with no per-node, progress, latency or copy cost: only
  /// the NIC bandwidth and latency given remain (closed-form tests).
  static CostModel pure_network(double bw, double lat);
  /// @brief Sets one parameter by its file / flag name (`nic_gbit`,
  /// `nic_lat_us`, ... see docs/simulator.md); throws strata::Error
  /// (invalid_argument) naming @p key and @p value on an unknown key or a bad value.
  void set(const std::string& key, const std::string& value);
  /// @brief One line per parameter, in file syntax (readable back by set()).
  [[nodiscard]] std::string describe() const;
};

/// @brief What calibrate() measured on this machine.
struct Calibration {
  std::size_t bytes = 0;        ///< size measured
  std::size_t working_set = 0;  ///< bytes the measurement walked through
  double copy_bw = 0;           ///< memcpy of `bytes` bytes in fragments of up to 128 KiB
  double reduce_bw = 0;  ///< float32 sum kernel of the engine (dag::reduce_kernel), bytes of one operand per second
};

/// @brief Measures memcpy and the engine's float32 sum kernel moving @p bytes
/// (4 KiB to 1 GiB) in fragments of up to 128 KiB through buffers of
/// @p working_set bytes in all (the caches hold what fits), about 0.1 s, in
/// this process, for CostModel::copy_bw and reduce_bw. Noisy on a shared
/// machine; throws strata::Error naming the size when out of range.
Calibration calibrate(std::size_t bytes, std::size_t working_set);

/// @brief A synthetic machine: @p hosts hosts, each the hwloc synthetic
/// topology @p topology, @p ranks_per_host ranks per host (0 = one per core).
struct MachineSpec {
  int hosts = 1;
  std::string topology = "package:1 numa:1 core:4 pu:1";
  int ranks_per_host = 0;
};

/// @brief Places every rank of @p m (host-major block placement, round-robin
/// over each host's cores). Throws strata::Error naming the bad field.
std::vector<RankPlace> place_ranks(const MachineSpec& m);

/// @brief A machine description file: `key = value` lines, `#` comments.
/// Keys: hosts, topology, ranks_per_host and every CostModel key. Throws
/// strata::Error(invalid_argument) naming the file, the line and the key.
void load_machine_file(const std::string& path, MachineSpec* m, CostModel* cost);

/// @brief One step of the critical path (latest first).
struct PathStep {
  int rank = 0;
  int instance = 0;  ///< which call of a stream (Stream::instances)
  dag::NodeId node = 0;
  dag::NodeKind kind = dag::NodeKind::nop;
  double ready = 0;  ///< dependencies and signals satisfied
  double start = 0;  ///< resource acquired (start - ready = queueing)
  /// Completion; for a put or signal whose signal released the step before
  /// it on the path: when that signal was served at its target (the node's
  /// own completion, acknowledged a network latency later, is off the path).
  double end = 0;
  std::uint64_t bytes = 0;
  std::string via;   ///< what released it: "dep", "signal from rank R", "flag of rank R", "instance gate", "start"
  std::string what;  ///< the plan's description of the node (with its label)
};

/// @brief What a simulation produced.
struct Result {
  std::vector<double> finish;           ///< per rank: time its last node completed (seconds)
  std::vector<double> instance_finish;  ///< per call of a stream: when its last node completed on any rank
  std::vector<PathStep> critical_path;  ///< from the last completion back to the start
  std::uint64_t nodes = 0;              ///< nodes simulated
  std::uint64_t events = 0;             ///< events processed
  double compile_seconds = 0;           ///< wall time spent compiling plans
  double simulate_seconds = 0;          ///< wall time spent simulating
  [[nodiscard]] double max_finish() const;
  [[nodiscard]] double min_finish() const;
  [[nodiscard]] double median_finish() const;
};

/// @brief The communicator of the whole synthetic machine (world, hosts,
/// NUMA regions from @p places), with the engine's default window
/// (slot_bytes, credits) unless given, and window flags (@p flags). The
/// memory-protocol plans are off until coll::memory_plans() turns them on.
coll::Group world_group(const std::vector<RankPlace>& places, std::size_t slot_bytes = std::size_t{1} << 20,
                        int credits = 4, bool flags = true);

/// @brief A sequence of calls of the same collective, as an application loop makes them.
struct Stream {
  int instances = 1;  ///< calls (1 to 4096); call i uses window slot i % credits
  /// true: a blocking loop (a rank starts call i when its call i - 1 finished);
  /// false: nonblocking calls made at once, throttled by the engine's window
  /// rule (a rank starts call i when its call i - credits finished).
  bool blocking = true;
};

/// @brief Compiles every rank's plan of @p call on @p group for every call of
/// @p stream, then simulates them on @p places under @p cost. Plans are
/// converted to a compact form rank by rank and released, so 4096 ranks fit
/// in memory. Signals match within one call; a flag_wait of call i waits for
/// the peer's call i - lag. Throws strata::Error from the compiler (naming the
/// rank) or on an inconsistent plan set (a signal to a slot with no wait node).
Result simulate(const coll::Group& group, const coll::Call& call, const std::vector<RankPlace>& places,
                const CostModel& cost, std::size_t critical_steps = 64, const Stream& stream = {});

/// @brief Simulates already compiled plans (plans[r] is rank r's).
Result simulate_plans(const std::vector<std::shared_ptr<const dag::Plan>>& plans, const std::vector<RankPlace>& places,
                      const CostModel& cost, std::size_t critical_steps = 64);

}  // namespace strata::sim
