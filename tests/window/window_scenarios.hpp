// Window scenarios shared by the in-process test (ranks as threads) and the
// rank program run under strata-run (win_rank.cpp). Each throws
// std::runtime_error naming the rank and what differed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "strata/strata.hpp"

namespace win_test {

inline void require(bool ok, int rank, const std::string& what) {
  if (!ok) throw std::runtime_error("rank " + std::to_string(rank) + ": " + what);
}

inline double value(int src, int round, std::size_t i) {
  return src * 1.0e6 + round * 1.0e3 + static_cast<double>(i % 977);
}

/// Ring: every rank put_signals a block into its right neighbour's single slot,
/// for several sizes and rounds; the slot is reused only after the receiver
/// signalled "free" (tag 2), so a verified round proves the flow control.
inline void ring(strata::Communicator& comm, std::size_t max_doubles, int rounds) {
  const int n = comm.size(), me = comm.rank();
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  std::vector<double> slot(max_doubles, -1.0), src(max_doubles);
  strata::Window win = comm.create_window(slot.data(), slot.size() * sizeof(double));
  require(win.size() == n && win.rank() == me, me, "window rank/size");
  require(win.bytes(right) == max_doubles * sizeof(double), me, "bytes(right)");
  std::uint64_t frees = 0;
  for (std::size_t len : {std::size_t{1}, std::min<std::size_t>(1000, max_doubles), max_doubles}) {
    for (int r = 0; r < rounds; ++r) {
      if (frees > 0) win.wait(/*tag=*/2, 1).get();  // right neighbour unpacked the previous block
      for (std::size_t i = 0; i < len; ++i) src[i] = value(me, r, i) + static_cast<double>(len);
      strata::Future<void> sent = win.put_signal(right, 0, src.data(), len * sizeof(double), /*tag=*/1);
      win.wait(/*tag=*/1, 1).get();
      for (std::size_t i = 0; i < len; ++i)
        if (slot[i] != value(left, r, i) + static_cast<double>(len))
          require(false, me,
                  "ring: len " + std::to_string(len) + " round " + std::to_string(r) + " slot[" + std::to_string(i) +
                      "] = " + std::to_string(slot[i]) + ", expected " +
                      std::to_string(value(left, r, i) + static_cast<double>(len)));
      win.signal(left, /*tag=*/2).get();  // my slot is free again
      ++frees;
      sent.get();
    }
  }
  win.wait(2, 1).get();  // the last "free" of the right neighbour
  require(win.arrived(1) == frees && win.arrived(2) == frees, me, "arrived() counts");
  win.free();
}

/// Many puts in flight: every rank writes @p per_peer blocks to every rank
/// (itself included) into distinct offsets, all posted before any wait;
/// then one wait for all of them, and a barrier-free check.
inline void many_in_flight(strata::Communicator& comm, int per_peer, std::size_t block) {
  const int n = comm.size(), me = comm.rank();
  const std::size_t per_src = static_cast<std::size_t>(per_peer) * block;
  std::vector<double> mem(static_cast<std::size_t>(n) * per_src, 0.0);
  std::vector<double> src(static_cast<std::size_t>(n) * per_src);
  strata::Window win = comm.create_window(mem.data(), mem.size() * sizeof(double));
  std::vector<strata::Future<void>> fs;
  for (int t = 0; t < n; ++t) {
    for (int k = 0; k < per_peer; ++k) {
      double* s =
          &src[(static_cast<std::size_t>(t) * static_cast<std::size_t>(per_peer) + static_cast<std::size_t>(k)) *
               block];
      for (std::size_t i = 0; i < block; ++i) s[i] = value(me, k, i) + t;
      const std::size_t off = (static_cast<std::size_t>(me) * per_src + static_cast<std::size_t>(k) * block);
      fs.push_back(win.put_signal(t, off * sizeof(double), s, block * sizeof(double), /*tag=*/7));
    }
  }
  // Split waits (consuming): first half, then the rest.
  const auto total = static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(per_peer);
  strata::Future<void> a = win.wait(7, total / 2);
  strata::Future<void> b = win.wait(7, total - total / 2);
  a.get();
  b.get();
  for (auto& f : fs) f.get();
  for (int s = 0; s < n; ++s)
    for (int k = 0; k < per_peer; ++k)
      for (std::size_t i = 0; i < block; ++i) {
        const double got = mem[static_cast<std::size_t>(s) * per_src + static_cast<std::size_t>(k) * block + i];
        if (got != value(s, k, i) + me)
          require(false, me,
                  "many_in_flight: from " + std::to_string(s) + " block " + std::to_string(k) + " [" +
                      std::to_string(i) + "] = " + std::to_string(got));
      }
  require(win.arrived(7) == total, me, "arrived(7) = " + std::to_string(win.arrived(7)));
  win.free();
}

/// put (no signal) completed, then a signal: the data is there when the signal is.
inline void put_then_signal(strata::Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  // Sizes differ per rank: rank r exposes 64 * (r + 1) bytes.
  std::vector<std::uint64_t> mem(8 * static_cast<std::size_t>(me + 1), 0);
  strata::Window win = comm.create_window(mem.data(), mem.size() * sizeof(std::uint64_t));
  for (int r = 0; r < n; ++r) require(win.bytes(r) == 64 * static_cast<std::size_t>(r + 1), me, "bytes(r)");
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  std::vector<std::uint64_t> src(8 * static_cast<std::size_t>(right + 1));
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = 1000 * static_cast<std::uint64_t>(me) + i;
  win.put(right, 0, src.data(), src.size() * sizeof(std::uint64_t)).get();
  win.signal(right, 5).get();
  win.wait(5).get();
  for (std::size_t i = 0; i < mem.size(); ++i)
    require(mem[i] == 1000 * static_cast<std::uint64_t>(left) + i, me, "put_then_signal: data not there");
  win.wait(5, 0).get();  // count 0: at once
  win.free();
}

/// Expects @p f to throw strata::Error with @p code and a message containing every @p parts.
template <class F>
void expect_error(int me, const char* what, strata::Errc code, const std::vector<std::string>& parts, F&& f) {
  try {
    f();
  } catch (const strata::Error& e) {
    require(e.errc() == code, me, std::string(what) + ": wrong code: " + e.what());
    for (const auto& p : parts)
      require(std::string(e.what()).find(p) != std::string::npos, me,
              std::string(what) + ": message '" + e.what() + "' lacks '" + p + "'");
    return;
  }
  require(false, me, std::string(what) + ": no error");
}

/// Bad input: errors naming the argument and the rank, before anything moves; use after free.
inline void bad_input(strata::Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  using strata::Errc;
  std::vector<char> mem(me == 0 ? 0 : 128);  // rank 0 exposes nothing (signals only)
  const std::string rk = "rank " + std::to_string(me);
  expect_error(me, "create_window null", Errc::invalid_argument, {"'base'", rk},
               [&] { (void)comm.create_window(nullptr, 8); });
  strata::Window win = comm.create_window(mem.empty() ? nullptr : mem.data(), mem.size());
  char buf[256] = {};
  expect_error(me, "target -1", Errc::invalid_argument, {"argument 'target' = -1", rk, "put_signal"},
               [&] { (void)win.put_signal(-1, 0, buf, 8, 1); });
  expect_error(me, "target n", Errc::invalid_argument, {"argument 'target' = " + std::to_string(n), rk},
               [&] { (void)win.signal(n, 1); });
  const int other = n > 1 ? 1 : 0;
  const std::size_t obytes = win.bytes(other);
  expect_error(me, "beyond", Errc::invalid_argument, {"'target_offset' + 'bytes'", rk},
               [&] { (void)win.put(other, obytes - 8, buf, 16); });
  expect_error(me, "huge offset", Errc::invalid_argument, {"'target_offset'", rk},
               [&] { (void)win.put_signal(other, ~std::size_t{0}, buf, 16, 1); });
  expect_error(me, "null src", Errc::invalid_argument, {"argument 'src' is null", rk},
               [&] { (void)win.put(other, 0, nullptr, 8); });
  expect_error(me, "into an empty window", Errc::invalid_argument, {"rank 0's window (0 bytes)", rk},
               [&] { (void)win.put_signal(0, 0, buf, 1, 1); });
  // A zero-byte put_signal into the empty window is a plain signal: allowed.
  win.put_signal(0, 0, nullptr, 0, 11).get();
  if (me == 0) win.wait(11, static_cast<std::uint64_t>(n)).get();
  expect_error(me, "bytes(-1)", Errc::invalid_argument, {"argument 'target'"}, [&] { (void)win.bytes(-1); });
  strata::Window copy = win;  // handles share the window
  win.free();
  expect_error(me, "use after free", Errc::invalid_argument, {"freed", rk}, [&] { (void)copy.signal(0, 1); });
  expect_error(me, "wait after free", Errc::invalid_argument, {"freed"}, [&] { (void)copy.wait(1); });
  expect_error(me, "double free", Errc::invalid_argument, {"already freed"}, [&] { copy.free(); });
  strata::Window none;
  expect_error(me, "default handle", Errc::invalid_argument, {"invalid"}, [&] { (void)none.signal(0, 1); });
}

/// Every scenario in order (each creates and frees its own window).
inline void all(strata::Communicator& comm, bool quick) {
  ring(comm, quick ? 4096 : (std::size_t{1} << 18), quick ? 3 : 10);
  many_in_flight(comm, quick ? 16 : 64, quick ? 16 : 200);
  put_then_signal(comm);
  bad_input(comm);
  // Windows on a split communicator: signals route by window, not by communicator.
  strata::Communicator half = comm.split(comm.rank() % 2, comm.rank());
  if (half.size() > 1) ring(half, 256, 2);
  ring(comm, 64, 2);
}

}  // namespace win_test
