// Internal contract between the router (transport/src/router.cpp) and the two
// RMA backends (shm/ for same-host peers, fabric/ for the others).
//
// Each backend is a full Transport for the peers it serves and rejects the
// others with Errc::unknown_peer. Both factories are collective over the
// bootstrap: every rank constructs the shm backend first and the fabric backend
// second, even when it serves no peer with one of them.
#pragma once

#include <memory>
#include <vector>

#include "strata/transport/bootstrap.hpp"
#include "strata/transport/topology.hpp"
#include "strata/transport/transport.hpp"

namespace strata::transport::detail {

class Backend : public Transport {
 public:
  /// A file descriptor that becomes readable when progress() may find work
  /// (incoming signal, completion); -1 if the backend can only be polled.
  [[nodiscard]] virtual int wait_fd() const = 0;
  /// Called right before the caller sleeps on wait_fd(). Returns false when
  /// work is already pending (the caller must not sleep), e.g. fi_trywait.
  virtual bool prepare_wait() = 0;
  /// True when wait_fd() does not report every event (there is none, or it
  /// only carries doorbells): the caller then sleeps at most the backend's
  /// PollHint::poll_interval() and polls.
  [[nodiscard]] virtual bool polled() const { return wait_fd() < 0; }
  /// Called by the caller that slept on wait_fd() when it became readable
  /// (a backend may drain it and note the activity).
  virtual void wait_fd_ready() {}
  /// Declares @p peer dead (launcher report, timeout elsewhere): every
  /// in-flight and future operation to it completes/fails with @p why.
  virtual void fail_peer(int peer, const Status& why) = 0;
  /// register_memory() fills the common fields (owner, addr, len) and its own
  /// section of the RemoteKey, setting its bit in flags; the router merges.
};

/// Same-host backend over an engine-owned shared-memory segment plus CMA.
/// @p serve[p] is true for the peers this backend must reach.
std::unique_ptr<Backend> make_shm_backend(Bootstrap& boot, const Hierarchy& hier, const std::vector<bool>& serve,
                                          const TransportOptions& opts);

/// libfabric RMA backend (provider from fi_getinfo, STRATA_PROVIDER overrides).
std::unique_ptr<Backend> make_fabric_backend(Bootstrap& boot, const Hierarchy& hier, const std::vector<bool>& serve,
                                             const TransportOptions& opts);

}  // namespace strata::transport::detail
