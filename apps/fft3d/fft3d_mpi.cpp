// fft3d on MPI: the same program as fft3d (fft3d_core.hpp) with MPI_Ialltoall
// (pencil: within sub-communicators from MPI_Comm_split), for comparison.
// Built as fft3d-mpi (Open MPI) and fft3d-mpich (MPICH); STRATA_APP_MPI names the library,
// STRATA_APP_PROG the binary.
//   mpirun -n 4 fft3d-mpi --grid 32 --decomp pencil --check
#include <mpi.h>

#include <cstdio>
#include <string>

#include "fft3d_core.hpp"

namespace {

#ifndef STRATA_APP_MPI
#define STRATA_APP_MPI "mpi"  // the library: openmpi or mpich
#endif
#ifndef STRATA_APP_PROG
#define STRATA_APP_PROG "fft3d-mpi"  // this binary
#endif

class MpiBackend {
 public:
  using Request = MPI_Request;
  static constexpr bool kExecutorWork = false;
  static constexpr bool kOpenMP = false;  // --runtime openmp: strata only
  void alltoall_task(const fft3d::Cplx*, fft3d::Cplx*, std::size_t, char*, char*) {}
  void tasks_check() {}
  explicit MpiBackend(MPI_Comm comm = MPI_COMM_WORLD, bool owned = false) : comm_(comm), owned_(owned) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  MpiBackend(MpiBackend&& o) noexcept : comm_(o.comm_), owned_(o.owned_), rank_(o.rank_), size_(o.size_) {
    o.owned_ = false;
  }
  MpiBackend(const MpiBackend&) = delete;
  MpiBackend& operator=(const MpiBackend&) = delete;
  MpiBackend& operator=(MpiBackend&&) = delete;
  ~MpiBackend() {
    if (owned_) MPI_Comm_free(&comm_);
  }
  MpiBackend split(int color, int key) const {
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Comm_split(comm_, color, key, &c);
    return MpiBackend(c, true);
  }
  int rank() const { return rank_; }
  int size() const { return size_; }
  Request ialltoall(const fft3d::Cplx* send, fft3d::Cplx* recv, std::size_t count) const {
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Ialltoall(send, static_cast<int>(count), MPI_C_DOUBLE_COMPLEX, recv, static_cast<int>(count),
                  MPI_C_DOUBLE_COMPLEX, comm_, &r);
    return r;
  }
  static void wait(Request& r) { MPI_Wait(&r, MPI_STATUS_IGNORE); }
  // No continuations in MPI: process the chunks in completion order (MPI_Waitany).
  static void on_each(std::vector<Request>& rs, const std::function<void(int)>& fn) {
    for (std::size_t left = rs.size(); left > 0; --left) {
      int i = MPI_UNDEFINED;
      MPI_Waitany(static_cast<int>(rs.size()), rs.data(), &i, MPI_STATUS_IGNORE);
      if (i == MPI_UNDEFINED) break;
      fn(i);
    }
  }
  double sum(double v) const { return reduce(v, MPI_SUM); }
  double max(double v) const { return reduce(v, MPI_MAX); }
  void barrier() const { MPI_Barrier(comm_); }

 private:
  double reduce(double v, MPI_Op op) const {
    double out = 0;
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, op, comm_);
    return out;
  }
  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  {
    MpiBackend b;
    fft3d::Options o;
    std::string help;
    const std::string err = fft3d::parse(argc, argv, o, help);
    if (apps::report_parse(b.rank() == 0, STRATA_APP_PROG, err, help, rc)) {
      // error or --help: printed, rc set
    } else if (!o.backend.empty() && o.backend != "mpi" && o.backend != STRATA_APP_MPI) {
      if (b.rank() == 0) std::fprintf(stderr, STRATA_APP_PROG ": error: this binary is the mpi backend\n");
      rc = 2;
    } else {
      if (!o.trace.empty() && b.rank() == 0)
        std::fprintf(stderr, STRATA_APP_PROG ": --trace is ignored on the MPI backend\n");
      try {
        rc = fft3d::main_with(b, o, STRATA_APP_MPI, "-");
      } catch (const std::exception& e) {
        std::fprintf(stderr, STRATA_APP_PROG ": error: %s\n", e.what());
        rc = 1;
      }
    }
  }
  MPI_Finalize();
  return rc;
}
