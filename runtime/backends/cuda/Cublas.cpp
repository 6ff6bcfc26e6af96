//===- Cublas.cpp - dlopen of cuBLAS ----------------------------------------------------===//
#include "runtime/backends/cuda/Cublas.h"

#include <dlfcn.h>

#include <string>
#include <type_traits>
#include <vector>

// The symbol <cublas_v2.h> maps a name to (cublasCreate -> cublasCreate_v2): expanded first.
#define HELM_CUBLAS_NAME_(x) #x
#define HELM_CUBLAS_NAME(x) HELM_CUBLAS_NAME_(x)

// cuBLAS's soname carries the major version of the headers (libcublas.so.13 for CUDA 13).
#define HELM_CUBLAS_SONAME "libcublas.so." HELM_CUBLAS_NAME(CUBLAS_VER_MAJOR)

namespace helm::rt {

std::vector<std::string> defaultCublasCandidates() {
  std::vector<std::string> candidates = {HELM_CUBLAS_SONAME};
  // The library directory of the toolkit helm-rt was built with (CudaDevice.cmake).
#ifdef HELM_CUBLAS_DIR
  candidates.push_back(std::string(HELM_CUBLAS_DIR) + "/" + HELM_CUBLAS_SONAME);
#endif
  candidates.push_back(std::string("/usr/local/cuda/lib64/") + HELM_CUBLAS_SONAME);
  return candidates;
}

llvm::Expected<CublasApi> loadCublas(llvm::ArrayRef<std::string> candidates) {
  auto failure = [](const std::string &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  CublasApi api;
  void *handle = nullptr;
  std::string tried;
  for (const std::string &name : candidates) {
    // RTLD_LOCAL: cuBLAS's symbols serve only the pointers below.
    handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      api.library = name;
      break;
    }
    const char *why = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(why ? why : name);
  }
  if (!handle)
    return failure("cuBLAS (" + std::string(HELM_CUBLAS_SONAME) + ") cannot be loaded: " + tried +
                   " (install the CUDA toolkit's cuBLAS or add its directory to LD_LIBRARY_PATH)");
  std::string missing;
  auto bind = [&](auto &slot, const char *symbol) {
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(handle, symbol));
    if (!slot && missing.empty())
      missing = symbol;
  };
  bind(api.create, HELM_CUBLAS_NAME(cublasCreate));
  bind(api.destroy, HELM_CUBLAS_NAME(cublasDestroy));
  bind(api.setStream, HELM_CUBLAS_NAME(cublasSetStream));
  bind(api.getStream, HELM_CUBLAS_NAME(cublasGetStream));
  bind(api.gemmEx, HELM_CUBLAS_NAME(cublasGemmEx));
  bind(api.sgemm, HELM_CUBLAS_NAME(cublasSgemm));
  bind(api.sgemv, HELM_CUBLAS_NAME(cublasSgemv));
  bind(api.statusString, HELM_CUBLAS_NAME(cublasGetStatusString));
  bind(api.getProperty, HELM_CUBLAS_NAME(cublasGetProperty));
  if (!missing.empty()) {
    dlclose(handle);
    return failure(api.library + " lacks " + missing +
                   " (not cuBLAS, or one older than the headers helm-rt was built with)");
  }
  // Kept loaded: cuBLAS handles may live until exit.
  return api;
}

llvm::Expected<const CublasApi &> cublasApi() {
  struct Once {
    CublasApi api;
    std::string error; // empty: api is usable
  };
  static const Once once = [] {
    Once result;
    if (auto api = loadCublas(defaultCublasCandidates())) {
      result.api = std::move(*api);
    } else {
      result.error = llvm::toString(api.takeError());
    }
    return result;
  }();
  if (!once.error.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), once.error);
  return once.api;
}

} // namespace helm::rt
