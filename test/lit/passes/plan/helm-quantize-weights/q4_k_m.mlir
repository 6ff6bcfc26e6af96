// RUN: helm-opt %s --helm-quantize-weights=format=q4_k_m | FileCheck %s
// RUN: helm-opt %s --helm-quantize-weights=format=q5_k_m | FileCheck %s --check-prefix=Q5
// RUN: helm-opt %s --helm-quantize-weights=format=q3_k_m | FileCheck %s --check-prefix=Q3
// RUN: helm-opt %s --helm-quantize-weights=format=q2_k | FileCheck %s --check-prefix=Q2
//
// The q4_k_m recipe on eight blocks of 256-wide weights (whole k-quant super-blocks), units numbered
// as helm-form-units does (embedding 0, blocks 1..8, head 9), so block i is unit i + 1. With n = 8
// blocks, the blocks that get more bits are i < n/8 (0), i >= 7n/8 (7) and (i - n/8) % 3 == 2 (3, 6):
// there the attention V and FFN down projections are q6_k. Block 4 has a fused QKV projection
// (split before attention): q5_k. The output head is q6_k; the (untied) embedding table and every
// other projection q4_k.
// CHECK: helm.weight_decl @table {{.*}}format = q4_k,
// CHECK: helm.weight_decl @head {{.*}}format = q6_k,
// CHECK: helm.weight_decl @q_0 {{.*}}format = q4_k,
// CHECK: helm.weight_decl @v_0 {{.*}}format = q6_k,
// CHECK: helm.weight_decl @o_0 {{.*}}format = q4_k,
// CHECK: helm.weight_decl @gate_0 {{.*}}format = q4_k,
// CHECK: helm.weight_decl @down_0 {{.*}}format = q6_k,
// CHECK: helm.weight_decl @v_1 {{.*}}format = q4_k,
// CHECK: helm.weight_decl @down_1 {{.*}}format = q4_k,
// CHECK: helm.weight_decl @v_2 {{.*}}format = q4_k,
// CHECK: helm.weight_decl @down_2 {{.*}}format = q4_k,
// CHECK: helm.weight_decl @v_3 {{.*}}format = q6_k,
// CHECK: helm.weight_decl @down_3 {{.*}}format = q6_k,
// CHECK: helm.weight_decl @qkv_4 {{.*}}format = q5_k,
// CHECK: helm.weight_decl @down_4 {{.*}}format = q4_k,
// CHECK: helm.weight_decl @v_5 {{.*}}format = q4_k,
// CHECK: helm.weight_decl @down_5 {{.*}}format = q4_k,
// CHECK: helm.weight_decl @v_6 {{.*}}format = q6_k,
// CHECK: helm.weight_decl @down_6 {{.*}}format = q6_k,
// CHECK: helm.weight_decl @v_7 {{.*}}format = q6_k,
// CHECK: helm.weight_decl @up_7 {{.*}}format = q4_k,
// CHECK: helm.weight_decl @down_7 {{.*}}format = q6_k,
//
// q5_k_m is the same recipe on a q5_k base (llama.cpp's Q5_K_M): the fused QKV projection takes
// q6_k, the head and the more-bits blocks' V and down projections q6_k, everything else q5_k.
// Q5: helm.weight_decl @table {{.*}}format = q5_k,
// Q5: helm.weight_decl @head {{.*}}format = q6_k,
// Q5: helm.weight_decl @q_0 {{.*}}format = q5_k,
// Q5: helm.weight_decl @v_0 {{.*}}format = q6_k,
// Q5: helm.weight_decl @o_0 {{.*}}format = q5_k,
// Q5: helm.weight_decl @gate_0 {{.*}}format = q5_k,
// Q5: helm.weight_decl @down_0 {{.*}}format = q6_k,
// Q5: helm.weight_decl @v_1 {{.*}}format = q5_k,
// Q5: helm.weight_decl @down_1 {{.*}}format = q5_k,
// Q5: helm.weight_decl @v_3 {{.*}}format = q6_k,
// Q5: helm.weight_decl @down_3 {{.*}}format = q6_k,
// Q5: helm.weight_decl @qkv_4 {{.*}}format = q6_k,
// Q5: helm.weight_decl @down_4 {{.*}}format = q5_k,
// Q5: helm.weight_decl @v_6 {{.*}}format = q6_k,
// Q5: helm.weight_decl @down_6 {{.*}}format = q6_k,
// Q5: helm.weight_decl @v_7 {{.*}}format = q6_k,
// Q5: helm.weight_decl @up_7 {{.*}}format = q5_k,
// Q5: helm.weight_decl @down_7 {{.*}}format = q6_k,
//
// q3_k_m (llama.cpp's Q3_K_M): q6_k for the head; q5_k for the V projections of blocks 0 and 1 and
// the down projections of the first sixteenth (none of 8 blocks), q4_k for the other V and down
// projections, the attention output and the fused QKV projection; q3_k for everything else.
// Q3: helm.weight_decl @table {{.*}}format = q3_k,
// Q3: helm.weight_decl @head {{.*}}format = q6_k,
// Q3: helm.weight_decl @q_0 {{.*}}format = q3_k,
// Q3: helm.weight_decl @v_0 {{.*}}format = q5_k,
// Q3: helm.weight_decl @o_0 {{.*}}format = q4_k,
// Q3: helm.weight_decl @gate_0 {{.*}}format = q3_k,
// Q3: helm.weight_decl @down_0 {{.*}}format = q4_k,
// Q3: helm.weight_decl @v_1 {{.*}}format = q5_k,
// Q3: helm.weight_decl @down_1 {{.*}}format = q4_k,
// Q3: helm.weight_decl @v_2 {{.*}}format = q4_k,
// Q3: helm.weight_decl @qkv_4 {{.*}}format = q4_k,
// Q3: helm.weight_decl @up_7 {{.*}}format = q3_k,
//
// q2_k (llama.cpp's Q2_K): q6_k for the head; q3_k for the V projections (here one query head a KV
// head: fewer than 4), the attention output and the down projections; the fused QKV projection and
// everything else q2_k. (The V projections' q4_k, with 4 or more query heads a KV head, is checked
// against llama-quantize by e2e-gguf.)
// Q2: helm.weight_decl @table {{.*}}format = q2_k,
// Q2: helm.weight_decl @head {{.*}}format = q6_k,
// Q2: helm.weight_decl @q_0 {{.*}}format = q2_k,
// Q2: helm.weight_decl @k_0 {{.*}}format = q2_k,
// Q2: helm.weight_decl @v_0 {{.*}}format = q3_k,
// Q2: helm.weight_decl @o_0 {{.*}}format = q3_k,
// Q2: helm.weight_decl @gate_0 {{.*}}format = q2_k,
// Q2: helm.weight_decl @up_0 {{.*}}format = q2_k,
// Q2: helm.weight_decl @down_0 {{.*}}format = q3_k,
// Q2: helm.weight_decl @v_3 {{.*}}format = q3_k,
// Q2: helm.weight_decl @qkv_4 {{.*}}format = q2_k,
// Q2: helm.weight_decl @down_7 {{.*}}format = q3_k,
module {
  helm.weight_decl @table : tensor<64x256xf32> {length = 65536 : i64, location = "", offset = -1 : i64, onnx_name = "table"}
  helm.weight_decl @head : tensor<64x256xf32> {length = 65536 : i64, location = "", offset = -1 : i64, onnx_name = "head"}
  helm.weight_decl @q_0 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "q_0"}
  helm.weight_decl @k_0 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "k_0"}
  helm.weight_decl @v_0 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "v_0"}
  helm.weight_decl @o_0 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "o_0"}
  helm.weight_decl @gate_0 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "gate_0"}
  helm.weight_decl @up_0 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "up_0"}
  helm.weight_decl @down_0 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "down_0"}
  helm.weight_decl @q_1 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "q_1"}
  helm.weight_decl @k_1 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "k_1"}
  helm.weight_decl @v_1 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "v_1"}
  helm.weight_decl @o_1 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "o_1"}
  helm.weight_decl @gate_1 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "gate_1"}
  helm.weight_decl @up_1 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "up_1"}
  helm.weight_decl @down_1 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "down_1"}
  helm.weight_decl @q_2 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "q_2"}
  helm.weight_decl @k_2 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "k_2"}
  helm.weight_decl @v_2 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "v_2"}
  helm.weight_decl @o_2 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "o_2"}
  helm.weight_decl @gate_2 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "gate_2"}
  helm.weight_decl @up_2 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "up_2"}
  helm.weight_decl @down_2 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "down_2"}
  helm.weight_decl @q_3 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "q_3"}
  helm.weight_decl @k_3 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "k_3"}
  helm.weight_decl @v_3 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "v_3"}
  helm.weight_decl @o_3 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "o_3"}
  helm.weight_decl @gate_3 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "gate_3"}
  helm.weight_decl @up_3 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "up_3"}
  helm.weight_decl @down_3 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "down_3"}
  helm.weight_decl @qkv_4 : tensor<768x256xf32> {length = 786432 : i64, location = "", offset = -1 : i64, onnx_name = "qkv_4"}
  helm.weight_decl @o_4 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "o_4"}
  helm.weight_decl @gate_4 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "gate_4"}
  helm.weight_decl @up_4 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "up_4"}
  helm.weight_decl @down_4 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "down_4"}
  helm.weight_decl @q_5 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "q_5"}
  helm.weight_decl @k_5 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "k_5"}
  helm.weight_decl @v_5 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "v_5"}
  helm.weight_decl @o_5 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "o_5"}
  helm.weight_decl @gate_5 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "gate_5"}
  helm.weight_decl @up_5 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "up_5"}
  helm.weight_decl @down_5 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "down_5"}
  helm.weight_decl @q_6 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "q_6"}
  helm.weight_decl @k_6 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "k_6"}
  helm.weight_decl @v_6 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "v_6"}
  helm.weight_decl @o_6 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "o_6"}
  helm.weight_decl @gate_6 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "gate_6"}
  helm.weight_decl @up_6 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "up_6"}
  helm.weight_decl @down_6 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "down_6"}
  helm.weight_decl @q_7 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "q_7"}
  helm.weight_decl @k_7 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "k_7"}
  helm.weight_decl @v_7 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "v_7"}
  helm.weight_decl @o_7 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "o_7"}
  helm.weight_decl @gate_7 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "gate_7"}
  helm.weight_decl @up_7 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "up_7"}
  helm.weight_decl @down_7 : tensor<256x256xf32> {length = 262144 : i64, location = "", offset = -1 : i64, onnx_name = "down_7"}
  func.func @main(%ids: tensor<1x4xi64>) -> tensor<1x4x64xf32> {
    %e = helm.unit embedding [0] : tensor<1x4x256xf32> {
      %t = helm.weight @table : tensor<64x256xf32>
      %x = helm.embed %ids, %t : (tensor<1x4xi64>, tensor<64x256xf32>) -> tensor<1x4x256xf32>
      helm.yield %x : tensor<1x4x256xf32>
    }
    %h0 = helm.unit block [1] : tensor<1x4x256xf32> {
      %wq = helm.weight @q_0 : tensor<256x256xf32>
      %q = helm.linear %e, %wq {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wk = helm.weight @k_0 : tensor<256x256xf32>
      %k = helm.linear %e, %wk {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wv = helm.weight @v_0 : tensor<256x256xf32>
      %v = helm.linear %e, %wv {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %a = helm.attention %q, %k, %v {num_heads = 1 : i64, num_kv_heads = 1 : i64, head_dim = 256 : i64, scale = 0.0625 : f64} : (tensor<1x4x256xf32>, tensor<1x4x256xf32>, tensor<1x4x256xf32>) -> tensor<1x4x256xf32>
      %wo = helm.weight @o_0 : tensor<256x256xf32>
      %o = helm.linear %a, %wo {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wg = helm.weight @gate_0 : tensor<256x256xf32>
      %g = helm.linear %o, %wg {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wu = helm.weight @up_0 : tensor<256x256xf32>
      %u = helm.linear %o, %wu {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %s = helm.swiglu %g, %u : tensor<1x4x256xf32>
      %wd = helm.weight @down_0 : tensor<256x256xf32>
      %d = helm.linear %s, %wd {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      helm.yield %d : tensor<1x4x256xf32>
    }
    %h1 = helm.unit block [2] : tensor<1x4x256xf32> {
      %wq = helm.weight @q_1 : tensor<256x256xf32>
      %q = helm.linear %h0, %wq {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wk = helm.weight @k_1 : tensor<256x256xf32>
      %k = helm.linear %h0, %wk {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wv = helm.weight @v_1 : tensor<256x256xf32>
      %v = helm.linear %h0, %wv {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %a = helm.attention %q, %k, %v {num_heads = 1 : i64, num_kv_heads = 1 : i64, head_dim = 256 : i64, scale = 0.0625 : f64} : (tensor<1x4x256xf32>, tensor<1x4x256xf32>, tensor<1x4x256xf32>) -> tensor<1x4x256xf32>
      %wo = helm.weight @o_1 : tensor<256x256xf32>
      %o = helm.linear %a, %wo {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wg = helm.weight @gate_1 : tensor<256x256xf32>
      %g = helm.linear %o, %wg {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wu = helm.weight @up_1 : tensor<256x256xf32>
      %u = helm.linear %o, %wu {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %s = helm.swiglu %g, %u : tensor<1x4x256xf32>
      %wd = helm.weight @down_1 : tensor<256x256xf32>
      %d = helm.linear %s, %wd {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      helm.yield %d : tensor<1x4x256xf32>
    }
    %h2 = helm.unit block [3] : tensor<1x4x256xf32> {
      %wq = helm.weight @q_2 : tensor<256x256xf32>
      %q = helm.linear %h1, %wq {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wk = helm.weight @k_2 : tensor<256x256xf32>
      %k = helm.linear %h1, %wk {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wv = helm.weight @v_2 : tensor<256x256xf32>
      %v = helm.linear %h1, %wv {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %a = helm.attention %q, %k, %v {num_heads = 1 : i64, num_kv_heads = 1 : i64, head_dim = 256 : i64, scale = 0.0625 : f64} : (tensor<1x4x256xf32>, tensor<1x4x256xf32>, tensor<1x4x256xf32>) -> tensor<1x4x256xf32>
      %wo = helm.weight @o_2 : tensor<256x256xf32>
      %o = helm.linear %a, %wo {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wg = helm.weight @gate_2 : tensor<256x256xf32>
      %g = helm.linear %o, %wg {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wu = helm.weight @up_2 : tensor<256x256xf32>
      %u = helm.linear %o, %wu {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %s = helm.swiglu %g, %u : tensor<1x4x256xf32>
      %wd = helm.weight @down_2 : tensor<256x256xf32>
      %d = helm.linear %s, %wd {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      helm.yield %d : tensor<1x4x256xf32>
    }
    %h3 = helm.unit block [4] : tensor<1x4x256xf32> {
      %wq = helm.weight @q_3 : tensor<256x256xf32>
      %q = helm.linear %h2, %wq {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wk = helm.weight @k_3 : tensor<256x256xf32>
      %k = helm.linear %h2, %wk {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wv = helm.weight @v_3 : tensor<256x256xf32>
      %v = helm.linear %h2, %wv {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %a = helm.attention %q, %k, %v {num_heads = 1 : i64, num_kv_heads = 1 : i64, head_dim = 256 : i64, scale = 0.0625 : f64} : (tensor<1x4x256xf32>, tensor<1x4x256xf32>, tensor<1x4x256xf32>) -> tensor<1x4x256xf32>
      %wo = helm.weight @o_3 : tensor<256x256xf32>
      %o = helm.linear %a, %wo {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wg = helm.weight @gate_3 : tensor<256x256xf32>
      %g = helm.linear %o, %wg {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wu = helm.weight @up_3 : tensor<256x256xf32>
      %u = helm.linear %o, %wu {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %s = helm.swiglu %g, %u : tensor<1x4x256xf32>
      %wd = helm.weight @down_3 : tensor<256x256xf32>
      %d = helm.linear %s, %wd {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      helm.yield %d : tensor<1x4x256xf32>
    }
    %h4 = helm.unit block [5] : tensor<1x4x256xf32> {
      %wqkv = helm.weight @qkv_4 : tensor<768x256xf32>
      %qkv = helm.linear %h3, %wqkv {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<768x256xf32>) -> tensor<1x4x768xf32>
      %q, %k, %v = helm.split %qkv {sizes = array<i64: 256, 256, 256>} : tensor<1x4x768xf32> -> tensor<1x4x256xf32>, tensor<1x4x256xf32>, tensor<1x4x256xf32>
      %a = helm.attention %q, %k, %v {num_heads = 1 : i64, num_kv_heads = 1 : i64, head_dim = 256 : i64, scale = 0.0625 : f64} : (tensor<1x4x256xf32>, tensor<1x4x256xf32>, tensor<1x4x256xf32>) -> tensor<1x4x256xf32>
      %wo = helm.weight @o_4 : tensor<256x256xf32>
      %o = helm.linear %a, %wo {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wg = helm.weight @gate_4 : tensor<256x256xf32>
      %g = helm.linear %o, %wg {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wu = helm.weight @up_4 : tensor<256x256xf32>
      %u = helm.linear %o, %wu {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %s = helm.swiglu %g, %u : tensor<1x4x256xf32>
      %wd = helm.weight @down_4 : tensor<256x256xf32>
      %d = helm.linear %s, %wd {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      helm.yield %d : tensor<1x4x256xf32>
    }
    %h5 = helm.unit block [6] : tensor<1x4x256xf32> {
      %wq = helm.weight @q_5 : tensor<256x256xf32>
      %q = helm.linear %h4, %wq {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wk = helm.weight @k_5 : tensor<256x256xf32>
      %k = helm.linear %h4, %wk {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wv = helm.weight @v_5 : tensor<256x256xf32>
      %v = helm.linear %h4, %wv {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %a = helm.attention %q, %k, %v {num_heads = 1 : i64, num_kv_heads = 1 : i64, head_dim = 256 : i64, scale = 0.0625 : f64} : (tensor<1x4x256xf32>, tensor<1x4x256xf32>, tensor<1x4x256xf32>) -> tensor<1x4x256xf32>
      %wo = helm.weight @o_5 : tensor<256x256xf32>
      %o = helm.linear %a, %wo {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wg = helm.weight @gate_5 : tensor<256x256xf32>
      %g = helm.linear %o, %wg {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wu = helm.weight @up_5 : tensor<256x256xf32>
      %u = helm.linear %o, %wu {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %s = helm.swiglu %g, %u : tensor<1x4x256xf32>
      %wd = helm.weight @down_5 : tensor<256x256xf32>
      %d = helm.linear %s, %wd {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      helm.yield %d : tensor<1x4x256xf32>
    }
    %h6 = helm.unit block [7] : tensor<1x4x256xf32> {
      %wq = helm.weight @q_6 : tensor<256x256xf32>
      %q = helm.linear %h5, %wq {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wk = helm.weight @k_6 : tensor<256x256xf32>
      %k = helm.linear %h5, %wk {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wv = helm.weight @v_6 : tensor<256x256xf32>
      %v = helm.linear %h5, %wv {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %a = helm.attention %q, %k, %v {num_heads = 1 : i64, num_kv_heads = 1 : i64, head_dim = 256 : i64, scale = 0.0625 : f64} : (tensor<1x4x256xf32>, tensor<1x4x256xf32>, tensor<1x4x256xf32>) -> tensor<1x4x256xf32>
      %wo = helm.weight @o_6 : tensor<256x256xf32>
      %o = helm.linear %a, %wo {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wg = helm.weight @gate_6 : tensor<256x256xf32>
      %g = helm.linear %o, %wg {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wu = helm.weight @up_6 : tensor<256x256xf32>
      %u = helm.linear %o, %wu {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %s = helm.swiglu %g, %u : tensor<1x4x256xf32>
      %wd = helm.weight @down_6 : tensor<256x256xf32>
      %d = helm.linear %s, %wd {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      helm.yield %d : tensor<1x4x256xf32>
    }
    %h7 = helm.unit block [8] : tensor<1x4x256xf32> {
      %wq = helm.weight @q_7 : tensor<256x256xf32>
      %q = helm.linear %h6, %wq {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wk = helm.weight @k_7 : tensor<256x256xf32>
      %k = helm.linear %h6, %wk {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wv = helm.weight @v_7 : tensor<256x256xf32>
      %v = helm.linear %h6, %wv {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %a = helm.attention %q, %k, %v {num_heads = 1 : i64, num_kv_heads = 1 : i64, head_dim = 256 : i64, scale = 0.0625 : f64} : (tensor<1x4x256xf32>, tensor<1x4x256xf32>, tensor<1x4x256xf32>) -> tensor<1x4x256xf32>
      %wo = helm.weight @o_7 : tensor<256x256xf32>
      %o = helm.linear %a, %wo {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wg = helm.weight @gate_7 : tensor<256x256xf32>
      %g = helm.linear %o, %wg {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %wu = helm.weight @up_7 : tensor<256x256xf32>
      %u = helm.linear %o, %wu {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      %s = helm.swiglu %g, %u : tensor<1x4x256xf32>
      %wd = helm.weight @down_7 : tensor<256x256xf32>
      %d = helm.linear %s, %wd {transpose_weight = true} : (tensor<1x4x256xf32>, tensor<256x256xf32>) -> tensor<1x4x256xf32>
      helm.yield %d : tensor<1x4x256xf32>
    }
    %logits = helm.unit head [9] : tensor<1x4x64xf32> {
      %wh = helm.weight @head : tensor<64x256xf32>
      %l = helm.lm_head %h7, %wh {transpose_weight = true, tied = false} : (tensor<1x4x256xf32>, tensor<64x256xf32>) -> tensor<1x4x64xf32>
      helm.yield %l : tensor<1x4x64xf32>
    }
    return %logits : tensor<1x4x64xf32>
  }
}
