//===- HelmOps.td - HELM operations -----------------------------*- tablegen -*-===//
#ifndef HELM_OPS_TD
#define HELM_OPS_TD

include "HelmDialect.td"
include "HelmAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

//===----------------------------------------------------------------------===//
// Weights and constants
//===----------------------------------------------------------------------===//

def Helm_WeightDeclOp : Helm_Op<"weight_decl", [Symbol, IsolatedFromAbove]> {
  let summary = "Declares a model weight and where its bytes are stored";
  let description = [{
    A weight's shape, element type and storage, never its bytes. `location` is the external-data
    file (relative to the model file) or empty when the bytes are inline in the ONNX file;
    `offset`/`length` locate them in that file (`offset` is -1 for inline data, which the importer
    keeps in its weight store). `onnx_name` is the initializer's name in the source model.
    `blocks` (set by helm-quantize-weights) says the package stores it quantized. `onnx_blocks`
    (set when raising MatMulNBits) says the weight arrives quantized as ONNX blocked integers;
    `onnx_name`, `location`, `offset` and `length` are then those of its codes initializer, the
    declared type [N, K] has the scales' element type, and `blocks` is always set.
    `prepacked` (a GGUF tensor in a ggml block type) says the source bytes already are `blocks`'
    rows, [N, K] with `row_dim` 0: `length` is the stored bytes and the package copies them as they
    are; `location` is then the GGUF file and `offset` the tensor's byte in it.

    ```mlir
    helm.weight_decl @model_embed_tokens_weight : tensor<512x64xf32>
        {onnx_name = "model.embed_tokens.weight", location = "model.onnx.data", offset = 0, length = 131072}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttrOf<AnyStaticShapeTensor>:$type,
                   StrAttr:$onnx_name, StrAttr:$location, I64Attr:$offset, I64Attr:$length,
                   OptionalAttr<Helm_BlocksAttr>:$blocks, OptionalAttr<Helm_OnnxBlocksAttr>:$onnx_blocks,
                   UnitAttr:$prepacked);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Bytes the package stores: `length` (the source's bytes), the quantized size when the
    /// weight has `blocks`, or its type's size for ONNX blocks without `blocks` (dequantized).
    int64_t getStoredBytes();
  }];
}

def Helm_WeightOp : Helm_Op<"weight",
    [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Refers to a declared weight";
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$name `:` type($result) attr-dict";
}

def Helm_ConstantOp : Helm_Op<"constant", [Pure, ConstantLike, AllTypesMatch<["value", "result"]>]> {
  let summary = "A small constant (shapes, scalars, rotary frequencies)";
  let description = [{
    Only small tensors (the importer's limit is 64 elements) become constants; anything larger is a
    weight so that model bytes never enter the MLIR context.
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyTensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Helm_NoneOp : Helm_Op<"none", [Pure]> {
  let summary = "Placeholder for an omitted optional ONNX input";
  let results = (outs NoneType:$result);
  let assemblyFormat = "attr-dict";
}

//===----------------------------------------------------------------------===//
// Generic ONNX node (before raising)
//===----------------------------------------------------------------------===//

def Helm_OnnxNodeOp : Helm_Op<"onnx", [Pure]> {
  let summary = "One ONNX node, not yet raised";
  let description = [{
    The importer emits every ONNX node as this generic op; the raising passes replace the patterns
    they recognise with block-level ops. `attrs` holds the node's ONNX attributes (ints, floats,
    strings, tensors as dense attributes when small). ONNX nodes have no side effects, so dead ones
    disappear once the patterns that fed them are raised. A `helm.onnx` op that survives raising is
    an unsupported construct and is reported with its node name, op type and domain.

    ```mlir
    %2 = helm.onnx "MatMul"(%0, %1) {domain = "", node = "/model/layers.0/self_attn/q_proj/MatMul"}
        : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$op_type, StrAttr:$domain, StrAttr:$node,
                   DictionaryAttr:$attrs, Variadic<AnyType>:$inputs);
  let results = (outs Variadic<AnyType>:$outputs);
  let assemblyFormat = [{
    $op_type `(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Integer attribute `name` of the ONNX node, or `dflt` when absent.
    int64_t getIntAttr(llvm::StringRef name, int64_t dflt) const;
    /// Float attribute `name` of the ONNX node, or `dflt` when absent.
    double getFloatAttr(llvm::StringRef name, double dflt) const;
    bool is(llvm::StringRef type, llvm::StringRef dom = "") {
      return getOpType() == type && getDomain() == dom;
    }
  }];
}

//===----------------------------------------------------------------------===//
// Block-level ops
//===----------------------------------------------------------------------===//

def Helm_EmbedOp : Helm_Op<"embed", [Pure]> {
  let summary = "Embedding lookup: rows of the table gathered by token id";
  let description = [{
    The result has the table's element type, or f32 from an f16 / bf16 table (a GGUF file's 16-bit
    token table feeding f32 activations): the rows are widened as they are gathered.
  }];
  let arguments = (ins TensorOf<[AnySignlessInteger]>:$ids, AnyStaticShapeTensor:$table);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$ids `,` $table attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Helm_RmsNormOp : Helm_Op<"rms_norm", [Pure]> {
  let summary = "RMSNorm over groups of the last dimension";
  let description = [{
    `y = x / sqrt(mean(x^2) + epsilon) * gamma`, where the mean runs over consecutive groups of
    `size(gamma)` elements of the last dimension. A group equal to the hidden size is the usual
    RMSNorm; a group equal to the head dimension is Qwen3's per-head q/k norm.
  }];
  let arguments = (ins AnyTensor:$input, AnyStaticShapeTensor:$gamma, F64Attr:$epsilon);
  let results = (outs AnyTensor:$result);
  let assemblyFormat = "$input `,` $gamma attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Helm_LinearOp : Helm_Op<"linear", [Pure]> {
  let summary = "Dense projection y = x W (+ b) over the last dimension";
  let description = [{
    `transpose_weight` says the weight is stored [N, K] (out, in), as in Hugging Face checkpoints and
    `Gemm(transB=1)`; otherwise it is [K, N] as an ONNX MatMul operand.
  }];
  let arguments = (ins AnyTensor:$input, AnyStaticShapeTensor:$weight,
                   Optional<AnyStaticShapeTensor>:$bias, BoolAttr:$transpose_weight);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getInFeatures();
    int64_t getOutFeatures();
  }];
}

def Helm_SplitOp : Helm_Op<"split", [Pure]> {
  let summary = "Splits the last dimension into consecutive pieces (fused qkv, gate_up)";
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($results)";
  let hasVerifier = 1;
}

def Helm_RopeOp : Helm_Op<"rope", [Pure]> {
  let summary = "Rotary position embedding applied per head";
  let description = [{
    The input's last dimension is heads × `head_dim`; the first `rotary_dim` channels of every head
    rotate with frequencies `theta^(-2i/rotary_dim) / freq_factors[i]`. `freq_factors`
    (rotary_dim / 2 positive values; absent: all 1) stretch the wavelengths: Llama 3's
    `rope_freqs` and linear position scaling. `positions` ([batch, seq] integers) gives each
    token's position; when absent a token's position is its index after the cached tokens. `theta`
    is absent only in a shape-only import, where the frequencies live in weight data not read.
  }];
  let arguments = (ins AnyTensor:$input, Optional<TensorOf<[AnySignlessInteger]>>:$positions,
                   I64Attr:$head_dim, I64Attr:$rotary_dim, OptionalAttr<F64Attr>:$theta,
                   Helm_RopeStyleAttr:$style, OptionalAttr<DenseF32ArrayAttr>:$freq_factors);
  let results = (outs AnyTensor:$result);
  let assemblyFormat = [{
    $input (`positions` $positions^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Helm_AttentionOp : Helm_Op<"attention",
    [Pure, AttrSizedOperandSegments]> {
  let summary = "Causal grouped-query attention with an optional KV cache";
  let description = [{
    `q` is [B, S, num_heads × head_dim]; `k`, `v` are [B, S, num_kv_heads × head_dim] (keys already
    rotated). With `past_key`/`past_value` ([B, num_kv_heads, P, head_dim]) the new keys and values are
    appended and returned as `present_key`/`present_value` ([B, num_kv_heads, P + S, head_dim]); query
    i attends to all cached tokens and to new tokens ≤ i. With `sliding_window` = W a query at
    position p sees only keys at positions p - W < t ≤ p (Mistral). Query head h reads key/value
    head h / (num_heads / num_kv_heads). The result is [B, S, num_heads × head_dim]. `scale` is
    absent only in a shape-only import whose scaling constants live in unread weight data. With
    `softcap` = c each scaled score s becomes c · tanh(s / c) before the softmax (Gemma 2).
  }];
  let arguments = (ins AnyRankedTensor:$q, AnyRankedTensor:$k, AnyRankedTensor:$v,
                   Optional<AnyRankedTensor>:$past_key, Optional<AnyRankedTensor>:$past_value,
                   I64Attr:$num_heads, I64Attr:$num_kv_heads, I64Attr:$head_dim, OptionalAttr<F64Attr>:$scale,
                   OptionalAttr<I64Attr>:$sliding_window, OptionalAttr<F64Attr>:$softcap);
  // `present` is empty without a cache, else [present_key, present_value].
  let results = (outs AnyRankedTensor:$result, Variadic<AnyRankedTensor>:$present);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`cache` `(` $past_key^ `,` $past_value `)`)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    mlir::Value getPresentKey() { return getPresent().empty() ? mlir::Value() : getPresent()[0]; }
    mlir::Value getPresentValue() { return getPresent().empty() ? mlir::Value() : getPresent()[1]; }
  }];
}

def Helm_SwigluOp : Helm_Op<"swiglu", [Pure, SameOperandsAndResultType]> {
  let summary = "SwiGLU gate: silu(gate) * up";
  let arguments = (ins AnyRankedTensor:$gate, AnyRankedTensor:$up);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
}

def Helm_GegluOp : Helm_Op<"geglu", [Pure, SameOperandsAndResultType]> {
  let summary = "GeGLU gate: gelu_tanh(gate) * up";
  let description = [{
    `gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3)))`, the tanh form of GELU
    (Gemma's `gelu_pytorch_tanh`).
  }];
  let arguments = (ins AnyRankedTensor:$gate, AnyRankedTensor:$up);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
}

def Helm_ScaleOp : Helm_Op<"scale", [Pure, SameOperandsAndResultType]> {
  let summary = "Multiplication by a constant: y = x * factor";
  let description = [{
    The factor is applied in f32 (Gemma scales its embedding rows by sqrt(hidden size)).
  }];
  let arguments = (ins AnyRankedTensor:$input, F64Attr:$factor);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Helm_SoftcapOp : Helm_Op<"softcap", [Pure, SameOperandsAndResultType]> {
  let summary = "Soft capping: y = cap * tanh(x / cap)";
  let description = [{
    Bounds the values to (-cap, cap) smoothly (Gemma 2's final logits). In f32, as llama.cpp
    computes it: `tanh(x * (1 / cap)) * cap`.
  }];
  let arguments = (ins AnyRankedTensor:$input, F64Attr:$cap);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Helm_AddOp : Helm_Op<"add", [Pure, SameOperandsAndResultType]> {
  let summary = "Residual add";
  let arguments = (ins AnyRankedTensor:$lhs, AnyRankedTensor:$rhs);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Helm_LmHeadOp : Helm_Op<"lm_head", [Pure]> {
  let summary = "Output projection to vocabulary logits";
  let description = [{
    `weight` is [vocab, hidden] when `transpose_weight` (Hugging Face layout; with `tied` it is the
    embedding table itself) or [hidden, vocab].
  }];
  let arguments = (ins AnyRankedTensor:$input, AnyStaticShapeTensor:$weight,
                   BoolAttr:$transpose_weight, BoolAttr:$tied);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Partition units and stage boundaries
//===----------------------------------------------------------------------===//

def Helm_UnitOp : Helm_Op<"unit", [SingleBlock]> {
  let summary = "A partition unit: the embedding, one transformer block, or the output head";
  let description = [{
    The partitioner places whole units on a device. The region reads values from above (the
    residual stream, positions, cache inputs) and yields what later units or the function return.

    ```mlir
    %h1, %pk, %pv = helm.unit block [0] : tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32> {
      ...
      helm.yield %r, %k, %v : tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>
    }
    ```
  }];
  let arguments = (ins Helm_UnitKind:$kind, I64Attr:$index);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$kind `[` $index `]` (`:` type($results)^)? $body attr-dict";
  let hasVerifier = 1;
}

def Helm_YieldOp : Helm_Op<"yield", [Pure, Terminator, HasParent<"UnitOp">, ReturnLike]> {
  let summary = "Values a partition unit hands on";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

def Helm_TransferOp : Helm_Op<"transfer", [Pure, SameOperandsAndResultType]> {
  let summary = "Moves an activation across the CPU/GPU link at a stage boundary";
  let arguments = (ins AnyRankedTensor:$input, Helm_Device:$from, Helm_Device:$to);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input $from `->` $to attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // HELM_OPS_TD
