// A user program built against the installed strata tree.
#include <cstdio>
#include <cstring>

#include "strata/error.hpp"
#include "strata/version.hpp"

int main() {
  const strata::Error e(strata::Errc::invalid_argument, "probe");
  if (e.errc() != strata::Errc::invalid_argument) return 1;
  // The generated header and the library agree on the version.
  if (std::strcmp(strata::version(), STRATA_VERSION_STRING) != 0) return 2;
  if (STRATA_VERSION != STRATA_VERSION_MAJOR * 10000 + STRATA_VERSION_MINOR * 100 + STRATA_VERSION_PATCH) return 3;
  std::printf("strata %s\n", strata::version());
  return 0;
}
