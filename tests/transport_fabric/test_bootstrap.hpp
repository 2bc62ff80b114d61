// A unix-socket rendezvous for the libfabric backend's multi-process tests.
//
// The test process runs a RendezvousServer on a socket path in the file
// system (reachable from every network namespace); each rank process connects
// with a SocketBootstrap. allgather: every rank sends one blob, the server
// answers all blobs once it has them. If a rank disconnects the server closes
// every connection, so the others fail with Errc::bootstrap_error instead of
// hanging.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "strata/transport/bootstrap.hpp"

namespace strata::fabric_test {

class SocketBootstrap final : public Bootstrap {
 public:
  /// Connects to @p path as @p rank of @p size. Throws strata::Error.
  SocketBootstrap(const std::string& path, int rank, int size);
  ~SocketBootstrap() override;
  SocketBootstrap(const SocketBootstrap&) = delete;
  SocketBootstrap& operator=(const SocketBootstrap&) = delete;

  [[nodiscard]] const JobInfo& job() const noexcept override { return job_; }
  std::vector<std::vector<std::byte>> allgather(const void* data, std::size_t len) override;
  void barrier() override { allgather(nullptr, 0); }

 private:
  JobInfo job_;
  int fd_ = -1;
};

class RendezvousServer {
 public:
  /// Listens on @p path (removed first) for @p size ranks.
  RendezvousServer(std::string path, int size);
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  void run();
  std::string path_;
  int size_;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// Writes/reads exactly n bytes; false on EOF or error.
bool write_all(int fd, const void* p, std::size_t n);
bool read_all(int fd, void* p, std::size_t n, const std::atomic<bool>* stop = nullptr);

}  // namespace strata::fabric_test
