// RUN: helm-opt %s --helm-partition | FileCheck %s --check-prefix=OFF
// RUN: helm-opt %s --helm-partition=stream-prefill=true | FileCheck %s --check-prefix=ON
// RUN: not helm-opt %s --helm-partition="stream-prefill=true vram-reserve=1000" 2>&1 | FileCheck %s --check-prefix=NONE

// Four units without weight declarations (each streams as one piece of its resident bytes) on a
// 3000-byte GPU: k = 0 needs 5000 B, k = 1 4000 B, k = 2 2500 B (the cheapest that fits).
// Streaming the CPU units of a split (not the embedding) takes two slots of its largest unit,
// 2 x 1500 B: k = 2 then needs 5500 B, k = 3 4000 B, and only k = 4 (all on the CPU, its blocks
// and head streamed: 1500 + 1500 + 1000 B) fits.
// OFF: helm.plan = #helm.plan<chosen_k = 2,
// OFF-SAME: <k = 2, feasible = true,{{.*}}stream_possible = true, stream_reason = "GPU needs 5500 B with the staging slots, 3000 B available", {{.*}}stream_slot_bytes = 3.0e+03, streamed_bytes = 1.5e+03
// ON: helm.plan = #helm.plan<chosen_k = 4, {{.*}}kv_offload = true, stream_prefill = true, sliced = <possible = false, reason = "the model has no gated FFN">, candidates =
// ON-SAME: <k = 1, feasible = false, reason = "GPU needs 4000 B, 3000 B available"
// ON-SAME: <k = 2, feasible = false, reason = "GPU needs 5500 B with the staging slots, 3000 B available"
// ON-SAME: <k = 4, feasible = true,{{.*}}stream_possible = true, stream_fits = true, {{.*}}stream_slot_bytes = 3.0e+03, streamed_bytes = 3.0e+03
// NONE: error: no feasible plan with streamed prefill: even all on the CPU the GPU needs 3000 B with the staging slots, 2000 B available (plan without --stream-prefill)
module attributes {
  helm.cost_options = #helm.cost_options<batch = 1, context_tokens = 0, prompt_len = 1>,
  helm.target = #helm.target<name = "toy",
      cpu = #helm.cpu<dram_bw_gbs = 10.0, l3_bytes = 0.0, l3_bw_gbs = 10.0, p_dec_gflops = 10.0, p_pre_gflops = 10.0,
                      ram_bytes = 1.0e9, overhead_ms_per_block = 0.0>,
      gpu = #helm.gpu<backend = cuda, vram_bytes = 3000.0, reserved_bytes = 0.0, mem_bw_gbs = 100.0, p_dec_gflops = 100.0,
                      p_pre_gflops = 100.0, overhead_ms_per_block = 0.0>,
      link = #helm.link<bw_gbs = 100.0, latency_us = 0.0>>
} {
  func.func @main(%x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
    %a = helm.unit embedding [0] : tensor<?x?x8xf32> {
      helm.yield %x : tensor<?x?x8xf32>
    } {helm.cost = #helm.unit_cost<param_bytes = 1000, resident_bytes = 1000, act_bytes = 100, kv_bytes_per_token = 0,
       flops_decode = 0, flops_prefill = 0, proj_flops_decode = 0.0, attn_flops_per_token = 0.0, proj_flops_prefill = 0.0,
       attn_flops_prefill = 0.0, prefill_param_bytes = 0, prefill_act_bytes = 100>}
    %b = helm.unit block [1] : tensor<?x?x8xf32> {
      helm.yield %a : tensor<?x?x8xf32>
    } {helm.cost = #helm.unit_cost<param_bytes = 1500, resident_bytes = 1500, act_bytes = 100, kv_bytes_per_token = 0,
       flops_decode = 0, flops_prefill = 0, proj_flops_decode = 0.0, attn_flops_per_token = 0.0, proj_flops_prefill = 0.0,
       attn_flops_prefill = 0.0, prefill_param_bytes = 1500, prefill_act_bytes = 100>}
    %c = helm.unit block [2] : tensor<?x?x8xf32> {
      helm.yield %b : tensor<?x?x8xf32>
    } {helm.cost = #helm.unit_cost<param_bytes = 1500, resident_bytes = 1500, act_bytes = 100, kv_bytes_per_token = 0,
       flops_decode = 0, flops_prefill = 0, proj_flops_decode = 0.0, attn_flops_per_token = 0.0, proj_flops_prefill = 0.0,
       attn_flops_prefill = 0.0, prefill_param_bytes = 1500, prefill_act_bytes = 100>}
    %d = helm.unit head [3] : tensor<?x?x8xf32> {
      helm.yield %c : tensor<?x?x8xf32>
    } {helm.cost = #helm.unit_cost<param_bytes = 1000, resident_bytes = 1000, act_bytes = 100, kv_bytes_per_token = 0,
       flops_decode = 0, flops_prefill = 0, proj_flops_decode = 0.0, attn_flops_per_token = 0.0, proj_flops_prefill = 0.0,
       attn_flops_prefill = 0.0, prefill_param_bytes = 1000, prefill_act_bytes = 100>}
    return %d : tensor<?x?x8xf32>
  }
}
