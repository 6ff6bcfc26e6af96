//===- Backend.h - the registry of backends: a stage's device and its device ops -----===//
//
// A stage runs on a backend: a Device (memory, copies, streams) and, for a kernel-form device
// stage (code format "device-calls"), the DeviceOps its helm_dev_* calls go to. Backends register
// themselves here, one factory per device kind (runtime/backends: host registers cpu and emu,
// cuda registers cuda); this layer includes none of them. createStageBackend is the only place
// that maps a DeviceKind to a backend, and parseTargetDevice the only place that reads a device
// name from a manifest.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_DEVICE_BACKEND_H
#define HELM_RUNTIME_DEVICE_BACKEND_H

#include "runtime/device/Device.h"
#include "runtime/device/DeviceOps.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <optional>
#include <string>

namespace helm::rt {

/// The device a package's `target.device` names for its GPU stage: HELM_MANIFEST_DEVICE_EMU or
/// HELM_MANIFEST_DEVICE_CUDA (contract/manifest_schema.h); nullopt for anything else.
std::optional<DeviceKind> parseTargetDevice(llvm::StringRef name);

/// Why a device of `kind` cannot be created on this machine, without creating one (its backend's
/// reason: cuda: this build has no CUDA support, or there is no GPU; the message createStageBackend
/// gives); nullopt when nothing rules it out. `targetName` names the package's target in the
/// message.
std::optional<std::string> missingDevice(DeviceKind kind, llvm::StringRef targetName);

/// What the backend of a stage is made from: the package's target and the run's options. Each
/// backend takes what concerns it.
struct BackendOptions {
  /// The plan's target (the catalogue name or profile), for messages.
  std::string targetName;
  /// The target GPU's memory and the part of it the plan keeps free.
  uint64_t vramBytes = 0, reservedBytes = 0;
  /// Device memory the run allows the stage (--gpu-memory); 0: the backend's own rule.
  uint64_t memoryBytes = 0;
  /// The target's link, and whether copies across it take its time (--emu-throttle).
  double linkGbs = 16, linkLatencyUs = 10;
  bool throttleLink = false;
  /// The stage is kernel form: create the device's DeviceOps too.
  bool deviceOps = false;
};

/// A stage's device and, when asked for, its device ops (which must go before the device).
struct StageBackend {
  std::unique_ptr<Device> device;
  std::unique_ptr<DeviceOps> ops;
};

/// Where a kernel-form CUDA stage's GPU kernels come from (the package's GPU-kernels section);
/// asked only after the device exists, and only for cuda with `deviceOps`.
using KernelImageSource = llvm::function_ref<llvm::Expected<llvm::ArrayRef<char>>()>;

/// A backend as it registers itself.
struct BackendFactory {
  DeviceKind kind;
  /// The device in messages: "a CUDA GPU".
  const char *label;
  /// Why no device of this kind can be made on this machine, without making one (nullptr or
  /// nullopt: nothing rules it out).
  std::optional<std::string> (*unavailable)() = nullptr;
  /// Makes the stage's device (and its ops when options.deviceOps). nullptr: this build cannot.
  llvm::Expected<StageBackend> (*create)(const BackendOptions &options, KernelImageSource kernels) = nullptr;
};

/// Adds a backend; a later one for the same kind replaces the earlier (except that the build's own,
/// registered at the first lookup, leave one registered before them in place).
void registerBackend(const BackendFactory &backend);

/// Registers every backend of this build (runtime/backends/Backends.cpp: the list). The registry
/// calls it once, before its first lookup.
void registerAvailableBackends();

/// Creates the backend of `kind` for a stage. Errors (one line each): for cuda, that this build
/// has no CUDA support or that there is no GPU ("the package's GPU stage runs on a CUDA GPU
/// ('<target>'), and there is none here: <reason> (compile with --target=emu:<name> to run it on
/// the emulated GPU)"); the device's own failure (the emu arena cannot be reserved, the GPU cannot
/// be initialised); the kernel image's, or its loader's, failure.
llvm::Expected<StageBackend> createStageBackend(DeviceKind kind, const BackendOptions &options,
                                                KernelImageSource cudaKernels = nullptr);

} // namespace helm::rt

#endif
