// Step schedules of the symmetric collectives: ring, recursive doubling,
// recursive halving, Bruck, pairwise (rotated) exchange, and the token ring of
// scatter / gather (Mallón et al. 3.2).
//
// Each builder returns one rank's steps. Steps are globally aligned: every rank
// of a group gets the same number of steps and step i of rank a that sends to b
// matches step i of b that receives from a (ranks idle in a step have
// send_to == recv_from == -1). A compiler emits one DAG node per step and per
// fragment; the alignment is only a convenience, the DAG orders by data
// dependencies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "patterns/common.hpp"

namespace strata::patterns {

/// @brief What happens to received blocks.
enum class RecvAction : std::uint8_t {
  copy,    ///< the received blocks are stored (they were absent or are overwritten)
  reduce,  ///< the received partials are combined into the local ones
};

/// @brief One step of one rank: at most one send and one receive, concurrently.
struct Step {
  int send_to = -1;    ///< peer to send to, -1 for none
  int recv_from = -1;  ///< peer to receive from, -1 for none
  int send_begin = 0;  ///< send ranges [send_begin, send_end) (see Schedule::send_ranges)
  int send_end = 0;
  int recv_begin = 0;  ///< receive ranges [recv_begin, recv_end) (see Schedule::recv_ranges)
  int recv_end = 0;
  RecvAction action = RecvAction::copy;
  /// For RecvAction::reduce in a rank-ordered schedule: the received partial
  /// covers lower ranks than the local one, so local = received op local;
  /// otherwise local = local op received.
  bool recv_is_left = false;
};

/// @brief Meaning of block indices in a schedule.
enum class BlockSpace : std::uint8_t {
  rank_blocks,  ///< block b = the block of rank b (allgather source / reduce-scatter destination)
  whole,        ///< a single block 0 = the whole vector (allreduce)
  send_recv,    ///< sends index the send buffer by destination, receives index the receive buffer by source
  positions,    ///< positions of a working buffer (Bruck alltoall; see bruck_alltoall)
};

/// @brief One rank's schedule: steps and the block ranges they move.
///
/// @code
///   Schedule s;
///   ring_allgather(rank, n, s);
///   for (const Step& st : s.steps())
///     for (BlockRange b : s.send_ranges(st)) { /* emit a put of blocks b to st.send_to */ }
/// @endcode
class Schedule {
 public:
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  /// Number of blocks of the index space (n, or 1 for BlockSpace::whole).
  [[nodiscard]] int num_blocks() const noexcept { return num_blocks_; }
  [[nodiscard]] BlockSpace space() const noexcept { return space_; }
  /// True when reductions follow rank order (non-commutative ops allowed, using Step::recv_is_left).
  [[nodiscard]] bool rank_ordered() const noexcept { return rank_ordered_; }
  [[nodiscard]] const std::vector<Step>& steps() const noexcept { return steps_; }
  [[nodiscard]] View<BlockRange> send_ranges(const Step& s) const {
    return {send_ranges_.data() + s.send_begin, send_ranges_.data() + s.send_end};
  }
  [[nodiscard]] View<BlockRange> recv_ranges(const Step& s) const {
    return {recv_ranges_.data() + s.recv_begin, recv_ranges_.data() + s.recv_end};
  }

  /// Resets to an empty schedule (keeps capacity, so rebuilding is allocation-free).
  void reset(int rank, int size, int num_blocks, BlockSpace space, bool rank_ordered);
  /// Appends a step with no transfer; returns it for filling.
  Step& add_step();
  /// Adds blocks to the send / receive side of the last step. Ranges are taken
  /// modulo num_blocks() and split at the wrap (at most two ranges each);
  /// count == 0 adds nothing.
  void add_send(int first, int count);
  void add_recv(int first, int count);

 private:
  static void add_range(std::vector<BlockRange>& pool, int& end, int first, int count, int num_blocks);
  int rank_ = 0;
  int size_ = 1;
  int num_blocks_ = 1;
  BlockSpace space_ = BlockSpace::rank_blocks;
  bool rank_ordered_ = false;
  std::vector<Step> steps_;
  std::vector<BlockRange> send_ranges_;
  std::vector<BlockRange> recv_ranges_;
};

/// @brief Ring allgather: n-1 steps; at step s rank r sends block (r-s) mod n to
/// r+1 and receives block (r-s-1) mod n from r-1.
void ring_allgather(int rank, int n, Schedule& out);

/// @brief Ring reduce-scatter: n-1 steps; at step s rank r sends its partial of
/// block (r-s-1) mod n to r+1 and receives (and reduces) block (r-s-2) mod n
/// from r-1, so rank r ends with block r fully reduced. Commutative ops only
/// (the partials accumulate in ring order, not rank order).
void ring_reduce_scatter(int rank, int n, Schedule& out);

/// @brief Recursive-doubling allgather. With p = the largest power of two <= n
/// and e = n - p: if e > 0, a fold step (each odd rank r < 2e sends its block to
/// r-1), then log2(p) exchange steps among the p survivors (at distance 1, 2,
/// 4, ... each survivor swaps everything it holds, a contiguous block range),
/// then an unfold step (even ranks < 2e send all other blocks to r+1).
/// Steps: log2(p), plus 2 when n is not a power of two.
void recursive_doubling_allgather(int rank, int n, Schedule& out);

/// @brief Recursive-doubling allreduce of the whole vector (BlockSpace::whole),
/// same fold / exchange / unfold structure and step count as the allgather.
/// Rank-ordered: each partial covers a contiguous range of ranks, Step::recv_is_left
/// says on which side the received one goes.
void recursive_doubling_allreduce(int rank, int n, Schedule& out);

/// @brief Recursive-halving reduce-scatter: fold (odd ranks r < 2e send all
/// blocks to r-1, which reduces), log2(p) halving steps at distance p/2, p/4,
/// ..., 1 (each survivor sends the half of its current block range that its
/// partner keeps and reduces the half it keeps), unfold (even r < 2e sends the
/// finished block r+1 to r+1). Steps as recursive doubling. Commutative ops only.
void recursive_halving_reduce_scatter(int rank, int n, Schedule& out);

/// @brief Bruck allgather: ceil(log2 n) steps; at step k (d = 2^k) rank r holds
/// blocks r .. r+d-1 (mod n), sends the first min(d, n-d) of them to (r-d) mod n
/// and receives blocks r+d .. r+d+min(d, n-d)-1 (mod n) from (r+d) mod n.
/// Block ids are real ranks, so data can land in place (no final rotation).
void bruck_allgather(int rank, int n, Schedule& out);

/// @brief Bruck alltoall over working positions (BlockSpace::positions):
/// before the steps, position i of rank r holds the send block destined to
/// (r+i) mod n; at step k (d = 2^k, ceil(log2 n) steps) rank r sends every
/// position with bit k set to (r+d) mod n and receives the same positions from
/// (r-d) mod n; afterwards position i holds the block from source (r-i) mod n.
void bruck_alltoall(int rank, int n, Schedule& out);

/// @brief Pairwise alltoall with rotated start (Ma et al. Fig. 3): n-1 steps; at
/// step s (1..n-1) rank r sends send-block (r+s) mod n to rank (r+s) mod n and
/// receives receive-block (r-s) mod n from (r-s) mod n, so each rank sends and
/// receives one block at a time. The own block r is a local copy, not a step.
void pairwise_alltoall(int rank, int n, Schedule& out);

/// @brief One rank's place in the token ring of scatter / gather (Mallón et al. 3.2).
struct TokenRingRole {
  int position = -1;    ///< order of this rank's copy (0 = first), -1 for the root (local copy only)
  int token_from = -1;  ///< rank the token comes from, -1 if it starts with the token (or is the root)
  int token_to = -1;    ///< rank to pass the token to, -1 if last (or the root)
};

/// @brief Token ring: the non-root ranks copy their block from / to the root
/// one at a time in the order root+1, root+2, ..., root-1 (mod n); the token
/// passes along that order. Steps: n-1 copies.
[[nodiscard]] TokenRingRole token_ring(int rank, int n, int root) noexcept;

/// @brief How a token holder splits its copy around passing the token.
struct TokenSplit {
  std::size_t before_pass = 0;  ///< bytes copied before passing the token
  std::size_t after_pass = 0;   ///< bytes copied after passing it
};

/// @brief Seed 000's rule: pass the token before copying if the rank shares a
/// host with the root or its block is at most @p threshold bytes; otherwise copy
/// bytes - threshold, pass the token, then copy the last threshold bytes.
[[nodiscard]] TokenSplit token_split(std::size_t bytes, std::size_t threshold, bool same_host_as_root) noexcept;

}  // namespace strata::patterns
