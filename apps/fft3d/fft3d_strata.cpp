// fft3d on strata: slab-decomposed 3D FFT with strata alltoall transposes (see fft3d_core.hpp).
//   strata-run -n 4 --hosts 2 --timeout 120 -- fft3d --grid 32 --check
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fft3d_core.hpp"
#include "strata/strata.hpp"

namespace {

class StrataBackend {
 public:
  using Request = strata::Future<void>;
  explicit StrataBackend(strata::Communicator comm) : comm_(std::move(comm)) {}
  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  Request ialltoall(const fft3d::Cplx* send, fft3d::Cplx* recv, std::size_t count) {
    return comm_.alltoall(send, recv, 2 * count, strata::Datatype::float64);  // complex = 2 float64
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

bool is_rank0() {
  const char* r = std::getenv("STRATA_RANK");
  return r == nullptr || std::string(r) == "0";
}

}  // namespace

int main(int argc, char** argv) {
  fft3d::Options o;
  bool help = false;
  const std::string err = fft3d::parse(argc, argv, o, help);
  if (!err.empty() || help) {
    if (is_rank0()) {
      if (!err.empty()) std::fprintf(stderr, "fft3d: error: %s\n", err.c_str());
      std::fputs(fft3d::usage(), stderr);
    }
    return help ? 0 : 2;
  }
  if (!o.backend.empty() && o.backend != "strata") {
    if (is_rank0())
      std::fprintf(stderr, "fft3d: error: --backend %s: this binary is the strata backend; run fft3d-%s under mpirun\n",
                   o.backend.c_str(), o.backend.c_str());
    return 2;
  }
  if (!o.trace.empty()) setenv("STRATA_TRACE", o.trace.c_str(), 1);  // before the Engine exists
  try {
    int rc = 0;
    {
      strata::Engine engine;
      StrataBackend b(engine.world());
      rc = fft3d::main_with(b, o, "strata", std::to_string(engine.hierarchy().num_hosts()));
      if (!o.trace.empty() && engine.rank() == 0)
        std::printf("fft3d: trace: %s.<rank>.json; merge with strata-trace-merge -o %s.json --prefix %s\n",
                    o.trace.c_str(), o.trace.c_str(), o.trace.c_str());
    }
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fft3d: error: %s\n", e.what());
    return 1;
  }
}
