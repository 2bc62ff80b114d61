// Quick shared-memory calibration of the cost model (sim.hpp, calibrate()).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "strata/dag/reduce.hpp"
#include "strata/sim/sim.hpp"

namespace strata::sim {

namespace {

// Median seconds of `reps` runs of fn after one warm-up.
template <class F>
double median_seconds(int reps, F&& fn) {
  std::vector<double> t;
  fn();
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
  return t[t.size() / 2];
}

}  // namespace

Calibration calibrate(std::size_t bytes, std::size_t working_set) {
  if (bytes < 4096 || bytes > (std::size_t{1} << 30))
    throw Error(Errc::invalid_argument,
                "strata-sim: calibration size " + std::to_string(bytes) + " is outside [4 KiB, 1 GiB]");
  bytes &= ~std::size_t{63};
  working_set = std::clamp(working_set, 2 * bytes, std::size_t{4} << 30);
  // The plans copy fragments of up to 128 KiB (the default pipeline fragment);
  // consecutive calls walk through `working_set` bytes, as the collective's
  // buffers (input, window, output of every rank of the host) do.
  const std::size_t chunk = std::min<std::size_t>(bytes, std::size_t{128} << 10);
  const std::size_t region = (working_set / 3) & ~std::size_t{63};
  const std::size_t span = std::max(region, bytes);
  std::vector<float> a(span / 4, 1.0f), b(span / 4, 2.0f), d(span / 4, 0.0f);
  std::size_t at = 0;
  auto walk = [&](auto&& op) {
    for (std::size_t done = 0; done < bytes; done += chunk) {
      const std::size_t len = std::min(chunk, bytes - done);
      if (at + len > span) at = 0;
      op(at, len);
      at += len;
    }
    asm volatile("" : : "r"(d.data()) : "memory");
  };
  // About 50 ms per measurement whatever the size (at least 5 repetitions).
  const int reps = static_cast<int>(std::clamp<std::size_t>((std::size_t{500} << 20) / bytes, 5, 2000));
  Calibration c;
  c.bytes = bytes;
  c.working_set = 3 * span;
  auto* ab = reinterpret_cast<char*>(a.data());
  auto* db = reinterpret_cast<char*>(d.data());
  const double tc =
      median_seconds(reps, [&] { walk([&](std::size_t o, std::size_t l) { std::memcpy(db + o, ab + o, l); }); });
  const dag::ReduceKernel k = dag::reduce_kernel(dag::ReduceOp::sum, dag::DataType::f32);
  const double tr = median_seconds(reps, [&] {
    walk([&](std::size_t o, std::size_t l) { k(a.data() + o / 4, b.data() + o / 4, d.data() + o / 4, l / 4); });
  });
  c.copy_bw = static_cast<double>(bytes) / tc;
  c.reduce_bw = static_cast<double>(bytes) / tr;
  return c;
}

}  // namespace strata::sim
