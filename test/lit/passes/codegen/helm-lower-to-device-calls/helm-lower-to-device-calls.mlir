// RUN: helm-opt %s --helm-lower-to-device-calls --cse | FileCheck %s
// RUN: helm-opt %s --helm-device-calls-bufferize | FileCheck %s --check-prefix=BUF

// A whole GPU stage (fp16, dtype code 1) in kernel form: every op is one helm_dev_* call on raw
// pointers of device buffers, in program order, and no linalg is generated. The split pieces and
// the head's last-position slice are column copies: rows B*S of 32 columns from offsets 0, 16 and
// 24; then B rows of S*16 columns from (S-1)*16. Rope passes its style (1: interleaved, 0: half)
// and rotary size; attention its stage KV layer, geometry, scale and window. The logits leave
// through one conversion to f32 (code 0) into the caller's buffer.
// CHECK: llvm.mlir.global external constant @helm_gpu_stage_abi(dense<[1, 0, 32, 0]> : tensor<4xi64>)
// CHECK-LABEL: func.func @helm_gpu_stage
// CHECK-SAME: attributes {helm.device_calls, helm.stage = "gpu"}
// CHECK-NOT: linalg.
// CHECK: %[[TABLE:.*]] = call @helm_rt_weight(%arg0, %c0_i64)
// CHECK: call @helm_dev_embed(%arg0, %{{.*}}, %{{.*}}, %{{.*}}, %c1_i32, %{{.*}}, %c32_i64, %c16_i64)
// CHECK: call @helm_dev_constant(%arg0, %{{.*}}, %c32_i64)
// CHECK: call @helm_dev_rms_norm(%arg0, %{{.*}}, %{{.*}}, %{{.*}}, %c1_i32, %{{.*}}, %c16_i64, %{{.*}})
// CHECK: call @helm_dev_linear(%arg0, %{{.*}}, %c1_i32, %{{.*}}, %c1_i32, %c0_i32, %[[BIAS:[^,]*]], %{{.*}}, %c1_i32, %{{.*}}, %c16_i64, %c32_i64)
// CHECK: call @helm_dev_copy_columns(%arg0, %[[QKV:[^,]*]], %{{.*}}, %c1_i32, %[[ROWS:[^,]*]], %c32_i64, %c0_i64, %c16_i64)
// CHECK: call @helm_dev_copy_columns(%arg0, %[[QKV]], %{{.*}}, %c1_i32, %[[ROWS]], %c32_i64, %c16_i64, %c8_i64)
// CHECK: call @helm_dev_copy_columns(%arg0, %[[QKV]], %{{.*}}, %c1_i32, %[[ROWS]], %c32_i64, %c24_i64, %c8_i64)
// CHECK: call @helm_dev_rope(%arg0, %{{.*}}, %[[POS:[^,]*]], %{{.*}}, %c1_i32, %{{.*}}, %c2_i64, %c8_i64, %c8_i64, %{{[^,]*}}, %{{[^,]*}}, %c1_i32)
// The k rope's frequency divisors: a device copy of the constant (2 floats), made once.
// CHECK: %[[FACTORS:.*]] = call @helm_dev_constant(%arg0, %{{.*}}, %c8_i64)
// CHECK: call @helm_dev_rope(%arg0, %{{.*}}, %[[POS]], %{{.*}}, %c1_i32, %{{.*}}, %c1_i64, %c8_i64, %c4_i64, %{{[^,]*}}, %[[FACTORS]], %c0_i32)
// CHECK: call @helm_dev_attention(%arg0, %c3_i64, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c1_i32, %{{.*}}, %{{.*}}, %c2_i64, %c1_i64, %c8_i64, %{{.*}}, %c64_i64)
// CHECK: call @helm_dev_linear(%arg0, %{{.*}}, %c1_i32, %{{.*}}, %c1_i32, %c0_i32, %[[NULL:[^,]*]], %{{.*}}, %c1_i32, %{{.*}}, %c16_i64, %c64_i64)
// CHECK: call @helm_dev_copy_columns(%arg0, %{{.*}}, %{{.*}}, %c1_i32, %{{.*}}, %c64_i64, %c0_i64, %c32_i64)
// CHECK: call @helm_dev_copy_columns(%arg0, %{{.*}}, %{{.*}}, %c1_i32, %{{.*}}, %c64_i64, %c32_i64, %c32_i64)
// CHECK: call @helm_dev_swiglu(%arg0, %{{.*}}, %{{.*}}, %{{.*}}, %c1_i32, %{{.*}})
// CHECK: call @helm_dev_linear(%arg0, %{{.*}}, %c1_i32, %{{.*}}, %c1_i32, %c1_i32, %[[NULL]], %{{.*}}, %c1_i32, %{{.*}}, %c32_i64, %c16_i64)
// CHECK: call @helm_dev_add(%arg0, %{{.*}}, %{{.*}}, %{{.*}}, %c1_i32, %{{.*}})
// CHECK: %[[LASTP:.*]] = arith.subi %{{.*}}, %c1 : index
// CHECK: %[[WIDTH:.*]] = arith.muli %{{.*}}, %c16_i64 : i64
// CHECK: %[[LASTP64:.*]] = arith.index_cast %[[LASTP]] : index to i64
// CHECK: %[[OFFSET:.*]] = arith.muli %[[LASTP64]], %c16_i64 : i64
// CHECK: call @helm_dev_copy_columns(%arg0, %{{.*}}, %{{.*}}, %c1_i32, %{{.*}}, %[[WIDTH]], %[[OFFSET]], %{{.*}})
// CHECK: call @helm_dev_linear(%arg0, %{{.*}}, %c1_i32, %{{.*}}, %c1_i32, %c1_i32, %[[NULL]], %{{.*}}, %c1_i32, %{{.*}}, %c16_i64, %c32_i64)
// CHECK: call @helm_dev_convert(%arg0, %{{.*}}, %c1_i32, %{{.*}}, %c0_i32, %{{.*}})
// CHECK-NEXT: return

// After bufferization the host code holds no copy, load or store of a device buffer, and every
// buffer is freed after its last kernel call.
// BUF-LABEL: func.func @helm_gpu_stage
// BUF-NOT: memref.copy
// BUF-NOT: memref.load
// BUF-NOT: memref.store
// BUF-NOT: linalg.
// BUF: memref.dealloc
// BUF: return
module {
  helm.weight_decl @embed : tensor<32x16xf16> {length = 1024 : i64, location = "", offset = -1 : i64, onnx_name = "embed"}
  helm.weight_decl @wqkv : tensor<16x32xf16> {length = 1024 : i64, location = "", offset = -1 : i64, onnx_name = "wqkv"}
  helm.weight_decl @bqkv : tensor<32xf16> {length = 64 : i64, location = "", offset = -1 : i64, onnx_name = "bqkv"}
  helm.weight_decl @wup : tensor<16x64xf16> {length = 2048 : i64, location = "", offset = -1 : i64, onnx_name = "wup"}
  func.func @helm_gpu_stage(%ctx: !llvm.ptr, %ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>) -> tensor<?x1x32xf16> attributes {helm.stage = "gpu"} {
    %t = helm.weight @embed : tensor<32x16xf16>
    %h = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x16xf16>) -> tensor<?x?x16xf16>
    %g = helm.constant dense<1.0> : tensor<16xf16>
    %n = helm.rms_norm %h, %g {epsilon = 1.0e-06 : f64} : (tensor<?x?x16xf16>, tensor<16xf16>) -> tensor<?x?x16xf16>
    %w = helm.weight @wqkv : tensor<16x32xf16>
    %bias = helm.weight @bqkv : tensor<32xf16>
    %qkv = helm.linear %n, %w bias %bias {transpose_weight = false} : (tensor<?x?x16xf16>, tensor<16x32xf16>, tensor<32xf16>) -> tensor<?x?x32xf16>
    %q, %k, %v = helm.split %qkv {sizes = array<i64: 16, 8, 8>} : tensor<?x?x32xf16> -> tensor<?x?x16xf16>, tensor<?x?x8xf16>, tensor<?x?x8xf16>
    %qr = helm.rope %q positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<interleaved>, theta = 1.0e+04 : f64} : (tensor<?x?x16xf16>, tensor<?x?xi64>) -> tensor<?x?x16xf16>
    %kr = helm.rope %k positions %pos {freq_factors = array<f32: 1.0, 8.0>, head_dim = 8 : i64, rotary_dim = 4 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x8xf16>, tensor<?x?xi64>) -> tensor<?x?x8xf16>
    %a = helm.attention %qr, %kr, %v {head_dim = 8 : i64, helm.kv_layer = 3 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 0.35355339059327373 : f64, sliding_window = 64 : i64} : (tensor<?x?x16xf16>, tensor<?x?x8xf16>, tensor<?x?x8xf16>) -> tensor<?x?x16xf16>
    %wu = helm.weight @wup : tensor<16x64xf16>
    %gu = helm.linear %a, %wu {transpose_weight = false} : (tensor<?x?x16xf16>, tensor<16x64xf16>) -> tensor<?x?x64xf16>
    %gate, %up = helm.split %gu {sizes = array<i64: 32, 32>} : tensor<?x?x64xf16> -> tensor<?x?x32xf16>, tensor<?x?x32xf16>
    %act = helm.swiglu %gate, %up : tensor<?x?x32xf16>
    %d = helm.linear %act, %w {transpose_weight = true} : (tensor<?x?x32xf16>, tensor<16x32xf16>) -> tensor<?x?x16xf16>
    %r = helm.add %h, %d : tensor<?x?x16xf16>
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %bsz = tensor.dim %r, %c0 : tensor<?x?x16xf16>
    %s = tensor.dim %r, %c1 : tensor<?x?x16xf16>
    %lastp = arith.subi %s, %c1 : index
    %last = tensor.extract_slice %r[0, %lastp, 0] [%bsz, 1, 16] [1, 1, 1] : tensor<?x?x16xf16> to tensor<?x1x16xf16>
    %l = helm.lm_head %last, %t {tied = true, transpose_weight = true} : (tensor<?x1x16xf16>, tensor<32x16xf16>) -> tensor<?x1x32xf16>
    return %l : tensor<?x1x32xf16>
  }
}
