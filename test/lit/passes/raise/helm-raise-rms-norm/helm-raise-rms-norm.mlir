// RUN: helm-opt %s --helm-raise-rms-norm --split-input-file | FileCheck %s

// Pow / ReduceMean(axes input) / Add / Sqrt / Reciprocal / Mul / Mul(gamma): the torch dynamo form.
helm.weight_decl @g : tensor<128xf32> {onnx_name = "g", location = "", offset = -1, length = 512}
// CHECK-LABEL: func.func @reciprocal
func.func @reciprocal(%x: tensor<?x?x128xf32>) -> tensor<*xf32> {
  %g = helm.weight @g : tensor<128xf32>
  %two = helm.constant dense<2.0> : tensor<f32>
  %axes = helm.constant dense<-1> : tensor<1xi64>
  %eps = helm.constant dense<1.0e-6> : tensor<f32>
  %sq = helm.onnx "Pow"(%x, %two) {attrs = {}, domain = "", node = "pow"} : (tensor<?x?x128xf32>, tensor<f32>) -> tensor<*xf32>
  %m = helm.onnx "ReduceMean"(%sq, %axes) {attrs = {keepdims = 1 : i64}, domain = "", node = "mean"} : (tensor<*xf32>, tensor<1xi64>) -> tensor<*xf32>
  %a = helm.onnx "Add"(%m, %eps) {attrs = {}, domain = "", node = "add"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %s = helm.onnx "Sqrt"(%a) {attrs = {}, domain = "", node = "sqrt"} : (tensor<*xf32>) -> tensor<*xf32>
  %r = helm.onnx "Reciprocal"(%s) {attrs = {}, domain = "", node = "rsqrt"} : (tensor<*xf32>) -> tensor<*xf32>
  %n = helm.onnx "Mul"(%x, %r) {attrs = {}, domain = "", node = "mul"} : (tensor<?x?x128xf32>, tensor<*xf32>) -> tensor<*xf32>
  %y = helm.onnx "Mul"(%g, %n) {attrs = {}, domain = "", node = "scale"} : (tensor<128xf32>, tensor<*xf32>) -> tensor<*xf32>
  // CHECK: %[[N:.*]] = helm.rms_norm %arg0, %{{.*}} {epsilon = 9.99999997{{[0-9]*}}E-7 : f64} : (tensor<?x?x128xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
  // CHECK: return %[[N]]
  return %y : tensor<*xf32>
}

// -----

// Mul(x, x) / ReduceMean(axes attribute, opset < 18) / Div(x, Sqrt), casts to f32 and back (fp16).
helm.weight_decl @g : tensor<128xf16> {onnx_name = "g", location = "", offset = -1, length = 256}
// CHECK-LABEL: func.func @div_fp16
func.func @div_fp16(%x: tensor<?x?x128xf16>) -> tensor<*xf16> {
  %g = helm.weight @g : tensor<128xf16>
  %eps = helm.constant dense<1.0e-5> : tensor<f32>
  %xf = helm.onnx "Cast"(%x) {attrs = {to = 1 : i64}, domain = "", node = "up"} : (tensor<?x?x128xf16>) -> tensor<*xf32>
  %sq = helm.onnx "Mul"(%xf, %xf) {attrs = {}, domain = "", node = "sq"} : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  %m = helm.onnx "ReduceMean"(%sq) {attrs = {axes = array<i64: -1>, keepdims = 1 : i64}, domain = "", node = "mean"} : (tensor<*xf32>) -> tensor<*xf32>
  %a = helm.onnx "Add"(%m, %eps) {attrs = {}, domain = "", node = "add"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %s = helm.onnx "Sqrt"(%a) {attrs = {}, domain = "", node = "sqrt"} : (tensor<*xf32>) -> tensor<*xf32>
  %n = helm.onnx "Div"(%xf, %s) {attrs = {}, domain = "", node = "div"} : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  %h = helm.onnx "Cast"(%n) {attrs = {to = 10 : i64}, domain = "", node = "down"} : (tensor<*xf32>) -> tensor<*xf16>
  %y = helm.onnx "Mul"(%h, %g) {attrs = {}, domain = "", node = "scale"} : (tensor<*xf16>, tensor<128xf16>) -> tensor<*xf16>
  // CHECK: helm.rms_norm %arg0, %{{.*}} {epsilon = 9.99999974{{[0-9]*}}E-6 : f64} : (tensor<?x?x128xf16>, tensor<128xf16>) -> tensor<?x?x128xf16>
  return %y : tensor<*xf16>
}

// -----

// A LayerNorm-like mean over another axis is left alone.
helm.weight_decl @g : tensor<128xf32> {onnx_name = "g", location = "", offset = -1, length = 512}
// CHECK-LABEL: func.func @other_axis
func.func @other_axis(%x: tensor<?x?x128xf32>) -> tensor<*xf32> {
  %g = helm.weight @g : tensor<128xf32>
  %two = helm.constant dense<2.0> : tensor<f32>
  %axes = helm.constant dense<1> : tensor<1xi64>
  %eps = helm.constant dense<1.0e-6> : tensor<f32>
  %sq = helm.onnx "Pow"(%x, %two) {attrs = {}, domain = "", node = "pow"} : (tensor<?x?x128xf32>, tensor<f32>) -> tensor<*xf32>
  %m = helm.onnx "ReduceMean"(%sq, %axes) {attrs = {keepdims = 1 : i64}, domain = "", node = "mean"} : (tensor<*xf32>, tensor<1xi64>) -> tensor<*xf32>
  %a = helm.onnx "Add"(%m, %eps) {attrs = {}, domain = "", node = "add"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %s = helm.onnx "Sqrt"(%a) {attrs = {}, domain = "", node = "sqrt"} : (tensor<*xf32>) -> tensor<*xf32>
  %r = helm.onnx "Reciprocal"(%s) {attrs = {}, domain = "", node = "rsqrt"} : (tensor<*xf32>) -> tensor<*xf32>
  %n = helm.onnx "Mul"(%x, %r) {attrs = {}, domain = "", node = "mul"} : (tensor<?x?x128xf32>, tensor<*xf32>) -> tensor<*xf32>
  %y = helm.onnx "Mul"(%g, %n) {attrs = {}, domain = "", node = "scale"} : (tensor<128xf32>, tensor<*xf32>) -> tensor<*xf32>
  // CHECK-NOT: helm.rms_norm
  return %y : tensor<*xf32>
}
