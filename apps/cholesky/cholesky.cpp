// cholesky: tiled single-precision Cholesky factorization A = L L^T on StarPU,
// the matrix N x N in nblocks x nblocks tiles of b x b (column-major), 2D
// block-cyclic over an X x Y process grid (X process columns, Y process rows;
// tile (m, n) lives on rank (n mod X) + (m mod Y) X, the distribution of
// StarPU's mpi_cholesky example, whose grid it prints as "dblocksx x
// dblocksy"). Owner computes: every rank submits the tasks of its own tiles
// (potrf, trsm, syrk, gemm), and the panel tiles travel as strata broadcasts
// that are StarPU tasks themselves (strata/starpu.hpp):
//   - potrf(k,k) done: (k,k) down the column communicator of process column
//     k mod X (to the trsm owners);
//   - trsm(m,k) done: (m,k) along the row communicator of process row m mod Y
//     (to the gemm owners of row m), then from the rank in column m mod X of
//     that row down its column communicator (to the gemm owners of column m).
//   The last tile row's column broadcasts are left out: no rank below needs them.
// Every broadcast is tagged (CollOptions::tag = m mod tags, the tile row): the
// tiles of one tile row become final in the order k = 0, 1, ..., m, so each
// tag's calls are in dependency order, while the calls of different tags
// start in whatever order their tiles are ready on each rank. One
// strata::starpu::Queue per (communicator, tag) keeps each tag's calls in
// program order without ordering the tags against each other. A receiving
// task depends on the broadcast through the tile's StarPU handle (the
// broadcast holds it in STARPU_W until it completed).
//
//   strata-run -n 2 -- cholesky -size 960 -nblocks 4 --check
//   strata-run -n 4 --hosts 2 -- cholesky -size 960 -nblocks 6 --check      (2x2 grid)
//   strata-run -n 2 --hosts 2 --net 100mbit -- cholesky -size 3840 -nblocks 12
//   ... --compute-only: the same tasks without any communication (the floor)
#include <cblas.h>
#include <dirent.h>
#include <starpu.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "strata/detail/env.hpp"
#include "strata/starpu.hpp"
#include "strata/strata.hpp"

namespace {

constexpr const char* kProg = "cholesky";
constexpr double kCheckLimit = 1e-5;

struct Options {
  long size = 1280;  // the defaults of mpi_cholesky
  long nblocks = 4;
  long dblockx = -1;  // process columns; -1: the peer's rule
  long dblocky = -1;  // process rows
  long rows = -1;     // -p P: process rows (dblocky), columns = ranks / P
  bool noprio = false;
  bool check = false;
  bool compute_only = false;
  bool syrk = false;
  long tags = 16;
  std::string matrix = "peer";
};

const char* kHelp =
    "cholesky: tiled single-precision Cholesky (StarPU tasks, strata broadcasts of the panel tiles)\n"
    "usage: cholesky [options]   (under strata-run; one rank without it)\n"
    "  -size N, --size N         matrix order (default 1280); nblocks must divide it\n"
    "  -nblocks T, --nblocks T   tiles per dimension (default 4): tiles of N/T x N/T\n"
    "  --grid XxY                process grid as mpi_cholesky prints it: X process columns (dblocksx),\n"
    "                            Y process rows (dblocksy); X*Y = ranks. Default: mpi_cholesky's rule\n"
    "                            (2 ranks: 2x1, 4 ranks: 2x2)\n"
    "  -dblockx X, -dblocky Y    the same as mpi_cholesky's options\n"
    "  -p P                      P process rows (dblocky), ranks/P process columns\n"
    "  -no-prio, --no-prio       every task at the default priority (mpi_cholesky's -no-prio)\n"
    "  --check, -check           residual ||A - L L^T||_F / ||A||_F, must be below 1e-5 (exit 1 otherwise)\n"
    "  --compute-only            the same tasks without any communication (remote tiles hold stand-in\n"
    "                            values): the compute part of the floor; no --check\n"
    "  --syrk                    diagonal updates with ssyrk (default sgemm on the whole tile, like\n"
    "                            mpi_cholesky)\n"
    "  --matrix peer|random      peer (default): mpi_cholesky's 1/(1+i+j) + N delta_ij; random: a symmetric\n"
    "                            uniform [-0.5, 0.5) matrix + (sqrt(N)+1) I (off-diagonals matter: the\n"
    "                            sensitive check)\n"
    "  --tags T                  tags per communicator, 1..16 (default 16): broadcasts of tile row m use\n"
    "                            tag m mod T\n"
    "environment: STARPU_NCPU (set to 1 when unset: one worker per rank), STARPU_SCHED as usual;\n"
    "STRATA_NET_RATE_BPS (set by strata-run --net) for the link-time bound\n";

bool to_long(const char* s, long& out) {
  if (s == nullptr || *s == '\0') return false;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s, &end, 10);
  if (errno != 0 || *end != '\0') return false;
  out = v;
  return true;
}

// Returns "" or an error message; sets help when -h/--help was given.
std::string parse(int argc, char** argv, Options& o, bool& help) {
  help = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() > 2 && a[0] == '-' && a[1] != '-') a.insert(0, "-");  // -size == --size
    auto value = [&](long& out, long lo, long hi) -> std::string {
      if (i + 1 >= argc) return a + " needs a value";
      long v = 0;
      if (!to_long(argv[i + 1], v) || v < lo || v > hi)
        return "bad value '" + std::string(argv[i + 1]) + "' for " + a + " (an integer in [" + std::to_string(lo) +
               ", " + std::to_string(hi) + "])";
      out = v;
      ++i;
      return "";
    };
    std::string err;
    if (a == "-h" || a == "--help") {
      help = true;
    } else if (a == "--size") {
      err = value(o.size, 1, 1L << 20);
    } else if (a == "--nblocks") {
      err = value(o.nblocks, 1, 1L << 14);
    } else if (a == "--dblockx") {
      err = value(o.dblockx, 1, 4096);
    } else if (a == "--dblocky") {
      err = value(o.dblocky, 1, 4096);
    } else if (a == "-p") {
      err = value(o.rows, 1, 4096);
    } else if (a == "--tags") {
      err = value(o.tags, 1, 16);
    } else if (a == "--grid") {
      if (i + 1 >= argc) return "--grid needs a value XxY";
      const std::string g = argv[++i];
      const auto x = g.find('x');
      long gx = 0, gy = 0;
      if (x == std::string::npos || !to_long(g.substr(0, x).c_str(), gx) || !to_long(g.substr(x + 1).c_str(), gy) ||
          gx < 1 || gy < 1)
        return "bad --grid '" + g + "' (use XxY, e.g. 2x1)";
      o.dblockx = gx;
      o.dblocky = gy;
    } else if (a == "--matrix") {
      if (i + 1 >= argc) return "--matrix needs a value (peer or random)";
      o.matrix = argv[++i];
      if (o.matrix != "peer" && o.matrix != "random") return "bad --matrix '" + o.matrix + "' (peer or random)";
    } else if (a == "--no-prio") {
      o.noprio = true;
    } else if (a == "--check") {
      o.check = true;
    } else if (a == "--compute-only") {
      o.compute_only = true;
    } else if (a == "--syrk") {
      o.syrk = true;
    } else {
      return "unknown argument '" + std::string(argv[i]) + "'";
    }
    if (!err.empty()) return err;
  }
  if (o.size % o.nblocks != 0)
    return "nblocks (" + std::to_string(o.nblocks) + ") does not divide size (" + std::to_string(o.size) + ")";
  if (o.compute_only && o.check) return "--compute-only computes with stand-in tiles: it cannot be --check'ed";
  if ((o.dblockx > 0) != (o.dblocky > 0)) return "give both -dblockx and -dblocky (or --grid XxY)";
  if (o.rows > 0 && o.dblockx > 0) return "give either -p or --grid / -dblockx -dblocky";
  return "";
}

// --- the matrix -----------------------------------------------------------

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Element (r, c) of A, exactly as factored (float).
float element(const Options& o, long r, long c) {
  if (o.matrix == "peer") {
    const float v = 1.0f / (1.0f + static_cast<float>(r + c));
    return r == c ? v + static_cast<float>(o.size) : v;
  }
  const long lo = std::min(r, c), hi = std::max(r, c);
  const std::uint64_t h = mix(static_cast<std::uint64_t>(lo) * 0x100000001b3ULL + static_cast<std::uint64_t>(hi));
  const float u = static_cast<float>(static_cast<double>(h >> 40) / static_cast<double>(1ULL << 24)) - 0.5f;
  return r == c ? u + std::sqrt(static_cast<float>(o.size)) + 1.0f : u;
}

// --- kernels ----------------------------------------------------------------

struct Ctx {
  int b = 0;
  bool syrk = false;
  bool guard = true;                  // count non-positive pivots (not with stand-in tiles)
  std::atomic<long long> busy_us{0};  // kernel time on this rank
  std::atomic<int> bad_pivots{0};
};

float* tile_ptr(void* buffer) { return reinterpret_cast<float*>(static_cast<starpu_matrix_interface*>(buffer)->ptr); }

struct Busy {
  Ctx* c;
  double t0 = starpu_timing_now();
  explicit Busy(Ctx* ctx) : c(ctx) {}
  Busy(const Busy&) = delete;
  Busy& operator=(const Busy&) = delete;
  ~Busy() { c->busy_us += static_cast<long long>(starpu_timing_now() - t0); }
};

// potrf of the diagonal tile, column by column with sscal + ssyr: the kernel of
// mpi_cholesky built without MKL (Debian's), which calls no LAPACK.
void potrf_cpu(void** buffers, void* arg) {
  auto* c = static_cast<Ctx*>(arg);
  Busy busy(c);
  float* a = tile_ptr(buffers[0]);
  const int b = c->b;
  for (int z = 0; z < b; ++z) {
    const float d = a[z + z * b];
    if (c->guard && !(d > 0.0f)) ++c->bad_pivots;
    const float l = std::sqrt(d);
    a[z + z * b] = l;
    const int rest = b - z - 1;
    if (rest == 0) continue;
    cblas_sscal(rest, 1.0f / l, &a[(z + 1) + z * b], 1);
    cblas_ssyr(CblasColMajor, CblasLower, rest, -1.0f, &a[(z + 1) + z * b], 1, &a[(z + 1) + (z + 1) * b], b);
  }
}

// A(m,k) <- A(m,k) L(k,k)^-T
void trsm_cpu(void** buffers, void* arg) {
  auto* c = static_cast<Ctx*>(arg);
  Busy busy(c);
  const int b = c->b;
  cblas_strsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, b, b, 1.0f, tile_ptr(buffers[0]), b,
              tile_ptr(buffers[1]), b);
}

// A(m,m) <- A(m,m) - L(m,k) L(m,k)^T: sgemm on the whole tile (mpi_cholesky's
// kernel for the diagonal too) or ssyrk on its lower half (--syrk).
void syrk_cpu(void** buffers, void* arg) {
  auto* c = static_cast<Ctx*>(arg);
  Busy busy(c);
  const int b = c->b;
  const float* l = tile_ptr(buffers[0]);
  float* a = tile_ptr(buffers[1]);
  if (c->syrk)
    cblas_ssyrk(CblasColMajor, CblasLower, CblasNoTrans, b, b, -1.0f, l, b, 1.0f, a, b);
  else
    cblas_sgemm(CblasColMajor, CblasNoTrans, CblasTrans, b, b, b, -1.0f, l, b, l, b, 1.0f, a, b);
}

// A(m,n) <- A(m,n) - L(m,k) L(n,k)^T
void gemm_cpu(void** buffers, void* arg) {
  auto* c = static_cast<Ctx*>(arg);
  Busy busy(c);
  const int b = c->b;
  cblas_sgemm(CblasColMajor, CblasNoTrans, CblasTrans, b, b, b, -1.0f, tile_ptr(buffers[0]), b, tile_ptr(buffers[1]), b,
              1.0f, tile_ptr(buffers[2]), b);
}

starpu_codelet make_codelet(const char* name, starpu_cpu_func_t fn, std::vector<starpu_data_access_mode> modes) {
  starpu_codelet cl;
  starpu_codelet_init(&cl);
  cl.where = STARPU_CPU;
  cl.cpu_funcs[0] = fn;
  cl.nbuffers = static_cast<int>(modes.size());
  for (std::size_t i = 0; i < modes.size(); ++i) cl.modes[i] = modes[i];
  cl.name = name;
  return cl;
}

// --- the grid -------------------------------------------------------------

struct Grid {
  int X = 1;  // process columns (dblocksx)
  int Y = 1;  // process rows (dblocksy)
  [[nodiscard]] int rank_of(int row, int col) const { return col + row * X; }
  [[nodiscard]] int owner(int m, int n) const { return rank_of(m % Y, n % X); }
};

// mpi_cholesky's default: the largest factor f <= sqrt(ranks) that divides
// them gives ranks/f process columns and f process rows.
Grid default_grid(int ranks) {
  Grid g{ranks, 1};
  for (int f = static_cast<int>(std::sqrt(static_cast<double>(ranks))); f > 1; --f)
    if (ranks % f == 0) return Grid{ranks / f, f};
  return g;
}

double potrf_flops(double n) { return n * n * n / 3.0 + n * n / 2.0 + n / 6.0; }  // mpi_cholesky's count

// Bytes that cross between hosts with this broadcast pattern (independent of
// the local rank): per host, sent and received.
struct Traffic {
  long broadcasts = 0;
  double bytes_cross = 0;
  std::vector<double> sent, recv;
};

Traffic traffic(const Grid& g, int nt, double tile_bytes, const std::vector<int>& host_of, int hosts) {
  Traffic t;
  t.sent.assign(static_cast<std::size_t>(hosts), 0.0);
  t.recv.assign(static_cast<std::size_t>(hosts), 0.0);
  auto bcast = [&](const std::vector<int>& members, int root) {
    ++t.broadcasts;
    std::set<int> other;
    const int hr = host_of[static_cast<std::size_t>(root)];
    for (int r : members)
      if (host_of[static_cast<std::size_t>(r)] != hr) other.insert(host_of[static_cast<std::size_t>(r)]);
    for (int h : other) {
      t.sent[static_cast<std::size_t>(hr)] += tile_bytes;
      t.recv[static_cast<std::size_t>(h)] += tile_bytes;
      t.bytes_cross += tile_bytes;
    }
  };
  auto column = [&](int col) {
    std::vector<int> v;
    v.reserve(static_cast<std::size_t>(g.Y));
    for (int r = 0; r < g.Y; ++r) v.push_back(g.rank_of(r, col));
    return v;
  };
  auto row = [&](int rw) {
    std::vector<int> v;
    v.reserve(static_cast<std::size_t>(g.X));
    for (int c = 0; c < g.X; ++c) v.push_back(g.rank_of(rw, c));
    return v;
  };
  for (int k = 0; k < nt; ++k) {
    if (g.Y > 1 && k + 1 < nt) bcast(column(k % g.X), g.owner(k, k));
    for (int m = k + 1; m < nt; ++m) {
      if (g.X > 1) bcast(row(m % g.Y), g.owner(m, k));
      if (g.Y > 1 && m + 1 < nt) bcast(column(m % g.X), g.rank_of(m % g.Y, m % g.X));
    }
  }
  return t;
}

// CPU time of this process's threads from /proc/self/task/*/schedstat (ns on
// the CPU): StarPU's CPU workers (named "CPU <n>") and every other thread
// (the main thread, strata's progress server and executor, StarPU's helpers).
struct ThreadCpu {
  double worker_ms = 0;
  double other_ms = 0;
};

std::string binding() {
  const char* nobind = std::getenv("STARPU_WORKERS_NOBIND");
  if (nobind != nullptr && std::atoi(nobind) != 0) return "none (STARPU_WORKERS_NOBIND: the rank's CPUs)";
  if (const char* c = std::getenv("STARPU_WORKERS_CPUID")) return std::string("STARPU_WORKERS_CPUID=") + c;
  if (const char* c = std::getenv("STARPU_WORKERS_COREID")) return std::string("STARPU_WORKERS_COREID=") + c;
  return "StarPU's default";
}

ThreadCpu thread_cpu() {
  ThreadCpu t;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return t;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string base = std::string("/proc/self/task/") + e->d_name;
    char name[64] = {0};
    unsigned long long ns = 0;
    if (FILE* f = std::fopen((base + "/comm").c_str(), "r")) {
      if (std::fgets(name, sizeof name, f) == nullptr) name[0] = '\0';
      std::fclose(f);
    }
    if (FILE* f = std::fopen((base + "/schedstat").c_str(), "r")) {
      if (std::fscanf(f, "%llu", &ns) != 1) ns = 0;
      std::fclose(f);
    }
    (std::strncmp(name, "CPU ", 4) == 0 ? t.worker_ms : t.other_ms) += static_cast<double>(ns) / 1e6;
  }
  closedir(d);
  return t;
}

int run(strata::Engine& engine, const Options& o) {
  const int me = engine.rank();
  const int np = engine.size();
  const bool root = me == 0;
  Grid g;
  if (o.dblockx > 0) {
    g = Grid{static_cast<int>(o.dblockx), static_cast<int>(o.dblocky)};
  } else if (o.rows > 0) {
    if (np % o.rows != 0) {
      if (root)
        std::fprintf(stderr, "%s: error: -p %ld does not divide the number of ranks (%d) (see %s --help)\n", kProg,
                     o.rows, np, kProg);
      return 2;
    }
    g = Grid{np / static_cast<int>(o.rows), static_cast<int>(o.rows)};
  } else {
    g = default_grid(np);
  }
  if (g.X * g.Y != np) {
    if (root)
      std::fprintf(stderr, "%s: error: the grid %dx%d has %d ranks but the job has %d (see %s --help)\n", kProg, g.X,
                   g.Y, g.X * g.Y, np, kProg);
    return 2;
  }
  const int nt = static_cast<int>(o.nblocks);
  const int b = static_cast<int>(o.size / o.nblocks);
  const std::size_t tile_elems = static_cast<std::size_t>(b) * static_cast<std::size_t>(b);
  const int my_row = me / g.X, my_col = me % g.X;
  const bool comm = !o.compute_only;

  // Row and column communicators with tags (collective, before any task).
  const int ntags = static_cast<int>(o.tags);
  strata::Communicator rows = engine.world().split(my_row, my_col, ntags);  // my process row, index = column
  strata::Communicator cols = engine.world().split(my_col, my_row, ntags);  // my process column, index = row
  std::vector<strata::starpu::Queue> row_q, col_q;                          // one queue per (communicator, tag)
  for (int t = 0; t < ntags; ++t) {
    row_q.emplace_back(rows);
    col_q.emplace_back(cols);
  }

  // Tiles this rank holds: its own, and the panel tiles it receives.
  auto idx = [nt](int m, int n) { return static_cast<std::size_t>(m) * static_cast<std::size_t>(nt) + n; };
  auto present = [&](int m, int n) {
    if (g.owner(m, n) == me) return true;
    if (m == n) return n % g.X == my_col && m + 1 < nt;                                     // (k,k) down its column
    return (g.X > 1 && m % g.Y == my_row) || (g.Y > 1 && m % g.X == my_col && m + 1 < nt);  // row, column
  };
  std::vector<float*> tile(static_cast<std::size_t>(nt) * nt, nullptr);
  std::vector<starpu_data_handle_t> h(tile.size(), nullptr);
  const float sq = std::sqrt(static_cast<float>(o.size));
  for (int m = 0; m < nt; ++m)
    for (int n = 0; n <= m; ++n) {
      if (!present(m, n)) continue;
      void* p = nullptr;
      if (posix_memalign(&p, 4096, tile_elems * sizeof(float)) != 0) throw std::bad_alloc();
      float* t = static_cast<float*>(p);
      tile[idx(m, n)] = t;
      const bool mine = g.owner(m, n) == me;
      for (int c = 0; c < b; ++c)
        for (int r = 0; r < b; ++r) {
          const long gr = static_cast<long>(m) * b + r, gc = static_cast<long>(n) * b + c;
          float v = 0.0f;
          if (mine)
            v = element(o, gr, gc);
          else if (!comm)  // stand-in for a received L tile: about L's magnitudes, no zeros, no NaN
            v = (gr == gc ? sq : 0.0f) + 1.0f / ((1.0f + static_cast<float>(gr + gc)) * sq);
          t[static_cast<std::size_t>(r) + static_cast<std::size_t>(c) * b] = v;
        }
      starpu_matrix_data_register(&h[idx(m, n)], STARPU_MAIN_RAM, reinterpret_cast<uintptr_t>(t),
                                  static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(b),
                                  static_cast<std::uint32_t>(b), sizeof(float));
    }

  Ctx ctx;
  ctx.b = b;
  ctx.syrk = o.syrk;
  ctx.guard = comm;
  const auto commute = static_cast<starpu_data_access_mode>(STARPU_RW | STARPU_COMMUTE);
  starpu_codelet cl_potrf = make_codelet("potrf", &potrf_cpu, {STARPU_RW});
  starpu_codelet cl_trsm = make_codelet("trsm", &trsm_cpu, {STARPU_R, STARPU_RW});
  starpu_codelet cl_syrk = make_codelet("syrk", &syrk_cpu, {STARPU_R, commute});
  starpu_codelet cl_gemm = make_codelet("gemm", &gemm_cpu, {STARPU_R, STARPU_R, commute});

  // mpi_cholesky's priorities: with an unbounded range (lws, StarPU 1.3's
  // default) 2T - 2k - m - n (potrf: 2T - 2k, trsm: 2T - 2k - m); with a
  // bounded one the critical path (potrf, the first trsm and the first update
  // of each step) at the maximum, the rest at the default; -no-prio: all at
  // the default.
  const int pmax = starpu_sched_get_max_priority(), pmin = starpu_sched_get_min_priority();
  const bool unbound = pmax == INT_MAX && pmin == INT_MIN;
  auto prio = [&](bool critical, int value) {
    if (o.noprio) return STARPU_DEFAULT_PRIO;
    if (unbound) return value;
    return critical ? pmax : STARPU_DEFAULT_PRIO;
  };
  auto submit = [&](starpu_codelet* cl, std::initializer_list<starpu_data_handle_t> hs, int priority) {
    starpu_task* t = starpu_task_create();
    t->cl = cl;
    int i = 0;
    for (starpu_data_handle_t x : hs) t->handles[i++] = x;
    t->cl_arg = &ctx;
    t->priority = priority;
    const int rc = starpu_task_submit(t);
    if (rc != 0) throw strata::Error(strata::Errc::internal, "starpu_task_submit returned " + std::to_string(rc));
  };
  // A broadcast of tile (m, n) on one tag's queue, rooted at member index root.
  auto bcast = [&](strata::starpu::Queue& q, int m, int n, int root_index, int priority) {
    const bool is_root = q.communicator().rank() == root_index;
    strata::starpu::TaskOptions opts;
    opts.name = "bcast";
    opts.priority = priority;
    const int tag = m % ntags;
    q.submit(
        {{h[idx(m, n)], is_root ? STARPU_R : STARPU_W}},
        [tile_elems, root_index, tag](strata::Communicator& c, void* const* p) {
          strata::CollOptions co;
          co.tag = tag;
          return c.broadcast(p[0], tile_elems, strata::Datatype::float32, root_index, co);
        },
        std::move(opts));
  };

  engine.world().barrier().get();
  const ThreadCpu cpu0 = thread_cpu();
  const double t0 = starpu_timing_now();
  for (int k = 0; k < nt; ++k) {
    const int pk = prio(true, 2 * nt - 2 * k);
    if (g.owner(k, k) == me) submit(&cl_potrf, {h[idx(k, k)]}, pk);
    if (comm && g.Y > 1 && k + 1 < nt && my_col == k % g.X)
      bcast(col_q[static_cast<std::size_t>(k % ntags)], k, k, k % g.Y, pk);
    for (int m = k + 1; m < nt; ++m) {
      const int pm = prio(m == k + 1, 2 * nt - 2 * k - m);
      if (g.owner(m, k) == me) submit(&cl_trsm, {h[idx(k, k)], h[idx(m, k)]}, pm);
      if (!comm) continue;
      const auto q = static_cast<std::size_t>(m % ntags);
      if (g.X > 1 && my_row == m % g.Y) bcast(row_q[q], m, k, k % g.X, pm);                // along row m % Y
      if (g.Y > 1 && m + 1 < nt && my_col == m % g.X) bcast(col_q[q], m, k, m % g.Y, pm);  // down column m % X
    }
    for (int n = k + 1; n < nt; ++n)
      for (int m = n; m < nt; ++m) {
        if (g.owner(m, n) != me) continue;
        const int pu = prio(m == k + 1 && n == k + 1, 2 * nt - 2 * k - m - n);
        if (m == n)
          submit(&cl_syrk, {h[idx(m, k)], h[idx(m, m)]}, pu);
        else
          submit(&cl_gemm, {h[idx(m, k)], h[idx(n, k)], h[idx(m, n)]}, pu);
      }
  }
  starpu_task_wait_for_all();
  engine.world().barrier().get();
  const double elapsed_us = starpu_timing_now() - t0;
  const ThreadCpu cpu1 = thread_cpu();
  for (starpu_data_handle_t x : h)
    if (x != nullptr) starpu_data_unregister(x);

  // Statistics over the ranks: kernel time, idle time, pivots.
  std::vector<double> sums = {
      static_cast<double>(ctx.busy_us.load()) / 1e3, elapsed_us / 1e3 - static_cast<double>(ctx.busy_us.load()) / 1e3,
      static_cast<double>(ctx.bad_pivots.load()), cpu1.worker_ms - cpu0.worker_ms, cpu1.other_ms - cpu0.other_ms};
  std::vector<double> maxes = sums;
  engine.world()
      .allreduce(strata::in_place, sums.data(), sums.size(), strata::Datatype::float64, strata::Op::sum)
      .get();
  engine.world()
      .allreduce(strata::in_place, maxes.data(), maxes.size(), strata::Datatype::float64, strata::Op::max)
      .get();

  // Link bound: the bytes of this broadcast pattern that cross between hosts.
  const strata::Hierarchy& hier = engine.hierarchy();
  std::vector<int> host_of(static_cast<std::size_t>(np));
  int hosts = 1;
  for (int r = 0; r < np; ++r) {
    host_of[static_cast<std::size_t>(r)] = hier.place(r).host;
    hosts = std::max(hosts, hier.place(r).host + 1);
  }
  const double tile_bytes = static_cast<double>(tile_elems * sizeof(float));
  const Traffic tr = traffic(g, nt, tile_bytes, host_of, hosts);
  double worst = 0;
  for (int x = 0; x < hosts; ++x)
    worst = std::max({worst, tr.sent[static_cast<std::size_t>(x)], tr.recv[static_cast<std::size_t>(x)]});
  const char* bps_env = strata::detail::env::get("STRATA_NET_RATE_BPS");
  const double bps = bps_env != nullptr ? std::atof(bps_env) : 0.0;
  const double link_ms = bps > 0 ? worst * 8.0 / bps * 1e3 : 0.0;

  if (root) {
    const double secs = elapsed_us / 1e6;
    const double gflops = potrf_flops(static_cast<double>(o.size)) / secs / 1e9;
    const starpu_sched_policy* pol = starpu_sched_ctx_get_sched_policy(0);
    std::printf(
        "%s: N=%ld nblocks=%d b=%d single precision, grid %dx%d (dblocksx x dblocksy: %d process column(s), "
        "%d process row(s)), %d rank(s) on %d host(s), %s\n",
        kProg, o.size, nt, b, g.X, g.Y, g.X, g.Y, np, hier.num_hosts(),
        comm ? "strata broadcasts" : "compute-only (no communication)");
    std::printf(
        "%s: scheduler %s, priorities %s (range %d..%d%s), diagonal update %s, %d StarPU CPU worker(s), "
        "%d tag(s), transport %s, StarPU worker binding: %s\n",
        kProg, pol != nullptr && pol->policy_name != nullptr ? pol->policy_name : "?", o.noprio ? "off" : "on", pmin,
        pmax, unbound ? ", unbounded: 2T-2k-m-n" : "", o.syrk ? "ssyrk" : "sgemm",
        static_cast<int>(starpu_cpu_worker_get_count()), ntags, engine.transport_name().c_str(), binding().c_str());
    std::printf("%s: broadcasts %ld of %.0f KiB, %.1f MB between hosts (busiest link direction %.1f MB)", kProg,
                comm ? tr.broadcasts : 0L, tile_bytes / 1024.0, tr.bytes_cross / 1e6, worst / 1e6);
    if (bps > 0)
      std::printf(", link time %.1f ms at %.0f Mbit/s\n", link_ms, bps / 1e6);
    else
      std::printf(" (no STRATA_NET_RATE_BPS: link time unknown)\n");
    std::printf(
        "%s: time %.1f ms, %.2f GFlop/s (N^3/3 + N^2/2 + N/6 flops, as mpi_cholesky); kernels %.1f ms mean "
        "(max %.1f), idle %.1f ms mean per rank\n",
        kProg, elapsed_us / 1e3, gflops, sums[0] / np, maxes[0], sums[1] / np);
    std::printf(
        "%s: cpu per rank (mean): StarPU worker %.1f ms, other threads %.1f ms (main, strata's progress and "
        "executor, StarPU's helpers)\n",
        kProg, sums[3] / np, sums[4] / np);
    std::printf("%s: result mode=%s time_ms=%.1f gflops=%.3f link_ms=%.1f kernels_ms=%.1f other_cpu_ms=%.1f\n", kProg,
                comm ? "strata" : "compute-only", elapsed_us / 1e3, gflops, link_ms, sums[0] / np, sums[4] / np);
  }

  int rc = 0;
  if (sums[2] > 0) {
    if (root) std::printf("%s: %.0f non-positive pivot(s): the matrix is not positive definite\n", kProg, sums[2]);
    rc = 1;
  }
  if (o.check) {
    // Every rank gets the whole L (one broadcast per tile from its owner),
    // then computes the residual of its own tiles in double.
    std::vector<float> all(static_cast<std::size_t>(nt) * nt * tile_elems);
    auto at = [&](int m, int n) { return all.data() + idx(m, n) * tile_elems; };
    std::vector<strata::Future<void>> fs;
    for (int m = 0; m < nt; ++m)
      for (int n = 0; n <= m; ++n) {
        if (g.owner(m, n) == me) std::memcpy(at(m, n), tile[idx(m, n)], tile_elems * sizeof(float));
        fs.push_back(engine.world().broadcast(at(m, n), tile_elems, strata::Datatype::float32, g.owner(m, n)));
      }
    for (auto& f : fs) f.get();
    for (int n = 0; n < nt; ++n)  // L(n,n) is lower triangular: clear what potrf left above the diagonal
      for (int c = 1; c < b; ++c)
        for (int r = 0; r < c; ++r) at(n, n)[static_cast<std::size_t>(r) + static_cast<std::size_t>(c) * b] = 0.0f;
    std::vector<double> x(tile_elems), y(tile_elems), acc(tile_elems);
    double norms[2] = {0, 0};  // ||A - L L^T||_F^2, ||A||_F^2
    for (int m = 0; m < nt; ++m)
      for (int n = 0; n <= m; ++n) {
        if (g.owner(m, n) != me) continue;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int l = 0; l <= n; ++l) {
          std::copy(at(m, l), at(m, l) + tile_elems, x.begin());
          std::copy(at(n, l), at(n, l) + tile_elems, y.begin());
          cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, b, b, b, 1.0, x.data(), b, y.data(), b, 1.0, acc.data(),
                      b);
        }
        const double w = m == n ? 1.0 : 2.0;  // the upper triangle mirrors the lower
        for (int c = 0; c < b; ++c)
          for (int r = 0; r < b; ++r) {
            const double a =
                static_cast<double>(element(o, static_cast<long>(m) * b + r, static_cast<long>(n) * b + c));
            const double d = a - acc[static_cast<std::size_t>(r) + static_cast<std::size_t>(c) * b];
            norms[0] += w * d * d;
            norms[1] += w * a * a;
          }
      }
    engine.world().allreduce(strata::in_place, norms, 2, strata::Datatype::float64, strata::Op::sum).get();
    const double rel = std::sqrt(norms[0]) / std::sqrt(norms[1]);
    const bool ok = std::isfinite(rel) && rel < kCheckLimit;
    if (root)
      std::printf("%s: check ||A - L L^T||_F / ||A||_F = %.2e (limit %.0e, matrix %s): %s\n", kProg, rel, kCheckLimit,
                  o.matrix.c_str(), ok ? "OK" : "FAILED");
    if (!ok) rc = 1;
  }
  for (float* t : tile) std::free(t);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  const char* r = strata::detail::env::get("STRATA_RANK");
  const bool rank0 = r == nullptr || std::string(r) == "0";
  Options o;
  bool help = false;
  const std::string err = parse(argc, argv, o, help);
  if (help) {
    if (rank0) std::fputs(kHelp, stdout);
    return 0;
  }
  if (!err.empty()) {
    if (rank0) std::fprintf(stderr, "%s: error: %s (see %s --help)\n", kProg, err.c_str(), kProg);
    return 2;
  }
  setenv("STARPU_NCPU", "1", 0);  // one worker per rank unless told otherwise
  // StarPU 1.3 binds its first worker to CPU 0 whatever CPU the launcher bound
  // the rank to (seen: rank 1 of strata-run --bind core on CPU 1, its worker
  // on CPU 0, as rank 0's): unless told where, leave the worker on the rank's CPUs.
  if (std::getenv("STARPU_WORKERS_CPUID") == nullptr && std::getenv("STARPU_WORKERS_COREID") == nullptr)
    setenv("STARPU_WORKERS_NOBIND", "1", 0);
  if (starpu_init(nullptr) != 0) {
    std::fprintf(stderr, "%s: error: starpu_init failed\n", kProg);
    return 1;
  }
  int rc = 0;
  try {
    strata::Engine engine;
    rc = run(engine, o);
  } catch (const std::exception& e) {  // the Engine is gone: StarPU's tasks finished or never started
    std::fprintf(stderr, "%s: error: %s\n", kProg, e.what());
    rc = 1;
  }
  starpu_shutdown();
  return rc;
}
