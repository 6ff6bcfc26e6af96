// RUN: helm-opt %s --helm-partition | FileCheck %s
// RUN: helm-opt %s --helm-partition=force-split=3 | FileCheck %s --check-prefix=FORCED
// RUN: not helm-opt %s --helm-partition=force-split=1 2>&1 | FileCheck %s --check-prefix=INFEASIBLE
// RUN: not helm-opt %s --helm-partition=force-split=4 2>&1 | FileCheck %s --check-prefix=RANGE

// Three units and a toy target, costed by hand:
//   VRAM 2000 B: k=0 needs 3500 B, k=1 2500 B (infeasible); k=2 1000 B; k=3 0 B.
//   CPU 10 GB/s, GPU 100 GB/s, link 100 GB/s, no latency, no overhead, c = 0:
//   k=2: T_cpu = (1000 + 1500) B / 10 GB/s = 2.5e-4 ms, T_gpu = 1000 B / 100 GB/s = 1e-5 ms,
//        T_comm = 100 B / 100 GB/s = 1e-6 ms, T_plan = 2.61e-4 ms
//   k=3: T_cpu = 3500 B / 10 GB/s = 3.5e-4 ms  -> k = 2 is chosen.
// The plan is a module attribute, printed first.
// CHECK: helm.plan = #helm.plan<chosen_k = 2, predicted_ms_per_token = 0.000261{{0*[0-9]*}}, objective = "decode", kv_offload = true,
// CHECK-SAME: candidates = <k = 0, feasible = false, reason = "GPU needs 3500 B, 2000 B available"
// CHECK-SAME: <k = 2, feasible = true, t_cpu_ms = 0.00025, t_gpu_ms = 1.0e-05, t_comm_ms = 1.0e-06, t_plan_ms = 0.000261{{0*[0-9]*}},
// The target reads back as it was written, field by field.
// CHECK-SAME: helm.target = #helm.target<name = "toy", cpu = <dram_bw_gbs = 1.0e+01,
// CHECK-SAME: gpu = <backend = cuda, vram_bytes = 2.0e+03,
module attributes {
  helm.cost_options = #helm.cost_options<batch = 1, context_tokens = 0, prompt_len = 1>,
  helm.target = #helm.target<name = "toy",
      cpu = #helm.cpu<dram_bw_gbs = 10.0, l3_bytes = 0.0, l3_bw_gbs = 10.0, p_dec_gflops = 10.0, p_pre_gflops = 10.0,
                      ram_bytes = 1.0e9, overhead_ms_per_block = 0.0>,
      gpu = #helm.gpu<backend = cuda, vram_bytes = 2000.0, reserved_bytes = 0.0, mem_bw_gbs = 100.0, p_dec_gflops = 100.0,
                      p_pre_gflops = 100.0, overhead_ms_per_block = 0.0>,
      link = #helm.link<bw_gbs = 100.0, latency_us = 0.0>>
} {
  func.func @main(%x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
    // CHECK: helm.unit embedding[0]
    // CHECK: helm.device = 0 : i32
    %a = helm.unit embedding [0] : tensor<?x?x8xf32> {
      helm.yield %x : tensor<?x?x8xf32>
    } {helm.cost = #helm.unit_cost<param_bytes = 1000, resident_bytes = 1000, act_bytes = 100, kv_bytes_per_token = 0,
       flops_decode = 0, flops_prefill = 0, proj_flops_decode = 0.0, attn_flops_per_token = 0.0, proj_flops_prefill = 0.0,
       attn_flops_prefill = 0.0, prefill_param_bytes = 0, prefill_act_bytes = 0>}
    // CHECK: helm.unit block[1]
    // CHECK: helm.device = 0 : i32
    %b = helm.unit block [1] : tensor<?x?x8xf32> {
      helm.yield %a : tensor<?x?x8xf32>
    } {helm.cost = #helm.unit_cost<param_bytes = 1500, resident_bytes = 1500, act_bytes = 100, kv_bytes_per_token = 0,
       flops_decode = 0, flops_prefill = 0, proj_flops_decode = 0.0, attn_flops_per_token = 0.0, proj_flops_prefill = 0.0,
       attn_flops_prefill = 0.0, prefill_param_bytes = 0, prefill_act_bytes = 0>}
    // CHECK: helm.unit head[2]
    // CHECK: helm.device = 1 : i32
    %c = helm.unit head [2] : tensor<?x?x8xf32> {
      helm.yield %b : tensor<?x?x8xf32>
    } {helm.cost = #helm.unit_cost<param_bytes = 1000, resident_bytes = 1000, act_bytes = 100, kv_bytes_per_token = 0,
       flops_decode = 0, flops_prefill = 0, proj_flops_decode = 0.0, attn_flops_per_token = 0.0, proj_flops_prefill = 0.0,
       attn_flops_prefill = 0.0, prefill_param_bytes = 0, prefill_act_bytes = 0>}
    return %c : tensor<?x?x8xf32>
  }
}
// FORCED: chosen_k = 3,
// INFEASIBLE: error: --force-split=1 is infeasible: GPU needs 2500 B, 2000 B available
// RANGE: error: --force-split=4 is out of range (0..3 for 3 units)
