// strata-mpi-bench: the MPI baseline of strata-bench. Same sizes, iterations,
// statistics and checks, through MPI_Bcast/Reduce/Allreduce/... (blocking),
// their I-forms + MPI_Wait (nonblocking), MPI-4 persistent forms where the
// library has them, an overlap mode and a stream mode. Built once per MPI found
// (strata-mpi-bench-openmpi, strata-mpi-bench-mpich); launch with that MPI's
// own mpirun.
//
// Size convention (bench/README.md): bcast, reduce, allreduce and
// reduce_scatter take the whole vector's bytes; gather, scatter, allgather and
// alltoall take the bytes of one rank's block. Reductions are float sums.
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/bench_cli.hpp"
#include "common/bench_util.hpp"

namespace {

using strata::bench::Coll;
using strata::bench::coll_kind;
using strata::bench::pattern;

using strata::bench::Record;

struct Options : strata::bench::CommonOptions {
  std::vector<std::string> colls = strata::bench::default_colls();
  std::string mode = "blocking";  // blocking | nonblocking | persistent | overlap | stream
  std::string library = "mpi";
  int stream_len = 1000;
};

Options parse(int argc, char** argv, int rank) {
  Options o;
  std::string prog = argv[0];
  prog = prog.substr(prog.rfind('/') + 1);  // strata-mpi-bench-openmpi | -mpich
  CLI::App app{"The MPI baseline of strata-bench --coll (launch with this MPI's mpirun)", prog};
  app.add_option_function<std::string>(
      "--coll", [&o](const std::string& v) { o.colls = strata::bench::split_colls(v); },
      "NAME[,NAME] or all (default: bcast reduce allreduce allgather alltoall reduce_scatter)");
  strata::bench::add_common_options(app, o);
  app.add_option("--mode", o.mode, "blocking (default), nonblocking, persistent, overlap or stream")
      ->check(strata::cli::one_of({"blocking", "nonblocking", "persistent", "overlap", "stream"}));
  app.add_option("--library", o.library, "library name in the records (default mpi)");
  app.add_option("--stream-len", o.stream_len, "--mode stream: calls per stream (default 1000)")
      ->check(strata::cli::positive_integer());
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const bool help = dynamic_cast<const CLI::CallForHelp*>(&e) != nullptr;
    if (rank == 0) {
      if (help)
        std::fputs(app.help().c_str(), stdout);
      else
        std::fprintf(stderr, "%s: error: %s (see %s --help)\n", app.get_name().c_str(),
                     strata::cli::describe(app, e).c_str(), app.get_name().c_str());
    }
    MPI_Finalize();
    std::exit(help ? 0 : strata::cli::kExitUsage);
  }
  if (o.sizes.empty()) o.sizes = strata::bench::parse_sizes("8:16M");
  if ((o.format == "osu" || o.format == "nccl") && (o.mode == "overlap" || o.mode == "stream")) {
    if (rank == 0)
      std::fprintf(stderr, "%s: error: --format %s reports latencies, not --mode %s\n", app.get_name().c_str(),
                   o.format.c_str(), o.mode.c_str());
    MPI_Finalize();
    std::exit(strata::cli::kExitUsage);
  }
  return o;
}

// Buffers for one collective call; several sets rotate in off-cache mode.
struct Buffers {
  std::vector<float> send, recv;
};

class Bench {
 public:
  Bench(const Options& o, int rank, int size) : o_(o), rank_(rank), size_(size) {}

  // Fills send buffers for @p coll with @p elems floats per block.
  void prepare(const std::string& coll, std::size_t bytes) {
    coll_ = coll;
    c_ = coll_kind(coll);  // compared per call: an enum, not the string
    elems_ = bytes / sizeof(float);
    std::size_t send_elems = elems_, recv_elems = elems_;
    if (coll == "allgather" || coll == "gather") recv_elems = elems_ * static_cast<std::size_t>(size_);
    if (coll == "alltoall" || coll == "scatter") {
      send_elems = elems_ * static_cast<std::size_t>(size_);
      recv_elems = coll == "scatter" ? elems_ : send_elems;
    }
    if (coll == "reduce_scatter") {
      block_ = elems_ / static_cast<std::size_t>(size_);
      recv_elems = block_;
    }
    const std::size_t footprint = (send_elems + recv_elems) * sizeof(float);
    std::size_t sets = 1;
    if (o_.off_cache && footprint > 0)
      sets = std::min<std::size_t>(64, std::max<std::size_t>(1, (64u << 20) / footprint));
    bufs_.assign(sets, {});
    for (auto& b : bufs_) {
      b.send.resize(std::max<std::size_t>(send_elems, 1));
      b.recv.assign(std::max<std::size_t>(recv_elems, 1), 0.0f);
      for (std::size_t i = 0; i < send_elems; ++i) b.send[i] = pattern(rank_, i);
    }
  }

  Buffers& buf(int it) { return bufs_[static_cast<std::size_t>(it) % bufs_.size()]; }

  int count() const { return static_cast<int>(elems_); }

  void blocking(int it) {
    Buffers& b = buf(it);
    const int n = count();
    if (c_ == Coll::bcast)
      MPI_Bcast(b.send.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    else if (c_ == Coll::reduce)
      MPI_Reduce(b.send.data(), b.recv.data(), n, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
    else if (c_ == Coll::allreduce)
      MPI_Allreduce(b.send.data(), b.recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else if (c_ == Coll::allgather)
      MPI_Allgather(b.send.data(), n, MPI_FLOAT, b.recv.data(), n, MPI_FLOAT, MPI_COMM_WORLD);
    else if (c_ == Coll::alltoall)
      MPI_Alltoall(b.send.data(), n, MPI_FLOAT, b.recv.data(), n, MPI_FLOAT, MPI_COMM_WORLD);
    else if (c_ == Coll::gather)
      MPI_Gather(b.send.data(), n, MPI_FLOAT, b.recv.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    else if (c_ == Coll::scatter)
      MPI_Scatter(b.send.data(), n, MPI_FLOAT, b.recv.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    else if (c_ == Coll::reduce_scatter)
      MPI_Reduce_scatter_block(b.send.data(), b.recv.data(), static_cast<int>(block_), MPI_FLOAT, MPI_SUM,
                               MPI_COMM_WORLD);
    else if (c_ == Coll::barrier)
      MPI_Barrier(MPI_COMM_WORLD);
  }

  MPI_Request start_nonblocking(int it) {
    Buffers& b = buf(it);
    const int n = count();
    MPI_Request r = MPI_REQUEST_NULL;
    if (c_ == Coll::bcast)
      MPI_Ibcast(b.send.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD, &r);
    else if (c_ == Coll::reduce)
      MPI_Ireduce(b.send.data(), b.recv.data(), n, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD, &r);
    else if (c_ == Coll::allreduce)
      MPI_Iallreduce(b.send.data(), b.recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
    else if (c_ == Coll::allgather)
      MPI_Iallgather(b.send.data(), n, MPI_FLOAT, b.recv.data(), n, MPI_FLOAT, MPI_COMM_WORLD, &r);
    else if (c_ == Coll::alltoall)
      MPI_Ialltoall(b.send.data(), n, MPI_FLOAT, b.recv.data(), n, MPI_FLOAT, MPI_COMM_WORLD, &r);
    else if (c_ == Coll::gather)
      MPI_Igather(b.send.data(), n, MPI_FLOAT, b.recv.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD, &r);
    else if (c_ == Coll::scatter)
      MPI_Iscatter(b.send.data(), n, MPI_FLOAT, b.recv.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD, &r);
    else if (c_ == Coll::reduce_scatter)
      MPI_Ireduce_scatter_block(b.send.data(), b.recv.data(), static_cast<int>(block_), MPI_FLOAT, MPI_SUM,
                                MPI_COMM_WORLD, &r);
    else if (c_ == Coll::barrier)
      MPI_Ibarrier(MPI_COMM_WORLD, &r);
    return r;
  }

#if MPI_VERSION >= 4
  static constexpr bool kHavePersistent = true;
  MPI_Request init_persistent(int it) {
    Buffers& b = buf(it);
    const int n = count();
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Info info = MPI_INFO_NULL;
    if (c_ == Coll::bcast)
      MPI_Bcast_init(b.send.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD, info, &r);
    else if (c_ == Coll::reduce)
      MPI_Reduce_init(b.send.data(), b.recv.data(), n, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD, info, &r);
    else if (c_ == Coll::allreduce)
      MPI_Allreduce_init(b.send.data(), b.recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, info, &r);
    else if (c_ == Coll::allgather)
      MPI_Allgather_init(b.send.data(), n, MPI_FLOAT, b.recv.data(), n, MPI_FLOAT, MPI_COMM_WORLD, info, &r);
    else if (c_ == Coll::alltoall)
      MPI_Alltoall_init(b.send.data(), n, MPI_FLOAT, b.recv.data(), n, MPI_FLOAT, MPI_COMM_WORLD, info, &r);
    else if (c_ == Coll::gather)
      MPI_Gather_init(b.send.data(), n, MPI_FLOAT, b.recv.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD, info, &r);
    else if (c_ == Coll::scatter)
      MPI_Scatter_init(b.send.data(), n, MPI_FLOAT, b.recv.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD, info, &r);
    else if (c_ == Coll::reduce_scatter)
      MPI_Reduce_scatter_block_init(b.send.data(), b.recv.data(), static_cast<int>(block_), MPI_FLOAT, MPI_SUM,
                                    MPI_COMM_WORLD, info, &r);
    else if (c_ == Coll::barrier)
      MPI_Barrier_init(MPI_COMM_WORLD, info, &r);
    return r;
  }
#else
  static constexpr bool kHavePersistent = false;
  MPI_Request init_persistent(int) { return MPI_REQUEST_NULL; }
#endif

  // Checks the result of iteration @p it against the sequential reference.
  bool verify(int it) {
    const Buffers& b = buf(it);
    return strata::bench::verify_result(coll_, rank_, size_, elems_, block_, b.send, b.recv);
  }

  // Restores bcast's send buffer on non-roots so --check sees fresh data.
  void reset_for_check(int it) {
    if (c_ == Coll::bcast && rank_ != 0) {
      Buffers& b = buf(it);
      std::fill(b.send.begin(), b.send.end(), -1.0f);
    }
  }

 private:
  const Options& o_;
  int rank_, size_;
  std::string coll_;
  Coll c_ = Coll::barrier;
  std::size_t elems_ = 0, block_ = 0;
  std::vector<Buffers> bufs_;
};

// Busy compute of a fixed amount of work: as many busy_loops() steps as this
// core does in @p us microseconds undisturbed (@p loops_per_us, calibrated
// once), the same work strata-bench --overlap does. Not a wall-clock spin: a
// spin that ends at a deadline does less work when a progress thread or the
// kernel's network stack takes the core meanwhile, which hid their cost from
// t_ovl and overstated the overlap.
double compute_for(double us, double loops_per_us) {
  return strata::bench::busy_loops(static_cast<std::uint64_t>(us * loops_per_us));
}

Record reduce_times(const Options& o, const std::string& coll, const std::string& variant, std::size_t bytes, int iters,
                    double my_median_us, bool checked, bool ok, int rank, int size) {
  std::vector<double> all(static_cast<std::size_t>(size));
  MPI_Gather(&my_median_us, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  int ok_i = ok ? 1 : 0, all_ok = 0;
  MPI_Allreduce(&ok_i, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  Record r;
  r.library = o.library;
  r.collective = coll;
  r.variant = variant;
  r.bytes = bytes;
  r.ranks = size;
  r.iters = iters;
  r.checked = checked;
  r.check_ok = all_ok == 1;
  if (rank == 0) {
    r.min_us = *std::min_element(all.begin(), all.end());
    r.max_us = *std::max_element(all.begin(), all.end());
    r.median_us = strata::bench::median(all);
    r.bandwidth_MBps = r.max_us > 0 ? static_cast<double>(bytes) / r.max_us : 0.0;
  }
  return r;
}

}  // namespace

// Over ~80 lines: a straight benchmark script, not library code.
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Options o = parse(argc, argv, rank);
  if (o.mode == "persistent" && !Bench::kHavePersistent) {
    if (rank == 0)
      std::fprintf(stderr, "strata-mpi-bench: this MPI (MPI_VERSION %d) has no persistent collectives\n", MPI_VERSION);
    MPI_Finalize();
    return 3;
  }
  std::vector<Record> records;
  if (rank == 0) {
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(lib, &len);
    std::string first(lib, static_cast<std::size_t>(len));
    first = first.substr(0, first.find('\n'));
    std::fprintf(stderr, "# %s, %d ranks, mode %s\n", first.c_str(), size, o.mode.c_str());
    if (o.format == "table") strata::bench::print_header(stdout);
  }
  Bench bench(o, rank, size);
  for (const std::string& coll : o.colls) {
    for (std::size_t bytes : o.sizes) {
      if (coll == "barrier" && bytes != o.sizes.front()) continue;
      if (bytes % sizeof(float) != 0) continue;
      if (coll == "reduce_scatter" && (bytes / sizeof(float)) % static_cast<std::size_t>(size) != 0) continue;
      bench.prepare(coll, bytes);
      const int iters = strata::bench::iterations_for(bytes, o.iters);
      const int warm = o.warmup >= 0 ? o.warmup : std::max(2, iters / 10);
      std::vector<double> times;
      times.reserve(static_cast<std::size_t>(iters));
      bool ok = true;
      std::string variant = o.mode;
      if (o.mode == "blocking" || o.mode == "nonblocking" || o.mode == "persistent") {
        std::vector<MPI_Request> persistent;
        if (o.mode == "persistent")
          for (int k = 0; k < static_cast<int>(std::min<std::size_t>(64, static_cast<std::size_t>(iters + warm))); ++k)
            persistent.push_back(bench.init_persistent(k));
        for (int it = -warm; it < iters; ++it) {
          const int idx = it < 0 ? it + warm : it;
          if (o.check) bench.reset_for_check(idx);
          MPI_Barrier(MPI_COMM_WORLD);
          const double t0 = MPI_Wtime();
          if (o.mode == "blocking") {
            bench.blocking(idx);
          } else if (o.mode == "nonblocking") {
            MPI_Request r = bench.start_nonblocking(idx);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
          } else {
            MPI_Request& r = persistent[static_cast<std::size_t>(idx) % persistent.size()];
            MPI_Start(&r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
          }
          const double t1 = MPI_Wtime();
          if (it >= 0) times.push_back((t1 - t0) * 1e6);
          if (o.check && !bench.verify(idx)) ok = false;
        }
        for (MPI_Request& r : persistent) MPI_Request_free(&r);
        records.push_back(
            reduce_times(o, coll, variant, bytes, iters, strata::bench::median(times), o.check, ok, rank, size));
      } else if (o.mode == "overlap") {
        // OSU-style: t_pure (coll alone), t_cpu ~= t_pure of compute, t_ovl (start, compute, wait).
        const double loops_per_us = strata::bench::busy_loops_per_us();
        auto measure = [&](double compute_us, bool with_coll) {
          std::vector<double> ts;
          for (int it = -warm; it < iters; ++it) {
            const int idx = it < 0 ? it + warm : it;
            MPI_Barrier(MPI_COMM_WORLD);
            const double t0 = MPI_Wtime();
            MPI_Request r = MPI_REQUEST_NULL;
            if (with_coll) r = bench.start_nonblocking(idx);
            if (compute_us > 0) compute_for(compute_us, loops_per_us);
            if (with_coll) MPI_Wait(&r, MPI_STATUS_IGNORE);
            if (it >= 0) ts.push_back((MPI_Wtime() - t0) * 1e6);
          }
          return strata::bench::median(ts);
        };
        double t_pure = measure(0, true);
        MPI_Allreduce(MPI_IN_PLACE, &t_pure, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        const double t_cpu = measure(t_pure, false);
        const double t_ovl = measure(t_pure, true);
        double overlap = t_cpu > 0 ? 100.0 * std::max(0.0, 1.0 - (t_ovl - t_cpu) / t_pure) : 0.0;
        overlap = std::min(overlap, 100.0);
        Record r = reduce_times(o, coll, "overlap", bytes, iters, t_ovl, false, true, rank, size);
        if (rank == 0) {
          std::fprintf(stdout, "# overlap %s %zu B: pure %.2f us, compute %.2f us, overlapped %.2f us -> %.1f%%\n",
                       coll.c_str(), bytes, t_pure, t_cpu, t_ovl, overlap);
          r.variant = "overlap=" + std::to_string(static_cast<int>(overlap + 0.5)) + "%";
        }
        records.push_back(r);
      } else {  // stream: stream_len back-to-back collectives, nonblocking then waitall, vs blocking each
        const int k = o.stream_len;
        for (const char* kind : {"stream-blocking", "stream-nonblocking"}) {
          std::vector<double> ts;
          for (int rep = 0; rep < 5; ++rep) {
            MPI_Barrier(MPI_COMM_WORLD);
            const double t0 = MPI_Wtime();
            if (std::string(kind) == "stream-blocking") {
              for (int i = 0; i < k; ++i) bench.blocking(i);
            } else {
              std::vector<MPI_Request> rs;
              rs.reserve(static_cast<std::size_t>(k));
              for (int i = 0; i < k; ++i) rs.push_back(bench.start_nonblocking(i));
              MPI_Waitall(k, rs.data(), MPI_STATUSES_IGNORE);
            }
            ts.push_back((MPI_Wtime() - t0) * 1e6 / k);
          }
          records.push_back(reduce_times(o, coll, kind, bytes, k, strata::bench::median(ts), false, true, rank, size));
          if (rank == 0 && o.format == "table") strata::bench::print_record(stdout, records.back());
        }
        continue;
      }
      if (rank == 0 && o.format == "table") strata::bench::print_record(stdout, records.back());
      std::fflush(stdout);
    }
  }
  bool all_ok = true;
  for (const Record& r : records) all_ok = all_ok && r.check_ok;
  if (rank == 0) {
    if (o.format != "table") strata::bench::print_records(o, records);
    if (!strata::bench::write_json_file(o, records, "strata-mpi-bench")) all_ok = false;
  }
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
