// Helpers shared by the topology tests.
#pragma once

#include <string>
#include <vector>

#include "strata/transport/topology.hpp"

namespace strata::test {

/// Places ranks like the launcher's block placement: host h gets
/// ranks_per_host[h] consecutive ranks, each placed round-robin on @p spec.
inline std::vector<RankPlace> block_places(const std::string& spec, const std::vector<int>& ranks_per_host) {
  const Machine machine(spec);
  std::vector<RankPlace> places;
  int rank = 0;
  for (std::size_t h = 0; h < ranks_per_host.size(); ++h) {
    for (int l = 0; l < ranks_per_host[h]; ++l) {
      RankPlace p = machine.place_local(l);
      p.rank = rank++;
      p.host = static_cast<int>(h);
      places.push_back(p);
    }
  }
  return places;
}

/// Ranks lo..hi inclusive.
inline std::vector<int> iota(int lo, int hi) {
  std::vector<int> v;
  for (int r = lo; r <= hi; ++r) v.push_back(r);
  return v;
}

}  // namespace strata::test
