// Ring, recursive doubling / halving, Bruck, pairwise and token-ring schedules.
#include "patterns/schedule.hpp"

#include <algorithm>

namespace strata::patterns {

void Schedule::reset(int rank, int size, int num_blocks, BlockSpace space, bool rank_ordered) {
  if (size < 1) detail::bad_argument("Schedule", "size", size);
  if (rank < 0 || rank >= size) detail::bad_argument("Schedule", "rank", rank);
  rank_ = rank;
  size_ = size;
  num_blocks_ = num_blocks;
  space_ = space;
  rank_ordered_ = rank_ordered;
  steps_.clear();
  send_ranges_.clear();
  recv_ranges_.clear();
}

Step& Schedule::add_step() {
  Step s;
  s.send_begin = s.send_end = static_cast<int>(send_ranges_.size());
  s.recv_begin = s.recv_end = static_cast<int>(recv_ranges_.size());
  steps_.push_back(s);
  return steps_.back();
}

void Schedule::add_range(std::vector<BlockRange>& pool, int& end, int first, int count, int num_blocks) {
  if (count <= 0) return;
  first = mod(first, num_blocks);
  const int head = std::min(count, num_blocks - first);
  pool.push_back({first, head});
  ++end;
  if (count > head) {
    pool.push_back({0, count - head});
    ++end;
  }
}

void Schedule::add_send(int first, int count) {
  add_range(send_ranges_, steps_.back().send_end, first, count, num_blocks_);
}
void Schedule::add_recv(int first, int count) {
  add_range(recv_ranges_, steps_.back().recv_end, first, count, num_blocks_);
}

void ring_allgather(int rank, int n, Schedule& out) {
  out.reset(rank, n, n, BlockSpace::rank_blocks, true);
  for (int s = 0; s < n - 1; ++s) {
    Step& st = out.add_step();
    st.send_to = mod(rank + 1, n);
    st.recv_from = mod(rank - 1, n);
    out.add_send(rank - s, 1);
    out.add_recv(rank - s - 1, 1);
  }
}

void ring_reduce_scatter(int rank, int n, Schedule& out) {
  out.reset(rank, n, n, BlockSpace::rank_blocks, false);
  for (int s = 0; s < n - 1; ++s) {
    Step& st = out.add_step();
    st.send_to = mod(rank + 1, n);
    st.recv_from = mod(rank - 1, n);
    st.action = RecvAction::reduce;
    out.add_send(rank - s - 1, 1);
    out.add_recv(rank - s - 2, 1);
  }
}

namespace {

// Fold of a non-power-of-two group: p survivors, e = n - p extra ranks; the
// odd ranks below 2e fold into their even neighbour.
struct Fold {
  int p = 1;
  int e = 0;
  explicit Fold(int n) : p(floor_pow2(n)), e(n - floor_pow2(n)) {}
  /// Survivor index of real rank r, -1 if r folds away.
  [[nodiscard]] int survivor(int r) const { return r < 2 * e ? (r % 2 == 0 ? r / 2 : -1) : r - e; }
  /// First real rank (block) represented by survivor i; first(p) == n.
  [[nodiscard]] int first(int i) const { return i < e ? 2 * i : i + e; }
  [[nodiscard]] int real(int i) const { return first(i); }
};

enum class Payload { own_block, all_blocks, whole };

// Fold step: odd r < 2e sends to r-1.
void fold_step(int rank, const Fold& f, int n, Payload what, RecvAction action, Schedule& out) {
  Step& st = out.add_step();
  if (rank >= 2 * f.e) return;
  const int count = what == Payload::whole ? 1 : (what == Payload::all_blocks ? n : 1);
  if (rank % 2 == 1) {
    st.send_to = rank - 1;
    out.add_send(what == Payload::own_block ? rank : 0, count);
  } else {
    st.recv_from = rank + 1;
    st.action = action;
    st.recv_is_left = false;
    out.add_recv(what == Payload::own_block ? rank + 1 : 0, count);
  }
}

void recursive_doubling(int rank, int n, bool allreduce, Schedule& out) {
  const Fold f(n);
  if (allreduce) {
    out.reset(rank, n, 1, BlockSpace::whole, true);
  } else {
    out.reset(rank, n, n, BlockSpace::rank_blocks, true);
  }
  const RecvAction action = allreduce ? RecvAction::reduce : RecvAction::copy;
  if (f.e > 0) fold_step(rank, f, n, allreduce ? Payload::whole : Payload::own_block, action, out);
  const int i = f.survivor(rank);
  for (int d = 1; d < f.p; d *= 2) {
    Step& st = out.add_step();
    if (i < 0) continue;
    const int j = i ^ d;
    st.send_to = f.real(j);
    st.recv_from = f.real(j);
    st.action = action;
    st.recv_is_left = j < i;
    if (allreduce) {
      out.add_send(0, 1);
      out.add_recv(0, 1);
    } else {
      const int mine = i & ~(d - 1);
      const int theirs = j & ~(d - 1);
      out.add_send(f.first(mine), f.first(mine + d) - f.first(mine));
      out.add_recv(f.first(theirs), f.first(theirs + d) - f.first(theirs));
    }
  }
  if (f.e > 0) {
    Step& st = out.add_step();
    if (rank < 2 * f.e) {
      const int even = rank - rank % 2;
      const bool sender = rank % 2 == 0;
      if (sender) {
        st.send_to = rank + 1;
      } else {
        st.recv_from = rank - 1;
      }
      auto add = [&](int first, int count) {
        if (sender) {
          out.add_send(first, count);
        } else {
          out.add_recv(first, count);
        }
      };
      if (allreduce) {
        add(0, 1);
      } else {  // every block except the odd rank's own
        add(0, even + 1);
        add(even + 2, n - even - 2);
      }
    }
  }
}

}  // namespace

void recursive_doubling_allgather(int rank, int n, Schedule& out) { recursive_doubling(rank, n, false, out); }
void recursive_doubling_allreduce(int rank, int n, Schedule& out) { recursive_doubling(rank, n, true, out); }

void recursive_halving_reduce_scatter(int rank, int n, Schedule& out) {
  const Fold f(n);
  out.reset(rank, n, n, BlockSpace::rank_blocks, false);
  if (f.e > 0) fold_step(rank, f, n, Payload::all_blocks, RecvAction::reduce, out);
  const int i = f.survivor(rank);
  for (int d = f.p / 2; d >= 1; d /= 2) {
    Step& st = out.add_step();
    if (i < 0) continue;
    const int j = i ^ d;
    const int lo = i & ~(2 * d - 1);
    const int keep = i < j ? lo : lo + d;
    const int give = i < j ? lo + d : lo;
    st.send_to = f.real(j);
    st.recv_from = f.real(j);
    st.action = RecvAction::reduce;
    st.recv_is_left = j < i;
    out.add_send(f.first(give), f.first(give + d) - f.first(give));
    out.add_recv(f.first(keep), f.first(keep + d) - f.first(keep));
  }
  if (f.e > 0) {
    Step& st = out.add_step();
    if (rank < 2 * f.e) {
      if (rank % 2 == 0) {
        st.send_to = rank + 1;
        out.add_send(rank + 1, 1);
      } else {
        st.recv_from = rank - 1;
        out.add_recv(rank, 1);
      }
    }
  }
}

void bruck_allgather(int rank, int n, Schedule& out) {
  out.reset(rank, n, n, BlockSpace::rank_blocks, true);
  for (long long d = 1; d < n; d *= 2) {
    const int dd = static_cast<int>(d);
    const int cnt = std::min(dd, n - dd);
    Step& st = out.add_step();
    st.send_to = mod(rank - dd, n);
    st.recv_from = mod(rank + dd, n);
    out.add_send(rank, cnt);
    out.add_recv(rank + dd, cnt);
  }
}

void bruck_alltoall(int rank, int n, Schedule& out) {
  out.reset(rank, n, n, BlockSpace::positions, true);
  for (long long d = 1; d < n; d *= 2) {
    const int dd = static_cast<int>(d);
    Step& st = out.add_step();
    st.send_to = mod(rank + dd, n);
    st.recv_from = mod(rank - dd, n);
    for (long long start = d; start < n; start += 2 * d) {
      const int s0 = static_cast<int>(start);
      const int cnt = std::min(dd, n - s0);
      out.add_send(s0, cnt);
      out.add_recv(s0, cnt);
    }
  }
}

void pairwise_alltoall(int rank, int n, Schedule& out) {
  out.reset(rank, n, n, BlockSpace::send_recv, true);
  for (int s = 1; s < n; ++s) {
    Step& st = out.add_step();
    st.send_to = mod(rank + s, n);
    st.recv_from = mod(rank - s, n);
    out.add_send(rank + s, 1);
    out.add_recv(rank - s, 1);
  }
}

TokenRingRole token_ring(int rank, int n, int root) noexcept {
  TokenRingRole role;
  if (n < 1 || rank < 0 || rank >= n || root < 0 || root >= n || rank == root) return role;
  role.position = to_virtual(rank, root, n) - 1;
  if (role.position > 0) role.token_from = mod(rank - 1, n);
  if (role.position < n - 2) role.token_to = mod(rank + 1, n);
  return role;
}

TokenSplit token_split(std::size_t bytes, std::size_t threshold, bool same_host_as_root) noexcept {
  TokenSplit s;
  if (same_host_as_root || bytes <= threshold) {
    s.after_pass = bytes;
  } else {
    s.before_pass = bytes - threshold;
    s.after_pass = threshold;
  }
  return s;
}

}  // namespace strata::patterns
