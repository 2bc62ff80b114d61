// Internals shared by plan.cpp, plan_validate.cpp and plan_dot.cpp: how a
// region is printed and compared. Not installed.
#pragma once

#include <sstream>
#include <string>

#include "strata/dag/plan.hpp"

namespace strata::dag {

inline const char* to_string(BufferKind k) noexcept {
  switch (k) {
    case BufferKind::input:
      return "in";
    case BufferKind::output:
      return "out";
    case BufferKind::scratch:
      return "scratch";
    case BufferKind::peer:
      return "peer";
  }
  return "?";
}

inline std::string region_str(const Region& r) {
  std::ostringstream os;
  os << to_string(r.buf.kind);
  if (r.buf.kind == BufferKind::peer) os << r.buf.peer << ":";
  os << r.buf.id << "[" << r.offset << "+" << r.len << "]";
  return os.str();
}

inline bool same_buffer(const BufferRef& a, const BufferRef& b) {
  return a.kind == b.kind && a.id == b.id && (a.kind != BufferKind::peer || a.peer == b.peer);
}
inline bool overlaps(const Region& a, const Region& b) {
  return same_buffer(a.buf, b.buf) && a.offset < b.offset + b.len && b.offset < a.offset + a.len;
}

}  // namespace strata::dag
