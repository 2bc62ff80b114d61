// multigrid on MPI: the same solver (multigrid_core.hpp) with a two-sided
// halo exchange (MPI_Irecv / MPI_Isend per remote face, MPI_Waitall per box),
// MPI_Allreduce and MPI_Allgather. Built as multigrid-mpi (Open MPI) and
// multigrid-mpich (MPICH).
//   mpirun -n 4 multigrid-mpi --n 64 --boxes 2 --check
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "multigrid_core.hpp"

namespace {

class MpiBackend {
 public:
  MpiBackend() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const { return rank_; }
  int size() const { return size_; }
  void setup(double*, std::size_t) {}
  // Tag = the receiver's (box, face): unique per message of one exchange; MPI
  // orders messages of equal (source, tag), so exchanges cannot mix.
  void begin(int, int, const std::vector<mg::Msg>& sends, const std::vector<mg::Msg>& recvs) {
    box_reqs_.clear();
    for (const mg::Msg& m : recvs) {
      if (box_reqs_.size() <= static_cast<std::size_t>(m.box)) box_reqs_.resize(static_cast<std::size_t>(m.box) + 1);
      MPI_Request r = MPI_REQUEST_NULL;
      MPI_Irecv(m.local, static_cast<int>(m.count), MPI_DOUBLE, m.peer, m.box * 6 + m.face, MPI_COMM_WORLD, &r);
      box_reqs_[static_cast<std::size_t>(m.box)].push_back(r);
    }
    send_reqs_.clear();
    for (const mg::Msg& m : sends) {
      MPI_Request r = MPI_REQUEST_NULL;
      MPI_Isend(m.local, static_cast<int>(m.count), MPI_DOUBLE, m.peer, m.box * 6 + m.face, MPI_COMM_WORLD, &r);
      send_reqs_.push_back(r);
    }
  }
  void wait_box(int, int, int box, const std::vector<mg::Msg>&) {
    auto& v = box_reqs_[static_cast<std::size_t>(box)];
    MPI_Waitall(static_cast<int>(v.size()), v.data(), MPI_STATUSES_IGNORE);
    v.clear();
  }
  void end(int, int, const std::vector<mg::Msg>&, const std::vector<mg::Msg>&) {
    MPI_Waitall(static_cast<int>(send_reqs_.size()), send_reqs_.data(), MPI_STATUSES_IGNORE);
    send_reqs_.clear();
  }
  static double sum(double v) {
    double out = 0;
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return out;
  }
  static double max(double v) {
    double out = 0;
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return out;
  }
  static std::uint64_t sum_u64(std::uint64_t v) {
    std::uint64_t out = 0;
    MPI_Allreduce(&v, &out, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return out;
  }
  static void allgather(const double* send, std::size_t count, double* recv) {
    MPI_Allgather(send, static_cast<int>(count), MPI_DOUBLE, recv, static_cast<int>(count), MPI_DOUBLE, MPI_COMM_WORLD);
  }
  static void barrier() { MPI_Barrier(MPI_COMM_WORLD); }
  static void finish() {}

 private:
  int rank_ = 0, size_ = 1;
  std::vector<std::vector<MPI_Request>> box_reqs_;
  std::vector<MPI_Request> send_reqs_;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  {
    MpiBackend b;
    mg::Options o;
    std::string help;
    const std::string err = mg::parse(argc, argv, o, help);
    if (apps::report_parse(b.rank() == 0, "multigrid-mpi", err, help, rc)) {
      // error or --help: printed, rc set
    } else if (!o.backend.empty() && o.backend != "mpi" && o.backend != "openmpi" && o.backend != "mpich") {
      if (b.rank() == 0) std::fprintf(stderr, "multigrid-mpi: error: this binary is an MPI backend\n");
      rc = 2;
    } else {
      if (!o.trace.empty() && b.rank() == 0)
        std::fprintf(stderr, "multigrid-mpi: --trace is ignored on the MPI backend\n");
      mg::Options mo = o;
      mo.trace.clear();
      rc = mg::main_with(b, mo, STRATA_APP_MPI, "-");
    }
  }
  MPI_Finalize();
  return rc;
}
