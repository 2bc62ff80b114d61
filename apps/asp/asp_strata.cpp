// asp on strata: Floyd-Warshall with one strata broadcast per step (see asp_core.hpp).
//   strata-run -n 4 --hosts 2 --timeout 120 -- asp --n 512 --check
#include <cstdio>
#include <cstdlib>
#include <string>

#include "asp_core.hpp"
#include "strata/strata.hpp"

namespace {

class StrataBackend {
 public:
  using Request = strata::Future<void>;
  explicit StrataBackend(strata::Communicator comm) : comm_(std::move(comm)) {}
  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  Request ibcast(std::int32_t* buf, std::size_t count, int root) {
    return comm_.broadcast(buf, count, strata::Datatype::int32, root);
  }
  static void wait(Request& r) { r.get(); }
  double max(double v) {
    double out = 0;
    comm_.allreduce(&v, &out, 1, strata::Datatype::float64, strata::Op::max).get();
    return out;
  }
  double sum(double v) {
    double out = 0;
    comm_.allreduce(&v, &out, 1, strata::Datatype::float64, strata::Op::sum).get();
    return out;
  }
  std::int64_t sum(std::int64_t v) {
    std::int64_t out = 0;
    comm_.allreduce(&v, &out, 1, strata::Datatype::int64, strata::Op::sum).get();
    return out;
  }
  void barrier() { comm_.barrier().get(); }

 private:
  strata::Communicator comm_;
};

bool is_rank0() {
  const char* r = std::getenv("STRATA_RANK");
  return r == nullptr || std::string(r) == "0";
}

}  // namespace

int main(int argc, char** argv) {
  asp::Options o;
  bool help = false;
  const std::string err = asp::parse(argc, argv, o, help);
  if (!err.empty() || help) {
    if (is_rank0()) {
      if (!err.empty()) std::fprintf(stderr, "asp: error: %s\n", err.c_str());
      std::fputs(asp::usage(), stderr);
    }
    return help ? 0 : 2;
  }
  if (!o.backend.empty() && o.backend != "strata") {
    if (is_rank0())
      std::fprintf(stderr, "asp: error: --backend %s: this binary is the strata backend; run asp-%s under mpirun\n",
                   o.backend.c_str(), o.backend.c_str());
    return 2;
  }
  if (!o.trace.empty()) setenv("STRATA_TRACE", o.trace.c_str(), 1);  // before the Engine exists
  try {
    int rc = 0;
    {
      strata::Engine engine;
      StrataBackend b(engine.world());
      rc = asp::main_with(b, o, "strata", std::to_string(engine.hierarchy().num_hosts()));
      if (!o.trace.empty() && engine.rank() == 0)
        std::printf("asp: trace: %s.<rank>.json; merge with strata-trace-merge -o %s.json --prefix %s\n",
                    o.trace.c_str(), o.trace.c_str(), o.trace.c_str());
    }
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "asp: error: %s\n", e.what());
    return 1;
  }
}
