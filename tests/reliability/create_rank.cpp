// Nonblocking communicator creation (Runtimes issue, item 2), over real
// processes under strata-run (test_reliability's Create.* tests):
//   create_rank --tasks N    ompi#2025's failure, as tasks: a one-thread
//                oneTBB arena runs 8 tasks per round, one per tag, in an
//                order of each rank's own; each task calls dup_async (tag t)
//                on one parent and returns without waiting; the main thread
//                then checks every new communicator with a verified
//                allreduce and frees it. N rounds. CREATE_UNTAGGED=1 drops
//                the tags (the control: the creations then mismatch and the
//                run must fail). Prints "create_rank: tasks OK".
//   create_rank --threads N  8 threads per rank, one per tag, each making
//                N creations back to back (blocking on each), the threads
//                started in an order of each rank's own; every new
//                communicator checked and freed. Prints "create_rank: threads OK".
//   create_rank --mixed      untagged: split_async by parity, then an
//                untagged allreduce on the parent posted while the creation
//                runs (it must wait behind it, on every rank), then dup_async
//                with tags, a negative color, and the argument errors.
//                Prints "create_rank: mixed OK".
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include "strata/strata.hpp"

namespace {

int me = -1;
constexpr int kTags = 8;

// A verified allreduce on @p c: the sum of (rank + 1) * salt over its members.
bool verify(strata::Communicator& c, std::int64_t salt, const char* what) {
  std::int64_t x = static_cast<std::int64_t>(c.rank() + 1) * salt, y = -1;
  c.allreduce(&x, &y, 1, strata::Datatype::int64, strata::Op::sum).get();
  const std::int64_t n = c.size();
  if (y != n * (n + 1) / 2 * salt) {
    std::fprintf(stderr, "rank %d: FAILED: %s: sum %lld, expected %lld\n", me, what, static_cast<long long>(y),
                 static_cast<long long>(n * (n + 1) / 2 * salt));
    return false;
  }
  return true;
}

strata::CreateOptions tagged(int t, bool tags_on) {
  strata::CreateOptions o;
  o.tag = tags_on ? t : -1;
  return o;
}

int tasks_mode(strata::Engine& engine, long rounds) {
  const bool tags_on = std::getenv("CREATE_UNTAGGED") == nullptr;
  strata::Communicator parent = engine.world().dup(kTags);
  std::mt19937 rng(static_cast<unsigned>(4321 + 97 * me));
  std::vector<int> order(kTags);
  for (int t = 0; t < kTags; ++t) order[static_cast<std::size_t>(t)] = t;
  tbb::task_arena one(1);  // one worker: a task that blocked would stall the others
  long made = 0;
  for (long r = 0; r < rounds; ++r) {
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<strata::Future<strata::Communicator>> fs(kTags);
    one.execute([&] {
      tbb::task_group g;
      for (int t : order)  // one worker: the tasks run in this order
        g.run([&, t] { fs[static_cast<std::size_t>(t)] = parent.dup_async(tagged(t, tags_on)); });
      g.wait();
    });
    for (int t = 0; t < kTags; ++t) {
      strata::Communicator c = fs[static_cast<std::size_t>(t)].get();
      if (c.size() != parent.size() || c.rank() != parent.rank()) {
        std::fprintf(stderr, "rank %d: FAILED: dup of tag %d has rank %d of %d\n", me, t, c.rank(), c.size());
        return 1;
      }
      if (!verify(c, 1 + t + 8 * r, "a communicator made in a task")) return 1;
      ++made;
    }
  }
  parent.barrier().get();
  std::printf("create_rank: tasks OK (rank %d, %ld communicators)\n", me, made);
  return 0;
}

int threads_mode(strata::Engine& engine, long each) {
  strata::Communicator parent = engine.world().dup(kTags);
  std::mt19937 rng(static_cast<unsigned>(777 + 13 * me));
  std::vector<int> order(kTags);
  for (int t = 0; t < kTags; ++t) order[static_cast<std::size_t>(t)] = t;
  std::shuffle(order.begin(), order.end(), rng);
  std::atomic<int> bad{0};
  std::atomic<long> made{0};
  std::vector<std::thread> threads;
  for (int t : order)
    threads.emplace_back([&, t] {
      try {
        for (long j = 0; j < each; ++j) {
          strata::CreateOptions o = tagged(t, true);
          o.tags = j % 3 == 0 ? 2 : 0;  // some with a tag lane of their own (a second id)
          strata::Communicator c = parent.dup_async(o).get();
          if (!verify(c, 100 + t, "a communicator made by a thread")) ++bad;
          if (o.tags > 0) {
            std::int64_t x = c.rank(), y = -1;
            strata::CollOptions co;
            co.tag = 1;
            c.allreduce(&x, &y, 1, strata::Datatype::int64, strata::Op::max, co).get();
            if (y != c.size() - 1) ++bad;
          }
          ++made;
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: FAILED: thread of tag %d: %s\n", me, t, e.what());
        ++bad;
      }
    });
  for (auto& th : threads) th.join();
  if (bad != 0) return 1;
  parent.barrier().get();
  std::printf("create_rank: threads OK (rank %d, %ld communicators)\n", me, made.load());
  return 0;
}

bool expect_error(const char* what, const char* arg, const std::function<void()>& f) {
  try {
    f();
  } catch (const strata::Error& e) {
    const std::string m = e.what();
    if (e.errc() == strata::Errc::invalid_argument && m.find(arg) != std::string::npos &&
        m.find("rank " + std::to_string(me)) != std::string::npos)
      return true;
    std::fprintf(stderr, "rank %d: FAILED: %s: wrong error: %s\n", me, what, m.c_str());
    return false;
  }
  std::fprintf(stderr, "rank %d: FAILED: %s accepted\n", me, what);
  return false;
}

int mixed_mode(strata::Engine& engine) {
  strata::Communicator w = engine.world();
  const int n = w.size();
  // Untagged: the allreduce posted while the split runs waits behind it.
  for (int round = 0; round < 20; ++round) {
    auto fs = w.split_async(w.rank() % 2, -w.rank());
    std::int64_t x = w.rank() + round, y = -1;
    auto fa = w.allreduce(&x, &y, 1, strata::Datatype::int64, strata::Op::sum);
    auto fd = w.dup_async();
    std::int64_t x2 = 1, y2 = -1;
    auto fb = w.allreduce(&x2, &y2, 1, strata::Datatype::int64, strata::Op::sum);
    strata::Communicator half = fs.get();
    strata::Communicator copy = fd.get();
    fa.get();
    fb.get();
    if (y != static_cast<std::int64_t>(n) * (n - 1) / 2 + static_cast<std::int64_t>(n) * round || y2 != n) {
      std::fprintf(stderr, "rank %d: FAILED: allreduce behind a creation: %lld, %lld\n", me, static_cast<long long>(y),
                   static_cast<long long>(y2));
      return 1;
    }
    const int want = (n - w.rank() % 2 + 1) / 2;
    if (half.size() != want || half.world_rank(0) != (n - 1 - (n - 1 - w.rank() % 2) % 2)) {
      std::fprintf(stderr, "rank %d: FAILED: split by parity: size %d (want %d), first member %d\n", me, half.size(),
                   want, half.world_rank(0));
      return 1;
    }
    if (!verify(half, 3 + round, "split_async by parity") || !verify(copy, 5 + round, "dup_async")) return 1;
  }
  // A negative color gives an invalid handle, on that rank only.
  strata::Communicator some = w.split_async(w.rank() == 0 ? -1 : 0, 0).get();
  if (some.valid() != (w.rank() != 0) || (some.valid() && some.size() != n - 1)) {
    std::fprintf(stderr, "rank %d: FAILED: negative color\n", me);
    return 1;
  }
  if (some.valid() && !verify(some, 11, "split without rank 0")) return 1;
  // Tags for the new communicator, made without blocking.
  strata::CreateOptions o;
  o.tags = 4;
  strata::Communicator t4 = w.dup_async(o).get();
  if (t4.tags() != 4) {
    std::fprintf(stderr, "rank %d: FAILED: tags() = %d\n", me, t4.tags());
    return 1;
  }
  // Argument errors: named, on this rank, before anything is posted.
  bool ok = expect_error("tag on a communicator without tags", "'tag'", [&] {
    strata::CreateOptions b;
    b.tag = 0;
    (void)w.dup_async(b);
  });
  ok = ok && expect_error("tag out of range", "'tag'", [&] {
         strata::CreateOptions b;
         b.tag = 4;
         (void)t4.dup_async(b);
       });
  ok = ok && expect_error("tags out of range", "'tags'", [&] {
         strata::CreateOptions b;
         b.tags = 17;
         (void)w.split_async(0, 0, b);
       });
  if (!ok) return 1;
  w.barrier().get();
  std::printf("create_rank: mixed OK (rank %d)\n", me);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    strata::Engine engine;
    me = engine.rank();
    if (mode == "--tasks" && argc > 2) return tasks_mode(engine, std::atol(argv[2]));
    if (mode == "--threads" && argc > 2) return threads_mode(engine, std::atol(argv[2]));
    if (mode == "--mixed") return mixed_mode(engine);
    std::fprintf(stderr, "usage: create_rank --tasks N | --threads N | --mixed\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: FAILED: %s\n", me, e.what());
    return 1;
  }
}
