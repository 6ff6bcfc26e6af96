/*===- helm_contract.h - the one contract between helmc's code and helm-rt -------===*
 *
 * Everything generated stage code and the runtime agree on, declared once, in C:
 *   - element type, stage-side and device-backend codes;
 *   - the stage entry points, their C signature and the exported ABI record;
 *   - the block formats of weights, one table (HELM_BLOCK_FORMATS) from which every other
 *     description of a format derives;
 *   - helm_k_*   CPU kernels a host stage calls (kernels/ defines them);
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

/* The header's inline helpers are callable from CUDA device code too (kernels/cuda). */
#ifdef __CUDACC__
#define HELM_CONTRACT_INLINE __host__ __device__ static inline
#else
#define HELM_CONTRACT_INLINE static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The share of the device memory left after a GPU stage's weights that its KV pages take before
 * the oldest full page is evicted to host RAM, unless helm-rt --kv-watermark says otherwise
 * (docs/kv-cache.md). The planner predicts from it which KV bytes a decode step streams back. */
#define HELM_KV_WATERMARK_DEFAULT 0.8

/* Bytes per key or value element in a GPU stage's KV pages (f32 rows, docs/kv-cache.md), what the
 * runtime's page sizes and the planner's count of the KV a decode step streams back use. */
#define HELM_DEVICE_KV_ELEMENT_BYTES 4

/* The block formats of weights (the GGUF / ggml block formats, docs/quantization.md), one row
 * each: X(NAME, helm_dtype code, name, ggml type id, weights per block, bytes per block,
 * quantizable). The name is the manifest's dtype and helmc's --quantize spelling; the ggml type id
 * is what GGUF tensor infos hold; quantizable says whether helmc quantizes to the format (1) or only
 * reads it from GGUF files (0: the iq formats, whose scales and lattice codes come from an
 * importance search HELM does not reproduce). Everything else about a format derives from this table: the helm_dtype
 * codes and helpers below, the manifest names (manifest_schema.h), kernels/quant's format table,
 * the GGUF importer's accepted types, helm-quantize-weights' schemes. The dialect's BlockFormat
 * enum (TableGen) is checked against it (dialects/helm/HelmDialect.cpp). */
#define HELM_BLOCK_FORMATS(X)              \
  X(Q8_0, 3, "q8_0", 8, 32, 34, 1)         \
  X(Q4_0, 4, "q4_0", 2, 32, 18, 1)         \
  X(Q4_1, 5, "q4_1", 3, 32, 20, 1)         \
  X(Q4_K, 6, "q4_k", 12, 256, 144, 1)      \
  X(Q5_K, 7, "q5_k", 13, 256, 176, 1)      \
  X(Q6_K, 8, "q6_k", 14, 256, 210, 1)      \
  X(Q5_0, 9, "q5_0", 6, 32, 22, 1)         \
  X(Q5_1, 10, "q5_1", 7, 32, 24, 1)        \
  X(IQ4_NL, 11, "iq4_nl", 20, 32, 18, 0)   \
  X(IQ4_XS, 12, "iq4_xs", 23, 256, 136, 0)  \
  X(Q2_K, 13, "q2_k", 10, 256, 84, 1)      \
  X(Q3_K, 14, "q3_k", 11, 256, 110, 1)      \
  X(IQ2_XXS, 15, "iq2_xxs", 16, 256, 66, 0) \
  X(IQ2_XS, 16, "iq2_xs", 17, 256, 74, 0)   \
  X(IQ2_S, 17, "iq2_s", 22, 256, 82, 0)     \
  X(IQ3_XXS, 18, "iq3_xxs", 18, 256, 98, 0) \
  X(IQ3_S, 19, "iq3_s", 21, 256, 110, 0)

/* Element types of every buffer that crosses the contract (the manifest spells them "f32",
 * "f16", "bf16", "q8_0", ...). The block dtypes are weights only: a weight of N rows (output
 * features, or table rows) by K stored as N rows of K / helm_dtype_block_weights blocks of
 * helm_dtype_block_bytes bytes each. */
#define HELM_BLOCK_DTYPE_ENUMERATOR(NAME, CODE, name, ggml, weights, bytes, quantizable) HELM_DTYPE_##NAME = CODE,
enum helm_dtype {
  HELM_DTYPE_F32 = 0,
  HELM_DTYPE_F16 = 1,
  HELM_DTYPE_BF16 = 2,
  HELM_BLOCK_FORMATS(HELM_BLOCK_DTYPE_ENUMERATOR)
};
#undef HELM_BLOCK_DTYPE_ENUMERATOR

/* Weights per block of a block dtype; 0 for the element dtypes. */
HELM_CONTRACT_INLINE int64_t helm_dtype_block_weights(int32_t dtype) {
#define HELM_BLOCK_WEIGHTS_CASE(NAME, CODE, name, ggml, weights, bytes, quantizable) case CODE: return weights;
  switch (dtype) {
  HELM_BLOCK_FORMATS(HELM_BLOCK_WEIGHTS_CASE)
  default: return 0;
  }
#undef HELM_BLOCK_WEIGHTS_CASE
}

/* Bytes per block of a block dtype (ggml's block_q8_0 ... block_q6_K); 0 for the element dtypes. */
HELM_CONTRACT_INLINE int64_t helm_dtype_block_bytes(int32_t dtype) {
#define HELM_BLOCK_BYTES_CASE(NAME, CODE, name, ggml, weights, bytes, quantizable) case CODE: return bytes;
  switch (dtype) {
  HELM_BLOCK_FORMATS(HELM_BLOCK_BYTES_CASE)
  default: return 0;
  }
#undef HELM_BLOCK_BYTES_CASE
}

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
 * layout). Accumulates in f32; y is rounded to its element type once. A W of a block dtype is
 * always N rows of blocks along K (w_transposed is ignored); x is then quantized to 8 bits per
 * block of 32 for integer dot products (docs/quantization.md). */
void helm_k_linear(const void *x, int32_t x_dtype, const void *w, int32_t w_dtype,
                   int32_t w_transposed, void *y, int32_t y_dtype, int64_t M, int64_t K,
                   int64_t N);

/* out[r, :] = row ids[r] of a [vocab, width] table of a block dtype, dequantized to out_dtype
 * (element tables are gathered by the stage code itself). An id outside [0, vocab) reads row 0
 * or vocab - 1, as the gather of element tables clamps; the runtime refuses such ids first. */
void helm_k_embed_blocks(const int64_t *ids, const void *table, int32_t table_dtype, void *out,
                         int32_t out_dtype, int64_t rows, int64_t vocab, int64_t width);

/* ---- Runtime services for host stage code ------------------------------------------------ */

/* Address of weight `id` of the stage's tensor table (manifest tensors[] of this stage). */
const void *helm_rt_weight(void *ctx, int64_t id);

/* Causal grouped-query attention for one layer: appends the S new keys/values of every batch row
 * to the stage's KV cache, then attends. q: [B, S, heads*head_dim]; k, v: [B, S,
 * kv_heads*head_dim]; out like q. `window` > 0 limits keys to the last `window` positions. */
void helm_rt_attention(void *ctx, int64_t layer, const void *q, const void *k, const void *v,
                       void *out, int32_t dtype, int64_t B, int64_t S, int64_t heads,
                       int64_t kv_heads, int64_t head_dim, float scale, int64_t window);
/* helm_rt_attention with the scaled scores soft-capped: s -> tanh(s * (1 / softcap)) * softcap
 * (Gemma 2). A separate entry so that stages compiled before it keep helm_rt_attention's
 * signature. */
void helm_rt_attention_capped(void *ctx, int64_t layer, const void *q, const void *k, const void *v,
                              void *out, int32_t dtype, int64_t B, int64_t S, int64_t heads,
                              int64_t kv_heads, int64_t head_dim, float scale, int64_t window,
                              float softcap);

/* ---- Device-kernel calls of a kernel-form device stage ----------------------------------- */
/* Buffers are the stage device's memory; the arithmetic of each is the DeviceOps method of the
 * same name (runtime/device/DeviceOps.h). */

void helm_dev_embed(void *ctx, const int64_t *ids, const void *table, void *out, int32_t dtype,
                    int64_t rows, int64_t vocab, int64_t width);
/* helm_k_embed_blocks on the device: rows of a table of a block dtype, dequantized to out_dtype. */
void helm_dev_embed_blocks(void *ctx, const int64_t *ids, const void *table, int32_t table_dtype,
                           void *out, int32_t out_dtype, int64_t rows, int64_t vocab, int64_t width);
void helm_dev_rms_norm(void *ctx, const void *x, const void *gamma, void *y, int32_t dtype,
                       int64_t groups, int64_t group, float eps);
/* A w of a block dtype is N rows of blocks along K, as for helm_k_linear (transposed ignored). */
void helm_dev_linear(void *ctx, const void *x, int32_t xdtype, const void *w, int32_t wdtype,
                     int32_t transposed, const void *bias, void *y, int32_t ydtype, int64_t m,
                     int64_t k, int64_t n);
void helm_dev_copy_columns(void *ctx, const void *x, void *y, int32_t dtype, int64_t rows,
                           int64_t width, int64_t offset, int64_t count);
/* freq_factors: null, or rotary_dim / 2 divisors of the pairs' frequencies (Llama 3's rope_freqs,
 * linear scaling) in device memory (a helm_dev_constant copy). */
void helm_dev_rope(void *ctx, const void *x, const int64_t *positions, void *y, int32_t dtype,
                   int64_t rows, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                   double theta, const float *freq_factors, int32_t interleaved);
void helm_dev_swiglu(void *ctx, const void *gate, const void *up, void *y, int32_t dtype,
                     int64_t n);
/* y = gelu_tanh(gate) * up (Gemma's gated FFN). */
void helm_dev_geglu(void *ctx, const void *gate, const void *up, void *y, int32_t dtype,
                    int64_t n);
void helm_dev_add(void *ctx, const void *a, const void *b, void *y, int32_t dtype, int64_t n);
/* y = x * factor (Gemma's embedding scale). */
void helm_dev_scale(void *ctx, const void *x, void *y, int32_t dtype, int64_t n, float factor);
/* y = tanh(x * (1 / cap)) * cap (Gemma 2's final logits). */
void helm_dev_softcap(void *ctx, const void *x, void *y, int32_t dtype, int64_t n, float cap);
void helm_dev_convert(void *ctx, const void *x, int32_t xdtype, void *y, int32_t ydtype,
                      int64_t n);
void helm_dev_attention(void *ctx, int64_t layer, const void *q, const void *k, const void *v,
                        void *out, int32_t dtype, int64_t batch, int64_t seq, int64_t heads,
                        int64_t kv_heads, int64_t head_dim, float scale, int64_t window);
/* helm_dev_attention with soft-capped scores, as helm_rt_attention_capped. */
void helm_dev_attention_capped(void *ctx, int64_t layer, const void *q, const void *k,
                               const void *v, void *out, int32_t dtype, int64_t batch, int64_t seq,
                               int64_t heads, int64_t kv_heads, int64_t head_dim, float scale,
                               int64_t window, float softcap);
/* A device copy of `bytes` bytes of constant host memory, made once per address. */
const void *helm_dev_constant(void *ctx, const void *host, int64_t bytes);

#ifdef __cplusplus
} /* extern "C" */

/* The name of a contract function as a string literal; a name this header does not declare is a
 * compile error (the operand of sizeof names the function). */
#define HELM_CONTRACT_SYMBOL(fn) (static_cast<void>(sizeof(&::fn)), #fn)
#endif

#endif /* HELM_CONTRACT_HELM_CONTRACT_H */
