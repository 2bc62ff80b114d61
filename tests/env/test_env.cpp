// The STRATA_* registry (strata/detail/env.hpp): lookup, typed accessors and
// their errors, and that the sources read no STRATA_ variable outside it.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

#include "strata/detail/env.hpp"
#include "strata/error.hpp"

namespace env = strata::detail::env;

namespace {

// Sets a variable for one test and restores it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      had_ = true;
      old_ = old;
    }
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_.c_str(), old_.c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::string old_;
  bool had_ = false;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const strata::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(EnvRegistry, EveryRowIsCompleteAndNamesAreUnique) {
  std::set<std::string> names;
  for (const env::Var& v : env::registry()) {
    const std::string n = v.name;
    EXPECT_EQ(n.rfind("STRATA_", 0), 0u) << n;
    EXPECT_TRUE(names.insert(n).second) << "duplicate " << n;
    EXPECT_NE(std::string(v.type), "") << n;
    EXPECT_NE(std::string(v.def), "") << n;
    EXPECT_NE(std::string(v.component), "") << n;
    EXPECT_NE(std::string(v.doc), "") << n;
  }
  for (const char* must :
       {"STRATA_TIMEOUT", "STRATA_MAPPED", "STRATA_SLOT_BYTES", "STRATA_CREDITS", "STRATA_PROGRESS_MAX_BLOCK",
        "STRATA_FI_DOORBELL", "STRATA_TUNING", "STRATA_LOG_LEVEL", "STRATA_LOG_FILE", "STRATA_RANK"})
    EXPECT_NE(env::find(must), nullptr) << must;
  ASSERT_NE(env::find("STRATA_RANK"), nullptr);
  EXPECT_TRUE(env::find("STRATA_RANK")->launcher);
  EXPECT_FALSE(env::find("STRATA_TIMEOUT")->launcher);
}

TEST(EnvRegistry, FamiliesMatchTheirSuffixesAndExactNamesWin) {
  ASSERT_NE(env::find("STRATA_ALGO_ALLREDUCE"), nullptr);
  EXPECT_EQ(std::string(env::find("STRATA_ALGO_ALLREDUCE")->name), "STRATA_ALGO_<COLL>");
  EXPECT_EQ(std::string(env::find("STRATA_TREE")->name), "STRATA_TREE");
  EXPECT_EQ(std::string(env::find("STRATA_TREE_BROADCAST")->name), "STRATA_TREE_<COLL>");
  EXPECT_EQ(env::find("STRATA_ALGO_"), nullptr);  // the family needs a suffix
  EXPECT_EQ(env::find("STRATA_NO_SUCH_VARIABLE"), nullptr);
}

TEST(EnvRegistry, ReadingAnUnregisteredNameIsAProgrammingError) {
  EXPECT_THROW(env::get("STRATA_NO_SUCH_VARIABLE"), std::logic_error);
  EXPECT_THROW(env::get_int("STRATA_NO_SUCH_VARIABLE", 0, 0, 1), std::logic_error);
  EXPECT_THROW(env::require("HOME"), std::logic_error);
  EXPECT_NO_THROW(env::require("STRATA_ALGO_BROADCAST"));
}

TEST(EnvRegistry, TypedAccessorsParseAndNameTheVariableOnBadValues) {
  {
    ScopedEnv e("STRATA_CREDITS", "8");
    EXPECT_EQ(env::get_int("STRATA_CREDITS", 4, 1, 64), 8);
  }
  {
    ScopedEnv e("STRATA_CREDITS", "");
    EXPECT_EQ(env::get("STRATA_CREDITS"), nullptr);  // empty means unset
    EXPECT_EQ(env::get_int("STRATA_CREDITS", 4, 1, 64), 4);
  }
  {
    ScopedEnv e("STRATA_CREDITS", "lots");
    EXPECT_EQ(error_of([] {
                env::get_int("STRATA_CREDITS", 4, 1, 64);
              }).rfind("STRATA_CREDITS='lots': expected an integer in [1, 64]", 0),
              0u);
  }
  {
    ScopedEnv e("STRATA_CREDITS", "65");
    EXPECT_NE(error_of([] { env::get_int("STRATA_CREDITS", 4, 1, 64); }).find("expected an integer in [1, 64]"),
              std::string::npos);
  }
  {
    ScopedEnv e("STRATA_MAPPED", "off");
    EXPECT_FALSE(env::get_switch("STRATA_MAPPED", true));
    EXPECT_TRUE(env::is("STRATA_MAPPED", "off"));
  }
  {
    ScopedEnv e("STRATA_MAPPED", "maybe");
    EXPECT_EQ(
        error_of([] { env::get_switch("STRATA_MAPPED", true); }).rfind("STRATA_MAPPED='maybe': expected on or off", 0),
        0u);
  }
}

TEST(EnvRegistry, ConfigListingShowsTypeDefaultValueAndHidesSecrets) {
  ScopedEnv a("STRATA_TIMEOUT", "1234");
  ScopedEnv b("STRATA_JOB_SECRET", "abcdef");
  ScopedEnv c("STRATA_ALGO_ALLGATHER", "bruck");
  ScopedEnv d("STRATA_TIMOUT", "5");  // a typo
  const std::string s = env::describe();
  EXPECT_NE(s.find("STRATA_TIMEOUT  [integer 1..86400000 (ms); default 30000; transport]\n    = 1234\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("(hidden, 6 chars)"), std::string::npos) << s;
  EXPECT_EQ(s.find("abcdef"), std::string::npos) << s;
  EXPECT_NE(s.find("    STRATA_ALGO_ALLGATHER=bruck\n"), std::string::npos) << s;
  const std::size_t unknown = s.find("set but not read by strata (a typo?):\n");
  ASSERT_NE(unknown, std::string::npos) << s;
  EXPECT_NE(s.find("\n    STRATA_TIMOUT\n", unknown), std::string::npos) << s;
}

TEST(EnvRegistry, MarkdownHasEveryVariableOnce) {
  const std::string md = env::markdown();
  for (const env::Var& v : env::registry()) {
    const std::string cell = "\n| `" + std::string(v.name) + "` |";
    const std::size_t at = md.find(cell);
    EXPECT_NE(at, std::string::npos) << v.name;
    EXPECT_EQ(md.find(cell, at + 1), std::string::npos) << v.name;
  }
}

// Library, tool, app and benchmark sources (tests may read their own variables).
std::vector<std::filesystem::path> sources() {
  std::vector<std::filesystem::path> out;
  const std::filesystem::path root = STRATA_SOURCE_DIR;
  for (const char* dir : {"engine", "transport", "dag", "collectives", "sim", "apps", "bench", "examples"}) {
    if (!std::filesystem::exists(root / dir)) continue;
    for (const auto& e : std::filesystem::recursive_directory_iterator(root / dir)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file() && (ext == ".cpp" || ext == ".hpp" || ext == ".h" || ext == ".cc"))
        out.push_back(e.path());
    }
  }
  return out;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(EnvRegistry, NoSourceReadsAStrataVariableWithGetenv) {
  const std::vector<std::filesystem::path> files = sources();
  ASSERT_GT(files.size(), 50u) << "sources not found under " << STRATA_SOURCE_DIR;
  for (const auto& f : files) {
    if (f.filename() == "env_registry.cpp") continue;
    const std::string text = slurp(f);
    for (std::size_t at = text.find("getenv("); at != std::string::npos; at = text.find("getenv(", at + 1)) {
      std::size_t arg = at + 7;
      while (arg < text.size() && text[arg] == ' ') ++arg;
      const std::string rest = text.substr(arg, 40);
      const bool strata =
          rest.rfind("\"STRATA_", 0) == 0 || rest.find("rdv::env::k") == 0 || rest.find("detail::rdv::env::k") == 0;
      EXPECT_FALSE(strata) << f << " reads getenv(" << rest.substr(0, rest.find(')'))
                           << "): use strata::detail::env::get (strata/detail/env.hpp)";
    }
  }
}

TEST(EnvRegistry, EveryStrataNameInTheSourcesIsRegistered) {
  std::set<std::string> missing;
  for (const auto& f : sources()) {
    const std::string text = slurp(f);
    for (std::size_t at = text.find("\"STRATA_"); at != std::string::npos; at = text.find("\"STRATA_", at + 1)) {
      std::size_t end = at + 1;
      while (end < text.size() && (std::isupper(static_cast<unsigned char>(text[end])) ||
                                   std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '_'))
        ++end;
      std::string name = text.substr(at + 1, end - at - 1);
      if (name == "STRATA_") continue;                   // the prefix itself (listing the environment)
      if (name.back() == '_') name += "X";               // a family prefix, e.g. "STRATA_ALGO_" + kind
      if (name.rfind("STRATA_TEST_", 0) == 0) continue;  // tests' own variables
      if (env::find(name) == nullptr) missing.insert(name + " (" + f.filename().string() + ")");
    }
  }
  std::string list;
  for (const std::string& m : missing) list += "\n  " + m;
  EXPECT_TRUE(missing.empty()) << "not in transport/src/env_registry.cpp:" << list;
}

}  // namespace
