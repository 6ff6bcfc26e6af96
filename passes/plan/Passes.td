//===- Passes.td - HELM plan passes -*- tablegen -*-===//
//
// The planning: per-unit costs and the CPU/GPU split phase, in pipeline order (buildPlanPipeline in Passes.cpp).
//
#ifndef HELM_PASSES_PLAN_PASSES_TD
#define HELM_PASSES_PLAN_PASSES_TD

include "mlir/Pass/PassBase.td"

def QuantizeWeights : Pass<"helm-quantize-weights", "mlir::ModuleOp"> {
  let summary = "Choose the block format each weight is stored in (compile-time quantization)";
  let description = [{
    Marks the weights the package will store quantized with `blocks = #helm.blocks<format = ...,
    row_dim = ...>`: every 2-D float weight whose every use is the weight of a `helm.linear` or
    `helm.lm_head`, or the table of a `helm.embed`, all agreeing on which dimension holds the rows
    (output features or tokens). Norm weights, biases and constants stay as they are. Nothing is
    read: the package builder quantizes the bytes as it writes them, one tensor at a time. Runs
    before helm-annotate-costs, so the costs and the plan count the quantized bytes.

    `format` is one block format for every such weight (q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k,
    q4_k, q5_k, q6_k: the contract table's formats helmc quantizes to) or the
    mixed recipe q4_k_m: q6_k for the output head (the tied embedding table too), for the attention
    V projection and the FFN down projection of the blocks i of n where i < n/8, i >= 7n/8 or
    (i - n/8) % 3 == 2, q5_k for a fused QKV projection, q4_k for everything else (llama.cpp's
    Q4_K_M); or q5_k_m, the same with q5_k as the base and q6_k for a fused QKV projection
    (llama.cpp's Q5_K_M); or q3_k_m: q6_k for the head, q5_k for the V projections of the first
    two blocks and the down projections of the first sixteenth, q4_k for the other V and down
    projections, the attention output and a fused QKV projection, q3_k elsewhere (llama.cpp's
    Q3_K_M). A row that is not a whole number of its format's blocks (the k-quants hold 256
    weights) takes a 32-weight format of at least as many bits instead, as llama.cpp's
    llama-quantize does: q2_k and q3_k fall back to q4_0, q4_k to q5_0, q5_k to q5_1, q6_k to q8_0;
    rows that are not a
    multiple of 32 stay in their source dtype.

    After: `helm.weight_decl @w : tensor<64x128xf32> {blocks = #helm.blocks<format = q8_0, row_dim = 1>, ...}`.
  }];
  let options = [
    Option<"format", "format", "std::string", "\"q8_0\"",
           "Block format (q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k) or mixed recipe (q3_k_m, q4_k_m, q5_k_m)">,
  ];
  let dependentDialects = ["::helm::HelmDialect"];
}

def AnnotateCosts : Pass<"helm-annotate-costs", "mlir::ModuleOp"> {
  let summary = "Attach per-unit costs from shapes and dtypes (thesis 4.1.1)";
  let description = [{
    On every `helm.unit`, a `helm.cost = #helm.unit_cost<...>`: `param_bytes` (weight bytes read
    per decode step; the embedding reads only its B gathered rows), `resident_bytes` (weights the unit
    keeps on its device), `act_bytes` (output activation B x width x dtype), `kv_bytes_per_token`
    (2 h_kv d_h dtype for a block), `flops_decode` (2B x linear weights + 4B h_a d_h c, eq. 4.9 and
    4.11) and `flops_prefill` (2BS x linear weights + 2B h_a d_h S(S+1)), plus the pieces the
    partitioner re-costs. The options used are recorded in the module's
    `helm.cost_options = #helm.cost_options<...>`. No weight bytes are read.

    After: `helm.unit block[1] ... {helm.cost = #helm.unit_cost<param_bytes = 148096, ...>}`.
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

    After: `helm.unit block[1] ... {helm.device = 0 : i32}` (cpu) and `helm.plan = #helm.plan<chosen_k = 21, ...>`.
  }];
  let options = [
    Option<"objective", "objective", "std::string", "\"decode\"", "decode or prefill">,
    Option<"kvOffload", "kv-offload", "bool", "true", "KV cache may spill to host RAM">,
    Option<"vramReserve", "vram-reserve", "double", "-1", "VRAM bytes kept free (default: the profile's)">,
    Option<"forceSplit", "force-split", "int64_t", "-1", "Take this split k instead of the cheapest">,
    Option<"streamPrefill", "stream-prefill", "bool", "false",
           "Plan prompts past the crossover with the CPU units' weights streamed to the GPU (two staging slots kept on it)">,
    Option<"cpuAttention", "cpu-attention", "bool", "false",
           "Let decode run GPU blocks' attention cores on the CPU beside their KV in host RAM, as many as is fastest">,
  ];
  let dependentDialects = ["::helm::HelmDialect"];
}

#endif
