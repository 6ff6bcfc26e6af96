//===- Passes.td - HELM codegen passes -*- tablegen -*-===//
//
// The code generation: the stage split and the lowering of each stage phase, in pipeline order (buildCpuBufferizePipeline and its siblings in Passes.cpp).
//
#ifndef HELM_PASSES_CODEGEN_PASSES_TD
#define HELM_PASSES_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

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

    Block units whose code is the same but for their weights and KV layers (the layers of a
    transformer) share one private function, `@<stage>_unit<n>` (`helm.unit_function`,
    `no_inline`): `(ctx, positions, first KV layer {helm.kv_layer_base}, inputs...,
    weights...) -> results`, where a weight argument stored in blocks carries its format
    (`helm.weight_blocks`) and each attention's `helm.kv_layer` counts from the base. The stage
    calls it once per unit with that unit's weights and first layer, so code generation compiles a
    layer once instead of once per layer. Two units are the same when their functions are
    structurally equal (OperationEquivalence, locations aside); a unit whose code no other unit
    shares stays inline (`share-unit-code=false`: all do).

    Before: `func.func @main(%ids, %mask, %pos, %past...) { helm.unit embedding[0] ... }`.
    After (k = 2 of 4): `func.func @helm_cpu_stage(%ctx: !llvm.ptr, %ids: tensor<?x?xi64>,
             %pos: tensor<?x?xi64>) -> tensor<?x?x64xf32>` ending in `helm.transfer %h cpu -> gpu`,
             and `func.func @helm_gpu_stage(%ctx: !llvm.ptr, %x: tensor<?x?x64xf32>,
             %pos: tensor<?x?xi64>) -> tensor<?x1x256xf32>`.
  }];
  let options = [
    Option<"shareUnitCode", "share-unit-code", "bool", /*default=*/"true",
           "Block units with the same code call one shared function">
  ];
  let dependentDialects = ["::helm::HelmDialect", "mlir::LLVM::LLVMDialect", "mlir::tensor::TensorDialect",
                           "mlir::arith::ArithDialect", "mlir::func::FuncDialect"];
}

def LowerToLinalg : Pass<"helm-lower-to-linalg", "mlir::ModuleOp"> {
  let summary = "Lower stage functions from HELM ops to linalg on tensors and kernel calls";
  let description = [{
    Elementwise and reduction glue (rms_norm, rope, swiglu, add, embed, bias) becomes `linalg.generic`
    on tensors computing in f32; matrix work (linear, lm_head) and attention become calls into the
    runtime's C ABI (`helm_k_linear`, `helm_rt_attention`, declared in contract/helm_contract.h)
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
    `helm_dev_swiglu`, `helm_dev_add`, `helm_dev_convert`, `helm_dev_constant`; declared in
    contract/helm_contract.h, their arithmetic in runtime/device/DeviceOps.h) on raw pointers of
    device buffers (`memref.alloc`, served by the runtime from the device). No linalg is emitted: the host code computes only sizes from B and S.
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

def FreeBuffers : Pass<"helm-free-buffers", "mlir::ModuleOp"> {
  let summary = "Free each stage-local buffer right after its last use";
  let description = [{
    After bufferization the stage functions are straight-line code. Every `memref.alloc` whose
    aliases (views, casts, reshapes) neither leave the function nor reach an op this pass does not
    understand gets a `memref.dealloc` after the last use of any alias in the function body, so a
    long prefill holds only the live activations, not every intermediate of every layer. A unit
    function (`helm.unit_function`) that returns a buffer it allocated hands it to its caller,
    which frees that call result the same way.

    Before: `%a = memref.alloc ... linalg.generic ins(%a) ... return`.
    After:  `%a = memref.alloc ... linalg.generic ins(%a) ... memref.dealloc %a ... return`.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

def ApproximateMath : Pass<"helm-approximate-math", "mlir::func::FuncOp"> {
  let summary = "Expand f32 math.exp and math.tanh (SwiGLU's sigmoid, GeGLU's GELU, soft caps) into MLIR's polynomial approximations";
  let description = [{
    LLVM lowers a vector `math.exp` or `math.tanh` to one libm call per lane: SwiGLU's sigmoid
    over a decode batch's [16, 3072] rows, or GeGLU's tanh over a prefill's [128, 2048], then runs
    as scalar calls on the thread that runs the stage while the kernel threads wait. The polynomial
    forms (exp: Cephes' range reduction by ln 2, a degree-7 polynomial and a scaling by 2^n; tanh:
    a rational approximation, clamped to ±1 beyond ±7.9, from arith and math.fma ops) stay in
    vector registers. Only `math.exp` and `math.tanh` on f32 scalars and vectors are rewritten;
    rsqrt, sin and cos keep their exact lowering. Their errors against correctly rounded results
    are a few ulp, within what the model tests allow (docs/architecture.md, the CPU stage's glue).

    Before: `%e = math.exp %x : vector<1x1x16xf32>`.
    After:  `math.floor`, `math.fma`, `arith.mulf` ... `arith.bitcast` on vector<1x1x16xf32>, no
            `math.exp`.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::math::MathDialect", "mlir::vector::VectorDialect"];
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
