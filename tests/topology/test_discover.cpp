// discover_hierarchy over a fake in-test bootstrap (ranks as threads).
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "strata/transport/bootstrap.hpp"
#include "strata/transport/topology.hpp"
#include "topology_helpers.hpp"

namespace strata {
namespace {

using V = std::vector<int>;

// The rendezvous shared by the fake bootstraps of one job.
struct FakeWorld {
  explicit FakeWorld(int n) : size(n), slots(static_cast<std::size_t>(n)) {}
  std::mutex mu;
  std::condition_variable cv;
  int size;
  int arrived = 0;
  std::uint64_t generation = 0;
  std::vector<std::vector<std::byte>> slots;
  std::vector<std::vector<std::byte>> result;
};

class FakeBootstrap final : public Bootstrap {
 public:
  FakeBootstrap(std::shared_ptr<FakeWorld> world, JobInfo job) : world_(std::move(world)), job_(std::move(job)) {}
  [[nodiscard]] const JobInfo& job() const noexcept override { return job_; }

  std::vector<std::vector<std::byte>> allgather(const void* data, std::size_t len) override {
    FakeWorld& w = *world_;
    std::unique_lock<std::mutex> lock(w.mu);
    auto& slot = w.slots[static_cast<std::size_t>(job_.rank)];
    slot.resize(len);
    if (len > 0) std::memcpy(slot.data(), data, len);
    const std::uint64_t gen = w.generation;
    if (++w.arrived == w.size) {
      w.result = w.slots;
      w.arrived = 0;
      ++w.generation;
      w.cv.notify_all();
    } else {
      w.cv.wait(lock, [&] { return w.generation != gen; });
    }
    return w.result;
  }
  void barrier() override { (void)allgather(nullptr, 0); }

 private:
  std::shared_ptr<FakeWorld> world_;
  JobInfo job_;
};

// Job facts of a launcher's block placement over hosts.
std::vector<JobInfo> block_jobs(const V& ranks_per_host, const std::string& topology) {
  int size = 0;
  for (int n : ranks_per_host) size += n;
  std::vector<JobInfo> jobs;
  for (std::size_t h = 0; h < ranks_per_host.size(); ++h) {
    for (int l = 0; l < ranks_per_host[h]; ++l) {
      JobInfo j;
      j.rank = static_cast<int>(jobs.size());
      j.size = size;
      j.host = static_cast<int>(h);
      j.nhosts = static_cast<int>(ranks_per_host.size());
      j.local_rank = l;
      j.local_size = ranks_per_host[h];
      j.job_id = "test";
      j.launcher = "fake";
      j.topology = topology;
      jobs.push_back(j);
    }
  }
  return jobs;
}

struct Outcome {
  std::optional<Hierarchy> hierarchy;
  std::optional<Error> error;
};

// Runs discover_hierarchy on every rank, each on its own thread.
std::vector<Outcome> run_job(const std::vector<JobInfo>& jobs) {
  auto world = std::make_shared<FakeWorld>(static_cast<int>(jobs.size()));
  std::vector<Outcome> out(jobs.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < jobs.size(); ++r) {
    threads.emplace_back([&, r] {
      FakeBootstrap boot(world, jobs[r]);
      try {
        out[r].hierarchy = discover_hierarchy(boot);
      } catch (const Error& e) {
        out[r].error = e;
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

TEST(DiscoverHierarchy, EveryRankBuildsTheSameHierarchyAsThePureBlockPlacement) {
  const std::string spec = "package:2 numa:2 core:4 pu:1";
  const std::vector<Outcome> out = run_job(block_jobs({16, 16}, spec));
  const Hierarchy expected(test::block_places(spec, {16, 16}));
  ASSERT_EQ(out.size(), 32u);
  for (std::size_t r = 0; r < out.size(); ++r) {
    ASSERT_FALSE(out[r].error) << "rank " << r << ": " << out[r].error->what();
    ASSERT_TRUE(out[r].hierarchy);
    EXPECT_EQ(out[r].hierarchy->places(), expected.places()) << "rank " << r;
    EXPECT_EQ(out[r].hierarchy->host_leaders(), (V{0, 16}));
    EXPECT_EQ(out[r].hierarchy->leaders(Level::numa), (V{0, 4, 8, 12, 16, 20, 24, 28}));
  }
}

TEST(DiscoverHierarchy, HostComesFromTheJobNotTheMachine) {
  const std::vector<Outcome> out = run_job(block_jobs({5, 2, 4}, "core:2 pu:1"));
  ASSERT_EQ(out.size(), 11u);
  for (const Outcome& o : out) {
    ASSERT_TRUE(o.hierarchy) << o.error->what();
    const Hierarchy& h = *o.hierarchy;
    EXPECT_EQ(h.num_hosts(), 3);
    EXPECT_EQ(h.host_leaders(), (V{0, 5, 7}));
    EXPECT_EQ(h.group(6, Level::host), (V{5, 6}));
    EXPECT_EQ(h.place(4).core, 0);  // 5 ranks on 2 cores wrap
    EXPECT_EQ(h.place(10).core, 1);
  }
}

TEST(DiscoverHierarchy, SingleRank) {
  const std::vector<Outcome> out = run_job(block_jobs({1}, "package:2 numa:2 core:4 pu:1"));
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(out[0].hierarchy) << out[0].error->what();
  EXPECT_EQ(out[0].hierarchy->size(), 1);
  EXPECT_EQ(out[0].hierarchy->leader(0, Level::numa), 0);
}

TEST(DiscoverHierarchy, ThisMachineWhenNoSpecIsGiven) {
  if (std::getenv("STRATA_TOPOLOGY") != nullptr) GTEST_SKIP() << "STRATA_TOPOLOGY is set in the environment";
  const std::vector<Outcome> out = run_job(block_jobs({2}, ""));
  const Machine m;
  for (const Outcome& o : out) {
    ASSERT_TRUE(o.hierarchy) << o.error->what();
    EXPECT_EQ(o.hierarchy->size(), 2);
    for (const RankPlace& p : o.hierarchy->places()) EXPECT_LT(p.core, m.num_cores());
  }
}

TEST(DiscoverHierarchy, BadSpecOnOneRankFailsEveryRankNamingIt) {
  std::vector<JobInfo> jobs = block_jobs({2, 2}, "core:2 pu:1");
  jobs[2].topology = "bogus:9";
  const std::vector<Outcome> out = run_job(jobs);
  for (std::size_t r = 0; r < out.size(); ++r) {
    ASSERT_TRUE(out[r].error) << "rank " << r << " did not fail";
    const std::string what = out[r].error->what();
    EXPECT_NE(what.find("rank 2"), std::string::npos) << what;
    EXPECT_NE(what.find("bogus:9"), std::string::npos) << what;
    EXPECT_EQ(out[r].error->errc(), r == 2 ? Errc::invalid_argument : Errc::bootstrap_error) << what;
  }
}

}  // namespace
}  // namespace strata
