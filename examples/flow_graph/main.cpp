// Collectives as nodes of a tbb::flow::graph.
//
// produce -> sequencer -> allreduce (async_node) -> sequencer -> consume. The async node
// starts a nonblocking allreduce and returns at once; the collective's
// Future::on_complete callback (a plain callback, run by whichever strata
// thread completes it) hands the result back through the node's gateway. The
// first sequencer restores the production order (collectives on one
// communicator must be started in the same order on every rank); the second
// one puts the results, which complete in any order, back in sequence.
//   strata-run -n 2 -- ./flow_graph   ->  "flow_graph: 8 allreduces as async nodes, in order: OK"
#include <atomic>
#include <cstdio>
#include <memory>
#include <vector>

#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/task_arena.h>

#include <strata/strata.hpp>

namespace {
struct Block {
  std::size_t seq = 0;
  std::vector<double> data;
};
using BlockPtr = std::shared_ptr<Block>;
constexpr std::size_t kLen = 4096;
constexpr std::size_t kBlocks = 8;
}  // namespace

int main() {
  tbb::task_arena arena;
  strata::EngineOptions opts = strata::EngineOptions::from_environment();
  opts.arena = &arena;  // graph tasks and collective fragments share the workers
  strata::Engine engine(opts);
  strata::Communicator& world = engine.world();
  const int n = world.size(), r = world.rank();

  std::atomic<std::size_t> good{0}, next{0};
  std::atomic<bool> in_order{true};
  arena.execute([&] {
    namespace flow = tbb::flow;
    flow::graph g;
    flow::function_node<std::size_t, BlockPtr> produce(g, flow::unlimited, [r](std::size_t k) {
      auto b = std::make_shared<Block>();
      b->seq = k;
      b->data.assign(kLen, (r + 1.0) * (k + 1));
      return b;
    });
    flow::sequencer_node<BlockPtr> order(g, [](const BlockPtr& b) { return b->seq; });
    using Async = flow::async_node<BlockPtr, BlockPtr>;
    Async reduce(g, flow::serial, [&world](const BlockPtr& in, Async::gateway_type& gw) {
      gw.reserve_wait();  // the graph is not done while the collective runs
      auto out = std::make_shared<Block>();
      out->seq = in->seq;
      out->data.resize(kLen);
      world.allreduce(in->data.data(), out->data.data(), kLen, strata::Datatype::float64, strata::Op::sum)
          .on_complete([in, out, &gw](const strata::Status& st) {
            if (st.is_ok())
              gw.try_put(out);
            else
              std::fprintf(stderr, "allreduce failed: %s\n", st.message().c_str());
            gw.release_wait();
          });
    });
    flow::function_node<BlockPtr> consume(g, flow::serial, [&, n](const BlockPtr& b) {
      if (b->seq != next++) in_order = false;
      const double expect = (b->seq + 1) * n * (n + 1) / 2.0;
      bool ok = true;
      for (double v : b->data) ok = ok && v == expect;
      if (ok) ++good;
    });
    flow::make_edge(produce, order);
    flow::make_edge(order, reduce);
    flow::sequencer_node<BlockPtr> reorder(g, [](const BlockPtr& b) { return b->seq; });
    flow::make_edge(reduce, reorder);
    flow::make_edge(reorder, consume);
    for (std::size_t k = 0; k < kBlocks; ++k) produce.try_put(k);
    g.wait_for_all();
  });
  if (good != kBlocks || !in_order) {
    std::fprintf(stderr, "rank %d: %zu of %zu blocks correct, in order: %d\n", r, good.load(), kBlocks,
                 static_cast<int>(in_order.load()));
    return 1;
  }
  world.barrier().get();
  if (r == 0) std::printf("flow_graph: %zu allreduces as async nodes, in order: OK\n", kBlocks);
  return 0;
}
