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

template <typename Op, typename T>
void NativeVoid(void* dst, const void* src, size_t n) {
  Native<Op>(static_cast<T*>(dst), static_cast<const T*>(src), n);
}

template <typename Op>
void Dispatch(void* dst, const void* src, size_t n, DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return NativeVoid<Op, float>(dst, src, n);
    case DataType::kFloat64:
      return NativeVoid<Op, double>(dst, src, n);
    case DataType::kInt8:
      return NativeVoid<Op, int8_t>(dst, src, n);
    case DataType::kUint8:
      return NativeVoid<Op, uint8_t>(dst, src, n);
    case DataType::kInt32:
      return NativeVoid<Op, int32_t>(dst, src, n);
    case DataType::kUint32:
      return NativeVoid<Op, uint32_t>(dst, src, n);
    case DataType::kInt64:
      return NativeVoid<Op, int64_t>(dst, src, n);
    case DataType::kUint64:
      return NativeVoid<Op, uint64_t>(dst, src, n);
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
    case DataType::kInt8:
    case DataType::kUint8:
      return 1;
    case DataType::kFloat32:
    case DataType::kInt32:
    case DataType::kUint32:
      return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64:
      return 8;
    case DataType::kFloat16:
    case DataType::kBfloat16:
      return 2;
  }
  return 0;
}

bool IsFloatingType(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 ||
         t == DataType::kBfloat16;
}

bool IsSignedInteger(DataType t) {
  return t == DataType::kInt8 || t == DataType::kInt32 || t == DataType::kInt64;
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
    case DataType::kInt8:
      return "int8";
    case DataType::kUint8:
      return "uint8";
    case DataType::kUint32:
      return "uint32";
    case DataType::kUint64:
      return "uint64";
    case DataType::kFloat64:
      return "double";
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
    case RedOp::kAvg:
      return "avg";
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
  if (name == "float64") return DataType::kFloat64;
  return InvalidArgument("data type '" + std::string(name) +
                         "': expected int8, uint8, int32, uint32, int64, uint64, half, float, "
                         "double or bfloat16");
}

StatusOr<RedOp> ParseRedOp(std::string_view name) {
  for (RedOp op : kAllRedOps) {
    if (name == RedOpName(op)) return op;
  }
  return InvalidArgument("reduction op '" + std::string(name) +
                         "': expected sum, prod, max, min or avg");
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
    case RedOp::kAvg:
      return Dispatch<Sum>(dst, src, count, type);
  }
}

void ScaleElements(void* buf, size_t count, DataType type, double factor) {
  switch (type) {
    case DataType::kFloat32: {
      float* p = static_cast<float*>(buf);
      const float f = static_cast<float>(factor);
      for (size_t i = 0; i < count; ++i) p[i] *= f;
      return;
    }
    case DataType::kFloat64: {
      double* p = static_cast<double*>(buf);
      for (size_t i = 0; i < count; ++i) p[i] *= factor;
      return;
    }
    case DataType::kFloat16: {
      uint16_t* p = static_cast<uint16_t*>(buf);
      const float f = HalfToFloat(FloatToHalf(static_cast<float>(factor)));
      for (size_t i = 0; i < count; ++i) p[i] = FloatToHalf(HalfToFloat(p[i]) * f);
      return;
    }
    case DataType::kBfloat16: {
      uint16_t* p = static_cast<uint16_t*>(buf);
      const float f = Bfloat16ToFloat(FloatToBfloat16(static_cast<float>(factor)));
      for (size_t i = 0; i < count; ++i) p[i] = FloatToBfloat16(Bfloat16ToFloat(p[i]) * f);
      return;
    }
    default:
      return;  // integer types: not scaled (see RedOp::kAvg)
  }
}

void DivideElements(void* buf, size_t count, DataType type, int divisor) {
  const bool is_signed = IsSignedInteger(type);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t bits = LoadInteger(buf, i, type);
    const uint64_t q = is_signed ? static_cast<uint64_t>(static_cast<int64_t>(bits) / divisor)
                                 : bits / static_cast<uint64_t>(divisor);
    StoreInteger(buf, i, type, q);
  }
}

void StoreElement(void* buf, size_t i, DataType type, double value) {
  if (!IsFloatingType(type)) {
    // Through 64 bits, modulo 2^64 (defined for negative values too).
    const uint64_t bits = value < 0           ? static_cast<uint64_t>(static_cast<int64_t>(value))
                          : value >= 0x1.0p64 ? ~uint64_t{0}
                                              : static_cast<uint64_t>(value);
    return StoreInteger(buf, i, type, bits);
  }
  switch (type) {
    case DataType::kFloat64:
      static_cast<double*>(buf)[i] = value;
      return;
    case DataType::kFloat32:
      static_cast<float*>(buf)[i] = static_cast<float>(value);
      return;
    case DataType::kFloat16:
      static_cast<uint16_t*>(buf)[i] = FloatToHalf(static_cast<float>(value));
      return;
    case DataType::kBfloat16:
      static_cast<uint16_t*>(buf)[i] = FloatToBfloat16(static_cast<float>(value));
      return;
    default:
      return;
  }
}

double LoadElement(const void* buf, size_t i, DataType type) {
  if (!IsFloatingType(type)) {
    const uint64_t bits = LoadInteger(buf, i, type);
    return IsSignedInteger(type) ? static_cast<double>(static_cast<int64_t>(bits))
                                 : static_cast<double>(bits);
  }
  switch (type) {
    case DataType::kFloat64:
      return static_cast<const double*>(buf)[i];
    case DataType::kFloat32:
      return static_cast<const float*>(buf)[i];
    case DataType::kFloat16:
      return HalfToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kBfloat16:
      return Bfloat16ToFloat(static_cast<const uint16_t*>(buf)[i]);
    default:
      return 0;
  }
}

uint64_t LoadInteger(const void* buf, size_t i, DataType type) {
  switch (type) {
    case DataType::kInt8:
      return static_cast<uint64_t>(static_cast<int64_t>(static_cast<const int8_t*>(buf)[i]));
    case DataType::kUint8:
      return static_cast<const uint8_t*>(buf)[i];
    case DataType::kInt32:
      return static_cast<uint64_t>(static_cast<int64_t>(static_cast<const int32_t*>(buf)[i]));
    case DataType::kUint32:
      return static_cast<const uint32_t*>(buf)[i];
    case DataType::kInt64:
      return static_cast<uint64_t>(static_cast<const int64_t*>(buf)[i]);
    case DataType::kUint64:
      return static_cast<const uint64_t*>(buf)[i];
    default:
      return 0;
  }
}

void StoreInteger(void* buf, size_t i, DataType type, uint64_t bits) {
  switch (type) {
    case DataType::kInt8:
      static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(bits);
      return;
    case DataType::kUint8:
      static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(bits);
      return;
    case DataType::kInt32:
      static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(bits);
      return;
    case DataType::kUint32:
      static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(bits);
      return;
    case DataType::kInt64:
      static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(bits);
      return;
    case DataType::kUint64:
      static_cast<uint64_t*>(buf)[i] = bits;
      return;
    default:
      return;
  }
}

}  // namespace fathom::transport::coll
