// The JSON codec of strata's own files (the tuning table, docs/tuning.md), on
// nlohmann-json. Private to strata::collectives: no JSON type appears in a
// public header (tuning.hpp exposes plain structs and text).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace strata::coll::detail {

/// Objects keep their members in document order.
using Json = nlohmann::ordered_json;

/// Parses @p text as one strict RFC 8259 document: no comments, no trailing
/// commas, no NaN / Infinity, no duplicate object keys, nesting at most 64
/// deep. Throws strata::Error (invalid_argument)
/// "<where>: line L, column C: malformed JSON: what".
Json parse_strict(const std::string& text, const std::string& where);

/// Writes @p v with two-space indentation and a trailing newline, in the
/// layout the tuning files always had: one member per line, arrays of scalars
/// and flat records inside arrays on one line, floating-point numbers with up
/// to 6 significant digits (integers exactly), non-finite numbers as 0.
std::string dump_pretty(const Json& v);

/// "object", "array", "string", "number", "boolean" or "null".
const char* type_name(const Json& v) noexcept;

}  // namespace strata::coll::detail
