//===- Backends.cpp - every backend this build has, registered on first use ----------===//
//
// The one list of backends (IREE's HAL keeps its drivers' list the same way): the device layer
// (runtime/device/Backend.cpp) calls registerAvailableBackends before its first lookup and knows
// none of them. A new backend adds its registration call here and its folder beside these.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaBackend.h"
#include "runtime/backends/host/HostBackend.h"
#include "runtime/device/Backend.h"

namespace helm::rt {

void registerAvailableBackends() {
  registerHostBackend();
  registerCudaBackend();
}

} // namespace helm::rt
