//===- HostDeviceOps.cpp - DeviceOps on host-addressable memory (cpu, emu) ----------===//
//
// The device-kernel ABI on the host. Each operation does, element for element, the arithmetic
// that helm-lower-to-linalg generates for the same op (f32 steps, rounded to the model's dtype at
// the same points, no fused multiply-adds: this file is built with -ffp-contract=off; the same
// libm calls for exp, cos and sin; sums of squares added in order), and linear and attention call
// the same CPU kernels. So a kernel-form device stage run on emu gives the tokens of the all-CPU
// package, and a difference means the orchestration (the pass or the ABI) is wrong.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/host/HostBackend.h"

#include "contract/helm_contract.h"
#include "runtime/kv/HostAttention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

using namespace helm::kernels;

namespace helm::rt {
namespace {

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// y[r, c] = round(y[r, c] + bias[c]) for a [m, n] y; nothing without a bias.
void addBias(const void *bias, void *y, DType ydt, int64_t m, int64_t n) {
  if (bias)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c)
        storeAs(y, ydt, r * n + c, loadAs(y, ydt, r * n + c) + loadAs(bias, ydt, c));
}

class HostDeviceOps final : public DeviceOps {
public:
  llvm::Error embed(const int64_t *ids, const void *table, void *out, DType dt, int64_t rows,
                    int64_t vocab, int64_t width) override {
    if (rows < 0 || vocab <= 0 || width < 0)
      return fail("embed: bad sizes");
    size_t rowBytes = size_t(width * dtypeBytes(dt));
    for (int64_t r = 0; r < rows; ++r) {
      // Clamped like the generated code; the runtime rejects out-of-vocabulary ids earlier.
      int64_t id = std::clamp<int64_t>(ids[r], 0, vocab - 1);
      copyBytes(static_cast<char *>(out) + size_t(r) * rowBytes,
                static_cast<const char *>(table) + size_t(id) * rowBytes, rowBytes);
    }
    return llvm::Error::success();
  }

  llvm::Error rmsNorm(const void *x, const void *gamma, void *y, DType dt, int64_t groups,
                      int64_t group, float eps) override {
    if (groups < 0 || group <= 0)
      return fail("rms_norm: bad sizes");
    for (int64_t g = 0; g < groups; ++g) {
      int64_t base = g * group;
      float squares = 0.0f;
      for (int64_t i = 0; i < group; ++i) {
        float v = loadAs(x, dt, base + i);
        squares = squares + v * v;
      }
      float mean = squares / float(group);
      float inv = 1.0f / std::sqrt(mean + eps);
      for (int64_t i = 0; i < group; ++i) {
        float normed = roundTo(loadAs(x, dt, base + i) * inv, dt);
        storeAs(y, dt, base + i, normed * loadAs(gamma, dt, i));
      }
    }
    return llvm::Error::success();
  }

  llvm::Error linear(const void *x, DType xdt, const void *w, DType wdt, bool transposed,
                     const void *bias, void *y, DType ydt, int64_t m, int64_t k,
                     int64_t n) override {
    if (m < 0 || k < 0 || n < 0)
      return fail("linear: bad sizes");
    helm_k_linear(x, int32_t(xdt), w, int32_t(wdt), transposed ? 1 : 0, y, int32_t(ydt), m, k, n);
    addBias(bias, y, ydt, m, n);
    return llvm::Error::success();
  }

  // The CPU stage's kernels, so that the kernel form on emu gives the all-CPU package's tokens.
  llvm::Error linearBlocks(const void *x, DType xdt, const void *w, int32_t wBlockDtype,
                           const void *bias, void *y, DType ydt, int64_t m, int64_t k,
                           int64_t n) override {
    if (auto format = blockFormatOfCall(wBlockDtype, k); !format)
      return fail("linear: " + llvm::toString(format.takeError()));
    if (m < 0 || n < 0)
      return fail("linear: bad sizes");
    helm_k_linear(x, int32_t(xdt), w, wBlockDtype, 0, y, int32_t(ydt), m, k, n);
    addBias(bias, y, ydt, m, n);
    return llvm::Error::success();
  }

  llvm::Error embedBlocks(const int64_t *ids, const void *table, int32_t tableBlockDtype,
                          void *out, DType outDtype, int64_t rows, int64_t vocab,
                          int64_t width) override {
    if (auto format = blockFormatOfCall(tableBlockDtype, width); !format)
      return fail("embed: " + llvm::toString(format.takeError()));
    if (rows < 0 || vocab <= 0)
      return fail("embed: bad sizes");
    helm_k_embed_blocks(ids, table, tableBlockDtype, out, int32_t(outDtype), rows, vocab, width);
    return llvm::Error::success();
  }

  llvm::Error copyColumns(const void *x, void *y, DType dt, int64_t rows, int64_t width,
                          int64_t offset, int64_t count) override {
    if (rows < 0 || width < 0 || offset < 0 || count < 0 || offset + count > width)
      return fail("copy_columns: columns [" + llvm::Twine(offset) + ", " +
                  llvm::Twine(offset + count) + ") outside a row of " + llvm::Twine(width));
    size_t elem = size_t(dtypeBytes(dt));
    for (int64_t r = 0; r < rows; ++r)
      copyBytes(static_cast<char *>(y) + size_t(r * count) * elem,
                static_cast<const char *>(x) + size_t(r * width + offset) * elem,
                size_t(count) * elem);
    return llvm::Error::success();
  }

  llvm::Error rope(const void *x, const int64_t *positions, void *y, DType dt, int64_t rows,
                   int64_t heads, int64_t headDim, int64_t rotaryDim, double theta,
                   const float *freqFactors, bool interleaved) override {
    if (rows < 0 || heads <= 0 || headDim <= 0 || rotaryDim < 0 || rotaryDim > headDim ||
        rotaryDim % 2 != 0)
      return fail("rope: bad sizes (rotary_dim " + llvm::Twine(rotaryDim) + ", head_dim " +
                  llvm::Twine(headDim) + ")");
    int64_t half = rotaryDim / 2;
    // inv_freq[j] = 1 / (theta^(2j/rotary) * factor_j), the exponent's ratio in f32 as the
    // reference computes it (DeviceOps.h).
    // Per-thread tables that only grow: rope runs twice per layer per token.
    thread_local std::vector<float> invFreq, cosT, sinT;
    invFreq.resize(size_t(half));
    cosT.resize(size_t(half));
    sinT.resize(size_t(half));
    for (int64_t j = 0; j < half; ++j)
      invFreq[size_t(j)] = float(1.0 / (std::pow(theta, double(float(2 * j) / float(rotaryDim))) *
                                        (freqFactors ? double(freqFactors[j]) : 1.0)));
    int64_t width = heads * headDim;
    for (int64_t r = 0; r < rows; ++r) {
      float p = float(positions[r]);
      for (int64_t j = 0; j < half; ++j) {
        float angle = p * invFreq[size_t(j)];
        cosT[size_t(j)] = roundTo(std::cos(angle), dt);
        sinT[size_t(j)] = roundTo(std::sin(angle), dt);
      }
      int64_t rowBase = r * width;
      for (int64_t d = 0; d < width; ++d) {
        int64_t i = d % headDim;
        float self = loadAs(x, dt, rowBase + d);
        if (i >= rotaryDim) {
          storeAs(y, dt, rowBase + d, self);
          continue;
        }
        bool first;
        int64_t j, partner;
        if (interleaved) {
          j = i / 2;
          first = i % 2 == 0;
          partner = first ? d + 1 : d - 1;
        } else {
          first = i < half;
          j = first ? i : i - half;
          partner = first ? d + half : d - half;
        }
        float other = loadAs(x, dt, rowBase + partner);
        float t1 = roundTo(self * cosT[size_t(j)], dt);
        float t2 = roundTo(other * sinT[size_t(j)], dt);
        storeAs(y, dt, rowBase + d, t1 + (first ? -t2 : t2));
      }
    }
    return llvm::Error::success();
  }

  llvm::Error swiglu(const void *gate, const void *up, void *y, DType dt, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) {
      float g = loadAs(gate, dt, i);
      float e = std::exp(-g);
      float act = roundTo(g / (1.0f + e), dt);
      storeAs(y, dt, i, act * loadAs(up, dt, i));
    }
    return llvm::Error::success();
  }

  llvm::Error geglu(const void *gate, const void *up, void *y, DType dt, int64_t n) override {
    // The operations of the CPU lowering (LowerToLinalg's lowerGeglu), in its order.
    for (int64_t i = 0; i < n; ++i) {
      float g = loadAs(gate, dt, i);
      float inner = 1.0f + 0.044715f * (g * g);
      float t = 1.0f + std::tanh((0.7978845608028654f * g) * inner);
      float act = roundTo((0.5f * g) * t, dt);
      storeAs(y, dt, i, act * loadAs(up, dt, i));
    }
    return llvm::Error::success();
  }

  llvm::Error scale(const void *x, void *y, DType dt, int64_t n, float factor) override {
    for (int64_t i = 0; i < n; ++i)
      storeAs(y, dt, i, loadAs(x, dt, i) * factor);
    return llvm::Error::success();
  }

  llvm::Error softcap(const void *x, void *y, DType dt, int64_t n, float cap) override {
    const float inverse = 1.0f / cap;
    for (int64_t i = 0; i < n; ++i)
      storeAs(y, dt, i, std::tanh(loadAs(x, dt, i) * inverse) * cap);
    return llvm::Error::success();
  }

  llvm::Error add(const void *a, const void *b, void *y, DType dt, int64_t n) override {
    for (int64_t i = 0; i < n; ++i)
      storeAs(y, dt, i, loadAs(a, dt, i) + loadAs(b, dt, i));
    return llvm::Error::success();
  }

  llvm::Error convert(const void *x, DType xdt, void *y, DType ydt, int64_t n) override {
    if (n < 0)
      return fail("convert: bad size");
    if (xdt == ydt) {
      if (n > 0) // memmove's pointers must not be null, even for zero bytes
        std::memmove(y, x, size_t(n * dtypeBytes(xdt)));
      return llvm::Error::success();
    }
    // The array converters of kernels/cpu (vectorised, the same round-to-nearest-even).
    if (ydt == DType::f32)
      widen(x, xdt, static_cast<float *>(y), n);
    else if (xdt == DType::f32)
      narrow(static_cast<const float *>(x), ydt, y, n);
    else
      for (int64_t i = 0; i < n; ++i)
        storeAs(y, ydt, i, loadAs(x, xdt, i));
    return llvm::Error::success();
  }

  llvm::Error attention(const DeviceAttentionCall &c, KvCache &kv) override {
    if (c.batch < 0 || c.seq < 0 || c.heads <= 0 || c.kvHeads <= 0 || c.heads % c.kvHeads != 0)
      return fail("attention: bad sizes");
    if (const char *error = appendAndAttend(kv, c.sequence, c.past, c.layer, c.q, c.k, c.v, c.out,
                                            c.dtype, c.batch, c.seq, c.heads, c.kvHeads,
                                            c.headDim, c.scale, c.window, c.softcap))
      return fail(error);
    return llvm::Error::success();
  }

  /// Host memory is this device's memory: the constant is used where it is.
  llvm::Expected<const void *> constant(const void *host, int64_t) override { return host; }

  llvm::Error synchronize() override { return llvm::Error::success(); }
};

} // namespace

std::unique_ptr<DeviceOps> createHostDeviceOps() { return std::make_unique<HostDeviceOps>(); }

} // namespace helm::rt
