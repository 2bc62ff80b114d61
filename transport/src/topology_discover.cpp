// discover_hierarchy: each rank places itself, ranks exchange their places.
//
// A rank whose machine fails to load still takes part in the exchange, with
// an error blob instead of its place, so that every rank learns of the
// failure and throws instead of waiting forever in the allgather.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "strata/detail/env.hpp"
#include "strata/detail/log.hpp"
#include "strata/transport/bootstrap.hpp"
#include "strata/transport/topology.hpp"

namespace strata {
namespace {

constexpr char kErrorTag[] = "STRATA-TOPOLOGY-ERROR:";
constexpr std::size_t kErrorTagLen = sizeof(kErrorTag) - 1;

std::vector<std::byte> error_blob(const std::string& message) {
  std::vector<std::byte> out;
  out.reserve(kErrorTagLen + message.size());
  for (std::size_t i = 0; i < kErrorTagLen; ++i) out.push_back(static_cast<std::byte>(kErrorTag[i]));
  for (char c : message) out.push_back(static_cast<std::byte>(c));
  return out;
}

bool is_error_blob(const std::vector<std::byte>& blob, std::string* message) {
  if (blob.size() < kErrorTagLen) return false;
  for (std::size_t i = 0; i < kErrorTagLen; ++i) {
    if (blob[i] != static_cast<std::byte>(kErrorTag[i])) return false;
  }
  message->clear();
  for (std::size_t i = kErrorTagLen; i < blob.size(); ++i) message->push_back(static_cast<char>(blob[i]));
  return true;
}

// e.what() without the ": <category message>" suffix std::system_error adds,
// so that re-wrapping an error does not repeat it.
std::string plain_message(const Error& e) {
  std::string what = e.what();
  const std::string suffix = ": " + e.code().message();
  if (what.size() >= suffix.size() && what.compare(what.size() - suffix.size(), suffix.size(), suffix) == 0) {
    what.resize(what.size() - suffix.size());
  }
  return what;
}

}  // namespace

Hierarchy discover_hierarchy(Bootstrap& boot) {
  const JobInfo& job = boot.job();
  std::string spec = job.topology;
  if (spec.empty()) {
    if (const char* env = strata::detail::env::get("STRATA_TOPOLOGY")) spec = env;
  }

  std::vector<std::byte> mine;
  Errc local_code = Errc::ok;
  try {
    if (job.host < 0 || job.local_rank < 0) {
      throw Error(Errc::invalid_argument, "job info has host " + std::to_string(job.host) + " and local_rank " +
                                              std::to_string(job.local_rank) + " (both must be >= 0)");
    }
    const Machine machine(spec);
    RankPlace p = machine.place_self(job.local_rank);
    p.rank = job.rank;
    p.host = job.host;
    strata::detail::logger().info("topology: {} ({}); this rank: host {} package {} numa {} core {} pu {}",
                                  machine.summary(), machine.source(), p.host, p.package, p.numa, p.core,
                                  p.pu < 0 ? std::string("unbound") : std::to_string(p.pu));
    mine = Hierarchy::encode(p);
  } catch (const Error& e) {
    local_code = e.errc();
    mine = error_blob(plain_message(e));
  }

  const std::vector<std::vector<std::byte>> all = boot.allgather(mine.data(), mine.size());
  if (static_cast<int>(all.size()) != boot.size()) {
    throw Error(Errc::bootstrap_error, "discover_hierarchy (rank " + std::to_string(boot.rank()) +
                                           "): allgather gave " + std::to_string(all.size()) + " blobs for " +
                                           std::to_string(boot.size()) + " ranks");
  }

  std::vector<RankPlace> places;
  places.reserve(all.size());
  for (std::size_t r = 0; r < all.size(); ++r) {
    std::string message;
    if (is_error_blob(all[r], &message)) {
      const bool self = static_cast<int>(r) == boot.rank();
      throw Error(self ? local_code : Errc::bootstrap_error,
                  "discover_hierarchy: rank " + std::to_string(r) + " could not place itself: " + message);
    }
    RankPlace p;
    try {
      p = Hierarchy::decode(all[r].data(), all[r].size());
    } catch (const Error& e) {
      throw Error(Errc::bootstrap_error,
                  "discover_hierarchy: place of rank " + std::to_string(r) + " is unreadable: " + plain_message(e));
    }
    if (p.rank != static_cast<int>(r)) {
      throw Error(Errc::bootstrap_error, "discover_hierarchy: blob " + std::to_string(r) + " carries rank " +
                                             std::to_string(p.rank) + " (bootstrap returned blobs out of order)");
    }
    places.push_back(p);
  }
  return Hierarchy(std::move(places));
}

}  // namespace strata
