// Command-line parsing shared by every strata tool (strata-run, strata-bench,
// strata-sim, the apps, ...): CLI11 with one error style and one exit status.
//
//   CLI::App app{"what the tool does", "strata-demo"};
//   app.add_option("--bytes", bytes, "block size")->check(strata::cli::positive_integer());
//   strata::cli::parse(app, argc, argv);  // --help: exit 0; a bad value: exit 2
//
// Errors are one line on stderr, "<tool>: error: <message> (see <tool> --help)",
// and the message names the option as the user can spell it ("-o,--output needs
// a value", "--bytes expects a positive integer, got 'abc'").
#pragma once

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

namespace strata::cli {

/// Exit status of a command-line error in every strata tool.
inline constexpr int kExitUsage = 2;

/// Prints "<tool>: error: <msg> (see <tool> --help)" to stderr (when @p print) and exits kExitUsage.
[[noreturn]] inline void fail(const std::string& tool, const std::string& msg, bool print = true) {
  if (print) std::fprintf(stderr, "%s: error: %s (see %s --help)\n", tool.c_str(), msg.c_str(), tool.c_str());
  std::exit(kExitUsage);
}

/// Every spelling of option @p name of @p app ("-o,--output"), or @p name if it is not an option.
inline std::string spelling(const CLI::App& app, const std::string& name) {
  const CLI::Option* opt = app.get_option_no_throw(name);
  if (opt == nullptr) return name;
  return opt->get_name(false, true);
}

/// One-line message of a CLI11 parse error, naming the option in the user's spelling.
inline std::string describe(const CLI::App& app, const CLI::ParseError& e) {
  std::string what = e.what();
  const auto colon = what.find(": ");
  const std::string head = colon == std::string::npos ? std::string() : what.substr(0, colon);
  const std::string rest = colon == std::string::npos ? what : what.substr(colon + 2);
  const bool named = !head.empty() && (head[0] == '-' || app.get_option_no_throw(head) != nullptr);
  const auto override_at = what.find(" was given a disallowed flag override");
  if (override_at != std::string::npos) {  // strict_flags(): "--tag-output=3"
    const std::string flag = what.substr(0, override_at);
    return spelling(app, (flag.rfind('-', 0) == 0 ? "" : "--") + flag) + " takes no value";
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr && named &&
      rest.find("required") != std::string::npos && rest.find("missing") != std::string::npos)
    return spelling(app, head) + " needs a value";
  if (dynamic_cast<const CLI::ValidationError*>(&e) != nullptr && named) return spelling(app, head) + " " + rest;
  if (dynamic_cast<const CLI::ConversionError*>(&e) != nullptr) {
    // "Could not convert: --np = 2x"
    const auto eq = rest.find(" = ");
    if (eq != std::string::npos)
      return spelling(app, rest.substr(0, eq)) + " expects a value of its type, got '" + rest.substr(eq + 3) + "'";
  }
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    // "The following arguments were not expected: --bogus"
    const auto at = what.rfind(": ");
    return "unknown option or argument '" + (at == std::string::npos ? what : what.substr(at + 2)) + "'";
  }
  return what;
}

/// Makes every flag of @p app refuse a value (`--tag-output=3`): CLI11 would read it as true or false.
inline void strict_flags(CLI::App& app) {
  for (CLI::Option* opt : app.get_options())
    if (opt->get_expected_max() == 0 && !opt->get_positional()) opt->disable_flag_override();
}

/// Parses @p argv with @p app. --help (and --help-all) print the help to stdout and
/// exit 0; an error exits kExitUsage after one line on stderr (printed only when
/// @p print_errors: ranks other than 0 of a parallel tool stay silent).
inline void parse(CLI::App& app, int argc, const char* const* argv, bool print_errors = true) {
  strict_flags(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    std::exit(app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    std::exit(app.exit(e));
  } catch (const CLI::ParseError& e) {
    fail(app.get_name(), describe(app, e), print_errors);
  }
}

inline void parse(CLI::App& app, int argc, char** argv, bool print_errors = true) {
  parse(app, argc, const_cast<const char* const*>(argv), print_errors);
}

/// @brief For tools that run a command (strata-run, strata-net): parses the
/// options before the first word that is not an option, or before "--", and
/// returns the words from there on (without the "--"). An unknown option
/// before the command is an error.
inline std::vector<std::string> parse_prefix(CLI::App& app, int argc, char** argv) {
  app.prefix_command();
  parse(app, argc, argv);
  std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && rest.front() == "--") {
    rest.erase(rest.begin());
  } else if (!rest.empty() && rest.front().size() > 1 && rest.front()[0] == '-') {
    fail(app.get_name(), "unknown option '" + rest.front() + "'");
  }
  return rest;
}

namespace detail {
inline bool to_long(const std::string& v, long& x) {
  char* end = nullptr;
  errno = 0;
  x = std::strtol(v.c_str(), &end, 10);
  return !v.empty() && errno == 0 && *end == '\0';
}
inline bool to_double(const std::string& v, double& x) {
  char* end = nullptr;
  errno = 0;
  x = std::strtod(v.c_str(), &end);
  return !v.empty() && errno == 0 && *end == '\0';
}
}  // namespace detail

/// Validator: a decimal integer in [lo, hi] ("expects an integer in [lo, hi], got 'x'").
inline CLI::Validator integer(long lo, long hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) -> std::string {
        long x = 0;
        if (detail::to_long(v, x) && x >= lo && x <= hi) return {};
        return "expects an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + v + "'";
      },
      "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

/// Validator: a decimal integer >= @p lo ("expects an integer >= lo, got 'x'").
inline CLI::Validator integer_at_least(long lo) {
  return CLI::Validator(
      [lo](std::string& v) -> std::string {
        long x = 0;
        if (detail::to_long(v, x) && x >= lo && x <= (1L << 30)) return {};
        return (lo == 1 ? std::string("expects a positive integer") : "expects an integer >= " + std::to_string(lo)) +
               ", got '" + v + "'";
      },
      "INT >= " + std::to_string(lo));
}

/// Validator: a positive decimal integer ("expects a positive integer, got 'x'").
inline CLI::Validator positive_integer() { return integer_at_least(1); }

/// Validator: a number > 0 (or >= 0 with @p allow_zero), e.g. seconds or a factor.
inline CLI::Validator positive_number(bool allow_zero = false) {
  return CLI::Validator(
      [allow_zero](std::string& v) -> std::string {
        double x = 0;
        if (detail::to_double(v, x) && (allow_zero ? x >= 0 : x > 0) && x <= 1e15) return {};
        return std::string("expects a number ") + (allow_zero ? ">= 0" : "> 0") + ", got '" + v + "'";
      },
      allow_zero ? "NUMBER >= 0" : "NUMBER > 0");
}

/// Validator: one of @p words ("expects a or b, got 'x'").
inline CLI::Validator one_of(std::vector<std::string> words) {
  std::string list;
  for (std::size_t i = 0; i < words.size(); ++i)
    list += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
  std::string desc;
  for (std::size_t i = 0; i < words.size(); ++i) desc += (i == 0 ? "" : "|") + words[i];
  return CLI::Validator(
      [words, list](std::string& v) -> std::string {
        for (const auto& w : words)
          if (v == w) return {};
        return "expects " + list + ", got '" + v + "'";
      },
      desc);
}

}  // namespace strata::cli
