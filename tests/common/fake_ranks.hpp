// N ranks in one process for the compiler tests (tests/collectives*/
// test_*_compile.cpp): one executor per rank over a shared FakeWorld (manual
// mode, operations released in random order) and a registered window of two
// slots per rank. run() starts every rank's slice as one instance and drives
// the fake transport until all of them finished.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "strata/collectives/compile.hpp"
#include "strata/dag/executor.hpp"
#include "strata/transport/fake.hpp"

namespace fake_ranks {

/// Where the n ranks of a test group sit.
enum class Place { one, numa4, hosts2, cyclic, packages };

/// A communicator group of @p n ranks placed as @p p.
inline strata::coll::Group make_group(int n, Place p, std::size_t slot_bytes) {
  strata::coll::Group g;
  g.world_size = n;
  for (int r = 0; r < n; ++r) {
    g.world.push_back(r);
    switch (p) {
      case Place::one:
        g.host.push_back(0);
        g.numa.push_back(0);
        break;
      case Place::numa4:  // package:2 numa:2 core:2 style: one host, NUMA region r/2
        g.host.push_back(0);
        g.numa.push_back(r / 2);
        break;
      case Place::hosts2:  // block placement over two hosts
        g.host.push_back(r * 2 / n);
        g.numa.push_back(r % 2);
        break;
      case Place::cyclic:  // cyclic placement: subtrees are not rank-contiguous
        g.host.push_back(r % 2);
        g.numa.push_back((r / 2) % 2);
        break;
      case Place::packages:  // hosts of 8 ranks, 'package:2 numa:2 core:2 pu:1' each
        g.host.push_back(r / 8);
        g.package.push_back((r % 8) / 4);
        g.numa.push_back((r % 8) / 2);
        break;
    }
  }
  g.slot_bytes = slot_bytes;
  g.credits = 2;
  return g;
}

class FakeRanks {
 public:
  /// What one rank binds: its input and its output buffer (nullptr: not bound).
  struct Io {
    void* input = nullptr;
    void* output = nullptr;
  };

  /// Flag words per rank when with_flags() is on (memory-protocol plans).
  static constexpr std::size_t kFlagWords = 256;
  /// Word of the flag wake words ("somebody waits", then one per rank).
  static constexpr std::uint32_t kFlagWake = 16;
  /// with_flags(): every rank's flag words are the first kFlagBytes of its
  /// window (as the engine binds them for mapped plans: words past them
  /// address the rest of the window; Group::mapped_word = mapped_at / 4).
  static constexpr std::size_t kFlagBytes = kFlagWords * 4;

  FakeRanks(int n, std::size_t slot_bytes, std::uint64_t seed)
      : n_(n), slot_(slot_bytes), world_(n, strata::transport::FakeMode::manual, seed) {
    keys_.resize(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {
      strata::dag::ExecutorOptions o;
      o.arena = &arena_;
      ex_.push_back(std::make_unique<strata::dag::Executor>(world_.endpoint(r), o));
      win_.emplace_back(2 * slot_bytes, 0);
      EXPECT_TRUE(world_.endpoint(r)
                      .register_memory(win_.back().data(), 2 * slot_bytes, &keys_[static_cast<std::size_t>(r)])
                      .is_ok());
    }
  }
  ~FakeRanks() {
    for (int r = 0; r < n_; ++r)
      world_.endpoint(r).deregister_memory(win_[static_cast<std::size_t>(r)].data(), 2 * slot_);
  }
  /// Binds every rank's flag words (the start of its window) and every
  /// window as mapped (PeerKey::mapped), as the engine does for a one-host
  /// communicator (mapped plans, window flags). Mapped plans' slot 1 (the
  /// slot run() binds) is at @p mapped_at + @p mapped_slot_bytes of every
  /// window (Group::mapped_at >= kFlagBytes, Group::mapped_slot_bytes).
  void with_flags(std::size_t mapped_at = kFlagBytes, std::size_t mapped_slot_bytes = 0) {
    flags_ = true;
    mapped_slot_ = mapped_at + mapped_slot_bytes;
    for (int r = 0; r < n_; ++r)
      flag_table_.push_back(reinterpret_cast<std::atomic<std::uint32_t>*>(win_[static_cast<std::size_t>(r)].data()));
  }
  /// Moves the mapped slot run() binds by @p bytes, and binds the same
  /// Bindings::shift (what the engine does for the mapped slots beyond the
  /// credits, Group::mapped_slots).
  void shift_mapped_slot(std::uint64_t bytes) { shift_ = bytes; }
  FakeRanks(const FakeRanks&) = delete;
  FakeRanks& operator=(const FakeRanks&) = delete;

  /// Starts plans[r] on every rank (the last rank first) with io(r) and window
  /// slot 1 as its scratch output, as instance @p seq; then releases operations
  /// in random order until every rank finished (60 s at most). False when a
  /// start or an instance failed or time ran out (a start error and the
  /// timeout are also reported as test failures).
  bool run(const std::vector<std::shared_ptr<const strata::dag::Plan>>& plans, std::uint32_t seq,
           const std::function<Io(int rank)>& io) {
    std::atomic<int> finished{0}, failed{0};
    for (int r = n_ - 1; r >= 0; --r) {
      const auto ur = static_cast<std::size_t>(r);
      const Io mine = io(r);
      strata::dag::Bindings b;
      b.inputs = {mine.input};
      b.outputs = {mine.output, win_[ur].data() + slot_, flags_ ? win_[ur].data() + mapped_slot_ + shift_ : nullptr};
      b.shift = shift_;
      for (int q = 0; q < n_; ++q)
        b.peers.push_back(
            {q, 0, keys_[static_cast<std::size_t>(q)], flags_ ? win_[static_cast<std::size_t>(q)].data() : nullptr});
      if (flags_) {
        b.flags = flag_table_.data();
        b.nflags = flag_table_.size();
        b.flag_wake = kFlagWake;
      }
      const strata::Status st = ex_[ur]->start(plans[ur], b, 0, seq, [&](const strata::Status& s) {
        if (!s.is_ok()) failed.fetch_add(1);
        finished.fetch_add(1);
      });
      if (!st.is_ok()) {
        ADD_FAILURE() << st.message();
        return false;
      }
    }
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (finished.load() < n_) {
      if (std::chrono::steady_clock::now() > limit) {
        ADD_FAILURE() << "instance " << seq << " did not finish";
        return false;
      }
      const bool moved = world_.release_random();
      std::size_t flags_moved = 0;
      for (auto& ex : ex_) flags_moved += ex->poll();  // memory-flag waits (the engine's progress hook)
      if (world_.progress_all() == 0 && !moved && flags_moved == 0) std::this_thread::yield();
    }
    return failed.load() == 0;
  }
  /// Same, numbering the instances 0, 1, ... here.
  bool run(const std::vector<std::shared_ptr<const strata::dag::Plan>>& plans, const std::function<Io(int rank)>& io) {
    return run(plans, seq_++, io);
  }

 private:
  int n_;
  std::size_t slot_;
  tbb::task_arena arena_{2, 0};
  strata::transport::FakeWorld world_;
  std::vector<std::unique_ptr<strata::dag::Executor>> ex_;
  std::vector<std::vector<char>> win_;
  std::vector<strata::transport::RemoteKey> keys_;
  std::vector<std::atomic<std::uint32_t>*> flag_table_;
  bool flags_ = false;
  std::size_t mapped_slot_ = 0;
  std::uint64_t shift_ = 0;
  std::uint32_t seq_ = 0;
};

/// @p v's data, or nullptr when it is empty (an unbound buffer).
template <class T>
void* data_or_null(std::vector<T>& v) {
  return v.empty() ? nullptr : v.data();
}

}  // namespace fake_ranks
