// A small strict JSON reader / writer (RFC 8259) for strata's own files (the
// tuning table, docs/tuning.md). No extensions: no comments, no trailing
// commas, no NaN / Infinity, no duplicate object keys; errors name the line,
// the column and the JSON path.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace strata::json {

/// @brief One JSON value. Objects keep their members in document order;
/// numbers keep their source text (exact integers up to 2^64 - 1).
class Value {
 public:
  /// @brief The JSON types.
  enum class Type : std::uint8_t { null, boolean, number, string, array, object };

  Value() = default;
  /// @brief A boolean.
  static Value boolean(bool b);
  /// @brief An unsigned integer (written exactly).
  static Value integer(std::uint64_t v);
  /// @brief A number (written with up to 6 significant decimals; must be finite).
  static Value number(double v);
  /// @brief A string.
  static Value string(std::string s);
  /// @brief An empty array.
  static Value array();
  /// @brief An empty object.
  static Value object();

  /// @brief This value's type.
  [[nodiscard]] Type type() const noexcept { return type_; }
  /// @brief Name of a type ("object", ...), for error messages.
  static const char* type_name(Type t) noexcept;

  /// @brief The boolean (type must be boolean).
  [[nodiscard]] bool as_bool() const noexcept { return b_; }
  /// @brief The number as a double (type must be number).
  [[nodiscard]] double as_double() const noexcept { return d_; }
  /// @brief Whether the number is a non-negative integer that fits 64 bits
  /// (no fraction, no exponent, no sign).
  [[nodiscard]] bool is_uint() const noexcept { return type_ == Type::number && uint_ok_; }
  /// @brief The integer (is_uint() must hold).
  [[nodiscard]] std::uint64_t as_uint() const noexcept { return u_; }
  /// @brief The string (type must be string).
  [[nodiscard]] const std::string& as_string() const noexcept { return s_; }
  /// @brief Array elements (type must be array).
  [[nodiscard]] const std::vector<Value>& items() const noexcept { return items_; }
  /// @brief Object members in order (type must be object).
  [[nodiscard]] const std::vector<std::pair<std::string, Value>>& members() const noexcept { return members_; }
  /// @brief Member @p key of an object, or nullptr when absent (or not an object).
  [[nodiscard]] const Value* find(const std::string& key) const noexcept;

  /// @brief Appends to an array; returns the new element.
  Value& push(Value v);
  /// @brief Sets member @p key of an object (replaces an existing one); returns it.
  Value& set(const std::string& key, Value v);

  /// @brief Serializes with two-space indentation (a trailing newline at top level).
  [[nodiscard]] std::string dump() const;

 private:
  void dump_to(std::string& out, int indent) const;
  friend class Parser;
  Type type_ = Type::null;
  bool b_ = false;
  bool uint_ok_ = false;
  double d_ = 0;
  std::uint64_t u_ = 0;
  std::string s_;  // string, or the number's text
  std::vector<Value> items_;
  std::vector<std::pair<std::string, Value>> members_;
};

/// @brief Parses @p text as one JSON document. Throws strata::Error
/// (invalid_argument) "<where>: line L, column C (at PATH): what" on any
/// deviation from RFC 8259, duplicate keys or nesting deeper than 64.
Value parse(const std::string& text, const std::string& where);

}  // namespace strata::json
