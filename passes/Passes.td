//===- Passes.td - HELM passes ----------------------------------*- tablegen -*-===//
#ifndef HELM_PASSES_TD
#define HELM_PASSES_TD

include "mlir/Pass/PassBase.td"

def CheckRaised : Pass<"helm-check-raised", "mlir::func::FuncOp"> {
  let summary = "Erase dead ONNX nodes and reject any that raising left behind";
  let description = [{
    After raising, the only `helm.onnx` ops still alive are constructs HELM does not support. Dead
    ones (mask construction, shape arithmetic feeding raised patterns) are erased; a live one is
    reported as `unsupported ONNX node 'NAME' (OP, domain 'D')` and the pass fails.

    Before: `%m = helm.onnx "Trilu"(...)` with no users, `%t = helm.onnx "Tanh"(%x)` returned.
    After: the first is gone; the second is an error naming the node.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def StageSplit : Pass<"helm-stage-split", "mlir::ModuleOp"> {
  let summary = "Outline the placed units of @main into per-device stage functions";
  let description = [{
    Static graph reconstruction (thesis 4.1.4). The plan is a split point k: units [0, k) carry
    `helm.device` cpu, units [k, N) gpu (no plan: all CPU). The units are cloned, in order, into
    `@helm_cpu_stage` (k > 0) and `@helm_gpu_stage` (k < N); single-device plans get one stage.
    A stage takes the runtime's context pointer, its input (token ids [B, S] for the first stage,
    the boundary activation [B, S, H] for the GPU stage) and positions [B, S]. The last stage
    returns the logits of the last position [B, 1, V]; the CPU stage of a split plan returns the
    boundary activation through one `helm.transfer cpu -> gpu`. The boundary must be exactly one
    value (the hidden state). The model's own KV-cache inputs and outputs are dropped: every
    `helm.attention` gets a `helm.kv_layer` index, counted per stage, and reads and extends its
    stage's KV cache. Rotary embeddings read the stage's positions. `@main` is erased.

    Before: `func.func @main(%ids, %mask, %pos, %past...) { helm.unit embedding[0] ... }`.
    After (k = 2 of 4): `func.func @helm_cpu_stage(%ctx: !llvm.ptr, %ids: tensor<?x?xi64>,
             %pos: tensor<?x?xi64>) -> tensor<?x?x64xf32>` ending in `helm.transfer %h cpu -> gpu`,
             and `func.func @helm_gpu_stage(%ctx: !llvm.ptr, %x: tensor<?x?x64xf32>,
             %pos: tensor<?x?xi64>) -> tensor<?x1x256xf32>`.
  }];
  let dependentDialects = ["::helm::HelmDialect", "mlir::LLVM::LLVMDialect", "mlir::tensor::TensorDialect",
                           "mlir::arith::ArithDialect"];
}

def LowerToLinalg : Pass<"helm-lower-to-linalg", "mlir::ModuleOp"> {
  let summary = "Lower stage functions from HELM ops to linalg on tensors and kernel calls";
  let description = [{
    Elementwise and reduction glue (rms_norm, rope, swiglu, add, embed, bias) becomes `linalg.generic`
    on tensors computing in f32; matrix work (linear, lm_head) and attention become calls into the
    runtime's C ABI (`helm_k_linear`, `helm_rt_attention`, documented in kernels/cpu/helm_kernels.h)
    on raw pointers of contiguous buffers. Weights become views of the runtime's weight table
    (`helm_rt_weight(ctx, id)`); each `helm.weight_decl` gets its `helm.tensor_id`. The stage gets the
    flat C signature `(ctx, ids*, positions*, logits_out*, B, S)`.

    Before: `%y = helm.swiglu %g, %u : tensor<?x?x128xf32>`.
    After:  `%y = linalg.generic {...} ins(%g, %u) outs(%e) { arith.negf, math.exp, ... }`.
  }];
  let dependentDialects = ["::helm::HelmDialect", "mlir::LLVM::LLVMDialect", "mlir::tensor::TensorDialect",
                           "mlir::arith::ArithDialect", "mlir::math::MathDialect", "mlir::linalg::LinalgDialect",
                           "mlir::bufferization::BufferizationDialect", "mlir::memref::MemRefDialect",
                           "mlir::func::FuncDialect"];
}

def LowerToDeviceCalls : Pass<"helm-lower-to-device-calls", "mlir::ModuleOp"> {
  let summary = "Lower a device stage to host code that calls device kernels (helm_dev_*)";
  let description = [{
    The GPU stage of a CUDA package: every HELM op of the stage function whose `helm.stage` is
    `stage-device` becomes one call of the device-kernel ABI (`helm_dev_embed`, `helm_dev_rms_norm`,
    `helm_dev_linear`, `helm_dev_copy_columns`, `helm_dev_rope`, `helm_dev_attention`,
    `helm_dev_swiglu`, `helm_dev_add`, `helm_dev_convert`, `helm_dev_constant`; documented in
    runtime/core/DeviceOps.h) on raw pointers of device buffers (`memref.alloc`, served by the
    runtime from the device). No linalg is emitted: the host code computes only sizes from B and S.
    Split pieces and the head's last-position slice become column copies; a gamma or bias in a
    wider type than the activation is converted to it once per call; graph constants are handed to
    `helm_dev_constant`, which keeps one device copy. The stage gets the same C signature and ABI
    record as helm-lower-to-linalg gives, and the attribute `helm.device_calls`. An op with no
    device kernel is an error naming it.

    Before: `%y = helm.swiglu %g, %u : tensor<?x?x128xf16>`.
    After:  `%m = memref.alloc(%b, %s) : memref<?x?x128xf16>` and
            `call @helm_dev_swiglu(%ctx, %gp, %up, %mp, %c1_i32, %n)`.
  }];
  let options = [
    Option<"stageDevice", "stage-device", "std::string", /*default=*/"\"gpu\"",
           "The `helm.stage` value of the stage functions to lower">
  ];
  let dependentDialects = ["::helm::HelmDialect", "mlir::LLVM::LLVMDialect", "mlir::tensor::TensorDialect",
                           "mlir::arith::ArithDialect", "mlir::bufferization::BufferizationDialect",
                           "mlir::memref::MemRefDialect", "mlir::func::FuncDialect"];
}

def FreeBuffers : Pass<"helm-free-buffers", "mlir::func::FuncOp"> {
  let summary = "Free each stage-local buffer right after its last use";
  let description = [{
    After bufferization the stage functions are straight-line code. Every `memref.alloc` whose
    aliases (views, casts, reshapes) neither leave the function nor reach an op this pass does not
    understand gets a `memref.dealloc` after the last use of any alias in the function body, so a
    long prefill holds only the live activations, not every intermediate of every layer.

    Before: `%a = memref.alloc ... linalg.generic ins(%a) ... return`.
    After:  `%a = memref.alloc ... linalg.generic ins(%a) ... memref.dealloc %a ... return`.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

def StridedCopiesToLinalg : Pass<"helm-strided-copies-to-linalg", "mlir::func::FuncOp"> {
  let summary = "Turn memref.copy from or to strided views into linalg.copy";
  let description = [{
    Contiguous copies lower to memcpy; strided ones would lower to a call into MLIR's C runner
    utilities, which a stage's shared object cannot resolve. They become `linalg.copy` (loops).

    Before: `memref.copy %slice, %buf : memref<?x8xf32, strided<[24, 1], offset: ?>> to memref<?x8xf32>`.
    After:  `linalg.copy ins(%slice : ...) outs(%buf : memref<?x8xf32>)`.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect", "mlir::memref::MemRefDialect"];
}

def VectorizeGlue : Pass<"helm-vectorize-glue", "mlir::func::FuncOp"> {
  let summary = "Tile every glue linalg.generic to one row x vector-width and vectorize it (masked)";
  let description = [{
    The glue of a stage (norms, rope, SwiGLU, residual adds, embedding gathers) becomes vector code:
    each `linalg.generic` (on tensors or on buffers; the CPU pipeline runs it after bufferization) is
    tiled with sizes [1, ..., 1, w] (scf.for loops), w the widest
    width <= vector-width dividing the static row (so no tile needs a mask), reductions over a static
    group untiled, and the tile is vectorized. A dynamic innermost loop stays scalar (MLIR 22's
    masked vectorization of such tiles does not verify; stage rows are always static).
    Ops whose body gathers (`tensor.extract`: embedding rows, rope's partner lane) stay scalar: MLIR
    22's masked n-D gather vectorization produces ill-typed IR.

    Before: `linalg.generic {iterator_types = ["parallel", "parallel", "parallel"]} ins(%a, %b ...)`.
    After:  `scf.for ... step %c16 { vector.transfer_read ...; arith.addf ... : vector<1x1x16xf32> }`.
  }];
  let options = [
    Option<"vectorWidth", "vector-width", "int64_t", "16", "Elements of the innermost loop per vector">,
  ];
  let dependentDialects = ["mlir::linalg::LinalgDialect", "mlir::vector::VectorDialect",
                           "mlir::scf::SCFDialect", "mlir::tensor::TensorDialect", "mlir::arith::ArithDialect"];
}

#endif

def RaiseLinear : Pass<"helm-raise-linear", "mlir::func::FuncOp"> {
  let summary = "MatMul/Gemm with a weight operand (+ bias Add) to helm.linear";
  let description = [{
    Recognises `MatMul(x, W)`, `MatMul(x, Transpose(W))` and `Gemm(x, W, b)` where `W` is a declared
    weight (through Cast/Identity), and folds a following `Add(y, bias)` whose other operand is a
    1-D weight or constant of the output width.

    Before: `%y = helm.onnx "MatMul"(%x, %w)`, `%z = helm.onnx "Add"(%y, %b)`.
    After:  `%z = helm.linear %x, %w bias %b {transpose_weight = false}`.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def RaiseEmbedding : Pass<"helm-raise-embedding", "mlir::func::FuncOp"> {
  let summary = "Gather of token ids from a weight table to helm.embed";
  let description = [{
    Before: `%h = helm.onnx "Gather"(%table, %ids) {attrs = {axis = 0}}` with `%table` a [vocab, hidden]
    weight. After: `%h = helm.embed %ids, %table`.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def RaiseRmsNorm : Pass<"helm-raise-rms-norm", "mlir::func::FuncOp"> {
  let summary = "Decomposed RMSNorm (Pow/ReduceMean/Add/Sqrt/Div/Mul) to helm.rms_norm";
  let description = [{
    Matches `gamma * (x * 1/sqrt(mean(x^2, -1) + eps))` in the forms exporters emit: the square as
    Pow(x, 2) or Mul(x, x), the inverse root as Reciprocal(Sqrt), Div(1, Sqrt), Div(x, Sqrt) or
    Rsqrt-like Pow(., -0.5), with precision Casts anywhere on the way, and the ReduceMean axes as an
    attribute (opset < 18) or an input.

    After: `%y = helm.rms_norm %x, %gamma {epsilon = 1e-06}`.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def RaiseSwiglu : Pass<"helm-raise-swiglu", "mlir::func::FuncOp"> {
  let summary = "silu(gate) * up (Sigmoid/Mul) to helm.swiglu";
  let description = [{
    Before: `%s = Sigmoid(%g)`, `%a = Mul(%g, %s)`, `%y = Mul(%a, %u)`. After: `%y = helm.swiglu %g, %u`.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def RaiseResidual : Pass<"helm-raise-residual", "mlir::func::FuncOp"> {
  let summary = "Adds of two raised activations to helm.add";
  let description = [{
    After the projection and attention patterns are raised, an ONNX `Add` whose operands are both
    block-level HELM values of the same [batch, seq, hidden] type is a residual connection.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def RaiseLmHead : Pass<"helm-raise-lm-head", "mlir::func::FuncOp"> {
  let summary = "The projection that produces the returned logits to helm.lm_head";
  let description = [{
    The `helm.linear` whose result (through casts) is returned and whose output width is the
    vocabulary becomes `helm.lm_head`; `tied` is set when its weight is the embedding table.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def RaiseRope : Pass<"helm-raise-rope", "mlir::func::FuncOp"> {
  let summary = "Rotary embedding (Slice/Neg/Concat/Mul/Add) to helm.rope";
  let description = [{
    Matches `x * cos + rotate_half(x) * sin` with `rotate_half(x) = Concat(-x[..., d/2:], x[..., :d/2])`
    (in either operand order). The rotation base `theta` is recovered from the `inv_freq` constant
    that feeds cos/sin (`inv_freq[i] = theta^(-2i/d)`); frequencies that do not follow that law
    (scaled rotary variants) are reported. A graph input named `position_ids` that feeds cos/sin
    becomes the op's `positions` operand.

    After: `%r = helm.rope %x positions %pos {head_dim = 16, rotary_dim = 16, style = #helm.rope_style<half>, theta = 1.0e+04}`.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def RaiseAttention : Pass<"helm-raise-attention", "mlir::func::FuncOp"> {
  let summary = "Softmax(QK^T * scale + mask) V with GQA and KV concat to helm.attention";
  let description = [{
    Anchored on Softmax: walks back through the mask Add/Where and scalar scaling to the scores
    MatMul, then traces q, k and v through layout ops (Reshape, Transpose, GQA Unsqueeze/Expand),
    rotary embedding, per-head RMSNorm and the `past_key_values` Concat to their projections. The
    chains are rebuilt on the [batch, seq, heads × head_dim] projections, the attention output feeds
    the output projection directly, and `present` outputs are replaced by the op's cache results.
    The mask subgraph is taken as causal (with padding); it dies with the pattern.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def FormUnits : Pass<"helm-form-units", "mlir::func::FuncOp"> {
  let summary = "Group raised ops into partition units: embedding, one per block, output head";
  let description = [{
    A block is delimited by the residual stream: an op belongs to block floor(R / 2), where R counts
    the residual `helm.add`s on its longest path from the embedding; ops past the last block form
    the head. Weights and constants move into (or are cloned into) the units that use them. Every
    block must hold exactly one attention and two residual adds.

    After: `helm.unit embedding [0]`, `helm.unit block [1]`, ..., `helm.unit head [N+1]`.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def RaiseFusedNorms : Pass<"helm-raise-fused-norms", "mlir::func::FuncOp"> {
  let summary = "Fused RMSNorm ops (ONNX 23, ONNX Runtime contrib) to helm.rms_norm / helm.add";
  let description = [{
    `RMSNormalization` (ONNX 23) and ONNX Runtime's `SimplifiedLayerNormalization` (written in the
    default or the `com.microsoft` domain) over the last axis become `helm.rms_norm`.
    `com.microsoft.SkipSimplifiedLayerNormalization(input, skip, gamma)` becomes a residual
    `helm.add(input, skip)` feeding `helm.rms_norm`; its fourth output (the sum) is the add.
    Runs after the projections are raised so that the skip operands are typed activations.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def RaiseSplit : Pass<"helm-raise-split", "mlir::func::FuncOp"> {
  let summary = "Slices/Split of a fused projection (qkv, gate_up) to helm.split";
  let description = [{
    Phi-3 style fused projections compute q, k and v (or gate and up) in one `helm.linear` and cut
    the result along the last axis with `Slice` ops or a `Split`. When the pieces tile the output
    exactly, they become one `helm.split` with the piece sizes.

    Before: `%q = Slice(%qkv, 0, 96, axis 2)`, `%k = Slice(%qkv, 96, 128, axis 2)`, ...
    After:  `%q, %k, %v = helm.split %qkv {sizes = array<i64: 96, 32, 32>}`.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def AnnotateCosts : Pass<"helm-annotate-costs", "mlir::ModuleOp"> {
  let summary = "Attach per-unit costs from shapes and dtypes (thesis 4.1.1)";
  let description = [{
    On every `helm.unit`: `param_bytes` (weight bytes read per decode step; the embedding reads only
    its B gathered rows), `resident_bytes` (weights the unit keeps on its device), `act_bytes` (output
    activation B x width x dtype), `kv_bytes_per_token` (2 h_kv d_h dtype for a block),
    `flops_decode` (2B x linear weights + 4B h_a d_h c, eq. 4.9 and 4.11) and `flops_prefill`
    (2BS x linear weights + 2B h_a d_h S(S+1)), plus `helm.cost_terms` with the pieces the partitioner
    re-costs. The options used are recorded in the module's `helm.cost_options`. No weight bytes are
    read.

    After: `helm.unit block[1] ... {act_bytes = 8192 : i64, kv_bytes_per_token = 4096 : i64, ...}`.
  }];
  let options = [
    Option<"batch", "batch", "int64_t", "1", "Sequences decoded together (B)">,
    Option<"context", "context", "int64_t", "4096", "Tokens in the KV cache at the costed decode step (c)">,
    Option<"promptLen", "prompt-len", "int64_t", "128", "Prompt length for prefill costs (S)">,
  ];
  let dependentDialects = ["::helm::HelmDialect"];
}

def Partition : Pass<"helm-partition", "mlir::ModuleOp"> {
  let summary = "Choose the CPU/GPU split with the roofline cost model (thesis Algorithm 1)";
  let description = [{
    Reads the module's `helm.target` profile and the units' costs, evaluates every split k (CPU
    runs units [0, k), GPU the rest) for feasibility (eq. 4.16) and time (eq. 4.7-4.15), marks each
    unit with `helm.device` and records the whole candidate table and the choice in `helm.plan`.
    Fails with a one-line reason when nothing fits.

    After: `helm.unit block[1] ... {helm.device = 0 : i32}` (cpu) and `helm.plan = {chosen_k = 21, ...}`.
  }];
  let options = [
    Option<"objective", "objective", "std::string", "\"decode\"", "decode or prefill">,
    Option<"kvOffload", "kv-offload", "bool", "true", "KV cache may spill to host RAM">,
    Option<"vramReserve", "vram-reserve", "double", "-1", "VRAM bytes kept free (default: the profile's)">,
    Option<"forceSplit", "force-split", "int64_t", "-1", "Take this split k instead of the cheapest">,
  ];
  let dependentDialects = ["::helm::HelmDialect"];
}
