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
// CHECK: helm.plan = {candidates = [
// CHECK-SAME: {feasible = false, {{.*}}k = 0 : i64, reason = "GPU needs 3500 B, 2000 B available"
// CHECK-SAME: {feasible = true, {{.*}}k = 2 : i64, reason = "", t_comm_ms = 9.99999{{[0-9]*}}E-7 : f64, t_cpu_ms = 2.5{{0*}}e-04 : f64, t_gpu_ms = 1.0{{0*}}e-05 : f64, t_plan_ms = 2.61{{0*[0-9]*}}E-4 : f64}
// CHECK-SAME: chosen_k = 2 : i64
module attributes {
  helm.cost_options = {batch = 1 : i64, context = 0 : i64, prompt_len = 1 : i64},
  helm.target = {name = "toy", profile = "{\22name\22: \22toy\22, \22cpu\22: {\22dram_bw_gbs\22: 10, \22l3_bytes\22: 0, \22l3_bw_gbs\22: 10, \22p_dec_gflops\22: 10, \22p_pre_gflops\22: 10, \22ram_bytes\22: 1000000000, \22overhead_ms_per_block\22: 0}, \22gpu\22: {\22vram_bytes\22: 2000, \22reserved_bytes\22: 0, \22mem_bw_gbs\22: 100, \22p_dec_gflops\22: 100, \22p_pre_gflops\22: 100, \22overhead_ms_per_block\22: 0}, \22link\22: {\22bw_gbs\22: 100, \22latency_us\22: 0}}"}
} {
  func.func @main(%x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
    // CHECK: helm.unit embedding[0]
    // CHECK: helm.device = 0 : i32
    %a = helm.unit embedding [0] : tensor<?x?x8xf32> {
      helm.yield %x : tensor<?x?x8xf32>
    } {param_bytes = 1000 : i64, resident_bytes = 1000 : i64, act_bytes = 100 : i64, kv_bytes_per_token = 0 : i64,
       flops_decode = 0 : i64, flops_prefill = 0 : i64,
       helm.cost_terms = {proj_flops_decode = 0.0 : f64, attn_flops_per_token = 0.0 : f64, proj_flops_prefill = 0.0 : f64, attn_flops_prefill = 0.0 : f64}}
    // CHECK: helm.unit block[1]
    // CHECK: helm.device = 0 : i32
    %b = helm.unit block [1] : tensor<?x?x8xf32> {
      helm.yield %a : tensor<?x?x8xf32>
    } {param_bytes = 1500 : i64, resident_bytes = 1500 : i64, act_bytes = 100 : i64, kv_bytes_per_token = 0 : i64,
       flops_decode = 0 : i64, flops_prefill = 0 : i64,
       helm.cost_terms = {proj_flops_decode = 0.0 : f64, attn_flops_per_token = 0.0 : f64, proj_flops_prefill = 0.0 : f64, attn_flops_prefill = 0.0 : f64}}
    // CHECK: helm.unit head[2]
    // CHECK: helm.device = 1 : i32
    %c = helm.unit head [2] : tensor<?x?x8xf32> {
      helm.yield %b : tensor<?x?x8xf32>
    } {param_bytes = 1000 : i64, resident_bytes = 1000 : i64, act_bytes = 100 : i64, kv_bytes_per_token = 0 : i64,
       flops_decode = 0 : i64, flops_prefill = 0 : i64,
       helm.cost_terms = {proj_flops_decode = 0.0 : f64, attn_flops_per_token = 0.0 : f64, proj_flops_prefill = 0.0 : f64, attn_flops_prefill = 0.0 : f64}}
    return %c : tensor<?x?x8xf32>
  }
}
// FORCED: chosen_k = 3 : i64
// INFEASIBLE: error: --force-split=1 is infeasible: GPU needs 2500 B, 2000 B available
// RANGE: error: --force-split=4 is out of range (0..3 for 3 units)
