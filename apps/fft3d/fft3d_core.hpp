// fft3d: complex 3D FFT of an N1 x N2 x N3 grid (NAS FT style), slab
// decomposition with all-to-all transposes; FFTW for the local transforms.
// Written once against a small communication backend (strata or MPI; see
// fft3d_strata.cpp / fft3d_mpi.cpp):
//
//   struct Backend {
//     using Request = ...;
//     int rank() const; int size() const;
//     Request ialltoall(const Cplx* send, Cplx* recv, std::size_t count);  // count complex per peer
//     void wait(Request& r);
//     // runs fn(i) for every request as soon as it completes (in any thread), returns when all ran
//     void on_each(std::vector<Request>& rs, const std::function<void(int)>& fn);
//     double sum(double v); double max(double v);  // blocking allreduces
//     void barrier();
//   };
//
// Layouts (C order, last index fastest). P ranks, L1 = N1/P, L2 = N2/P:
//   A (x space):  rank r holds planes i1 in [r*L1, (r+1)*L1):   A[i1l][i2][i3]
//   B (k space):  rank r holds k2 in [r*L2, (r+1)*L2), all k1:  B[k2l][k1][k3]
// Forward: 2D FFT (i2, i3) per plane of A; transpose A -> B (alltoall, each
// block is a set of whole N3 rows); 1D FFT along k1 in B. The result stays
// transposed (like NAS FT). Inverse: the reverse, scaled by 1/(N1 N2 N3).
//
// Transpose modes (the work is split into --chunks pieces, one alltoall each):
//   blocking:  one alltoall, waited for at once;
//   overlap:   forward, chunk c = a range of A's planes: the 2D FFTs of chunk c+1
//              run while the alltoall of chunk c is in flight (inverse: chunk c =
//              a range of B's k2 rows, 1D FFTs of c+1 overlap alltoall c);
//   pipelined: all first-stage FFTs, then all chunk alltoalls in flight; each
//              chunk (forward: a range of B's k2 rows; inverse: a range of A's
//              planes) is unpacked and transformed as soon as it arrives, in a
//              continuation (strata: Future::then on the engine's arena; MPI:
//              MPI_Waitany order), so the transpose and the second-stage FFTs overlap.
#pragma once

#include <fftw3.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fft3d {

using Cplx = std::complex<double>;

struct Options {
  int n1 = 64, n2 = 64, n3 = 64;
  std::string mode = "all";  // blocking | overlap | pipelined | all
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

/// Parses the command line; returns an error message or "" (sets help on -h).
inline std::string parse(int argc, char** argv, Options& o, bool& help) {
  help = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= argc) throw std::string("missing value for ") + name;
      return argv[++i];
    };
    try {
      if (a == "--n" || a == "--grid") {
        const std::string v = value(a.c_str());
        if (!parse_grid(v, o)) return "bad grid '" + v + "' (use N or N1xN2xN3)";
      } else if (a == "--mode") {
        o.mode = value("--mode");
        if (o.mode != "blocking" && o.mode != "overlap" && o.mode != "pipelined" && o.mode != "all")
          return "--mode must be blocking, overlap, pipelined or all (got '" + o.mode + "')";
      } else if (a == "--chunks") {
        o.chunks = std::stoi(value("--chunks"));
      } else if (a == "--iters") {
        o.iters = std::stoi(value("--iters"));
      } else if (a == "--check") {
        o.check = true;
      } else if (a == "--ref-max") {
        o.ref_max = std::stoll(value("--ref-max"));
      } else if (a == "--measure") {
        o.measure = true;
      } else if (a == "--trace") {
        o.trace = value("--trace");
      } else if (a == "--backend") {
        o.backend = value("--backend");
      } else if (a == "-h" || a == "--help") {
        help = true;
      } else {
        return "unknown argument '" + a + "'";
      }
    } catch (const std::string& e) {
      return e;
    } catch (const std::exception&) {
      return "bad value for " + a;
    }
  }
  if (o.n1 < 1 || o.n2 < 1 || o.n3 < 1) return "grid dimensions must be >= 1";
  if (o.chunks < 1) return "--chunks must be >= 1";
  if (o.iters < 1) return "--iters must be >= 1";
  return "";
}

inline const char* usage() {
  return "usage: fft3d [--grid N | N1xN2xN3] [--mode blocking|overlap|pipelined|all] [--chunks K]\n"
         "             [--iters I] [--check] [--ref-max POINTS] [--measure] [--trace PREFIX] [--backend strata|mpi]\n"
         "  Forward + inverse complex 3D FFT, slab decomposition: the rank count must divide N1 and N2.\n"
         "  --check: compare with a single-process FFTW 3D transform (grids up to --ref-max points,\n"
         "  default 2^21), the round trip and Parseval's identity.\n";
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

struct FftwBuffer {
  Cplx* p = nullptr;
  explicit FftwBuffer(std::size_t n) : p(static_cast<Cplx*>(fftw_malloc(std::max<std::size_t>(n, 1) * sizeof(Cplx)))) {
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

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Times {
  double total = 0, fft = 0, pack = 0, wait = 0;
  std::atomic<std::int64_t> cont_ns{0};  // compute inside continuations (pipelined)
  void reset() {
    total = fft = pack = wait = 0;
    cont_ns = 0;
  }
};

enum class Mode { blocking, overlap, pipelined };
inline const char* name(Mode m) {
  return m == Mode::blocking ? "blocking" : m == Mode::overlap ? "overlap" : "pipelined";
}

/// One rank's slab of the distributed 3D FFT.
template <class B>
class Slab {
 public:
  Slab(B& b, const Options& o)
      : b_(b),
        p_(b.size()),
        me_(b.rank()),
        n1_(o.n1),
        n2_(o.n2),
        n3_(o.n3),
        l1_(o.n1 / p_),
        l2_(o.n2 / p_),
        local_(static_cast<std::size_t>(l1_) * static_cast<std::size_t>(n2_) * static_cast<std::size_t>(n3_)),
        a_(local_),
        b_buf_(local_),
        send_(local_),
        recv_(local_) {
    const unsigned flags = o.measure ? FFTW_MEASURE : FFTW_ESTIMATE;
    // One plane N2 x N3 of A (in place), one row block N1 x N3 of B along k1 (stride N3, N3 transforms).
    FftwBuffer plane(static_cast<std::size_t>(n2_) * static_cast<std::size_t>(n3_));
    FftwBuffer rows(static_cast<std::size_t>(n1_) * static_cast<std::size_t>(n3_));
    p2f_ = Plan(fftw_plan_dft_2d(n2_, n3_, fc(plane.p), fc(plane.p), FFTW_FORWARD, flags));
    p2b_ = Plan(fftw_plan_dft_2d(n2_, n3_, fc(plane.p), fc(plane.p), FFTW_BACKWARD, flags));
    int len[1] = {n1_};
    p1f_ = Plan(
        fftw_plan_many_dft(1, len, n3_, fc(rows.p), nullptr, n3_, 1, fc(rows.p), nullptr, n3_, 1, FFTW_FORWARD, flags));
    p1b_ = Plan(fftw_plan_many_dft(1, len, n3_, fc(rows.p), nullptr, n3_, 1, fc(rows.p), nullptr, n3_, 1, FFTW_BACKWARD,
                                   flags));
  }

  Cplx* a() { return a_.p; }
  Cplx* b() { return b_buf_.p; }
  std::size_t local_size() const { return local_; }
  int l1() const { return l1_; }
  int l2() const { return l2_; }

  /// Forward transform A -> B.
  void forward(Mode m, int chunks, Times& t) { transform(true, m, chunks, t); }
  /// Inverse transform B -> A (normalized).
  void inverse(Mode m, int chunks, Times& t) { transform(false, m, chunks, t); }

 private:
  Cplx* a_row(int i1l, int i2) {
    return a_.p + (static_cast<std::size_t>(i1l) * static_cast<std::size_t>(n2_) + static_cast<std::size_t>(i2)) *
                      static_cast<std::size_t>(n3_);
  }
  Cplx* b_row(int k2l, int k1) {
    return b_buf_.p + (static_cast<std::size_t>(k2l) * static_cast<std::size_t>(n1_) + static_cast<std::size_t>(k1)) *
                          static_cast<std::size_t>(n3_);
  }

  // First stage of the forward (2D FFTs of planes [a, e) of A) or inverse (1D FFTs of rows [a, e) of B).
  void stage1(bool fwd, int a, int e) {
    for (int i = a; i < e; ++i) {
      if (fwd)
        fftw_execute_dft(p2f_.p, fc(a_row(i, 0)), fc(a_row(i, 0)));
      else
        fftw_execute_dft(p1b_.p, fc(b_row(i, 0)), fc(b_row(i, 0)));
    }
  }
  // Second stage of the forward (1D FFTs of rows [a, e) of B) or inverse (2D FFTs of planes [a, e) of A, scaled).
  void stage2(bool fwd, int a, int e) {
    const double scale = 1.0 / (static_cast<double>(n1_) * static_cast<double>(n2_) * static_cast<double>(n3_));
    const std::size_t plane = static_cast<std::size_t>(n2_) * static_cast<std::size_t>(n3_);
    for (int i = a; i < e; ++i) {
      if (fwd) {
        fftw_execute_dft(p1f_.p, fc(b_row(i, 0)), fc(b_row(i, 0)));
      } else {
        Cplx* x = a_row(i, 0);
        fftw_execute_dft(p2b_.p, fc(x), fc(x));
        for (std::size_t j = 0; j < plane; ++j) x[j] *= scale;
      }
    }
  }

  // A chunk of a transpose: in the source layout, rows [s0, s1) of the
  // distributed-by-stage-1 dimension and rows [d0, d1) of the destination's
  // local dimension; each block to/from a peer is (s1-s0)*(d1-d0) rows of N3.
  struct Chunk {
    int s0, s1, d0, d1;
    std::size_t offset;  // in send_/recv_ (complex elements)
    std::size_t count;   // complex elements per peer
  };

  // Forward: source A[i1l][p*L2 + j2], destination B[j2][q*L1 + i1l].
  // Inverse: source B[k2l][p*L1 + i1l], destination A[i1l][q*L2 + k2l].
  void pack(bool fwd, const Chunk& c) {
    const auto n3 = static_cast<std::size_t>(n3_);
    for (int peer = 0; peer < p_; ++peer) {
      Cplx* out = send_.p + c.offset + static_cast<std::size_t>(peer) * c.count;
      for (int s = c.s0; s < c.s1; ++s)
        for (int d = c.d0; d < c.d1; ++d, out += n3) {
          const Cplx* in = fwd ? a_row(s, peer * l2_ + d) : b_row(s, peer * l1_ + d);
          std::memcpy(static_cast<void*>(out), in, n3 * sizeof(Cplx));
        }
    }
  }
  void unpack(bool fwd, const Chunk& c) {
    const auto n3 = static_cast<std::size_t>(n3_);
    for (int peer = 0; peer < p_; ++peer) {
      const Cplx* in = recv_.p + c.offset + static_cast<std::size_t>(peer) * c.count;
      for (int s = c.s0; s < c.s1; ++s)
        for (int d = c.d0; d < c.d1; ++d, in += n3) {
          Cplx* out = fwd ? b_row(d, peer * l1_ + s) : a_row(d, peer * l2_ + s);
          std::memcpy(static_cast<void*>(out), in, n3 * sizeof(Cplx));
        }
    }
  }

  void transform(bool fwd, Mode m, int chunks, Times& t) {
    const int src_rows = fwd ? l1_ : l2_;  // stage-1 dimension (local)
    const int dst_rows = fwd ? l2_ : l1_;  // stage-2 dimension (local at the destination)
    const auto n3 = static_cast<std::size_t>(n3_);
    std::vector<Chunk> cs;
    std::size_t off = 0;
    auto add = [&](int s0, int s1, int d0, int d1) {
      const std::size_t cnt = static_cast<std::size_t>(s1 - s0) * static_cast<std::size_t>(d1 - d0) * n3;
      cs.push_back({s0, s1, d0, d1, off, cnt});
      off += cnt * static_cast<std::size_t>(p_);
    };
    if (m == Mode::blocking) {
      add(0, src_rows, 0, dst_rows);
    } else if (m == Mode::overlap) {
      for (auto [s0, s1] : ranges(src_rows, chunks)) add(s0, s1, 0, dst_rows);
    } else {
      for (auto [d0, d1] : ranges(dst_rows, chunks)) add(0, src_rows, d0, d1);
    }
    const auto t0 = Clock::now();
    std::vector<typename B::Request> reqs;
    reqs.reserve(cs.size());
    if (m == Mode::pipelined) {
      auto tc = Clock::now();
      stage1(fwd, 0, src_rows);
      t.fft += since(tc);
    }
    for (const Chunk& c : cs) {
      auto tc = Clock::now();
      if (m != Mode::pipelined) stage1(fwd, c.s0, c.s1);
      t.fft += since(tc);
      tc = Clock::now();
      pack(fwd, c);
      t.pack += since(tc);
      tc = Clock::now();
      reqs.push_back(b_.ialltoall(send_.p + c.offset, recv_.p + c.offset, c.count));
      if (m == Mode::blocking) b_.wait(reqs.back());
      t.wait += since(tc);
    }
    if (m == Mode::pipelined) {
      const auto tw = Clock::now();
      b_.on_each(reqs, [this, &cs, &t, fwd](int i) {
        const auto tc = Clock::now();
        const Chunk& c = cs[static_cast<std::size_t>(i)];
        unpack(fwd, c);
        stage2(fwd, c.d0, c.d1);
        t.cont_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - tc).count();
      });
      t.wait += since(tw);
    } else {
      for (std::size_t i = 0; i < cs.size(); ++i) {
        auto tc = Clock::now();
        if (m != Mode::blocking) b_.wait(reqs[i]);
        t.wait += since(tc);
        tc = Clock::now();
        unpack(fwd, cs[i]);
        t.pack += since(tc);
      }
      const auto tc = Clock::now();
      stage2(fwd, 0, dst_rows);
      t.fft += since(tc);
    }
    t.total += since(t0);
  }

  B& b_;
  int p_, me_, n1_, n2_, n3_, l1_, l2_;
  std::size_t local_;
  FftwBuffer a_, b_buf_, send_, recv_;
  Plan p2f_, p2b_, p1f_, p1b_;
};

struct Errors {
  double vs_ref = -1, spot = 0, round_trip = 0, parseval = 0;
};

/// Coefficient (k1, k2, k3) of the forward DFT by direct summation over this
/// rank's input slab (planes [first, first + l1)): a partial sum, to be summed over ranks.
inline Cplx direct_dft(const Options& o, const std::vector<Cplx>& x, int first, int l1, int k1, int k2, int k3) {
  const double pi2 = -2.0 * 3.14159265358979323846;
  auto tw = [&](int n, int k) {
    std::vector<Cplx> w(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      const double ang = pi2 * static_cast<double>((static_cast<long long>(i) * k) % n) / n;
      w[static_cast<std::size_t>(i)] = Cplx(std::cos(ang), std::sin(ang));
    }
    return w;
  };
  const auto w1 = tw(o.n1, k1), w2 = tw(o.n2, k2), w3 = tw(o.n3, k3);
  Cplx total(0, 0);
  std::size_t idx = 0;
  for (int i1l = 0; i1l < l1; ++i1l) {
    Cplx plane(0, 0);
    for (int i2 = 0; i2 < o.n2; ++i2) {
      Cplx row(0, 0);
      for (int i3 = 0; i3 < o.n3; ++i3) row += w3[static_cast<std::size_t>(i3)] * x[idx++];
      plane += w2[static_cast<std::size_t>(i2)] * row;
    }
    total += w1[static_cast<std::size_t>(first + i1l)] * plane;
  }
  return total;
}

/// The whole program on backend @p b: returns the exit status.
template <class Bk>
int main_with(Bk& b, const Options& o, const char* backend_name, const std::string& hosts) {
  const int me = b.rank(), p = b.size();
  if (o.n1 % p != 0 || o.n2 % p != 0) {
    if (me == 0)
      std::fprintf(stderr,
                   "fft3d: error: slab decomposition needs the number of ranks (%d) to divide N1 (%d) and N2 (%d): "
                   "run with a rank count that divides both, or change --grid\n",
                   p, o.n1, o.n2);
    return 2;
  }
  std::vector<Mode> modes;
  if (o.mode == "blocking" || o.mode == "all") modes.push_back(Mode::blocking);
  if (o.mode == "overlap" || o.mode == "all") modes.push_back(Mode::overlap);
  if (o.mode == "pipelined" || o.mode == "all") modes.push_back(Mode::pipelined);

  Slab<Bk> s(b, o);
  const int l1 = s.l1(), l2 = s.l2();
  const long long npoints = static_cast<long long>(o.n1) * o.n2 * o.n3;
  if (me == 0) {
    std::printf(
        "fft3d: grid %dx%dx%d, %d rank(s) on %s host(s), slab decomposition (%d planes/rank), %d chunk(s), "
        "%d iteration(s), backend %s\n",
        o.n1, o.n2, o.n3, p, hosts.c_str(), l1, o.chunks, o.iters, backend_name);
    std::printf("fft3d: %-9s %12s %8s %8s %12s %9s   (one forward+inverse; total: slowest rank, parts: mean)\n", "mode",
                "total_ms", "fft_ms", "pack_ms", "comm_wait_ms", "other_ms");
    std::fflush(stdout);
  }
  // Input slab and, for --check on small grids, the full single-process reference.
  std::vector<Cplx> x0(s.local_size());
  for (int i1l = 0; i1l < l1; ++i1l)
    for (int i2 = 0; i2 < o.n2; ++i2)
      for (int i3 = 0; i3 < o.n3; ++i3)
        x0[(static_cast<std::size_t>(i1l) * static_cast<std::size_t>(o.n2) + static_cast<std::size_t>(i2)) *
               static_cast<std::size_t>(o.n3) +
           static_cast<std::size_t>(i3)] = input(o, me * l1 + i1l, i2, i3);
  const bool with_ref = o.check && npoints <= o.ref_max;
  std::unique_ptr<FftwBuffer> ref;
  if (with_ref) {
    ref = std::make_unique<FftwBuffer>(static_cast<std::size_t>(npoints));
    for (int i1 = 0; i1 < o.n1; ++i1)
      for (int i2 = 0; i2 < o.n2; ++i2)
        for (int i3 = 0; i3 < o.n3; ++i3)
          ref->p[(static_cast<std::size_t>(i1) * static_cast<std::size_t>(o.n2) + static_cast<std::size_t>(i2)) *
                     static_cast<std::size_t>(o.n3) +
                 static_cast<std::size_t>(i3)] = input(o, i1, i2, i3);
    Plan full(fftw_plan_dft_3d(o.n1, o.n2, o.n3, fc(ref->p), fc(ref->p), FFTW_FORWARD, FFTW_ESTIMATE));
    fftw_execute(full.p);
  }
  double in_norm = 0;
  for (const Cplx& v : x0) in_norm += std::norm(v);
  in_norm = b.sum(in_norm);

  bool all_ok = true;
  std::vector<std::string> check_lines;
  for (Mode m : modes) {
    Times t, warm;
    for (int it = -1; it < o.iters; ++it) {  // iteration -1: warm-up (plans, caches), not timed
      std::copy(x0.begin(), x0.end(), s.a());
      Times& tt = it < 0 ? warm : t;
      b.barrier();
      s.forward(m, o.chunks, tt);
      if (o.check && it == o.iters - 1) {  // check the forward result
        Errors e;
        double diff = 0, refn = 0, outn = 0;
        for (int k2l = 0; k2l < l2; ++k2l)
          for (int k1 = 0; k1 < o.n1; ++k1)
            for (int k3 = 0; k3 < o.n3; ++k3) {
              const Cplx v = s.b()[(static_cast<std::size_t>(k2l) * static_cast<std::size_t>(o.n1) +
                                    static_cast<std::size_t>(k1)) *
                                       static_cast<std::size_t>(o.n3) +
                                   static_cast<std::size_t>(k3)];
              outn += std::norm(v);
              if (with_ref) {
                const Cplx r = ref->p[(static_cast<std::size_t>(k1) * static_cast<std::size_t>(o.n2) +
                                       static_cast<std::size_t>(me * l2 + k2l)) *
                                          static_cast<std::size_t>(o.n3) +
                                      static_cast<std::size_t>(k3)];
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
          const Cplx part = direct_dft(o, x0, me * l1, l1, k[0], k[1], k[2]);
          const Cplx want(b.sum(part.real()), b.sum(part.imag()));
          double d = 0;
          if (k[1] / l2 == me) {
            const Cplx got = s.b()[(static_cast<std::size_t>(k[1] - me * l2) * static_cast<std::size_t>(o.n1) +
                                    static_cast<std::size_t>(k[0])) *
                                       static_cast<std::size_t>(o.n3) +
                                   static_cast<std::size_t>(k[2])];
            d = std::abs(got - want) / (rms > 0 ? rms : 1.0);
          }
          e.spot = std::max(e.spot, b.max(d));
        }
        const double want = in_norm * static_cast<double>(npoints);
        e.parseval = want > 0 ? std::abs(outn - want) / want : std::abs(outn);
        s.inverse(m, o.chunks, tt);
        double rt = 0;
        for (std::size_t j = 0; j < x0.size(); ++j) rt += std::norm(s.a()[j] - x0[j]);
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
    const double n = o.iters;
    const double total = b.max(t.total) / n;
    const double fft = b.sum(t.fft + static_cast<double>(t.cont_ns.load()) * 1e-9) / p / n;
    const double pack = b.sum(t.pack) / p / n;
    const double wait = b.sum(t.wait) / p / n;
    const double mean_total = b.sum(t.total) / p / n;
    if (me == 0) {
      std::printf("fft3d: %-9s %12.3f %8.3f %8.3f %12.3f %9.3f", name(m), total * 1e3, fft * 1e3, pack * 1e3,
                  wait * 1e3, (mean_total - fft - pack - wait) * 1e3);
      if (m == Mode::pipelined) std::printf("   (negative other: FFTs ran in continuations during the wait)");
      std::printf("\n");
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
