//===- CudaDevice.h - the CUDA device's own API: modules, kernel launch, cuBLAS ------===//
//
// CudaDevice is the `cuda` Device (Device.h) plus what only a real GPU has: loading GPU code (a
// package's fatbin/cubin/PTX section, or kernels/cuda's cudaKernelImage()), launching its kernels
// on the device's streams, and a cuBLAS handle bound to the compute stream.
//
// This header needs no CUDA header: the CUDA handle types are declared opaquely below, exactly as
// the CUDA headers declare them (cudaStream_t is `CUstream_st *`, cudaLibrary_t `CUlib_st *`,
// cudaKernel_t `CUkern_st *`, cublasHandle_t `cublasContext *`), so code that includes
// <cuda_runtime_api.h> or <cublas_v2.h> as well uses them interchangeably.
//
// Only built with HELM_HAVE_CUDA; check cudaAvailable() before creating one.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_BACKENDS_CUDA_CUDADEVICE_H
#define HELM_RUNTIME_BACKENDS_CUDA_CUDADEVICE_H

#include "runtime/device/Device.h"

#include <cstdint>
#include <memory>
#include <string>

struct CUstream_st;
struct CUlib_st;
struct CUkern_st;
struct cublasContext;

namespace helm::rt {

class DeviceOps;

/// Whether this build has the CUDA device and a GPU is present; `reason` says why not.
bool cudaAvailable(std::string *reason = nullptr);
struct CudaOptions {
  int ordinal = 0;
  uint64_t budgetBytes = 0; // 0: free memory reported by the driver minus reserveBytes
  uint64_t reserveBytes = 0;
};
/// The CUDA device as a Device; an error saying so without a GPU.
llvm::Expected<std::unique_ptr<Device>> createCudaDevice(const CudaOptions &options);

/// A launch grid or block shape.
struct CudaDim {
  uint32_t x = 1, y = 1, z = 1;
};

class CudaDevice : public Device {
public:
  /// A loaded module (a cudaLibrary_t); unloaded by unloadModule or with the device.
  using Module = CUlib_st *;
  /// A kernel of a module (a cudaKernel_t); valid while its module is loaded.
  using Function = CUkern_st *;

  /// The GPU `options.ordinal`; an error when there is none (see cudaAvailable). The budget is
  /// options.budgetBytes, or the free memory the driver reports now minus options.reserveBytes.
  static llvm::Expected<std::unique_ptr<CudaDevice>> create(const CudaOptions &options);
  ~CudaDevice() override;

  /// The CUDA device ordinal this device runs on.
  virtual int ordinal() const = 0;

  /// Loads GPU code: a fatbin, a cubin or PTX text (with or without a terminating NUL). The
  /// image is copied, so it need not outlive the call. The module is loaded onto the GPU at once
  /// (not lazily), so a bad or truncated image, or one with no code for this GPU, is an error
  /// here (naming the loader's complaint, and the first line of the JIT log for PTX).
  virtual llvm::Expected<Module> loadModule(llvm::ArrayRef<char> image) = 0;
  /// Unloads a module from loadModule (its Functions become invalid); nullptr is ignored.
  virtual void unloadModule(Module module) = 0;
  /// The kernel `name` (its extern "C" name) of `module`.
  virtual llvm::Expected<Function> getFunction(Module module, llvm::StringRef name) = 0;
  /// Enqueues `fn` on `stream`. `args` holds one pointer per kernel parameter, each to the
  /// parameter's value (as cudaLaunchKernel takes them); a wrong number of arguments is an error
  /// where the driver can tell. Dynamic shared memory above 48 KiB is opted into as needed.
  /// Errors from the kernel's execution surface at the next synchronization.
  virtual llvm::Error launchKernel(Function fn, CudaDim grid, CudaDim block,
                                   llvm::ArrayRef<void *> args, uint32_t sharedBytes = 0,
                                   Stream stream = Stream::compute) = 0;

  /// cuBLAS, bound to the compute stream (pointer mode host, default math mode). Owned by the
  /// device; do not rebind its stream. Its workspace is not counted in the device's budget.
  virtual cublasContext *cublas() const = 0;
  /// The cudaStream_t behind `stream`.
  virtual CUstream_st *cudaStream(Stream stream) const = 0;
};

/// Operations on a CUDA device: loads the kernels' fatbin (`kernelImage`, normally the package's
/// GPU-kernels section) into `device`.
llvm::Expected<std::unique_ptr<DeviceOps>> createCudaDeviceOps(CudaDevice &device, llvm::ArrayRef<char> kernelImage);

} // namespace helm::rt

#endif
