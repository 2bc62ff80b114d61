// openmp_rank: collectives as detached OpenMP tasks (strata/openmp.hpp),
// checked, in the three forms libgomp 12 handles (--form):
//   taskgroup  the tasks are created inside strata::openmp::taskgroup()
//   taskwait   the creating task ends with #pragma omp taskwait
//   depend     every collective task has a task depending on it; nothing else waits
// Per round: K vectors (sizes differ, so a wrong matching order cannot pass)
// are filled by tasks, allreduced by detached tasks (ticket + start, with
// `depend`), and read by checking tasks; in the taskgroup and taskwait forms
// also a barrier and an allreduce through Queue::task(). Odd ranks fill in
// reverse order (a chain of dependencies), so their collective tasks become
// ready in another order than on even ranks and the queue must keep the
// posting order. After the wait, every check must have run and passed.
// Prints "openmp_rank: OK".
#include <omp.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/rank_check.hpp"
#include "strata/openmp.hpp"
#include "strata/strata.hpp"

namespace {

constexpr int kVectors = 6;

std::int64_t fill_value(int rank, int round, int i, std::size_t k) {
  return static_cast<std::int64_t>(rank + 1) * 100000 + round * 100 + i * 10 + static_cast<std::int64_t>(k % 7);
}

struct Round {
  int me = 0, n = 0, round = 0;
  std::vector<std::vector<std::int64_t>> v;
  std::vector<strata::Status> status;
  std::vector<char> tok;  ///< dependence objects, one per vector
  char chain = 0;
  std::int64_t scalar = 0;
  strata::Status scalar_status, barrier_status;
  std::atomic<int> checked{0}, bad{0};
};

void check(Round& r, int i) {
  const auto& v = r.v[static_cast<std::size_t>(i)];
  int wrong = 0;
  for (std::size_t k = 0; k < v.size(); ++k) {
    std::int64_t want = 0;
    for (int q = 0; q < r.n; ++q) want += fill_value(q, r.round, i, k);
    wrong += v[k] != want;
  }
  if (!r.status[static_cast<std::size_t>(i)].is_ok() || wrong != 0) {
    std::fprintf(stderr, "rank %d: FAILED round %d vector %d: %d wrong elements, status '%s'\n", r.me, r.round, i,
                 wrong, r.status[static_cast<std::size_t>(i)].message().c_str());
    r.bad.fetch_add(1);
  }
  r.checked.fetch_add(1);
}

// Creates the round's tasks (in the thread running `single`).
void make_tasks(Round& r, strata::openmp::Queue& q, bool helper_tasks) {
  // Used only in depend clauses, which GCC 12 does not count as uses (-Wunused-variable).
  [[maybe_unused]] char* tok = r.tok.data();
  [[maybe_unused]] char* chain = &r.chain;
  for (int j = 0; j < kVectors; ++j) {
    const int i = r.me % 2 == 1 ? kVectors - 1 - j : j;
    std::int64_t* p = r.v[static_cast<std::size_t>(i)].data();
    const std::size_t count = r.v[static_cast<std::size_t>(i)].size();
    const int me = r.me, round = r.round;
#pragma omp task depend(inout : chain[0]) depend(out : tok[i]) firstprivate(p, count, i, me, round)
    for (std::size_t k = 0; k < count; ++k) p[k] = fill_value(me, round, i, k);
  }
  for (int i = 0; i < kVectors; ++i) {
    std::int64_t* p = r.v[static_cast<std::size_t>(i)].data();
    const std::size_t count = r.v[static_cast<std::size_t>(i)].size();
    strata::Status* st = &r.status[static_cast<std::size_t>(i)];
    const strata::openmp::Queue::Ticket t = q.ticket();
    omp_event_handle_t ev;
#pragma omp task depend(inout : tok[i]) detach(ev) firstprivate(p, count, st, t) shared(q)
    q.start(
        t, ev,
        [p, count](strata::Communicator& c) {
          return c.allreduce(strata::in_place, p, count, strata::Datatype::int64, strata::Op::sum);
        },
        st);
#pragma omp task depend(in : tok[i]) shared(r) firstprivate(i)
    check(r, i);
  }
  if (helper_tasks) {
    r.scalar = r.me + 1;
    std::int64_t* s = &r.scalar;
    q.task([](strata::Communicator& c) { return c.barrier(); }, &r.barrier_status);
    q.task(
        [s](strata::Communicator& c) {
          return c.allreduce(strata::in_place, s, 1, strata::Datatype::int64, strata::Op::sum);
        },
        &r.scalar_status);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 30;
  std::string form = "taskgroup";
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--form") == 0) form = argv[i + 1];
  }
  if (form != "taskgroup" && form != "taskwait" && form != "depend") {
    std::printf("openmp_rank: unknown --form '%s'\n", form.c_str());
    return 2;
  }
  strata::Engine engine;
  const int me = engine.rank();
  const int n = engine.size();
  rank_check::me = me;
  strata::openmp::Queue q(engine.world());
  const bool helpers = form != "depend";  // Queue::task() has no dependent task: needs a taskgroup or taskwait
  for (int round = 0; round < rounds; ++round) {
    Round r;
    r.me = me;
    r.n = n;
    r.round = round;
    r.status.resize(kVectors);
    r.tok.assign(kVectors, 0);
    for (int i = 0; i < kVectors; ++i) r.v.emplace_back(static_cast<std::size_t>(1 + i * 613), 0);
    int seen_in_single = -1;
#pragma omp parallel num_threads(2) shared(r, q, seen_in_single)
#pragma omp single
    {
      if (form == "taskgroup") {
        strata::openmp::taskgroup([&] { make_tasks(r, q, helpers); });
        seen_in_single = r.checked.load();
      } else if (form == "taskwait") {
        make_tasks(r, q, helpers);
#pragma omp taskwait
        seen_in_single = r.checked.load();
      } else {
        make_tasks(r, q, helpers);
      }
    }
    EXPECT(r.checked.load() == kVectors, "round %d: %d of %d checks ran", round, r.checked.load(), kVectors);
    if (form != "depend")
      EXPECT(seen_in_single == kVectors, "round %d: the %s returned before its tasks completed (%d of %d checks)",
             round, form.c_str(), seen_in_single, kVectors);
    EXPECT(r.bad.load() == 0, "round %d: %d checks failed", round, r.bad.load());
    if (helpers) {
      EXPECT(r.barrier_status.is_ok(), "round %d: barrier: %s", round, r.barrier_status.message().c_str());
      EXPECT(r.scalar_status.is_ok() && r.scalar == static_cast<std::int64_t>(n) * (n + 1) / 2,
             "round %d: Queue::task allreduce gave %lld (%s)", round, static_cast<long long>(r.scalar),
             r.scalar_status.message().c_str());
    }
  }
  if (rank_check::failures != 0) return 1;
  std::printf("openmp_rank: OK (%s, %d rounds)\n", form.c_str(), rounds);
  return 0;
}
