//===- StageContext.h - what the opaque `ctx` of a generated stage points to -------===//
#ifndef HELM_RUNTIME_ABI_STAGECONTEXT_H
#define HELM_RUNTIME_ABI_STAGECONTEXT_H

#include "contract/helm_contract.h"
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
  /// The device kernels of a kernel-form device stage (helm_dev_*); null for host-code stages.
  DeviceOps *ops = nullptr;
  /// Set by a contract function that refused its call (the stage's code and the package's
  /// manifest disagree, or the device failed): the first refusal of a stage run, with its message.
  /// The call's outputs are then undefined and the runtime reports the message.
  helm_status status = HELM_STATUS_OK;
  std::string message;

  bool failed() const { return status != HELM_STATUS_OK; }
  /// Records a refusal unless one is recorded already (the first one explains the rest).
  void refuse(helm_status why, std::string text) {
    if (failed())
      return;
    status = why;
    message = std::move(text);
  }
};

/// Addresses of the ABI functions the runtime exports to stage code (keeps them linked in):
/// helm_k_linear, helm_rt_* (RuntimeServices.cpp) and the stage buffer allocators.
const void *const *stageAbiSymbols();
/// Addresses of the device-kernel ABI functions (helm_dev_*, DeviceCalls.cpp).
const void *const *deviceAbiSymbols();

} // namespace helm::rt

#endif
