// fft3d: complex 3D FFT of an N1 x N2 x N3 grid (NAS FT style) with
// all-to-all transposes, slab or pencil decomposition; FFTW for the local
// transforms. Written once against a small communication backend (strata or
// MPI; see fft3d_strata.cpp / fft3d_mpi.cpp):
//
//   struct Backend {
//     using Request = ...;
//     // true: ialltoall_blocks() runs per-block work inside the collective
//     // (strata: CollOptions::on_block compute nodes) and on_each() uses
//     // continuations (Future::then); false (MPI): neither exists.
//     static constexpr bool kExecutorWork;
//     int rank() const; int size() const;
//     Backend split(int color, int key);   // sub-communicator (MPI_Comm_split)
//     Request ialltoall(const Cplx* send, Cplx* recv, std::size_t count);  // count complex per peer
//     Request ialltoall_blocks(const Cplx* send, Cplx* recv, std::size_t count,
//                              std::function<void(int source)> fn);      // kExecutorWork only
//     void wait(Request& r);
//     // runs fn(i) for every request as soon as it completes (in any thread), returns when all ran
//     void on_each(std::vector<Request>& rs, const std::function<void(int)>& fn);
//     double sum(double v); double max(double v);  // blocking allreduces
//     void barrier();
//     // true: --runtime openmp exists (strata built with strata::openmp):
//     static constexpr bool kOpenMP;
//     // creates a detached OpenMP task that runs the alltoall after the tasks
//     // with depend(out: *in), before those with depend(in: *out) (kOpenMP only)
//     void alltoall_task(const Cplx* send, Cplx* recv, std::size_t count, char* in, char* out);
//     void tasks_check();  // throws the first failure of alltoall_task's collectives
//   };
//
// Decompositions (C order, last index fastest) on a P1 x P2 process grid,
// rank r = (r1, r2) = (r / P2, r % P2); slab is the grid P x 1. Block sizes
// L1 = N1/P1, M2 = N2/P2, K2 = N2/P1, M3 = N3/P2:
//   A (input):  A[i1l][i2l][i3]   i1 = r1 L1 + i1l, i2 = r2 M2 + i2l
//   B (middle): B[i1l][i2][k3l]   k3 = r2 M3 + k3l            (pencil only)
//   C (output): C[k2l][k1][k3l]   k2 = r1 K2 + k2l, k3 = r2 M3 + k3l
// Slab forward: 2D FFT (i2, i3) per plane of A, transpose A -> C within the
// world (alltoall), 1D FFT along k1. Pencil forward: FFT along i3 in A,
// transpose A -> B within the row communicator (same r1, P2 ranks), FFT along
// i2, transpose B -> C within the column communicator (same r2, P1 ranks), FFT
// along i1. The result stays transposed (like NAS FT). The inverse runs the
// same steps backwards and scales by 1/(N1 N2 N3).
//
// Every transpose is described the same way (struct Transpose): a 2D loop
// (x, y) over runs of contiguous elements with strides at the source and the
// destination, a stage-1 FFT over source rows x before it and a stage-2 FFT
// after it (over destination rows y, or x when x survives the transpose).
// Transpose modes (the work is split into --chunks pieces, one alltoall each):
//   blocking:  one alltoall per transpose, waited for at once;
//   overlap:   chunk c = a range of source rows: the stage-1 FFTs of chunk
//              c+1 run while the alltoall of chunk c is in flight;
//   pipelined: all stage-1 FFTs, then every chunk's alltoall in flight; chunk
//              c = a range of destination rows. strata: each block is
//              unpacked by a compute node of the alltoall's own graph
//              (CollOptions::on_block) as soon as it landed, and the node that
//              unpacks the chunk's last block runs the chunk's stage-2 FFTs;
//              MPI: whole chunks in MPI_Waitany order;
//   then:      (strata only) as pipelined, but each chunk is unpacked and
//              transformed in a Future::then continuation once its whole
//              alltoall completed (the variant before on_block existed).
//   openmp:    (--runtime openmp, strata with strata::openmp) chunks as in
//              overlap, every step an OpenMP task: per chunk, a task runs the
//              stage-1 FFTs and packs, a detached task (strata/openmp.hpp)
//              runs the alltoall, a task unpacks (and runs the stage-2 FFTs
//              when x survives the transpose); the other stage-2 FFTs run as
//              tasks once every chunk is unpacked. The tasks of all chunks
//              are created at once inside a taskgroup, so chunk c+1's FFTs
//              overlap chunk c's alltoall on the OpenMP threads.
// In the pencil decomposition the middle FFT (along i2) is the stage-2 of the
// first transpose in pipelined/then modes and the stage-1 of the second in
// blocking/overlap modes, so it always sits where it can overlap.
// Over ~800 lines: the app's header-only core (templates over the backend) reads as one unit.
#pragma once

#include <fftw3.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../common/app_options.hpp"

namespace fft3d {

using Cplx = std::complex<double>;
using std::size_t;

struct Options {
  int n1 = 64, n2 = 64, n3 = 64;
  std::string mode = "all";     // blocking | overlap | pipelined | then | all
  std::string runtime = "tbb";  // tbb (the modes above) | openmp (the openmp mode only)
  std::string decomp = "slab";
  int pg1 = 0, pg2 = 0;  // --pgrid P1xP2; 0 = automatic
  int chunks = 4;
  int iters = 3;
  bool check = false;
  long long ref_max = 1 << 21;  // grids up to this many points are checked against a full FFTW 3D transform
  bool measure = false;
  std::string trace;
  std::string backend;
};

inline bool parse_grid(const std::string& s, Options& o) {
  int a = 0, b = 0, c = 0;
  char x1 = 0, x2 = 0, extra = 0;
  if (std::sscanf(s.c_str(), "%d%c%d%c%d%c", &a, &x1, &b, &x2, &c, &extra) == 5 && x1 == 'x' && x2 == 'x') {
    o.n1 = a, o.n2 = b, o.n3 = c;
    return true;
  }
  if (std::sscanf(s.c_str(), "%d%c", &a, &extra) == 1) {
    o.n1 = o.n2 = o.n3 = a;
    return true;
  }
  return false;
}

/// Parses the command line; returns an error message or "" (fills @p help on -h).
inline std::string parse(int argc, char** argv, Options& o, std::string& help) {
  CLI::App app{
      "Forward + inverse complex 3D FFT. slab: the rank count P must divide N1 and N2. pencil: a P1 x P2 "
      "process grid (default: the most square one that fits), P1 must divide N1 and N2, P2 must divide "
      "N2 and N3. --check: compare with a single-process FFTW 3D transform (grids up to --ref-max "
      "points), the round trip and Parseval's identity.",
      "fft3d"};
  apps::add_common_options(app, o);
  auto grid = CLI::Validator(
      [](std::string& v) -> std::string {
        Options t;
        return parse_grid(v, t) ? "" : "expects N or N1xN2xN3, got '" + v + "'";
      },
      "N|N1xN2xN3");
  app.add_option_function<std::string>(
         "--grid,--n", [&o](const std::string& v) { parse_grid(v, o); }, "grid points (default 64x64x64)")
      ->check(grid);
  app.add_option("--decomp", o.decomp, "slab (default) or pencil")->check(strata::cli::one_of({"slab", "pencil"}));
  app.add_option_function<std::string>(
         "--pgrid",
         [&o](const std::string& v) {
           char x = 0, extra = 0;
           std::sscanf(v.c_str(), "%d%c%d%c", &o.pg1, &x, &o.pg2, &extra);
         },
         "process grid of --decomp pencil (default: the most square one that fits)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            int a = 0, b = 0;
            char x = 0, extra = 0;
            const bool ok = std::sscanf(v.c_str(), "%d%c%d%c", &a, &x, &b, &extra) == 3 && x == 'x' && a >= 1 && b >= 1;
            return ok ? "" : "expects P1xP2, both >= 1, got '" + v + "'";
          },
          "P1xP2"));
  app.add_option("--mode", o.mode, "blocking, overlap, pipelined, then or all (= blocking, overlap, pipelined)")
      ->check(strata::cli::one_of({"blocking", "overlap", "pipelined", "then", "comm", "all"}));
  app.add_option("--runtime", o.runtime,
                 "tbb (default: the --mode variants) or openmp (transposes as detached OpenMP tasks overlapping "
                 "the FFT tasks; strata built with strata::openmp only; ignores --mode)")
      ->check(strata::cli::one_of({"tbb", "openmp"}));
  app.add_option("--chunks", o.chunks, "chunks of the pipelined and overlapped transposes (default 4)")
      ->check(strata::cli::positive_integer());
  app.add_option("--iters", o.iters, "forward + inverse transforms timed (default 3)")
      ->check(strata::cli::positive_integer());
  app.add_option("--ref-max", o.ref_max, "--check: largest grid (points) checked against FFTW 3D (default 2^21)");
  app.add_flag("--measure", o.measure, "FFTW_MEASURE plans instead of FFTW_ESTIMATE");
  const std::string err = apps::parse_app(app, argc, argv, help);
  if (!err.empty() || !help.empty()) return err;
  if (o.pg1 > 0 && o.decomp != "pencil") return "--pgrid needs --decomp pencil";
  return "";
}

/// Deterministic input value at (i1, i2, i3), independent of the rank count.
inline Cplx input(const Options& o, int i1, int i2, int i3) {
  std::uint64_t z =
      (static_cast<std::uint64_t>(i1) * static_cast<std::uint64_t>(o.n2) + static_cast<std::uint64_t>(i2)) *
          static_cast<std::uint64_t>(o.n3) +
      static_cast<std::uint64_t>(i3) + 0x51ED270B27ull;
  auto next = [&z]() {
    z += 0x9E3779B97F4A7C15ull;
    std::uint64_t x = z;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return static_cast<double>(x >> 11) * (2.0 / 9007199254740992.0) - 1.0;
  };
  const double re = next();
  return {re, next()};
}

inline fftw_complex* fc(Cplx* p) { return reinterpret_cast<fftw_complex*>(p); }
inline size_t sz(int v) { return static_cast<size_t>(v); }

struct FftwBuffer {
  Cplx* p = nullptr;
  explicit FftwBuffer(size_t n) : p(static_cast<Cplx*>(fftw_malloc(std::max<size_t>(n, 1) * sizeof(Cplx)))) {
    if (p == nullptr) throw std::bad_alloc();
    std::fill(p, p + n, Cplx(0, 0));
  }
  ~FftwBuffer() { fftw_free(p); }
  FftwBuffer(const FftwBuffer&) = delete;
  FftwBuffer& operator=(const FftwBuffer&) = delete;
};

struct Plan {
  fftw_plan p = nullptr;
  Plan() = default;
  explicit Plan(fftw_plan q) : p(q) {
    if (p == nullptr) throw std::runtime_error("FFTW could not create a plan");
  }
  ~Plan() {
    if (p) fftw_destroy_plan(p);
  }
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  Plan& operator=(Plan&& o) noexcept {
    std::swap(p, o.p);
    return *this;
  }
};

/// Splits [0, n) into k nearly equal ranges (k clipped to n).
inline std::vector<std::pair<int, int>> ranges(int n, int k) {
  k = std::max(1, std::min(k, n));
  std::vector<std::pair<int, int>> r;
  for (int c = 0; c < k; ++c) r.emplace_back(n * c / k, n * (c + 1) / k);
  return r;
}

/// Splits columns [0, n) into k ranges whose bounds are multiples of 4
/// where n allows (aligned FFTW column plans); k clipped to n.
inline std::vector<std::pair<int, int>> column_ranges(int n, int k) {
  if (n % 4 != 0 || n / 4 < k) return ranges(n, k);
  std::vector<std::pair<int, int>> r;
  for (auto [a, e] : ranges(n / 4, k)) r.emplace_back(4 * a, 4 * e);
  return r;
}

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
inline std::int64_t ns_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count();
}

/// Per-rank timings (seconds). The node_* parts ran inside the executor
/// (on_block compute nodes or then continuations) while the main thread waited.
struct Times {
  double total = 0, fft = 0, pack = 0, wait = 0;
  std::atomic<std::int64_t> node_fft_ns{0}, node_pack_ns{0};
  size_t sent_bytes = 0;  // to other ranks (all transposes)
  double node_fft() const { return static_cast<double>(node_fft_ns.load()) * 1e-9; }
  double node_pack() const { return static_cast<double>(node_pack_ns.load()) * 1e-9; }
};

enum class Mode { blocking, overlap, pipelined, then, openmp, comm };
inline const char* name(Mode m) {
  switch (m) {
    case Mode::blocking:
      return "blocking";
    case Mode::overlap:
      return "overlap";
    case Mode::pipelined:
      return "pipelined";
    case Mode::then:
      return "then";
    case Mode::openmp:
      return "openmp";
    case Mode::comm:
      return "comm";
  }
  return "?";
}

/// One distributed transpose (see the file comment): element (x, y, peer) is
/// a run of `run` complex numbers at src + x sx + y sy + peer sp, sent to
/// `peer`, where it lands at dst + x dx + y dy + (this rank) dp.
struct Transpose {
  Cplx* src = nullptr;
  Cplx* dst = nullptr;
  int nx = 0, ny = 0;
  size_t run = 0;
  size_t sx = 0, sy = 0, sp = 0, dx = 0, dy = 0, dp = 0;
  bool stage2_on_x = false;              // destination rows are x (x survives the transpose)
  std::function<void(int, int)> stage1;  // FFTs over source rows [a, e) of x; empty = none
  std::function<void(int, int)> stage2;  // FFTs over destination rows [a, e)
  // The pipelined mode's split along the run (columns [r0, r1) of every
  // run; set when both stages exist and stage 2 is not over x): `pre` before
  // the chunks, stage 1 and stage 2 over column ranges, `post` after them.
  std::function<void()> pre, post;
  std::function<void(int, int)> stage1_cols, stage2_cols;
};

/// Process grid P1 x P2 for @p p ranks; returns an error message or "".
inline std::string choose_grid(const Options& o, int p, int& p1, int& p2) {
  if (o.decomp == "slab") {
    p1 = p, p2 = 1;
    if (o.n1 % p != 0 || o.n2 % p != 0) {
      char m[320];
      std::snprintf(m, sizeof m,
                    "slab decomposition needs the number of ranks (%d) to divide N1 (%d) and N2 (%d): run with a "
                    "rank count that divides both, change --grid, or use --decomp pencil",
                    p, o.n1, o.n2);
      return m;
    }
    return "";
  }
  auto fits = [&o](int a, int b) { return o.n1 % a == 0 && o.n2 % a == 0 && o.n2 % b == 0 && o.n3 % b == 0; };
  if (o.pg1 > 0) {
    p1 = o.pg1, p2 = o.pg2;
    if (p1 * p2 != p) {
      char m[200];
      std::snprintf(m, sizeof m, "--pgrid %dx%d has %d ranks but the job has %d: run with %d ranks or change --pgrid",
                    p1, p2, p1 * p2, p, p1 * p2);
      return m;
    }
  } else {
    // Among the factorizations P1 x P2: those that fit the grid first, then
    // the most square, then P1 <= P2.
    auto score = [&](int a) { return std::make_tuple(!fits(a, p / a), std::abs(a - p / a), a > p / a); };
    p1 = 1;
    for (int a = 2; a <= p; ++a)
      if (p % a == 0 && score(a) < score(p1)) p1 = a;
    p2 = p / p1;
  }
  if (!fits(p1, p2)) {
    char m[400];
    std::snprintf(m, sizeof m,
                  "pencil decomposition on a %dx%d process grid needs P1 (%d) to divide N1 (%d) and N2 (%d), and P2 "
                  "(%d) to divide N2 (%d) and N3 (%d): run with a rank count that fits, change --grid, or choose "
                  "--pgrid P1xP2",
                  p1, p2, p1, o.n1, o.n2, p2, o.n2, o.n3);
    return m;
  }
  return "";
}

/// One rank's part of the distributed 3D FFT.
template <class B>
class Fft3d {
 public:
  /// @param world the backend of all ranks; @p p1 x @p p2 from choose_grid().
  Fft3d(B& world, const Options& o, int p1, int p2)
      : world_(world),
        pencil_(o.decomp == "pencil"),
        r1_(world.rank() / p2),
        r2_(world.rank() % p2),
        n1_(o.n1),
        n2_(o.n2),
        n3_(o.n3),
        l1_(o.n1 / p1),
        m2_(o.n2 / p2),
        k2_(o.n2 / p1),
        m3_(o.n3 / p2),
        local_(sz(l1_) * sz(m2_) * sz(n3_)),
        a_(local_),
        b_(pencil_ ? local_ : 0),
        c_(local_),
        send_(local_),
        recv_(local_) {
    if (pencil_) {
      row_ = std::make_unique<B>(world.split(r1_, r2_));  // same r1: P2 ranks, index r2
      col_ = std::make_unique<B>(world.split(r2_, r1_));  // same r2: P1 ranks, index r1
    }
    const unsigned base = o.measure ? FFTW_MEASURE : FFTW_ESTIMATE;
    // Plans run on planes at offsets of whole planes: unaligned unless every plane start keeps the alignment.
    auto flags = [base](size_t plane) { return base | (plane % 4 == 0 ? 0u : unsigned{FFTW_UNALIGNED}); };
    // Strided 1D transforms of length n on a plane [n][h]: h transforms, stride h.
    auto strided = [&](int n, int h, int dir) {
      FftwBuffer t(sz(n) * sz(h));
      int len[1] = {n};
      return Plan(
          fftw_plan_many_dft(1, len, h, fc(t.p), nullptr, h, 1, fc(t.p), nullptr, h, 1, dir, flags(sz(n) * sz(h))));
    };
    // The k1 transforms of C: planes [N1][M3].
    k1f_ = strided(n1_, m3_, FFTW_FORWARD);
    k1b_ = strided(n1_, m3_, FFTW_BACKWARD);
    {
      // Contiguous transforms along i3 of a plane of A: [M2][N3] (slab: the
      // pipelined mode's first half of the 2D FFT).
      FftwBuffer t(sz(m2_) * sz(n3_));
      int len[1] = {n3_};
      for (int dir : {FFTW_FORWARD, FFTW_BACKWARD}) {
        Plan q(fftw_plan_many_dft(1, len, m2_, fc(t.p), nullptr, 1, n3_, fc(t.p), nullptr, 1, n3_, dir,
                                  flags(sz(m2_) * sz(n3_))));
        (dir == FFTW_FORWARD ? i3f_ : i3b_) = std::move(q);
      }
    }
    if (!pencil_) {
      FftwBuffer plane(sz(n2_) * sz(n3_));
      p2f_ = Plan(fftw_plan_dft_2d(n2_, n3_, fc(plane.p), fc(plane.p), FFTW_FORWARD, flags(sz(n2_) * sz(n3_))));
      p2b_ = Plan(fftw_plan_dft_2d(n2_, n3_, fc(plane.p), fc(plane.p), FFTW_BACKWARD, flags(sz(n2_) * sz(n3_))));
    } else {
      // Strided transforms along i2 of a plane of B: [N2][M3].
      i2f_ = strided(n2_, m3_, FFTW_FORWARD);
      i2b_ = strided(n2_, m3_, FFTW_BACKWARD);
    }
  }

  Cplx* input() { return a_.p; }
  const Cplx* output() const { return c_.p; }
  Cplx* output() { return c_.p; }
  size_t local_size() const { return local_; }

  /// Forward transform: A -> C.
  void forward(Mode m, int chunks, Times& t) {
    const auto t0 = Clock::now();
    const bool mid_late = m == Mode::pipelined || m == Mode::then;  // middle FFT as stage 2 of the first transpose
    if (!pencil_) {
      Transpose x = slab_like(a_.p, c_.p, l1_, k2_, n3_, sz(n2_) * sz(n3_), sz(n1_) * sz(n3_));
      x.stage1 = [this](int a, int e) { planes(p2f_, a_.p, sz(n2_) * sz(n3_), a, e); };
      x.stage2 = [this](int a, int e) { planes(k1f_, c_.p, sz(n1_) * sz(m3_), a, e); };
      // Pipelined: the 2D FFT as i3 rows first, then i2 columns per chunk of i3.
      x.pre = [this] { planes(i3f_, a_.p, sz(n2_) * sz(n3_), 0, l1_); };
      x.stage1_cols = [this](int r0, int r1) { columns(n2_, n3_, FFTW_FORWARD, a_.p, l1_, r0, r1); };
      x.stage2_cols = [this](int r0, int r1) { columns(n1_, m3_, FFTW_FORWARD, c_.p, k2_, r0, r1); };
      run(x, world_, m, chunks, t);
    } else {
      Transpose x1 = diagonal(a_.p, b_.p, true);
      x1.stage1 = [this](int a, int e) { planes(i3f_, a_.p, sz(m2_) * sz(n3_), a, e); };
      if (mid_late) x1.stage2 = [this](int a, int e) { planes(i2f_, b_.p, sz(n2_) * sz(m3_), a, e); };
      run(x1, *row_, m, chunks, t);
      Transpose x2 = slab_like(b_.p, c_.p, l1_, k2_, m3_, sz(n2_) * sz(m3_), sz(n1_) * sz(m3_));
      if (!mid_late) x2.stage1 = [this](int a, int e) { planes(i2f_, b_.p, sz(n2_) * sz(m3_), a, e); };
      x2.stage2 = [this](int a, int e) { planes(k1f_, c_.p, sz(n1_) * sz(m3_), a, e); };
      run(x2, *col_, m, chunks, t);
    }
    t.total += since(t0);
  }

  /// Inverse transform C -> A, normalized.
  void inverse(Mode m, int chunks, Times& t) {
    const auto t0 = Clock::now();
    const bool mid_late = m == Mode::pipelined || m == Mode::then;
    const double scale = 1.0 / (static_cast<double>(n1_) * static_cast<double>(n2_) * static_cast<double>(n3_));
    if (!pencil_) {
      Transpose x = slab_like(c_.p, a_.p, k2_, l1_, n3_, sz(n1_) * sz(n3_), sz(n2_) * sz(n3_));
      x.stage1 = [this](int a, int e) { planes(k1b_, c_.p, sz(n1_) * sz(m3_), a, e); };
      x.stage2 = [this, scale](int a, int e) { planes(p2b_, a_.p, sz(n2_) * sz(n3_), a, e, scale); };
      x.stage1_cols = [this](int r0, int r1) { columns(n1_, m3_, FFTW_BACKWARD, c_.p, k2_, r0, r1); };
      x.stage2_cols = [this](int r0, int r1) { columns(n2_, n3_, FFTW_BACKWARD, a_.p, l1_, r0, r1); };
      x.post = [this, scale] { planes(i3b_, a_.p, sz(n2_) * sz(n3_), 0, l1_, scale); };
      run(x, world_, m, chunks, t);
    } else {
      Transpose x2 = slab_like(c_.p, b_.p, k2_, l1_, m3_, sz(n1_) * sz(m3_), sz(n2_) * sz(m3_));
      x2.stage1 = [this](int a, int e) { planes(k1b_, c_.p, sz(n1_) * sz(m3_), a, e); };
      if (mid_late) x2.stage2 = [this](int a, int e) { planes(i2b_, b_.p, sz(n2_) * sz(m3_), a, e); };
      if (mid_late) {
        x2.stage1_cols = [this](int r0, int r1) { columns(n1_, m3_, FFTW_BACKWARD, c_.p, k2_, r0, r1); };
        x2.stage2_cols = [this](int r0, int r1) { columns(n2_, m3_, FFTW_BACKWARD, b_.p, l1_, r0, r1); };
      }
      run(x2, *col_, m, chunks, t);
      Transpose x1 = diagonal(b_.p, a_.p, false);
      if (!mid_late) x1.stage1 = [this](int a, int e) { planes(i2b_, b_.p, sz(n2_) * sz(m3_), a, e); };
      x1.stage2 = [this, scale](int a, int e) { planes(i3b_, a_.p, sz(m2_) * sz(n3_), a, e, scale); };
      run(x1, *row_, m, chunks, t);
    }
    t.total += since(t0);
  }

 private:
  // Executes plan q on planes [a, e) of size `plane` starting at base, optionally scaling them.
  static void planes(const Plan& q, Cplx* base, size_t plane, int a, int e, double scale = 0) {
    for (int i = a; i < e; ++i) {
      Cplx* x = base + sz(i) * plane;
      fftw_execute_dft(q.p, fc(x), fc(x));
      if (scale != 0)
        for (size_t j = 0; j < plane; ++j) x[j] *= scale;
    }
  }

  // Strided 1D transforms of length n over columns [r0, r1) of each of
  // `count` planes [n][h] from base. Plans per (n, h, width, direction,
  // alignment), made at first use under a lock (FFTW's planner is not
  // thread-safe; executing is): the warm-up iteration makes them all.
  void columns(int n, int h, int dir, Cplx* base, int count, int r0, int r1) {
    if (r1 <= r0) return;
    const size_t plane = sz(n) * sz(h);
    const bool aligned = r0 % 4 == 0 && plane % 4 == 0;
    const fftw_plan q = column_plan(n, h, r1 - r0, dir, aligned);
    for (int i = 0; i < count; ++i) {
      Cplx* x = base + sz(i) * plane + sz(r0);
      fftw_execute_dft(q, fc(x), fc(x));
    }
  }
  fftw_plan column_plan(int n, int h, int w, int dir, bool aligned) {
    std::lock_guard<std::mutex> lk(col_mu_);
    Plan& q = col_plans_[std::make_tuple(n, h, w, dir, aligned)];
    if (q.p == nullptr) {
      FftwBuffer t(sz(n) * sz(h));
      int len[1] = {n};
      const unsigned fl = FFTW_ESTIMATE | (aligned ? 0u : unsigned{FFTW_UNALIGNED});
      q = Plan(fftw_plan_many_dft(1, len, w, fc(t.p), nullptr, h, 1, fc(t.p), nullptr, h, 1, dir, fl));
    }
    return q.p;
  }

  // Slab form: S[x][peer*ny + y][run] -> D[y][peer*nx + x][run] (x: sl source
  // rows, y: dl destination rows); src_plane / dst_plane = elements per row
  // of S / D.
  Transpose slab_like(Cplx* s, Cplx* d, int sl, int dl, int run, size_t src_plane, size_t dst_plane) const {
    Transpose x;
    x.src = s, x.dst = d, x.nx = sl, x.ny = dl, x.run = sz(run);
    x.sx = src_plane, x.sy = sz(run), x.sp = sz(dl) * sz(run);
    x.dx = sz(run), x.dy = dst_plane, x.dp = sz(sl) * sz(run);
    x.stage2_on_x = false;
    return x;
  }
  // Pencil row transpose, x = i1l survives. Forward: A[x][y][peer*M3 + j] ->
  // B[x][peer*M2 + y][j]; inverse: the other way round.
  Transpose diagonal(Cplx* s, Cplx* d, bool fwd) const {
    Transpose x;
    x.src = s, x.dst = d, x.nx = l1_, x.ny = m2_, x.run = sz(m3_);
    const size_t a_plane = sz(m2_) * sz(n3_), b_plane = sz(n2_) * sz(m3_);
    // (x, y, peer) strides into A and into B.
    const size_t ax = a_plane, ay = sz(n3_), ap = sz(m3_), bx = b_plane, by = sz(m3_), bp = sz(m2_) * sz(m3_);
    if (fwd)
      x.sx = ax, x.sy = ay, x.sp = ap, x.dx = bx, x.dy = by, x.dp = bp;
    else
      x.sx = bx, x.sy = by, x.sp = bp, x.dx = ax, x.dy = ay, x.dp = ap;
    x.stage2_on_x = true;
    return x;
  }

  struct Chunk {
    int x0, x1, y0, y1;
    int r0, r1;     // columns [r0, r1) of every run
    size_t offset;  // in send_/recv_ (complex elements)
    size_t count;   // complex elements per peer
  };

  // Packs (to the send buffer) or unpacks (from the receive buffer) the block of one peer of a chunk.
  void copy_block(const Transpose& t, const Chunk& c, int peer, bool packing) {
    const size_t w = sz(c.r1 - c.r0), r0 = sz(c.r0), run_bytes = w * sizeof(Cplx);
    Cplx* buf = (packing ? send_.p : recv_.p) + c.offset + sz(peer) * c.count;
    for (int x = c.x0; x < c.x1; ++x)
      for (int y = c.y0; y < c.y1; ++y, buf += w) {
        if (packing)
          std::memcpy(static_cast<void*>(buf), t.src + sz(x) * t.sx + sz(y) * t.sy + sz(peer) * t.sp + r0, run_bytes);
        else
          std::memcpy(static_cast<void*>(t.dst + sz(x) * t.dx + sz(y) * t.dy + sz(peer) * t.dp + r0), buf, run_bytes);
      }
  }

  // Waits for every request (also after a failure: blocks and chunk state
  // must outlive the collectives); rethrows the first error.
  static void wait_all(B& comm, std::vector<typename B::Request>& reqs) {
    std::exception_ptr first;
    for (auto& r : reqs) {
      try {
        comm.wait(r);
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }

  // Over ~80 lines: the transpose's modes share one chunk loop.
  void run(const Transpose& t, B& comm, Mode m, int chunks, Times& tm) {
    const int p = comm.size();
    const bool late = m == Mode::pipelined || m == Mode::then;
    // Pipelined: both stages run per chunk. Chunks along x when x survives
    // the transpose, else along the run (the columns both stages keep).
    const bool by_run = m == Mode::pipelined && !t.stage2_on_x && t.stage1_cols && t.stage2_cols;
    const bool s1_per_chunk = !late || by_run || (m == Mode::pipelined && t.stage2_on_x);
    std::vector<Chunk> cs;
    size_t off = 0;
    auto add = [&](int x0, int x1, int y0, int y1, int r0, int r1) {
      const size_t cnt = sz(x1 - x0) * sz(y1 - y0) * sz(r1 - r0);
      cs.push_back({x0, x1, y0, y1, r0, r1, off, cnt});
      off += cnt * sz(p);
    };
    const int run = static_cast<int>(t.run);
    if (m == Mode::blocking || m == Mode::comm) {
      add(0, t.nx, 0, t.ny, 0, run);
    } else if (by_run) {
      for (auto [a, e] : column_ranges(run, chunks)) add(0, t.nx, 0, t.ny, a, e);
    } else if (!late || t.stage2_on_x) {
      for (auto [a, e] : ranges(t.nx, chunks)) add(a, e, 0, t.ny, 0, run);
    } else {
      for (auto [a, e] : ranges(t.ny, chunks)) add(0, t.nx, a, e, 0, run);
    }
    // Stage 2 of one chunk (after its last block landed).
    auto stage2_of = [&t, by_run](const Chunk& c) {
      if (by_run)
        t.stage2_cols(c.r0, c.r1);
      else if (t.stage2)
        t.stage2_on_x ? t.stage2(c.x0, c.x1) : t.stage2(c.y0, c.y1);
    };
    auto stage1_of = [&t, by_run](const Chunk& c) {
      if (by_run)
        t.stage1_cols(c.r0, c.r1);
      else if (t.stage1)
        t.stage1(c.x0, c.x1);
    };
    const int rows2 = t.stage2_on_x ? t.nx : t.ny;
    if (m == Mode::comm) {  // the transpose's alltoall alone: no FFT, no packing (the floor's transfer part)
      const auto tc = Clock::now();
      auto r = comm.ialltoall(send_.p, recv_.p, cs[0].count);
      comm.wait(r);
      tm.wait += since(tc);
      tm.sent_bytes += cs[0].count * sz(p - 1) * sizeof(Cplx);
      return;
    }
    tm.sent_bytes += off / sz(p) * sz(p - 1) * sizeof(Cplx);
    if constexpr (B::kOpenMP) {
      if (m == Mode::openmp) {
        run_tasks(t, comm, cs, tm);
        return;
      }
    }
    {
      const auto tc = Clock::now();
      if (by_run && t.pre) t.pre();
      if (!s1_per_chunk && t.stage1) t.stage1(0, t.nx);
      tm.fft += since(tc);
    }
    // Arrivals per chunk (pipelined on the executor: the last block's node runs stage 2).
    auto arrived = std::make_unique<std::atomic<int>[]>(cs.size());
    for (size_t i = 0; i < cs.size(); ++i) arrived[i] = 0;
    std::vector<typename B::Request> reqs;
    reqs.reserve(cs.size());
    try {
      for (size_t i = 0; i < cs.size(); ++i) {
        const Chunk& c = cs[i];
        auto tc = Clock::now();
        if (s1_per_chunk) stage1_of(c);
        tm.fft += since(tc);
        tc = Clock::now();
        for (int peer = 0; peer < p; ++peer) copy_block(t, c, peer, true);
        tm.pack += since(tc);
        tc = Clock::now();
        bool posted = false;
        if constexpr (B::kExecutorWork) {
          if (m == Mode::pipelined) {
            std::atomic<int>* cnt = &arrived[i];
            reqs.push_back(comm.ialltoall_blocks(send_.p + c.offset, recv_.p + c.offset, c.count,
                                                 [this, &t, &c, &tm, cnt, p, stage2_of](int src) {
                                                   auto tn = Clock::now();
                                                   copy_block(t, c, src, false);
                                                   tm.node_pack_ns += ns_since(tn);
                                                   if (cnt->fetch_add(1, std::memory_order_acq_rel) + 1 != p) return;
                                                   tn = Clock::now();
                                                   stage2_of(c);
                                                   tm.node_fft_ns += ns_since(tn);
                                                 }));
            posted = true;
          }
        }
        if (!posted) reqs.push_back(comm.ialltoall(send_.p + c.offset, recv_.p + c.offset, c.count));
        if (m == Mode::blocking) comm.wait(reqs.back());
        tm.wait += since(tc);
      }
    } catch (...) {
      try {
        wait_all(comm, reqs);
      } catch (...) {
      }
      throw;
    }
    const auto tw = Clock::now();
    if (m == Mode::pipelined && B::kExecutorWork) {
      wait_all(comm, reqs);  // the graphs' compute nodes did the unpacking and the stage-2 FFTs
      tm.wait += since(tw);
    } else if (late) {
      // then (strata) / pipelined (MPI): whole chunks as their alltoalls complete.
      comm.on_each(reqs, [this, &t, &cs, &tm, p, stage2_of](int i) {
        const Chunk& c = cs[sz(i)];
        auto tn = Clock::now();
        for (int peer = 0; peer < p; ++peer) copy_block(t, c, peer, false);
        const std::int64_t pack_ns = ns_since(tn);
        tn = Clock::now();
        stage2_of(c);
        const std::int64_t fft_ns = ns_since(tn);
        if (B::kExecutorWork) {  // ran in a continuation
          tm.node_pack_ns += pack_ns;
          tm.node_fft_ns += fft_ns;
        } else {  // ran on this thread: count it as work, not as waiting
          tm.pack += static_cast<double>(pack_ns) * 1e-9;
          tm.fft += static_cast<double>(fft_ns) * 1e-9;
          tm.wait -= static_cast<double>(pack_ns + fft_ns) * 1e-9;
        }
      });
      tm.wait += since(tw);
    } else {
      for (size_t i = 0; i < cs.size(); ++i) {
        auto tc = Clock::now();
        if (m != Mode::blocking) comm.wait(reqs[i]);
        tm.wait += since(tc);
        tc = Clock::now();
        for (int peer = 0; peer < p; ++peer) copy_block(t, cs[i], peer, false);
        tm.pack += since(tc);
      }
      if (t.stage2) {
        const auto tc = Clock::now();
        t.stage2(0, rows2);
        tm.fft += since(tc);
      }
    }
    if (by_run && t.post) {
      const auto tc = Clock::now();
      t.post();
      tm.fft += since(tc);
    }
  }

  // Mode::openmp: the transpose as OpenMP tasks (see the file comment). Task
  // work is counted in node_* (like the continuations of Mode::then), the
  // time in the taskgroup as waiting.
  void run_tasks(const Transpose& t, B& comm, const std::vector<Chunk>& cs, Times& tm) {
#ifdef _OPENMP
    const int p = comm.size();
    const int n = static_cast<int>(cs.size());
    // Dependence objects: packed[i] (stage 1 + pack done), landed[i] (alltoall done), unpacked[i].
    std::vector<char> deps(3 * cs.size(), 0);
    [[maybe_unused]] char* packed = deps.data();  // used in depend clauses only
    [[maybe_unused]] char* landed = packed + n;
    [[maybe_unused]] char* unpacked = landed + n;
    const Transpose* tp = &t;
    const Chunk* cp = cs.data();
    Times* tmp = &tm;
    const int rows2 = t.stage2_on_x ? t.nx : t.ny;
    const auto tw = Clock::now();
#pragma omp parallel firstprivate(tp, cp, tmp, p, n, packed, landed, unpacked, rows2) shared(comm)
#pragma omp single
#pragma omp taskgroup  // waits for the detached alltoall tasks too (GCC 12: see strata/openmp.hpp)
    {
      for (int i = 0; i < n; ++i) {
#pragma omp task depend(out : packed[i]) firstprivate(i)
        {
          const Chunk& c = cp[i];
          auto tn = Clock::now();
          if (tp->stage1) tp->stage1(c.x0, c.x1);
          tmp->node_fft_ns += ns_since(tn);
          tn = Clock::now();
          for (int peer = 0; peer < p; ++peer) copy_block(*tp, c, peer, true);
          tmp->node_pack_ns += ns_since(tn);
        }
        comm.alltoall_task(send_.p + cp[i].offset, recv_.p + cp[i].offset, cp[i].count, &packed[i], &landed[i]);
#pragma omp task depend(in : landed[i]) depend(out : unpacked[i]) firstprivate(i)
        {
          const Chunk& c = cp[i];
          auto tn = Clock::now();
          for (int peer = 0; peer < p; ++peer) copy_block(*tp, c, peer, false);
          tmp->node_pack_ns += ns_since(tn);
          if (tp->stage2_on_x && tp->stage2) {
            tn = Clock::now();
            tp->stage2(c.x0, c.x1);
            tmp->node_fft_ns += ns_since(tn);
          }
        }
      }
      if (!t.stage2_on_x && t.stage2) {
        // Stage 2 over destination rows needs every chunk: after the unpacks, as n tasks.
#pragma omp taskwait
        for (const std::pair<int, int>& r : ranges(rows2, n)) {
          const int a = r.first, e = r.second;
#pragma omp task firstprivate(a, e)
          {
            const auto tn = Clock::now();
            tp->stage2(a, e);
            tmp->node_fft_ns += ns_since(tn);
          }
        }
      }
    }
    tm.wait += since(tw);
    comm.tasks_check();
#else
    (void)t, (void)comm, (void)cs, (void)tm;
    throw std::logic_error("fft3d: Mode::openmp without OpenMP");
#endif
  }

  B& world_;
  std::unique_ptr<B> row_, col_;
  bool pencil_;
  int r1_, r2_, n1_, n2_, n3_, l1_, m2_, k2_, m3_;
  size_t local_;
  FftwBuffer a_, b_, c_, send_, recv_;
  Plan p2f_, p2b_, k1f_, k1b_, i3f_, i3b_, i2f_, i2b_;
  std::mutex col_mu_;
  std::map<std::tuple<int, int, int, int, bool>, Plan> col_plans_;  // columns()
};

/// CPU time of this process (all its threads, getrusage) and the softirq +
/// irq time of the CPUs it may run on (/proc/stat, USER_HZ ticks): the
/// kernel's network work for a transfer lands there (docs/apps.md, "Floor").
struct CpuTimes {
  double user = 0, sys = 0, irq = 0;
  int cpus = 0;
};
inline CpuTimes cpu_times() {
  CpuTimes c;
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) == 0) {
    c.user = static_cast<double>(ru.ru_utime.tv_sec) + static_cast<double>(ru.ru_utime.tv_usec) * 1e-6;
    c.sys = static_cast<double>(ru.ru_stime.tv_sec) + static_cast<double>(ru.ru_stime.tv_usec) * 1e-6;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return c;
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (f == nullptr) return c;
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  char line[512];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    int cpu = -1;
    unsigned long long u = 0, ni = 0, sy = 0, idle = 0, iow = 0, irq = 0, sirq = 0;
    if (std::sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu", &cpu, &u, &ni, &sy, &idle, &iow, &irq, &sirq) ==
            8 &&
        cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &set)) {
      c.irq += static_cast<double>(irq + sirq) / hz;
      ++c.cpus;
    }
  }
  std::fclose(f);
  return c;
}

struct Errors {
  double vs_ref = -1, spot = 0, round_trip = 0, parseval = 0;
};

/// Coefficient (k1, k2, k3) of the forward DFT by direct summation over this
/// rank's input block x[i1l][i2l][i3] (planes from i1 = f1, rows from i2 = f2):
/// a partial sum, to be summed over ranks.
inline Cplx direct_dft(const Options& o, const std::vector<Cplx>& x, int f1, int l1, int f2, int m2, int k1, int k2,
                       int k3) {
  const double pi2 = -2.0 * 3.14159265358979323846;
  auto tw = [&](int n, int k) {
    std::vector<Cplx> w(sz(n));
    for (int i = 0; i < n; ++i) {
      const double ang = pi2 * static_cast<double>((static_cast<long long>(i) * k) % n) / n;
      w[sz(i)] = Cplx(std::cos(ang), std::sin(ang));
    }
    return w;
  };
  const auto w1 = tw(o.n1, k1), w2 = tw(o.n2, k2), w3 = tw(o.n3, k3);
  Cplx total(0, 0);
  size_t idx = 0;
  for (int i1l = 0; i1l < l1; ++i1l) {
    Cplx plane(0, 0);
    for (int i2l = 0; i2l < m2; ++i2l) {
      Cplx row(0, 0);
      for (int i3 = 0; i3 < o.n3; ++i3) row += w3[sz(i3)] * x[idx++];
      plane += w2[sz(f2 + i2l)] * row;
    }
    total += w1[sz(f1 + i1l)] * plane;
  }
  return total;
}

/// The whole program on backend @p b: returns the exit status.
// Over ~80 lines: the app's main as one sequence (grid, plans, runs, verification, report).
template <class Bk>
int main_with(Bk& b, const Options& o, const char* backend_name, const std::string& hosts) {
  const int me = b.rank(), p = b.size();
  int p1 = 0, p2 = 0;
  const std::string grid_err = choose_grid(o, p, p1, p2);
  if (!grid_err.empty()) {
    if (me == 0) std::fprintf(stderr, "fft3d: error: %s\n", grid_err.c_str());
    return 2;
  }
  if (!Bk::kExecutorWork && o.mode == "then") {
    if (me == 0)
      std::fprintf(stderr,
                   "fft3d: error: --mode then (Future::then continuations) exists on the strata backend only; "
                   "the MPI twin's pipelined mode handles whole chunks in MPI_Waitany order\n");
    return 2;
  }
  if (!Bk::kOpenMP && o.runtime == "openmp") {
    if (me == 0)
      std::fprintf(stderr,
                   "fft3d: error: --runtime openmp needs the strata backend built with strata::openmp "
                   "(strata/openmp.hpp; CMake found no OpenMP)\n");
    return 2;
  }
  std::vector<Mode> modes;
  if (o.runtime == "openmp") {
    modes.push_back(Mode::openmp);
  } else {
    if (o.mode == "blocking" || o.mode == "all") modes.push_back(Mode::blocking);
    if (o.mode == "overlap" || o.mode == "all") modes.push_back(Mode::overlap);
    if (o.mode == "pipelined" || o.mode == "all") modes.push_back(Mode::pipelined);
    if (o.mode == "then") modes.push_back(Mode::then);
    if (o.mode == "comm") modes.push_back(Mode::comm);
  }

  Fft3d<Bk> s(b, o, p1, p2);
  const int r1 = me / p2, r2 = me % p2;
  const int l1 = o.n1 / p1, m2 = o.n2 / p2, k2 = o.n2 / p1, m3 = o.n3 / p2;
  const long long npoints = static_cast<long long>(o.n1) * o.n2 * o.n3;
  if (me == 0) {
    char dec[160];
    if (o.decomp == "slab")
      std::snprintf(dec, sizeof dec, "slab decomposition (%d planes/rank)", l1);
    else
      std::snprintf(dec, sizeof dec, "pencil decomposition on a %dx%d process grid (%dx%dx%d points/rank)", p1, p2, l1,
                    m2, o.n3);
    std::printf("fft3d: grid %dx%dx%d, %d rank(s) on %s host(s), %s, %d chunk(s), %d iteration(s), backend %s\n", o.n1,
                o.n2, o.n3, p, hosts.c_str(), dec, o.chunks, o.iters, backend_name);
    std::printf("fft3d: %-9s %10s %8s %8s %12s %10s %9s   (one forward+inverse; total: slowest rank, parts: mean)\n",
                "mode", "total_ms", "fft_ms", "pack_ms", "comm_wait_ms", "in_comm_ms", "other_ms");
    std::fflush(stdout);
  }
  // Input block and, for --check on small grids, the full single-process reference.
  auto in_index = [&](int i1l, int i2l, int i3) { return (sz(i1l) * sz(m2) + sz(i2l)) * sz(o.n3) + sz(i3); };
  std::vector<Cplx> x0(s.local_size());
  for (int i1l = 0; i1l < l1; ++i1l)
    for (int i2l = 0; i2l < m2; ++i2l)
      for (int i3 = 0; i3 < o.n3; ++i3) x0[in_index(i1l, i2l, i3)] = input(o, r1 * l1 + i1l, r2 * m2 + i2l, i3);
  const bool with_ref = o.check && npoints <= o.ref_max;
  std::unique_ptr<FftwBuffer> ref;
  if (with_ref) {
    ref = std::make_unique<FftwBuffer>(static_cast<size_t>(npoints));
    for (int i1 = 0; i1 < o.n1; ++i1)
      for (int i2 = 0; i2 < o.n2; ++i2)
        for (int i3 = 0; i3 < o.n3; ++i3)
          ref->p[(sz(i1) * sz(o.n2) + sz(i2)) * sz(o.n3) + sz(i3)] = input(o, i1, i2, i3);
    Plan full(fftw_plan_dft_3d(o.n1, o.n2, o.n3, fc(ref->p), fc(ref->p), FFTW_FORWARD, FFTW_ESTIMATE));
    fftw_execute(full.p);
  }
  // Output C[k2l][k1][k3l] holds (k1, r1 K2 + k2l, r2 M3 + k3l).
  auto out_index = [&](int k2l, int k1, int k3l) { return (sz(k2l) * sz(o.n1) + sz(k1)) * sz(m3) + sz(k3l); };
  double in_norm = 0;
  for (const Cplx& v : x0) in_norm += std::norm(v);
  in_norm = b.sum(in_norm);

  bool all_ok = true;
  std::vector<std::string> check_lines;
  for (Mode m : modes) {
    Times t, warm;
    CpuTimes c0;
    for (int it = -1; it < o.iters; ++it) {  // iteration -1: warm-up (plans, caches), not timed
      if (it == 0) c0 = cpu_times();
      std::copy(x0.begin(), x0.end(), s.input());
      Times& tt = it < 0 ? warm : t;
      b.barrier();
      s.forward(m, o.chunks, tt);
      if (o.check && m != Mode::comm && it == o.iters - 1) {  // check the forward result (comm: data only)
        Errors e;
        double diff = 0, refn = 0, outn = 0;
        for (int k2l = 0; k2l < k2; ++k2l)
          for (int k1 = 0; k1 < o.n1; ++k1)
            for (int k3l = 0; k3l < m3; ++k3l) {
              const Cplx v = s.output()[out_index(k2l, k1, k3l)];
              outn += std::norm(v);
              if (with_ref) {
                const Cplx r = ref->p[(sz(k1) * sz(o.n2) + sz(r1 * k2 + k2l)) * sz(o.n3) + sz(r2 * m3 + k3l)];
                diff += std::norm(v - r);
                refn += std::norm(r);
              }
            }
        diff = b.sum(diff);
        refn = b.sum(refn);
        outn = b.sum(outn);
        if (with_ref) e.vs_ref = refn > 0 ? std::sqrt(diff / refn) : std::sqrt(diff);
        // Spot check: a few coefficients by direct summation (catches permuted
        // results, which the round trip and Parseval cannot see).
        const int spots[4][3] = {
            {0, 0, 0}, {1 % o.n1, 2 % o.n2, 3 % o.n3}, {o.n1 - 1, o.n2 / 2, 1 % o.n3}, {o.n1 / 3, o.n2 - 1, o.n3 / 2}};
        const double rms = std::sqrt(outn / static_cast<double>(npoints));
        for (const auto& k : spots) {
          const Cplx part = direct_dft(o, x0, r1 * l1, l1, r2 * m2, m2, k[0], k[1], k[2]);
          const Cplx want(b.sum(part.real()), b.sum(part.imag()));
          double d = 0;
          if (k[1] / k2 == r1 && k[2] / m3 == r2) {
            const Cplx got = s.output()[out_index(k[1] - r1 * k2, k[0], k[2] - r2 * m3)];
            d = std::abs(got - want) / (rms > 0 ? rms : 1.0);
          }
          e.spot = std::max(e.spot, b.max(d));
        }
        const double want = in_norm * static_cast<double>(npoints);
        e.parseval = want > 0 ? std::abs(outn - want) / want : std::abs(outn);
        s.inverse(m, o.chunks, tt);
        double rt = 0;
        for (size_t j = 0; j < x0.size(); ++j) rt += std::norm(s.input()[j] - x0[j]);
        rt = b.sum(rt);
        e.round_trip = in_norm > 0 ? std::sqrt(rt / in_norm) : std::sqrt(rt);
        const bool ok =
            (e.vs_ref < 0 || e.vs_ref < 1e-10) && e.spot < 1e-9 && e.round_trip < 1e-10 && e.parseval < 1e-10;
        all_ok = all_ok && ok;
        char line[256];
        if (with_ref)
          std::snprintf(line, sizeof line,
                        "fft3d: check %-9s: vs FFTW 3D %.1e, 4 direct-DFT coefficients %.1e, round trip %.1e, "
                        "Parseval %.1e: %s",
                        name(m), e.vs_ref, e.spot, e.round_trip, e.parseval, ok ? "OK" : "FAILED");
        else
          std::snprintf(line, sizeof line,
                        "fft3d: check %-9s: 4 direct-DFT coefficients %.1e, round trip %.1e, Parseval %.1e "
                        "(grid above --ref-max: no FFTW 3D reference): %s",
                        name(m), e.spot, e.round_trip, e.parseval, ok ? "OK" : "FAILED");
        check_lines.emplace_back(line);
      } else {
        s.inverse(m, o.chunks, tt);
      }
    }
    const CpuTimes c1 = cpu_times();
    const double n = o.iters;
    const double total = b.max(t.total) / n;
    const double user = b.sum(c1.user - c0.user) / p / n, sys = b.sum(c1.sys - c0.sys) / p / n;
    const double irq = b.sum(c1.irq - c0.irq) / p / n, sent = b.sum(static_cast<double>(t.sent_bytes)) / p / n;
    const double nodes = t.node_fft() + t.node_pack();
    const double fft = b.sum(t.fft + t.node_fft()) / p / n;
    const double pack = b.sum(t.pack + t.node_pack()) / p / n;
    const double wait = b.sum(t.wait) / p / n;
    const double in_comm = b.sum(nodes) / p / n;
    const double mean_total = b.sum(t.total) / p / n;
    if (me == 0) {
      std::printf("fft3d: %-9s %10.3f %8.3f %8.3f %12.3f %10.3f %9.3f", name(m), total * 1e3, fft * 1e3, pack * 1e3,
                  wait * 1e3, in_comm * 1e3, (mean_total - fft - pack - wait + in_comm) * 1e3);
      if (m == Mode::pipelined && Bk::kExecutorWork)
        std::printf("   (in_comm: unpack+FFT in the alltoalls' on_block compute nodes)");
      else if (m == Mode::then)
        std::printf("   (in_comm: unpack+FFT in Future::then continuations)");
      else if (m == Mode::openmp)
        std::printf("   (in_comm: FFT+pack+unpack in OpenMP tasks)");
      std::printf("\n");
      std::printf(
          "fft3d: cpu %-9s user_ms %.3f sys_ms %.3f irq_ms %.3f sent_mb %.3f   (per forward+inverse, mean "
          "over ranks: the process's CPU time, the softirq+irq time of its %d CPU(s), bytes to other ranks)\n",
          name(m), user * 1e3, sys * 1e3, irq * 1e3, sent / 1e6, c1.cpus);
      std::fflush(stdout);
    }
  }
  if (me == 0) {
    for (const auto& l : check_lines) std::printf("%s\n", l.c_str());
    if (o.check)
      std::printf("fft3d: check %s (limits: relative errors 1e-10, direct-DFT coefficients 1e-9 of the rms)\n",
                  all_ok ? "OK" : "FAILED");
    std::fflush(stdout);
  }
  return all_ok ? 0 : 1;
}

}  // namespace fft3d
