// One-sided halo exchange on a periodic 1-D domain with a strata::Window.
//
// Each rank owns kCells cells and exposes a ghost area of 2 * kHalo cells:
// [0, kHalo) receives the left neighbour's last kHalo cells, [kHalo, 2 kHalo)
// the right neighbour's first kHalo cells. put_signal() writes a face and
// counts a signal at the target once the data is visible there; the target
// waits for two. Flow control: after reading its ghosts a rank signals both
// neighbours "free", and a rank writes the next faces only after its two
// neighbours said so.
//   strata-run -n 3 -- ./halo   ->  "halo: 3 ranks, 20 exchanges, ghosts verified: OK"
#include <cstdint>
#include <cstdio>
#include <vector>

#include <strata/strata.hpp>

namespace {
constexpr std::size_t kCells = 1000, kHalo = 16;
constexpr std::uint32_t kData = 1, kFree = 2;
double value(long global, int it) { return static_cast<double>(global) + 1e6 * it; }
}  // namespace

int main() {
  strata::Engine engine;
  strata::Communicator& world = engine.world();
  const int n = world.size(), r = world.rank();
  const int left = (r - 1 + n) % n, right = (r + 1) % n;
  const long total = static_cast<long>(kCells) * n;

  std::vector<double> cells(kCells), ghost(2 * kHalo);
  strata::Window win = world.create_window(ghost.data(), ghost.size() * sizeof(double));  // collective
  constexpr int kIters = 20;
  for (int it = 0; it < kIters; ++it) {
    for (std::size_t i = 0; i < kCells; ++i) cells[i] = value(static_cast<long>(r * kCells + i), it);
    if (it > 0) win.wait(kFree, 2).get();  // both neighbours have read what this rank wrote last time
    const std::size_t face = kHalo * sizeof(double);
    strata::Future<void> to_left = win.put_signal(left, face, cells.data(), face, kData);  // its right ghost
    strata::Future<void> to_right = win.put_signal(right, 0, cells.data() + kCells - kHalo, face, kData);
    win.wait(kData, 2).get();  // both ghosts of this rank are filled
    for (std::size_t j = 0; j < kHalo; ++j) {
      const long from_left = (static_cast<long>(left * kCells + kCells - kHalo + j)) % total;
      const long from_right = static_cast<long>(right * kCells + j);
      if (ghost[j] != value(from_left, it) || ghost[kHalo + j] != value(from_right, it)) {
        std::fprintf(stderr, "rank %d, exchange %d: wrong ghost cell %zu\n", r, it, j);
        return 1;
      }
    }
    to_left.get();  // the faces may be overwritten now
    to_right.get();
    strata::Future<void> f1 = win.signal(left, kFree), f2 = win.signal(right, kFree);
    f1.get();
    f2.get();
  }
  win.free();  // collective
  if (r == 0) std::printf("halo: %d ranks, %d exchanges, ghosts verified: OK\n", n, kIters);
  return 0;
}
