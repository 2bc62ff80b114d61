// What a job leaves in /dev/shm: the names of this job's shared-memory objects
// ("strata-<tag>-...", tag from the job id and secret that strata-run passes
// to its ranks), and which of them the calling process maps. For the tests of
// docs/transport.md "Mapped regions"; other jobs' names are never looked at.
#pragma once

#include <dirent.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "strata/detail/rendezvous.hpp"

namespace shm_names {

/// "strata-<tag>-" of the job this rank belongs to (strata-run's environment);
/// empty when not started by strata-run.
inline std::string job_prefix() {
  namespace rdv = strata::detail::rdv;
  const char* id = std::getenv(rdv::env::kJobId);
  const char* hex = std::getenv(rdv::env::kSecret);
  rdv::Secret secret{};
  if (id == nullptr || hex == nullptr || !rdv::secret_from_hex(hex, secret)) return {};
  return "strata-" + rdv::shm_job_tag(id, secret.data(), secret.size()) + "-";
}

/// True for a mapped region's name ("<prefix><rank>-m<id>").
inline bool is_region(const std::string& name, const std::string& prefix) {
  return name.rfind(prefix, 0) == 0 && name.find("-m", prefix.size()) != std::string::npos;
}

/// Names in /dev/shm that start with @p prefix.
inline std::vector<std::string> in_dev_shm(const std::string& prefix) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (const dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n.rfind(prefix, 0) == 0) out.push_back(n);
    }
    ::closedir(d);
  }
  return out;
}

/// Names (without "/dev/shm/") of the shared-memory objects starting with
/// @p prefix that this process maps, removed ones included.
inline std::vector<std::string> mapped_here(const std::string& prefix) {
  std::vector<std::string> out;
  std::ifstream maps("/proc/self/maps");
  const std::string dir = "/dev/shm/" + prefix;
  for (std::string line; std::getline(maps, line);) {
    const std::size_t at = line.find(dir);
    if (at == std::string::npos) continue;
    std::string n = line.substr(at + 9);
    const std::size_t sp = n.find(' ');
    if (sp != std::string::npos) n.resize(sp);  // drops " (deleted)"
    out.push_back(n);
  }
  return out;
}

}  // namespace shm_names
