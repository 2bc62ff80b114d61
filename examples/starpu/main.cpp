// strata collectives as StarPU tasks (strata/starpu.hpp): a produce task
// writes a vector, an allreduce task sums it over the ranks, a consume task
// reads the sum, all ordered by StarPU's data dependencies on one handle.
//   strata-run -n 2 -- ./starpu
// Rules (docs/embedding.md, "StarPU"): one strata::starpu::Queue per
// communicator, submissions in the same order on every rank, no blocking in
// TaskOptions::on_done, and starpu_task_wait_for_all() before the Engine goes.
#include <starpu.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "strata/starpu.hpp"
#include "strata/strata.hpp"

namespace {

struct Arg {
  int rank;
  int size;
  int round;
  std::atomic<int>* bad;
};

double* vector_of(void* buffer) {
  return reinterpret_cast<double*>(static_cast<starpu_vector_interface*>(buffer)->ptr);
}
std::size_t count_of(void* buffer) { return static_cast<starpu_vector_interface*>(buffer)->nx; }

// produce: element k of rank r in round i is r + k + i.
void produce(void** buffers, void* cl_arg) {
  const auto* a = static_cast<const Arg*>(cl_arg);
  double* v = vector_of(buffers[0]);
  for (std::size_t k = 0; k < count_of(buffers[0]); ++k) v[k] = a->rank + static_cast<double>(k) + a->round;
}

// consume: the sum over ranks is n*(k+i) + n*(n-1)/2.
void consume(void** buffers, void* cl_arg) {
  const auto* a = static_cast<const Arg*>(cl_arg);
  const double* v = vector_of(buffers[0]);
  const double n = a->size;
  for (std::size_t k = 0; k < count_of(buffers[0]); ++k)
    if (v[k] != n * (static_cast<double>(k) + a->round) + n * (n - 1) / 2) ++*a->bad;
}

}  // namespace

int main() {
  if (starpu_init(nullptr) != 0) return 1;
  std::atomic<int> bad{0};  // written by StarPU workers and strata's completion thread
  int rank = 0;
  {
    strata::Engine engine;
    rank = engine.rank();
    strata::starpu::Queue queue(engine.world());  // one per communicator

    std::vector<double> data(1000);
    starpu_data_handle_t h = nullptr;
    starpu_vector_data_register(&h, STARPU_MAIN_RAM, reinterpret_cast<uintptr_t>(data.data()),
                                static_cast<std::uint32_t>(data.size()), sizeof(double));

    starpu_codelet produce_cl;
    starpu_codelet_init(&produce_cl);
    produce_cl.cpu_funcs[0] = &produce;
    produce_cl.nbuffers = 1;
    produce_cl.modes[0] = STARPU_W;
    starpu_codelet consume_cl = produce_cl;
    consume_cl.cpu_funcs[0] = &consume;
    consume_cl.modes[0] = STARPU_R;

    std::vector<Arg> args;
    constexpr int rounds = 4;
    args.reserve(rounds);
    for (int i = 0; i < rounds; ++i) {
      args.push_back(Arg{rank, engine.size(), i, &bad});
      starpu_task* p = starpu_task_create();  // an ordinary task writes the vector ...
      p->cl = &produce_cl;
      p->handles[0] = h;
      p->cl_arg = &args.back();
      if (starpu_task_submit(p) != 0) return 1;
      // ... the collective's task sums it in place over the ranks (the handle is held,
      // STARPU_RW, until the allreduce completed) ...
      strata::starpu::TaskOptions o;
      o.on_done = [&bad](const strata::Status& st) { bad += st.is_ok() ? 0 : 1; };  // short, non-blocking
      queue.allreduce(h, strata::Datatype::float64, strata::Op::sum, o);
      starpu_task* c = starpu_task_create();  // ... and an ordinary task reads the sum.
      c->cl = &consume_cl;
      c->handles[0] = h;
      c->cl_arg = &args.back();
      if (starpu_task_submit(c) != 0) return 1;
    }
    starpu_task_wait_for_all();  // waits for the collectives' tasks too
    starpu_data_unregister(h);
    if (bad == 0)
      std::printf("starpu: %d ranks, %d allreduces between StarPU tasks, sums verified: OK\n", engine.size(), rounds);
  }  // the Engine goes before StarPU
  starpu_shutdown();
  if (bad != 0) std::printf("starpu: rank %d: %d wrong results\n", rank, bad.load());
  return bad == 0 ? 0 : 1;
}
