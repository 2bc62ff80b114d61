// strata::Window: one-sided communication (put with signal) among the members
// of a communicator, beside the collectives.
//
// A window exposes one memory range per member. A member writes into another
// member's range with put() / put_signal() and notifies it with signal(); the
// target counts the notifications per 32-bit tag and waits for them with
// wait(). Data of a put_signal() is visible at the target before the target
// counts its signal, so "wait for the signal, then read" is all a receiver does.
//
// @code
//   std::vector<double> ghost(2 * n), face(n);
//   strata::Window win = world.create_window(ghost.data(), ghost.size() * sizeof(double));  // collective
//   const int right = (world.rank() + 1) % world.size();
//   strata::Future<void> sent = win.put_signal(right, 0, face.data(), n * sizeof(double), /*tag=*/1);
//   /* ... overlap work ... */
//   win.wait(/*tag=*/1, /*count=*/1).get();   // ghost[0..n) holds the left neighbour's face
//   sent.get();                               // face may be overwritten
//   win.free();                               // collective
// @endcode
//
// Rules:
//  - Ranks are communicator ranks; offsets and sizes are in bytes.
//  - A put lands in the target's memory at any time after it is posted; the
//    application decides when that is allowed (e.g. the target signals "free
//    again" with signal(), see docs/window.md: flow control). Data of two puts
//    to overlapping bytes without a completed future in between is unordered.
//  - Signals from one rank to one target are counted in posting order; a wait
//    counts signals of its tag from any member.
//  - wait() consumes: wait(tag, 3) completes once 3 signals of @p tag arrived
//    that no earlier wait on the tag consumed (waits on one tag complete in
//    the order they were made).
//  - A put's future completes when the data is visible at the target (the
//    source may then be reused); errors (a dead target, engine shutdown) fail
//    the future, never hang it.
//  - When a member dies (launcher report or transport timeout), every pending
//    and later wait() of the window fails with Errc::peer_dead, and operations
//    aimed at the dead member fail; operations between live members go on.
//  - free() is collective and must be called (or the last handle dropped) on
//    every member at a matching point, after this rank's own operations have
//    completed or been waited for; the memory must stay valid until then.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "strata/future.hpp"

namespace strata {

namespace detail {
struct WindowImpl;
}  // namespace detail

/// @brief A registered memory range on every member of a communicator, for
/// one-sided put / put_signal / signal and counted waits (see the file comment
/// and docs/window.md). A handle: copies share the window.
///
/// Errors in arguments (a rank outside the communicator, a range outside the
/// target's window, a null source with a nonzero size, use after free() or
/// after the engine shut down) throw strata::Error naming the argument, the
/// operation and the rank, before anything moves.
class Window {
 public:
  Window() = default;
  /// @brief Internal handle.
  explicit Window(std::shared_ptr<detail::WindowImpl> impl);
  /// @brief False for a default-constructed handle.
  [[nodiscard]] bool valid() const noexcept { return impl_ != nullptr; }
  /// @brief This rank in the window's communicator.
  [[nodiscard]] int rank() const;
  /// @brief Number of members.
  [[nodiscard]] int size() const;
  /// @brief This rank's memory (as given to create_window).
  [[nodiscard]] void* base() const;
  /// @brief Bytes of member @p r's window (each member may expose a different size).
  [[nodiscard]] std::size_t bytes(int r) const;
  /// @brief Window id (equal on every member; names the window in messages).
  [[nodiscard]] std::uint16_t id() const;

  /// @brief Writes @p bytes from @p src into member @p target's window at
  /// @p target_offset. The future completes when the data is visible at the
  /// target; @p src must stay valid and unchanged until then.
  /// @throws strata::Error (invalid_argument) on a bad target, range or source
  Future<void> put(int target, std::size_t target_offset, const void* src, std::size_t bytes);

  /// @brief put(), then one signal of @p tag at @p target: the target's
  /// wait(tag, ...) counts it only after the data is visible there.
  /// @p bytes == 0 sends the signal alone. @p target may be this rank.
  /// @throws strata::Error (invalid_argument) on a bad target, range or source
  Future<void> put_signal(int target, std::size_t target_offset, const void* src, std::size_t bytes, std::uint32_t tag);

  /// @brief A signal of @p tag at @p target, without data (e.g. "your slot
  /// in my window is free again"). Ordered after this rank's earlier signals
  /// and put_signals to @p target.
  /// @throws strata::Error (invalid_argument) on a bad target
  Future<void> signal(int target, std::uint32_t tag);

  /// @brief Completes when @p count signals of @p tag arrived at this rank
  /// that earlier waits on @p tag did not consume; consumes them.
  /// count == 0 completes at once. Fails with Errc::peer_dead when a member
  /// died and the signals are not all there, with Errc::shutdown at engine shutdown.
  /// @throws strata::Error after free() or engine shutdown
  Future<void> wait(std::uint32_t tag, std::uint64_t count = 1);

  /// @brief Signals of @p tag that arrived so far (consumed or not; never decreases).
  [[nodiscard]] std::uint64_t arrived(std::uint32_t tag) const;

  /// @brief Collective: waits for this rank's own puts and signals, then for
  /// every member, then deregisters the memory. Pending waits fail with
  /// Errc::cancelled. Later calls on any handle of the window throw.
  /// Throws strata::Error if the barrier fails (a member died); the window is
  /// freed locally in any case.
  void free();

 private:
  std::shared_ptr<detail::WindowImpl> impl_;
};

}  // namespace strata
