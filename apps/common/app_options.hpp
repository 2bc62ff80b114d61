// The command-line loop every app's parse() shares (strata and MPI builds
// alike, so standard C++ only): the options all apps take (--check,
// --trace PREFIX, --backend NAME, -h/--help) and the error messages.
#pragma once

#include <exception>
#include <functional>
#include <string>

namespace apps {

/// Takes the value of the argument being parsed (the next word of argv);
/// throws std::string "missing value for <argument>" when there is none.
using NextValue = std::function<std::string()>;

/// Walks argv[1..]: --check, --trace and --backend set the fields of the same
/// names of @p o, -h/--help sets @p help; every other argument goes to
/// @p own(argument, value), which returns false for an argument it does not
/// know and may throw a std::string (the message returned). An exception from
/// a conversion (std::stoi, ...) becomes "bad value for <argument>".
/// Returns an error message, or "" when every argument was understood.
/// @code
///   return apps::parse_options(argc, argv, o, help, [&o](const std::string& a, const apps::NextValue& value) {
///     if (a != "--n") return false;
///     o.n = std::stoi(value());
///     return true;
///   });
/// @endcode
template <class Options, class Own>
std::string parse_options(int argc, char** argv, Options& o, bool& help, Own&& own) {
  help = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const NextValue value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::string("missing value for ") + a;
      return argv[++i];
    };
    try {
      if (a == "--check") {
        o.check = true;
      } else if (a == "--trace") {
        o.trace = value();
      } else if (a == "--backend") {
        o.backend = value();
      } else if (a == "-h" || a == "--help") {
        help = true;
      } else if (!own(a, value)) {
        return "unknown argument '" + a + "'";
      }
    } catch (const std::string& e) {
      return e;
    } catch (const std::exception&) {
      return "bad value for " + a;
    }
  }
  return "";
}

}  // namespace apps
