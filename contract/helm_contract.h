/*===- helm_contract.h - the one contract between helmc's code and helm-rt -------===*
 *
 * Everything generated stage code and the runtime agree on, declared once, in C:
 *   - element type, stage-side and device-backend codes;
 *   - the stage entry points, their C signature and the exported ABI record;
 *   - helm_k_*   CPU kernels a host stage calls (kernels/cpu defines them);
 *   - helm_rt_*  runtime services a host stage calls (runtime/abi defines them);
 *   - helm_dev_* device-kernel calls a kernel-form device stage makes (runtime/abi forwards them
 *                to the stage device's ops).
 * The lowering (passes/codegen) spells no symbol by hand: it takes every name through
 * HELM_CONTRACT_SYMBOL, which does not compile for a name this header does not declare. The
 * manifest's keys and types are beside this file (manifest_schema.h).
 *
 * Pointers are to contiguous row-major buffers; nothing is retained after a call returns.
 * Calls report a failure as a helm_status code (with a message) in the stage context (the
 * runtime's StageContext): the first failure of a stage run wins, later device-kernel calls of
 * that run do nothing, and the runtime turns it into its error after the stage returns.
 *===----------------------------------------------------------------------------===*/
#ifndef HELM_CONTRACT_HELM_CONTRACT_H
#define HELM_CONTRACT_HELM_CONTRACT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types of every buffer that crosses the contract (the manifest spells them "f32",
 * "f16", "bf16"). */
enum helm_dtype { HELM_DTYPE_F32 = 0, HELM_DTYPE_F16 = 1, HELM_DTYPE_BF16 = 2 };

/* The plan's side of a stage (manifest stages[].device: "cpu", "gpu"). */
enum helm_stage_side { HELM_STAGE_CPU = 0, HELM_STAGE_GPU = 1 };

/* The device backend that runs a stage (manifest target.device for the GPU stage: "emu",
 * "cuda"; a CPU stage always runs on "cpu"). */
enum helm_device_kind { HELM_DEVICE_CPU = 0, HELM_DEVICE_EMU = 1, HELM_DEVICE_CUDA = 2 };

/* Why a contract call refused its work. */
enum helm_status {
  HELM_STATUS_OK = 0,
  HELM_STATUS_BAD_ARGUMENT = 1,      /* a dtype code or size no kernel takes */
  HELM_STATUS_WEIGHT_ID = 2,         /* a weight id outside the stage's tensor table */
  HELM_STATUS_KV_GEOMETRY = 3,       /* attention that disagrees with the package's KV geometry */
  HELM_STATUS_KV_STORE = 4,          /* the KV cache could not store the call's rows */
  HELM_STATUS_NO_DEVICE_KERNELS = 5, /* a device-kernel call on a device without kernels */
  HELM_STATUS_DEVICE = 6             /* a device operation or stage buffer allocation failed */
};

/* ---- Stage entry points ------------------------------------------------------------------ */

/* The stage functions helm-stage-split makes and every lowering keeps. */
#define HELM_CPU_STAGE_ENTRY "helm_cpu_stage"
#define HELM_GPU_STAGE_ENTRY "helm_gpu_stage"

/* A lowered stage: in is token ids [B, S] int64 (the first stage) or the boundary activation
 * [B, S, width]; out is logits [B, vocab] f32 (the last stage) or the boundary activation. */
typedef void (*helm_stage_fn)(void *ctx, const void *in, const int64_t *positions, void *out,
                              int64_t B, int64_t S);

/* Every stage exports `<entry>_abi`, an int64_t[HELM_STAGE_ABI_FIELDS] record of what its code
 * reads and writes through its raw pointers; the runtime checks it against the manifest. */
#define HELM_STAGE_ABI_SUFFIX "_abi"
enum helm_stage_abi_field {
  HELM_STAGE_ABI_VERSION = 0,        /* HELM_STAGE_ABI_RECORD_VERSION */
  HELM_STAGE_ABI_INPUT_WIDTH = 1,    /* 0: token ids, else the activation width */
  HELM_STAGE_ABI_OUTPUT_WIDTH = 2,   /* vocabulary (logits) or activation width */
  HELM_STAGE_ABI_ELEMENT_BYTES = 3,  /* bytes per activation element, 0 without one */
  HELM_STAGE_ABI_FIELDS = 4
};
#define HELM_STAGE_ABI_RECORD_VERSION 1

/* ---- CPU kernels (kernels/cpu) ----------------------------------------------------------- */

/* y[M, N] = x[M, K] . W, with W stored [K, N], or [N, K] when `w_transposed` (Hugging Face
 * layout). Accumulates in f32; y is rounded to its element type once. */
void helm_k_linear(const void *x, int32_t x_dtype, const void *w, int32_t w_dtype,
                   int32_t w_transposed, void *y, int32_t y_dtype, int64_t M, int64_t K,
                   int64_t N);

/* ---- Runtime services for host stage code ------------------------------------------------ */

/* Address of weight `id` of the stage's tensor table (manifest tensors[] of this stage). */
const void *helm_rt_weight(void *ctx, int64_t id);

/* Causal grouped-query attention for one layer: appends the S new keys/values of every batch row
 * to the stage's KV cache, then attends. q: [B, S, heads*head_dim]; k, v: [B, S,
 * kv_heads*head_dim]; out like q. `window` > 0 limits keys to the last `window` positions. */
void helm_rt_attention(void *ctx, int64_t layer, const void *q, const void *k, const void *v,
                       void *out, int32_t dtype, int64_t B, int64_t S, int64_t heads,
                       int64_t kv_heads, int64_t head_dim, float scale, int64_t window);

/* ---- Device-kernel calls of a kernel-form device stage ----------------------------------- */
/* Buffers are the stage device's memory; the arithmetic of each is the DeviceOps method of the
 * same name (runtime/device/DeviceOps.h). */

void helm_dev_embed(void *ctx, const int64_t *ids, const void *table, void *out, int32_t dtype,
                    int64_t rows, int64_t vocab, int64_t width);
void helm_dev_rms_norm(void *ctx, const void *x, const void *gamma, void *y, int32_t dtype,
                       int64_t groups, int64_t group, float eps);
void helm_dev_linear(void *ctx, const void *x, int32_t xdtype, const void *w, int32_t wdtype,
                     int32_t transposed, const void *bias, void *y, int32_t ydtype, int64_t m,
                     int64_t k, int64_t n);
void helm_dev_copy_columns(void *ctx, const void *x, void *y, int32_t dtype, int64_t rows,
                           int64_t width, int64_t offset, int64_t count);
void helm_dev_rope(void *ctx, const void *x, const int64_t *positions, void *y, int32_t dtype,
                   int64_t rows, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                   double theta, int32_t interleaved);
void helm_dev_swiglu(void *ctx, const void *gate, const void *up, void *y, int32_t dtype,
                     int64_t n);
void helm_dev_add(void *ctx, const void *a, const void *b, void *y, int32_t dtype, int64_t n);
void helm_dev_convert(void *ctx, const void *x, int32_t xdtype, void *y, int32_t ydtype,
                      int64_t n);
void helm_dev_attention(void *ctx, int64_t layer, const void *q, const void *k, const void *v,
                        void *out, int32_t dtype, int64_t batch, int64_t seq, int64_t heads,
                        int64_t kv_heads, int64_t head_dim, float scale, int64_t window);
/* A device copy of `bytes` bytes of constant host memory, made once per address. */
const void *helm_dev_constant(void *ctx, const void *host, int64_t bytes);

#ifdef __cplusplus
} /* extern "C" */

/* The name of a contract function as a string literal; a name this header does not declare is a
 * compile error (the operand of sizeof names the function). */
#define HELM_CONTRACT_SYMBOL(fn) (static_cast<void>(sizeof(&::fn)), #fn)
#endif

#endif /* HELM_CONTRACT_HELM_CONTRACT_H */
