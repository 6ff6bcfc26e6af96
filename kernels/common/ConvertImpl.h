//===- ConvertImpl.h - the per-ISA array converters behind widen / narrow ---------===//
//
// Convert.cpp picks one table per instruction set (Isa.h); each ISA's functions live in their own
// file (ConvertScalar.cpp, ConvertAvx2.cpp, ConvertAvx512.cpp). Every table converts bit-identically
// to Numeric.h's scalar conversions.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_KERNELS_COMMON_CONVERTIMPL_H
#define HELM_KERNELS_COMMON_CONVERTIMPL_H

#include "kernels/common/Numeric.h"

#include <cstdint>

namespace helm::kernels::convert {

using WidenFn = void (*)(const void *src, float *dst, int64_t n);
using NarrowFn = void (*)(const float *src, void *dst, int64_t n);

struct Converters {
  WidenFn widen[3];   // by source DType
  NarrowFn narrow[3]; // by destination DType
};

/// f32 to f32: a copy, in every table.
inline void copyF32(const void *src, float *dst, int64_t n) { copyBytes(dst, src, size_t(n) * 4); }
inline void storeF32(const float *src, void *dst, int64_t n) { copyBytes(dst, src, size_t(n) * 4); }

const Converters &scalarConverters();
const Converters &avx2Converters();
const Converters &avx512Converters();

} // namespace helm::kernels::convert

#endif
