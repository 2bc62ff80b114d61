// Built-in reduction kernels: one template instantiated per (op, type).
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "strata/dag/reduce.hpp"

namespace strata {
namespace dag {
namespace {

struct Sum {
  template <class T>
  static T apply(T a, T b) {
    return static_cast<T>(a + b);
  }
};
struct Prod {
  template <class T>
  static T apply(T a, T b) {
    return static_cast<T>(a * b);
  }
};
struct Min {
  template <class T>
  static T apply(T a, T b) {
    return std::min(a, b);
  }
};
struct Max {
  template <class T>
  static T apply(T a, T b) {
    return std::max(a, b);
  }
};
struct Band {
  template <class T>
  static T apply(T a, T b) {
    return static_cast<T>(a & b);
  }
};
struct Bor {
  template <class T>
  static T apply(T a, T b) {
    return static_cast<T>(a | b);
  }
};
struct Bxor {
  template <class T>
  static T apply(T a, T b) {
    return static_cast<T>(a ^ b);
  }
};

// Unsigned arithmetic for the signed sum/prod avoids undefined overflow.
template <class Op, class T>
T apply_wrapping(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T> && (std::is_same_v<Op, Sum> || std::is_same_v<Op, Prod>)) {
    using U = std::make_unsigned_t<T>;
    const U r = Op::apply(static_cast<U>(a), static_cast<U>(b));
    T out;
    std::memcpy(&out, &r, sizeof out);
    return out;
  } else {
    return Op::apply(a, b);
  }
}

template <class Op, class T>
void kernel(const void* a, const void* b, void* dst, std::size_t count) {
  // memcpy-based loads keep unaligned fragments legal; compilers vectorize this loop.
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  auto* pd = static_cast<unsigned char*>(dst);
  for (std::size_t i = 0; i < count; ++i) {
    T x;
    T y;
    std::memcpy(&x, pa + i * sizeof(T), sizeof(T));
    std::memcpy(&y, pb + i * sizeof(T), sizeof(T));
    const T r = apply_wrapping<Op, T>(x, y);
    std::memcpy(pd + i * sizeof(T), &r, sizeof(T));
  }
}

template <class Op>
ReduceKernel for_type(DataType t, bool bitwise) noexcept {
  switch (t) {
    case DataType::i8:
      return &kernel<Op, std::int8_t>;
    case DataType::i16:
      return &kernel<Op, std::int16_t>;
    case DataType::i32:
      return &kernel<Op, std::int32_t>;
    case DataType::i64:
      return &kernel<Op, std::int64_t>;
    case DataType::u8:
      return &kernel<Op, std::uint8_t>;
    case DataType::u16:
      return &kernel<Op, std::uint16_t>;
    case DataType::u32:
      return &kernel<Op, std::uint32_t>;
    case DataType::u64:
      return &kernel<Op, std::uint64_t>;
    case DataType::f32:
      if constexpr (!std::is_same_v<Op, Band> && !std::is_same_v<Op, Bor> && !std::is_same_v<Op, Bxor>)
        return &kernel<Op, float>;
      break;
    case DataType::f64:
      if constexpr (!std::is_same_v<Op, Band> && !std::is_same_v<Op, Bor> && !std::is_same_v<Op, Bxor>)
        return &kernel<Op, double>;
      break;
  }
  (void)bitwise;
  return nullptr;
}

}  // namespace

std::size_t datatype_size(DataType t) noexcept {
  switch (t) {
    case DataType::i8:
    case DataType::u8:
      return 1;
    case DataType::i16:
    case DataType::u16:
      return 2;
    case DataType::i32:
    case DataType::u32:
    case DataType::f32:
      return 4;
    case DataType::i64:
    case DataType::u64:
    case DataType::f64:
      return 8;
  }
  return 0;
}

const char* to_string(DataType t) noexcept {
  switch (t) {
    case DataType::i8:
      return "i8";
    case DataType::i16:
      return "i16";
    case DataType::i32:
      return "i32";
    case DataType::i64:
      return "i64";
    case DataType::u8:
      return "u8";
    case DataType::u16:
      return "u16";
    case DataType::u32:
      return "u32";
    case DataType::u64:
      return "u64";
    case DataType::f32:
      return "f32";
    case DataType::f64:
      return "f64";
  }
  return "?";
}

const char* to_string(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::prod:
      return "prod";
    case ReduceOp::min:
      return "min";
    case ReduceOp::max:
      return "max";
    case ReduceOp::band:
      return "band";
    case ReduceOp::bor:
      return "bor";
    case ReduceOp::bxor:
      return "bxor";
  }
  return "?";
}

ReduceKernel reduce_kernel(ReduceOp op, DataType t) noexcept {
  switch (op) {
    case ReduceOp::sum:
      return for_type<Sum>(t, false);
    case ReduceOp::prod:
      return for_type<Prod>(t, false);
    case ReduceOp::min:
      return for_type<Min>(t, false);
    case ReduceOp::max:
      return for_type<Max>(t, false);
    case ReduceOp::band:
      return for_type<Band>(t, true);
    case ReduceOp::bor:
      return for_type<Bor>(t, true);
    case ReduceOp::bxor:
      return for_type<Bxor>(t, true);
  }
  return nullptr;
}

}  // namespace dag
}  // namespace strata
