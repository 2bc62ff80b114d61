// A rank that leaves a shared-memory object named like the shm backend's
// segments ("/strata-<tag>-<n>", tag from the job id and secret) and dies
// without removing it, as a rank killed during transport start-up would.
// Prints the object's name so the test can check strata-run removed it.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "strata/detail/rendezvous.hpp"

int main() {
  const char* id = std::getenv("STRATA_JOB_ID");
  const char* hex = std::getenv("STRATA_JOB_SECRET");
  if (id == nullptr || hex == nullptr) return 3;
  strata::detail::rdv::Secret secret{};
  for (std::size_t i = 0; i < secret.size(); ++i)
    secret[i] = static_cast<std::uint8_t>(std::stoi(std::string(hex + 2 * i, 2), nullptr, 16));
  const std::string name = "/strata-" + strata::detail::rdv::shm_job_tag(id, secret.data(), secret.size()) + "-77";
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return 4;
  std::printf("%s\n", name.c_str() + 1);
  std::fflush(stdout);
  std::_Exit(1);  // dies without unlinking
}
