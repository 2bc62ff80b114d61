// Regression: a rank that dies between creating its shm segment and unlinking
// it must not leave the segment in /dev/shm (strata-run removes the job's
// segments, whose names are derived from the job secret, at exit).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

std::string bin() {
  const char* b = std::getenv("STRATA_BIN");
  return b ? b : STRATA_BINARY_DIR "/bin";
}

TEST(Launcher, RemovesShmSegmentsACrashedRankLeftBehind) {
  const std::string cmd = bin() + "/strata-run -n 1 --timeout 30 -- " + bin() + "/shm-leftover-rank 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[256] = {0};
  const bool got = std::fgets(buf, sizeof buf, p) != nullptr;
  const int st = pclose(p);
  ASSERT_TRUE(got) << "the rank printed no segment name";
  std::string name(buf);
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
  ASSERT_EQ(name.rfind("strata-", 0), 0u) << name;
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) != 0);  // the rank failed, so the job failed
  struct stat sb;
  EXPECT_NE(::stat(("/dev/shm/" + name).c_str(), &sb), 0) << "/dev/shm/" << name << " was left behind";
}

}  // namespace
