// fft3d on strata: slab- or pencil-decomposed 3D FFT with strata alltoall transposes (see fft3d_core.hpp).
//   strata-run -n 4 --hosts 2 --timeout 120 -- fft3d --grid 32 --decomp pencil --check
#include <cstdio>
#include <cstdlib>
#include <string>

#include <deque>
#include <memory>

#include "../common/strata_app_main.hpp"
#include "fft3d_core.hpp"
#include "strata/strata.hpp"
#ifdef _OPENMP
#include "strata/openmp.hpp"
#endif

namespace {

class StrataBackend {
 public:
  using Request = strata::Future<void>;
  static constexpr bool kExecutorWork = true;
#ifdef _OPENMP
  static constexpr bool kOpenMP = true;
  explicit StrataBackend(strata::Communicator comm)
      : comm_(std::move(comm)), omp_(std::make_shared<Omp>(strata::openmp::Queue(comm_))) {}
  // --runtime openmp: the alltoall as a detached OpenMP task (strata/openmp.hpp), after the tasks with
  // depend(out: *in), before those with depend(in: *out); called by the thread creating the tasks.
  void alltoall_task(const fft3d::Cplx* send, fft3d::Cplx* recv, std::size_t count, [[maybe_unused]] char* in,
                     [[maybe_unused]] char* out) {  // in, out: used in depend clauses only
    const strata::openmp::Queue::Ticket t = omp_->queue.ticket();
    Omp* o = omp_.get();
    strata::Status* st = &o->status.emplace_back();  // here: only this thread appends
    omp_event_handle_t ev;
#pragma omp task depend(in : in[0]) depend(out : out[0]) detach(ev) firstprivate(t, o, st, send, recv, count)
    o->queue.start(
        t, ev,
        [send, recv, count](strata::Communicator& c) {
          return c.alltoall(send, recv, 2 * count, strata::Datatype::float64);
        },
        st);
  }
  // Throws the first failure of the alltoall tasks since the last check (after their taskgroup).
  void tasks_check() {
    std::deque<strata::Status> done;
    done.swap(omp_->status);
    for (const strata::Status& st : done) strata::throw_if_error(st);
  }
#else
  static constexpr bool kOpenMP = false;
  explicit StrataBackend(strata::Communicator comm) : comm_(std::move(comm)) {}
  void alltoall_task(const fft3d::Cplx*, fft3d::Cplx*, std::size_t, char*, char*) {}
  void tasks_check() {}
#endif
  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  StrataBackend split(int color, int key) const { return StrataBackend(comm_.split(color, key)); }
  Request ialltoall(const fft3d::Cplx* send, fft3d::Cplx* recv, std::size_t count) {
    return comm_.alltoall(send, recv, 2 * count, strata::Datatype::float64);  // complex = 2 float64
  }
  // fn(source) runs as a compute node of the alltoall's graph as soon as the block from source landed.
  Request ialltoall_blocks(const fft3d::Cplx* send, fft3d::Cplx* recv, std::size_t count, std::function<void(int)> fn) {
    strata::CollOptions opts;
    opts.on_block = [fn = std::move(fn)](int source, void*, std::size_t) { fn(source); };
    return comm_.alltoall(send, recv, 2 * count, strata::Datatype::float64, opts);
  }
  static void wait(Request& r) { r.get(); }
  // Each chunk's work runs as a continuation on the engine's arena as soon as its alltoall completes.
  static void on_each(std::vector<Request>& rs, const std::function<void(int)>& fn) {
    std::vector<strata::Future<void>> done;
    done.reserve(rs.size());
    for (std::size_t i = 0; i < rs.size(); ++i)
      done.push_back(std::move(rs[i]).then([&fn, i]() { fn(static_cast<int>(i)); }));
    strata::when_all(std::move(done)).get();
  }
  double sum(double v) { return reduce(v, strata::Op::sum); }
  double max(double v) { return reduce(v, strata::Op::max); }
  void barrier() { comm_.barrier().get(); }

 private:
  double reduce(double v, strata::Op op) {
    double out = 0;
    comm_.allreduce(&v, &out, 1, strata::Datatype::float64, op).get();
    return out;
  }
  strata::Communicator comm_;
#ifdef _OPENMP
  struct Omp {
    explicit Omp(strata::openmp::Queue q) : queue(std::move(q)) {}
    strata::openmp::Queue queue;  // one per communicator (world, row, column)
    // One outcome per alltoall task since the last tasks_check(), written before its task completes
    // (appended only by the thread creating the tasks; a deque keeps the addresses).
    std::deque<strata::Status> status;
  };
  std::shared_ptr<Omp> omp_;
#endif
};

}  // namespace

int main(int argc, char** argv) {
  return apps::strata_app_main<fft3d::Options>(
      "fft3d", argc, argv, fft3d::parse, [](strata::Engine& engine, const fft3d::Options& o) {
        StrataBackend b(engine.world());
        return fft3d::main_with(b, o, "strata", std::to_string(engine.hierarchy().num_hosts()));
      });
}
