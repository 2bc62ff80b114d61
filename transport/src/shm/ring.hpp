// Single-producer single-consumer byte ring of variable-size records, laid
// out in shared memory (one per (source, target) pair of the shm backend).
//
// The control block (head, tail) and the data area live in the target's
// segment. The producer (source process) and the consumer (target process)
// each hold their own Ring view with private caches of the other side's index.
// Positions are monotonically increasing 64-bit byte counters (they never
// wrap); the slot of a position is pos & (capacity - 1). Every record starts
// on a 64-byte boundary and never straddles the end of the data area: when it
// would, the producer first writes a PAD record covering the remainder.
//
// Ordering: the producer fills records, then publish() stores the tail with
// release semantics; the consumer loads the tail with acquire semantics before
// reading a record, and pop() stores the head with release semantics after it
// finished with the record, so a producer that observes head >= end of a
// record knows the consumer has fully processed it. Lossless: try_reserve()
// returns nullptr when the ring is full and never overwrites unconsumed data.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace strata::transport::detail::shm {

inline constexpr std::size_t kCacheLine = 64;

/// Head and tail on separate cache lines (placed in shared memory).
struct alignas(kCacheLine) RingCtl {
  std::atomic<std::uint64_t> tail{0};  ///< written by the producer
  char pad0[kCacheLine - sizeof(std::atomic<std::uint64_t>)];
  std::atomic<std::uint64_t> head{0};  ///< written by the consumer
  char pad1[kCacheLine - sizeof(std::atomic<std::uint64_t>)];
};
static_assert(sizeof(RingCtl) == 2 * kCacheLine, "RingCtl layout");
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "shared-memory atomics must be lock-free");

/// Record types carried by the ring.
enum class RecType : std::uint16_t {
  pad = 1,            ///< filler up to the end of the data area
  put = 2,            ///< payload to copy to addr (a = signal payload if flags & kSignal)
  signal = 3,         ///< a = payload
  get_req = 4,        ///< read c bytes at addr (target memory), reply to requester address a, id b
  get_data = 5,       ///< payload to copy to addr (requester memory), id b
  fadd_req = 6,       ///< fetch_add a on the word at addr, id b, reply to requester address c
  fadd_reply = 7,     ///< old value a, id b, store to addr (requester memory) when non-zero
  region_map = 8,     ///< map the source's SharedRegion a (base addr, c bytes) now, then answer region_ack
  region_ack = 9,     ///< region a of the target was mapped (b = 1) or cannot be (b = 0)
  region_unmap = 10,  ///< the source freed its SharedRegion a: unmap it (no answer)
};

/// Fixed 48-byte record header; the payload (if any) follows it.
struct RecHdr {
  std::uint32_t size;  ///< whole record in bytes, multiple of 64
  RecType type;
  std::uint16_t flags;  ///< kLast | kSignal
  std::uint32_t len;    ///< payload bytes following the header
  std::uint32_t reserved;
  std::uint64_t addr;
  std::uint64_t a;
  std::uint64_t b;
  std::uint64_t c;

  static constexpr std::uint16_t kLast = 1;    ///< last fragment of an operation
  static constexpr std::uint16_t kSignal = 2;  ///< deliver signal a after the data
  [[nodiscard]] std::byte* payload() noexcept { return reinterpret_cast<std::byte*>(this) + sizeof(RecHdr); }
  [[nodiscard]] const std::byte* payload() const noexcept {
    return reinterpret_cast<const std::byte*>(this) + sizeof(RecHdr);
  }
};
static_assert(sizeof(RecHdr) == 48, "RecHdr is a fixed 48-byte wire format");

/// Bytes a record with @p payload_len payload bytes occupies.
constexpr std::uint64_t record_bytes(std::uint64_t payload_len) noexcept {
  return (sizeof(RecHdr) + payload_len + kCacheLine - 1) & ~std::uint64_t{kCacheLine - 1};
}

/// One side's view of a ring (see the file comment).
class Ring {
 public:
  Ring() = default;
  /// @param capacity data bytes, a power of two >= 256.
  Ring(RingCtl* ctl, std::byte* data, std::uint64_t capacity) noexcept
      : ctl_(ctl), data_(data), cap_(capacity), mask_(capacity - 1) {}

  [[nodiscard]] bool attached() const noexcept { return ctl_ != nullptr; }
  [[nodiscard]] std::uint64_t capacity() const noexcept { return cap_; }
  /// Largest payload one record can carry (a quarter of the ring).
  [[nodiscard]] std::uint64_t max_payload() const noexcept { return cap_ / 4 - sizeof(RecHdr); }

  // ------------------------------------------------------------ producer side
  /// Reserves a record of @p payload_len bytes (<= max_payload()) and returns
  /// its header (size and type pad already handled), or nullptr when the ring
  /// has no room. The record becomes visible to the consumer at publish().
  RecHdr* try_reserve(std::uint64_t payload_len) noexcept {
    const std::uint64_t need = record_bytes(payload_len);
    const std::uint64_t pos = tail_ & mask_;
    const std::uint64_t contiguous = cap_ - pos;
    const std::uint64_t total = need + (contiguous < need ? contiguous : 0);
    if (tail_ + total - head_cache_ > cap_) {
      head_cache_ = ctl_->head.load(std::memory_order_acquire);
      if (tail_ + total - head_cache_ > cap_) return nullptr;
    }
    if (contiguous < need) {
      auto* pad = reinterpret_cast<RecHdr*>(data_ + pos);
      pad->size = static_cast<std::uint32_t>(contiguous);
      pad->type = RecType::pad;
      pad->flags = 0;
      pad->len = 0;
      tail_ += contiguous;
    }
    auto* r = reinterpret_cast<RecHdr*>(data_ + (tail_ & mask_));
    r->size = static_cast<std::uint32_t>(need);
    r->len = static_cast<std::uint32_t>(payload_len);
    r->flags = 0;
    tail_ += need;
    return r;
  }
  /// Makes every reserved record visible to the consumer (release).
  void publish() noexcept { ctl_->tail.store(tail_, std::memory_order_release); }
  /// Sequentially consistent no-op RMW on the tail: orders everything
  /// published before it ahead of a following seq_cst load (the "is the
  /// target sleeping?" check) without a fence (TSan rejects fences).
  void sync_tail() noexcept { ctl_->tail.fetch_add(0, std::memory_order_seq_cst); }
  /// Same on the head, for the consumer's "is the producer sleeping?" check.
  void sync_head() noexcept { ctl_->head.fetch_add(0, std::memory_order_seq_cst); }
  /// Producer position: end of the last reserved record.
  [[nodiscard]] std::uint64_t tail() const noexcept { return tail_; }
  /// Consumer position as last published by the consumer (acquire).
  [[nodiscard]] std::uint64_t consumed() const noexcept { return ctl_->head.load(std::memory_order_seq_cst); }

  // ------------------------------------------------------------ consumer side
  /// The next record (PAD records are skipped), or nullptr when empty.
  /// Returns nullptr and sets *corrupt when a header is malformed.
  const RecHdr* peek(bool* corrupt) noexcept {
    for (;;) {
      if (head_ == tail_cache_) {
        tail_cache_ = ctl_->tail.load(std::memory_order_acquire);
        if (head_ == tail_cache_) return nullptr;
      }
      const std::uint64_t pos = head_ & mask_;
      const auto* r = reinterpret_cast<const RecHdr*>(data_ + pos);
      const std::uint64_t size = r->size;
      if (size < kCacheLine || size % kCacheLine != 0 || size > cap_ - pos || size > tail_cache_ - head_ ||
          (r->type != RecType::pad && sizeof(RecHdr) + std::uint64_t{r->len} > size)) {
        *corrupt = true;
        return nullptr;
      }
      if (r->type != RecType::pad) return r;
      head_ += size;
      ctl_->head.store(head_, std::memory_order_release);
    }
  }
  /// Releases the record returned by peek() (release store of the head).
  void pop(const RecHdr* r) noexcept {
    head_ += r->size;
    ctl_->head.store(head_, std::memory_order_release);
  }
  /// True when the producer published records not yet consumed. Reads only
  /// the shared indices, so any thread may call it.
  [[nodiscard]] bool has_data() const noexcept {
    return ctl_->tail.load(std::memory_order_seq_cst) != ctl_->head.load(std::memory_order_seq_cst);
  }

 private:
  RingCtl* ctl_ = nullptr;
  std::byte* data_ = nullptr;
  std::uint64_t cap_ = 0;
  std::uint64_t mask_ = 0;
  std::uint64_t tail_ = 0;        // producer: next free position
  std::uint64_t head_cache_ = 0;  // producer: last seen consumer head
  std::uint64_t head_ = 0;        // consumer: next record position
  std::uint64_t tail_cache_ = 0;  // consumer: last seen producer tail
};

}  // namespace strata::transport::detail::shm
