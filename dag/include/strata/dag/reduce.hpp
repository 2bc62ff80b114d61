// Reduction kernels used by reduce nodes (and by collectives directly).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "strata/error.hpp"

namespace strata {
namespace dag {

/// @brief Element type of a reduction.
enum class DataType : std::uint8_t { i8, i16, i32, i64, u8, u16, u32, u64, f32, f64 };

/// @brief Built-in reduction operators.
enum class ReduceOp : std::uint8_t { sum, prod, min, max, band, bor, bxor };

/// @brief Size in bytes of one element of @p t.
std::size_t datatype_size(DataType t) noexcept;
/// @brief Printable names ("f32", "sum", ...).
const char* to_string(DataType t) noexcept;
const char* to_string(ReduceOp op) noexcept;

/// @brief A reduction kernel: dst[i] = a[i] OP b[i] for i < count. @p dst may
/// alias @p a or @p b exactly (not partially). For non-commutative operators
/// @p a is the left operand (the lower-ranked contribution by convention).
using ReduceKernel = void (*)(const void* a, const void* b, void* dst, std::size_t count);

/// @brief The built-in kernel for (@p op, @p t), or nullptr when the pair is
/// unsupported (bitwise operators on f32/f64).
///
/// @code
/// float a[4] = {1, 2, 3, 4}, b[4] = {1, 1, 1, 1};
/// strata::dag::reduce_kernel(strata::dag::ReduceOp::sum, strata::dag::DataType::f32)(a, b, a, 4);  // a = {2,3,4,5}
/// @endcode
ReduceKernel reduce_kernel(ReduceOp op, DataType t) noexcept;

/// @brief A user-defined reduction: same contract as ReduceKernel, with its
/// element size and whether it is commutative (non-commutative operators must
/// be applied in rank order by the collective compiler).
struct UserReduce {
  std::function<void(const void* a, const void* b, void* dst, std::size_t count)> fn;
  std::size_t elem_size = 1;  ///< bytes per element (> 0)
  bool commutative = true;
  std::string name = "user";
};

}  // namespace dag
}  // namespace strata
