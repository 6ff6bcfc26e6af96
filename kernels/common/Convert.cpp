//===- Convert.cpp - widen / narrow arrays between f32 and f16 / bf16 -------------===//
//
// kernels::widen and kernels::narrow (Numeric.h), vectorised per instruction set and picked
// like every kernel (Isa.h): AVX-512 with masked tails, AVX2 + F16C, scalar (ConvertImpl.h, one
// file per ISA). Bit-identical to Numeric.h's scalar conversions (round to nearest even, denormals
// kept, NaN quieted the same way), so every path rounds outputs identically. Used by the GEMV and
// GEMM for x and y, by the GEMM for weight panels, and by the runtime for KV rows.
//
//===----------------------------------------------------------------------===//
#include "kernels/common/ConvertImpl.h"
#include "kernels/common/Isa.h"

#include <algorithm>

namespace helm::kernels {
namespace {
using convert::Converters;

const Converters &convertersFor(Isa isa) {
  switch (isa) {
  case Isa::avx512: return convert::avx512Converters();
  case Isa::avx2: return convert::avx2Converters();
  case Isa::scalar: break;
  }
  return convert::scalarConverters();
}

} // namespace

void widen(const void *src, DType dtype, float *dst, int64_t n) {
  convertersFor(activeIsa()).widen[int(dtype)](src, dst, n);
}

void narrow(const float *src, DType dtype, void *dst, int64_t n) {
  convertersFor(activeIsa()).narrow[int(dtype)](src, dst, n);
}

void roundInPlace(float *x, DType dtype, int64_t n) {
  if (dtype == DType::f32)
    return;
  const Converters &c = convertersFor(activeIsa());
  uint16_t narrowed[256];
  for (int64_t i = 0; i < n; i += 256) {
    int64_t m = std::min<int64_t>(256, n - i);
    c.narrow[int(dtype)](x + i, narrowed, m);
    c.widen[int(dtype)](narrowed, x + i, m);
  }
}

} // namespace helm::kernels
