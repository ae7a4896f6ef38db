// Host-side reduction kernels for the collectives: dst[i] = dst[i] OP src[i]
// for the data types and operations of NCCL (ncclDataType_t, ncclRedOp_t).
// The loops are plain element-wise loops over restrict pointers so that the
// compiler vectorizes them; float16 and bfloat16 are reduced in float and
// rounded back to nearest-even with a software conversion (g++ 12 and clang
// 14 disagree on _Float16 for x86, so it is not used).
//
// Ownership: the kernels read and write the caller's memory, nothing else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace fathom::transport::coll {

// nccl-tests' -d names: float, half, bfloat16, int32, int64.
enum class DataType : uint8_t { kFloat32, kFloat16, kBfloat16, kInt32, kInt64 };
// nccl-tests' -o names: sum, prod, min, max.
enum class RedOp : uint8_t { kSum, kProd, kMin, kMax };

inline constexpr DataType kAllDataTypes[] = {DataType::kFloat32, DataType::kFloat16,
                                             DataType::kBfloat16, DataType::kInt32,
                                             DataType::kInt64};
inline constexpr RedOp kAllRedOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax};

size_t DataTypeSize(DataType t);
std::string_view DataTypeName(DataType t);  // "float", "half", ...
std::string_view RedOpName(RedOp op);       // "sum", ...
StatusOr<DataType> ParseDataType(std::string_view name);
StatusOr<RedOp> ParseRedOp(std::string_view name);

// IEEE binary16 and bfloat16 <-> float, round to nearest even (NaN stays NaN).
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);
uint16_t FloatToBfloat16(float f);
float Bfloat16ToFloat(uint16_t b);

// dst[i] = dst[i] OP src[i] for i < count. dst and src must not overlap.
void ReduceInto(void* dst, const void* src, size_t count, DataType type, RedOp op);

// Writes element `i` of a typed buffer from / reads it as a double (tests and
// the result checker; exact for the values they use).
void StoreElement(void* buf, size_t i, DataType type, double value);
double LoadElement(const void* buf, size_t i, DataType type);

}  // namespace fathom::transport::coll
