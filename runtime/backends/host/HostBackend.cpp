//===- HostBackend.cpp - the cpu and emu devices in the backend registry --------------===//
#include "runtime/backends/host/HostBackend.h"

#include "runtime/device/Backend.h"

namespace helm::rt {

namespace {
llvm::Expected<StageBackend> withHostOps(std::unique_ptr<Device> device, bool deviceOps) {
  StageBackend backend;
  backend.device = std::move(device);
  if (deviceOps)
    backend.ops = createHostDeviceOps();
  return backend;
}

llvm::Expected<StageBackend> createCpuBackend(const BackendOptions &options, KernelImageSource) {
  return withHostOps(createCpuDevice(), options.deviceOps);
}

/// The emulated GPU: an arena of the memory the run allows (--gpu-memory), else the target's VRAM
/// less its reserve, behind the target's link.
llvm::Expected<StageBackend> createEmuBackend(const BackendOptions &options, KernelImageSource) {
  EmuOptions emu;
  emu.targetName = options.targetName;
  emu.arenaBytes = options.memoryBytes ? options.memoryBytes : options.vramBytes - options.reservedBytes;
  emu.linkGbs = options.linkGbs;
  emu.linkLatencyUs = options.linkLatencyUs;
  emu.throttle = options.throttleLink;
  auto device = createEmuDevice(emu);
  if (!device)
    return device.takeError();
  return withHostOps(std::move(*device), options.deviceOps);
}
} // namespace

void registerHostBackend() {
  registerBackend({HELM_DEVICE_CPU, "the CPU", /*unavailable=*/nullptr, createCpuBackend});
  registerBackend({HELM_DEVICE_EMU, "the emulated GPU", /*unavailable=*/nullptr, createEmuBackend});
}

} // namespace helm::rt
