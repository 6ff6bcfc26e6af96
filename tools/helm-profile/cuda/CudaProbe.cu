//===- CudaProbe.cu - GPU and link measurements for helm-profile -----------------===//
#include "tools/helm-profile/cuda/CudaProbe.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

namespace helm {

namespace {
#define PROBE_CHECK(call)                                                                        \
  do {                                                                                           \
    cudaError_t err_ = (call);                                                                   \
    if (err_ != cudaSuccess) {                                                                   \
      m.message = std::string(#call) + ": " + cudaGetErrorString(err_);                          \
      return m;                                                                                  \
    }                                                                                            \
  } while (0)

/// Milliseconds of `reps` runs of `body`, timed with events on the default stream.
template <typename F> float timeMs(int reps, F body) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  body(); // warm-up
  cudaEventRecord(start);
  for (int i = 0; i < reps; ++i)
    body();
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / float(reps);
}
} // namespace

CudaMeasurement measureCuda(int hidden) {
  CudaMeasurement m;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    m.message = "no CUDA GPU found";
    return m;
  }
  cudaDeviceProp prop{};
  PROBE_CHECK(cudaGetDeviceProperties(&prop, 0));
  m.name = prop.name;
  size_t freeBytes = 0, totalBytes = 0;
  PROBE_CHECK(cudaMemGetInfo(&freeBytes, &totalBytes));
  m.vramBytes = double(totalBytes);

  // Device memory bandwidth: a 512 MiB device-to-device copy reads and writes every byte.
  const size_t big = size_t(512) << 20;
  void *a = nullptr, *b = nullptr;
  PROBE_CHECK(cudaMalloc(&a, big));
  PROBE_CHECK(cudaMalloc(&b, big));
  float ms = timeMs(10, [&] { cudaMemcpy(b, a, big, cudaMemcpyDeviceToDevice); });
  m.memBwGbs = 2.0 * double(big) / (ms * 1e6);

  // Link: pinned host memory both ways, and a 4-byte copy for latency.
  const size_t chunk = size_t(256) << 20;
  void *host = nullptr;
  PROBE_CHECK(cudaMallocHost(&host, chunk));
  ms = timeMs(5, [&] { cudaMemcpy(a, host, chunk, cudaMemcpyHostToDevice); });
  m.h2dGbs = double(chunk) / (ms * 1e6);
  ms = timeMs(5, [&] { cudaMemcpy(host, a, chunk, cudaMemcpyDeviceToHost); });
  m.d2hGbs = double(chunk) / (ms * 1e6);
  ms = timeMs(100, [&] { cudaMemcpy(a, host, 4, cudaMemcpyHostToDevice); });
  m.latencyUs = double(ms) * 1000.0;
  cudaFreeHost(host);

  // Compute: cuBLAS fp16 GEMM (128, H) x (H, H) (prefill-like) and GEMV (1, H) x (H, H) (decode).
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
    m.message = "cublasCreate failed";
    return m;
  }
  const size_t h = size_t(hidden);
  __half *w = static_cast<__half *>(a), *x = static_cast<__half *>(b);
  __half *y = x + 128 * h;
  const float one = 1.0f, zero = 0.0f;
  auto gemm = [&](int rows) {
    cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, int(h), rows, int(h), &one, w, CUDA_R_16F, int(h), x,
                 CUDA_R_16F, int(h), &zero, y, CUDA_R_16F, int(h), CUBLAS_COMPUTE_32F,
                 CUBLAS_GEMM_DEFAULT);
  };
  ms = timeMs(20, [&] { gemm(128); });
  m.gemmGflops = 2.0 * 128 * double(h) * double(h) / (ms * 1e6);
  ms = timeMs(50, [&] { gemm(1); });
  m.gemvGflops = 2.0 * double(h) * double(h) / (ms * 1e6);
  cublasDestroy(handle);
  cudaFree(a);
  cudaFree(b);
  PROBE_CHECK(cudaGetLastError());
  m.ok = true;
  return m;
}

} // namespace helm
