#include "strata_bench/world.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace strata::bench {

World::World(const Options& o) {
  boot_ = bootstrap_from_environment();
  rank_ = boot_->rank();
  size_ = boot_->size();
  hier_ = discover_hierarchy(*boot_);
  topts_ = transport::TransportOptions::from_environment();
  if (!o.backend.empty()) topts_.intra = o.backend;
  if (!o.provider.empty()) topts_.provider = o.provider;
  t_ = transport::make_transport(*boot_, hier_, topts_);
  t_->set_completion_handler([this](void*, const Status& s) {
    if (!s.is_ok()) {
      errors.fetch_add(1, std::memory_order_relaxed);
      std::fprintf(stderr, "strata-bench: rank %d: completion error: %s\n", rank_, s.message().c_str());
    }
    completions.fetch_add(1, std::memory_order_release);
  });
  t_->set_signal_handler([this](int, std::uint64_t payload) {
    if (payload == kSigDone) {
      dones.fetch_add(1, std::memory_order_release);
    } else {
      last_ping_ns.store(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
              .count(),
          std::memory_order_relaxed);
      pings.fetch_add(1, std::memory_order_release);
    }
  });
  t_->set_peer_failure_handler([this](int peer, const Status& why) {
    std::fprintf(stderr, "strata-bench: rank %d: peer %d failed: %s\n", rank_, peer, why.message().c_str());
  });
  auto popts = transport::ProgressOptions::from_environment();
  if (o.progress_threads >= 0) popts.threads = o.progress_threads;
  servers_ = std::make_unique<transport::ProgressServer>(*t_, popts);
}

World::~World() {
  // Nobody may still be reading or writing our buffers: the modes end with a
  // barrier. Stop the servers before the transport they drive.
  if (servers_) servers_->stop();
  servers_.reset();
  if (t_) t_->shutdown();
  t_.reset();
}

std::string World::label() const {
  std::string b;
  const std::string prov = topts_.provider.empty() ? std::string("auto") : topts_.provider;
  if (size_ < 2) {
    b = "self";
  } else if (!hier_.same_host(0, 1)) {
    b = "remote:" + prov;
  } else if (topts_.intra == "fabric") {
    b = "fabric:" + prov;
  } else {
    b = topts_.intra;
  }
  return b + (servers_->inline_mode() ? "/inline" : "/server");
}

void World::fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "strata-bench: rank %d: %s%s%s\n", rank_, what.c_str(), s.is_ok() ? "" : ": ",
               s.is_ok() ? "" : s.message().c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

void World::wait(const std::function<bool()>& cond, const char* what) {
  if (!servers_->wait_until(cond, std::chrono::seconds(60))) fail(std::string("timed out (60 s) waiting for ") + what);
}

void World::wait_completions(std::uint64_t n, const char* what) {
  wait([this, n] { return completions.load(std::memory_order_acquire) >= n; }, what);
  if (errors.load() != 0) fail(std::string("operation failed during ") + what);
}

std::vector<transport::RemoteKey> World::exchange(const transport::RemoteKey& k) {
  const auto blobs = boot_->allgather(&k, sizeof(k));
  std::vector<transport::RemoteKey> keys(blobs.size());
  for (std::size_t i = 0; i < blobs.size(); ++i) {
    if (blobs[i].size() != sizeof(transport::RemoteKey)) fail("malformed key from rank " + std::to_string(i));
    std::memcpy(&keys[i], blobs[i].data(), sizeof(transport::RemoteKey));
  }
  return keys;
}

std::vector<double> World::gather(double v) {
  const auto blobs = boot_->allgather(&v, sizeof(v));
  std::vector<double> out(blobs.size());
  for (std::size_t i = 0; i < blobs.size(); ++i) std::memcpy(&out[i], blobs[i].data(), sizeof(double));
  return out;
}

}  // namespace strata::bench
