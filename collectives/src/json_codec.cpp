// The JSON codec of the tuning files: collectives/src/json_codec.hpp.
#include "json_codec.hpp"

#include <cmath>
#include <cstdio>
#include <string>
#include <unordered_set>
#include <vector>

#include "strata/error.hpp"

namespace strata::coll::detail {

namespace {

constexpr int kMaxDepth = 64;

/// "line L, column C: what" out of nlohmann's "[json.exception.parse_error.N]
/// parse error at line L, column C: what".
std::string where_and_what(const std::string& msg) {
  const std::string at = "parse error at ";
  const std::size_t i = msg.find(at);
  return i == std::string::npos ? msg : msg.substr(i + at.size());
}

void quote(std::string& out, const std::string& s) {
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

void scalar(std::string& out, const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      out += "null";
      break;
    case Json::value_t::boolean:
      out += v.get<bool>() ? "true" : "false";
      break;
    case Json::value_t::string:
      quote(out, v.get_ref<const std::string&>());
      break;
    case Json::value_t::number_unsigned:
      out += std::to_string(v.get<std::uint64_t>());
      break;
    case Json::value_t::number_integer:
      out += std::to_string(v.get<std::int64_t>());
      break;
    case Json::value_t::number_float: {
      double x = v.get<double>();
      if (!std::isfinite(x)) x = 0;  // JSON has no NaN / Infinity
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.6g", x);
      out += buf;
      break;
    }
    default:
      out += v.dump();
      break;
  }
}

bool nested(const Json& v) { return v.is_array() || v.is_object(); }

void dump_to(std::string& out, const Json& v, int indent);

/// An array element: a non-empty object of scalars (a record) stays on one line.
void element(std::string& out, const Json& it, int indent) {
  bool record = it.is_object() && !it.empty();
  for (const auto& m : it.items()) record = record && !nested(m.value());
  if (!record) {
    dump_to(out, it, indent);
    return;
  }
  out += '{';
  bool first = true;
  for (const auto& m : it.items()) {
    if (!first) out += ", ";
    first = false;
    quote(out, m.key());
    out += ": ";
    scalar(out, m.value());
  }
  out += '}';
}

void dump_to(std::string& out, const Json& v, int indent) {
  const std::string pad(static_cast<std::size_t>(indent + 2), ' ');
  if (v.is_array()) {
    // Arrays of scalars stay on one line (measurement series).
    bool flat = true;
    for (const Json& it : v) flat = flat && !nested(it);
    out += '[';
    bool first = true;
    for (const Json& it : v) {
      if (!first) out += flat ? ", " : ",";
      first = false;
      if (!flat) out += "\n" + pad;
      element(out, it, indent + 2);
    }
    if (!flat && !v.empty()) out += "\n" + std::string(static_cast<std::size_t>(indent), ' ');
    out += ']';
  } else if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& m : v.items()) {
      out += first ? "\n" : ",\n";
      first = false;
      out += pad;
      quote(out, m.key());
      out += ": ";
      dump_to(out, m.value(), indent + 2);
    }
    if (!v.empty()) out += "\n" + std::string(static_cast<std::size_t>(indent), ' ');
    out += '}';
  } else {
    scalar(out, v);
  }
}

}  // namespace

Json parse_strict(const std::string& text, const std::string& where) {
  // The keys seen in each open object (duplicates are refused).
  std::vector<std::unordered_set<std::string>> keys;
  const Json::parser_callback_t check = [&keys, &where](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth > kMaxDepth)
      throw Error(Errc::invalid_argument,
                  where + ": malformed JSON: nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    switch (event) {
      case Json::parse_event_t::object_start:
        keys.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        keys.pop_back();
        break;
      case Json::parse_event_t::key: {
        const std::string& k = parsed.get_ref<const std::string&>();
        if (!keys.back().insert(k).second)
          throw Error(Errc::invalid_argument, where + ": malformed JSON: duplicate key \"" + k + "\"");
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return Json::parse(text, check, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const Json::parse_error& e) {
    const std::string detail = where_and_what(e.what());
    const std::size_t colon = detail.find(": ");
    // "<where>: line L, column C: malformed JSON: what"
    if (detail.rfind("line ", 0) == 0 && colon != std::string::npos)
      throw Error(Errc::invalid_argument,
                  where + ": " + detail.substr(0, colon) + ": malformed JSON: " + detail.substr(colon + 2));
    throw Error(Errc::invalid_argument, where + ": malformed JSON: " + detail);
  } catch (const Json::out_of_range& e) {
    // 406: a number beyond a double ("1e400").
    std::string what = e.what();
    const std::size_t close = what.find("] ");
    if (close != std::string::npos) what = what.substr(close + 2);
    throw Error(Errc::invalid_argument, where + ": malformed JSON: number out of range (" + what + ")");
  }
}

std::string dump_pretty(const Json& v) {
  std::string out;
  dump_to(out, v, 0);
  out += '\n';
  return out;
}

const char* type_name(const Json& v) noexcept {
  switch (v.type()) {
    case Json::value_t::object:
      return "object";
    case Json::value_t::array:
      return "array";
    case Json::value_t::string:
      return "string";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::null:
      return "null";
    default:
      return "number";
  }
}

}  // namespace strata::coll::detail
