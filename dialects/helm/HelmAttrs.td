//===- HelmAttrs.td - HELM enums and attributes -----------------*- tablegen -*-===//
#ifndef HELM_ATTRS_TD
#define HELM_ATTRS_TD

include "HelmDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Helm_UnitKind : I32EnumAttr<"UnitKind", "kind of partition unit", [
    I32EnumAttrCase<"embedding", 0>,
    I32EnumAttrCase<"block", 1>,
    I32EnumAttrCase<"head", 2>]> {
  let cppNamespace = "::helm";
}

def Helm_RopeStyle : I32EnumAttr<"RopeStyle", "how rotary embedding pairs the channels", [
    // (x[i], x[i + d/2]) pairs, `rotate_half` in Hugging Face models.
    I32EnumAttrCase<"half", 0>,
    // (x[2i], x[2i + 1]) pairs, GPT-J style.
    I32EnumAttrCase<"interleaved", 1>]> {
  let cppNamespace = "::helm";
  let genSpecializedAttr = 0;
}
def Helm_RopeStyleAttr : EnumAttr<Helm_Dialect, Helm_RopeStyle, "rope_style"> {
  let assemblyFormat = "`<` $value `>`";
}

def Helm_Device : I32EnumAttr<"Device", "device a stage runs on", [
    I32EnumAttrCase<"cpu", 0>,
    I32EnumAttrCase<"gpu", 1>]> {
  let cppNamespace = "::helm";
}

// What runs a target's GPU stage. The values are the contract's helm_device_kind codes
// (static_assert in HelmDialect.cpp), so the code travels unchanged into the package manifest.
def Helm_GpuBackend : I32EnumAttr<"GpuBackend", "backend that runs a target's GPU stage", [
    I32EnumAttrCase<"emu", 1>,
    I32EnumAttrCase<"cuda", 2>]> {
  let cppNamespace = "::helm";
  let genSpecializedAttr = 0;
}

// The GGUF block formats a weight can be stored in. The values are the contract's helm_dtype
// codes (static_assert in HelmDialect.cpp), so the kernel call takes the code unchanged.
def Helm_BlockFormat : I32EnumAttr<"BlockFormat", "block format of a quantized weight", [
    I32EnumAttrCase<"q8_0", 3>,
    I32EnumAttrCase<"q4_0", 4>,
    I32EnumAttrCase<"q4_1", 5>,
    I32EnumAttrCase<"q4_k", 6>,
    I32EnumAttrCase<"q5_k", 7>,
    I32EnumAttrCase<"q6_k", 8>,
    I32EnumAttrCase<"q5_0", 9>,
    I32EnumAttrCase<"q5_1", 10>,
    I32EnumAttrCase<"iq4_nl", 11>,
    I32EnumAttrCase<"iq4_xs", 12>,
    I32EnumAttrCase<"q2_k", 13>,
    I32EnumAttrCase<"q3_k", 14>,
    I32EnumAttrCase<"iq2_xxs", 15>,
    I32EnumAttrCase<"iq2_xs", 16>,
    I32EnumAttrCase<"iq2_s", 17>,
    I32EnumAttrCase<"iq3_xxs", 18>,
    I32EnumAttrCase<"iq3_s", 19>]> {
  let cppNamespace = "::helm";
  let genSpecializedAttr = 0;
}

//===----------------------------------------------------------------------===//
// Planning attributes: the target, the costing options, each unit's costs and the plan. Typed, so
// the verifier and the parser check every field and code reads fields, not dictionary keys.
//===----------------------------------------------------------------------===//

// A double (helm::F64, HelmDialect.h) printed in the shortest decimal that reads back
// bit-identical (printF64): cost-model numbers are compared exactly and drive the split.
class Helm_F64Parameter<string desc, string default = ""> : AttrParameter<"::helm::F64", desc> {
  let defaultValue = default;
  let parser = "::helm::parseF64($_parser)";
  let printer = "::helm::printF64($_printer, $_self)";
}

class Helm_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Helm_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
  let assemblyFormat = "`<` struct(params) `>`";
}

def Helm_CpuProfileAttr : Helm_Attr<"CpuProfile", "cpu"> {
  let summary = "The host CPU of a target, as the roofline cost model sees it";
  let description = [{
    Field meanings and units are those of the profile JSON (docs/target-profile.md): bandwidths in
    GB/s, rates in GFLOP/s, sizes in bytes, per-block overhead in ms.
  }];
  let parameters = (ins StringRefParameter<"CPU name", [{""}]>:$name,
                        Helm_F64Parameter<"sustained DRAM bandwidth">:$dram_bw_gbs,
                        Helm_F64Parameter<"L3 capacity">:$l3_bytes,
                        Helm_F64Parameter<"L3 bandwidth">:$l3_bw_gbs,
                        Helm_F64Parameter<"decode (GEMV) compute rate">:$p_dec_gflops,
                        Helm_F64Parameter<"prefill (GEMM) compute rate">:$p_pre_gflops,
                        Helm_F64Parameter<"host memory for the model">:$ram_bytes,
                        Helm_F64Parameter<"fixed cost per block">:$overhead_ms_per_block,
                        DefaultValuedParameter<"int64_t", "0", "cores (0: unknown)">:$cores,
                        Helm_F64Parameter<"decode attention's compute rate (0: p_dec)", "::helm::F64(0.0)">:$p_attn_gflops);
  let genVerifyDecl = 1;
}

def Helm_GpuProfileAttr : Helm_Attr<"GpuProfile", "gpu"> {
  let summary = "The GPU of a target and the backend that runs its stage";
  let parameters = (ins StringRefParameter<"GPU name", [{""}]>:$name,
                        "::helm::GpuBackend":$backend,
                        Helm_F64Parameter<"device memory">:$vram_bytes,
                        Helm_F64Parameter<"memory kept free for the runtime">:$reserved_bytes,
                        Helm_F64Parameter<"device memory bandwidth">:$mem_bw_gbs,
                        Helm_F64Parameter<"decode compute rate">:$p_dec_gflops,
                        Helm_F64Parameter<"prefill compute rate">:$p_pre_gflops,
                        Helm_F64Parameter<"fixed cost per block">:$overhead_ms_per_block);
  let genVerifyDecl = 1;
}

def Helm_LinkProfileAttr : Helm_Attr<"LinkProfile", "link"> {
  let summary = "The CPU-GPU link of a target";
  let parameters = (ins Helm_F64Parameter<"bandwidth">:$bw_gbs,
                        Helm_F64Parameter<"latency per transfer">:$latency_us);
  let genVerifyDecl = 1;
}

def Helm_TargetAttr : Helm_Attr<"Target", "target"> {
  let summary = "The machine a plan is for (module attribute helm.target)";
  let description = [{
    Set by the pipeline from `--target`; planning reads it and never touches hardware. A CPU-only
    target has no `gpu` (and no `link`).

    ```mlir
    helm.target = #helm.target<name = "rtx4060", cpu = #helm.cpu<...>,
                               gpu = #helm.gpu<backend = cuda, ...>, link = #helm.link<...>>
    ```
  }];
  let parameters = (ins StringRefParameter<"target name">:$name,
                        StringRefParameter<"where the numbers come from", [{""}]>:$source,
                        "CpuProfileAttr":$cpu,
                        OptionalParameter<"GpuProfileAttr">:$gpu,
                        OptionalParameter<"LinkProfileAttr">:$link,
                        Helm_F64Parameter<"compute efficiency", "::helm::F64(1.0)">:$eta_c,
                        Helm_F64Parameter<"memory efficiency", "::helm::F64(1.0)">:$eta_m);
  let genVerifyDecl = 1;
}

def Helm_CostOptionsAttr : Helm_Attr<"CostOptions", "cost_options"> {
  let summary = "The workload units were costed for (module attribute helm.cost_options)";
  let parameters = (ins "int64_t":$batch, "int64_t":$context_tokens, "int64_t":$prompt_len);
  let genVerifyDecl = 1;
}

def Helm_UnitCostAttr : Helm_Attr<"UnitCost", "unit_cost"> {
  let summary = "A partition unit's costs (helm.cost on helm.unit, set by helm-annotate-costs)";
  let description = [{
    Bytes and FLOPs at the module's cost options (docs/cost-model.md §3): the bytes read per decode
    step, the bytes kept resident, the boundary activation, KV bytes per token, total FLOPs per
    decode step and per prompt, and the pieces the partitioner re-costs for other contexts.
  }];
  let parameters = (ins "int64_t":$param_bytes, "int64_t":$resident_bytes, "int64_t":$act_bytes,
                        "int64_t":$kv_bytes_per_token, "int64_t":$flops_decode,
                        "int64_t":$flops_prefill,
                        Helm_F64Parameter<"projection FLOPs per decode step">:$proj_flops_decode,
                        Helm_F64Parameter<"attention FLOPs per cached token">:$attn_flops_per_token,
                        Helm_F64Parameter<"projection FLOPs per prompt">:$proj_flops_prefill,
                        Helm_F64Parameter<"attention FLOPs per prompt">:$attn_flops_prefill,
                        "int64_t":$prefill_param_bytes, "int64_t":$prefill_act_bytes,
                        DefaultValuedParameter<"int64_t", "0", "bytes crossing per decode step when the attention core runs on the other device">:$attn_io_bytes,
                        DefaultValuedParameter<"int64_t", "0", "stored bytes of the FFN's weights (gate, up, down)">:$ffn_bytes,
                        DefaultValuedParameter<"int64_t", "0", "elements of the FFN's weights">:$ffn_weight_elems,
                        DefaultValuedParameter<"int64_t", "0", "K and V elements per token (0: count kv_bytes_per_token)">:$kv_elems_per_token);
  let genVerifyDecl = 1;
}

def Helm_PlanCandidateAttr : Helm_Attr<"PlanCandidate", "candidate"> {
  let summary = "One split k of the plan's search: feasible or why not, and its predicted times";
  let parameters = (ins "int64_t":$k, "bool":$feasible, StringRefParameter<"why infeasible", [{""}]>:$reason,
                        Helm_F64Parameter<"CPU time per token">:$t_cpu_ms,
                        Helm_F64Parameter<"GPU time per token">:$t_gpu_ms,
                        Helm_F64Parameter<"link time per token">:$t_comm_ms,
                        Helm_F64Parameter<"planned time per token">:$t_plan_ms,
                        Helm_F64Parameter<"GPU bytes">:$gpu_bytes,
                        Helm_F64Parameter<"host bytes">:$host_bytes,
                        Helm_F64Parameter<"one decode step", "::helm::F64(0.0)">:$t_decode_ms,
                        Helm_F64Parameter<"the prompt on the split's devices", "::helm::F64(0.0)">:$t_prefill_ms,
                        DefaultValuedParameter<"bool", "false", "the split has units to stream">:$stream_possible,
                        DefaultValuedParameter<"bool", "false", "the staging slots fit">:$stream_fits,
                        StringRefParameter<"why streaming is not possible or does not fit", [{""}]>:$stream_reason,
                        Helm_F64Parameter<"the prompt streamed", "::helm::F64(0.0)">:$t_stream_ms,
                        Helm_F64Parameter<"both staging slots", "::helm::F64(0.0)">:$stream_slot_bytes,
                        Helm_F64Parameter<"weight bytes streamed per prompt", "::helm::F64(0.0)">:$streamed_bytes,
                        DefaultValuedParameter<"int64_t", "-1", "shortest prompt faster streamed (-1: none)">:$stream_crossover,
                        DefaultValuedParameter<"int64_t", "0", "GPU blocks whose attention core the plan runs on the CPU">:$cpu_attention_blocks,
                        Helm_F64Parameter<"KV bytes a decode step streams back from host RAM", "::helm::F64(0.0)">:$spill_bytes,
                        DefaultValuedParameter<"int64_t", "0", "attention cores on the CPU that make decode fastest">:$best_cpu_attention_blocks,
                        Helm_F64Parameter<"that decode step", "::helm::F64(0.0)">:$best_cpu_attention_decode_ms);
}

def Helm_SlicedFfnAttr : Helm_Attr<"SlicedFfn", "sliced_ffn"> {
  let summary = "ScheInfer's sliced-FFN plan priced beside the splits (docs/cost-model.md §12.1)";
  let parameters = (ins "bool":$possible, StringRefParameter<"why not", [{""}]>:$reason,
                        Helm_F64Parameter<"one decode step", "::helm::F64(0.0)">:$t_decode_ms,
                        Helm_F64Parameter<"GPU bytes", "::helm::F64(0.0)">:$gpu_bytes,
                        Helm_F64Parameter<"of which the GPU-resident FFN slices", "::helm::F64(0.0)">:$gg_bytes,
                        OptionalParameter<"::mlir::DenseF64ArrayAttr", "r_GG per block">:$r_gg,
                        OptionalParameter<"::mlir::DenseF64ArrayAttr", "r_CG per block">:$r_cg);
  let genVerifyDecl = 1;
}
def Helm_PlanAttr : Helm_Attr<"Plan", "plan"> {
  let summary = "The partition plan (module attribute helm.plan, set by helm-partition)";
  let parameters = (ins "int64_t":$chosen_k, Helm_F64Parameter<"predicted time per token">:$predicted_ms_per_token,
                        StringRefParameter<"decode or prefill">:$objective, "bool":$kv_offload,
                        DefaultValuedParameter<"bool", "false", "prompts at or past the crossover stream the CPU units' weights">:$stream_prefill,
                        DefaultValuedParameter<"bool", "false", "decode may run GPU blocks' attention cores on the CPU">:$cpu_attention,
                        OptionalParameter<"SlicedFfnAttr", "ScheInfer's plan, priced">:$sliced,
                        ArrayRefParameter<"PlanCandidateAttr", "every split k, in order">:$candidates);
  let genVerifyDecl = 1;
}

def Helm_BlocksAttr : Helm_Attr<"Blocks", "blocks"> {
  let summary = "How a quantized weight is stored: a block format, rows along one dimension";
  let description = [{
    On a `helm.weight_decl` whose package bytes are quantized. The declared type stays the source
    tensor's (shape and float element type: what the ops compute with); the package stores it as
    rows along `row_dim` (the output features of a linear weight, the tokens of an embedding
    table), each row a run of blocks along the other dimension (docs/quantization.md). Every block
    format implies its bits, block size, scale type and zero-point form:

    | format | bits | weights/block | scales | zero point |
    | q8_0 | 8 | 32 | f16 | symmetric |
    | q4_0 | 4 | 32 | f16 | symmetric (offset 8) |
    | q4_1 | 4 | 32 | f16 scale, f16 min | min |
    | q4_k | 4 | 256 (8 x 32) | 6-bit scales and mins, f16 super-scales | min |
    | q5_k | 5 | 256 (8 x 32) | as q4_k | min |
    | q6_k | 6 | 256 (16 x 16) | int8 scales, f16 super-scale | symmetric (offset 32) |
    | q5_0 | 5 | 32 | f16 | symmetric (offset 16) |
    | q5_1 | 5 | 32 | f16 scale, f16 min | min |
    | iq4_nl | 4 | 32 | f16; codes index a 16-value non-linear table | symmetric |
    | iq4_xs | 4 | 256 (8 x 32) | 6-bit scales, f16 super-scale; iq4_nl's table | symmetric |
    | q2_k | 2 | 256 (16 x 16) | 4-bit scales and mins, f16 super-scales | min |
    | q3_k | 3 | 256 (16 x 16) | 6-bit scales, f16 super-scale | symmetric (offset 4) |
    | iq2_xxs | 2 | 256 (8 x 32) | 4-bit scales, f16 super-scale; 8-weight lattice codes, sign bits | symmetric |
    | iq2_xs | 2 | 256 (16 x 16) | as iq2_xxs, a larger lattice | symmetric |
    | iq2_s | 2 | 256 (16 x 16) | as iq2_xs, a larger lattice, explicit sign bits | symmetric |
    | iq3_xxs | 3 | 256 (8 x 32) | 4-bit scales, f16 super-scale; 4-weight lattice codes, sign bits | symmetric |
    | iq3_s | 3 | 256 (8 x 32) | as iq3_xxs, a larger lattice, explicit sign bits | symmetric |
  }];
  let parameters = (ins "::helm::BlockFormat":$format, "int64_t":$row_dim);
  let extraClassDeclaration = [{
    /// Weights and bytes per block, and bits per weight including the scales.
    int64_t getBlockWeights() const;
    int64_t getBlockBytes() const;
    double getBitsPerWeight() const { return 8.0 * double(getBlockBytes()) / double(getBlockWeights()); }
    /// Package bytes of a [rows, columns] tensor stored this way (rows along row_dim).
    int64_t getStoredBytes(mlir::RankedTensorType type) const;
  }];
  let genVerifyDecl = 1;
}

def Helm_OnnxBlocksAttr : Helm_Attr<"OnnxBlocks", "onnx_blocks"> {
  let summary = "A weight that arrives quantized in ONNX's blocked-integer form";
  let description = [{
    On a `helm.weight_decl` raised from `com.microsoft::MatMulNBits`,
    `com.microsoft::GatherBlockQuantized` or a block-wise `DequantizeLinear` (opset 21) feeding a
    MatMul, Gemm or Gather: the weight [N, K] is not a float initializer but up to three, named here
    by their ONNX names. `codes` holds the `bits`-bit codes of consecutive weights of a row,
    `code_type` says how: ui8 (bytes; 4-bit codes two to a byte, low nibble first, MatMulNBits'
    [N, ceil(K / block_size), block_size * bits / 8]), ONNX's packed i4 / ui4, or i8 (one signed
    code a byte, DequantizeLinear's int8). `scales` holds N * ceil(K / block_size) values of
    `scale_type`, and `zero_points`, when present, one per block: ui8 bytes (4-bit values two to a
    byte, each row padded to whole bytes, as MatMulNBits), packed i4 / ui4 like the codes, or values
    of the scales' type. With `k_major` (a DequantizeLinear whose [K, N] output feeds a MatMul
    directly) the three are laid out K-major instead: code (n, k) is element k * N + n of [K, N],
    and the scale and zero point of block b of row n element b * N + n of [ceil(K / block_size), N].
    A weight is (code - zero point) * scale; without zero points the zero point is 2^(bits-1) for ui8
    codes and 0 for i4 / ui4 / i8 codes. The declaration's `blocks` names the block format the
    package stores it in (`getStorageFormat`: the one that holds the same codes); the package builder
    repacks the codes and converts the scales (docs/quantization.md). A declaration without
    `blocks` (rows that are not whole blocks of 32, which ONNX Runtime's quantizer pads and no
    block format holds) is stored dequantized, as its type: (code - zero point) * scale.
  }];
  let parameters = (ins "int64_t":$bits, "int64_t":$block_size, StringRefParameter<"codes initializer">:$codes,
                        "mlir::Type":$code_type,
                        StringRefParameter<"scales initializer">:$scales, "mlir::Type":$scale_type,
                        StringRefParameter<"zero-points initializer or empty", "\"\"">:$zero_points,
                        OptionalParameter<"mlir::Type", "zero points' element type">:$zero_point_type,
                        DefaultValuedParameter<"bool", "false", "codes, scales and zero points K-major">:$k_major);
  let extraClassDeclaration = [{
    /// The block format that holds these codes (q4_0, q4_1 or q8_0), or nullopt when none does
    /// (8-bit codes with zero points: code minus zero point spans -255..255).
    std::optional<BlockFormat> getStorageFormat() const;
    /// The bytes of the codes of an [n, k] weight: MatMulNBits' rows padded to whole blocks, or
    /// n * k packed codes for the element-typed (i4, ui4, i8) forms, whose rows are whole blocks
    /// unless K-major.
    int64_t getCodeBytes(int64_t n, int64_t k) const {
      return codeBytes(getCodeType(), getBits(), getBlockSize(), n, k);
    }
    /// The same for codes of `codeType` before the attribute exists (the raising checks the
    /// initializer's length with it).
    static int64_t codeBytes(mlir::Type codeType, int64_t bits, int64_t blockSize, int64_t n, int64_t k);
    /// The largest N, K and block size accepted: every size computed from them (N x blocks x bytes
    /// per block) stays far inside int64. Real models are orders of magnitude below.
    static constexpr int64_t kMaxDim = int64_t(1) << 30;
  }];
  let genVerifyDecl = 1;
}

#endif // HELM_ATTRS_TD
