// A deterministic in-process fake of the Transport interface.
//
// N ranks live in one process and share one FakeWorld. Every posted
// operation is queued in the world; nothing moves until the test releases it
// (manual mode: in FIFO, random or chosen order) or until the initiator calls
// progress() (auto mode). Releasing an operation performs its data movement
// and queues its events (the initiator's completion, the target's signal);
// events are delivered to the handlers by the receiving rank's progress().
// Semantics follow the Transport doc comment exactly, including per-pair
// signal order (a signal released early is held until the earlier signals of
// the same source->target pair have been delivered) and "data visible before
// the signal". Failure injection: fail a queued operation, fail the next
// operation matching a predicate, kill a rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/transport/transport.hpp"

namespace strata {
namespace transport {

/// @brief Kind of a queued fake operation.
enum class FakeOpKind : std::uint8_t { put, get, put_with_signal, signal, fetch_add };

/// @brief Printable name of a FakeOpKind ("put", "get", ...).
const char* to_string(FakeOpKind k) noexcept;

/// @brief Description of one queued (not yet released) operation.
struct FakeOpInfo {
  std::uint64_t id = 0;  ///< stable id, usable with FakeWorld::release(id)
  FakeOpKind kind = FakeOpKind::put;
  int source = -1;            ///< initiating rank
  int target = -1;            ///< peer rank
  std::size_t len = 0;        ///< bytes moved (0 for signal, 8 for fetch_add)
  std::uint64_t payload = 0;  ///< signal payload (signal, put_with_signal)
  void* context = nullptr;    ///< the initiator's completion context
};

/// @brief How FakeWorld delivers operations.
enum class FakeMode : std::uint8_t {
  manual,         ///< operations wait for release*() calls
  auto_complete,  ///< progress() on the initiating rank releases its queued operations (FIFO)
};

/// @brief Order used by FakeWorld::release_all().
enum class FakeOrder : std::uint8_t { fifo, lifo, random };

/// @brief N in-process ranks sharing queues; see the file comment.
///
/// @code
/// strata::transport::FakeWorld world(2);              // manual mode
/// auto& t0 = world.endpoint(0);
/// auto& t1 = world.endpoint(1);
/// t1.set_signal_handler([&](int src, std::uint64_t p) { /* ... */ });
/// t0.set_completion_handler([&](void* ctx, const strata::Status& s) { /* ... */ });
/// t0.signal(1, 42, nullptr);
/// world.release_all();   // performs the operation, queues the events
/// world.progress_all();  // delivers completion on rank 0, signal on rank 1
/// @endcode
class FakeWorld {
 public:
  /// @param nranks number of ranks (>= 1; throws strata::Error otherwise)
  /// @param mode manual or auto_complete
  /// @param seed seed of the random release order (deterministic per seed)
  explicit FakeWorld(int nranks, FakeMode mode = FakeMode::manual, std::uint64_t seed = 1);
  ~FakeWorld();
  FakeWorld(const FakeWorld&) = delete;
  FakeWorld& operator=(const FakeWorld&) = delete;

  /// @brief Number of ranks.
  [[nodiscard]] int size() const noexcept;
  /// @brief The Transport of rank @p r (owned by the world; throws strata::Error if out of range).
  Transport& endpoint(int r);

  /// @brief Switches between manual and auto mode (thread-safe).
  void set_mode(FakeMode mode);

  /// @brief Snapshot of the queued operations, in posting order.
  [[nodiscard]] std::vector<FakeOpInfo> pending() const;
  /// @brief Number of queued operations.
  [[nodiscard]] std::size_t pending_count() const;
  /// @brief Releases the oldest queued operation; false if none.
  bool release_next();
  /// @brief Releases a queued operation chosen by the world's seeded generator; false if none.
  bool release_random();
  /// @brief Releases the operation with @p id; false if no such queued operation.
  bool release(std::uint64_t id);
  /// @brief Releases the operations queued at the time of the call, in @p order;
  /// returns the count.
  std::size_t release_all(FakeOrder order = FakeOrder::fifo);

  /// @brief Completes queued operation @p id with @p why and no data movement.
  bool fail(std::uint64_t id, const Status& why);
  /// @brief The next operation matching @p pred to be released fails with @p why (one shot).
  void fail_next(std::function<bool(const FakeOpInfo&)> pred, const Status& why);
  /// @brief Kills rank @p r: its queued operations vanish, operations towards it
  /// complete with Errc::peer_dead, every other rank's peer failure handler runs
  /// (on its next progress()), later posts to it complete with Errc::peer_dead.
  void kill(int r);

  /// @brief Calls progress() on every live rank once; returns the events handled.
  std::size_t progress_all();
  /// @brief Releases and progresses until nothing is queued and no event is
  /// pending, or @p max_rounds rounds; returns the rounds used.
  std::size_t drain(FakeOrder order = FakeOrder::fifo, std::size_t max_rounds = 1000000);
  /// @brief Number of undelivered events (completions, signals, failures) on all ranks.
  [[nodiscard]] std::size_t undelivered() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace transport
}  // namespace strata
