// In-process bootstraps: ranks are threads of one process (tests).
//
// One shared state per job; every allgather/barrier is a generation of a
// condition-variable rendezvous. A rank whose bootstrap is destroyed while
// others wait in a collective it never joins makes that collective fail
// (instead of hanging the test).
#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "strata/detail/env.hpp"
#include "strata/detail/rendezvous.hpp"
#include "strata/transport/bootstrap.hpp"

namespace strata {
namespace {

struct SharedJob {
  explicit SharedJob(int n)
      : size(n),
        slots(static_cast<std::size_t>(n)),
        joined(static_cast<std::size_t>(n), 0),
        departed(static_cast<std::size_t>(n), 0) {}

  std::mutex mu;
  std::condition_variable cv;
  const int size;
  std::uint64_t generation = 0;  // completed rounds
  int count = 0;                 // ranks joined in the open round
  std::vector<std::vector<std::byte>> slots;
  std::vector<char> joined;
  std::vector<char> departed;
  std::shared_ptr<const std::vector<std::vector<std::byte>>> result;  // of the last completed round
  std::uint64_t failed_generation = ~std::uint64_t{0};                // round that failed, if any
  std::string failure;
};

class InprocessBootstrap final : public Bootstrap {
 public:
  InprocessBootstrap(JobInfo job, std::shared_ptr<SharedJob> shared)
      : job_(std::move(job)), shared_(std::move(shared)) {}

  ~InprocessBootstrap() override {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->departed[static_cast<std::size_t>(job_.rank)] = 1;
    if (shared_->count > 0 && !shared_->joined[static_cast<std::size_t>(job_.rank)]) fail_open_round_locked();
  }

  InprocessBootstrap(const InprocessBootstrap&) = delete;
  InprocessBootstrap& operator=(const InprocessBootstrap&) = delete;

  const JobInfo& job() const noexcept override { return job_; }

  std::vector<std::vector<std::byte>> allgather(const void* data, std::size_t len) override {
    if (data == nullptr && len > 0)
      throw Error(Errc::invalid_argument, "bootstrap allgather on rank " + std::to_string(job_.rank) +
                                              ": data is null but len is " + std::to_string(len));
    const auto* p = static_cast<const std::byte*>(data);
    return *collective(std::vector<std::byte>(p, p + len), "allgather");
  }

  void barrier() override { collective({}, "barrier"); }

 private:
  void fail_open_round_locked() {
    SharedJob& s = *shared_;
    s.failed_generation = s.generation;
    s.failure = "rank " + std::to_string(job_.rank) + " destroyed its bootstrap before joining the collective";
    s.count = 0;
    std::fill(s.joined.begin(), s.joined.end(), 0);
    for (auto& slot : s.slots) slot.clear();
    ++s.generation;
    s.cv.notify_all();
  }

  std::shared_ptr<const std::vector<std::vector<std::byte>>> collective(std::vector<std::byte> blob, const char* what) {
    SharedJob& s = *shared_;
    std::unique_lock<std::mutex> lock(s.mu);
    const auto me = static_cast<std::size_t>(job_.rank);
    for (std::size_t r = 0; r < s.departed.size(); ++r) {
      if (s.departed[r] && !s.joined[r])
        throw Error(Errc::peer_dead, std::string("bootstrap ") + what + " on rank " + std::to_string(job_.rank) +
                                         ": rank " + std::to_string(r) + " has destroyed its bootstrap");
    }
    const std::uint64_t my_generation = s.generation;
    s.slots[me] = std::move(blob);
    s.joined[me] = 1;
    if (++s.count == s.size) {
      s.result = std::make_shared<const std::vector<std::vector<std::byte>>>(std::move(s.slots));
      s.slots.assign(static_cast<std::size_t>(s.size), {});
      std::fill(s.joined.begin(), s.joined.end(), 0);
      s.count = 0;
      ++s.generation;
      s.cv.notify_all();
      return s.result;
    }
    s.cv.wait(lock, [&] { return s.generation != my_generation; });
    if (s.failed_generation == my_generation)
      throw Error(Errc::peer_dead,
                  std::string("bootstrap ") + what + " on rank " + std::to_string(job_.rank) + " failed: " + s.failure);
    // No later round can complete before this rank joins it, so result is ours.
    return s.result;
  }

  JobInfo job_;
  std::shared_ptr<SharedJob> shared_;
};

}  // namespace

std::vector<std::unique_ptr<Bootstrap>> make_inprocess_bootstraps(int n, int hosts) {
  if (n < 1) throw Error(Errc::invalid_argument, "make_inprocess_bootstraps: n=" + std::to_string(n) + " must be >= 1");
  if (hosts < 1 || hosts > n)
    throw Error(Errc::invalid_argument, "make_inprocess_bootstraps: hosts=" + std::to_string(hosts) +
                                            " must be in [1, n=" + std::to_string(n) + "]");
  JobInfo base;
  base.size = n;
  base.nhosts = hosts;
  detail::rdv::random_bytes(base.secret.data(), base.secret.size());
  base.job_id = "inproc-" + detail::rdv::random_hex(8);
  base.launcher = "inprocess";
  if (const char* t = strata::detail::env::get(detail::rdv::env::kTopology)) base.topology = t;
  base.bind = "none";

  auto shared = std::make_shared<SharedJob>(n);
  std::vector<std::unique_ptr<Bootstrap>> out;
  out.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    JobInfo j = base;
    const auto p = detail::rdv::block_placement(r, n, hosts);
    j.rank = r;
    j.host = p.host;
    j.local_rank = p.local_rank;
    j.local_size = p.local_size;
    out.push_back(std::make_unique<InprocessBootstrap>(std::move(j), shared));
  }
  return out;
}

}  // namespace strata
