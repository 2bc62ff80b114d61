// stream_rank: the stream test. Two threads per rank, each on its own
// communicator (dups of the world), issue N mixed small and medium loose
// collectives back to back without waiting (bounded only by how many result
// buffers the test keeps: up to --window outstanding per thread); every result
// is checked against a sequential reference. Prints "stream_rank: OK".
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "strata/strata.hpp"

namespace {

std::int64_t val(int rank, int call, std::size_t i) {
  return static_cast<std::int64_t>(rank + 1) * 1000003 + call * 7919 + static_cast<std::int64_t>(i % 977);
}

struct Pending {
  int call = 0;
  int kind = 0;
  std::size_t count = 0;
  std::vector<std::int64_t> send, recv;
  strata::Future<void> fut;
};

// Returns the number of wrong results.
int check(const Pending& p, int me, int n) {
  int bad = 0;
  const std::size_t c = p.count;
  switch (p.kind) {
    case 0:  // allreduce sum
      for (std::size_t i = 0; i < c; ++i) {
        std::int64_t want = 0;
        for (int r = 0; r < n; ++r) want += val(r, p.call, i);
        bad += p.recv[i] != want;
      }
      break;
    case 1:  // broadcast from root call % n
      for (std::size_t i = 0; i < c; ++i) bad += p.recv[i] != val(p.call % n, p.call, i);
      break;
    case 2:  // allgather
      for (int r = 0; r < n; ++r)
        for (std::size_t i = 0; i < c; ++i) bad += p.recv[static_cast<std::size_t>(r) * c + i] != val(r, p.call, i);
      break;
    case 3:  // alltoall: block j of rank r's send is val(r, call, j*c + i)
      for (int r = 0; r < n; ++r)
        for (std::size_t i = 0; i < c; ++i)
          bad += p.recv[static_cast<std::size_t>(r) * c + i] != val(r, p.call, static_cast<std::size_t>(me) * c + i);
      break;
    default:  // reduce_scatter_block: block me of the sum
      for (std::size_t i = 0; i < c; ++i) {
        std::int64_t want = 0;
        for (int r = 0; r < n; ++r) want += val(r, p.call, static_cast<std::size_t>(me) * c + i);
        bad += p.recv[i] != want;
      }
  }
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  int total = 10000;
  std::size_t window = 256;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--calls" && i + 1 < argc)
      total = std::stoi(argv[++i]);
    else if (a == "--window" && i + 1 < argc)
      window = std::stoul(argv[++i]);
    else {
      std::fprintf(stderr, "stream_rank: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  int me = -1;
  try {
    strata::Engine engine;
    me = engine.rank();
    const int n = engine.size();
    strata::Communicator comms[2] = {engine.world().dup(), engine.world().dup()};
    std::atomic<int> wrong{0}, done{0};
    auto worker = [&](int t) {
      strata::Communicator& comm = comms[t];
      std::deque<std::unique_ptr<Pending>> q;
      auto retire = [&] {
        std::unique_ptr<Pending> p = std::move(q.front());
        q.pop_front();
        p->fut.get();
        wrong.fetch_add(check(*p, me, n));
        done.fetch_add(1);
      };
      for (int k = 0; k < total / 2; ++k) {
        const int call = 2 * k + t;
        auto p = std::make_unique<Pending>();
        p->call = call;
        p->kind = call % 5;
        // Mostly small (8..64 elements), every 16th medium (8 KiB .. 64 KiB).
        p->count = (call % 16 == 0) ? 1024 + static_cast<std::size_t>(call % 7) * 1000
                                    : 1 + static_cast<std::size_t>(call % 8) * 8;
        const std::size_t c = p->count;
        const auto un = static_cast<std::size_t>(n);
        switch (p->kind) {
          case 0:
            p->send.resize(c);
            for (std::size_t i = 0; i < c; ++i) p->send[i] = val(me, call, i);
            p->recv.assign(c, -1);
            p->fut = comm.allreduce(p->send.data(), p->recv.data(), c, strata::Datatype::int64, strata::Op::sum);
            break;
          case 1:
            p->recv.resize(c);
            for (std::size_t i = 0; i < c; ++i) p->recv[i] = me == call % n ? val(me, call, i) : -1;
            p->fut = comm.broadcast(p->recv.data(), c, strata::Datatype::int64, call % n);
            break;
          case 2:
            p->send.resize(c);
            for (std::size_t i = 0; i < c; ++i) p->send[i] = val(me, call, i);
            p->recv.assign(c * un, -1);
            p->fut = comm.allgather(p->send.data(), c, p->recv.data(), strata::Datatype::int64);
            break;
          case 3:
            p->send.resize(c * un);
            for (std::size_t i = 0; i < c * un; ++i) p->send[i] = val(me, call, i);
            p->recv.assign(c * un, -1);
            p->fut = comm.alltoall(p->send.data(), p->recv.data(), c, strata::Datatype::int64);
            break;
          default:
            p->send.resize(c * un);
            for (std::size_t i = 0; i < c * un; ++i) p->send[i] = val(me, call, i);
            p->recv.assign(c, -1);
            p->fut =
                comm.reduce_scatter_block(p->send.data(), p->recv.data(), c, strata::Datatype::int64, strata::Op::sum);
        }
        q.push_back(std::move(p));
        if (q.size() > window) retire();
      }
      while (!q.empty()) retire();
    };
    std::thread t1(worker, 1);
    worker(0);
    t1.join();
    engine.world().barrier().get();
    if (wrong.load() != 0) {
      std::fprintf(stderr, "rank %d: %d wrong elements over %d collectives\n", me, wrong.load(), done.load());
      return 1;
    }
    if (me == 0) std::printf("stream_rank: OK (%d collectives per rank checked)\n", done.load());
    return done.load() == total / 2 * 2 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: exception: %s\n", me, e.what());
    return 1;
  }
}
