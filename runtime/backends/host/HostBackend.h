//===- HostBackend.h - the host backend: the cpu and emu devices, host device ops ----===//
//
// Stages on the host: the cpu device (Device.h) and the emulated GPU (EmuDevice.cpp), both served
// by HostDeviceOps, which compute a kernel-form stage's ops on host memory with the CPU stage's
// arithmetic. registerHostBackend adds both kinds to the registry (Backend.h).
//
//===----------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_BACKENDS_HOST_HOSTBACKEND_H
#define HELM_RUNTIME_BACKENDS_HOST_HOSTBACKEND_H

#include "runtime/device/Device.h"
#include "runtime/device/DeviceOps.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <string>

namespace helm::rt {

struct EmuOptions {
  std::string targetName;     // the catalogue name or profile the plan was made for
  uint64_t arenaBytes = 0;    // VRAM - reserve
  double linkGbs = 16;        // link bandwidth, GB/s (10^9 bytes)
  double linkLatencyUs = 10;  // per-transfer latency
  bool throttle = false;      // --emu-throttle: each copy takes latency + bytes / bandwidth
};
/// The emulated GPU. Fails (one line) when the arena cannot be reserved.
llvm::Expected<std::unique_ptr<Device>> createEmuDevice(const EmuOptions &options);

/// Operations on host memory (cpu and emu devices).
std::unique_ptr<DeviceOps> createHostDeviceOps();

/// Registers the cpu and emu backends.
void registerHostBackend();

} // namespace helm::rt

#endif
