/*===- manifest_schema.h - the keys and types of a package's manifest -----------===*
 *
 * The manifest is one JSON object (docs/package-format.md). helmc's package builder writes these
 * keys and helm-rt's loader reads them; neither spells a key by hand. Types: S string, I integer,
 * N number, O object, A array. "info" keys are written for people and tools (`helm-rt --info`,
 * `jq`); the loader does not depend on them.
 *
 *   producer                              S  info: "helmc <version>"
 *   model.source                          S  the model file helmc read
 *   model.config                          O  ModelConfig (architecture, dtype, sizes, ...)
 *   target.name / .cpu / .features        S  target name, LLVM CPU, "+feature,..." the code uses
 *   target.device                         S  GPU stage backend: "emu" or "cuda" (helm_device_kind)
 *   target.gpu.{name, vram_bytes, reserved_bytes}   S, I, I
 *   target.link.{bw_gbs, latency_us}      N  the link the plan assumed
 *   plan                                  O  info: the planner's table (helmc --emit=plan-json)
 *   limits.max_context                    I  longest sequence the package accepts
 *   stages[]                              A  in pipeline order; each an object:
 *     device                              S  "cpu" or "gpu" (helm_stage_side)
 *     entry                               S  HELM_CPU_STAGE_ENTRY / HELM_GPU_STAGE_ENTRY
 *     code_section / code_format          S  section name; "host-shared-object" or "device-calls"
 *     weights_section                     S  info: the section the stage's tensors live in
 *     kernels_section / kernels_format    S  a CUDA stage's kernel image; format info: "cuda-fatbin"
 *     kv_layers                           I  attention layers of the stage (its KV cache)
 *     units                               A  [first, last] partition units of the stage
 *     input / output                      S  "token_ids" or "activation" / "logits" or "activation"
 *   boundary.{dtype, width}               S, I  the activation between two stages
 *   kv.{layers, kv_heads, head_dim}       I  KV geometry over all stages
 *   logits.vocab                          I  width of the logits rows
 *   tensors[]                             A  each: stage I, id I, name S, onnx_name S (info),
 *                                            dtype S, shape A, section S, offset I, bytes I
 *   tokenizer.{section, bos_id, eos_ids}  S, I, A
 *===----------------------------------------------------------------------------===*/
#ifndef HELM_CONTRACT_MANIFEST_SCHEMA_H
#define HELM_CONTRACT_MANIFEST_SCHEMA_H

#include "contract/helm_contract.h"

/* Top-level keys. */
#define HELM_MANIFEST_PRODUCER "producer"
#define HELM_MANIFEST_MODEL "model"
#define HELM_MANIFEST_TARGET "target"
#define HELM_MANIFEST_PLAN "plan"
#define HELM_MANIFEST_LIMITS "limits"
#define HELM_MANIFEST_STAGES "stages"
#define HELM_MANIFEST_BOUNDARY "boundary"
#define HELM_MANIFEST_KV "kv"
#define HELM_MANIFEST_LOGITS "logits"
#define HELM_MANIFEST_TENSORS "tensors"
#define HELM_MANIFEST_TOKENIZER "tokenizer"

/* model.* */
#define HELM_MANIFEST_MODEL_SOURCE "source"
#define HELM_MANIFEST_MODEL_CONFIG "config"
/* model.config.* keys the runtime reads (the rest of ModelConfig is for helmc and people) */
#define HELM_MANIFEST_CONFIG_ARCHITECTURE "architecture"
#define HELM_MANIFEST_CONFIG_DTYPE "dtype"

/* target.* */
#define HELM_MANIFEST_TARGET_NAME "name"
#define HELM_MANIFEST_TARGET_CPU "cpu"
#define HELM_MANIFEST_TARGET_FEATURES "features"
#define HELM_MANIFEST_TARGET_DEVICE "device"
#define HELM_MANIFEST_TARGET_GPU "gpu"
#define HELM_MANIFEST_TARGET_LINK "link"
#define HELM_MANIFEST_GPU_NAME "name"
#define HELM_MANIFEST_GPU_VRAM_BYTES "vram_bytes"
#define HELM_MANIFEST_GPU_RESERVED_BYTES "reserved_bytes"
#define HELM_MANIFEST_LINK_BW_GBS "bw_gbs"
#define HELM_MANIFEST_LINK_LATENCY_US "latency_us"
/* target.device values */
#define HELM_MANIFEST_DEVICE_EMU "emu"
#define HELM_MANIFEST_DEVICE_CUDA "cuda"

/* limits.* */
#define HELM_MANIFEST_LIMITS_MAX_CONTEXT "max_context"

/* stages[].* */
#define HELM_MANIFEST_STAGE_DEVICE "device"
#define HELM_MANIFEST_STAGE_ENTRY "entry"
#define HELM_MANIFEST_STAGE_CODE_SECTION "code_section"
#define HELM_MANIFEST_STAGE_CODE_FORMAT "code_format"
#define HELM_MANIFEST_STAGE_WEIGHTS_SECTION "weights_section"
#define HELM_MANIFEST_STAGE_KERNELS_SECTION "kernels_section"
#define HELM_MANIFEST_STAGE_KERNELS_FORMAT "kernels_format"
#define HELM_MANIFEST_STAGE_KV_LAYERS "kv_layers"
#define HELM_MANIFEST_STAGE_UNITS "units"
#define HELM_MANIFEST_STAGE_INPUT "input"
#define HELM_MANIFEST_STAGE_OUTPUT "output"
/* stages[] values */
#define HELM_MANIFEST_SIDE_CPU "cpu"
#define HELM_MANIFEST_SIDE_GPU "gpu"
#define HELM_MANIFEST_CODE_HOST_SHARED_OBJECT "host-shared-object"
#define HELM_MANIFEST_CODE_DEVICE_CALLS "device-calls"
#define HELM_MANIFEST_KERNELS_CUDA_FATBIN "cuda-fatbin"
#define HELM_MANIFEST_IO_TOKEN_IDS "token_ids"
#define HELM_MANIFEST_IO_ACTIVATION "activation"
#define HELM_MANIFEST_IO_LOGITS "logits"

/* boundary.*, kv.*, logits.* */
#define HELM_MANIFEST_BOUNDARY_DTYPE "dtype"
#define HELM_MANIFEST_BOUNDARY_WIDTH "width"
#define HELM_MANIFEST_KV_LAYERS "layers"
#define HELM_MANIFEST_KV_HEADS "kv_heads"
#define HELM_MANIFEST_KV_HEAD_DIM "head_dim"
/* optional: "f32" or "f16", the CPU stage's KV rows when helm-rt is not told (--kv-type) */
#define HELM_MANIFEST_KV_HOST_DTYPE "host_dtype"
#define HELM_MANIFEST_LOGITS_VOCAB "vocab"

/* tensors[].* */
#define HELM_MANIFEST_TENSOR_STAGE "stage"
#define HELM_MANIFEST_TENSOR_ID "id"
#define HELM_MANIFEST_TENSOR_NAME "name"
#define HELM_MANIFEST_TENSOR_ONNX_NAME "onnx_name"
#define HELM_MANIFEST_TENSOR_DTYPE "dtype"
#define HELM_MANIFEST_TENSOR_SHAPE "shape"
#define HELM_MANIFEST_TENSOR_SECTION "section"
#define HELM_MANIFEST_TENSOR_OFFSET "offset"
#define HELM_MANIFEST_TENSOR_BYTES "bytes"

/* tokenizer.* */
#define HELM_MANIFEST_TOKENIZER_SECTION "section"
#define HELM_MANIFEST_TOKENIZER_BOS_ID "bos_id"
#define HELM_MANIFEST_TOKENIZER_EOS_IDS "eos_ids"
#define HELM_MANIFEST_TOKENIZER_CHAT_TEMPLATE "chat_template"

/* The one spelling of the contract's codes in the manifest (and in the IR's helm.stage): the
 * package builder writes these and the runtime reads them back through the same functions. */
static inline const char *helm_stage_side_name(enum helm_stage_side side) {
  return side == HELM_STAGE_GPU ? HELM_MANIFEST_SIDE_GPU : HELM_MANIFEST_SIDE_CPU;
}
static inline const char *helm_device_kind_name(enum helm_device_kind kind) {
  return kind == HELM_DEVICE_CUDA ? HELM_MANIFEST_DEVICE_CUDA
         : kind == HELM_DEVICE_EMU ? HELM_MANIFEST_DEVICE_EMU
                                   : "cpu";
}

/* dtype strings (tensors[].dtype, boundary.dtype, model.config.dtype) for helm_dtype codes. */
#define HELM_MANIFEST_DTYPE_F32 "f32"
#define HELM_MANIFEST_DTYPE_F16 "f16"
#define HELM_MANIFEST_DTYPE_BF16 "bf16"

/* The manifest spelling of a helm_dtype code (a block format's name from HELM_BLOCK_FORMATS), or 0
 * for a code that is none. */
static inline const char *helm_dtype_name(int32_t dtype) {
#define HELM_BLOCK_NAME_CASE(NAME, CODE, name, ggml, weights, bytes, quantizable) case CODE: return name;
  switch (dtype) {
  case HELM_DTYPE_F32: return HELM_MANIFEST_DTYPE_F32;
  case HELM_DTYPE_F16: return HELM_MANIFEST_DTYPE_F16;
  case HELM_DTYPE_BF16: return HELM_MANIFEST_DTYPE_BF16;
  HELM_BLOCK_FORMATS(HELM_BLOCK_NAME_CASE)
  default: return 0;
  }
#undef HELM_BLOCK_NAME_CASE
}

#endif /* HELM_CONTRACT_MANIFEST_SCHEMA_H */
