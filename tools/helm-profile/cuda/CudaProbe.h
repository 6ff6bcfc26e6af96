//===- CudaProbe.h - GPU and link measurements for helm-profile ------------------===//
#ifndef HELM_TOOLS_HELMPROFILE_CUDAPROBE_H
#define HELM_TOOLS_HELMPROFILE_CUDAPROBE_H

#include <string>

namespace helm {

struct CudaMeasurement {
  bool ok = false;
  std::string message;            // why not, when !ok
  std::string name;
  double vramBytes = 0;
  double memBwGbs = 0;            // device-to-device copy bandwidth (read + write)
  double gemmGflops = 0;          // cuBLAS (128, H) x (H, H) in fp16 with fp32 accumulation
  double gemvGflops = 0;          // cuBLAS (1, H) x (H, H)
  double h2dGbs = 0, d2hGbs = 0;  // pinned host memory, 256 MiB copies
  double latencyUs = 0;           // 4-byte pinned H2D round trip
};

/// Measures the first CUDA device; `ok` is false (with a reason) without CUDA or a device.
CudaMeasurement measureCuda(int hidden);

} // namespace helm

#endif
