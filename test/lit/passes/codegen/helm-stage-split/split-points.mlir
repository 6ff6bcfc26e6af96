// Every split point of a four-unit model (embedding, two blocks, head), chosen with
// --helm-partition=force-split=k on a target whose GPU holds everything.
// RUN: helm-opt %s --helm-annotate-costs --helm-partition=force-split=0 --helm-stage-split=share-unit-code=false | FileCheck %s --check-prefix=K0
// RUN: helm-opt %s --helm-annotate-costs --helm-partition=force-split=1 --helm-stage-split=share-unit-code=false | FileCheck %s --check-prefix=K1
// RUN: helm-opt %s --helm-annotate-costs --helm-partition=force-split=2 --helm-stage-split=share-unit-code=false | FileCheck %s --check-prefix=K2
// RUN: helm-opt %s --helm-annotate-costs --helm-partition=force-split=3 --helm-stage-split=share-unit-code=false | FileCheck %s --check-prefix=K3
// RUN: helm-opt %s --helm-annotate-costs --helm-partition=force-split=4 --helm-stage-split=share-unit-code=false | FileCheck %s --check-prefix=K4

// k = 0, all on the GPU: one stage, fed token ids, returning logits; no transfer.
// K0-NOT: @helm_cpu_stage
// K0-LABEL: func.func @helm_gpu_stage
// K0-SAME: %{{.*}}: tensor<?x?xi64> {helm.name = "input_ids"}
// K0-SAME: -> tensor<?x1x32xf32> attributes {helm.kv_layers = 2 : i64, helm.stage = "gpu", helm.units = array<i64: 0, 3>}
// K0: helm.embed
// K0: helm.kv_layer = 0
// K0: helm.kv_layer = 1
// K0: helm.lm_head
// K0-NOT: helm.transfer
// K0-NOT: func.func

// k = 1, the boundary right after the embedding: the CPU stage only embeds and hands the
// embedded tokens over; both blocks' KV caches are the GPU stage's (layers 0 and 1).
// K1-LABEL: func.func @helm_cpu_stage
// K1-SAME: -> tensor<?x?x16xf32> attributes {helm.kv_layers = 0 : i64, helm.stage = "cpu", helm.units = array<i64: 0, 0>}
// K1: %[[E:.*]] = helm.embed
// K1-NEXT: %[[T:.*]] = helm.transfer %[[E]] cpu -> gpu : tensor<?x?x16xf32>
// K1-NEXT: return %[[T]] : tensor<?x?x16xf32>
// K1-LABEL: func.func @helm_gpu_stage
// K1-SAME: %[[X:arg[0-9]+]]: tensor<?x?x16xf32> {helm.name = "activation"}
// K1-SAME: -> tensor<?x1x32xf32> attributes {helm.kv_layers = 2 : i64, helm.stage = "gpu", helm.units = array<i64: 1, 3>}
// K1-NOT: helm.embed
// K1: helm.rms_norm %[[X]]
// K1: helm.kv_layer = 0
// K1: helm.kv_layer = 1
// K1: helm.lm_head

// k = 2, in between: one block per stage, each stage numbering its own KV layers from 0.
// K2-LABEL: func.func @helm_cpu_stage
// K2-SAME: attributes {helm.kv_layers = 1 : i64, helm.stage = "cpu", helm.units = array<i64: 0, 1>}
// K2: helm.kv_layer = 0
// K2: %[[R:.*]] = helm.add
// K2-NEXT: %[[T:.*]] = helm.transfer %[[R]] cpu -> gpu : tensor<?x?x16xf32>
// K2-NEXT: return %[[T]]
// K2-LABEL: func.func @helm_gpu_stage
// K2-SAME: %[[X:arg[0-9]+]]: tensor<?x?x16xf32> {helm.name = "activation"}
// K2-SAME: attributes {helm.kv_layers = 1 : i64, helm.stage = "gpu", helm.units = array<i64: 2, 3>}
// K2: helm.rms_norm %[[X]]
// K2: helm.kv_layer = 0
// The second block adds its output to the transferred activation (its residual).
// K2: helm.add %[[X]],
// K2: helm.lm_head

// k = 3, the boundary right before the head: the GPU stage is the head alone, slicing the last
// position of the activation it receives.
// K3-LABEL: func.func @helm_cpu_stage
// K3-SAME: attributes {helm.kv_layers = 2 : i64, helm.stage = "cpu", helm.units = array<i64: 0, 2>}
// K3: helm.transfer %{{.*}} cpu -> gpu : tensor<?x?x16xf32>
// K3-LABEL: func.func @helm_gpu_stage
// K3-SAME: %[[X:arg[0-9]+]]: tensor<?x?x16xf32> {helm.name = "activation"}
// K3-SAME: attributes {helm.kv_layers = 0 : i64, helm.stage = "gpu", helm.units = array<i64: 3, 3>}
// K3-NOT: helm.attention
// K3: tensor.extract_slice %[[X]]
// K3: helm.lm_head
// K3: return %{{.*}} : tensor<?x1x32xf32>

// k = 4, all on the CPU: one stage, as without a plan.
// K4-LABEL: func.func @helm_cpu_stage
// K4-SAME: -> tensor<?x1x32xf32> attributes {helm.kv_layers = 2 : i64, helm.stage = "cpu", helm.units = array<i64: 0, 3>}
// K4-NOT: helm.transfer
// K4-NOT: @helm_gpu_stage

module attributes {
  helm.target = #helm.target<name = "big",
      cpu = #helm.cpu<dram_bw_gbs = 10.0, l3_bytes = 0.0, l3_bw_gbs = 10.0, p_dec_gflops = 10.0, p_pre_gflops = 10.0,
                      ram_bytes = 1.0e9, overhead_ms_per_block = 0.0>,
      gpu = #helm.gpu<backend = cuda, vram_bytes = 1.0e9, reserved_bytes = 0.0, mem_bw_gbs = 100.0, p_dec_gflops = 100.0,
                      p_pre_gflops = 100.0, overhead_ms_per_block = 0.0>,
      link = #helm.link<bw_gbs = 16.0, latency_us = 0.0>>
} {
  helm.weight_decl @embed : tensor<32x16xf32> {length = 2048 : i64, location = "", offset = -1 : i64, onnx_name = "embed"}
  helm.weight_decl @wq : tensor<16x16xf32> {length = 1024 : i64, location = "", offset = -1 : i64, onnx_name = "wq"}
  helm.weight_decl @wk : tensor<16x8xf32> {length = 512 : i64, location = "", offset = -1 : i64, onnx_name = "wk"}
  helm.weight_decl @wv : tensor<16x8xf32> {length = 512 : i64, location = "", offset = -1 : i64, onnx_name = "wv"}
  helm.weight_decl @wo : tensor<16x16xf32> {length = 1024 : i64, location = "", offset = -1 : i64, onnx_name = "wo"}
  helm.weight_decl @norm : tensor<16xf32> {length = 64 : i64, location = "", offset = -1 : i64, onnx_name = "norm"}
  func.func @main(%ids: tensor<?x?xi64> {helm.name = "input_ids"}, %mask: tensor<?x?xi64> {helm.name = "attention_mask"},
                  %pos: tensor<?x?xi64> {helm.name = "position_ids"},
                  %pk: tensor<?x1x?x8xf32> {helm.name = "past_key_values.0.key"}, %pv: tensor<?x1x?x8xf32> {helm.name = "past_key_values.0.value"},
                  %pk1: tensor<?x1x?x8xf32> {helm.name = "past_key_values.1.key"}, %pv1: tensor<?x1x?x8xf32> {helm.name = "past_key_values.1.value"})
      -> (tensor<?x?x32xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>) {
    %0 = helm.unit embedding[0] : tensor<?x?x16xf32> {
      %t = helm.weight @embed : tensor<32x16xf32>
      %e = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x16xf32>) -> tensor<?x?x16xf32>
      helm.yield %e : tensor<?x?x16xf32>
    }
    %1:3 = helm.unit block[1] : tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x?x16xf32> {
      %g = helm.weight @norm : tensor<16xf32>
      %wq = helm.weight @wq : tensor<16x16xf32>
      %wk = helm.weight @wk : tensor<16x8xf32>
      %wv = helm.weight @wv : tensor<16x8xf32>
      %wo = helm.weight @wo : tensor<16x16xf32>
      %n = helm.rms_norm %0, %g {epsilon = 1.0e-06 : f64} : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
      %q = helm.linear %n, %wq {transpose_weight = false} : (tensor<?x?x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
      %k = helm.linear %n, %wk {transpose_weight = false} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
      %v = helm.linear %n, %wv {transpose_weight = false} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
      %qr = helm.rope %q positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
      %kr = helm.rope %k positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
      %a, %p:2 = helm.attention %qr, %kr, %v cache(%pk, %pv) {head_dim = 8 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 0.35355339059327373 : f64} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>) -> (tensor<?x?x16xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>)
      %o = helm.linear %a, %wo {transpose_weight = false} : (tensor<?x?x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
      %r = helm.add %0, %o : tensor<?x?x16xf32>
      helm.yield %p#0, %p#1, %r : tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x?x16xf32>
    }
    %3:3 = helm.unit block[2] : tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x?x16xf32> {
      %g = helm.weight @norm : tensor<16xf32>
      %wq = helm.weight @wq : tensor<16x16xf32>
      %wk = helm.weight @wk : tensor<16x8xf32>
      %wv = helm.weight @wv : tensor<16x8xf32>
      %wo = helm.weight @wo : tensor<16x16xf32>
      %n = helm.rms_norm %1#2, %g {epsilon = 1.0e-06 : f64} : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
      %q = helm.linear %n, %wq {transpose_weight = false} : (tensor<?x?x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
      %k = helm.linear %n, %wk {transpose_weight = false} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
      %v = helm.linear %n, %wv {transpose_weight = false} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
      %qr = helm.rope %q positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
      %kr = helm.rope %k positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
      %a, %p:2 = helm.attention %qr, %kr, %v cache(%pk1, %pv1) {head_dim = 8 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 0.35355339059327373 : f64} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>) -> (tensor<?x?x16xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>)
      %o = helm.linear %a, %wo {transpose_weight = false} : (tensor<?x?x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
      %r = helm.add %1#2, %o : tensor<?x?x16xf32>
      helm.yield %p#0, %p#1, %r : tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x?x16xf32>
    }
    %2 = helm.unit head[3] : tensor<?x?x32xf32> {
      %g = helm.weight @norm : tensor<16xf32>
      %t = helm.weight @embed : tensor<32x16xf32>
      %n = helm.rms_norm %3#2, %g {epsilon = 1.0e-06 : f64} : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
      %l = helm.lm_head %n, %t {tied = true, transpose_weight = true} : (tensor<?x?x16xf32>, tensor<32x16xf32>) -> tensor<?x?x32xf32>
      helm.yield %l : tensor<?x?x32xf32>
    }
    return %2, %1#0, %1#1, %3#0, %3#1 : tensor<?x?x32xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>
  }
}

