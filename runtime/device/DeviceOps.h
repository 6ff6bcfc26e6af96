//===- DeviceOps.h - the operations a kernel-form device stage runs on its device --===//
//
// A GPU stage compiled for a CUDA target (helm-lower-to-device-calls) is host code that never
// touches device memory: every HELM op of the stage becomes one call of the device-kernel ABI
// (`helm_dev_*`, runtime/abi/DeviceCalls.cpp), which forwards to the DeviceOps of the device the
// stage runs on. Buffers are that device's memory (the stage allocates them through the
// `_mlir_memref_to_llvm_*` functions, which runHostStage serves from the device).
//
//   cuda - CudaDeviceOps (runtime/backends/cuda/CudaDeviceOps.cpp): kernels/cuda kernels and
//          cuBLAS on the compute stream, launched asynchronously; a decode step's one host wait
//          is the copy of its logits. Stage buffers are kept for reuse without a wait
//          (Device::allocateStageBuffer), which is safe only because everything that touches
//          them runs in order on the compute stream: no copy-stream or host access to a stage
//          buffer. Where it departs from the
//          arithmetic below: linear converts x to w's type when they differ (cuBLAS takes one
//          input type), and attention does not round the probabilities (the online form never
//          holds them normalised); summation orders differ from the host's. So CUDA results are
//          close to, not identical with, the CPU stage's.
//   emu  - HostDeviceOps (runtime/backends/host/HostDeviceOps.cpp): the same operations on the
//          host, in the emu arena, with the CPU stage's arithmetic and roundings, so that a
//          kernel-form stage run on emu gives the tokens of the all-CPU package. This is how the
//          orchestration code a CUDA package runs is tested on machines without a GPU.
//
// Element types are kernels' DType (f32, f16, bf16). Arithmetic is in f32; every result is rounded
// once to its storage type, except where a method says it rounds an intermediate too (the CPU
// lowering rounds where the reference framework does, in half precision). A norm's gamma or a
// linear's bias stored in a wider type than the activation is converted to the activation's type
// by the generated code first (the CPU lowering reads it unrounded): the one place where the
// kernel form may differ from the CPU stage on emu; no corpus model has such weights.
//
// Which ops a stage gets is decided with its device, by createStageBackend (Backend.h).
//
//===----------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_DEVICE_DEVICEOPS_H
#define HELM_RUNTIME_DEVICE_DEVICEOPS_H

#include "kernels/common/Numeric.h"
#include "kernels/quant/BlockFormats.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <string>

namespace helm::rt {

class KvCache;

/// One attention call of one layer (the geometry the compiler put in the stage).
struct DeviceAttentionCall {
  int64_t layer = 0;           // the stage's KV layer
  const void *q = nullptr;     // [batch, seq, heads * headDim], device memory
  const void *k = nullptr;     // [batch, seq, kvHeads * headDim]
  const void *v = nullptr;     // like k
  void *out = nullptr;         // like q
  kernels::DType dtype = kernels::DType::f32;
  int64_t batch = 0, seq = 0, heads = 0, kvHeads = 0, headDim = 0;
  float scale = 1.0f;
  int64_t window = 0;                // > 0: a query at position p sees keys p - window < t <= p
  float softcap = 0.0f;              // > 0: scaled scores s -> tanh(s * (1 / softcap)) * softcap
  const int32_t *sequence = nullptr; // host: the KV slot of each batch row
  const int64_t *past = nullptr;     // host: tokens already cached for each batch row
};

/// The format of a linearBlocks / embedBlocks call on rows of `rowLength` weights, or why every
/// device refuses it (one line, without the op's name): a code that is not a block format, or rows
/// that are not whole blocks.
inline llvm::Expected<quant::BlockFormat> blockFormatOfCall(int32_t code, int64_t rowLength) {
  std::optional<quant::BlockFormat> format = quant::blockFormatOfDtype(code);
  if (!format)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "unsupported block dtype code " + std::to_string(code));
  if (!quant::rowBytes(*format, rowLength)) {
    const quant::BlockFormatInfo &info = quant::blockFormatInfo(*format);
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   std::to_string(rowLength) + " weights per row are not whole " +
                                       std::string(info.name) + " blocks of " +
                                       std::to_string(info.weightsPerBlock));
  }
  return *format;
}

class DeviceOps {
public:
  virtual ~DeviceOps() = default;

  /// out[r, :] = table[clamp(ids[r], 0, vocab - 1), :] for r in [0, rows); ids are device int64.
  virtual llvm::Error embed(const int64_t *ids, const void *table, void *out, kernels::DType dtype,
                            int64_t rows, int64_t vocab, int64_t width) = 0;

  /// RMSNorm over `groups` consecutive groups of `group` elements (x, y: groups * group elements;
  /// gamma: group elements). Per group, with ss the f32 sum of squares:
  ///   y = round(round(x * 1 / sqrt(ss / group + eps)) * gamma)
  /// (the inner rounding is to the storage type, as the reference framework does).
  virtual llvm::Error rmsNorm(const void *x, const void *gamma, void *y, kernels::DType dtype,
                              int64_t groups, int64_t group, float eps) = 0;

  /// y[m, n] = round(round(sum_k x[m, k] * W[k, n]) + bias[n]); W stored [K, N], or [N, K] when
  /// `transposed`; `bias` (N elements, dtype ydtype) may be null. Accumulation in f32.
  virtual llvm::Error linear(const void *x, kernels::DType xdtype, const void *w,
                             kernels::DType wdtype, bool transposed, const void *bias, void *y,
                             kernels::DType ydtype, int64_t m, int64_t k, int64_t n) = 0;

  /// linear for W in blocks: `wBlockDtype` is a block dtype code (HELM_DTYPE_Q8_0 ...), W is N rows
  /// of K weights in blocks of that format (K a multiple of its block). Each weight is dequantized
  /// as quant::dequantizeRow does it; products and sums in f32, each output rounded once to ydtype
  /// (before the bias, as above). The host ops run the CPU's kernels (x quantized to 8 bits per
  /// block of 32, integer dot products: docs/quantization.md); a GPU multiplies the dequantized
  /// weights with x as it is.
  virtual llvm::Error linearBlocks(const void *x, kernels::DType xdtype, const void *w,
                                   int32_t wBlockDtype, const void *bias, void *y,
                                   kernels::DType ydtype, int64_t m, int64_t k, int64_t n) {
    (void)x, (void)xdtype, (void)w, (void)wBlockDtype, (void)bias, (void)y, (void)ydtype, (void)m,
        (void)k, (void)n;
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "this device cannot read weights in blocks");
  }

  /// embed for a table in blocks (`tableBlockDtype`, rows of `width` weights): the picked rows
  /// dequantized as quant::dequantizeRow does it, then rounded to outDtype.
  virtual llvm::Error embedBlocks(const int64_t *ids, const void *table, int32_t tableBlockDtype,
                                  void *out, kernels::DType outDtype, int64_t rows, int64_t vocab,
                                  int64_t width) {
    (void)ids, (void)table, (void)tableBlockDtype, (void)out, (void)outDtype, (void)rows,
        (void)vocab, (void)width;
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "this device cannot read weights in blocks");
  }

  /// y[r, c] = x[r, offset + c] for r < rows, c < count; x has `width` columns, y `count`.
  virtual llvm::Error copyColumns(const void *x, void *y, kernels::DType dtype, int64_t rows,
                                  int64_t width, int64_t offset, int64_t count) = 0;

  /// Rotary embedding of x [rows, heads * headDim] (row r at position positions[r], device
  /// int64): per head the first rotaryDim channels rotate in pairs (c, c + rotaryDim / 2), or
  /// (2c, 2c + 1) when `interleaved`; the rest are copied. With f = float(1 / (theta^(2c /
  /// rotaryDim) * factor_c)) (the exponent's ratio in f32, the power and the product in f64;
  /// factor_c = freqFactors[c], a device array of rotaryDim / 2 floats, or 1 when freqFactors is
  /// null), a = float(p) * f in f32, C = round(cos a), S = round(sin a):
  ///   first  = round(round(x * C) - round(x_partner * S))
  ///   second = round(round(x * C) + round(x_partner * S))
  virtual llvm::Error rope(const void *x, const int64_t *positions, void *y, kernels::DType dtype,
                           int64_t rows, int64_t heads, int64_t headDim, int64_t rotaryDim,
                           double theta, const float *freqFactors, bool interleaved) = 0;

  /// y = round(round(g / (1 + exp(-g))) * up), elementwise over n elements.
  virtual llvm::Error swiglu(const void *gate, const void *up, void *y, kernels::DType dtype,
                             int64_t n) = 0;

  /// y = round(round(gelu_tanh(g)) * up), elementwise over n elements, with
  /// gelu_tanh(g) = 0.5 g (1 + tanh(0.7978845608 g (1 + 0.044715 g^2))) in f32.
  virtual llvm::Error geglu(const void *gate, const void *up, void *y, kernels::DType dtype,
                            int64_t n) = 0;

  /// y = round(x * factor), elementwise over n elements.
  virtual llvm::Error scale(const void *x, void *y, kernels::DType dtype, int64_t n, float factor) = 0;

  /// y = round(tanh(x * (1 / cap)) * cap), elementwise over n elements (each product in f32).
  virtual llvm::Error softcap(const void *x, void *y, kernels::DType dtype, int64_t n, float cap) = 0;

  /// y = round(a + b), elementwise over n elements (the residual add).
  virtual llvm::Error add(const void *a, const void *b, void *y, kernels::DType dtype,
                          int64_t n) = 0;

  /// y = x converted from xdtype to ydtype (n elements; logits to f32, or a plain copy).
  virtual llvm::Error convert(const void *x, kernels::DType xdtype, void *y, kernels::DType ydtype,
                              int64_t n) = 0;

  /// Causal grouped-query attention: appends the call's keys and values (widened to f32) to `kv`
  /// at positions past[b] .. past[b] + seq - 1 of sequence sequence[b], then attends over
  /// positions [0, past[b] + seq) of that sequence (query i at position past[b] + i). Query head
  /// h reads kv head h / (heads / kvHeads). The cache's spans are this device's memory.
  virtual llvm::Error attention(const DeviceAttentionCall &call, KvCache &kv) = 0;

  /// A device copy of `bytes` bytes of host memory that stays unchanged for the program's life (a
  /// constant in the stage's code): made at the first call for `host`, the same copy afterwards.
  virtual llvm::Expected<const void *> constant(const void *host, int64_t bytes) {
    (void)host, (void)bytes;
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "this device cannot hold the stage's constants");
  }

  /// The stage call's positions ([B, S] int64, host memory) where this device's kernels can read
  /// them: the host array itself, or a device copy valid until the next call. These are launch
  /// parameters of the stage (like the kernels' own arguments), not counted as link traffic.
  virtual llvm::Expected<const int64_t *> stagePositions(const int64_t *host, int64_t count) {
    (void)count;
    return host;
  }

  /// Waits until every operation issued so far has finished; reports an asynchronous failure.
  virtual llvm::Error synchronize() = 0;
};

} // namespace helm::rt

#endif
