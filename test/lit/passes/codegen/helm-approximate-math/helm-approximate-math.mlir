// RUN: helm-opt %s --split-input-file --helm-approximate-math | FileCheck %s

// The SwiGLU sigmoid's exp after helm-vectorize-glue: a vector exp becomes the polynomial (range
// reduction with floor and fma, the power of two built from the exponent bits), still on vectors.
// CHECK-LABEL: func.func @vector_exp
// CHECK-NOT: math.exp
// CHECK: math.floor %{{.*}} : vector<1x1x16xf32>
// CHECK: math.fma %{{.*}} : vector<1x1x16xf32>
// CHECK: arith.fptosi %{{.*}} : vector<1x1x16xf32> to vector<1x1x16xi32>
// CHECK: arith.bitcast %{{.*}} : vector<1x1x16xi32> to vector<1x1x16xf32>
// CHECK-NOT: math.exp
// CHECK: return
func.func @vector_exp(%x: vector<1x1x16xf32>) -> vector<1x1x16xf32> {
  %n = arith.negf %x : vector<1x1x16xf32>
  %e = math.exp %n : vector<1x1x16xf32>
  return %e : vector<1x1x16xf32>
}

// -----

// A scalar f32 exp (a glue op left as a scalar loop) is expanded too; f64 and f16 exps, and the
// glue's other math ops (rsqrt of the norms, cos and sin of the rope tables), keep their exact
// lowering.
// CHECK-LABEL: func.func @only_f32_exp
// CHECK: math.floor %{{.*}} : f32
// CHECK: math.exp %{{.*}} : f64
// CHECK: math.exp %{{.*}} : f16
// CHECK: math.rsqrt %{{.*}} : f32
// CHECK: math.cos %{{.*}} : f32
// CHECK: math.sin %{{.*}} : f32
func.func @only_f32_exp(%a: f32, %b: f64, %c: f16) -> (f32, f64, f16, f32, f32, f32) {
  %ea = math.exp %a : f32
  %eb = math.exp %b : f64
  %ec = math.exp %c : f16
  %r = math.rsqrt %a : f32
  %co = math.cos %a : f32
  %si = math.sin %a : f32
  return %ea, %eb, %ec, %r, %co, %si : f32, f64, f16, f32, f32, f32
}

// -----

// GeGLU's tanh after helm-vectorize-glue: a vector tanh becomes the rational approximation (the
// input clamped to ±7.9, a polynomial over a polynomial, one division), still on vectors; an f64
// tanh keeps its exact lowering.
// CHECK-LABEL: func.func @vector_tanh
// CHECK-NOT: math.tanh %{{.*}} : vector<1x1x16xf32>
// CHECK: math.fma %{{.*}} : vector<1x1x16xf32>
// CHECK: arith.divf %{{.*}} : vector<1x1x16xf32>
// CHECK: math.tanh %{{.*}} : f64
// CHECK: return
func.func @vector_tanh(%x: vector<1x1x16xf32>, %d: f64) -> (vector<1x1x16xf32>, f64) {
  %t = math.tanh %x : vector<1x1x16xf32>
  %u = math.tanh %d : f64
  return %t, %u : vector<1x1x16xf32>, f64
}
