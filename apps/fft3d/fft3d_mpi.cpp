// fft3d on MPI: the same program as fft3d (fft3d_core.hpp) with MPI_Ialltoall, for comparison.
//   mpirun -n 4 fft3d-mpi --grid 32 --check
#include <mpi.h>

#include <cstdio>
#include <string>

#include "fft3d_core.hpp"

namespace {

class MpiBackend {
 public:
  using Request = MPI_Request;
  MpiBackend() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const { return rank_; }
  int size() const { return size_; }
  static Request ialltoall(const fft3d::Cplx* send, fft3d::Cplx* recv, std::size_t count) {
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Ialltoall(send, static_cast<int>(count), MPI_C_DOUBLE_COMPLEX, recv, static_cast<int>(count),
                  MPI_C_DOUBLE_COMPLEX, MPI_COMM_WORLD, &r);
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
  static double sum(double v) { return reduce(v, MPI_SUM); }
  static double max(double v) { return reduce(v, MPI_MAX); }
  static void barrier() { MPI_Barrier(MPI_COMM_WORLD); }

 private:
  static double reduce(double v, MPI_Op op) {
    double out = 0;
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
    return out;
  }
  int rank_ = 0, size_ = 1;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  {
    MpiBackend b;
    fft3d::Options o;
    bool help = false;
    const std::string err = fft3d::parse(argc, argv, o, help);
    if (!err.empty() || help) {
      if (b.rank() == 0) {
        if (!err.empty()) std::fprintf(stderr, "fft3d-mpi: error: %s\n", err.c_str());
        std::fputs(fft3d::usage(), stderr);
      }
      rc = help ? 0 : 2;
    } else if (!o.backend.empty() && o.backend != "mpi") {
      if (b.rank() == 0) std::fprintf(stderr, "fft3d-mpi: error: this binary is the mpi backend\n");
      rc = 2;
    } else {
      if (!o.trace.empty() && b.rank() == 0) std::fprintf(stderr, "fft3d-mpi: --trace is ignored on the MPI backend\n");
      try {
        rc = fft3d::main_with(b, o, "mpi", "-");
      } catch (const std::exception& e) {
        std::fprintf(stderr, "fft3d-mpi: error: %s\n", e.what());
        rc = 1;
      }
    }
  }
  MPI_Finalize();
  return rc;
}
