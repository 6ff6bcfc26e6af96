//===- Cublas.h - cuBLAS, loaded when the first CUDA device is created ------------------===//
//
// helm-rt links the CUDA runtime statically but not cuBLAS: libcublas and the libcublasLt it
// pulls in cost about 220 MB of resident memory and 60 ms at every start (their relocations and
// static initialisers), which a run on the CPU alone, the common case, never uses. They are
// loaded with dlopen by the first CudaDevice::create instead, and every call goes through the
// function pointers of CublasApi. The declarations, types and constants still come from the
// toolkit's <cublas_v2.h>, so each pointer has exactly the library function's type.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_BACKENDS_CUDA_CUBLAS_H
#define HELM_RUNTIME_BACKENDS_CUDA_CUBLAS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cublas_v2.h>

#include <string>
#include <vector>

namespace helm::rt {

/// The cuBLAS functions HELM calls (the _v2 entry points that <cublas_v2.h> names).
struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) setStream = nullptr;
  decltype(&cublasGetStream_v2) getStream = nullptr;
  // C++ sees a second cublasGemmEx (an inline wrapper taking a cudaDataType compute type): the
  // library's own is this one.
  cublasStatus_t (*gemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                           const void *, const void *, cudaDataType, int, const void *,
                           cudaDataType, int, const void *, void *, cudaDataType, int,
                           cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasSgemv_v2) sgemv = nullptr;
  decltype(&cublasGetStatusString) statusString = nullptr;
  decltype(&cublasGetProperty) getProperty = nullptr;
  /// The file dlopen loaded (its name as given, or a path).
  std::string library;
};

/// The process's cuBLAS, loaded on the first call (thread-safe; later calls return the same
/// table or the same error). Tried in order: the soname of the toolkit helm-rt was built with
/// (the dynamic loader's search: LD_LIBRARY_PATH, the executable's run path, the system's
/// cache), then that toolkit's library directory, then /usr/local/cuda/lib64. The error is one
/// line naming what was tried and why it failed, or the missing function.
llvm::Expected<const CublasApi &> cublasApi();

/// Where cublasApi() looks, in order.
std::vector<std::string> defaultCublasCandidates();

/// A fresh load from the first of `candidates` that dlopen takes (cublasApi() loads once with the
/// default candidates; this is its uncached step, for tests of the errors).
llvm::Expected<CublasApi> loadCublas(llvm::ArrayRef<std::string> candidates);

} // namespace helm::rt

#endif
