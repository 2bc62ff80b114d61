// fft3d on strata: slab- or pencil-decomposed 3D FFT with strata alltoall transposes (see fft3d_core.hpp).
//   strata-run -n 4 --hosts 2 --timeout 120 -- fft3d --grid 32 --decomp pencil --check
#include <cstdio>
#include <cstdlib>
#include <string>

#include "../common/strata_app_main.hpp"
#include "fft3d_core.hpp"
#include "strata/strata.hpp"

namespace {

class StrataBackend {
 public:
  using Request = strata::Future<void>;
  static constexpr bool kExecutorWork = true;
  explicit StrataBackend(strata::Communicator comm) : comm_(std::move(comm)) {}
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
};

}  // namespace

int main(int argc, char** argv) {
  return apps::strata_app_main<fft3d::Options>(
      "fft3d", argc, argv, fft3d::parse, [](strata::Engine& engine, const fft3d::Options& o) {
        StrataBackend b(engine.world());
        return fft3d::main_with(b, o, "strata", std::to_string(engine.hierarchy().num_hosts()));
      });
}
