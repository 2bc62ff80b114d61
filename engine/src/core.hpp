// Engine internals (not installed): the engine core every communicator
// shares (transport, executor, progress servers, id pools, logger), the
// window memory, and the conversions of the public enums to the DAG's. The
// communicator is comm.hpp, argument checks checks.hpp, algorithm choice
// select.hpp (docs/architecture.md, "Engine layer").
#pragma once

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "hooks.hpp"
#include "ids.hpp"
#include "plan_cache.hpp"
#include "strata/collectives/compile.hpp"
#include "strata/dag/executor.hpp"
#include "strata/detail/clock.hpp"
#include "strata/detail/env.hpp"
#include "strata/detail/log.hpp"
#include "strata/engine.hpp"
#include "strata/transport/bootstrap.hpp"
#include "strata/transport/progress.hpp"
#include "strata/transport/transport.hpp"

namespace strata::detail {

inline dag::DataType to_dag(Datatype t) {
  switch (t) {
    case Datatype::int8:
      return dag::DataType::i8;
    case Datatype::int16:
      return dag::DataType::i16;
    case Datatype::int32:
      return dag::DataType::i32;
    case Datatype::int64:
      return dag::DataType::i64;
    case Datatype::uint8:
      return dag::DataType::u8;
    case Datatype::uint16:
      return dag::DataType::u16;
    case Datatype::uint32:
      return dag::DataType::u32;
    case Datatype::uint64:
      return dag::DataType::u64;
    case Datatype::float32:
      return dag::DataType::f32;
    case Datatype::float64:
      return dag::DataType::f64;
  }
  return dag::DataType::u8;
}

inline dag::ReduceOp to_dag(Op op) {
  switch (op) {
    case Op::sum:
      return dag::ReduceOp::sum;
    case Op::prod:
      return dag::ReduceOp::prod;
    case Op::min:
      return dag::ReduceOp::min;
    case Op::max:
      return dag::ReduceOp::max;
    case Op::band:
      return dag::ReduceOp::band;
    case Op::bor:
      return dag::ReduceOp::bor;
    case Op::bxor:
      return dag::ReduceOp::bxor;
  }
  return dag::ReduceOp::sum;
}

// Page-aligned, zeroed window memory: a transport SharedRegion when the rank
// has same-host peers among @p members (world ranks; they map it at once and
// put into it with one memcpy), else private memory.
struct WindowMem {
  void* p = nullptr;
  std::size_t len = 0;
  std::unique_ptr<transport::SharedRegion> shared;
  std::atomic<std::uint64_t>* counted = nullptr;  // the engine's window bytes (EngineCore::window_bytes)
  WindowMem(transport::Transport& t, std::size_t n, const std::vector<int>& members,
            std::atomic<std::uint64_t>* count = nullptr)
      : len(n) {
    shared = t.allocate_shared(n, members);
    if (shared) {
      p = shared->addr;
    } else {
      if (posix_memalign(&p, 4096, n) != 0)
        throw Error(Errc::internal, "cannot allocate a window of " + std::to_string(n) + " bytes");
      std::memset(p, 0, n);
    }
    counted = count;
    if (counted != nullptr) counted->fetch_add(n, std::memory_order_relaxed);
  }
  ~WindowMem() {
    if (counted != nullptr) counted->fetch_sub(len, std::memory_order_relaxed);
    if (!shared) std::free(p);
  }
  WindowMem(const WindowMem&) = delete;
  WindowMem& operator=(const WindowMem&) = delete;
};

// Everything a rank's engine owns; communicators keep it alive.
struct CommImpl;
struct WindowTable;  // window.cpp: this engine's windows (signal routing)
// Communicator id reserved for window signals (window.cpp); split never gives it out.
inline constexpr std::uint16_t kWindowSignalComm = 0xFFFF;

// Removes an EngineOptions::log_sink from the logger when the engine goes.
struct LogSinkHandle {
  int handle = 0;
  LogSinkHandle() = default;
  LogSinkHandle(const LogSinkHandle&) = delete;
  LogSinkHandle& operator=(const LogSinkHandle&) = delete;
  ~LogSinkHandle() { reset(); }
  void reset() {
    if (handle != 0) remove_log_sink(handle);
    handle = 0;
  }
};

// A completed state: the future of every plan-path call that completed
// inside its own submit (CommImpl::start_lazy, "lazy promise") shares it.
// Process-wide and never freed, so the pointer each such future holds needs
// no control block (the aliasing constructor over an empty owner): copying
// and dropping it touches no reference count (two atomic read-modify-writes
// per call on one cache line that every calling thread shares).
inline detail::StatePtr<void> completed_state() noexcept {
  static detail::State<void>* const state = [] {
    static auto* const owner = new detail::StatePtr<void>(std::make_shared<detail::State<void>>(nullptr));
    (*owner)->complete(Status(), [] {});
    return owner->get();
  }();
  return detail::StatePtr<void>(std::shared_ptr<void>(), state);
}

struct EngineCore {
  EngineOptions opts;
  // Bytes of this engine's communicator windows now (WindowMem), against
  // EngineOptions::window_budget when communicators are created.
  std::atomic<std::uint64_t> window_bytes{0};
  // Every communicator's compiled plans, under one budget (plan_cache.hpp).
  PlanCache plans;
  LogSinkHandle log_sink;
  // The tuning table of every communicator of this engine (docs/tuning.md):
  // loaded once at start-up and agreed by all ranks; where it came from.
  std::shared_ptr<const coll::Tuning> tuning = std::make_shared<const coll::Tuning>();
  coll::TuningChoice tuning_choice;
  std::unique_ptr<Bootstrap> boot;
  Hierarchy hier;
  std::unique_ptr<transport::Transport> transport;
  std::unique_ptr<dag::Executor> exec;
  std::atomic<dag::Executor*> polled_exec{nullptr};  // the progress hook's view of exec (null while it goes)
  std::unique_ptr<transport::ProgressServer> progress;
  std::shared_ptr<FutureContext> fctx;
  // fctx's hooks against shutdown (fctx->live is its flag; futures may outlive the engine).
  std::shared_ptr<HookGuard> hooks = std::make_shared<HookGuard>();
  std::atomic<bool> alive{true};
  std::mutex id_mu;
  // Communicator ids in use here (0 is the world; 0xFFFB-0xFFFF are signal
  // tags: watermark grants, grants and grant requests (dag/executor.hpp),
  // flag-wait nudges, windows).
  IdPool comm_ids{1, dag::kFirstSignalTag};    // ids below every signal tag
  std::vector<std::weak_ptr<CommImpl>> comms;  // under id_mu: every communicator, for shutdown
  // under id_mu: revoke / shrink messages for a communicator id not registered
  // here yet (a member that returned from split first may revoke at once);
  // register_comm() hands them over (shrink.cpp; at most kEarlyShrinkMax kept).
  std::vector<std::pair<int, std::uint64_t>> early_shrink;
  static constexpr std::size_t kEarlyShrinkMax = 4096;
  std::shared_ptr<WindowTable> windows;  // window.cpp
  std::shared_ptr<void> watchdog;        // report.cpp: launcher death, heartbeats, hang reports
  // report.cpp: coarse-clock ms of the last heartbeat from each world rank
  // (written by the signal handler, read by the watchdog); size() entries.
  std::unique_ptr<std::atomic<std::int64_t>[]> heard;

  Status check_alive(const char* what) const {
    if (alive.load(std::memory_order_acquire)) return Status::ok();
    return {Errc::shutdown,
            std::string(what) + " on rank " + std::to_string(boot ? boot->rank() : -1) + ": the engine has shut down"};
  }
};

// window.cpp: installs the transport handlers that route window events and
// forward the others to the executor (after the executor exists, before any post).
void install_window_routing(EngineCore& core);
// window.cpp: fails what the windows still wait for (shutdown, after the executor is gone).
void shutdown_windows(EngineCore& core);
// report.cpp: the watchdog thread (launcher death; hang reports unless STRATA_REPORT=off); stops when released.
std::shared_ptr<void> start_report_watchdog(EngineCore& core);
// report.cpp: asks this process's watchdogs for a report (SIGUSR2, or a peer's request signal).
void request_report() noexcept;
// shrink.cpp: adds a new communicator to core.comms (dropping expired
// entries), then delivers the revoke / shrink messages that came before it.
void register_comm(EngineCore& core, const std::shared_ptr<CommImpl>& c);
// shrink.cpp: a revoke or shrink message (tag dag::kShrinkComm) from world rank @p source.
void shrink_signal(EngineCore& core, int source, std::uint64_t payload);
// report.cpp: a heartbeat from world rank @p source arrived.
void heard_from(EngineCore& core, int source) noexcept;

}  // namespace strata::detail
