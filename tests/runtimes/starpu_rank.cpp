// starpu_rank: collectives as StarPU tasks (strata/starpu.hpp) between
// ordinary StarPU tasks, checked. Per round: K vectors (sizes differ, so a
// wrong matching order cannot pass) are filled by StarPU tasks, then
// allreduced by Queue::allreduce in program order, then read by checking
// tasks; a broadcast follows on another handle. Odd ranks fill the vectors in
// reverse order (serialized by a token handle), so StarPU grants the
// collectives' data in a different order there than on even ranks, and the
// queue must keep the posting order. Each collective's task carries a tag; a
// task depending on that tag checks that the collective had completed when
// the task ended (starpu_task_end_dep_*). Prints "starpu_rank: OK".
#include <starpu.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "common/rank_check.hpp"
#include "strata/starpu.hpp"
#include "strata/strata.hpp"

namespace {

constexpr int kVectors = 6;

double fill_value(int rank, int round, int i, std::size_t k) {
  return static_cast<double>((rank + 1) * 1000 + round * 10 + i) + static_cast<double>(k % 7);
}
std::int64_t bcast_value(int root, int round, std::size_t k) {
  return static_cast<std::int64_t>(root) * 100000 + round * 100 + static_cast<std::int64_t>(k % 89);
}

struct Arg {
  int rank = 0, size = 0, round = 0, i = 0, root = 0;
  std::atomic<int>* bad = nullptr;
  std::atomic<int>* checked = nullptr;
  std::atomic<int>* done_flag = nullptr;  ///< set by on_done of the call this task checks
  std::atomic<int>* order = nullptr;      ///< fill order counter (diagnostics)
  int* order_out = nullptr;
};

starpu_vector_interface* vec(void* b) { return static_cast<starpu_vector_interface*>(b); }

void fill_fn(void** buffers, void* cl_arg) {
  auto* a = static_cast<Arg*>(cl_arg);
  auto* v = reinterpret_cast<double*>(vec(buffers[0])->ptr);
  for (std::size_t k = 0; k < vec(buffers[0])->nx; ++k) v[k] = fill_value(a->rank, a->round, a->i, k);
  *a->order_out = a->order->fetch_add(1);
}

void check_fn(void** buffers, void* cl_arg) {
  auto* a = static_cast<Arg*>(cl_arg);
  const auto* v = reinterpret_cast<const double*>(vec(buffers[0])->ptr);
  int wrong = 0;
  for (std::size_t k = 0; k < vec(buffers[0])->nx; ++k) {
    double want = 0;
    for (int r = 0; r < a->size; ++r) want += fill_value(r, a->round, a->i, k);
    wrong += v[k] != want;
  }
  if (wrong != 0)
    std::fprintf(stderr, "rank %d: FAILED allreduce round %d vector %d: %d wrong elements\n", a->rank, a->round, a->i,
                 wrong);
  a->bad->fetch_add(wrong != 0);
  a->checked->fetch_add(1);
}

void bfill_fn(void** buffers, void* cl_arg) {
  auto* a = static_cast<Arg*>(cl_arg);
  auto* v = reinterpret_cast<std::int64_t*>(vec(buffers[0])->ptr);
  for (std::size_t k = 0; k < vec(buffers[0])->nx; ++k)
    v[k] = a->rank == a->root ? bcast_value(a->root, a->round, k) : -1;
}

void bcheck_fn(void** buffers, void* cl_arg) {
  auto* a = static_cast<Arg*>(cl_arg);
  const auto* v = reinterpret_cast<const std::int64_t*>(vec(buffers[0])->ptr);
  int wrong = 0;
  for (std::size_t k = 0; k < vec(buffers[0])->nx; ++k) wrong += v[k] != bcast_value(a->root, a->round, k);
  if (wrong != 0)
    std::fprintf(stderr, "rank %d: FAILED broadcast round %d: %d wrong elements\n", a->rank, a->round, wrong);
  a->bad->fetch_add(wrong != 0);
  a->checked->fetch_add(1);
}

// Depends (by tag) on a collective's task: that task may end only after the collective completed.
void ended_fn(void** /*buffers*/, void* cl_arg) {
  auto* a = static_cast<Arg*>(cl_arg);
  if (a->done_flag->load() == 0) {
    std::fprintf(stderr, "rank %d: FAILED round %d vector %d: the collective's task ended before it completed\n",
                 a->rank, a->round, a->i);
    a->bad->fetch_add(1);
  }
  a->checked->fetch_add(1);
}

starpu_codelet make_codelet(starpu_cpu_func_t fn, int nbuffers, starpu_data_access_mode m0,
                            starpu_data_access_mode m1) {
  starpu_codelet c;
  starpu_codelet_init(&c);
  c.cpu_funcs[0] = fn;
  c.nbuffers = nbuffers;
  c.modes[0] = m0;
  c.modes[1] = m1;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 20;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);

  starpu_conf conf;
  starpu_conf_init(&conf);
  conf.ncpus = 2;
  conf.ncuda = 0;
  conf.nopencl = 0;
  if (const int rc = starpu_init(&conf); rc != 0) {
    std::printf("starpu_rank: FAILED: starpu_init returned %d\n", rc);
    return 1;
  }
  int rc = 0;
  {
    strata::Engine engine;
    const int me = engine.rank();
    const int n = engine.size();
    rank_check::me = me;
    strata::starpu::Queue q(engine.world());

    starpu_codelet fill_cl = make_codelet(&fill_fn, 2, STARPU_W, STARPU_RW);
    starpu_codelet check_cl = make_codelet(&check_fn, 1, STARPU_R, STARPU_NONE);
    starpu_codelet bfill_cl = make_codelet(&bfill_fn, 1, STARPU_W, STARPU_NONE);
    starpu_codelet bcheck_cl = make_codelet(&bcheck_fn, 1, STARPU_R, STARPU_NONE);
    starpu_codelet ended_cl = make_codelet(&ended_fn, 0, STARPU_NONE, STARPU_NONE);

    std::vector<std::vector<double>> data(kVectors);
    std::vector<starpu_data_handle_t> h(kVectors);
    for (int i = 0; i < kVectors; ++i) {
      data[static_cast<std::size_t>(i)].assign(static_cast<std::size_t>(1 + i * 997), 0.0);
      starpu_vector_data_register(&h[static_cast<std::size_t>(i)], STARPU_MAIN_RAM,
                                  reinterpret_cast<uintptr_t>(data[static_cast<std::size_t>(i)].data()),
                                  static_cast<std::uint32_t>(data[static_cast<std::size_t>(i)].size()), sizeof(double));
    }
    std::vector<std::int64_t> bdata(3000);
    starpu_data_handle_t hb = nullptr;
    starpu_vector_data_register(&hb, STARPU_MAIN_RAM, reinterpret_cast<uintptr_t>(bdata.data()),
                                static_cast<std::uint32_t>(bdata.size()), sizeof(std::int64_t));
    int token = 0;
    starpu_data_handle_t ht = nullptr;
    starpu_variable_data_register(&ht, STARPU_MAIN_RAM, reinterpret_cast<uintptr_t>(&token), sizeof token);

    std::atomic<int> bad{0}, checked{0}, done{0}, order{0}, failed_calls{0};
    std::deque<Arg> args;  // cl_args, alive until starpu_task_wait_for_all
    std::deque<std::atomic<int>> flags;
    std::vector<int> fill_order(static_cast<std::size_t>(rounds * kVectors), -1);
    auto submit = [&](starpu_codelet* cl, Arg a, std::vector<starpu_data_handle_t> hs, bool use_tag = false,
                      starpu_tag_t tag = 0) {
      args.push_back(a);
      starpu_task* t = starpu_task_create();
      t->cl = cl;
      t->cl_arg = &args.back();
      for (std::size_t b = 0; b < hs.size(); ++b) t->handles[b] = hs[b];
      if (use_tag) {
        t->use_tag = 1;
        t->tag_id = tag;
      }
      EXPECT(starpu_task_submit(t) == 0, "starpu_task_submit");
    };
    for (int round = 0; round < rounds; ++round) {
      Arg base;
      base.rank = me;
      base.size = n;
      base.round = round;
      base.bad = &bad;
      base.checked = &checked;
      base.order = &order;
      // Fill: odd ranks in reverse order, one after the other through the token.
      for (int j = 0; j < kVectors; ++j) {
        const int i = me % 2 == 1 ? kVectors - 1 - j : j;
        Arg a = base;
        a.i = i;
        a.order_out = &fill_order[static_cast<std::size_t>(round * kVectors + i)];
        submit(&fill_cl, a, {h[static_cast<std::size_t>(i)], ht});
      }
      // The collectives, in program order on every rank, each followed by its checks.
      for (int i = 0; i < kVectors; ++i) {
        flags.emplace_back(0);
        std::atomic<int>* flag = &flags.back();
        const starpu_tag_t tag = 1 + 2 * static_cast<starpu_tag_t>(round * kVectors + i);
        strata::starpu::TaskOptions o;
        o.use_tag = true;
        o.tag = tag;
        o.on_done = [flag, &done, &failed_calls, me](const strata::Status& st) {
          if (!st.is_ok()) {
            std::fprintf(stderr, "rank %d: FAILED collective: %s\n", me, st.message().c_str());
            failed_calls.fetch_add(1);
          }
          flag->store(1);
          done.fetch_add(1);
        };
        q.allreduce(h[static_cast<std::size_t>(i)], strata::Datatype::float64, strata::Op::sum, std::move(o));
        Arg a = base;
        a.i = i;
        submit(&check_cl, a, {h[static_cast<std::size_t>(i)]});
        a.done_flag = flag;
        starpu_tag_declare_deps(tag + 1, 1, tag);
        submit(&ended_cl, a, {}, true, tag + 1);
      }
      Arg b = base;
      b.root = round % n;
      submit(&bfill_cl, b, {hb});
      strata::starpu::TaskOptions bo;
      bo.on_done = [&done, &failed_calls](const strata::Status& st) {
        failed_calls.fetch_add(st.is_ok() ? 0 : 1);
        done.fetch_add(1);
      };
      q.broadcast(hb, strata::Datatype::int64, b.root, std::move(bo));
      submit(&bcheck_cl, b, {hb});
    }
    starpu_task_wait_for_all();
    const int calls = rounds * (kVectors + 1);
    EXPECT(done.load() == calls, "%d of %d collectives completed", done.load(), calls);
    EXPECT(failed_calls.load() == 0, "%d collectives failed", failed_calls.load());
    EXPECT(checked.load() == rounds * (2 * kVectors + 1), "%d of %d checks ran", checked.load(),
           rounds * (2 * kVectors + 1));
    EXPECT(bad.load() == 0, "%d checks failed", bad.load());
    // Did StarPU make the data ready in another order than the program's here? (diagnostic)
    int reordered = 0;
    for (int round = 0; round < rounds; ++round)
      reordered += fill_order[static_cast<std::size_t>(round * kVectors)] >
                   fill_order[static_cast<std::size_t>(round * kVectors + kVectors - 1)];
    std::printf("rank %d: %d collectives, %d rounds with the data ready in reverse order\n", me, calls, reordered);
    for (auto x : h) starpu_data_unregister(x);
    starpu_data_unregister(hb);
    starpu_data_unregister(ht);
    rc = rank_check::failures != 0 ? 1 : 0;
    if (rc == 0) std::printf("starpu_rank: OK\n");
  }
  starpu_shutdown();
  return rc;
}
