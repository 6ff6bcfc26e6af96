//===- HostAttention.h - attention over a KV cache in host-addressable memory ------===//
#ifndef HELM_RUNTIME_KV_HOSTATTENTION_H
#define HELM_RUNTIME_KV_HOSTATTENTION_H

#include "kernels/common/Numeric.h"
#include "runtime/kv/KvCache.h"

#include <cstdint>

namespace helm::rt {

/// Appends the S new keys and values of each of the B rows (q, k, v, out: [B, S, width] in `dt`)
/// to `kv` at positions past[b].. of sequence sequence[b], then runs the CPU attention kernel over
/// the cache's spans. The arguments are checked by the caller. Returns null, or the cache's
/// one-line error when it could not grow. `softcap` > 0 caps the scores (AttentionProblem).
const char *appendAndAttend(KvCache &kv, const int32_t *sequence, const int64_t *past,
                            int64_t layer, const void *q, const void *k, const void *v, void *out,
                            kernels::DType dt, int64_t B, int64_t S, int64_t heads,
                            int64_t kvHeads, int64_t headDim, float scale, int64_t window,
                            float softcap = 0.0f);

} // namespace helm::rt

#endif
