// asp on strata: Floyd-Warshall with one strata broadcast per step (see asp_core.hpp).
//   strata-run -n 4 --hosts 2 --timeout 120 -- asp --n 512 --check
#include <cstdio>
#include <cstdlib>
#include <string>

#include "../common/strata_app_main.hpp"
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

}  // namespace

int main(int argc, char** argv) {
  return apps::strata_app_main<asp::Options>(
      "asp", argc, argv, asp::parse, [](strata::Engine& engine, const asp::Options& o) {
        StrataBackend b(engine.world());
        return asp::main_with(b, o, "strata", std::to_string(engine.hierarchy().num_hosts()));
      });
}
