// RUN: helm-opt %s --helm-partition --split-input-file --verify-diagnostics

// expected-error @+1 {{module has no helm.target {profile = "<json>"} attribute}}
module attributes {helm.cost_options = {batch = 1 : i64, context = 0 : i64, prompt_len = 1 : i64}} {
}

// -----

// expected-error @+1 {{helm.cost_options lacks integer 'context'}}
module attributes {helm.cost_options = {batch = 1 : i64, prompt_len = 1 : i64},
                   helm.target = {name = "toy", profile = "{\22cpu\22: {\22dram_bw_gbs\22: 10, \22l3_bytes\22: 0, \22l3_bw_gbs\22: 10, \22p_dec_gflops\22: 10, \22p_pre_gflops\22: 10, \22ram_bytes\22: 1000, \22overhead_ms_per_block\22: 0}}"}} {
}

// -----

// expected-error @+1 {{helm.target: cpu.dram_bw_gbs must be positive, got -1}}
module attributes {helm.cost_options = {batch = 1 : i64, context = 0 : i64, prompt_len = 1 : i64},
                   helm.target = {name = "toy", profile = "{\22cpu\22: {\22dram_bw_gbs\22: -1}}"}} {
}
