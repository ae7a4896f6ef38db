#include "transport/collectives/reduce.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace fathom::transport::coll {
namespace {

struct Sum {
  template <typename T>
  static T Apply(T a, T b) {
    return a + b;
  }
};
struct Prod {
  template <typename T>
  static T Apply(T a, T b) {
    return a * b;
  }
};
struct Min {
  template <typename T>
  static T Apply(T a, T b) {
    return b < a ? b : a;
  }
};
struct Max {
  template <typename T>
  static T Apply(T a, T b) {
    return a < b ? b : a;
  }
};

// Integer sums and products wrap like NCCL's (two's complement), computed in
// unsigned arithmetic so that overflow is defined.
template <typename Op, typename T>
void Native(T* __restrict dst, const T* __restrict src, size_t n) {
  if constexpr (std::is_integral_v<T> && (std::is_same_v<Op, Sum> || std::is_same_v<Op, Prod>)) {
    using U = std::make_unsigned_t<T>;
    for (size_t i = 0; i < n; ++i) {
      dst[i] = static_cast<T>(Op::Apply(static_cast<U>(dst[i]), static_cast<U>(src[i])));
    }
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = Op::Apply(dst[i], src[i]);
  }
}

template <typename Op, float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void Narrow(uint16_t* __restrict dst, const uint16_t* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = FromF(Op::Apply(ToF(dst[i]), ToF(src[i])));
}

template <typename Op>
void Dispatch(void* dst, const void* src, size_t n, DataType type) {
  switch (type) {
    case DataType::kFloat32:
      Native<Op>(static_cast<float*>(dst), static_cast<const float*>(src), n);
      return;
    case DataType::kInt32:
      Native<Op>(static_cast<int32_t*>(dst), static_cast<const int32_t*>(src), n);
      return;
    case DataType::kInt64:
      Native<Op>(static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), n);
      return;
    case DataType::kFloat16:
      Narrow<Op, HalfToFloat, FloatToHalf>(static_cast<uint16_t*>(dst),
                                           static_cast<const uint16_t*>(src), n);
      return;
    case DataType::kBfloat16:
      Narrow<Op, Bfloat16ToFloat, FloatToBfloat16>(static_cast<uint16_t*>(dst),
                                                   static_cast<const uint16_t*>(src), n);
      return;
  }
}

}  // namespace

size_t DataTypeSize(DataType t) {
  switch (t) {
    case DataType::kFloat32:
    case DataType::kInt32:
      return 4;
    case DataType::kInt64:
      return 8;
    case DataType::kFloat16:
    case DataType::kBfloat16:
      return 2;
  }
  return 0;
}

std::string_view DataTypeName(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return "float";
    case DataType::kFloat16:
      return "half";
    case DataType::kBfloat16:
      return "bfloat16";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
  }
  return "?";
}

std::string_view RedOpName(RedOp op) {
  switch (op) {
    case RedOp::kSum:
      return "sum";
    case RedOp::kProd:
      return "prod";
    case RedOp::kMin:
      return "min";
    case RedOp::kMax:
      return "max";
  }
  return "?";
}

StatusOr<DataType> ParseDataType(std::string_view name) {
  for (DataType t : kAllDataTypes) {
    if (name == DataTypeName(t)) return t;
  }
  if (name == "float32") return DataType::kFloat32;
  if (name == "float16") return DataType::kFloat16;
  if (name == "bf16") return DataType::kBfloat16;
  return InvalidArgument("data type '" + std::string(name) +
                         "': expected float, half, bfloat16, int32 or int64");
}

StatusOr<RedOp> ParseRedOp(std::string_view name) {
  for (RedOp op : kAllRedOps) {
    if (name == RedOpName(op)) return op;
  }
  return InvalidArgument("reduction op '" + std::string(name) +
                         "': expected sum, prod, min or max");
}

uint16_t FloatToHalf(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to Inf
  if (abs < 0x38800000u) {  // subnormal half (or zero): exponent < -14
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // value = mant * 2^(exp-150) = h * 2^-24
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits.
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalize
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while ((mant & 0x400u) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t FloatToBfloat16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

float Bfloat16ToFloat(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

void ReduceInto(void* dst, const void* src, size_t count, DataType type, RedOp op) {
  switch (op) {
    case RedOp::kSum:
      return Dispatch<Sum>(dst, src, count, type);
    case RedOp::kProd:
      return Dispatch<Prod>(dst, src, count, type);
    case RedOp::kMin:
      return Dispatch<Min>(dst, src, count, type);
    case RedOp::kMax:
      return Dispatch<Max>(dst, src, count, type);
  }
}

void StoreElement(void* buf, size_t i, DataType type, double value) {
  switch (type) {
    case DataType::kFloat32:
      static_cast<float*>(buf)[i] = static_cast<float>(value);
      return;
    case DataType::kInt32:
      static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(value);
      return;
    case DataType::kInt64:
      static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(value);
      return;
    case DataType::kFloat16:
      static_cast<uint16_t*>(buf)[i] = FloatToHalf(static_cast<float>(value));
      return;
    case DataType::kBfloat16:
      static_cast<uint16_t*>(buf)[i] = FloatToBfloat16(static_cast<float>(value));
      return;
  }
}

double LoadElement(const void* buf, size_t i, DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return static_cast<const float*>(buf)[i];
    case DataType::kInt32:
      return static_cast<const int32_t*>(buf)[i];
    case DataType::kInt64:
      return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case DataType::kFloat16:
      return HalfToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kBfloat16:
      return Bfloat16ToFloat(static_cast<const uint16_t*>(buf)[i]);
  }
  return 0;
}

}  // namespace fathom::transport::coll
