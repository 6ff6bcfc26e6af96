// RUN: helm-opt %s --helm-partition --split-input-file --verify-diagnostics

// expected-error @+1 {{module has no helm.target = #helm.target<...> attribute}}
module attributes {helm.cost_options = #helm.cost_options<batch = 1, context_tokens = 0, prompt_len = 1>} {
}

// -----

// The attributes are typed: a missing field is a parse error where the field should be.
// expected-error @+1 {{expected ','}}
module attributes {helm.cost_options = #helm.cost_options<batch = 1, prompt_len = 1>} {
}

// -----

// expected-error @+1 {{cost options must have batch >= 1, context >= 0, prompt_len >= 1}}
module attributes {helm.cost_options = #helm.cost_options<batch = 0, context_tokens = 0, prompt_len = 1>} {
}

// -----

// The target's numbers follow the profile JSON's rules, checked where the profile is written.
// expected-error @+3 {{cpu.dram_bw_gbs must be positive, got -1}}
// expected-error @+3 {{failed to parse Helm_TargetAttr parameter 'cpu'}}
module attributes {helm.target = #helm.target<name = "toy",
    cpu = #helm.cpu<dram_bw_gbs = -1.0, l3_bytes = 0.0, l3_bw_gbs = 10.0, p_dec_gflops = 10.0, p_pre_gflops = 10.0,
                    ram_bytes = 1000.0, overhead_ms_per_block = 0.0>>} {
}

// -----

// expected-error @+1 {{a target with a gpu needs a link}}
module attributes {helm.target = #helm.target<name = "toy",
    cpu = #helm.cpu<dram_bw_gbs = 10.0, l3_bytes = 0.0, l3_bw_gbs = 10.0, p_dec_gflops = 10.0, p_pre_gflops = 10.0,
                    ram_bytes = 1000.0, overhead_ms_per_block = 0.0>,
    gpu = #helm.gpu<backend = emu, vram_bytes = 2000.0, reserved_bytes = 0.0, mem_bw_gbs = 100.0, p_dec_gflops = 100.0,
                    p_pre_gflops = 100.0, overhead_ms_per_block = 0.0>>} {
}

// -----

// expected-error @+3 {{gpu.reserved_bytes must be below gpu.vram_bytes}}
// expected-error @+2 {{failed to parse Helm_TargetAttr parameter 'gpu'}}
module attributes {helm.target = #helm.target<name = "toy", cpu = #helm.cpu<dram_bw_gbs = 10.0, l3_bytes = 0.0, l3_bw_gbs = 10.0, p_dec_gflops = 10.0, p_pre_gflops = 10.0, ram_bytes = 1000.0, overhead_ms_per_block = 0.0>,
    gpu = #helm.gpu<backend = cuda, vram_bytes = 2000.0, reserved_bytes = 2000.0, mem_bw_gbs = 100.0, p_dec_gflops = 100.0, p_pre_gflops = 100.0, overhead_ms_per_block = 0.0>,
    link = #helm.link<bw_gbs = 1.0, latency_us = 0.0>>} {
}

// -----

// expected-error @+1 {{plan objective must be decode or prefill, got 'latency'}}
module attributes {helm.plan = #helm.plan<chosen_k = 0, predicted_ms_per_token = 1.0, objective = "latency", kv_offload = true,
    candidates = #helm.candidate<k = 0, feasible = true, t_cpu_ms = 0.0, t_gpu_ms = 1.0, t_comm_ms = 0.0, t_plan_ms = 1.0, gpu_bytes = 0.0, host_bytes = 0.0>>} {
}

// -----

// expected-error @+1 {{plan chosen_k 1 is not one of its 1 candidates}}
module attributes {helm.plan = #helm.plan<chosen_k = 1, predicted_ms_per_token = 1.0, objective = "decode", kv_offload = true,
    candidates = #helm.candidate<k = 0, feasible = true, t_cpu_ms = 0.0, t_gpu_ms = 1.0, t_comm_ms = 0.0, t_plan_ms = 1.0, gpu_bytes = 0.0, host_bytes = 0.0>>} {
}

// -----

// Unit costs belong on partition units.
// expected-error @+1 {{'helm.cost' must be a #helm.unit_cost on a helm.unit}}
module attributes {helm.cost = #helm.unit_cost<param_bytes = 0, resident_bytes = 0, act_bytes = 0, kv_bytes_per_token = 0, flops_decode = 0, flops_prefill = 0, proj_flops_decode = 0.0, attn_flops_per_token = 0.0, proj_flops_prefill = 0.0, attn_flops_prefill = 0.0, prefill_param_bytes = 0, prefill_act_bytes = 0>} {
}

// -----

// A plan that streams its prompts must have room for the staging slots at its split.
// expected-error @+1 {{plan streams prefill at k = 0 but its staging slots do not fit}}
module attributes {helm.plan = #helm.plan<chosen_k = 0, predicted_ms_per_token = 1.0, objective = "decode", kv_offload = true, stream_prefill = true,
    candidates = #helm.candidate<k = 0, feasible = true, t_cpu_ms = 0.0, t_gpu_ms = 1.0, t_comm_ms = 0.0, t_plan_ms = 1.0, gpu_bytes = 0.0, host_bytes = 0.0, stream_possible = true, stream_fits = false>>} {
}

// -----

// A priced sliced-FFN plan has one r_GG and one r_CG per block, each pair within one layer.
// expected-error @+1 {{a possible sliced_ffn plan needs r_gg and r_cg of one length per block}}
module attributes {helm.sliced = #helm.sliced_ffn<possible = true, r_gg = [0.5]>} {
}

// -----

// expected-error @+1 {{sliced_ffn rates must be r_gg, r_cg >= 0 with r_gg + r_cg <= 1, got 0.75 and 0.5}}
module attributes {helm.sliced = #helm.sliced_ffn<possible = true, r_gg = [0.75], r_cg = [0.5]>} {
}
