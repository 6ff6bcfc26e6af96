//===- Backend.cpp - the registry of backends: DeviceKind -> a stage's device and ops --===//
#include "runtime/device/Backend.h"

#include "contract/manifest_schema.h"

#include <map>
#include <mutex>

namespace helm::rt {

namespace {
std::map<DeviceKind, BackendFactory> &registry() {
  static std::map<DeviceKind, BackendFactory> backends;
  return backends;
}

/// True while the build's own backends register: they do not replace a backend registered
/// before the first lookup (a test's, say).
bool registeringBuiltIns = false;

/// The registered backend of `kind`, the build's backends registered first; nullptr if none.
const BackendFactory *findBackend(DeviceKind kind) {
  static std::once_flag registered;
  std::call_once(registered, [] {
    registeringBuiltIns = true;
    registerAvailableBackends();
    registeringBuiltIns = false;
  });
  auto it = registry().find(kind);
  return it == registry().end() ? nullptr : &it->second;
}

/// The backend's reason, or (for a kind no backend can create) that this build has none for it.
std::optional<std::string> unavailableReason(DeviceKind kind) {
  const BackendFactory *backend = findBackend(kind);
  std::optional<std::string> reason = backend && backend->unavailable ? backend->unavailable() : std::nullopt;
  if (!reason && (!backend || !backend->create))
    reason = "this build of HELM has no " + deviceKindName(kind).str() + " backend";
  return reason;
}
} // namespace

void registerBackend(const BackendFactory &backend) {
  if (registeringBuiltIns)
    registry().emplace(backend.kind, backend);
  else
    registry()[backend.kind] = backend;
}

std::optional<DeviceKind> parseTargetDevice(llvm::StringRef name) {
  // A GPU stage runs on one of these; "cpu" is no GPU stage's device.
  for (DeviceKind kind : {HELM_DEVICE_EMU, HELM_DEVICE_CUDA})
    if (name == deviceKindName(kind))
      return kind;
  return std::nullopt;
}

std::optional<std::string> missingDevice(DeviceKind kind, llvm::StringRef targetName) {
  std::optional<std::string> reason = unavailableReason(kind);
  if (!reason)
    return std::nullopt;
  // Only a GPU stage's device can be missing: the host devices are always there.
  const BackendFactory *backend = findBackend(kind);
  std::string label = backend ? backend->label : std::string(deviceKindName(kind));
  return "the package's GPU stage runs on " + label + " ('" + targetName.str() + "'), and there is none here: " +
         *reason + " (compile with --target=emu:<name> to run it on the emulated GPU)";
}

llvm::Expected<StageBackend> createStageBackend(DeviceKind kind, const BackendOptions &options,
                                                KernelImageSource kernels) {
  if (std::optional<std::string> missing = missingDevice(kind, options.targetName))
    return llvm::createStringError(llvm::inconvertibleErrorCode(), *missing);
  return findBackend(kind)->create(options, kernels);
}

} // namespace helm::rt
