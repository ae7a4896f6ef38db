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

// nccl-tests' -d names: int8, uint8, int32, uint32, int64, uint64, half,
// float, double, bfloat16.
enum class DataType : uint8_t {
  kFloat32,
  kFloat16,
  kBfloat16,
  kInt32,
  kInt64,
  kInt8,
  kUint8,
  kUint32,
  kUint64,
  kFloat64
};
// nccl-tests' -o names: sum, prod, max, min, avg. avg (ncclAvg) is a sum
// here; the collective scales each rank's contribution by 1/nranks before
// it enters the sum (NCCL's pre-multiplied sum for floating types), see
// ScaleElements. On integer types avg sums, and the step that completes a
// sum divides it (DivideElements), as NCCL does.
enum class RedOp : uint8_t { kSum, kProd, kMin, kMax, kAvg };

// In nccl-tests' order (what -d all and -o all sweep).
inline constexpr DataType kAllDataTypes[] = {
    DataType::kInt8,    DataType::kUint8,   DataType::kInt32,   DataType::kUint32,
    DataType::kInt64,   DataType::kUint64,  DataType::kFloat16, DataType::kFloat32,
    DataType::kFloat64, DataType::kBfloat16};
inline constexpr RedOp kAllRedOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin,
                                       RedOp::kAvg};

size_t DataTypeSize(DataType t);
bool IsFloatingType(DataType t);            // half, bfloat16, float, double
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
// kAvg adds (see RedOp).
void ReduceInto(void* dst, const void* src, size_t count, DataType type, RedOp op);

// buf[i] = buf[i] x factor, with the factor rounded to the type first and
// the product rounded to the type (NCCL's ncclRedOpCreatePreMulSum scalar):
// how avg scales a rank's input. Floating types only.
void ScaleElements(void* buf, size_t count, DataType type, double factor);

// buf[i] = buf[i] / divisor, truncated toward zero as C's integer division:
// how avg finishes on an integer type (NCCL sums, then divides the sum).
// Integer types only.
void DivideElements(void* buf, size_t count, DataType type, int divisor);

// Writes element `i` of a typed buffer from / reads it as a double (tests and
// the result checker; exact for the values they use). Integer types take the
// value's integer part modulo 2^bits (-3 in uint8 is 253).
void StoreElement(void* buf, size_t i, DataType type, double value);
double LoadElement(const void* buf, size_t i, DataType type);

// Integer types, exactly: element `i` as its bits sign-extended (signed
// types) or zero-extended (unsigned) to 64 bits; StoreInteger keeps the low
// bits. For the result checker's exact integer reference.
uint64_t LoadInteger(const void* buf, size_t i, DataType type);
void StoreInteger(void* buf, size_t i, DataType type, uint64_t bits);
bool IsSignedInteger(DataType t);

}  // namespace fathom::transport::coll
