//===- StageContext.h - what the opaque `ctx` of a generated stage points to -------===//
#ifndef HELM_RUNTIME_CORE_STAGECONTEXT_H
#define HELM_RUNTIME_CORE_STAGECONTEXT_H

#include "runtime/core/KvCache.h"

#include <cstdint>

namespace helm::rt {

struct StageContext {
  const void *const *weights = nullptr; // by tensor id
  int64_t numWeights = 0;
  KvCache *kv = nullptr;
  const int32_t *sequence = nullptr; // KV slot of each batch row
  const int64_t *past = nullptr;     // tokens already cached for each batch row
  /// Set by an ABI function that refused its call (the stage's code and the package's manifest
  /// disagree); the call's outputs are then undefined and the runtime reports the message.
  const char *error = nullptr;
};

/// Addresses of the ABI functions the runtime exports to stage code (keeps them linked in).
const void *const *stageAbiSymbols();

} // namespace helm::rt

#endif
