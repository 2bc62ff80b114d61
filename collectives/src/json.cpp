// Strict JSON (RFC 8259): collectives/include/strata/collectives/json.hpp.
#include "strata/collectives/json.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "strata/error.hpp"

namespace strata::json {

Value Value::boolean(bool b) {
  Value v;
  v.type_ = Type::boolean;
  v.b_ = b;
  return v;
}

Value Value::integer(std::uint64_t x) {
  Value v;
  v.type_ = Type::number;
  v.uint_ok_ = true;
  v.u_ = x;
  v.d_ = static_cast<double>(x);
  v.s_ = std::to_string(x);
  return v;
}

Value Value::number(double x) {
  if (!std::isfinite(x)) x = 0;  // JSON has no NaN / Infinity
  Value v;
  v.type_ = Type::number;
  v.d_ = x;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  v.s_ = buf;
  if (v.s_.find_first_of(".eEn") == std::string::npos && x >= 0) {
    v.uint_ok_ = true;
    v.u_ = static_cast<std::uint64_t>(x);
  }
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.type_ = Type::string;
  v.s_ = std::move(s);
  return v;
}

Value Value::array() {
  Value v;
  v.type_ = Type::array;
  return v;
}

Value Value::object() {
  Value v;
  v.type_ = Type::object;
  return v;
}

const char* Value::type_name(Type t) noexcept {
  switch (t) {
    case Type::null:
      return "null";
    case Type::boolean:
      return "boolean";
    case Type::number:
      return "number";
    case Type::string:
      return "string";
    case Type::array:
      return "array";
    case Type::object:
      return "object";
  }
  return "?";
}

const Value* Value::find(const std::string& key) const noexcept {
  if (type_ != Type::object) return nullptr;
  for (const auto& m : members_)
    if (m.first == key) return &m.second;
  return nullptr;
}

Value& Value::push(Value v) {
  items_.push_back(std::move(v));
  return items_.back();
}

Value& Value::set(const std::string& key, Value v) {
  for (auto& m : members_)
    if (m.first == key) {
      m.second = std::move(v);
      return m.second;
    }
  members_.emplace_back(key, std::move(v));
  return members_.back().second;
}

namespace {

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

}  // namespace

void Value::dump_to(std::string& out, int indent) const {
  const std::string pad(static_cast<std::size_t>(indent + 2), ' ');
  switch (type_) {
    case Type::null:
      out += "null";
      break;
    case Type::boolean:
      out += b_ ? "true" : "false";
      break;
    case Type::number:
      out += s_;
      break;
    case Type::string:
      quote(out, s_);
      break;
    case Type::array: {
      // Arrays of scalars stay on one line (measurement series).
      bool flat = true;
      for (const Value& v : items_) flat = flat && v.type_ != Type::array && v.type_ != Type::object;
      out += '[';
      for (std::size_t i = 0; i < items_.size(); ++i) {
        if (i > 0) out += flat ? ", " : ",";
        if (!flat) out += "\n" + pad;
        const Value& it = items_[i];
        bool scalars = it.type_ == Type::object;
        for (const auto& m : it.members_)
          scalars = scalars && m.second.type_ != Type::array && m.second.type_ != Type::object;
        if (scalars && !it.members_.empty()) {  // a record: one line
          out += '{';
          for (std::size_t k = 0; k < it.members_.size(); ++k) {
            if (k > 0) out += ", ";
            quote(out, it.members_[k].first);
            out += ": ";
            it.members_[k].second.dump_to(out, 0);
          }
          out += '}';
        } else {
          it.dump_to(out, indent + 2);
        }
      }
      if (!flat && !items_.empty()) out += "\n" + std::string(static_cast<std::size_t>(indent), ' ');
      out += ']';
      break;
    }
    case Type::object:
      out += '{';
      for (std::size_t i = 0; i < members_.size(); ++i) {
        out += i > 0 ? ",\n" : "\n";
        out += pad;
        quote(out, members_[i].first);
        out += ": ";
        members_[i].second.dump_to(out, indent + 2);
      }
      if (!members_.empty()) out += "\n" + std::string(static_cast<std::size_t>(indent), ' ');
      out += '}';
      break;
  }
}

std::string Value::dump() const {
  std::string out;
  dump_to(out, 0);
  out += '\n';
  return out;
}

// ---------------------------------------------------------------- parser
class Parser {
 public:
  Parser(const std::string& text, const std::string& where) : t_(text), where_(where) {}

  Value document() {
    ws();
    Value v = value(0);
    ws();
    if (i_ != t_.size()) fail("unexpected text after the top-level value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    std::size_t line = 1, col = 1;
    for (std::size_t k = 0; k < i_ && k < t_.size(); ++k) {
      if (t_[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string path = "$";
    for (const std::string& p : path_) path += p;
    throw Error(Errc::invalid_argument, where_ + ": line " + std::to_string(line) + ", column " + std::to_string(col) +
                                            " (at " + path + "): malformed JSON: " + what);
  }

  void ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r')) ++i_;
  }

  bool lit(const char* word) {
    std::size_t k = 0;
    while (word[k] != '\0') {
      if (i_ + k >= t_.size() || t_[i_ + k] != word[k]) return false;
      ++k;
    }
    i_ += k;
    return true;
  }

  Value value(int depth) {
    if (depth > 64) fail("nesting deeper than 64");
    if (i_ >= t_.size()) fail("unexpected end of input, expected a value");
    const char ch = t_[i_];
    if (ch == '{') return object(depth);
    if (ch == '[') return array(depth);
    if (ch == '"') return Value::string(str());
    if (ch == '-' || (ch >= '0' && ch <= '9')) return num();
    if (lit("true")) return Value::boolean(true);
    if (lit("false")) return Value::boolean(false);
    if (lit("null")) return Value();
    fail(std::string("unexpected character '") + ch + "', expected a value");
  }

  Value object(int depth) {
    Value v = Value::object();
    ++i_;  // {
    ws();
    if (i_ < t_.size() && t_[i_] == '}') {
      ++i_;
      return v;
    }
    for (;;) {
      ws();
      if (i_ >= t_.size() || t_[i_] != '"') fail("expected a member name (a string)");
      std::string key = str();
      if (v.find(key) != nullptr) fail("duplicate member \"" + key + "\"");
      ws();
      if (i_ >= t_.size() || t_[i_] != ':') fail("expected ':' after member name \"" + key + "\"");
      ++i_;
      ws();
      path_.push_back("." + key);
      Value m = value(depth + 1);
      path_.pop_back();
      v.members_.emplace_back(std::move(key), std::move(m));
      ws();
      if (i_ < t_.size() && t_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < t_.size() && t_[i_] == '}') {
        ++i_;
        return v;
      }
      fail("expected ',' or '}' in an object");
    }
  }

  Value array(int depth) {
    Value v = Value::array();
    ++i_;  // [
    ws();
    if (i_ < t_.size() && t_[i_] == ']') {
      ++i_;
      return v;
    }
    for (;;) {
      ws();
      path_.push_back("[" + std::to_string(v.items_.size()) + "]");
      Value e = value(depth + 1);
      path_.pop_back();
      v.items_.push_back(std::move(e));
      ws();
      if (i_ < t_.size() && t_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < t_.size() && t_[i_] == ']') {
        ++i_;
        return v;
      }
      fail("expected ',' or ']' in an array");
    }
  }

  static void utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::uint32_t hex4() {
    if (i_ + 4 > t_.size()) fail("truncated \\u escape");
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = t_[i_++];
      v <<= 4;
      if (h >= '0' && h <= '9')
        v |= static_cast<std::uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f')
        v |= static_cast<std::uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        v |= static_cast<std::uint32_t>(h - 'A' + 10);
      else
        fail("bad hex digit in a \\u escape");
    }
    return v;
  }

  std::string str() {
    ++i_;  // "
    std::string out;
    for (;;) {
      if (i_ >= t_.size()) fail("unterminated string");
      const auto c = static_cast<unsigned char>(t_[i_]);
      if (c == '"') {
        ++i_;
        return out;
      }
      if (c < 0x20) fail("control character in a string (escape it)");
      if (c != '\\') {
        out += static_cast<char>(c);
        ++i_;
        continue;
      }
      ++i_;
      if (i_ >= t_.size()) fail("unterminated escape");
      const char e = t_[i_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          std::uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {
            if (i_ + 2 > t_.size() || t_[i_] != '\\' || t_[i_ + 1] != 'u') fail("unpaired surrogate");
            i_ += 2;
            const std::uint32_t lo = hex4();
            if (lo < 0xDC00 || lo >= 0xE000) fail("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            fail("unpaired surrogate");
          }
          utf8(out, cp);
          break;
        }
        default:
          --i_;
          fail(std::string("unknown escape '\\") + e + "'");
      }
    }
  }

  Value num() {
    const std::size_t start = i_;
    bool neg = false, integral = true;
    if (t_[i_] == '-') {
      neg = true;
      ++i_;
    }
    auto digits = [&] {
      const std::size_t d0 = i_;
      while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') ++i_;
      return i_ - d0;
    };
    if (i_ >= t_.size() || t_[i_] < '0' || t_[i_] > '9') fail("expected a digit");
    if (t_[i_] == '0') {
      ++i_;
      if (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') fail("leading zero in a number");
    } else {
      digits();
    }
    if (i_ < t_.size() && t_[i_] == '.') {
      integral = false;
      ++i_;
      if (digits() == 0) fail("expected a digit after '.'");
    }
    if (i_ < t_.size() && (t_[i_] == 'e' || t_[i_] == 'E')) {
      integral = false;
      ++i_;
      if (i_ < t_.size() && (t_[i_] == '+' || t_[i_] == '-')) ++i_;
      if (digits() == 0) fail("expected a digit in the exponent");
    }
    Value v;
    v.type_ = Value::Type::number;
    v.s_ = t_.substr(start, i_ - start);
    v.d_ = std::strtod(v.s_.c_str(), nullptr);
    if (!std::isfinite(v.d_)) fail("number out of range");
    if (integral && !neg) {
      std::uint64_t u = 0;
      bool fits = true;
      for (const char d : v.s_) {
        const auto dv = static_cast<std::uint64_t>(d - '0');
        if (u > (UINT64_MAX - dv) / 10) fits = false;
        u = u * 10 + dv;
      }
      v.uint_ok_ = fits;
      v.u_ = fits ? u : 0;
    }
    return v;
  }

  const std::string& t_;
  const std::string& where_;
  std::size_t i_ = 0;
  std::vector<std::string> path_;
};

Value parse(const std::string& text, const std::string& where) { return Parser(text, where).document(); }

}  // namespace strata::json
