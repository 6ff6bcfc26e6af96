//===- StageContext.h - what the opaque `ctx` of a generated stage points to -------===//
#ifndef HELM_RUNTIME_ABI_STAGECONTEXT_H
#define HELM_RUNTIME_ABI_STAGECONTEXT_H

#include "runtime/kv/KvCache.h"

#include <string>

#include <cstdint>

namespace helm::rt {

class DeviceOps;

struct StageContext {
  const void *const *weights = nullptr; // by tensor id
  int64_t numWeights = 0;
  KvCache *kv = nullptr;
  const int32_t *sequence = nullptr; // KV slot of each batch row
  const int64_t *past = nullptr;     // tokens already cached for each batch row
  /// Set by an ABI function that refused its call (the stage's code and the package's manifest
  /// disagree); the call's outputs are then undefined and the runtime reports the message.
  const char *error = nullptr;
  /// The device kernels of a kernel-form device stage (helm_dev_*); null for host-code stages.
  DeviceOps *ops = nullptr;
  /// Holds `error`'s text when it is not a literal.
  std::string errorStorage;
};

/// Addresses of the ABI functions the runtime exports to stage code (keeps them linked in):
/// helm_k_linear, helm_rt_* (RuntimeServices.cpp) and the stage buffer allocators.
const void *const *stageAbiSymbols();
/// Addresses of the device-kernel ABI functions (helm_dev_*, DeviceCalls.cpp).
const void *const *deviceAbiSymbols();

} // namespace helm::rt

#endif
