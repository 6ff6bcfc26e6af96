//===- helm_kernels.h - the C ABI between generated stage code and the runtime ---===//
//
// Generated CPU stages (compiler/codegen) call these symbols; helm-rt defines them and exports
// them to the stage's shared object when it loads it. Pointers are to contiguous row-major
// buffers; nothing is retained after a call returns.
//
// Element type codes: 0 = f32, 1 = f16, 2 = bf16.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_KERNELS_CPU_HELM_KERNELS_H
#define HELM_KERNELS_CPU_HELM_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// y[M, N] = x[M, K] · W, with W stored [K, N], or [N, K] when `w_transposed` (Hugging Face layout).
/// Accumulates in f32; y is rounded to its element type once.
void helm_k_linear(const void *x, int32_t x_dtype, const void *w, int32_t w_dtype,
                   int32_t w_transposed, void *y, int32_t y_dtype, int64_t M, int64_t K,
                   int64_t N);

/// Address of weight `id` of the package's tensor table (runtime; `ctx` is the stage context).
const void *helm_rt_weight(void *ctx, int64_t id);

/// Causal grouped-query attention for one layer: appends the S new keys/values of every batch row
/// to the runtime's KV cache, then attends. q: [B, S, heads*head_dim]; k, v: [B, S,
/// kv_heads*head_dim]; out like q. `window` > 0 limits keys to the last `window` positions.
void helm_rt_attention(void *ctx, int64_t layer, const void *q, const void *k, const void *v,
                       void *out, int32_t dtype, int64_t B, int64_t S, int64_t heads,
                       int64_t kv_heads, int64_t head_dim, float scale, int64_t window);

#ifdef __cplusplus
}
#endif

#endif
