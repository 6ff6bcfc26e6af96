//===- Cublas.cpp - dlopen of cuBLAS ----------------------------------------------------===//
#include "runtime/backends/cuda/Cublas.h"

#include <dlfcn.h>

#include <atomic>
#include <string>
#include <type_traits>
#include <vector>

// The symbol <cublas_v2.h> maps a name to (cublasCreate -> cublasCreate_v2): expanded first.
#define HELM_CUBLAS_NAME_(x) #x
#define HELM_CUBLAS_NAME(x) HELM_CUBLAS_NAME_(x)

// cuBLAS's soname carries the major version of the headers (libcublas.so.13 for CUDA 13).
#define HELM_CUBLAS_SONAME "libcublas.so." HELM_CUBLAS_NAME(CUBLAS_VER_MAJOR)

namespace helm::rt {
namespace {

std::atomic<bool> loaded{false};

struct Loaded {
  CublasApi api;
  std::string error; // empty: api is usable
};

Loaded load() {
  Loaded result;
  std::vector<std::string> candidates = {HELM_CUBLAS_SONAME};
  // The library directory of the toolkit helm-rt was built with (CudaDevice.cmake).
#ifdef HELM_CUBLAS_DIR
  candidates.push_back(std::string(HELM_CUBLAS_DIR) + "/" + HELM_CUBLAS_SONAME);
#endif
  candidates.push_back(std::string("/usr/local/cuda/lib64/") + HELM_CUBLAS_SONAME);
  void *handle = nullptr;
  std::string tried;
  for (const std::string &name : candidates) {
    // RTLD_LOCAL: cuBLAS's symbols serve only the pointers below.
    handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      result.api.library = name;
      break;
    }
    const char *why = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(why ? why : name);
  }
  if (!handle) {
    result.error = "cuBLAS (" + std::string(HELM_CUBLAS_SONAME) +
                   ") cannot be loaded: " + tried +
                   " (install the CUDA toolkit's cuBLAS or add its directory to LD_LIBRARY_PATH)";
    return result;
  }
  // Never unloaded: cuBLAS handles may live until exit.
  bool complete = true;
  auto bind = [&](auto &slot, const char *symbol) {
    if (!complete)
      return;
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(handle, symbol));
    if (!slot) {
      complete = false;
      result.error = result.api.library + " lacks " + symbol + " (a cuBLAS older than the headers helm-rt was built with?)";
    }
  };
  CublasApi &api = result.api;
  bind(api.create, HELM_CUBLAS_NAME(cublasCreate));
  bind(api.destroy, HELM_CUBLAS_NAME(cublasDestroy));
  bind(api.setStream, HELM_CUBLAS_NAME(cublasSetStream));
  bind(api.getStream, HELM_CUBLAS_NAME(cublasGetStream));
  bind(api.gemmEx, HELM_CUBLAS_NAME(cublasGemmEx));
  bind(api.sgemm, HELM_CUBLAS_NAME(cublasSgemm));
  bind(api.sgemv, HELM_CUBLAS_NAME(cublasSgemv));
  bind(api.statusString, HELM_CUBLAS_NAME(cublasGetStatusString));
  bind(api.getProperty, HELM_CUBLAS_NAME(cublasGetProperty));
  loaded.store(true, std::memory_order_release);
  return result;
}

} // namespace

llvm::Expected<const CublasApi &> cublasApi() {
  static const Loaded once = load();
  if (!once.error.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), once.error);
  return once.api;
}

bool cublasLoaded() { return loaded.load(std::memory_order_acquire); }

} // namespace helm::rt
