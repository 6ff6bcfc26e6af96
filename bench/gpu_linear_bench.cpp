//===- gpu_linear_bench.cpp - the CUDA device ops' linear on element and block weights ---===//
//
// helm-gpu-linear-bench (built with the CUDA tests, for a GPU machine: docs/devices.md): times
// DeviceOps::linear (cuBLAS) on f16 and bf16 weights and DeviceOps::linearBlocks on every block
// format, for decode (m = 1 and 8) and prefill (m = 512) on Llama-sized matrices, and prints the
// time per call (median of the repeats, with the range), the weight bytes read per second and,
// for prefill, the rate in TFLOP/s. The weights are random blocks (quantizeRow); each call's
// result is not checked here (CudaDeviceOpsTest does that). Block weights decode on the byte-load
// GEMV; HELM_CUDA_QGEMV=staged measures the staged GEMV where their rows allow it, and
// HELM_CUDA_QGEMV=lanes the q4_k GEMV on the q4_k weights (read when the device ops are created).
//
// usage: helm-gpu-linear-bench [--repeats N] [--decode-only]   (--decode-only: m = 1 and 8)
//        helm-gpu-linear-bench --bandwidth   the device memory's speed alone: a 1 GiB
//            device-to-device copy (median of 10), printed as "device copy: N GB/s (read + write)",
//            the figure scripts/gpu-check.sh divides decode speed by
//
//===----------------------------------------------------------------------===//
#include "kernels/common/Numeric.h"
#include "kernels/cuda/CudaKernels.h"
#include "kernels/quant/BlockFormats.h"
#include "runtime/backends/cuda/CudaDevice.h"
#include "runtime/device/DeviceOps.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace helm::rt;
using helm::kernels::DType;

namespace {

int fail(const std::string &message) {
  std::fprintf(stderr, "helm-gpu-linear-bench: %s\n", message.c_str());
  return 1;
}

struct Shape {
  const char *name;
  int64_t k, n;
};

/// Median GB/s (bytes read plus bytes written) of ten device-to-device copies of 1 GiB.
int deviceCopyBandwidth(CudaDevice &device) {
  constexpr uint64_t bytes = uint64_t(1) << 30;
  auto from = device.allocate(bytes, "copy source");
  if (!from)
    return fail(llvm::toString(from.takeError()));
  auto to = device.allocate(bytes, "copy target");
  if (!to)
    return fail(llvm::toString(to.takeError()));
  std::vector<double> seconds;
  for (int r = 0; r < 12; ++r) {
    auto start = std::chrono::steady_clock::now();
    cudaError_t status = cudaMemcpyAsync(*to, *from, bytes, cudaMemcpyDeviceToDevice,
                                         device.cudaStream(Stream::compute));
    if (status != cudaSuccess)
      return fail(std::string("cudaMemcpyAsync: ") + cudaGetErrorString(status));
    if (llvm::Error e = device.synchronizeStream(Stream::compute))
      return fail(llvm::toString(std::move(e)));
    if (r >= 2)
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  std::printf("device copy: %.0f GB/s (read + write)\n", 2.0 * double(bytes) / seconds[seconds.size() / 2] / 1e9);
  device.free(*from);
  device.free(*to);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  int repeats = 20;
  bool decodeOnly = false, bandwidth = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc)
      repeats = std::max(3, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--decode-only") == 0)
      decodeOnly = true;
    else if (std::strcmp(argv[i], "--bandwidth") == 0)
      bandwidth = true;
    else
      return fail(std::string("unknown argument '") + argv[i] +
                  "' (usage: [--repeats N] [--decode-only] | --bandwidth)");
  }
  std::string reason;
  if (!cudaAvailable(&reason))
    return fail(reason);
  auto device = CudaDevice::create({});
  if (!device)
    return fail(llvm::toString(device.takeError()));
  if (bandwidth)
    return deviceCopyBandwidth(**device);
  auto ops = createCudaDeviceOps(**device, helm::kernels::cudaKernelImage());
  if (!ops)
    return fail(llvm::toString(ops.takeError()));
  std::printf("%s\n", (*device)->describe().c_str());

  // Llama-2-7B's attention projection and FFN down projection (K = 11008 is 43 super-blocks).
  const Shape shapes[] = {{"4096x4096", 4096, 4096}, {"11008->4096", 11008, 4096}};
  const int64_t rowsOfX[] = {1, 8, 512};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);

  std::vector<void *> buffers;
  auto upload = [&](const void *host, size_t bytes) -> void * {
    auto p = (*device)->allocate(bytes, "bench data");
    if (!p) {
      std::fprintf(stderr, "%s\n", llvm::toString(p.takeError()).c_str());
      return nullptr;
    }
    buffers.push_back(*p);
    if (llvm::Error e = (*device)->copyToDevice(*p, host, bytes, Stream::compute, false)) {
      std::fprintf(stderr, "%s\n", llvm::toString(std::move(e)).c_str());
      return nullptr;
    }
    return *p;
  };

  std::printf("%-12s %-6s %5s %12s %16s %10s %8s\n", "matrix", "weight", "m", "us/call",
              "range us", "GB/s", "TFLOP/s");
  for (const Shape &shape : shapes) {
    const int64_t k = shape.k, n = shape.n, maxM = 512;
    std::vector<float> xs(size_t(maxM * k));
    for (float &v : xs)
      v = uniform(rng);
    std::vector<char> x16(xs.size() * 2);
    for (size_t i = 0; i < xs.size(); ++i)
      helm::kernels::storeAs(x16.data(), DType::f16, int64_t(i), xs[i]);
    void *x = upload(x16.data(), x16.size());
    void *y = upload(std::vector<char>(size_t(maxM * n * 4)).data(), size_t(maxM * n * 4));
    std::vector<float> row(static_cast<size_t>(k));

    struct Weight {
      std::string name;
      const void *data;
      int64_t bytes;
      int32_t blockCode; // -1: an element dtype
      DType dtype;
    };
    std::vector<Weight> weights;
    for (DType dtype : {DType::f16, DType::bf16}) {
      std::vector<char> w(size_t(k * n * 2));
      for (int64_t i = 0; i < k * n; ++i)
        helm::kernels::storeAs(w.data(), dtype, i, uniform(rng) * 0.05f);
      weights.push_back({dtype == DType::f16 ? "f16" : "bf16", upload(w.data(), w.size()),
                         int64_t(w.size()), -1, dtype});
    }
    for (const helm::quant::BlockFormatInfo &info : helm::quant::allBlockFormats()) {
      const int64_t rowBytes = *helm::quant::rowBytes(info.format, k);
      std::vector<char> w(size_t(n * rowBytes));
      for (int64_t r = 0; r < n; ++r) {
        for (float &v : row)
          v = uniform(rng) * 0.05f;
        if (!helm::quant::quantizeRow(info.format, row.data(), k,
                                      reinterpret_cast<uint8_t *>(w.data()) + r * rowBytes)
                 .ok())
          return fail("quantizeRow failed");
      }
      int32_t code = -1;
      for (int32_t c = 0; c < 64 && code < 0; ++c)
        if (helm::quant::blockFormatOfDtype(c) == info.format)
          code = c;
      weights.push_back({std::string(info.name), upload(w.data(), w.size()), int64_t(w.size()),
                         code, DType::f16});
    }
    for (const Weight &w : weights) {
      if (!w.data || !x || !y)
        return fail("out of device memory");
      for (int64_t m : rowsOfX) {
        if (decodeOnly && m > 8)
          continue;
        auto call = [&]() -> llvm::Error {
          if (w.blockCode < 0)
            return (*ops)->linear(x, DType::f16, w.data, w.dtype, /*transposed=*/true, nullptr, y,
                                  DType::f16, m, k, n);
          return (*ops)->linearBlocks(x, DType::f16, w.data, w.blockCode, nullptr, y, DType::f16,
                                      m, k, n);
        };
        std::vector<double> us;
        for (int r = 0; r < repeats + 2; ++r) {
          auto start = std::chrono::steady_clock::now();
          llvm::Error e = call();
          if (!e)
            e = (*ops)->synchronize();
          if (e)
            return fail(w.name + ": " + llvm::toString(std::move(e)));
          double elapsed = std::chrono::duration<double, std::micro>(
                               std::chrono::steady_clock::now() - start)
                               .count();
          if (r >= 2) // two warm-up calls (lazy kernel loading, cuBLAS heuristics, scratch)
            us.push_back(elapsed);
        }
        std::sort(us.begin(), us.end());
        const double median = us[us.size() / 2];
        const double gbs = double(w.bytes) / (median * 1e3);
        char tflops[32] = "";
        if (m > 8)
          std::snprintf(tflops, sizeof tflops, "%.1f", 2.0 * double(m * k * n) / (median * 1e6));
        char range[48];
        std::snprintf(range, sizeof range, "%.1f-%.1f", us.front(), us.back());
        std::printf("%-12s %-6s %5lld %12.1f %16s %10.0f %8s\n", shape.name, w.name.c_str(),
                    static_cast<long long>(m), median, range, gbs, tflops);
      }
    }
    for (void *p : buffers)
      (*device)->free(p);
    buffers.clear();
  }
  return 0;
}
