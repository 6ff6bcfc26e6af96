// RUN: helm-opt %s --helm-quantize-weights=format=q4_0 | FileCheck %s
// RUN: not helm-opt %s --helm-quantize-weights=format=q9_9 2>&1 | FileCheck %s --check-prefix=BAD
// A format helmc only reads (iq4_nl: no quantizer) is refused, naming what it quantizes to.
// RUN: not helm-opt %s --helm-quantize-weights=format=iq4_nl 2>&1 | FileCheck %s --check-prefix=READONLY
// Rows of 64 are not whole k-quant super-blocks (256): as llama-quantize, q4_k falls back to q5_0,
// q5_k to q5_1 and q6_k to q8_0; rows of 16 fit no format.
// RUN: helm-opt %s --helm-quantize-weights=format=q4_k | FileCheck %s --check-prefix=Q4K
// RUN: helm-opt %s --helm-quantize-weights=format=q5_k | FileCheck %s --check-prefix=Q5K
// RUN: helm-opt %s --helm-quantize-weights=format=q6_k | FileCheck %s --check-prefix=Q8
// RUN: helm-opt %s --helm-quantize-weights=format=q5_1 | FileCheck %s --check-prefix=Q51
// Q4K: helm.weight_decl @kn : tensor<64x16xf32> {blocks = #helm.blocks<format = q5_0, row_dim = 1>
// Q4K: helm.weight_decl @nk : tensor<16x64xf32> {blocks = #helm.blocks<format = q5_0, row_dim = 0>
// Q4K: helm.weight_decl @table : tensor<32x64xf32> {blocks = #helm.blocks<format = q5_0, row_dim = 0>
// Q4K: helm.weight_decl @short : tensor<16x16xf32> {length
// Q5K: helm.weight_decl @kn : tensor<64x16xf32> {blocks = #helm.blocks<format = q5_1, row_dim = 1>
// Q5K: helm.weight_decl @table : tensor<32x64xf32> {blocks = #helm.blocks<format = q5_1, row_dim = 0>
// Q51: helm.weight_decl @nk : tensor<16x64xf32> {blocks = #helm.blocks<format = q5_1, row_dim = 0>
// Q8: helm.weight_decl @kn : tensor<64x16xf32> {blocks = #helm.blocks<format = q8_0, row_dim = 1>
// Q8: helm.weight_decl @table : tensor<32x64xf32> {blocks = #helm.blocks<format = q8_0, row_dim = 0>
// Q8: helm.weight_decl @short : tensor<16x16xf32> {length

// Linear weights in both orientations, a tied embedding / LM-head table, a norm weight, a bias,
// a weight whose rows are too short for the block, and one weight read two ways.
// CHECK-LABEL: module
// A [K, N] MatMul weight: rows are its columns (the output features).
// CHECK: helm.weight_decl @kn : tensor<64x16xf32> {blocks = #helm.blocks<format = q4_0, row_dim = 1>
// An [N, K] weight read transposed: rows along dimension 0.
// CHECK: helm.weight_decl @nk : tensor<16x64xf32> {blocks = #helm.blocks<format = q4_0, row_dim = 0>
// The table feeds the embedding and the transposed LM head: both read its rows.
// CHECK: helm.weight_decl @table : tensor<32x64xf32> {blocks = #helm.blocks<format = q4_0, row_dim = 0>
// A norm weight, a bias and rows of 16 (less than a block of 32) stay as they are.
// CHECK: helm.weight_decl @gamma : tensor<64xf32> {length
// CHECK: helm.weight_decl @bias : tensor<16xf32> {length
// CHECK: helm.weight_decl @short : tensor<16x16xf32> {length
// Read as [K, N] by one linear and as [N, K] by another: no single row dimension.
// CHECK: helm.weight_decl @both : tensor<64x64xf32> {length
// BAD: error: unknown quantization format 'q9_9' (known: q8_0, q4_0, q4_1, q4_k, q5_k, q6_k, q5_0, q5_1, q2_k, q3_k, q3_k_m, q4_k_m, q5_k_m)
// READONLY: error: block format 'iq4_nl' is read from GGUF files only; helmc quantizes to q8_0, q4_0, q4_1, q4_k, q5_k, q6_k, q5_0, q5_1, q2_k, q3_k, q3_k_m, q4_k_m, q5_k_m
module {
  helm.weight_decl @kn : tensor<64x16xf32> {length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "kn"}
  helm.weight_decl @nk : tensor<16x64xf32> {length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "nk"}
  helm.weight_decl @table : tensor<32x64xf32> {length = 8192 : i64, location = "", offset = -1 : i64, onnx_name = "table"}
  helm.weight_decl @gamma : tensor<64xf32> {length = 256 : i64, location = "", offset = -1 : i64, onnx_name = "gamma"}
  helm.weight_decl @bias : tensor<16xf32> {length = 64 : i64, location = "", offset = -1 : i64, onnx_name = "bias"}
  helm.weight_decl @short : tensor<16x16xf32> {length = 1024 : i64, location = "", offset = -1 : i64, onnx_name = "short"}
  helm.weight_decl @both : tensor<64x64xf32> {length = 16384 : i64, location = "", offset = -1 : i64, onnx_name = "both"}
  func.func @main(%ids: tensor<1x4xi64>, %x: tensor<1x4x64xf32>) -> (tensor<1x4x64xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x32xf32>, tensor<1x4x64xf32>, tensor<1x4x64xf32>) {
    %table = helm.weight @table : tensor<32x64xf32>
    %e = helm.embed %ids, %table : (tensor<1x4xi64>, tensor<32x64xf32>) -> tensor<1x4x64xf32>
    %gamma = helm.weight @gamma : tensor<64xf32>
    %n = helm.rms_norm %x, %gamma {epsilon = 1.0e-06 : f64} : (tensor<1x4x64xf32>, tensor<64xf32>) -> tensor<1x4x64xf32>
    %kn = helm.weight @kn : tensor<64x16xf32>
    %bias = helm.weight @bias : tensor<16xf32>
    %a = helm.linear %n, %kn bias %bias {transpose_weight = false} : (tensor<1x4x64xf32>, tensor<64x16xf32>, tensor<16xf32>) -> tensor<1x4x16xf32>
    %nk = helm.weight @nk : tensor<16x64xf32>
    %b = helm.linear %n, %nk {transpose_weight = true} : (tensor<1x4x64xf32>, tensor<16x64xf32>) -> tensor<1x4x16xf32>
    %short = helm.weight @short : tensor<16x16xf32>
    %c = helm.linear %a, %short {transpose_weight = false} : (tensor<1x4x16xf32>, tensor<16x16xf32>) -> tensor<1x4x16xf32>
    %h = helm.lm_head %n, %table {transpose_weight = true, tied = true} : (tensor<1x4x64xf32>, tensor<32x64xf32>) -> tensor<1x4x32xf32>
    %both = helm.weight @both : tensor<64x64xf32>
    %d = helm.linear %n, %both {transpose_weight = false} : (tensor<1x4x64xf32>, tensor<64x64xf32>) -> tensor<1x4x64xf32>
    %f = helm.linear %n, %both {transpose_weight = true} : (tensor<1x4x64xf32>, tensor<64x64xf32>) -> tensor<1x4x64xf32>
    return %e, %a, %b, %c, %h, %d, %f : tensor<1x4x64xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x32xf32>, tensor<1x4x64xf32>, tensor<1x4x64xf32>
  }
}
