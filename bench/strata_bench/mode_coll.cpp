// --coll: strata's collectives measured the way strata-mpi-bench measures MPI
// (OSU style), so the two tables line up size for size:
//
//   latency (default)  per size: warm-up, repetitions sized to the message
//                      (iterations_for), a barrier before every repetition,
//                      the call + Future::get() timed; each rank's median,
//                      reduced to min / median / max over ranks. --persistent
//                      starts plan_* plans instead (bcast, reduce, allreduce,
//                      barrier). The hot / off-cache memcpy ceiling of the same
//                      sizes is measured first on rank 0 (unless --no-memcpy).
//   --overlap          start, a fixed amount of compute as long as the
//                      collective alone, wait; OSU's overlap percentage.
//   --stream K         K back-to-back calls issued without waiting, then all
//                      waited for: loose vs Sync::strict() (and blocking).
//
// Size convention (as strata-mpi-bench, bench/README.md): bcast, reduce,
// allreduce and reduce_scatter take the whole vector's bytes; gather, scatter,
// allgather and alltoall take the bytes of one rank's block. float32 sums.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "strata/strata.hpp"
#include "strata_bench/bench.hpp"

namespace strata::bench {
namespace {

using strata::bench::pattern;

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

// Floats in a std::vector or in Engine::allocate memory (--shared-buffers).
class Floats {
 public:
  void assign(Engine* engine, std::size_t n, float v) {
    n = std::max<std::size_t>(n, 1);
    if (engine != nullptr) {
      mem_ = engine->allocate(n * sizeof(float));
      p_ = mem_.as<float>();
      vec_.clear();
    } else {
      vec_.assign(n, 0.0f);
      p_ = vec_.data();
    }
    n_ = n;
    std::fill(p_, p_ + n_, v);
  }
  float* data() const { return p_; }
  float* begin() const { return p_; }
  float* end() const { return p_ + n_; }
  float& operator[](std::size_t i) const { return p_[i]; }

 private:
  std::vector<float> vec_;
  SharedMemory mem_;
  float* p_ = nullptr;
  std::size_t n_ = 0;
};

struct Buffers {
  Floats send, recv;
  Plan plan;
};

/// One collective at one size on one communicator, with rotating buffer sets.
class CollBench {
 public:
  /// @p engine: buffers from Engine::allocate (--shared-buffers); nullptr: std::vector.
  CollBench(Communicator& comm, const Options& o, CollOptions copts, Engine* engine)
      : comm_(comm), o_(o), copts_(std::move(copts)), rank_(comm.rank()), size_(comm.size()), engine_(engine) {}

  /// Sizes the buffers of @p coll for @p bytes; @p min_sets buffer sets at least.
  void prepare(const std::string& coll, std::size_t bytes, std::size_t min_sets, bool persistent) {
    coll_ = coll;
    c_ = coll_kind(coll);  // compared per call: an enum, not the string
    elems_ = bytes / sizeof(float);
    block_ = 0;
    std::size_t send_elems = elems_, recv_elems = elems_;
    const auto n = static_cast<std::size_t>(size_);
    if (coll == "allgather" || coll == "gather") recv_elems = elems_ * n;
    if (coll == "alltoall" || coll == "scatter") {
      send_elems = elems_ * n;
      recv_elems = coll == "scatter" ? elems_ : send_elems;
    }
    if (coll == "reduce_scatter") {
      block_ = elems_ / n;
      recv_elems = block_;
    }
    send_elems_ = send_elems;
    const std::size_t footprint = (send_elems + recv_elems) * sizeof(float);
    std::size_t sets = 1;
    if (o_.off_cache && footprint > 0)
      sets = std::min<std::size_t>(64, std::max<std::size_t>(1, (std::size_t{64} << 20) / footprint));
    sets = std::max(sets, min_sets);
    bufs_.clear();
    bufs_.resize(sets);
    for (auto& b : bufs_) {
      b.send.assign(engine_, send_elems, 0.0f);
      b.recv.assign(engine_, recv_elems, 0.0f);
      for (std::size_t i = 0; i < send_elems; ++i) b.send[i] = pattern(rank_, i);
      if (persistent) b.plan = make_plan(b);
    }
  }

  std::size_t sets() const { return bufs_.size(); }

  /// Starts the collective on buffer set @p it % sets (plan if prepared with persistent).
  Future<void> start(int it, const CollOptions& copts) {
    Buffers& b = buf(it);
    if (b.plan.valid()) return b.plan.start();
    const std::size_t n = elems_;
    constexpr Datatype f32 = Datatype::float32;
    if (c_ == Coll::bcast) return comm_.broadcast(b.send.data(), n, f32, 0, copts);
    if (c_ == Coll::reduce) return comm_.reduce(b.send.data(), b.recv.data(), n, f32, Op::sum, 0, copts);
    if (c_ == Coll::allreduce) return comm_.allreduce(b.send.data(), b.recv.data(), n, f32, Op::sum, copts);
    if (c_ == Coll::allgather) return comm_.allgather(b.send.data(), n, b.recv.data(), f32, copts);
    if (c_ == Coll::alltoall) return comm_.alltoall(b.send.data(), b.recv.data(), n, f32, copts);
    if (c_ == Coll::gather) return comm_.gather(b.send.data(), n, b.recv.data(), f32, 0, copts);
    if (c_ == Coll::scatter) return comm_.scatter(b.send.data(), b.recv.data(), n, f32, 0, copts);
    if (c_ == Coll::reduce_scatter)
      return comm_.reduce_scatter_block(b.send.data(), b.recv.data(), block_, f32, Op::sum, copts);
    return comm_.barrier(copts);
  }
  Future<void> start(int it) {
    if (!copts_.tree.empty() && (c_ == Coll::allgather || c_ == Coll::alltoall || c_ == Coll::reduce_scatter)) {
      // --tree shapes the tree collectives; the step-schedule ones refuse a tree shape.
      CollOptions c = copts_;
      c.tree.clear();
      return start(it, c);
    }
    return start(it, copts_);
  }

  /// Checks the result in buffer set @p it against the sequential reference.
  bool verify(int it) {
    const Buffers& b = buf(it);
    return strata::bench::verify_result(coll_, rank_, size_, elems_, block_, b.send, b.recv);
  }

  /// Clears what the next call must write, so --check sees fresh data.
  void reset_for_check(int it) {
    Buffers& b = buf(it);
    if (c_ == Coll::bcast && rank_ != 0) std::fill(b.send.begin(), b.send.end(), -1.0f);
    if (c_ != Coll::bcast) std::fill(b.recv.begin(), b.recv.end(), -1.0f);
  }

 private:
  Buffers& buf(int it) { return bufs_[static_cast<std::size_t>(it) % bufs_.size()]; }

  Plan make_plan(Buffers& b) {
    constexpr Datatype f32 = Datatype::float32;
    if (c_ == Coll::bcast) return comm_.plan_broadcast(b.send.data(), elems_, f32, 0, copts_);
    if (c_ == Coll::reduce) return comm_.plan_reduce(b.send.data(), b.recv.data(), elems_, f32, Op::sum, 0, copts_);
    if (c_ == Coll::allreduce) return comm_.plan_allreduce(b.send.data(), b.recv.data(), elems_, f32, Op::sum, copts_);
    if (c_ == Coll::barrier) return comm_.plan_barrier(copts_);
    // The others: the one-shot call, recorded once (Communicator::plan).
    const std::size_t index = static_cast<std::size_t>(&b - bufs_.data());
    return comm_.plan([this, index](Communicator&) { return start(static_cast<int>(index)); });
  }

  Communicator& comm_;
  const Options& o_;
  CollOptions copts_;
  int rank_, size_;
  Engine* engine_;
  std::string coll_;
  Coll c_ = Coll::barrier;
  std::size_t elems_ = 0, block_ = 0, send_elems_ = 0;
  std::vector<Buffers> bufs_;
};

/// Rank-level helpers over the world communicator (untimed).
class Ranks {
 public:
  explicit Ranks(Communicator& c) : c_(c) {}
  void barrier() { c_.barrier().get(); }
  std::vector<double> allgather(double v) {
    std::vector<double> all(static_cast<std::size_t>(c_.size()));
    c_.allgather(&v, 1, all.data(), Datatype::float64).get();
    return all;
  }
  double max(double v) {
    double out = 0;
    c_.allreduce(&v, &out, 1, Datatype::float64, Op::max).get();
    return out;
  }
  bool all(bool ok) {
    std::int32_t v = ok ? 1 : 0, out = 0;
    c_.allreduce(&v, &out, 1, Datatype::int32, Op::min).get();
    return out == 1;
  }

 private:
  Communicator& c_;
};

Record make_record(Ranks& ranks, const std::string& coll, const std::string& variant, std::size_t bytes, int iters,
                   double my_median_us, bool checked, bool ok) {
  const auto all = ranks.allgather(my_median_us);
  Record r;
  r.library = "strata";
  r.collective = coll;
  r.variant = variant;
  r.bytes = bytes;
  r.ranks = static_cast<int>(all.size());
  r.iters = iters;
  r.checked = checked;
  r.check_ok = ranks.all(ok);
  r.min_us = *std::min_element(all.begin(), all.end());
  r.max_us = *std::max_element(all.begin(), all.end());
  r.median_us = median(all);
  r.bandwidth_MBps = r.max_us > 0 ? static_cast<double>(bytes) / r.max_us : 0.0;
  return r;
}

std::string variant_suffix(const Options& o) {
  std::string s;
  if (!o.algo.empty() && o.algo != "auto") s += "/" + o.algo;
  if (o.sync == "strict") s += "/strict";
  if (!o.tree.empty()) s += "/tree=" + o.tree;
  if (!o.fragment.empty()) s += "/fragment=" + o.fragment;
  if (!o.direction.empty()) s += "/direction=" + o.direction;
  if (o.shared_buffers) s += "/shared";
  return s;
}

}  // namespace

// Over ~80 lines: a straight measurement script (set-up, rounds, records), not library code.
int run_coll(const Options& o, std::vector<Record>& out) {
  if (!o.backend.empty()) setenv("STRATA_INTRA", o.backend.c_str(), 1);
  if (!o.provider.empty()) setenv("STRATA_PROVIDER", o.provider.c_str(), 1);
  EngineOptions eo = EngineOptions::from_environment();
  if (o.progress_threads >= 0) eo.progress_threads = o.progress_threads;
  Engine engine(eo);
  Communicator& world = engine.world();
  const int rank = world.rank();
  const bool root = rank == 0;
  const bool progress = root && !o.quiet;
  Ranks ranks(world);

  std::vector<std::string> colls = o.colls;
  if (colls.empty()) colls = default_colls();
  for (const auto& c : colls) {
    if (std::find(all_colls().begin(), all_colls().end(), c) == all_colls().end()) {
      if (root)
        std::fprintf(stderr,
                     "strata-bench: --coll: unknown collective '%s' (bcast, reduce, allreduce, allgather,\n"
                     "alltoall, reduce_scatter, gather, scatter, barrier or all)\n",
                     c.c_str());
      return kUnavailable;
    }
  }
  const std::vector<std::size_t> sizes = o.sizes.empty() ? parse_sizes("8:16M") : o.sizes;

  CollOptions copts;
  if (!o.algo.empty() && o.algo != "auto") copts.algorithm = o.algo;
  copts.sync = o.sync == "strict" ? Sync::strict() : Sync::loose();
  copts.tree = o.tree;
  copts.fragment = o.fragment;
  copts.direction = o.direction;
  copts.shared_buffers = o.shared_buffers;

  const std::string mode = o.overlap ? "overlap" : o.stream > 0 ? "stream" : "latency";
  if (root)
    std::fprintf(stderr, "# strata %s, %d ranks, transport %s, progress threads %d, mode %s%s%s%s\n", "bench",
                 world.size(), engine.transport_name().c_str(), eo.progress_threads, mode.c_str(),
                 o.persistent ? " (persistent)" : "", o.shared_buffers ? ", buffers from Engine::allocate" : "",
                 o.check ? ", checked" : "");

  // The memcpy ceiling of the same sizes, measured while the others wait.
  std::map<std::size_t, double> hot_MBps;
  if (mode == "latency" && o.with_memcpy) {
    if (root) {
      auto recs = memcpy_ceiling(sizes, o.iters, o.quiet);
      for (const Record& r : recs)
        if (r.variant == "hot") hot_MBps[r.bytes] = r.bandwidth_MBps;
      out.insert(out.end(), recs.begin(), recs.end());
    }
    ranks.barrier();
  }
  const bool table = o.format == "table";  // other formats: main() prints the records at the end
  if (root && table) print_header(stdout);

  CollBench bench(world, o, copts, o.shared_buffers ? &engine : nullptr);
  bool all_ok = true;
  const double loops_per_us = mode == "overlap" ? busy_loops_per_us() : 0.0;
  const std::string suffix = variant_suffix(o);

  for (const std::string& coll : colls) {
    try {
      for (std::size_t bytes : sizes) {
        if (coll == "barrier" && bytes != sizes.front()) continue;
        if (bytes % sizeof(float) != 0) continue;
        if (coll == "reduce_scatter" && (bytes / sizeof(float)) % static_cast<std::size_t>(world.size()) != 0) continue;
        const int iters = iterations_for(bytes, o.iters);
        const int warm = o.warmup >= 0 ? o.warmup : std::max(2, iters / 10);
        const std::size_t rec_bytes = coll == "barrier" ? 0 : bytes;

        if (mode == "latency") {
          bench.prepare(coll, bytes, 1, o.persistent);
          std::vector<double> times;
          times.reserve(static_cast<std::size_t>(iters));
          bool ok = true;
          for (int it = -warm; it < iters; ++it) {
            const int idx = it < 0 ? it + warm : it;
            if (o.check) bench.reset_for_check(idx);
            ranks.barrier();
            const auto t0 = Clock::now();
            bench.start(idx).get();
            const double us = us_since(t0);
            if (it >= 0) times.push_back(us);
            if (o.check && !bench.verify(idx)) ok = false;
          }
          const std::string variant = std::string(o.persistent ? "persistent" : "blocking") + suffix;
          out.push_back(make_record(ranks, coll, variant, rec_bytes, iters, median(times), o.check, ok));
        } else if (mode == "overlap") {
          bench.prepare(coll, bytes, 1, false);
          // OSU: t_pure = collective alone, t_cpu = compute alone (as long as
          // t_pure, a fixed amount of work), t_ovl = start, compute, wait.
          std::vector<double> in_call;                // time spent inside the call itself (start without wait)
          std::vector<double> in_compute, in_wait;    // t_ovl's compute phase and its wait after it
          std::vector<double> srv_polls, srv_blocks;  // the progress server's activity during the compute
          auto measure = [&](std::uint64_t loops, bool with_coll) {
            std::vector<double> ts;
            in_call.clear();
            in_compute.clear();
            in_wait.clear();
            srv_polls.clear();
            srv_blocks.clear();
            for (int it = -warm; it < iters; ++it) {
              const int idx = it < 0 ? it + warm : it;
              ranks.barrier();
              const auto t0 = Clock::now();
              Future<void> f;
              if (with_coll) {
                f = bench.start(idx);
                if (it >= 0) in_call.push_back(us_since(t0));
              }
              const auto c0 = Clock::now();
              const Engine::ProgressStats p0 = engine.progress_stats();
              if (loops > 0) busy_loops(loops);
              const Engine::ProgressStats p1 = engine.progress_stats();
              const auto w0 = Clock::now();
              if (with_coll) f.get();
              if (it >= 0) {
                ts.push_back(us_since(t0));
                in_compute.push_back(std::chrono::duration<double, std::micro>(w0 - c0).count());
                in_wait.push_back(us_since(w0));
                srv_polls.push_back(static_cast<double>(p1.loops - p0.loops));
                srv_blocks.push_back(static_cast<double>(p1.sleeps - p0.sleeps));
              }
            }
            return median(ts);
          };
          const double t_pure = ranks.max(measure(0, true));
          const auto loops = static_cast<std::uint64_t>(t_pure * o.compute_factor * loops_per_us);
          const double t_cpu = measure(loops, false);
          const double t_ovl = measure(loops, true);
          // Where t_ovl - t_compute goes: the call itself, the compute
          // stretched (its core ran other work: the progress server, the
          // kernel's network work), and the wait after the compute (the
          // transfer not done yet: link, peer or progress).
          const double ovl_call = median(in_call), ovl_stretch = median(in_compute) - t_cpu, ovl_wait = median(in_wait);
          const double overlap =
              std::min(100.0, t_cpu > 0 ? 100.0 * std::max(0.0, 1.0 - (t_ovl - t_cpu) / t_pure) : 0.0);
          const double worst = ranks.max(-overlap);  // the smallest overlap over ranks, negated
          Record r = make_record(ranks, coll, "overlap", rec_bytes, iters, t_ovl, false, true);
          r.variant = "overlap=" + std::to_string(static_cast<int>(-worst + 0.5)) + "%" + suffix;
          if (root)
            std::fprintf(stdout,
                         "# overlap %s %zu B: pure %.2f us, compute %.2f us, overlapped %.2f us -> %.1f%% "
                         "(rank 0; min over ranks %.1f%%); inside the call %.2f us\n",
                         coll.c_str(), bytes, t_pure, t_cpu, t_ovl, overlap, -worst, median(in_call));
          if (root)
            std::fprintf(stdout,
                         "# overlap parts %s %zu B (rank 0, medians): in the call %.2f us, compute stretched by "
                         "%.2f us, wait after the compute %.2f us; progress server during the compute: %.0f polls, "
                         "%.0f blocks\n",
                         coll.c_str(), bytes, ovl_call, ovl_stretch, ovl_wait, median(srv_polls), median(srv_blocks));
          out.push_back(r);
          // The floor from strata's own transfers: the busy time of the rank's
          // core (its threads, the kernel's system and softirq work) per pure
          // call while the caller sleeps (a timed wait skips the waiter's
          // spin), calls back to back. That CPU lands on the core the compute
          // needs: overlap <= 1 - busy / t_pure, with the transfers strata
          // actually makes (not a raw socket's, whose kernel work lands
          // elsewhere in this emulation: docs/performance.md).
          {
            cpu_set_t mask;
            CPU_ZERO(&mask);
            const bool bound = ::sched_getaffinity(0, sizeof(mask), &mask) == 0 && CPU_COUNT(&mask) == 1;
            const int cpu = ::sched_getcpu();
            const int reps = std::clamp(static_cast<int>(500000.0 / std::max(t_pure, 1.0)), 8, 4000);
            ranks.barrier();
            const double u0 = process_seconds(true), s0 = process_seconds(false), q0 = core_busy_seconds(cpu);
            for (int i = 0; i < reps; ++i) {
              Future<void> f = bench.start(0);
              while (!f.wait_for(std::chrono::seconds(30))) {
              }
              f.get();
            }
            const double core_us = (core_busy_seconds(cpu) - q0) * 1e6 / reps;
            const double user_us = (process_seconds(true) - u0) * 1e6 / reps;
            const double sys_us = (process_seconds(false) - s0) * 1e6 / reps;
            const double busy_max = ranks.max(core_us);
            const bool all_bound = ranks.all(bound);
            if (root && all_bound)
              std::fprintf(stdout,
                           "# own floor %s %zu B: core busy per pure call with the caller asleep %.2f us (max over "
                           "ranks; rank 0: core %.2f, process user %.2f sys %.2f, %d reps) -> reachable overlap "
                           "%.1f%% of t_pure %.2f us\n",
                           coll.c_str(), bytes, busy_max, core_us, user_us, sys_us, reps,
                           100.0 * std::max(0.0, 1.0 - busy_max / t_pure), t_pure);
            else if (root)
              std::fprintf(stdout, "# own floor %s %zu B: not measured (a rank is not bound to one core)\n",
                           coll.c_str(), bytes);
          }
          // The reachable overlap of this machine for these bytes (overlap_floor.cpp).
          const OverlapFloor fl = overlap_floor(world, coll, bytes, t_pure);
          const double cpu_max = ranks.max(fl.cpu_us());
          if (root && fl.measured)
            std::fprintf(stdout,
                         "# floor %s %zu B: raw TCP transfer %.2f us, CPU on the rank's core per transfer %.2f us "
                         "(core busy, max over ranks; rank 0: core %.2f, process user %.2f sys %.2f, %d reps) -> "
                         "reachable overlap %.1f%% of t_pure %.2f us\n",
                         coll.c_str(), bytes, fl.t_raw_us, cpu_max, fl.core_us, fl.user_us, fl.sys_us, fl.reps,
                         100.0 * std::max(0.0, 1.0 - cpu_max / t_pure), t_pure);
          else if (root)
            std::fprintf(stdout, "# floor %s %zu B: not measured (%s)\n", coll.c_str(), bytes, fl.why.c_str());
        } else {  // stream
          const int k = o.stream;
          bench.prepare(coll, bytes, std::min<std::size_t>(static_cast<std::size_t>(k), 64), false);
          CollOptions loose = copts, strict = copts;
          loose.sync = Sync::loose();
          strict.sync = Sync::strict();
          std::map<std::string, double> per_op;
          for (const char* kind : {"stream-loose", "stream-strict", "stream-blocking"}) {
            const std::string kd = kind;
            const CollOptions& co = kd == "stream-strict" ? strict : loose;
            std::vector<double> ts;
            bool ok = true;
            for (int rep = -1; rep < 5; ++rep) {
              if (o.check)
                for (std::size_t s = 0; s < bench.sets(); ++s) bench.reset_for_check(static_cast<int>(s));
              ranks.barrier();
              const auto t0 = Clock::now();
              if (kd == "stream-blocking") {
                for (int i = 0; i < k; ++i) bench.start(i, co).get();
              } else {
                std::vector<Future<void>> fs;
                fs.reserve(static_cast<std::size_t>(k));
                for (int i = 0; i < k; ++i) fs.push_back(bench.start(i, co));
                for (auto& f : fs) f.get();
              }
              if (rep >= 0) ts.push_back(us_since(t0) / k);
              if (o.check)
                for (std::size_t s = 0; s < bench.sets(); ++s) ok = ok && bench.verify(static_cast<int>(s));
            }
            out.push_back(make_record(ranks, coll, kd + suffix, rec_bytes, k, median(ts), o.check, ok));
            per_op[kd] = out.back().median_us;
            if (root) print_record(stdout, out.back());
            all_ok = all_ok && out.back().check_ok;
          }
          if (root)
            std::fprintf(stdout,
                         "# stream %s %zu B x %d: loose %.2f us/op, strict %.2f us/op, blocking %.2f us/op; "
                         "throughput loose/strict %.2fx\n",
                         coll.c_str(), bytes, k, per_op["stream-loose"], per_op["stream-strict"],
                         per_op["stream-blocking"],
                         per_op["stream-loose"] > 0 ? per_op["stream-strict"] / per_op["stream-loose"] : 0.0);
          if (progress) std::fprintf(stderr, "# %s %zu B stream done\n", coll.c_str(), bytes);
          continue;
        }
        all_ok = all_ok && out.back().check_ok;
        if (root && table) {
          print_record(stdout, out.back());
          std::fflush(stdout);
        }
        if (progress)
          std::fprintf(stderr, "# %-14s %10zu B: median %10.2f us (ranks %.2f..%.2f), %d iters%s\n", coll.c_str(),
                       bytes, out.back().median_us, out.back().min_us, out.back().max_us, iters,
                       o.check ? (out.back().check_ok ? ", check ok" : ", CHECK FAILED") : "");
      }
    } catch (const Error& e) {
      // An algorithm that does not exist for this collective is refused on
      // every rank before anything moves: skip the collective, keep the run.
      if (copts.algorithm.empty() || (e.errc() != Errc::invalid_argument && e.errc() != Errc::unsupported)) throw;
      if (root) std::fprintf(stderr, "# %s: skipped: %s\n", coll.c_str(), e.what());
    }
  }

  // Large messages as a fraction of the hot memcpy ceiling of the same run.
  if (root && table && !hot_MBps.empty()) {
    std::fprintf(stdout, "# fraction of hot memcpy (bytes / slowest rank's time over memcpy bandwidth), >= 64 KiB\n");
    for (const Record& r : out) {
      if (r.library != "strata" || r.bytes < (std::size_t{64} << 10)) continue;
      const auto it = hot_MBps.find(r.bytes);
      if (it == hot_MBps.end() || it->second <= 0) continue;
      std::fprintf(stdout, "# %-15s %10zu B: %8.1f MB/s = %.3fx of hot memcpy (%.1f MB/s)\n", r.collective.c_str(),
                   r.bytes, r.bandwidth_MBps, r.bandwidth_MBps / it->second, it->second);
    }
  }
  if (root && !all_ok) std::fprintf(stderr, "strata-bench: a --check failed\n");
  if (!root) out.clear();  // rank 0 writes the JSON
  return all_ok ? 0 : 1;
}

}  // namespace strata::bench
