//===- RuntimeServices.cpp - the runtime services host stage code calls (helm_rt_*) --===//
//
// The runtime's definitions of contract/helm_contract.h's helm_rt_* functions (included below, so
// the compiler checks each definition against its declaration). helm_rt_weight hands out the
// stage's weights by tensor id; helm_rt_attention checks the call against the package's KV
// geometry, then appends the call's keys and values to the KV cache (widened to f32) and runs the
// attention kernel over the spans the cache keeps each sequence's rows in (appendAndAttend,
// runtime/kv/HostAttention.cpp). The streaming (online-softmax) form is the paged cache's work.
//
//===----------------------------------------------------------------------===//
#include "contract/helm_contract.h"

#include "kernels/common/Numeric.h"
#include "runtime/abi/StageContext.h"
#include "runtime/device/StageMemory.h"
#include "runtime/kv/HostAttention.h"

#include <cmath>

using namespace helm::kernels;
using helm::rt::StageContext;

namespace {
/// A zeroed tensor the size of any weight is not available, so a refused weight fetch hands out
/// this block; the stage's result is discarded anyway because the context records the refusal.
alignas(64) const char kNoWeight[64] = {};
} // namespace

extern "C" const void *helm_rt_weight(void *ctx, int64_t id) {
  auto *c = static_cast<StageContext *>(ctx);
  if (id < 0 || id >= c->numWeights) {
    c->refuse(HELM_STATUS_WEIGHT_ID, "the stage asks for a weight id outside the package's tensor table");
    return kNoWeight;
  }
  return c->weights[id];
}

extern "C" void helm_rt_attention(void *ctx, int64_t layer, const void *q, const void *k,
                                  const void *v, void *out, int32_t dtype, int64_t B, int64_t S,
                                  int64_t heads, int64_t kvHeads, int64_t headDim, float scale,
                                  int64_t window) {
  helm_rt_attention_capped(ctx, layer, q, k, v, out, dtype, B, S, heads, kvHeads, headDim, scale, window, 0.0f);
}

extern "C" void helm_rt_attention_capped(void *ctx, int64_t layer, const void *q, const void *k,
                                         const void *v, void *out, int32_t dtype, int64_t B, int64_t S,
                                         int64_t heads, int64_t kvHeads, int64_t headDim, float scale,
                                         int64_t window, float softcap) {
  auto *c = static_cast<StageContext *>(ctx);
  if (!isDType(dtype) || B < 0 || S < 0 || heads <= 0) {
    c->refuse(HELM_STATUS_BAD_ARGUMENT, "the stage's attention call has a bad dtype code or size");
    return;
  }
  if (!(softcap >= 0.0f) || !std::isfinite(softcap)) {
    c->refuse(HELM_STATUS_BAD_ARGUMENT, "the stage's attention call has a bad soft cap");
    return;
  }
  int64_t kvWidth = kvHeads * headDim;
  // The cache was sized from the manifest; code that disagrees must not write past it.
  if (layer < 0 || layer >= c->kv->layers() || kvWidth != c->kv->rowWidth() || kvHeads <= 0 ||
      heads % kvHeads != 0) {
    c->refuse(HELM_STATUS_KV_GEOMETRY, "the stage's attention does not match the package's KV "
                                       "geometry (kv.layers, kv.kv_heads, kv.head_dim)");
    return;
  }
  if (const char *error = helm::rt::appendAndAttend(*c->kv, c->sequence, c->past, layer, q, k, v,
                                                    out, DType(dtype), B, S, heads, kvHeads,
                                                    headDim, scale, window, softcap))
    c->refuse(HELM_STATUS_KV_STORE, error);
}

namespace helm::rt {
const void *const *stageAbiSymbols() {
  static const void *const symbols[] = {reinterpret_cast<const void *>(&helm_k_linear),
                                        reinterpret_cast<const void *>(&helm_k_embed_blocks),
                                        reinterpret_cast<const void *>(&helm_rt_weight),
                                        reinterpret_cast<const void *>(&helm_rt_attention),
                                        reinterpret_cast<const void *>(&helm_rt_attention_capped),
                                        reinterpret_cast<const void *>(&_mlir_memref_to_llvm_alloc),
                                        reinterpret_cast<const void *>(&_mlir_memref_to_llvm_aligned_alloc),
                                        reinterpret_cast<const void *>(&_mlir_memref_to_llvm_free),
                                        nullptr};
  return symbols;
}
} // namespace helm::rt
