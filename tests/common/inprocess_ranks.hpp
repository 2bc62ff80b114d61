// Runs @p body on @p n ranks as threads of this process (in-process bootstrap,
// @p hosts virtual hosts, one executor thread each; @p configure may change
// each rank's EngineOptions) and expects every rank to return without an
// exception; the message of any failure names the rank.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "strata/strata.hpp"
#include "strata/transport/bootstrap.hpp"

namespace inprocess_ranks {

inline void run_ranks(int n, int hosts, const std::function<void(strata::Engine&)>& body,
                      const std::function<void(int rank, strata::EngineOptions&)>& configure = {}) {
  auto boots = strata::make_inprocess_bootstraps(n, hosts);
  std::vector<std::thread> ts;
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    ts.emplace_back([&, r] {
      try {
        strata::EngineOptions o;
        o.worker_threads = 1;
        if (configure) configure(r, o);
        strata::Engine e(std::move(boots[static_cast<std::size_t>(r)]), o);
        body(e);
      } catch (const std::exception& ex) {
        errors[static_cast<std::size_t>(r)] = ex.what();
      }
    });
  }
  for (auto& t : ts) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
}

}  // namespace inprocess_ranks
