// asp on MPI: the same program as asp (asp_core.hpp) with MPI_Ibcast, for comparison.
//   mpirun -n 4 asp-mpi --n 512 --check
#include <mpi.h>

#include <cstdio>
#include <string>

#include "asp_core.hpp"

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
  static Request ibcast(std::int32_t* buf, std::size_t count, int root) {
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Ibcast(buf, static_cast<int>(count), MPI_INT32_T, root, MPI_COMM_WORLD, &r);
    return r;
  }
  static void wait(Request& r) { MPI_Wait(&r, MPI_STATUS_IGNORE); }
  static double max(double v) {
    double out = 0;
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return out;
  }
  static double sum(double v) {
    double out = 0;
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return out;
  }
  static std::int64_t sum(std::int64_t v) {
    std::int64_t out = 0;
    MPI_Allreduce(&v, &out, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    return out;
  }
  static void barrier() { MPI_Barrier(MPI_COMM_WORLD); }

 private:
  int rank_ = 0, size_ = 1;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  {
    MpiBackend b;
    asp::Options o;
    std::string help;
    const std::string err = asp::parse(argc, argv, o, help);
    if (apps::report_parse(b.rank() == 0, "asp-mpi", err, help, rc)) {
      // error or --help: printed, rc set
    } else if (!o.backend.empty() && o.backend != "mpi") {
      if (b.rank() == 0) std::fprintf(stderr, "asp-mpi: error: this binary is the mpi backend\n");
      rc = 2;
    } else {
      if (!o.trace.empty() && b.rank() == 0) std::fprintf(stderr, "asp-mpi: --trace is ignored on the MPI backend\n");
      rc = asp::main_with(b, o, "mpi", "-");
    }
  }
  MPI_Finalize();
  return rc;
}
