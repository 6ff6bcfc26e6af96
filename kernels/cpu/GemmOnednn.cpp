//===- GemmOnednn.cpp - the prefill GEMM of helm_k_linear on oneDNN --------------------===//
//
// helm's pool splits the N output columns; each thread walks its columns in panels and runs one
// single-threaded oneDNN matmul per panel:
//   - f32 W, and bf16 W against bf16 x, are passed to oneDNN in place (strided descriptors);
//   - f16 W, and bf16 W against f32/f16 x, are first widened (exactly) into a per-thread f32 panel,
//     so oneDNN multiplies f32 by f32 and never rounds x;
//   - oneDNN writes a dense f32 panel, which is rounded once to y's type.
// oneDNN's OpenMP runtime is held to one thread in every thread that calls it, so helm's pool is
// the only source of parallelism (helm-rt -t 1 keeps one core busy).
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/Gemm.h"
#include "kernels/cpu/Gemv.h"
#include "kernels/common/Isa.h"
#include "kernels/common/Knobs.h"
#include "kernels/common/Numeric.h"
#include "kernels/common/ThreadPool.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <optional>
#include <unordered_map>
#include <vector>

namespace helm::kernels {
namespace {

// ---- oneDNN ------------------------------------------------------------------------------------

/// oneDNN parallelises with OpenMP (Debian builds it against libgomp). Its thread count is the
/// calling thread's OpenMP nthreads setting, which is per thread; set it to 1 in every thread that
/// calls oneDNN, so that each call runs on that thread only and helm's pool (`helm-rt -t`) is the
/// only parallelism. Looked up at run time so that no OpenMP runtime is linked in by name: it is
/// whichever one the oneDNN library brought.
void holdOneDnnToThisThread() {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  thread_local bool done = false;
  if (done)
    return;
  done = true;
  using SetThreads = void (*)(int);
  static const auto setNumThreads =
      reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (setNumThreads)
    setNumThreads(1);
#endif
}

dnnl::engine &cpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

/// A 64-byte aligned view of at least n elements of a per-thread buffer that only grows.
template <class T> T *alignedBuffer(std::vector<T> &buffer, size_t n) {
  size_t extra = 64 / sizeof(T);
  if (buffer.size() < n + extra)
    buffer.resize(n + extra);
  auto addr = reinterpret_cast<uintptr_t>(buffer.data());
  return reinterpret_cast<T *>((addr + 63) & ~uintptr_t(63));
}

struct PrimKey {
  int64_t M, K, cols, ldw;
  bool bf16, transposed;
  bool operator==(const PrimKey &o) const {
    return M == o.M && K == o.K && cols == o.cols && ldw == o.ldw && bf16 == o.bf16 &&
           transposed == o.transposed;
  }
};
struct PrimKeyHash {
  size_t operator()(const PrimKey &k) const {
    uint64_t h = uint64_t(k.M);
    for (uint64_t v : {uint64_t(k.K), uint64_t(k.cols), uint64_t(k.ldw),
                       uint64_t(k.bf16) * 2 + uint64_t(k.transposed)})
      h = (h ^ v) * 0x100000001b3ull;
    return size_t(h);
  }
};

/// dst[M, cols] (f32, dense) = src[M, K] (dense) . W, W seen as [K, cols] with leading dimension
/// ldw, stored row-major ([K, N] layout) or column-major ([N, K] layout, transposed).
struct Prim {
  std::optional<dnnl::matmul> matmul; // empty: oneDNN has no implementation (use the fallback)
  dnnl::memory::desc src, weights, dst, scratchpad;
};

Prim makePrim(const PrimKey &k, bool warn) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  Prim p;
  dt type = k.bf16 ? dt::bf16 : dt::f32;
  p.src = dnnl::memory::desc(dims{k.M, k.K}, type, dims{k.K, 1});
  p.weights = dnnl::memory::desc(dims{k.K, k.cols}, type,
                                 k.transposed ? dims{1, k.ldw} : dims{k.ldw, 1});
  p.dst = dnnl::memory::desc(dims{k.M, k.cols}, dt::f32, dims{k.cols, 1});
  try {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p.src, p.weights, p.dst), attr,
                                    cpuEngine());
    p.scratchpad = pd.scratchpad_desc();
    p.matmul.emplace(pd);
  } catch (const dnnl::error &e) {
    static std::atomic<bool> warned{false};
    if (warn && !warned.exchange(true))
      std::fprintf(stderr,
                   "helm: oneDNN has no %s matmul here (%s); those calls use the GEMV kernels\n",
                   k.bf16 ? "bf16" : "f32", e.what());
  }
  return p;
}

/// This thread's primitives, one per shape. A prefill reuses a handful of shapes for every layer;
/// a new prompt length brings new ones, so the cache is dropped when it grows past a bound.
const Prim &primFor(const PrimKey &key) {
  thread_local std::unordered_map<PrimKey, Prim, PrimKeyHash> cache;
  auto it = cache.find(key);
  if (it != cache.end())
    return it->second;
  if (cache.size() >= 64)
    cache.clear();
  return cache.emplace(key, makePrim(key, /*warn=*/true)).first->second;
}

/// dst = src . weights on this thread; false (after a one-time warning) if oneDNN reports an error.
bool runMatmul(const Prim &prim, const void *src, const void *weights, float *dst,
               dnnl::stream &stream) {
  thread_local std::vector<unsigned char> scratchpad;
  dnnl::engine &engine = cpuEngine();
  try {
    void *scratch = alignedBuffer(scratchpad, prim.scratchpad.get_size());
    prim.matmul->execute(
        stream, {{DNNL_ARG_SRC, dnnl::memory(prim.src, engine, const_cast<void *>(src))},
                 {DNNL_ARG_WEIGHTS,
                  dnnl::memory(prim.weights, engine, const_cast<void *>(weights))},
                 {DNNL_ARG_DST, dnnl::memory(prim.dst, engine, dst)},
                 {DNNL_ARG_SCRATCHPAD, dnnl::memory(prim.scratchpad, engine, scratch)}});
    stream.wait();
    return true;
  } catch (const dnnl::error &e) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      std::fprintf(stderr, "helm: oneDNN matmul failed (%s); using the GEMV kernels\n", e.what());
    return false;
  }
}

/// Whether oneDNN runs bf16 x bf16 -> f32 matmul on this machine (probed once).
bool bf16MatmulAvailable() {
  static const bool ok = [] {
    holdOneDnnToThisThread();
    return makePrim(PrimKey{16, 32, 32, 32, true, false}, /*warn=*/false).matmul.has_value();
  }();
  return ok;
}

/// Widened weight panels are kept to about this size (f32), so a panel stays in L2 while oneDNN
/// sweeps the M rows of x over it.
constexpr int64_t kWidenPanelBytes = int64_t(1) << 20;
/// Panels of weights used in place are bounded only by the f32 output panel they produce.
constexpr int64_t kOutputPanelBytes = int64_t(4) << 20;

/// HELM_KERNEL_GEMM=auto|always|never: the default path (always/never force the GEMM or the GEMV
/// kernels for every call, e.g. to run a whole model on one of them).
PrefillPath pathFromEnvironment() {
  std::optional<std::string> path = knobValue(Knob::KernelGemm, "auto");
  if (path == "always")
    return PrefillPath::gemm;
  if (path == "never")
    return PrefillPath::gemv;
  return PrefillPath::automatic;
}

/// The testing override (-1: none, use the environment's choice).
std::atomic<int> forcedPath{-1};
/// Column panels oneDNN declined or failed, computed by the GEMV kernels instead.
std::atomic<int64_t> fallbackPanels{0};

/// One call, shared by the threads that compute its column ranges.
struct GemmCall {
  const void *x;   // as passed: used by the bf16 x bf16 matmul
  const float *xf; // x widened to f32 (x itself when f32)
  const void *w;
  void *y;
  DType wd, yd;
  bool transposed, bf16Direct;
  int64_t M, K, N;
  Isa isa;
};

/// y[:, n0:n1] of the call, on this thread.
void gemmRange(const GemmCall &c, int64_t n0, int64_t n1) {
  holdOneDnnToThisThread();
  const bool inPlace = c.wd == DType::f32 || c.bf16Direct;
  const int64_t align = c.transposed ? 16 : 64; // whole cache lines of W per panel
  int64_t panel = inPlace ? kOutputPanelBytes / (4 * c.M) : kWidenPanelBytes / (4 * c.K);
  panel = std::max(align, panel / align * align);
  thread_local std::vector<float> widened, out;
  thread_local dnnl::stream stream(cpuEngine());
  const int64_t wBytes = dtypeBytes(c.wd), yBytes = dtypeBytes(c.yd);
  for (int64_t c0 = n0; c0 < n1; c0 += panel) {
    const int64_t cols = std::min(panel, n1 - c0);
    const char *wBase = static_cast<const char *>(c.w);
    const void *wp;
    int64_t ldw;
    if (inPlace) {
      wp = wBase + (c.transposed ? c0 * c.K : c0) * wBytes;
      ldw = c.transposed ? c.K : c.N;
    } else {
      float *buf = alignedBuffer(widened, size_t(cols * c.K));
      if (c.transposed) { // rows c0.. of [N, K]: one contiguous block
        widen(wBase + c0 * c.K * wBytes, c.wd, buf, cols * c.K);
        ldw = c.K;
      } else { // a column panel of [K, N]: K row segments
        for (int64_t k = 0; k < c.K; ++k)
          widen(wBase + (k * c.N + c0) * wBytes, c.wd, buf + k * cols, cols);
        ldw = cols;
      }
      wp = buf;
    }
    const Prim &prim = primFor(PrimKey{c.M, c.K, cols, ldw, c.bf16Direct, c.transposed});
    float *dst = alignedBuffer(out, size_t(c.M * cols));
    if (!prim.matmul || !runMatmul(prim, c.bf16Direct ? c.x : c.xf, wp, dst, stream)) {
      // oneDNN has no implementation for this shape or failed: the GEMV kernels compute these
      // columns instead (straight into y).
      fallbackPanels.fetch_add(1, std::memory_order_relaxed);
      LinearProblem p{c.xf, c.w, c.y, c.yd, c.M, c.K, c.N};
      const LinearKernels &gemv = linearKernelsFor(c.isa);
      (c.transposed ? gemv.nk : gemv.kn)[int(c.wd)](p, c0, c0 + cols, gemvThreadScratch());
      continue;
    }
    char *yBase = static_cast<char *>(c.y);
    for (int64_t m = 0; m < c.M; ++m)
      narrow(dst + m * cols, c.yd, yBase + (m * c.N + c0) * yBytes, cols);
  }
}

} // namespace

void setPrefillPathForTesting(PrefillPath path) {
  forcedPath.store(int(path), std::memory_order_relaxed);
}
int64_t gemmFallbackPanelsForTesting() { return fallbackPanels.load(std::memory_order_relaxed); }

PrefillPath prefillPathForTesting() {
  int forced = forcedPath.load(std::memory_order_relaxed);
  if (forced >= 0)
    return PrefillPath(forced);
  static const PrefillPath fromEnvironment = pathFromEnvironment();
  return fromEnvironment;
}

int64_t gemmMinRows(DType xd, DType wd, bool wTransposed) {
  if (xd == DType::bf16 && wd == DType::bf16 && bf16MatmulAvailable())
    return kGemmMinRowsBf16;
  if (wTransposed)
    return kGemmMinRowsNK;
  return wd == DType::f32 ? kGemmMinRowsKN : kGemmMinRowsKN16;
}

bool gemmWanted(Isa isa, DType xd, DType wd, bool wTransposed, int64_t M, int64_t K, int64_t N) {
  // An empty sum is zeros, which the GEMV kernels write (oneDNN would leave y unwritten).
  if (isa == Isa::scalar || K == 0)
    return false;
  switch (prefillPathForTesting()) {
  case PrefillPath::gemv: return false;
  case PrefillPath::gemm: return true;
  case PrefillPath::automatic: break;
  }
  // Tiny products stay on the GEMV kernels, which have no per-call setup.
  if (M * K * N < (int64_t(1) << 18))
    return false;
  return M >= gemmMinRows(xd, wd, wTransposed);
}

void linearGemm(const void *x, const float *xf, DType xd, const void *w, DType wd,
                bool wTransposed, void *y, DType yd, int64_t M, int64_t K, int64_t N) {
  const bool bf16Direct = xd == DType::bf16 && wd == DType::bf16 && bf16MatmulAvailable();
  const GemmCall call{x, xf, w, y, wd, yd, wTransposed, bf16Direct, M, K, N, activeIsa()};
  const GemmCall *job = &call;
  // One thread: parallelFor runs the whole range inline.
  pool().parallelFor(N, wTransposed ? 16 : 64,
                     [job](int64_t n0, int64_t n1) { gemmRange(*job, n0, n1); });
}

} // namespace helm::kernels
