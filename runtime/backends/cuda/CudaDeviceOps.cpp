//===- CudaDeviceOps.cpp - DeviceOps on a CUDA GPU: kernels/cuda and cuBLAS ----------===//
//
// Every operation is enqueued on the device's compute stream and returns without waiting; a
// decode step's one host wait is the runtime's copy of the logits (on the same stream), where an
// asynchronous failure (a kernel fault) surfaces, as it does in synchronize(). Elementwise ops, RMSNorm, rope, embedding, conversions and attention are the
// kernels/cuda kernels (their .cu files give the math and launch shapes); linear is cuBLAS
// (cublasGemmEx, f32 accumulation) plus a bias kernel; copyColumns is one 2-D memcpy.
//
// Attention never touches the KV cache's rows from the host: per batch row it reserves the new
// positions (KvCache::reserve) and widens the call's keys and values into the reserved device rows
// (helm_cuda_kv_append, up to 32 spans per launch) before the next row's reserve, then runs
// helm_cuda_attention once per span the cache visits (the kernel takes up to 64, but a paged
// cache's streamed span is valid only during its visit), carrying the online-softmax state between
// launches in a device scratch buffer.
//
// Single-threaded: the scratch buffers, the constants map and the per-call lists are the object's
// own. The stage's buffers come from the device's kept stage buffers (Device::allocateStageBuffer):
// a buffer the stage freed is handed out again without a wait, and that is safe only because every
// op here reads and writes stage buffers on the compute stream, in order. Nothing may read one
// on the copy stream or from the host.
//
// Scratch buffers (x converted to the weight's dtype, a GEMM result in f32, the attention state,
// the stage call's positions) are device memory from the device's budget, kept and grown as
// needed; the stages' constants are copied to the device once each. The ops object must be
// destroyed before its device.
//
//===----------------------------------------------------------------------===//
#include "runtime/device/DeviceOps.h"

#include "llvm/Support/Error.h"

#include "kernels/common/Knobs.h"
#include "kernels/cuda/KernelParams.h"
#include "runtime/backends/cuda/CudaDevice.h"
#include "runtime/backends/cuda/Cublas.h"
#include "runtime/kv/KvCache.h"

#include "llvm/Support/FormatVariadic.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace helm::rt {

namespace {

using kernels::DType;
using Function = CudaDevice::Function;

/// Threads per block of the grid-stride kernels, and the most blocks they are given (they loop).
constexpr uint32_t kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

/// "CUDA <op>: <message>", one line.
llvm::Error opError(llvm::StringRef op, const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 ("CUDA " + op + ": " + message).str());
}

llvm::Error cudaCallError(llvm::StringRef op, llvm::StringRef call, cudaError_t status) {
  (void)cudaGetLastError(); // a non-sticky error must not resurface from a later call
  return opError(op, call + ": " + cudaGetErrorString(status));
}

bool validDType(DType dtype) { return kernels::isDType(int32_t(dtype)); }

/// HELM_CUDA_QGEMV: the decode GEMV on weights in blocks. "bytes" (the default) is the byte-load
/// GEMV, the one checked on a GPU; "staged" decodes weights whose rows allow it on
/// helm_cuda_qgemv_staged, "lanes" aligned q4_k weights on helm_cuda_qgemv_q4k. Both are off by
/// default until they have run on a GPU (docs/quantization.md, "On the GPU").
std::string requestedGemv() {
  return kernels::knobValue(kernels::Knob::CudaQgemv, "bytes").value_or("bytes");
}

llvm::Error badDType(llvm::StringRef op, DType dtype) {
  return opError(op, llvm::formatv("unsupported dtype code {0}", int32_t(dtype)));
}

/// An error naming the first negative size of `sizes` ({name, value} pairs).
llvm::Error negativeSize(llvm::StringRef op,
                         std::initializer_list<std::pair<const char *, int64_t>> sizes) {
  for (const auto &[name, value] : sizes)
    if (value < 0)
      return opError(op, llvm::formatv("negative size: {0} = {1}", name, value));
  return llvm::Error::success();
}

/// Blocks for a grid-stride kernel over `work` items, `perBlock` items per block and pass.
uint32_t gridFor(int64_t work, int64_t perBlock = kThreads) {
  return uint32_t(std::clamp<int64_t>((work + perBlock - 1) / perBlock, 1, kMaxBlocks));
}

/// A multiple of 32 in [32, 256] covering `n` threads' worth of work per row.
uint32_t rowBlock(int64_t n) {
  return uint32_t(std::clamp<int64_t>((n + 31) / 32 * 32, 32, kThreads));
}

cudaDataType_t cudaType(DType dtype) {
  switch (dtype) {
  case DType::f32: return CUDA_R_32F;
  case DType::f16: return CUDA_R_16F;
  case DType::bf16: return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

/// A kernel in its f32, f16 and bf16 forms, indexed by DType.
struct TypedKernel {
  Function fn[3] = {};
  Function operator[](DType dtype) const { return fn[size_t(dtype)]; }
};

class CudaDeviceOpsImpl final : public DeviceOps {
public:
  CudaDeviceOpsImpl(CudaDevice &device, CudaDevice::Module module)
      : device_(device), module_(module) {}
  ~CudaDeviceOpsImpl() override;

  /// Looks up every kernel the ops launch.
  llvm::Error init();

  llvm::Error embed(const int64_t *ids, const void *table, void *out, DType dtype, int64_t rows,
                    int64_t vocab, int64_t width) override;
  llvm::Error rmsNorm(const void *x, const void *gamma, void *y, DType dtype, int64_t groups,
                      int64_t group, float eps) override;
  llvm::Error linear(const void *x, DType xdtype, const void *w, DType wdtype, bool transposed,
                     const void *bias, void *y, DType ydtype, int64_t m, int64_t k,
                     int64_t n) override;
  llvm::Error linearBlocks(const void *x, DType xdtype, const void *w, int32_t wBlockDtype,
                           const void *bias, void *y, DType ydtype, int64_t m, int64_t k,
                           int64_t n) override;
  llvm::Error embedBlocks(const int64_t *ids, const void *table, int32_t tableBlockDtype, void *out,
                          DType outDtype, int64_t rows, int64_t vocab, int64_t width) override;
  llvm::Error copyColumns(const void *x, void *y, DType dtype, int64_t rows, int64_t width,
                          int64_t offset, int64_t count) override;
  llvm::Error rope(const void *x, const int64_t *positions, void *y, DType dtype, int64_t rows,
                   int64_t heads, int64_t headDim, int64_t rotaryDim, double theta,
                   const float *freqFactors, bool interleaved) override;
  llvm::Error swiglu(const void *gate, const void *up, void *y, DType dtype, int64_t n) override;
  llvm::Error geglu(const void *gate, const void *up, void *y, DType dtype, int64_t n) override;
  llvm::Error scale(const void *x, void *y, DType dtype, int64_t n, float factor) override;
  llvm::Error softcap(const void *x, void *y, DType dtype, int64_t n, float cap) override;
  llvm::Error add(const void *a, const void *b, void *y, DType dtype, int64_t n) override;
  llvm::Error convert(const void *x, DType xdtype, void *y, DType ydtype, int64_t n) override;
  llvm::Error attention(const DeviceAttentionCall &call, KvCache &kv) override;
  llvm::Expected<const void *> constant(const void *host, int64_t bytes) override;
  llvm::Expected<const int64_t *> stagePositions(const int64_t *host, int64_t count) override;
  llvm::Error synchronize() override;

private:
  struct Scratch {
    void *p = nullptr;
    uint64_t bytes = 0;
  };

  llvm::Error lookup(Function &fn, llvm::StringRef name);
  llvm::Error lookup(TypedKernel &kernel, llvm::StringRef name);
  llvm::Error launch(llvm::StringRef op, Function fn, CudaDim grid, uint32_t block,
                     llvm::ArrayRef<void *> args);
  /// Makes the device's GPU current for the runtime and cuBLAS calls made here directly.
  llvm::Error activate(llvm::StringRef op);
  /// `s` holding at least `bytes` (contents not kept when it grows).
  llvm::Expected<void *> scratch(Scratch &s, uint64_t bytes, llvm::StringRef what);
  /// The checks every op over n elements makes before its launch: a dtype the kernels take, n >= 0,
  /// the kernel in the package's image (`present`), no null buffer. false: n is 0, nothing to
  /// launch.
  llvm::Expected<bool> elementwiseReady(llvm::StringRef op, DType dtype, int64_t n, bool present,
                                        std::initializer_list<const void *> buffers);
  /// convert() without the checks: n > 0, valid and different dtypes.
  llvm::Error launchConvert(llvm::StringRef op, const void *x, DType xdtype, void *y, DType ydtype,
                            int64_t n);

  CudaDevice &device_;
  CudaDevice::Module module_;
  /// cuBLAS's functions: loaded already, since the device could be created.
  const CublasApi *cublas_ = nullptr;
  TypedKernel embed_, rmsNorm_, rope_, swiglu_, add_, addBias_, kvAppend_, attention_;
  Function convert_ = nullptr;
  // The kernels for weights in blocks (QuantBlocks.cu). Optional: a package compiled before they
  // existed has none, and needs none (its GPU weights are all elements).
  TypedKernel embedBlocks_;
  Function qgemv_ = nullptr, dequantizeRows_ = nullptr;
  bool haveBlockKernels_ = false;
  // helm_cuda_dequantize_rows_f16: panels for the f16 tensor-core GEMM. Optional (a package
  // compiled before it existed takes the TF32 path on f32 panels).
  Function dequantizeRowsF16_ = nullptr;
  // helm_cuda_qgemv_staged: the decode GEMV for rows on 16-byte boundaries. Optional (a package
  // compiled before it existed has helm_cuda_qgemv only); used under HELM_CUDA_QGEMV=staged.
  Function qgemvStaged_ = nullptr;
  // helm_cuda_qgemv_q4k: the decode GEMV for q4_k weights on 16-byte boundaries. Optional as the
  // staged one; used under HELM_CUDA_QGEMV=lanes.
  Function qgemvQ4K_ = nullptr;
  // Gemma's elementwise kernels (Elementwise.cu). Optional, as the block kernels: a package
  // compiled before they existed has none and runs no model that needs them.
  TypedKernel geglu_, scale_, softcap_;
  bool haveGemmaKernels_ = false;
  Scratch convertedX_, gemmOut_, attentionState_, positions_, dequantized_;
  /// Device copies of the stages' constants, by host address and size.
  std::map<std::pair<const void *, int64_t>, void *> constants_;
  // Per-call lists that only grow (no allocation per call once warm).
  std::vector<helm_cuda::KvAppendSegment> segments_;
};

CudaDeviceOpsImpl::~CudaDeviceOpsImpl() {
  // Queued kernels may still read the scratch buffers and the module: let them finish first.
  llvm::consumeError(device_.synchronizeStream(Stream::compute));
  for (Scratch *s : {&convertedX_, &gemmOut_, &attentionState_, &positions_, &dequantized_})
    device_.free(s->p);
  for (auto &[key, p] : constants_)
    device_.free(p);
  device_.unloadModule(module_);
}

llvm::Error CudaDeviceOpsImpl::lookup(Function &fn, llvm::StringRef name) {
  auto found = device_.getFunction(module_, name);
  if (!found)
    return opError("device ops", "the kernel image lacks " + name + " (" +
                                     llvm::toString(found.takeError()) + ")");
  fn = *found;
  return llvm::Error::success();
}

llvm::Error CudaDeviceOpsImpl::lookup(TypedKernel &kernel, llvm::StringRef name) {
  const std::string base = name.str();
  if (llvm::Error e = lookup(kernel.fn[size_t(DType::f32)], base))
    return e;
  if (llvm::Error e = lookup(kernel.fn[size_t(DType::f16)], base + "_f16"))
    return e;
  return lookup(kernel.fn[size_t(DType::bf16)], base + "_bf16");
}

llvm::Error CudaDeviceOpsImpl::init() {
  struct Named {
    TypedKernel *kernel;
    const char *name;
  };
  for (Named k :
       {Named{&embed_, "helm_cuda_embed"}, Named{&rmsNorm_, "helm_cuda_rms_norm"},
        Named{&rope_, "helm_cuda_rope"}, Named{&swiglu_, "helm_cuda_swiglu"},
        Named{&add_, "helm_cuda_add"}, Named{&addBias_, "helm_cuda_add_bias"},
        Named{&kvAppend_, "helm_cuda_kv_append"}, Named{&attention_, "helm_cuda_attention"}})
    if (llvm::Error e = lookup(*k.kernel, k.name))
      return e;
  if (llvm::Error e = lookup(convert_, "helm_cuda_convert"))
    return e;
  auto cublas = cublasApi();
  if (!cublas)
    return opError("device ops", llvm::toString(cublas.takeError()));
  cublas_ = &*cublas;
  llvm::Error blocks = lookup(qgemv_, "helm_cuda_qgemv");
  if (!blocks)
    blocks = lookup(dequantizeRows_, "helm_cuda_dequantize_rows");
  if (!blocks)
    blocks = lookup(embedBlocks_, "helm_cuda_embed_blocks");
  haveBlockKernels_ = !blocks;
  llvm::consumeError(std::move(blocks));
  if (haveBlockKernels_)
    if (llvm::Error f16 = lookup(dequantizeRowsF16_, "helm_cuda_dequantize_rows_f16")) {
      llvm::consumeError(std::move(f16));
      dequantizeRowsF16_ = nullptr;
    }
  llvm::Error gemma = lookup(geglu_, "helm_cuda_geglu");
  if (!gemma)
    gemma = lookup(scale_, "helm_cuda_scale");
  if (!gemma)
    gemma = lookup(softcap_, "helm_cuda_softcap");
  haveGemmaKernels_ = !gemma;
  llvm::consumeError(std::move(gemma));
  if (haveBlockKernels_) {
    // A package without the requested GEMV decodes on the byte-load one.
    auto optional = [&](Function &fn, llvm::StringRef name) {
      if (llvm::Error missing = lookup(fn, name)) {
        llvm::consumeError(std::move(missing));
        fn = nullptr;
      }
    };
    const std::string gemv = requestedGemv();
    if (gemv == "staged")
      optional(qgemvStaged_, "helm_cuda_qgemv_staged");
    else if (gemv == "lanes")
      optional(qgemvQ4K_, "helm_cuda_qgemv_q4k");
  }
  return llvm::Error::success();
}

llvm::Error CudaDeviceOpsImpl::launch(llvm::StringRef op, Function fn, CudaDim grid, uint32_t block,
                                      llvm::ArrayRef<void *> args) {
  if (llvm::Error e = device_.launchKernel(fn, grid, {block, 1, 1}, args, 0, Stream::compute))
    return opError(op, llvm::toString(std::move(e)));
  return llvm::Error::success();
}

llvm::Error CudaDeviceOpsImpl::activate(llvm::StringRef op) {
  cudaError_t status = cudaSetDevice(device_.ordinal());
  if (status != cudaSuccess)
    return cudaCallError(op, llvm::formatv("cudaSetDevice({0})", device_.ordinal()).str(), status);
  return llvm::Error::success();
}

llvm::Expected<void *> CudaDeviceOpsImpl::scratch(Scratch &s, uint64_t bytes,
                                                  llvm::StringRef what) {
  if (s.bytes >= bytes)
    return s.p;
  // Half again as much, so that a slowly growing size does not reallocate on every call. The old
  // block may still be in use by queued kernels: free (cudaFree) waits for them.
  const uint64_t size = std::max(bytes, s.bytes + s.bytes / 2);
  device_.free(s.p);
  s = Scratch{};
  auto p = device_.allocate(size, what);
  if (!p)
    return p.takeError();
  s = Scratch{*p, size};
  return *p;
}

// --- Elementwise and row ops ----------------------------------------------------------------

llvm::Error CudaDeviceOpsImpl::embed(const int64_t *ids, const void *table, void *out, DType dtype,
                                     int64_t rows, int64_t vocab, int64_t width) {
  static constexpr llvm::StringLiteral op = "embed";
  if (!validDType(dtype))
    return badDType(op, dtype);
  if (llvm::Error e = negativeSize(op, {{"rows", rows}, {"vocab", vocab}, {"width", width}}))
    return e;
  if (rows == 0 || width == 0)
    return llvm::Error::success();
  if (vocab == 0)
    return opError(op, "the table has no rows (vocab 0)");
  if (width > INT32_MAX)
    return opError(op, llvm::formatv("width {0} is above the kernel's int32 limit", width));
  if (!ids || !table || !out)
    return opError(op, "null buffer");
  int32_t width32 = int32_t(width);
  return launch(op, embed_[dtype], {uint32_t(std::min(rows, kMaxBlocks))}, rowBlock(width),
                {&table, &ids, &out, &rows, &vocab, &width32});
}

llvm::Error CudaDeviceOpsImpl::rmsNorm(const void *x, const void *gamma, void *y, DType dtype,
                                       int64_t groups, int64_t group, float eps) {
  static constexpr llvm::StringLiteral op = "rmsNorm";
  if (!validDType(dtype))
    return badDType(op, dtype);
  if (llvm::Error e = negativeSize(op, {{"groups", groups}, {"group", group}}))
    return e;
  if (groups == 0 || group == 0)
    return llvm::Error::success();
  if (group > INT32_MAX)
    return opError(op, llvm::formatv("group {0} is above the kernel's int32 limit", group));
  if (!x || !gamma || !y)
    return opError(op, "null buffer");
  int32_t width = int32_t(group);
  return launch(op, rmsNorm_[dtype], {uint32_t(std::min(groups, kMaxBlocks))}, rowBlock(group),
                {&x, &gamma, &y, &groups, &width, &eps});
}

llvm::Error CudaDeviceOpsImpl::rope(const void *x, const int64_t *positions, void *y, DType dtype,
                                    int64_t rows, int64_t heads, int64_t headDim, int64_t rotaryDim,
                                    double theta, const float *freqFactors, bool interleaved) {
  static constexpr llvm::StringLiteral op = "rope";
  if (!validDType(dtype))
    return badDType(op, dtype);
  if (llvm::Error e = negativeSize(
          op, {{"rows", rows}, {"heads", heads}, {"headDim", headDim}, {"rotaryDim", rotaryDim}}))
    return e;
  if (rotaryDim > headDim || rotaryDim % 2 != 0)
    return opError(op, llvm::formatv("rotaryDim {0} must be even and at most headDim {1}",
                                     rotaryDim, headDim));
  if (rotaryDim > 0 && !(theta > 0 && std::isfinite(theta)))
    return opError(op, llvm::formatv("theta {0} is not a positive finite number", theta));
  if (rows == 0 || heads == 0 || headDim == 0)
    return llvm::Error::success();
  if (heads > INT32_MAX / headDim)
    return opError(op, llvm::formatv("heads * headDim = {0} * {1} is above the kernel's int32 "
                                     "limit",
                                     heads, headDim));
  if (!x || !positions || !y)
    return opError(op, "null buffer");
  int32_t heads32 = int32_t(heads), headDim32 = int32_t(headDim), rotary32 = int32_t(rotaryDim);
  int32_t interleaved32 = interleaved ? 1 : 0;
  // A block computes each pair's frequency (an f64 power) once for all the rows it strides over:
  // a few thousand blocks at most keep that cost small for long prompts.
  return launch(
      op, rope_[dtype], {uint32_t(std::min<int64_t>(rows, 2048))}, rowBlock(rotaryDim / 2),
      {&x, &y, &positions, &rows, &heads32, &headDim32, &rotary32, &theta, &freqFactors,
       &interleaved32});
}

llvm::Expected<bool> CudaDeviceOpsImpl::elementwiseReady(llvm::StringRef op, DType dtype, int64_t n, bool present,
                                                         std::initializer_list<const void *> buffers) {
  if (!validDType(dtype))
    return badDType(op, dtype);
  if (llvm::Error e = negativeSize(op, {{"n", n}}))
    return std::move(e);
  if (n == 0)
    return false;
  if (!present)
    return opError(op, "the package's kernel image predates this kernel: recompile the package");
  for (const void *buffer : buffers)
    if (!buffer)
      return opError(op, "null buffer");
  return true;
}

// Each op below: the checks, then one grid-stride launch (an error, or nothing to do when n is 0,
// returns first: takeError() of a false is success).
llvm::Error CudaDeviceOpsImpl::swiglu(const void *gate, const void *up, void *y, DType dtype,
                                      int64_t n) {
  static constexpr llvm::StringLiteral op = "swiglu";
  llvm::Expected<bool> ready = elementwiseReady(op, dtype, n, true, {gate, up, y});
  if (!ready || !*ready)
    return ready.takeError();
  return launch(op, swiglu_[dtype], {gridFor(n)}, kThreads, {&gate, &up, &y, &n});
}

llvm::Error CudaDeviceOpsImpl::geglu(const void *gate, const void *up, void *y, DType dtype,
                                     int64_t n) {
  static constexpr llvm::StringLiteral op = "geglu";
  llvm::Expected<bool> ready = elementwiseReady(op, dtype, n, haveGemmaKernels_, {gate, up, y});
  if (!ready || !*ready)
    return ready.takeError();
  return launch(op, geglu_[dtype], {gridFor(n)}, kThreads, {&gate, &up, &y, &n});
}

llvm::Error CudaDeviceOpsImpl::scale(const void *x, void *y, DType dtype, int64_t n, float factor) {
  static constexpr llvm::StringLiteral op = "scale";
  llvm::Expected<bool> ready = elementwiseReady(op, dtype, n, haveGemmaKernels_, {x, y});
  if (!ready || !*ready)
    return ready.takeError();
  return launch(op, scale_[dtype], {gridFor(n)}, kThreads, {&x, &y, &n, &factor});
}

llvm::Error CudaDeviceOpsImpl::softcap(const void *x, void *y, DType dtype, int64_t n, float cap) {
  static constexpr llvm::StringLiteral op = "softcap";
  llvm::Expected<bool> ready = elementwiseReady(op, dtype, n, haveGemmaKernels_, {x, y});
  if (!ready || !*ready)
    return ready.takeError();
  if (!(cap > 0.0f) || !std::isfinite(cap))
    return opError(op, "cap must be a positive finite number");
  return launch(op, softcap_[dtype], {gridFor(n)}, kThreads, {&x, &y, &n, &cap});
}

llvm::Error CudaDeviceOpsImpl::add(const void *a, const void *b, void *y, DType dtype, int64_t n) {
  static constexpr llvm::StringLiteral op = "add";
  llvm::Expected<bool> ready = elementwiseReady(op, dtype, n, true, {a, b, y});
  if (!ready || !*ready)
    return ready.takeError();
  return launch(op, add_[dtype], {gridFor(n)}, kThreads, {&a, &b, &y, &n});
}

llvm::Error CudaDeviceOpsImpl::launchConvert(llvm::StringRef op, const void *x, DType xdtype,
                                             void *y, DType ydtype, int64_t n) {
  int32_t xcode = int32_t(xdtype), ycode = int32_t(ydtype);
  return launch(op, convert_, {gridFor(n)}, kThreads, {&x, &y, &n, &xcode, &ycode});
}

llvm::Error CudaDeviceOpsImpl::convert(const void *x, DType xdtype, void *y, DType ydtype,
                                       int64_t n) {
  static constexpr llvm::StringLiteral op = "convert";
  if (!validDType(xdtype))
    return badDType(op, xdtype);
  if (!validDType(ydtype))
    return badDType(op, ydtype);
  if (llvm::Error e = negativeSize(op, {{"n", n}}))
    return e;
  if (n == 0 || (x == y && xdtype == ydtype))
    return llvm::Error::success();
  if (!x || !y)
    return opError(op, "null buffer");
  if (xdtype == ydtype) {
    if (llvm::Error e = activate(op))
      return e;
    cudaError_t status =
        cudaMemcpyAsync(y, x, uint64_t(n) * kernels::dtypeBytes(xdtype), cudaMemcpyDeviceToDevice,
                        device_.cudaStream(Stream::compute));
    if (status != cudaSuccess)
      return cudaCallError(op, "cudaMemcpyAsync", status);
    return llvm::Error::success();
  }
  // Element i of y would overwrite bytes of x that other threads have yet to read.
  if (x == y && kernels::dtypeBytes(xdtype) != kernels::dtypeBytes(ydtype))
    return opError(op, "cannot convert in place between element types of different sizes");
  return launchConvert(op, x, xdtype, y, ydtype, n);
}

llvm::Error CudaDeviceOpsImpl::copyColumns(const void *x, void *y, DType dtype, int64_t rows,
                                           int64_t width, int64_t offset, int64_t count) {
  static constexpr llvm::StringLiteral op = "copyColumns";
  if (!validDType(dtype))
    return badDType(op, dtype);
  if (llvm::Error e = negativeSize(
          op, {{"rows", rows}, {"width", width}, {"offset", offset}, {"count", count}}))
    return e;
  if (offset > width || count > width - offset)
    return opError(op, llvm::formatv("columns [{0}, {1}) are outside a row of {2}", offset,
                                     offset + count, width));
  if (rows == 0 || count == 0)
    return llvm::Error::success();
  if (!x || !y)
    return opError(op, "null buffer");
  if (llvm::Error e = activate(op))
    return e;
  const uint64_t elem = uint64_t(kernels::dtypeBytes(dtype));
  cudaError_t status = cudaMemcpy2DAsync(
      y, count * elem, static_cast<const char *>(x) + offset * elem, width * elem, count * elem,
      uint64_t(rows), cudaMemcpyDeviceToDevice, device_.cudaStream(Stream::compute));
  if (status != cudaSuccess)
    return cudaCallError(op, "cudaMemcpy2DAsync", status);
  return llvm::Error::success();
}

// --- Linear ---------------------------------------------------------------------------------

llvm::Error CudaDeviceOpsImpl::linear(const void *x, DType xdtype, const void *w, DType wdtype,
                                      bool transposed, const void *bias, void *y, DType ydtype,
                                      int64_t m, int64_t k, int64_t n) {
  static constexpr llvm::StringLiteral op = "linear";
  for (DType dtype : {xdtype, wdtype, ydtype})
    if (!validDType(dtype))
      return badDType(op, dtype);
  if (llvm::Error e = negativeSize(op, {{"m", m}, {"k", k}, {"n", n}}))
    return e;
  if (m == 0 || n == 0)
    return llvm::Error::success();
  if (m > INT_MAX || k > INT_MAX || n > INT_MAX)
    return opError(op, llvm::formatv("{0}x{1}x{2} is above cuBLAS's int limits", m, k, n));
  if ((k > 0 && (!x || !w)) || !y)
    return opError(op, "null buffer");
  if (llvm::Error e = activate(op))
    return e;
  cudaStream_t stream = device_.cudaStream(Stream::compute);
  const int64_t yElem = kernels::dtypeBytes(ydtype);

  if (k == 0) {
    // An empty sum: zeros (all-zero bits in every dtype), then the bias.
    cudaError_t status = cudaMemsetAsync(y, 0, uint64_t(m * n * yElem), stream);
    if (status != cudaSuccess)
      return cudaCallError(op, "cudaMemsetAsync", status);
  } else {
    // cuBLAS multiplies two operands of one type: x goes to w's dtype first.
    const void *a = x;
    if (xdtype != wdtype) {
      auto converted = scratch(convertedX_, uint64_t(m * k * kernels::dtypeBytes(wdtype)),
                               "linear's input converted to the weight's dtype");
      if (!converted)
        return opError(op, llvm::toString(converted.takeError()));
      if (llvm::Error e = launchConvert(op, x, xdtype, *converted, wdtype, m * k))
        return e;
      a = *converted;
    }
    // With f32 compute, cublasGemmEx writes C of the operands' type or f32. Any other output
    // type gets the f32 result, converted afterwards (one rounding of the f32 sum either way).
    const bool direct = ydtype == wdtype || ydtype == DType::f32;
    void *c = y;
    if (!direct) {
      auto out = scratch(gemmOut_, uint64_t(m * n * 4), "linear's f32 result");
      if (!out)
        return opError(op, llvm::toString(out.takeError()));
      c = *out;
    }
    // Row-major y[m, n] = x[m, k] W is column-major y^T[n, m] = W^T x^T: W stored [k, n]
    // row-major is column-major [n, k] (lda n); stored [n, k] (transposed) it is column-major
    // [k, n], used transposed (lda k). x row-major [m, k] is column-major [k, m] (ldb k).
    const float one = 1.0f, zero = 0.0f;
    const int mi = int(m), ki = int(k), ni = int(n);
    cublasStatus_t status = cublas_->gemmEx(
        device_.cublas(), transposed ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, ni, mi, ki, &one, w,
        cudaType(wdtype), transposed ? ki : ni, a, cudaType(wdtype), ki, &zero, c,
        direct ? cudaType(ydtype) : CUDA_R_32F, ni, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (status != CUBLAS_STATUS_SUCCESS)
      return opError(op, llvm::formatv("cublasGemmEx ({0}x{1}x{2}): {3}", m, k, n,
                                       cublas_->statusString(status)));
    if (!direct)
      if (llvm::Error e = launchConvert(op, c, DType::f32, y, ydtype, m * n))
        return e;
  }
  if (!bias)
    return llvm::Error::success();
  return launch(op, addBias_[ydtype], {gridFor(m * n)}, kThreads, {&y, &bias, &m, &n});
}

// --- Weights in blocks ----------------------------------------------------------------------

namespace {
/// Up to this many rows of x the GEMV reads the weights once per 8 rows; beyond, the weights are
/// dequantized to f32 panel by panel for cuBLAS (prefill).
constexpr int64_t kQgemvMaxM = 32;
/// Bytes of one f32 panel of dequantized weight rows.
constexpr int64_t kDequantizedPanelBytes = int64_t(64) << 20;
/// Threads of a helm_cuda_qgemv block (one output row): 8 warps over the row's groups.
constexpr uint32_t kBlockThreads = 256;

llvm::Expected<quant::BlockFormat> blockFormat(llvm::StringRef op, int32_t code, int64_t k) {
  auto format = blockFormatOfCall(code, k);
  if (!format)
    return opError(op, llvm::toString(format.takeError()));
  return *format;
}
} // namespace

llvm::Error CudaDeviceOpsImpl::linearBlocks(const void *x, DType xdtype, const void *w,
                                            int32_t wBlockDtype, const void *bias, void *y,
                                            DType ydtype, int64_t m, int64_t k, int64_t n) {
  static constexpr llvm::StringLiteral op = "linear";
  for (DType dtype : {xdtype, ydtype})
    if (!validDType(dtype))
      return badDType(op, dtype);
  if (llvm::Error e = negativeSize(op, {{"m", m}, {"k", k}, {"n", n}}))
    return e;
  auto format = blockFormat(op, wBlockDtype, k);
  if (!format)
    return format.takeError();
  if (m == 0 || n == 0)
    return llvm::Error::success();
  if (!haveBlockKernels_)
    return opError(op, "the package's GPU kernels cannot read weights in blocks (recompile it)");
  if (m > INT_MAX || k > INT_MAX || n > INT_MAX)
    return opError(op, llvm::formatv("{0}x{1}x{2} is above cuBLAS's int limits", m, k, n));
  if ((k > 0 && (!x || !w)) || !y)
    return opError(op, "null buffer");
  if (llvm::Error e = activate(op))
    return e;
  cudaStream_t stream = device_.cudaStream(Stream::compute);
  // The f32 result: y itself, or scratch converted to y's dtype at the end.
  void *c = y;
  if (ydtype != DType::f32) {
    auto out = scratch(gemmOut_, uint64_t(m * n * 4), "linear's f32 result");
    if (!out)
      return opError(op, llvm::toString(out.takeError()));
    c = *out;
  }
  if (k == 0) {
    cudaError_t status = cudaMemsetAsync(c, 0, uint64_t(m * n * 4), stream);
    if (status != cudaSuccess)
      return cudaCallError(op, "cudaMemsetAsync", status);
  } else {
    int32_t code = wBlockDtype;
    const int64_t rowBytes = *quant::rowBytes(*format, k);
    // Prefill (m above the GEMV's rows) multiplies on the tensor cores: f16 activations with the
    // weights dequantized to f16, others as f32 with TF32 products (both with f32 sums). Either
    // rounds each weight and activation to 11 significant bits, as the 16-bit GEMMs of models
    // with f16 weights do; decode keeps the GEMV's exact f32 weights.
    const bool gemm = m > kQgemvMaxM;
    const bool f16Panels = gemm && xdtype == DType::f16 && dequantizeRowsF16_;
    // The GEMV and the TF32 GEMM read f32 activations.
    const void *xf = x;
    if (xdtype != DType::f32 && !f16Panels) {
      auto converted = scratch(convertedX_, uint64_t(m * k * 4), "linear's input as f32");
      if (!converted)
        return opError(op, llvm::toString(converted.takeError()));
      if (llvm::Error e = launchConvert(op, x, xdtype, *converted, DType::f32, m * k))
        return e;
      xf = *converted;
    }
    if (!gemm) {
      auto aligned = [](const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
      // The staged GEMV copies rows in 16-byte words: every row must start on a 16-byte boundary.
      // The q4_k one loads weights and x in 16-byte words (a q4_k row is a whole number of
      // 144-byte super-blocks, and k a multiple of 256 keeps every row of x aligned).
      const bool q4k =
          qgemvQ4K_ && *format == quant::BlockFormat::q4_k && aligned(w) && aligned(xf);
      const bool staged = !q4k && qgemvStaged_ && aligned(w) && rowBytes % 16 == 0;
      const int64_t xRows = helm_cuda::kQgemvMaxRows;
      const int64_t rowsPerBlock =
          q4k ? helm_cuda::kQgemvQ4KThreads / 32 * helm_cuda::kQgemvQ4KRowsPerWarp
              : staged ? helm_cuda::kQgemvStagedRows : 1;
      const uint32_t threads = q4k      ? uint32_t(helm_cuda::kQgemvQ4KThreads)
                               : staged ? uint32_t(helm_cuda::kQgemvStagedThreads)
                                        : kBlockThreads;
      const uint32_t grid = uint32_t(std::min((n + rowsPerBlock - 1) / rowsPerBlock, kMaxBlocks));
      for (int64_t r0 = 0; r0 < m; r0 += xRows) {
        const void *xr = static_cast<const char *>(xf) + r0 * k * 4;
        void *cr = static_cast<char *>(c) + r0 * n * 4;
        int64_t rows = std::min(xRows, m - r0);
        // helm_cuda_qgemv_q4k reads one format: it takes no format code.
        llvm::Error e =
            q4k ? launch(op, qgemvQ4K_, {grid}, threads, {&xr, &w, &cr, &rows, &k, &n})
                : launch(op, staged ? qgemvStaged_ : qgemv_, {grid}, threads,
                         {&xr, &w, &code, &cr, &rows, &k, &n});
        if (e)
          return e;
      }
    } else {
      // Row-major c[m, n] = x[m, k] . P^T, one panel P of weight rows [n0, n0 + p) at a time:
      // column-major c^T[n, m] = P x^T, with P row-major [p, k] (column-major [k, p], used
      // transposed, lda k), x column-major [k, m] (ldb k), c^T's rows n0.. (ldc n).
      const int64_t panelElementBytes = f16Panels ? 2 : 4;
      const int64_t panelRows =
          std::clamp<int64_t>(kDequantizedPanelBytes / (k * panelElementBytes), 1, n);
      auto panel = scratch(dequantized_, uint64_t(panelRows * k * panelElementBytes),
                           "dequantized weight rows");
      if (!panel)
        return opError(op, llvm::toString(panel.takeError()));
      const cudaDataType_t panelType = f16Panels ? CUDA_R_16F : CUDA_R_32F;
      const cublasComputeType_t compute =
          f16Panels ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
      const float one = 1.0f, zero = 0.0f;
      for (int64_t n0 = 0; n0 < n; n0 += panelRows) {
        int64_t rows = std::min(panelRows, n - n0);
        const void *wr = static_cast<const char *>(w) + n0 * rowBytes;
        void *p = *panel;
        if (llvm::Error e = launch(op, f16Panels ? dequantizeRowsF16_ : dequantizeRows_,
                                   {gridFor(rows * k)}, kThreads, {&wr, &code, &p, &rows, &k}))
          return e;
        cublasStatus_t status = cublas_->gemmEx(
            device_.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, int(rows), int(m), int(k), &one, p,
            panelType, int(k), xf, panelType, int(k), &zero, static_cast<float *>(c) + n0,
            CUDA_R_32F, int(n), compute, CUBLAS_GEMM_DEFAULT);
        if (status != CUBLAS_STATUS_SUCCESS)
          return opError(op, llvm::formatv("cublasGemmEx ({0}x{1}x{2}): {3}", m, k, rows,
                                           cublas_->statusString(status)));
      }
    }
  }
  if (ydtype != DType::f32)
    if (llvm::Error e = launchConvert(op, c, DType::f32, y, ydtype, m * n))
      return e;
  if (!bias)
    return llvm::Error::success();
  return launch(op, addBias_[ydtype], {gridFor(m * n)}, kThreads, {&y, &bias, &m, &n});
}

llvm::Error CudaDeviceOpsImpl::embedBlocks(const int64_t *ids, const void *table,
                                           int32_t tableBlockDtype, void *out, DType outDtype,
                                           int64_t rows, int64_t vocab, int64_t width) {
  static constexpr llvm::StringLiteral op = "embed";
  if (!validDType(outDtype))
    return badDType(op, outDtype);
  if (llvm::Error e = negativeSize(op, {{"rows", rows}, {"vocab", vocab}, {"width", width}}))
    return e;
  auto format = blockFormat(op, tableBlockDtype, width);
  if (!format)
    return format.takeError();
  if (rows == 0 || width == 0)
    return llvm::Error::success();
  if (vocab == 0)
    return opError(op, "the table has no rows (vocab 0)");
  if (!haveBlockKernels_)
    return opError(op, "the package's GPU kernels cannot read weights in blocks (recompile it)");
  if (!ids || !table || !out)
    return opError(op, "null buffer");
  int32_t code = tableBlockDtype;
  return launch(op, embedBlocks_[outDtype], {uint32_t(std::min(rows, kMaxBlocks))},
                rowBlock(width), {&table, &code, &ids, &out, &rows, &vocab, &width});
}

// --- Attention ------------------------------------------------------------------------------

llvm::Error CudaDeviceOpsImpl::attention(const DeviceAttentionCall &call, KvCache &kv) {
  static constexpr llvm::StringLiteral op = "attention";
  using namespace helm_cuda;
  const DType dtype = call.dtype;
  if (!validDType(dtype))
    return badDType(op, dtype);
  if (llvm::Error e = negativeSize(op, {{"batch", call.batch},
                                        {"seq", call.seq},
                                        {"heads", call.heads},
                                        {"kvHeads", call.kvHeads},
                                        {"headDim", call.headDim},
                                        {"window", call.window}}))
    return e;
  if (call.heads == 0 || call.kvHeads == 0 || call.heads % call.kvHeads != 0)
    return opError(op, llvm::formatv("heads {0} is not a positive multiple of kvHeads {1}",
                                     call.heads, call.kvHeads));
  if (call.headDim < 1 || call.headDim > kAttentionMaxHeadDim)
    return opError(op, llvm::formatv("headDim {0} is outside the kernel's 1..{1}", call.headDim,
                                     kAttentionMaxHeadDim));
  const int64_t kvWidth = call.kvHeads * call.headDim;
  if (call.layer < 0 || call.layer >= kv.layers() || kvWidth != kv.rowWidth())
    return opError(op, llvm::formatv("layer {0} with rows of {1} floats does not match the KV "
                                     "cache ({2} layers, rows of {3} floats)",
                                     call.layer, kvWidth, kv.layers(), kv.rowWidth()));
  if (call.batch == 0 || call.seq == 0)
    return llvm::Error::success();
  if (call.seq > INT32_MAX / call.heads || kvWidth > INT32_MAX)
    return opError(op, llvm::formatv("seq * heads = {0} * {1} or kvHeads * headDim = {2} is "
                                     "above the kernels' int32 limits",
                                     call.seq, call.heads, kvWidth));
  if (!call.q || !call.k || !call.v || !call.out || !call.sequence || !call.past)
    return opError(op, "null buffer");
  for (int64_t b = 0; b < call.batch; ++b)
    if (call.sequence[b] < 0 || call.past[b] < 0)
      return opError(op, llvm::formatv("batch row {0} has sequence {1} and past {2}", b,
                                       call.sequence[b], call.past[b]));

  // 1. Room for the new positions, and their spans: the new keys and values are widened into
  // the cache's device rows by the kernel (never through KvCache::write, a host copy). Each row's
  // rows are appended right after its reserve: reserving counts the pages it completes as full,
  // and the next row's reserve may evict a full page (its copy is ordered after the work already
  // on the compute stream), so the append must be on the stream by then.
  const void *k = call.k, *v = call.v;
  int32_t width = int32_t(kvWidth);
  for (int64_t b = 0; b < call.batch; ++b) {
    const int32_t seqId = call.sequence[b];
    const int64_t past = call.past[b];
    if (!kv.reserve(call.layer, seqId, past + call.seq))
      return opError(op, kv.error());
    segments_.clear();
    kv.forEachSpan(call.layer, seqId, past, past + call.seq,
                   [&](const void *kRows, const void *vRows, int64_t first, int64_t count) {
                     // The device's paged cache holds f32 rows.
                     auto *ks = static_cast<const float *>(kRows), *vs = static_cast<const float *>(vRows);
                     segments_.push_back({const_cast<float *>(ks), const_cast<float *>(vs),
                                          b * call.seq + (first - past), count});
                   });
    for (size_t s0 = 0; s0 < segments_.size(); s0 += kKvAppendSegments) {
      KvAppendBatch batch{};
      int64_t longest = 0;
      for (size_t s = s0; s < std::min(segments_.size(), s0 + kKvAppendSegments); ++s) {
        batch.segment[batch.count++] = segments_[s];
        longest = std::max(longest, segments_[s].rows);
      }
      if (llvm::Error e =
              launch(op, kvAppend_[dtype], {gridFor(longest * kvWidth), uint32_t(batch.count)},
                     kThreads, {&k, &v, &batch, &width}))
        return e;
    }
  }

  // 2. Attend, one batch row at a time, over the spans any of its queries can see.
  const int64_t elem = kernels::dtypeBytes(dtype);
  const int64_t rowBytes = call.seq * call.heads * call.headDim * elem;
  int32_t heads = int32_t(call.heads), group = int32_t(call.heads / call.kvHeads);
  int32_t headDim = int32_t(call.headDim);
  int64_t window = call.window;
  float scale = call.scale, softcap = call.softcap;
  const uint32_t blocks = uint32_t(call.seq * call.heads);
  for (int64_t b = 0; b < call.batch; ++b) {
    int64_t past = call.past[b];
    const int64_t from = window > 0 ? std::max<int64_t>(0, past - window + 1) : 0;
    // One launch per span, carrying (m, s, o) in `state` between them: a paged cache hands out
    // a streamed page's rows only for the visit (its staging buffer is refilled afterwards, in
    // stream order after this launch), so each span's reads are enqueued before the visit ends.
    auto p = scratch(attentionState_,
                     uint64_t(call.seq * call.heads * (call.headDim + 2)) * sizeof(float),
                     "the attention's online-softmax state");
    if (!p)
      return opError(op, llvm::toString(p.takeError()));
    float *state = static_cast<float *>(*p);
    const void *q = static_cast<const char *>(call.q) + b * rowBytes;
    void *out = static_cast<char *>(call.out) + b * rowBytes;
    const int64_t to = past + call.seq;
    bool started = false;
    std::string failure;
    kv.forEachSpan(call.layer, call.sequence[b], from, to,
                   [&](const void *kRows, const void *vRows, int64_t first, int64_t count) {
                     if (!failure.empty())
                       return;
                     auto *ks = static_cast<const float *>(kRows), *vs = static_cast<const float *>(vRows);
                     KvSpanBatch batch{};
                     batch.span[batch.count++] = {ks, vs, first, count};
                     int32_t flags = (started ? kAttentionResume : 0) |
                                     (first + count >= to ? kAttentionFinish : 0);
                     if (llvm::Error e = launch(op, attention_[dtype], {blocks},
                                                kAttentionThreads,
                                                {&q, &out, &state, &batch, &heads, &group,
                                                 &headDim, &width, &past, &window, &scale,
                                                 &flags, &softcap}))
                       failure = llvm::toString(std::move(e));
                     started = true;
                   });
    if (!failure.empty())
      return opError(op, failure);
    if (!started)
      return opError(op, llvm::formatv("the KV cache has no rows for positions [{0}, {1}) of "
                                       "sequence {2}",
                                       from, to, call.sequence[b]));
  }
  return llvm::Error::success();
}

// --- Stage inputs ---------------------------------------------------------------------------

llvm::Expected<const void *> CudaDeviceOpsImpl::constant(const void *host, int64_t bytes) {
  static constexpr llvm::StringLiteral op = "constant";
  if (bytes < 0)
    return opError(op, llvm::formatv("negative size: bytes = {0}", bytes));
  auto [it, added] = constants_.try_emplace({host, bytes}, nullptr);
  if (!added)
    return it->second;
  auto p = device_.allocate(uint64_t(bytes), "a constant of the GPU stage");
  if (!p) {
    constants_.erase(it);
    return opError(op, llvm::toString(p.takeError()));
  }
  // Made once per constant: a synchronous, counted copy (it does cross the link).
  if (llvm::Error e = device_.copyToDevice(*p, host, uint64_t(bytes), Stream::compute, false)) {
    device_.free(*p);
    constants_.erase(it);
    return opError(op, llvm::toString(std::move(e)));
  }
  it->second = *p;
  return *p;
}

llvm::Expected<const int64_t *> CudaDeviceOpsImpl::stagePositions(const int64_t *host,
                                                                  int64_t count) {
  static constexpr llvm::StringLiteral op = "stagePositions";
  if (count < 0)
    return opError(op, llvm::formatv("negative size: count = {0}", count));
  if (count == 0)
    return host; // nothing will read it
  auto p = scratch(positions_, uint64_t(count) * sizeof(int64_t), "the stage's positions");
  if (!p)
    return opError(op, llvm::toString(p.takeError()));
  if (llvm::Error e = activate(op))
    return std::move(e);
  // Ordered after the kernels that still read the previous call's positions (same stream). From
  // pageable memory (the runtime's arrays) the copy is staged before cudaMemcpyAsync returns, so
  // the caller may reuse `host` at once; pinned memory would have to stay unchanged until
  // the stream reached the copy. A launch parameter of the stage, not link traffic: not counted.
  cudaError_t status = cudaMemcpyAsync(*p, host, uint64_t(count) * sizeof(int64_t),
                                       cudaMemcpyHostToDevice, device_.cudaStream(Stream::compute));
  if (status != cudaSuccess)
    return cudaCallError(op, "cudaMemcpyAsync", status);
  return static_cast<const int64_t *>(*p);
}

llvm::Error CudaDeviceOpsImpl::synchronize() {
  if (llvm::Error e = device_.synchronizeStream(Stream::compute))
    return opError("synchronize", llvm::toString(std::move(e)));
  return llvm::Error::success();
}

} // namespace

llvm::Expected<std::unique_ptr<DeviceOps>> createCudaDeviceOps(CudaDevice &device,
                                                               llvm::ArrayRef<char> kernelImage) {
  auto module = device.loadModule(kernelImage);
  if (!module)
    return opError("device ops",
                   "cannot load the kernel image: " + llvm::toString(module.takeError()));
  // From here the ops own the module (their destructor unloads it).
  auto ops = std::make_unique<CudaDeviceOpsImpl>(device, *module);
  if (llvm::Error e = ops->init())
    return std::move(e);
  return std::unique_ptr<DeviceOps>(std::move(ops));
}

} // namespace helm::rt
