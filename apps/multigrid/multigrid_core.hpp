// multigrid: geometric multigrid V-cycles for the 3D Poisson problem
// -lap(u) = f on the unit cube, u = 0 on its boundary, cell-centred N^3 grid,
// decomposed into boxes (several per rank). Written once against a small
// communication backend (strata windows or MPI two-sided, see
// multigrid_strata.cpp / multigrid_mpi.cpp); a serial backend (one rank, one
// box) is the in-process reference of --check.
//
//   struct Backend {
//     int rank() const; int size() const;
//     void setup(double* recv, std::size_t doubles);   // collective: the ghost receive area
//     // One halo exchange of level l (parity alternates per exchange of a level):
//     void begin(int l, int parity, const std::vector<Msg>& sends, const std::vector<Msg>& recvs);
//     void wait_box(int l, int parity, int box, const std::vector<Msg>& recvs_of_box);
//     void end(int l, int parity, const std::vector<Msg>& sends, const std::vector<Msg>& recvs);
//     double sum(double); std::uint64_t sum_u64(std::uint64_t); double max(double);
//     void allgather(const double* send, std::size_t count, double* recv);  // rank order
//     void barrier();
//     void finish();                                    // collective: release the exchange resources
//   };
//
// Numerics (all cell-wise, so the solution does not depend on the
// decomposition, bit for bit): weighted Jacobi smoother (omega = 6/7), 7-point
// operator rediscretized on every level, restriction = mean of the 8
// children, interpolation e_f = (e_c + the 3 coarse face neighbours towards
// the fine cell) / 4 (exact for linear functions, needs face ghosts only),
// coarse solve = conjugate gradients on the whole coarsest grid, gathered on
// every rank and solved there identically. Only the printed residual norm
// goes through an allreduce.
// Over ~800 lines: the solver's header-only core (templates over the backend) reads as one unit.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../common/app_options.hpp"

namespace mg {

struct Options {
  int n = 64;      ///< global cells per dimension
  int boxes = 1;   ///< boxes per rank
  int levels = 0;  ///< 0 = deepest the decomposition allows (coarsest grid >= 4^3)
  int cycles = 8;  ///< V-cycles
  int nu1 = 2;     ///< pre-smoothing sweeps
  int nu2 = 2;     ///< post-smoothing sweeps
  bool check = false;
  std::string trace;
  std::string backend;
  std::string halo = "window";  ///< window | graph (strata only: CollOptions::compute)
};

inline std::string parse(int argc, char** argv, Options& o, std::string& help) {
  CLI::App app{
      "V-cycles for -lap(u) = f on an N^3 cell-centred grid split into (ranks x B) boxes; the ranks and "
      "the boxes per rank must split N into equal boxes whose sides halve L-1 times. --check compares "
      "with a single-rank solve done in this process.",
      "multigrid"};
  apps::add_common_options(app, o);
  app.add_option("--n", o.n, "global cells per dimension (default 64)")->check(strata::cli::integer_at_least(2));
  app.add_option("--boxes", o.boxes, "boxes per rank (default 1)")->check(strata::cli::positive_integer());
  app.add_option("--levels", o.levels, "multigrid levels, 0 = automatic (default)")->check(strata::cli::integer(0, 20));
  app.add_option("--cycles", o.cycles, "V-cycles (default 8)")->check(strata::cli::positive_integer());
  app.add_option_function<int>(
         "--nu", [&o](int v) { o.nu1 = o.nu2 = v; }, "pre- and post-smoothing sweeps (default 2)")
      ->check(strata::cli::integer(0, 50));
  app.add_option("--halo", o.halo,
                 "window (default: one-sided puts, the interior smoothed on the main thread meanwhile) or graph "
                 "(strata only: the exchange as one alltoallv whose graph runs the interior smoothing as a compute "
                 "node and unpacks each neighbour's faces as they land)")
      ->check(strata::cli::one_of({"window", "graph"}));
  return apps::parse_app(app, argc, argv, help);
}

/// Backends with exchange(l, parity, sends, recvs, interior, unpack): the
/// whole halo exchange of one smoothing step as one collective call whose
/// graph also runs interior() and unpack(msg) (--halo graph).
template <class B, class = void>
struct GraphHalo : std::false_type {};
template <class B>
struct GraphHalo<B, std::void_t<decltype(&B::exchange)>> : std::true_type {};

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// ------------------------------------------------------------------ layout

/// One message of a halo exchange (a face of a box).
struct Msg {
  int peer = -1;               ///< the other rank
  std::size_t count = 0;       ///< doubles
  double* local = nullptr;     ///< send: packed face; recv: this rank's receive slot
  std::size_t remote_off = 0;  ///< send: offset (doubles) of the slot in the peer's receive area
  int box = 0;                 ///< local box index at the receiver (tags)
  int face = 0;                ///< ghost face at the receiver (0 -x, 1 +x, 2 -y, 3 +y, 4 -z, 5 +z)
};

/// Decomposition: P ranks as a p0 x p1 x p2 grid, each with k0 x k1 x k2 boxes.
struct Layout {
  int n = 0, P = 1, k = 1, levels = 1;
  std::array<int, 3> p{1, 1, 1}, kb{1, 1, 1}, nb{1, 1, 1}, bs{1, 1, 1};
  /// Global box (x, y, z) -> owner rank and local index.
  [[nodiscard]] int owner(int x, int y, int z) const { return ((z / kb[2]) * p[1] + (y / kb[1])) * p[0] + (x / kb[0]); }
  [[nodiscard]] int local_index(int x, int y, int z) const {
    return ((z % kb[2]) * kb[1] + (y % kb[1])) * kb[0] + (x % kb[0]);
  }
  /// Global box coordinates of local box @p i of rank @p r.
  [[nodiscard]] std::array<int, 3> box_of(int r, int i) const {
    const int rx = r % p[0], ry = (r / p[0]) % p[1], rz = r / (p[0] * p[1]);
    const int ix = i % kb[0], iy = (i / kb[0]) % kb[1], iz = i / (kb[0] * kb[1]);
    return {rx * kb[0] + ix, ry * kb[1] + iy, rz * kb[2] + iz};
  }
};

inline std::vector<std::array<int, 3>> factor3(int v) {
  std::vector<std::array<int, 3>> out;
  for (int a = 1; a <= v; ++a)
    if (v % a == 0)
      for (int b = 1; b <= v / a; ++b)
        if ((v / a) % b == 0) out.push_back({a, b, v / a / b});
  return out;
}

/// The layout with the smallest box surface, or an error message. @p levels 0 = automatic.
inline std::string make_layout(int n, int P, int k, int levels, Layout& out) {
  int auto_levels = 1;
  while ((n >> auto_levels) >= 4 && (n % (1 << auto_levels)) == 0) ++auto_levels;  // coarsest >= 4
  bool found = false;
  long best = 0;
  for (int lv = levels > 0 ? levels : auto_levels; lv >= 1 && !found; --lv) {
    const int unit = 1 << (lv - 1);
    for (const auto& pf : factor3(P))
      for (const auto& kf : factor3(k)) {
        std::array<int, 3> bs{};
        bool ok = true;
        for (int d = 0; d < 3; ++d) {
          const int nbd = pf[static_cast<std::size_t>(d)] * kf[static_cast<std::size_t>(d)];
          if (n % nbd != 0 || (n / nbd) % unit != 0) ok = false;
          bs[static_cast<std::size_t>(d)] = nbd > 0 ? n / nbd : 0;
        }
        if (!ok) continue;
        const long surface =
            static_cast<long>(bs[0]) * bs[1] + static_cast<long>(bs[1]) * bs[2] + static_cast<long>(bs[0]) * bs[2];
        if (!found || surface < best) {
          found = true;
          best = surface;
          out.n = n;
          out.P = P;
          out.k = k;
          out.levels = lv;
          out.p = pf;
          out.kb = kf;
          for (int d = 0; d < 3; ++d)
            out.nb[static_cast<std::size_t>(d)] = pf[static_cast<std::size_t>(d)] * kf[static_cast<std::size_t>(d)];
          out.bs = bs;
        }
      }
    if (levels > 0) break;  // an explicit level count is not lowered
  }
  if (found) return "";
  return "the number of ranks (" + std::to_string(P) + ") times the boxes per rank (" + std::to_string(k) +
         ") does not divide the " + std::to_string(n) + "^3 grid into equal boxes" +
         (levels > 0
              ? " whose sides halve " + std::to_string(levels - 1) + " times (--levels " + std::to_string(levels) + ")"
              : std::string()) +
         ": run with a rank count that does, or change --n / --boxes / --levels";
}

// ------------------------------------------------------------------ data

/// One box on one level: cells [0,nx)x[0,ny)x[0,nz) plus one ghost layer.
struct Box {
  int nx = 0, ny = 0, nz = 0;
  int gx = 0, gy = 0, gz = 0;   ///< global index of cell (0,0,0) on this level
  std::vector<double> u, f, t;  ///< solution/correction, right-hand side, scratch (Jacobi output / residual)
  [[nodiscard]] std::size_t idx(int i, int j, int k) const {
    return (static_cast<std::size_t>(k + 1) * static_cast<std::size_t>(ny + 2) + static_cast<std::size_t>(j + 1)) *
               static_cast<std::size_t>(nx + 2) +
           static_cast<std::size_t>(i + 1);
  }
  [[nodiscard]] std::size_t cells() const {
    return static_cast<std::size_t>(nx + 2) * static_cast<std::size_t>(ny + 2) * static_cast<std::size_t>(nz + 2);
  }
};

struct Range {
  int x0, x1, y0, y1, z0, z1;
  [[nodiscard]] bool empty() const { return x0 >= x1 || y0 >= y1 || z0 >= z1; }
};

/// Cells of a box that need no ghost, and the shell that does (a partition).
inline Range interior(const Box& b) { return {1, b.nx - 1, 1, b.ny - 1, 1, b.nz - 1}; }
inline std::vector<Range> shell(const Box& b) {
  std::vector<Range> s;
  const int zm0 = 1, zm1 = std::max(1, b.nz - 1), ym0 = 1, ym1 = std::max(1, b.ny - 1);
  s.push_back({0, b.nx, 0, b.ny, 0, 1});
  if (b.nz > 1) s.push_back({0, b.nx, 0, b.ny, b.nz - 1, b.nz});
  s.push_back({0, b.nx, 0, 1, zm0, zm1});
  if (b.ny > 1) s.push_back({0, b.nx, b.ny - 1, b.ny, zm0, zm1});
  s.push_back({0, 1, ym0, ym1, zm0, zm1});
  if (b.nx > 1) s.push_back({b.nx - 1, b.nx, ym0, ym1, zm0, zm1});
  return s;
}

/// Exact-for-this-app deterministic right-hand side: a smooth mode plus a
/// hashed perturbation of the global cell index (every frequency present).
inline double rhs(int n, int i, int j, int k) {
  const double pi = 3.14159265358979323846;
  const double h = 1.0 / n;
  const double x = (i + 0.5) * h, y = (j + 0.5) * h, z = (k + 0.5) * h;
  std::uint64_t s = (static_cast<std::uint64_t>(k) * static_cast<std::uint64_t>(n) + static_cast<std::uint64_t>(j)) *
                        static_cast<std::uint64_t>(n) +
                    static_cast<std::uint64_t>(i) + 0x9E3779B97F4A7C15ull;
  s = (s ^ (s >> 30)) * 0xBF58476D1CE4E5B9ull;
  s = (s ^ (s >> 27)) * 0x94D049BB133111EBull;
  s ^= s >> 31;
  const double noise = static_cast<double>(s >> 11) * (1.0 / 9007199254740992.0) - 0.5;
  return 3 * pi * pi * std::sin(pi * x) * std::sin(pi * y) * std::sin(pi * z) + 10.0 * noise;
}

struct Times {
  double total = 0, compute = 0, overlap = 0, wait = 0, exchange = 0, collective = 0;
};

/// One trace event of the app (Chrome "X" event), for --trace.
struct Event {
  const char* name;
  std::uint64_t t0, t1;  // ns, steady clock
};
inline std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

// ------------------------------------------------------------------ solver

template <class B>
class Solver {
 public:
  Solver(B& b, const Layout& lay, const Options& o, bool tracing) : b_(b), lay_(lay), o_(o), tracing_(tracing) {
    me_ = b_.rank();
    const int L = lay_.levels;
    boxes_.assign(static_cast<std::size_t>(L), std::vector<Box>(static_cast<std::size_t>(lay_.k)));
    for (int l = 0; l < L; ++l)
      for (int i = 0; i < lay_.k; ++i) {
        Box& bx = box(l, i);
        const auto g = lay_.box_of(me_, i);
        bx.nx = lay_.bs[0] >> l;
        bx.ny = lay_.bs[1] >> l;
        bx.nz = lay_.bs[2] >> l;
        bx.gx = g[0] * bx.nx;
        bx.gy = g[1] * bx.ny;
        bx.gz = g[2] * bx.nz;
        bx.u.assign(bx.cells(), 0.0);
        bx.f.assign(bx.cells(), 0.0);
        bx.t.assign(bx.cells(), 0.0);
      }
    for (int i = 0; i < lay_.k; ++i) {
      Box& bx = box(0, i);
      for (int z = 0; z < bx.nz; ++z)
        for (int y = 0; y < bx.ny; ++y)
          for (int x = 0; x < bx.nx; ++x) bx.f[bx.idx(x, y, z)] = rhs(lay_.n, bx.gx + x, bx.gy + y, bx.gz + z);
    }
    build_messages();
    b_.setup(recv_.data(), recv_.size());
  }

  /// Runs the V-cycles; prints the residual per cycle on rank 0 when @p print.
  Times run(bool print, std::vector<double>* norms) {
    Times t;
    times_ = &t;
    b_.barrier();
    const auto t0 = Clock::now();
    double r0 = residual_norm();
    if (norms) norms->push_back(r0);
    if (print && me_ == 0) std::printf("multigrid: cycle %2d  residual %.6e\n", 0, r0);
    double prev = r0;
    for (int c = 1; c <= o_.cycles; ++c) {
      vcycle(0);
      const double r = residual_norm();
      if (norms) norms->push_back(r);
      if (print && me_ == 0) {
        std::printf("multigrid: cycle %2d  residual %.6e  factor %.4f\n", c, r, prev > 0 ? r / prev : 0.0);
        std::fflush(stdout);
      }
      prev = r;
    }
    t.total = since(t0);
    times_ = nullptr;
    return t;
  }

  /// Order-independent hash of the solution's bits (exact integer sum over the ranks).
  std::uint64_t hash() {
    std::uint64_t h = 0;
    for (int i = 0; i < lay_.k; ++i) {
      const Box& bx = box(0, i);
      for (int z = 0; z < bx.nz; ++z)
        for (int y = 0; y < bx.ny; ++y)
          for (int x = 0; x < bx.nx; ++x) {
            std::uint64_t bits = 0;
            const double v = bx.u[bx.idx(x, y, z)];
            std::memcpy(&bits, &v, sizeof bits);
            const auto g = static_cast<std::uint64_t>(((bx.gz + z) * lay_.n + (bx.gy + y)) * lay_.n + (bx.gx + x));
            std::uint64_t s = (g + 1) * 0x9E3779B97F4A7C15ull ^ bits;
            s = (s ^ (s >> 29)) * 0xBF58476D1CE4E5B9ull;
            h += s ^ (s >> 32);
          }
    }
    return b_.sum_u64(h);
  }

  /// Value of global cell (x, y, z) of the finest level (a serial solver owns every cell).
  [[nodiscard]] double at(int x, int y, int z) const {
    const Layout& L = lay_;
    const int bx = x / L.bs[0], by = y / L.bs[1], bz = z / L.bs[2];
    const Box& b = boxes_[0][static_cast<std::size_t>(L.local_index(bx, by, bz))];
    return b.u[b.idx(x - b.gx, y - b.gy, z - b.gz)];
  }

  /// Max |u - ref(x,y,z)| over this rank's cells.
  template <class Ref>
  double max_diff(const Ref& ref) const {
    double m = 0;
    for (int i = 0; i < lay_.k; ++i) {
      const Box& bx = boxes_[0][static_cast<std::size_t>(i)];
      for (int z = 0; z < bx.nz; ++z)
        for (int y = 0; y < bx.ny; ++y)
          for (int x = 0; x < bx.nx; ++x)
            m = std::max(m, std::fabs(bx.u[bx.idx(x, y, z)] - ref.at(bx.gx + x, bx.gy + y, bx.gz + z)));
    }
    return m;
  }

  double local_sum() const {
    double s = 0;
    for (int i = 0; i < lay_.k; ++i) {
      const Box& bx = boxes_[0][static_cast<std::size_t>(i)];
      for (int z = 0; z < bx.nz; ++z)
        for (int y = 0; y < bx.ny; ++y)
          for (int x = 0; x < bx.nx; ++x) s += bx.u[bx.idx(x, y, z)];
    }
    return s;
  }

  /// Appends this rank's app events to PREFIX.<rank>.json (the executor's trace file format).
  void write_trace(const std::string& prefix) const {
    std::ofstream f(prefix + "." + std::to_string(me_) + ".json", std::ios::app);
    for (const Event& e : events_)
      f << "{\"name\":\"" << e.name << "\",\"cat\":\"app\",\"ph\":\"X\",\"pid\":" << me_
        << ",\"tid\":1000,\"ts\":" << (e.t0 / 1000) << "." << (e.t0 % 1000 / 100)
        << ",\"dur\":" << ((e.t1 - e.t0) / 1000) << "." << ((e.t1 - e.t0) % 1000 / 100) << "}\n";
  }

  void finish() { b_.finish(); }

 private:
  Box& box(int l, int i) { return boxes_[static_cast<std::size_t>(l)][static_cast<std::size_t>(i)]; }

  struct Face {
    int kind = 0;   // 0 domain boundary, 1 local neighbour, 2 remote neighbour
    int nbox = -1;  // local: neighbour's local index
    int peer = -1;
    std::size_t count = 0;
  };
  struct LevelComm {
    std::vector<std::array<Face, 6>> faces;  // per local box
    std::vector<Msg> sends[2], recvs[2];     // per parity
    std::vector<std::vector<Msg>> recvs_of_box[2];
    int exchanges = 0;
  };

  static int opposite(int f) { return f ^ 1; }

  [[nodiscard]] std::size_t face_count(int l, int f) const {
    const std::size_t nx = static_cast<std::size_t>(lay_.bs[0] >> l), ny = static_cast<std::size_t>(lay_.bs[1] >> l),
                      nz = static_cast<std::size_t>(lay_.bs[2] >> l);
    return f < 2 ? ny * nz : (f < 4 ? nx * nz : nx * ny);
  }
  [[nodiscard]] std::size_t slot_size(int l) const {
    return std::max({face_count(l, 0), face_count(l, 2), face_count(l, 4)});
  }
  // Offset (doubles) of the receive slot (level, local box, face, parity): the same on every rank.
  [[nodiscard]] std::size_t slot_offset(int l, int i, int f, int par) const {
    std::size_t off = 0;
    for (int m = 0; m < l; ++m) off += static_cast<std::size_t>(lay_.k) * 12 * slot_size(m);
    return off + ((static_cast<std::size_t>(i) * 6 + static_cast<std::size_t>(f)) * 2 + static_cast<std::size_t>(par)) *
                     slot_size(l);
  }

  void build_messages() {
    const int L = lay_.levels;
    comm_.assign(static_cast<std::size_t>(L), LevelComm{});
    std::size_t total = 0;
    for (int l = 0; l < L; ++l) total += static_cast<std::size_t>(lay_.k) * 12 * slot_size(l);
    recv_.assign(std::max<std::size_t>(total, 1), 0.0);
    send_.assign(std::max<std::size_t>(total, 1), 0.0);
    for (int l = 0; l < L; ++l) {
      LevelComm& lc = comm_[static_cast<std::size_t>(l)];
      lc.faces.resize(static_cast<std::size_t>(lay_.k));
      for (int par = 0; par < 2; ++par) lc.recvs_of_box[par].resize(static_cast<std::size_t>(lay_.k));
      for (int i = 0; i < lay_.k; ++i) {
        const auto g = lay_.box_of(me_, i);
        for (int f = 0; f < 6; ++f) {
          std::array<int, 3> q = g;
          const int d = f / 2;
          q[static_cast<std::size_t>(d)] += (f % 2 == 0) ? -1 : 1;
          Face& fc = lc.faces[static_cast<std::size_t>(i)][static_cast<std::size_t>(f)];
          fc.count = face_count(l, f);
          if (q[static_cast<std::size_t>(d)] < 0 ||
              q[static_cast<std::size_t>(d)] >= lay_.nb[static_cast<std::size_t>(d)])
            continue;  // domain boundary
          const int owner = lay_.owner(q[0], q[1], q[2]);
          const int li = lay_.local_index(q[0], q[1], q[2]);
          if (owner == me_) {
            fc.kind = 1;
            fc.nbox = li;
            continue;
          }
          fc.kind = 2;
          fc.peer = owner;
          for (int par = 0; par < 2; ++par) {
            Msg s;  // my face f goes to the neighbour's ghost face opposite(f)
            s.peer = owner;
            s.count = fc.count;
            s.local = &send_[slot_offset(l, i, f, par)];
            s.remote_off = slot_offset(l, li, opposite(f), par);
            s.box = li;
            s.face = opposite(f);
            lc.sends[par].push_back(s);
            Msg r;  // the neighbour's face lands in my ghost face f
            r.peer = owner;
            r.count = fc.count;
            r.local = &recv_[slot_offset(l, i, f, par)];
            r.remote_off = slot_offset(l, i, f, par);
            r.box = i;
            r.face = f;
            lc.recvs[par].push_back(r);
            lc.recvs_of_box[par][static_cast<std::size_t>(i)].push_back(r);
          }
        }
      }
    }
  }

  // Copies face f (the interior layer) of @p src into @p dst (contiguous), or back into ghost face f of @p dst.
  template <bool ToGhost>
  static void face_copy(Box& bx, std::vector<double>& a, int f, double* buf) {
    const int d = f / 2;
    const bool hi = f % 2 == 1;
    std::size_t n = 0;
    if (d == 0) {
      const int x = ToGhost ? (hi ? bx.nx : -1) : (hi ? bx.nx - 1 : 0);
      for (int z = 0; z < bx.nz; ++z)
        for (int y = 0; y < bx.ny; ++y) {
          double& v = a[bx.idx(x, y, z)];
          if (ToGhost)
            v = buf[n++];
          else
            buf[n++] = v;
        }
    } else if (d == 1) {
      const int y = ToGhost ? (hi ? bx.ny : -1) : (hi ? bx.ny - 1 : 0);
      for (int z = 0; z < bx.nz; ++z) {
        double* row = &a[bx.idx(0, y, z)];
        if (ToGhost)
          std::memcpy(row, buf + n, static_cast<std::size_t>(bx.nx) * sizeof(double));
        else
          std::memcpy(buf + n, row, static_cast<std::size_t>(bx.nx) * sizeof(double));
        n += static_cast<std::size_t>(bx.nx);
      }
    } else {
      const int z = ToGhost ? (hi ? bx.nz : -1) : (hi ? bx.nz - 1 : 0);
      for (int y = 0; y < bx.ny; ++y) {
        double* row = &a[bx.idx(0, y, z)];
        if (ToGhost)
          std::memcpy(row, buf + n, static_cast<std::size_t>(bx.nx) * sizeof(double));
        else
          std::memcpy(buf + n, row, static_cast<std::size_t>(bx.nx) * sizeof(double));
        n += static_cast<std::size_t>(bx.nx);
      }
    }
  }

  // Dirichlet u = 0 on the domain face: ghost = -interior.
  static void boundary_ghost(Box& bx, std::vector<double>& a, int f) {
    const int d = f / 2;
    const bool hi = f % 2 == 1;
    if (d == 0) {
      const int x = hi ? bx.nx - 1 : 0, gx = hi ? bx.nx : -1;
      for (int z = 0; z < bx.nz; ++z)
        for (int y = 0; y < bx.ny; ++y) a[bx.idx(gx, y, z)] = -a[bx.idx(x, y, z)];
    } else if (d == 1) {
      const int y = hi ? bx.ny - 1 : 0, gy = hi ? bx.ny : -1;
      for (int z = 0; z < bx.nz; ++z)
        for (int x = 0; x < bx.nx; ++x) a[bx.idx(x, gy, z)] = -a[bx.idx(x, y, z)];
    } else {
      const int z = hi ? bx.nz - 1 : 0, gz = hi ? bx.nz : -1;
      for (int y = 0; y < bx.ny; ++y)
        for (int x = 0; x < bx.nx; ++x) a[bx.idx(x, y, gz)] = -a[bx.idx(x, y, z)];
    }
  }

  void record(const char* name, std::uint64_t t0) {
    if (tracing_) events_.push_back({name, t0, now_ns()});
  }

  // Halo exchange of u on level l overlapped with @p kernel(box, range): the
  // interior of every box while the faces are in flight, then box by box the
  // shell once that box's ghosts are in.
  template <class K>
  void overlapped(int l, K&& kernel) {
    LevelComm& lc = comm_[static_cast<std::size_t>(l)];
    const int par = lc.exchanges++ % 2;
    auto t = Clock::now();
    std::uint64_t ns = now_ns();
    // Pack and send the remote faces first (they travel during the rest).
    for (int i = 0; i < lay_.k; ++i)
      for (int f = 0; f < 6; ++f)
        if (lc.faces[static_cast<std::size_t>(i)][static_cast<std::size_t>(f)].kind == 2)
          face_copy<false>(box(l, i), box(l, i).u, f, &send_[slot_offset(l, i, f, par)]);
    const bool graph = GraphHalo<B>::value && o_.halo == "graph";  // the exchange is one call, below
    if (!graph) b_.begin(l, par, lc.sends[par], lc.recvs[par]);
    // Domain boundary and faces between boxes of this rank: local.
    for (int i = 0; i < lay_.k; ++i)
      for (int f = 0; f < 6; ++f) {
        const Face& fc = lc.faces[static_cast<std::size_t>(i)][static_cast<std::size_t>(f)];
        if (fc.kind == 0) {
          boundary_ghost(box(l, i), box(l, i).u, f);
        } else if (fc.kind == 1) {
          double* tmp = &send_[slot_offset(l, i, f, par)];
          face_copy<false>(box(l, fc.nbox), box(l, fc.nbox).u, opposite(f), tmp);
          face_copy<true>(box(l, i), box(l, i).u, f, tmp);
        }
      }
    times_->exchange += since(t);
    record("halo: pack, post, local faces", ns);
    if constexpr (GraphHalo<B>::value) {
      if (graph) {
        // One graph: the faces' transfers, the interior as a compute node
        // beside them, each neighbour's faces unpacked as they land.
        t = Clock::now();
        ns = now_ns();
        std::atomic<std::int64_t> inner_ns{0};
        b_.exchange(
            l, par, lc.sends[par], lc.recvs[par],
            [&] {
              const auto t0 = Clock::now();
              for (int i = 0; i < lay_.k; ++i) {
                const Range r = interior(box(l, i));
                if (!r.empty()) kernel(box(l, i), r);
              }
              inner_ns.store(static_cast<std::int64_t>(since(t0) * 1e9));
            },
            [&](const Msg& m) { face_copy<true>(box(l, m.box), box(l, m.box).u, m.face, m.local); });
        const double whole = since(t), inner = static_cast<double>(inner_ns.load()) * 1e-9;
        times_->compute += inner;
        if (!lc.sends[par].empty()) times_->overlap += inner;
        times_->wait += std::max(0.0, whole - inner);
        record("halo + interior (one graph)", ns);
        t = Clock::now();
        ns = now_ns();
        for (int i = 0; i < lay_.k; ++i)
          for (const Range& r : shell(box(l, i)))
            if (!r.empty()) kernel(box(l, i), r);
        times_->compute += since(t);
        record("shell", ns);
        return;
      }
    }
    // Interior of every box while the remote faces are in flight.
    t = Clock::now();
    ns = now_ns();
    for (int i = 0; i < lay_.k; ++i) {
      const Range r = interior(box(l, i));
      if (!r.empty()) kernel(box(l, i), r);
    }
    const double inner = since(t);
    times_->compute += inner;
    if (!lc.sends[par].empty()) times_->overlap += inner;
    record("interior (overlapped)", ns);
    // Box by box: wait for its ghosts, unpack, the shell.
    for (int i = 0; i < lay_.k; ++i) {
      const auto& rv = lc.recvs_of_box[par][static_cast<std::size_t>(i)];
      if (!rv.empty()) {
        t = Clock::now();
        ns = now_ns();
        b_.wait_box(l, par, i, rv);
        times_->wait += since(t);
        record("halo: wait", ns);
        t = Clock::now();
        for (const Msg& m : rv) face_copy<true>(box(l, i), box(l, i).u, m.face, m.local);
        times_->exchange += since(t);
      }
      t = Clock::now();
      ns = now_ns();
      for (const Range& r : shell(box(l, i)))
        if (!r.empty()) kernel(box(l, i), r);
      times_->compute += since(t);
      record("shell", ns);
    }
    t = Clock::now();
    ns = now_ns();
    b_.end(l, par, lc.sends[par], lc.recvs[par]);
    times_->wait += since(t);
    record("halo: end", ns);
  }

  [[nodiscard]] double h2(int l) const {
    const double h = static_cast<double>(1 << l) / lay_.n;
    return h * h;
  }

  // Weighted Jacobi: t = (1 - w) u + w/6 (h^2 f + sum of the 6 neighbours), then swap(u, t).
  void smooth(int l) {
    const double w = 6.0 / 7.0, w6 = w / 6.0, hh = h2(l);
    overlapped(l, [&](Box& bx, const Range& r) {
      const std::size_t sx = 1, sy = static_cast<std::size_t>(bx.nx + 2), sz = sy * static_cast<std::size_t>(bx.ny + 2);
      for (int z = r.z0; z < r.z1; ++z)
        for (int y = r.y0; y < r.y1; ++y) {
          const std::size_t c0 = bx.idx(r.x0, y, z);
          const double* u = bx.u.data();
          const double* f = bx.f.data();
          double* t = bx.t.data();
          for (std::size_t c = c0; c < c0 + static_cast<std::size_t>(r.x1 - r.x0); ++c)
            t[c] = (1.0 - w) * u[c] +
                   w6 * (hh * f[c] + (((((u[c - sx] + u[c + sx]) + u[c - sy]) + u[c + sy]) + u[c - sz]) + u[c + sz]));
        }
    });
    for (int i = 0; i < lay_.k; ++i) std::swap(box(l, i).u, box(l, i).t);
  }

  // t = f - A u.
  void residual(int l) {
    const double ih2 = 1.0 / h2(l);
    overlapped(l, [&](Box& bx, const Range& r) {
      const std::size_t sx = 1, sy = static_cast<std::size_t>(bx.nx + 2), sz = sy * static_cast<std::size_t>(bx.ny + 2);
      for (int z = r.z0; z < r.z1; ++z)
        for (int y = r.y0; y < r.y1; ++y) {
          const std::size_t c0 = bx.idx(r.x0, y, z);
          const double* u = bx.u.data();
          const double* f = bx.f.data();
          double* t = bx.t.data();
          for (std::size_t c = c0; c < c0 + static_cast<std::size_t>(r.x1 - r.x0); ++c)
            t[c] = f[c] -
                   (6.0 * u[c] - (((((u[c - sx] + u[c + sx]) + u[c - sy]) + u[c + sy]) + u[c - sz]) + u[c + sz])) * ih2;
        }
    });
  }

  // f_{l+1} = mean of the 8 children of t_l; u_{l+1} = 0.
  void restrict_to(int l) {
    const auto t = Clock::now();
    const std::uint64_t ns = now_ns();
    for (int i = 0; i < lay_.k; ++i) {
      Box& fb = box(l, i);
      Box& cb = box(l + 1, i);
      std::fill(cb.u.begin(), cb.u.end(), 0.0);
      for (int z = 0; z < cb.nz; ++z)
        for (int y = 0; y < cb.ny; ++y)
          for (int x = 0; x < cb.nx; ++x) {
            const int X = 2 * x, Y = 2 * y, Z = 2 * z;
            const double s = ((fb.t[fb.idx(X, Y, Z)] + fb.t[fb.idx(X + 1, Y, Z)]) +
                              (fb.t[fb.idx(X, Y + 1, Z)] + fb.t[fb.idx(X + 1, Y + 1, Z)])) +
                             ((fb.t[fb.idx(X, Y, Z + 1)] + fb.t[fb.idx(X + 1, Y, Z + 1)]) +
                              (fb.t[fb.idx(X, Y + 1, Z + 1)] + fb.t[fb.idx(X + 1, Y + 1, Z + 1)]));
            cb.f[cb.idx(x, y, z)] = 0.125 * s;
          }
    }
    times_->compute += since(t);
    record("restrict", ns);
  }

  // u_l += P u_{l+1}: each fine child gets (e_c + its 3 coarse face neighbours towards it) / 4.
  void interpolate_from(int l) {
    overlapped(l + 1, [&](Box& cb, const Range& r) {
      const int i = static_cast<int>(&cb - &boxes_[static_cast<std::size_t>(l + 1)][0]);
      Box& fb = box(l, i);
      for (int z = r.z0; z < r.z1; ++z)
        for (int y = r.y0; y < r.y1; ++y)
          for (int x = r.x0; x < r.x1; ++x) {
            const double e = cb.u[cb.idx(x, y, z)];
            for (int c = 0; c < 8; ++c) {
              const int ax = c & 1, ay = (c >> 1) & 1, az = c >> 2;
              const double v = ((e + cb.u[cb.idx(x + (ax ? 1 : -1), y, z)]) + cb.u[cb.idx(x, y + (ay ? 1 : -1), z)]) +
                               cb.u[cb.idx(x, y, z + (az ? 1 : -1))];
              fb.u[fb.idx(2 * x + ax, 2 * y + ay, 2 * z + az)] += 0.25 * v;
            }
          }
    });
  }

  // The coarsest level: every rank gathers its f, solves the whole grid with CG (identically), keeps its part.
  void coarse_solve() {
    const int l = lay_.levels - 1;
    auto t = Clock::now();
    std::uint64_t ns = now_ns();
    const Box& b0 = box(l, 0);
    const std::size_t per_box =
        static_cast<std::size_t>(b0.nx) * static_cast<std::size_t>(b0.ny) * static_cast<std::size_t>(b0.nz);
    const std::size_t per_rank = per_box * static_cast<std::size_t>(lay_.k);
    std::vector<double> mine(per_rank), all(per_rank * static_cast<std::size_t>(lay_.P));
    std::size_t n = 0;
    for (int i = 0; i < lay_.k; ++i) {
      const Box& bx = box(l, i);
      for (int z = 0; z < bx.nz; ++z)
        for (int y = 0; y < bx.ny; ++y)
          for (int x = 0; x < bx.nx; ++x) mine[n++] = bx.f[bx.idx(x, y, z)];
    }
    b_.allgather(mine.data(), per_rank, all.data());
    times_->collective += since(t);
    record("coarse: allgather", ns);
    t = Clock::now();
    ns = now_ns();
    const int N = lay_.n >> l;
    const auto NN = static_cast<std::size_t>(N);
    std::vector<double> F(NN * NN * NN), U(NN * NN * NN, 0.0);
    for (int r = 0; r < lay_.P; ++r)
      for (int i = 0; i < lay_.k; ++i) {
        const auto g = lay_.box_of(r, i);
        const std::size_t base =
            (static_cast<std::size_t>(r) * static_cast<std::size_t>(lay_.k) + static_cast<std::size_t>(i)) * per_box;
        std::size_t m = 0;
        for (int z = 0; z < b0.nz; ++z)
          for (int y = 0; y < b0.ny; ++y)
            for (int x = 0; x < b0.nx; ++x) {
              const std::size_t X = static_cast<std::size_t>(g[0] * b0.nx + x),
                                Y = static_cast<std::size_t>(g[1] * b0.ny + y),
                                Z = static_cast<std::size_t>(g[2] * b0.nz + z);
              F[(Z * NN + Y) * NN + X] = all[base + m++];
            }
      }
    cg(N, h2(l), F, U);
    for (int i = 0; i < lay_.k; ++i) {
      Box& bx = box(l, i);
      for (int z = 0; z < bx.nz; ++z)
        for (int y = 0; y < bx.ny; ++y)
          for (int x = 0; x < bx.nx; ++x)
            bx.u[bx.idx(x, y, z)] =
                U[(static_cast<std::size_t>(bx.gz + z) * NN + static_cast<std::size_t>(bx.gy + y)) * NN +
                  static_cast<std::size_t>(bx.gx + x)];
    }
    times_->compute += since(t);
    record("coarse: CG", ns);
  }

  // Conjugate gradients for A U = F on an N^3 grid (Dirichlet 0), to a relative residual of 1e-13.
  static void cg(int N, double hh, const std::vector<double>& F, std::vector<double>& U) {
    const auto NN = static_cast<std::size_t>(N);
    const std::size_t cells = NN * NN * NN;
    auto apply = [&](const std::vector<double>& v, std::vector<double>& out) {
      for (std::size_t z = 0; z < NN; ++z)
        for (std::size_t y = 0; y < NN; ++y)
          for (std::size_t x = 0; x < NN; ++x) {
            const std::size_t c = (z * NN + y) * NN + x;
            const double xm = x > 0 ? v[c - 1] : -v[c], xp = x + 1 < NN ? v[c + 1] : -v[c];
            const double ym = y > 0 ? v[c - NN] : -v[c], yp = y + 1 < NN ? v[c + NN] : -v[c];
            const double zm = z > 0 ? v[c - NN * NN] : -v[c], zp = z + 1 < NN ? v[c + NN * NN] : -v[c];
            out[c] = (6.0 * v[c] - (((((xm + xp) + ym) + yp) + zm) + zp)) / hh;
          }
    };
    std::vector<double> r = F, p = F, q(cells);
    std::fill(U.begin(), U.end(), 0.0);
    auto dot = [&](const std::vector<double>& a, const std::vector<double>& c) {
      double s = 0;
      for (std::size_t i = 0; i < cells; ++i) s += a[i] * c[i];
      return s;
    };
    double rr = dot(r, r);
    const double stop = rr * 1e-26;
    for (int it = 0; it < 1000 && rr > stop && rr > 0; ++it) {
      apply(p, q);
      const double alpha = rr / dot(p, q);
      for (std::size_t i = 0; i < cells; ++i) {
        U[i] += alpha * p[i];
        r[i] -= alpha * q[i];
      }
      const double rr2 = dot(r, r);
      const double beta = rr2 / rr;
      for (std::size_t i = 0; i < cells; ++i) p[i] = r[i] + beta * p[i];
      rr = rr2;
    }
  }

  void vcycle(int l) {
    if (l == lay_.levels - 1) {
      coarse_solve();
      return;
    }
    for (int s = 0; s < o_.nu1; ++s) smooth(l);
    residual(l);
    restrict_to(l);
    vcycle(l + 1);
    interpolate_from(l);
    for (int s = 0; s < o_.nu2; ++s) smooth(l);
  }

  // ||f - A u||_2 on the finest level (scaled by h^3/2: a grid-independent L2 norm).
  double residual_norm() {
    residual(0);
    const auto t = Clock::now();
    double s = 0;
    for (int i = 0; i < lay_.k; ++i) {
      const Box& bx = box(0, i);
      for (int z = 0; z < bx.nz; ++z)
        for (int y = 0; y < bx.ny; ++y)
          for (int x = 0; x < bx.nx; ++x) {
            const double v = bx.t[bx.idx(x, y, z)];
            s += v * v;
          }
    }
    times_->compute += since(t);
    const auto tc = Clock::now();
    const std::uint64_t ns = now_ns();
    const double all = b_.sum(s);
    times_->collective += since(tc);
    record("residual norm: allreduce", ns);
    const double h = 1.0 / lay_.n;
    return std::sqrt(all * h * h * h);
  }

  B& b_;
  Layout lay_;
  Options o_;
  bool tracing_ = false;
  int me_ = 0;
  std::vector<std::vector<Box>> boxes_;  // [level][local box]
  std::vector<LevelComm> comm_;
  std::vector<double> recv_, send_;
  Times* times_ = nullptr;
  std::vector<Event> events_;
};

/// The one-rank, one-box backend of the --check reference.
class SerialBackend {
 public:
  static int rank() { return 0; }
  static int size() { return 1; }
  static void setup(double*, std::size_t) {}
  static void begin(int, int, const std::vector<Msg>&, const std::vector<Msg>&) {}
  static void wait_box(int, int, int, const std::vector<Msg>&) {}
  static void end(int, int, const std::vector<Msg>&, const std::vector<Msg>&) {}
  static double sum(double v) { return v; }
  static std::uint64_t sum_u64(std::uint64_t v) { return v; }
  static double max(double v) { return v; }
  static void allgather(const double* s, std::size_t n, double* r) { std::memcpy(r, s, n * sizeof(double)); }
  static void barrier() {}
  static void finish() {}
};

/// The whole program on backend @p b: returns the exit status.
template <class B>
int main_with(B& b, const Options& o, const char* backend_name, const std::string& hosts) {
  const int me = b.rank(), P = b.size();
  Layout lay;
  const std::string err = make_layout(o.n, P, o.boxes, o.levels, lay);
  if (!err.empty()) {
    if (me == 0) std::fprintf(stderr, "multigrid: error: %s\n", err.c_str());
    return 2;
  }
  if (o.halo == "graph" && !GraphHalo<B>::value) {
    if (me == 0)
      std::fprintf(stderr,
                   "multigrid: error: --halo graph needs the strata backend (CollOptions::compute); backend %s "
                   "has only --halo window\n",
                   backend_name);
    return 2;
  }
  if (me == 0) {
    std::printf(
        "multigrid: n=%d ranks=%d hosts=%s boxes/rank=%d (%dx%dx%d boxes of %dx%dx%d, ranks %dx%dx%d) levels=%d "
        "(coarsest %d^3) cycles=%d nu=%d/%d backend=%s halo=%s\n",
        o.n, P, hosts.c_str(), lay.k, lay.nb[0], lay.nb[1], lay.nb[2], lay.bs[0], lay.bs[1], lay.bs[2], lay.p[0],
        lay.p[1], lay.p[2], lay.levels, o.n >> (lay.levels - 1), o.cycles, o.nu1, o.nu2, backend_name, o.halo.c_str());
    std::fflush(stdout);
  }
  Solver<B> s(b, lay, o, !o.trace.empty());
  std::vector<double> norms;
  const Times t = s.run(true, &norms);
  // total: slowest rank; the parts: mean over ranks.
  const double total = b.max(t.total), compute = b.sum(t.compute) / P, overlap = b.sum(t.overlap) / P,
               wait = b.sum(t.wait) / P, exch = b.sum(t.exchange) / P, coll = b.sum(t.collective) / P;
  const std::uint64_t h = s.hash();
  const double sum = b.sum(s.local_sum());
  // Steady convergence: every cycle after the first reduces the residual by at least 2x.
  bool steady = true;
  for (std::size_t c = 2; c < norms.size(); ++c)
    if (!(norms[c] < 0.5 * norms[c - 1]) && norms[c] > 1e-13 * norms[0]) steady = false;
  if (me == 0) {
    std::printf(
        "multigrid: time  total %.2f ms  compute %.2f ms (of which %.2f ms overlapped with halo exchange)  "
        "halo wait %.2f ms  halo pack/unpack/post %.2f ms  allreduce+gather %.2f ms  (total: slowest rank; "
        "parts: mean over ranks)\n",
        total * 1e3, compute * 1e3, overlap * 1e3, wait * 1e3, exch * 1e3, coll * 1e3);
    const double factor = norms.size() > 1 ? std::pow(norms.back() / norms.front(), 1.0 / (norms.size() - 1)) : 0;
    std::printf("multigrid: mean reduction factor per V-cycle %.4f (%s)\n", factor, steady ? "steady" : "NOT steady");
    std::printf("multigrid: solution hash %016llx sum %.17g\n", static_cast<unsigned long long>(h), sum);
    std::fflush(stdout);
  }
  int rc = steady ? 0 : 1;
  if (o.check) {
    // The single-rank, single-box solve in this process: the same numbers, bit for bit.
    SerialBackend sb;
    Layout one;
    const std::string e1 = make_layout(o.n, 1, 1, lay.levels, one);
    double diff = 1e300;
    if (e1.empty()) {
      Options so = o;
      so.levels = lay.levels;
      so.halo = "window";
      Solver<SerialBackend> ref(sb, one, so, false);
      (void)ref.run(false, nullptr);
      diff = s.max_diff(ref);
    }
    diff = b.max(diff);
    const bool ok = diff <= 1e-12;
    if (me == 0) {
      std::printf("multigrid: check: max |u - u(1 rank, 1 box)| = %.3e (%s): %s\n", diff,
                  diff == 0 ? "bitwise identical" : "tolerance 1e-12", ok ? "OK" : "FAILED");
      std::fflush(stdout);
    }
    if (!ok) rc = 1;
  }
  if (!o.trace.empty()) s.write_trace(o.trace);
  s.finish();
  return rc;
}

}  // namespace mg
