// A user program built against the installed strata tree.
#include <cstdio>

#include "strata/error.hpp"
#include "strata/version.hpp"

int main() {
  const strata::Error e(strata::Errc::invalid_argument, "probe");
  if (e.errc() != strata::Errc::invalid_argument) return 1;
  std::printf("strata %s\n", strata::version());
  return 0;
}
